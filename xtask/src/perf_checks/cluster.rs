//! rrddmma-perf's cluster-mode device checks (three ranks).

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
}

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
        ClusterWant { pattern, op, qps, threads, sizes: sizes.to_vec(), iters, reps: 1, bw, probe }
    }

    fn reps(self, reps: u64) -> Self {
        ClusterWant { reps, ..self }
    }

    /// Whether every flow gets threads of its own: with one thread per QP,
    /// or when no rank's threads are fewer than its destinations (QPs are
    /// dealt QP-index major, so each thread then keeps to one destination).
    fn per_flow(&self) -> bool {
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
            "cluster --pattern {} --op {} -q {} --threads {} -s {} -n {} --reps {} --lat-samples {LAT_SAMPLES} \
             --json {dir}/r.json --csv {dir}/r.csv --svg {dir}/r.svg",
            self.pattern,
            self.op,
            self.qps,
            self.threads.map_or("per-qp".to_string(), |t| t.to_string()),
            sizes.join(","),
            self.iters,
            self.reps
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

/// The JSON's testbed names three ranks on rxe_h* devices, with a kernel,
/// a clock source, the date and the command line, and the counters hold
/// every rank's deltas; under mpirun (ranks in the devices' namespace: rxe
/// exports hw_counters there) none is empty. A rank in a namespace host sees
/// no hw_counters, and its table says so (checked with the output).
fn testbed_ok(j: &serde_json::Value, mpi: bool) -> bool {
    let tb = &j["testbed"];
    let ranks = tb["ranks"].as_array().cloned().unwrap_or_default();
    let counters = j["counters"].as_array().cloned().unwrap_or_default();
    ranks.len() == 3
        && ranks.iter().enumerate().all(|(r, t)| {
            t["rank"].as_u64() == Some(r as u64)
                && t["device"].as_str().is_some_and(|d| d.starts_with("rxe_h"))
                && t["kernel"].as_str().is_some_and(|k| k != "unknown")
                && t["clock_source"].as_str().is_some_and(|k| k != "unknown")
        })
        && tb["transport"] == "RC"
        && tb["date_utc"].as_str().is_some_and(|d| d.ends_with('Z'))
        && tb["command_line"].as_array().is_some_and(|a| a.iter().any(|v| v == "cluster"))
        && counters.len() == 3
        && counters.iter().enumerate().all(|(r, c)| {
            c["rank"].as_u64() == Some(r as u64) && c["deltas"].as_object().is_some_and(|m| !mpi || !m.is_empty())
        })
}

/// The cluster-mode JSON of three ranks matches `w`: its settings, one result
/// per size in order, each with exactly the expected flows (every bandwidth
/// flow with `iters` × `qps` requests in each repetition, positive windows,
/// bandwidth, message rate and latency, the probe flow with latency alone),
/// p50 and the mean present, p99 and p99.9 `null` (30 samples back neither),
/// summaries over the repetitions per flow and for the aggregate, per-rank
/// totals that add up, and a fairness index in (0, 1].
fn cluster_json_ok(j: &serde_json::Value, w: &ClusterWant, mpi: bool) -> bool {
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
        && j["per_flow"].as_bool() == Some(w.per_flow())
        && j["percentile_min_samples"]["p999"].as_u64() == Some(1000)
        && testbed_ok(j, mpi)
        && sizes == w.sizes
        && results.len() == w.sizes.len()
        && results.iter().zip(&w.sizes).all(|(r, &s)| result_ok(r, s))
}

/// `rrddmma-perf cluster` on three ranks: all-to-all and incast on the three
/// namespace hosts (`tests/cluster/hosts.sh`, set up here unless an earlier
/// check did) and under `mpirun -np 3`; then, with fewer iterations, outcast
/// (read) and ring (send) on the namespace hosts and loaded-latency (atomic)
/// under mpirun. The namespace incast runs three repetitions; the mpirun
/// incast one thread per QP; the mpirun all-to-all one thread per rank, so
/// its figures are per source and the report must say so. Several QPs per
/// pair, several threads per rank and several sizes run in some of them;
/// those and the mpirun all-to-all stay at one packet per message (1024 B,
/// the rxe veths' MTU): with 4096-byte writes rxe failed some runs with
/// REM_INV_REQ_ERR (docs/perf.md).
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
    let runs: [(bool, Vec<ClusterWant>); 6] = [
        (false, vec![ClusterWant::new("all-to-all", "write", 2, 2, &[256, 1024], 200)]),
        (true, vec![ClusterWant::new("all-to-all", "write", 1, 1, &[1024], 200)]),
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
    let mut cmd = format!("{setup} || exit 1; rc=0");
    for (i, w) in wants.iter().enumerate() {
        let dir = format!("/tmp/rrddmma-perf-cluster-{tag}-{i}");
        *port += 1;
        cmd += &format!(
            "; rm -rf {dir} && mkdir -p {dir} && {{ {launch} || rc=1; }}; cat {dir}/r.json; \
             head -c 120 {dir}/r.svg; echo; head -c 120 {dir}/r-bars.svg; echo; \
             grep -ho '<g class=\"legend\">' {dir}/r.svg {dir}/r-bars.svg; head -3 {dir}/r.csv",
            launch = launch(*port, &w.flags(&dir))
        );
    }
    cmd += "; exit $rc";
    let what: Vec<String> = wants
        .iter()
        .map(|w| {
            format!(
                "{} {}, {} QP(s)/pair, {}, sizes {:?}{}",
                w.pattern,
                w.op,
                w.qps,
                w.threads.map_or("one thread per QP".to_string(), |t| format!("{t} thread(s)/rank")),
                w.sizes,
                if w.reps > 1 { format!(", {} repetitions", w.reps) } else { String::new() }
            )
        })
        .collect();
    let name = format!(
        "perf cluster, 3 ranks, {}: {}: every pair present and non-zero, JSON schema and summaries, SVG legends",
        place,
        what.join("; ")
    );
    Check::verdict(&name, cmd, move |d| {
        let js = jsons_in(&d.output);
        let runs = wants.len();
        let shared = wants.iter().filter(|w| !w.per_flow()).count();
        d.code == Some(0)
            && js.len() == runs
            && js.iter().zip(&wants).all(|(j, w)| cluster_json_ok(j, w, mpi))
            && d.output.matches("heap allocations inside measured loops: 0").count() == 3 * runs
            && (0..3).all(|r| d.output.matches(&format!("rank {r}/3: ")).count() == runs)
            && d.output.matches("<svg").count() == 2 * runs
            && d.output.matches("class=\"legend\"").count() == 2 * runs
            && (if mpi {
                d.output.matches(" port counters that moved during the run").count()
                    + d.output.matches(" port counters: none of the devices' counters moved").count()
                    == runs
            } else {
                d.output.matches(" port counters: rank(s) [0, 1, 2] see none in sysfs").count() == runs
            })
            && d.output.matches("per-source figures: rank(s)").count() == shared
            && d.output.matches("each window opens after 16 warm-up request(s) per QP").count() == runs
            && d.output.matches("pattern,op,size,qps_per_pair,threads_per_rank,rep,src,dst").count() == runs
    })
}

/// `rrddmma-perf cluster` on three ranks under `srun` (the command prefix
/// `srun`, after `setup`): all-to-all writes, one QP per pair, two threads
/// per rank (so per flow), one rxe device per rank.
pub fn srun_check(setup: &str, srun: &str) -> Result<Check> {
    let me = format!("'{}'", binary()?.display());
    let want = ClusterWant::new("all-to-all", "write", 1, 2, &[1024], 200);
    let launch = |port: u16, flags: &str| {
        format!("RRDDMMA_COORDINATOR=127.0.0.1:{port} RRDDMMA_DEVICES=rxe_h1,rxe_h2,rxe_h3 {srun} {me} {flags}")
    };
    Ok(run_check("srun", "srun -n 3 (Slurm)", setup, vec![want], true, &mut 18720, &launch))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "warmup_requests_per_qp": 16, "per_flow": true, "shared_sources": [],
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
                "transport": "RC", "rrddmma_perf_version": "0.1.0", "ranks": (0..3).map(|r| json!({"rank": r,
                "device": format!("rxe_h{}", r + 1), "kernel": "6.1.0", "clock_source": "tsc"})).collect::<Vec<_>>()},
            "counters": (0..3).map(|r| json!({"rank": r, "deltas": {"port1/hw_counters/duplicate_request": 12}}))
                .collect::<Vec<_>>()
        });
        // rrddmma-perf writes "tool" first, which is how reports are found.
        let text =
            serde_json::to_string_pretty(&doc).unwrap_or_default().replace("  \"tool\": \"rrddmma-perf\",\n", "");
        format!("noise\n{{\n  \"tool\": \"rrddmma-perf\",{}\nmore noise\n", &text[1..])
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
        assert!(cluster_json_ok(&js[0], &w, true));
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
            assert!(!cluster_json_ok(&jsons_in(&outcast(bad.clone(), c))[0], &w, true), "{bad}");
        }
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 1, 2, &[64], 10).reps(2), true));
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 2, 2, &[64, 128], 10).reps(2), true));
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 2, 2, &[64], 10), true), "1 repetition");
        // Without a rank's counters, or with a testbed of two ranks.
        let mut j = js[0].clone();
        j["counters"].as_array_mut().unwrap().pop();
        assert!(!cluster_json_ok(&j, &w, false));
        let mut j = js[0].clone();
        j["testbed"]["ranks"].as_array_mut().unwrap().pop();
        assert!(!cluster_json_ok(&j, &w, false));
        // Empty deltas: a namespace host's view, not an mpirun rank's.
        let mut j = js[0].clone();
        j["counters"][1]["deltas"] = json!({});
        assert!(cluster_json_ok(&j, &w, false) && !cluster_json_ok(&j, &w, true));
    }

    #[test]
    fn per_flow_follows_how_qps_are_dealt_to_threads() {
        let w = |p, q, t| ClusterWant::new(p, "write", q, t, &[64], 10).per_flow();
        assert!(!w("all-to-all", 1, 1), "one thread, two destinations");
        assert!(w("all-to-all", 2, 2) && w("all-to-all", 1, 0) && w("incast", 1, 1) && w("ring", 2, 1));
        assert!(!w("all-to-all", 2, 3), "thread 0 gets both destinations");
        assert!(w("outcast", 2, 4));
    }
}
