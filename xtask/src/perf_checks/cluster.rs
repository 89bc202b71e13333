//! rrddmma-perf's cluster-mode device checks (three ranks).

use super::testbed::testbed_ok;
use super::verdict::jsons_in;
use crate::device::Check;
use crate::pairs::binary;
use crate::Result;

/// What one `rrddmma-perf cluster` run on three ranks must report.
#[derive(Clone, Debug)]
struct ClusterWant {
    pattern: &'static str,
    op: &'static str,
    qps: u64,
    /// None: `--threads per-qp`.
    threads: Option<u64>,
    sizes: Vec<u64>,
    iters: u64,
    reps: u64,
    /// The bandwidth flows (source, destination).
    bw: Vec<(u64, u64)>,
    /// loaded-latency's probe flow: latency only, no bandwidth.
    probe: Option<(u64, u64)>,
    /// `-t`: requests in flight per QP (None: rrddmma-perf's 16).
    depth: Option<u64>,
    /// Rank 2's link is slowed by [`SLOW_MS`] of netem delay during the run.
    slow: bool,
}

/// The netem delay, in ms, on the bridge port toward rank 2's device
/// (`q3`: requests to rank 2 and the acknowledgements of its requests) in
/// the runs that need flows that physically differ. At one request in
/// flight it caps every flow to or from rank 2 at 100 requests per second,
/// where the others run CPU-bound at several hundred under TCG; it stays
/// well under the QPs' local ACK timeout (about 67 ms). (At 20 ms the
/// slowed flows ran at 28 per second against 700-2,300 for the others,
/// with ACK-timeout retransmissions on every rank.)
const SLOW_MS: u64 = 10;

/// Latency samples per flow and repetition in these runs: p50 and the mean
/// are backed, p99 (100) and p99.9 (1,000) are not and must be `null`.
const LAT_SAMPLES: u64 = 30;

impl ClusterWant {
    fn new(pattern: &'static str, op: &'static str, qps: u64, threads: u64, sizes: &[u64], iters: u64) -> Self {
        let all = (0..3u64).flat_map(|s| (0..3).map(move |d| (s, d))).filter(|(s, d)| s != d);
        let (bw, probe): (Vec<(u64, u64)>, _) = match pattern {
            "incast" => (vec![(1, 0), (2, 0)], None),
            "outcast" => (vec![(0, 1), (0, 2)], None),
            "ring" => (vec![(0, 1), (1, 2), (2, 0)], None),
            "loaded-latency" => (all.filter(|f| f.0 != 0).collect(), Some((0, 1))),
            _ => (all.collect(), None),
        };
        let threads = (threads > 0).then_some(threads);
        ClusterWant {
            pattern,
            op,
            qps,
            threads,
            sizes: sizes.to_vec(),
            iters,
            reps: 1,
            bw,
            probe,
            depth: None,
            slow: false,
        }
    }

    /// The run each launcher repeats (namespace hosts, mpirun, srun):
    /// all-to-all writes of 1 KiB, one QP per pair, one thread per rank
    /// (so each rank's one thread drives both its flows), one request in
    /// flight per QP, rank 2's link slowed by netem.
    fn same_everywhere() -> Self {
        ClusterWant { depth: Some(1), slow: true, ..ClusterWant::new("all-to-all", "write", 1, 1, &[1024], 100) }
    }

    fn reps(self, reps: u64) -> Self {
        ClusterWant { reps, ..self }
    }

    /// Whether no rank's thread posts to two destinations: with one thread
    /// per QP, or when no rank's threads are fewer than its destinations
    /// (QPs are dealt QP-index major, so each thread then keeps to one
    /// destination). Otherwise the report says flows share a posting thread
    /// (their figures are still their own).
    fn threads_apart(&self) -> bool {
        let Some(t) = self.threads else { return true };
        (0..3u64).all(|r| {
            let dsts = self.bw.iter().filter(|f| f.0 == r).count() as u64;
            let units = dsts * self.qps;
            dsts <= 1 || (t >= dsts && (t % dsts == 0 || t >= units))
        })
    }

    /// The command-line flags of this run, writing JSON, CSV and SVG to `dir`.
    fn flags(&self, dir: &str) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(u64::to_string).collect();
        format!(
            "cluster --pattern {} --op {} -q {} --threads {} -s {} -n {} --reps {}{} --lat-samples {LAT_SAMPLES} \
             --json {dir}/r.json --csv {dir}/r.csv --svg {dir}/r.svg",
            self.pattern,
            self.op,
            self.qps,
            self.threads.map_or("per-qp".to_string(), |t| t.to_string()),
            sizes.join(","),
            self.iters,
            self.reps,
            self.depth.map_or(String::new(), |d| format!(" -t {d}"))
        )
    }
}

/// A summary over repetitions (`n`, `mean`, `sd`, `ci95`, `min`, `max`) of
/// `reps` values, all positive, min <= mean <= max, and with two or more
/// repetitions an sd and a 95% interval around the mean.
fn summary_ok(s: &serde_json::Value, reps: u64) -> bool {
    let f = |k: &str| s[k].as_f64().unwrap_or(-1.0);
    let spread = if reps > 1 {
        let (lo, hi) = (s["ci95"][0].as_f64().unwrap_or(f64::NAN), s["ci95"][1].as_f64().unwrap_or(f64::NAN));
        f("sd") >= 0.0 && lo <= f("mean") && f("mean") <= hi
    } else {
        s["sd"].is_null() && s["ci95"].is_null()
    };
    s["n"].as_u64() == Some(reps)
        && f("min") > 0.0
        && f("min") <= f("mean") + 1e-9
        && f("mean") <= f("max") + 1e-9
        && spread
}

/// The counters rank 0's device exports, as the check's command listed them
/// (`exported port1/GROUP/NAME` lines).
fn exported_counters(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out.lines().filter_map(|l| l.strip_prefix("exported ")).map(str::to_string).collect();
    v.sort();
    v.dedup();
    v
}

/// The text between `=== begin PATH` and `=== end PATH` in `out`.
fn section<'a>(out: &'a str, path: &str) -> &'a str {
    let begin = format!("=== begin {path}\n");
    let Some(i) = out.find(&begin) else { return "" };
    let rest = &out[i + begin.len()..];
    rest.find(&format!("=== end {path}\n")).map_or("", |j| &rest[..j])
}

/// The figures of a real run against its JSON `j`: the heatmap has its
/// axes' titles, its colour legend and every flow's mean MiB/s as a cell
/// label; the bar chart its axis (a line and three ticks per size), its
/// legend and every rank's out and in MiB/s as bar labels.
fn figures_ok(heat: &str, bars: &str, j: &serde_json::Value) -> bool {
    // rrddmma-perf's value labels: one decimal, two significant digits below 0.1.
    let label = |v: &serde_json::Value| {
        let v = v.as_f64().unwrap_or(-1.0);
        let digits = if v >= 0.1 || v <= 0.0 { 1 } else { (1.0 - v.log10().floor()) as usize };
        format!(">{v:.digits$}</text>")
    };
    let results = j["results"].as_array().cloned().unwrap_or_default();
    heat.matches("<svg").count() == 1
        && heat.contains("<g class=\"legend\">")
        && heat.contains(">MiB/s</text>")
        && heat.matches("destination rank</text>").count() == results.len()
        && heat.matches("source rank</text>").count() == results.len()
        && bars.matches("<svg").count() == 1
        && bars.contains("<g class=\"legend\">")
        && bars.matches("<line").count() >= 5 * results.len()
        && results.iter().all(|r| {
            let flows = r["flows"].as_array().cloned().unwrap_or_default();
            let totals = r["rank_totals"].as_array().cloned().unwrap_or_default();
            flows.iter().filter(|f| f["bw_mib_s"].is_object()).all(|f| heat.contains(&label(&f["bw_mib_s"]["mean"])))
                && totals
                    .iter()
                    .all(|t| bars.contains(&label(&t["out_mib_s"])) && bars.contains(&label(&t["in_mib_s"])))
        })
}

/// Per-flow truth where flows physically differ (rank 2's link delayed):
/// from ranks 0 and 1, the flow to rank 2 moves under 60% of the flow to
/// the other rank (so neither is the source's average), and Jain's index
/// over the six flows is below 0.95.
fn slow_flows_ok(j: &serde_json::Value) -> bool {
    let r = &j["results"][0];
    let bw = |s: u64, d: u64| {
        r["flows"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["src"] == s && f["dst"] == d)
            .and_then(|f| f["bw_mib_s"]["mean"].as_f64())
            .unwrap_or(f64::NAN)
    };
    let jain = r["jain_fairness"]["mean"].as_f64().unwrap_or(1.0);
    bw(0, 2) < 0.6 * bw(0, 1) && bw(1, 2) < 0.6 * bw(1, 0) && jain < 0.95
}

/// The cluster-mode JSON of three ranks matches `w`: its settings, one result
/// per size in order, each with exactly the expected flows (every bandwidth
/// flow with `iters` × `qps` requests in each repetition, positive windows,
/// bandwidth, message rate and latency, the probe flow with latency alone),
/// p50 and the mean present, p99 and p99.9 `null` (30 samples back neither),
/// summaries over the repetitions per flow and for the aggregate, per-rank
/// totals that add up, and a fairness index in (0, 1].
fn cluster_json_ok(j: &serde_json::Value, w: &ClusterWant, mpi: bool, exported: &[String]) -> bool {
    let pos = |v: &serde_json::Value| v.as_f64().is_some_and(|x| x > 0.0);
    let lat_ok = |l: &serde_json::Value| {
        l["samples"].as_u64() == Some(LAT_SAMPLES)
            && pos(&l["p50"])
            && pos(&l["avg"])
            && l["p99"].is_null()
            && l["p999"].is_null()
    };
    let near = |a: f64, b: f64| (a - b).abs() <= 0.01 + 1e-3 * b.abs();
    let sizes: Vec<u64> = j["sizes"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(|v| v.as_u64()).collect());
    let results = j["results"].as_array().cloned().unwrap_or_default();
    let mut want_pairs: Vec<(u64, u64)> = w.bw.iter().copied().chain(w.probe).collect();
    want_pairs.sort();
    let pairs = |flows: &[serde_json::Value]| {
        let mut got: Vec<(u64, u64)> =
            flows.iter().filter_map(|f| Some((f["src"].as_u64()?, f["dst"].as_u64()?))).collect();
        got.sort();
        got
    };
    let rep_ok = |r: &serde_json::Value| {
        let flows = r["flows"].as_array().cloned().unwrap_or_default();
        pairs(&flows) == want_pairs
            && flows.iter().all(|f| {
                let pair = (f["src"].as_u64().unwrap_or(9), f["dst"].as_u64().unwrap_or(9));
                let start = f["window_start_s"].as_f64().unwrap_or(-1.0);
                let end = f["window_end_s"].as_f64().unwrap_or(-1.0);
                if Some(pair) == w.probe {
                    f["requests"].as_u64() == Some(0) && lat_ok(&f["lat_us"])
                } else {
                    f["requests"].as_u64() == Some(w.iters * w.qps)
                        && pos(&f["bw_mib_s"])
                        && pos(&f["msg_rate_mpps"])
                        && pos(&f["seconds"])
                        && start > 0.0
                        && end > start
                        && (w.probe.is_some() || lat_ok(&f["lat_us"]))
                }
            })
            && near(
                r["aggregate_mib_s"].as_f64().unwrap_or(-1.0),
                flows.iter().map(|f| f["bw_mib_s"].as_f64().unwrap_or(0.0)).sum(),
            )
    };
    let result_ok = |r: &serde_json::Value, size: u64| {
        let flows = r["flows"].as_array().cloned().unwrap_or_default();
        let reps = r["reps"].as_array().cloned().unwrap_or_default();
        let cells_ok = flows.iter().all(|f| {
            let pair = (f["src"].as_u64().unwrap_or(9), f["dst"].as_u64().unwrap_or(9));
            if Some(pair) == w.probe {
                f["bw_mib_s"].is_null() && summary_ok(&f["lat_us"]["p50"], w.reps)
            } else {
                summary_ok(&f["bw_mib_s"], w.reps)
                    && summary_ok(&f["window_s"], w.reps)
                    && f["lat_us"]["p999"].is_null()
                    && (w.probe.is_some() || summary_ok(&f["lat_us"]["p50"], w.reps))
            }
        });
        let mean_bw = |f: &serde_json::Value| f["bw_mib_s"]["mean"].as_f64().unwrap_or(0.0);
        let totals = r["rank_totals"].as_array().cloned().unwrap_or_default();
        let totals_ok = totals.len() == 3
            && totals.iter().enumerate().all(|(rank, t)| {
                let sum = |k: &str| flows.iter().filter(|f| f[k].as_u64() == Some(rank as u64)).map(mean_bw).sum();
                t["rank"].as_u64() == Some(rank as u64)
                    && near(t["out_mib_s"].as_f64().unwrap_or(-1.0), sum("src"))
                    && near(t["in_mib_s"].as_f64().unwrap_or(-1.0), sum("dst"))
            });
        let jain = r["jain_fairness"]["mean"].as_f64().unwrap_or(0.0);
        r["size"].as_u64() == Some(size)
            && pairs(&flows) == want_pairs
            && cells_ok
            && totals_ok
            && reps.len() as u64 == w.reps
            && reps.iter().enumerate().all(|(i, r)| r["rep"].as_u64() == Some(i as u64) && rep_ok(r))
            && summary_ok(&r["aggregate_mib_s"], w.reps)
            && jain > 0.0
            && jain <= 1.0 + 1e-9
    };
    j["mode"] == "cluster"
        && j["pattern"] == w.pattern
        && j["op"] == w.op
        && j["ranks"].as_u64() == Some(3)
        && j["qps_per_pair"].as_u64() == Some(w.qps)
        && j["threads_per_rank"].as_u64() == w.threads
        && j["iterations_per_qp"].as_u64() == Some(w.iters)
        && j["repetitions"].as_u64() == Some(w.reps)
        && j["warmup_requests_per_qp"].as_u64() == Some(16)
        && j["per_flow"].as_bool() == Some(true)
        && j["shared_posting_thread"].as_array().is_some_and(|a| a.is_empty() == w.threads_apart())
        && j["percentile_min_samples"]["p999"].as_u64() == Some(1000)
        && testbed_ok(j, mpi, exported)
        && (!w.slow || slow_flows_ok(j))
        && sizes == w.sizes
        && results.len() == w.sizes.len()
        && results.iter().zip(&w.sizes).all(|(r, &s)| result_ok(r, s))
}

/// `rrddmma-perf cluster` on three ranks: all-to-all and incast on the three
/// namespace hosts (`tests/cluster/hosts.sh`, set up here unless an earlier
/// check did) and under `mpirun -np 3`; then, with fewer iterations, outcast
/// (read) and ring (send) on the namespace hosts and loaded-latency (atomic)
/// under mpirun. The namespace incast runs three repetitions; the mpirun
/// incast one thread per QP. [`ClusterWant::same_everywhere`] (one thread
/// per rank driving both its flows, rank 2's link delayed) runs on the
/// namespace hosts, under mpirun and (in [`srun_check`]) under srun, with
/// the same checks: the flows to the slowed rank are slower than their
/// source's other flow, and the report says the flows share a posting
/// thread. Several QPs per pair, several threads per rank and several sizes
/// run in some of them; those and the all-to-alls stay at one packet per
/// message (1024 B, the rxe veths' MTU): with 4096-byte writes rxe failed
/// some runs with REM_INV_REQ_ERR (docs/perf.md).
pub fn cluster_checks() -> Result<Vec<Check>> {
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let devices = "rxe_h1,rxe_h2,rxe_h3";
    let hosts_up = "{ ip netns list | grep -q '^h1' || bash tests/cluster/hosts.sh 3 >/dev/null; }";
    let launch = |mpi: bool, port: u16, flags: &str| {
        if mpi {
            format!(
                "mkdir -p /dev/shm/ompi && TMPDIR=/dev/shm/ompi timeout 180 mpirun --allow-run-as-root \
                 --oversubscribe -np 3 -x RRDDMMA_COORDINATOR=127.0.0.1:{port} -x RRDDMMA_DEVICES={devices} {me} {flags}"
            )
        } else {
            let hosts = format!("10.79.0.1:{port},10.79.0.2:{port},10.79.0.3:{port}");
            format!(
                "pids= && for i in 3 2 1; do ip netns exec h$i env RRDDMMA_HOSTS={hosts} RRDDMMA_DEVICES={devices} \
                 RRDDMMA_JOIN_TIMEOUT_MS=60000 timeout 120 {me} {flags} & pids=\"$pids $!\"; done; rc=0; \
                 for p in $pids; do wait $p || rc=1; done; [ $rc = 0 ]"
            )
        }
    };
    let runs: [(bool, Vec<ClusterWant>); 7] = [
        (false, vec![ClusterWant::new("all-to-all", "write", 2, 2, &[256, 1024], 200)]),
        (false, vec![ClusterWant::same_everywhere()]),
        (true, vec![ClusterWant::same_everywhere()]),
        (false, vec![ClusterWant::new("incast", "write", 1, 1, &[4096], 100).reps(3)]),
        (true, vec![ClusterWant::new("incast", "write", 1, 0, &[4096], 200)]),
        (
            false,
            vec![
                ClusterWant::new("outcast", "read", 2, 2, &[64, 1024], 50),
                ClusterWant::new("ring", "send", 2, 1, &[64, 1024], 50),
            ],
        ),
        (true, vec![ClusterWant::new("loaded-latency", "atomic", 1, 2, &[8], 50)]),
    ];
    let mut port = 18690u16;
    let mut v: Vec<Check> = runs
        .into_iter()
        .enumerate()
        .map(|(k, (mpi, wants))| {
            let place = if mpi { "mpirun -np 3" } else { "three namespace hosts" };
            run_check(&k.to_string(), place, hosts_up, wants, mpi, &mut port, &|port, flags| launch(mpi, port, flags))
        })
        .collect();
    v.extend(super::cluster_load::load_checks(&me, &|port, flags| launch(false, port, flags))?);
    v.extend(super::cluster_dc::checks(&me, hosts_up, &|port, flags| launch(false, port, flags))?);
    Ok(v)
}

/// One check: the runs `wants` one after another, each started by
/// `launch(port, flags)` (a port of its own) after `setup`, their outputs
/// under `/tmp/rrddmma-perf-cluster-{tag}-*`. `mpi`: the ranks run in the
/// devices' network namespace (mpirun, srun), so their counters are in sysfs.
fn run_check(
    tag: &str,
    place: &str,
    setup: &str,
    wants: Vec<ClusterWant>,
    mpi: bool,
    port: &mut u16,
    launch: &dyn Fn(u16, &str) -> String,
) -> Check {
    // The counters rank 0's device exports, for the deltas' check.
    let mut cmd = format!(
        "{setup} || exit 1; rc=0; for f in /sys/class/infiniband/rxe_h1/ports/1/counters/* \
         /sys/class/infiniband/rxe_h1/ports/1/hw_counters/*; do [ -f \"$f\" ] && [ \"${{f##*/}}\" != lifespan ] && \
         echo \"exported port1/$(basename \"$(dirname \"$f\")\")/${{f##*/}}\"; done"
    );
    for (i, w) in wants.iter().enumerate() {
        let dir = format!("/tmp/rrddmma-perf-cluster-{tag}-{i}");
        *port += 1;
        // A slowed run delays rank 2's link and always lifts the delay after.
        let (slow, fast) = if w.slow {
            (
                format!("modprobe sch_netem; tc qdisc replace dev q3 root netem delay {SLOW_MS}ms || rc=1; "),
                "; tc qdisc del dev q3 root",
            )
        } else {
            (String::new(), "")
        };
        cmd += &format!(
            "; rm -rf {dir} && mkdir -p {dir} && {slow}{{ {launch} || rc=1; }}{fast}; cat {dir}/r.json; \
             for f in {dir}/r.svg {dir}/r-bars.svg; do echo \"=== begin $f\"; cat $f; echo \"=== end $f\"; done; \
             head -3 {dir}/r.csv",
            launch = launch(*port, &w.flags(&dir))
        );
    }
    cmd += "; exit $rc";
    let what: Vec<String> = wants
        .iter()
        .map(|w| {
            format!(
                "{} {}, {} QP(s)/pair, {}, sizes {:?}{}{}",
                w.pattern,
                w.op,
                w.qps,
                w.threads.map_or("one thread per QP".to_string(), |t| format!("{t} thread(s)/rank")),
                w.sizes,
                if w.reps > 1 { format!(", {} repetitions", w.reps) } else { String::new() },
                if w.slow {
                    format!(
                        ", depth {}, rank 2's link delayed {SLOW_MS} ms: flows to it under 60% of the source's other, \
                         Jain < 0.95",
                        w.depth.unwrap_or(16)
                    )
                } else {
                    String::new()
                }
            )
        })
        .collect();
    let name = format!(
        "perf cluster, 3 ranks, {}: {}: every pair present and non-zero, JSON schema, testbed and summaries, \
         counters, SVG legends, axes and value labels",
        place,
        what.join("; ")
    );
    let tag = tag.to_string();
    Check::verdict(&name, cmd, move |d| {
        let js = jsons_in(&d.output);
        let runs = wants.len();
        let shared = wants.iter().filter(|w| !w.threads_apart()).count();
        let exported = exported_counters(&d.output);
        d.code == Some(0)
            && js.len() == runs
            && js.iter().zip(&wants).all(|(j, w)| cluster_json_ok(j, w, mpi, &exported))
            && js.iter().enumerate().all(|(i, j)| {
                let dir = format!("/tmp/rrddmma-perf-cluster-{tag}-{i}");
                figures_ok(
                    section(&d.output, &format!("{dir}/r.svg")),
                    section(&d.output, &format!("{dir}/r-bars.svg")),
                    j,
                )
            })
            && d.output.matches("heap allocations inside measured loops: 0").count() == 3 * runs
            && (0..3).all(|r| d.output.matches(&format!("rank {r}/3: ")).count() == runs)
            && (if mpi {
                // Every rank sent packets, so its counters moved and the table lists them.
                d.output.matches(" port counters that moved during the run").count() == runs
                    && (0..3).all(|r| {
                        d.output.matches(&format!("   rank {r} port1/hw_counters/sent_pkts +")).count() == runs
                    })
            } else {
                d.output.matches(" port counters: rank(s) [0, 1, 2] see none in sysfs").count() == runs
            })
            && d.output.matches(" flows share a posting thread: rank(s)").count() == shared
            && d.output.matches("Jain's fairness index").count() == wants.iter().map(|w| w.sizes.len()).sum::<usize>()
            && !d.output.contains("per-source")
            && d.output.matches("each window opens after 16 warm-up request(s) per QP").count() == runs
            && d.output.matches("pattern,op,size,qps_per_pair,threads_per_rank,rep,src,dst").count() == runs
    })
}

/// `rrddmma-perf cluster` on three ranks under `srun` (the command prefix
/// `srun`, after `setup`): [`ClusterWant::same_everywhere`], as on the
/// namespace hosts and under mpirun, one rxe device per rank.
pub fn srun_check(setup: &str, srun: &str) -> Result<Check> {
    let me = format!("'{}'", binary()?.display());
    let want = ClusterWant::same_everywhere();
    let launch = |port: u16, flags: &str| {
        format!("RRDDMMA_COORDINATOR=127.0.0.1:{port} RRDDMMA_DEVICES=rxe_h1,rxe_h2,rxe_h3 {srun} {me} {flags}")
    };
    Ok(run_check("srun", "srun -n 3 (Slurm)", setup, vec![want], true, &mut 18720, &launch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf_checks::testbed::TESTBED_KEYS;

    use serde_json::{json, Value};

    fn summ(vals: &[f64]) -> Value {
        let n = vals.len() as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let max = vals.iter().copied().fold(0.0, f64::max);
        if vals.len() > 1 {
            json!({"n": vals.len(), "mean": mean, "sd": 0.5, "ci95": [mean - 1.0, mean + 1.0], "min": min, "max": max})
        } else {
            json!({"n": 1, "mean": mean, "sd": null, "ci95": null, "min": min, "max": max})
        }
    }

    fn lat() -> Value {
        json!({"samples": 30, "p50": 1.0, "p99": null, "p999": null, "avg": 1.5})
    }

    /// rrddmma-perf's JSON for an outcast run, 2 QPs per pair, 10 requests
    /// per QP, two repetitions; flow 0 -> 2 is `second`'s (per repetition)
    /// and its summary `cell`.
    fn outcast(second: Value, cell: Value) -> String {
        let first = json!({"src": 0, "dst": 1, "requests": 20, "window_start_s": 0.1, "window_end_s": 1.1,
            "seconds": 1.0, "bw_mib_s": 2.0, "msg_rate_mpps": 1.0, "lat_us": lat()});
        let rep = |i: u64| {
            json!({"rep": i, "flows": [first.clone(), second.clone()],
            "aggregate_mib_s": 2.0 + second["bw_mib_s"].as_f64().unwrap_or(0.0), "jain_fairness": 0.96})
        };
        let lat_sum = json!({"p50": summ(&[1.0, 1.0]), "p99": null, "p999": null, "avg": summ(&[1.5, 1.5])});
        let doc = json!({
            "tool": "rrddmma-perf", "mode": "cluster", "pattern": "outcast", "op": "read", "ranks": 3,
            "qps_per_pair": 2, "threads_per_rank": 2, "iterations_per_qp": 10, "repetitions": 2,
            "warmup_requests_per_qp": 16, "per_flow": true, "shared_posting_thread": [],
            "percentile_min_samples": {"p50": 2, "p99": 100, "p999": 1000}, "sizes": [64],
            "results": [{"size": 64,
                "flows": [
                    {"src": 0, "dst": 1, "bw_mib_s": summ(&[2.0, 2.0]), "window_s": summ(&[1.0, 1.0]),
                     "lat_samples_per_rep": 30, "lat_us": lat_sum},
                    cell],
                "rank_totals": [{"rank": 0, "out_mib_s": 5.0, "in_mib_s": 0}, {"rank": 1, "out_mib_s": 0,
                    "in_mib_s": 2.0}, {"rank": 2, "out_mib_s": 0, "in_mib_s": 3.0}],
                "aggregate_mib_s": summ(&[5.0, 5.0]), "jain_fairness": summ(&[0.96, 0.96]),
                "reps": [rep(0), rep(1)]}],
            "testbed": {"date_utc": "2026-11-25T03:00:00Z", "command_line": ["rrddmma-perf", "cluster"],
                "transport": "RC", "rrddmma_perf_version": "0.1.0", "ranks": (0..3).map(rank_testbed).collect::<Vec<_>>()},
            "counters": (0..3).map(|r| json!({"rank": r, "deltas": {"port1/hw_counters/duplicate_request": 12,
                "port1/hw_counters/sent_pkts": 900, "port1/hw_counters/rcvd_pkts": 800}}))
                .collect::<Vec<_>>()
        });
        // rrddmma-perf writes "tool" first, which is how reports are found.
        let text =
            serde_json::to_string_pretty(&doc).unwrap_or_default().replace("  \"tool\": \"rrddmma-perf\",\n", "");
        format!("noise\n{{\n  \"tool\": \"rrddmma-perf\",{}\nmore noise\n", &text[1..])
    }

    /// Rank `r`'s testbed facts as rrddmma-perf reports them on rxe.
    fn rank_testbed(r: u64) -> Value {
        json!({"rank": r, "host": "vm", "device": format!("rxe_h{}", r + 1), "firmware": "unknown",
            "link_layer": "Ethernet", "rate": "10 Gb/sec (1X QDR)", "active_mtu": "MTU_1024", "gid_index": "1",
            "gid_type": "ROCE_V2", "kernel": "6.1.0", "cpu": "QEMU Virtual CPU", "clock_source": "tsc",
            "rdma_core": "libibverbs.so.1.14.44.0 loaded (linkage pkg-config, built against 44.0)",
            "rrddmma_version": "0.1.0", "git_revision": "c708578a0f2a7f4d9d5d0d1c0e3b2a1f0e9d8c7b"})
    }

    /// The exported counters the fake run's deltas hold.
    fn exported() -> Vec<String> {
        ["port1/hw_counters/duplicate_request", "port1/hw_counters/sent_pkts", "port1/hw_counters/rcvd_pkts"]
            .map(String::from)
            .to_vec()
    }

    fn second() -> Value {
        json!({"src": 0, "dst": 2, "requests": 20, "window_start_s": 0.1, "window_end_s": 1.1, "seconds": 1.0,
            "bw_mib_s": 3.0, "msg_rate_mpps": 1.0, "lat_us": lat()})
    }

    fn cell() -> Value {
        json!({"src": 0, "dst": 2, "bw_mib_s": summ(&[3.0, 3.0]), "window_s": summ(&[1.0, 1.0]),
            "lat_samples_per_rep": 30,
            "lat_us": {"p50": summ(&[1.0, 1.0]), "p99": null, "p999": null, "avg": summ(&[1.5, 1.5])}})
    }

    #[test]
    fn cluster_json_must_hold_every_pair_with_its_requests_and_summaries() {
        let w = ClusterWant::new("outcast", "read", 2, 2, &[64], 10).reps(2);
        let good = outcast(second(), cell());
        let js = jsons_in(&format!("{good}{good}"));
        assert_eq!(js.len(), 2);
        assert!(cluster_json_ok(&js[0], &w, true, &exported()));
        let with = |k: &str, v: Value| {
            let mut f = second();
            f[k] = v;
            f
        };
        let mut unbacked = second();
        unbacked["lat_us"]["p999"] = json!(7.0);
        let mut no_sd = cell();
        no_sd["bw_mib_s"]["sd"] = Value::Null;
        let mut one_rep = cell();
        one_rep["bw_mib_s"] = summ(&[3.0]);
        // Requests of one QP only, a zero p50, a p99.9 from 30 samples, a
        // missing pair, a window before the phase, a summary without its
        // spread or over one repetition: all refused.
        for (bad, c) in [
            (with("requests", json!(10)), cell()),
            (with("lat_us", json!({"samples": 30, "p50": 0.0, "p99": null, "p999": null, "avg": 1.0})), cell()),
            (unbacked, cell()),
            (with("dst", json!(1)), cell()),
            (with("window_start_s", json!(0.0)), cell()),
            (second(), no_sd),
            (second(), one_rep),
        ] {
            assert!(!cluster_json_ok(&jsons_in(&outcast(bad.clone(), c))[0], &w, true, &exported()), "{bad}");
        }
        assert!(!cluster_json_ok(
            &js[0],
            &ClusterWant::new("outcast", "read", 1, 2, &[64], 10).reps(2),
            true,
            &exported()
        ));
        assert!(!cluster_json_ok(
            &js[0],
            &ClusterWant::new("outcast", "read", 2, 2, &[64, 128], 10).reps(2),
            true,
            &exported()
        ));
        assert!(
            !cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 2, 2, &[64], 10), true, &exported()),
            "1 repetition"
        );
        // Without a rank's counters, or with a testbed of two ranks.
        let mut j = js[0].clone();
        j["counters"].as_array_mut().unwrap().pop();
        assert!(!cluster_json_ok(&j, &w, false, &exported()));
        let mut j = js[0].clone();
        j["testbed"]["ranks"].as_array_mut().unwrap().pop();
        assert!(!cluster_json_ok(&j, &w, false, &exported()));
        // Empty deltas: a namespace host's view, not an mpirun rank's.
        let mut j = js[0].clone();
        j["counters"][1]["deltas"] = json!({});
        assert!(cluster_json_ok(&j, &w, false, &exported()) && !cluster_json_ok(&j, &w, true, &exported()));
    }

    #[test]
    fn testbed_needs_every_fact_and_under_mpirun_every_exported_counter() {
        let w = ClusterWant::new("outcast", "read", 2, 2, &[64], 10).reps(2);
        let j = jsons_in(&outcast(second(), cell())).remove(0);
        for k in TESTBED_KEYS {
            let mut bad = j.clone();
            bad["testbed"]["ranks"][2].as_object_mut().unwrap().remove(k);
            assert!(!cluster_json_ok(&bad, &w, false, &exported()), "{k} missing");
            bad["testbed"]["ranks"][2][k] = json!("");
            assert!(!cluster_json_ok(&bad, &w, false, &exported()), "{k} empty");
        }
        let mut bad = j.clone();
        bad["testbed"]["ranks"][0]["gid_type"] = json!("ROCE_V1");
        assert!(!cluster_json_ok(&bad, &w, false, &exported()));
        let mut bad = j.clone();
        bad["testbed"]["ranks"][0]["git_revision"] = json!("none (not built from a git checkout)");
        assert!(!cluster_json_ok(&bad, &w, false, &exported()));
        // A counter the device exports but a rank left out; a rank that sent nothing.
        let more = [exported(), vec!["port1/hw_counters/rdma_sends".into()]].concat();
        assert!(cluster_json_ok(&j, &w, false, &more) && !cluster_json_ok(&j, &w, true, &more));
        let mut bad = j.clone();
        bad["counters"][1]["deltas"]["port1/hw_counters/sent_pkts"] = json!(0);
        assert!(cluster_json_ok(&bad, &w, false, &exported()) && !cluster_json_ok(&bad, &w, true, &exported()));
        assert!(!cluster_json_ok(&j, &w, true, &[]), "no exported counter listed under mpirun");
    }

    #[test]
    fn slowed_flows_must_differ_from_their_sources_other_flow_and_pull_jain_down() {
        let doc = |to2: f64| {
            let f = |s: u64, d: u64| json!({"src": s, "dst": d, "bw_mib_s": {"mean": if d == 2 || s == 2 { to2 } else { 1.0 }}});
            let flows: Vec<Value> =
                [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)].iter().map(|&(s, d)| f(s, d)).collect();
            let bw: Vec<f64> = flows.iter().map(|f| f["bw_mib_s"]["mean"].as_f64().unwrap()).collect();
            let jain = bw.iter().sum::<f64>().powi(2) / (6.0 * bw.iter().map(|x| x * x).sum::<f64>());
            json!({"results": [{"flows": flows, "jain_fairness": {"mean": jain}}]})
        };
        assert!(slow_flows_ok(&doc(0.3)));
        assert!(!slow_flows_ok(&doc(1.0)), "per-source figures: every flow of a source alike");
        assert!(!slow_flows_ok(&doc(0.7)), "not a clear margin");
    }

    #[test]
    fn real_figures_need_axes_legends_and_every_value_label() {
        let j = json!({"results": [{"flows": [{"bw_mib_s": {"mean": 1.3}}, {"bw_mib_s": null}],
            "rank_totals": [{"out_mib_s": 1.3, "in_mib_s": 0.0}]}]});
        let heat = "<svg><text x=\"1\">8 B: destination rank</text><text x=\"1\">source rank</text><rect/>\
                    <text x=\"1\">1.3</text><g class=\"legend\"><text x=\"1\">MiB/s</text></g></svg>"
            .to_string();
        let bars = "<svg><line/><line/><line/><line/><line/><text x=\"1\">1.3</text><text x=\"1\">0.0</text>\
                    <g class=\"legend\"></g></svg>"
            .to_string();
        assert!(figures_ok(&heat, &bars, &j), "{heat}\n{bars}");
        assert!(!figures_ok(&heat.replace(">1.3<", ">1.4<"), &bars, &j), "a cell label that is not the flow's");
        assert!(!figures_ok(&heat.replace("source rank", "rank"), &bars, &j), "no y axis title");
        assert!(!figures_ok(&heat, &bars.replacen("<line/>", "", 1), &j), "an axis short of its ticks");
        assert!(!figures_ok(&heat, &bars.replace(">0.0<", "><"), &j), "a bar without its label");
        let out = "x\n=== begin /t/r.svg\n<svg/>\n=== end /t/r.svg\nexported port1/hw_counters/a\n";
        assert_eq!(
            (section(out, "/t/r.svg"), exported_counters(out)),
            ("<svg/>\n", vec!["port1/hw_counters/a".to_string()])
        );
    }

    #[test]
    fn threads_apart_follows_how_qps_are_dealt_to_threads() {
        let w = |p, q, t| ClusterWant::new(p, "write", q, t, &[64], 10).threads_apart();
        assert!(!w("all-to-all", 1, 1), "one thread, two destinations");
        assert!(w("all-to-all", 2, 2) && w("all-to-all", 1, 0) && w("incast", 1, 1) && w("ring", 2, 1));
        assert!(!w("all-to-all", 2, 3), "thread 0 gets both destinations");
        assert!(w("outcast", 2, 4));
    }
}
