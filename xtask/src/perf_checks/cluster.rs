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
    threads: u64,
    sizes: Vec<u64>,
    iters: u64,
    /// The bandwidth flows (source, destination).
    bw: Vec<(u64, u64)>,
    /// loaded-latency's probe flow: latency only, no bandwidth.
    probe: Option<(u64, u64)>,
}

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
        ClusterWant { pattern, op, qps, threads, sizes: sizes.to_vec(), iters, bw, probe }
    }

    /// The command-line flags of this run, writing JSON, CSV and SVG to `dir`.
    fn flags(&self, dir: &str) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(u64::to_string).collect();
        format!(
            "cluster --pattern {} --op {} -q {} --threads {} -s {} -n {} --lat-samples 30 \
             --json {dir}/r.json --csv {dir}/r.csv --svg {dir}/r.svg",
            self.pattern,
            self.op,
            self.qps,
            self.threads,
            sizes.join(","),
            self.iters
        )
    }
}

/// The cluster-mode JSON of three ranks matches `w`: its settings, one result
/// per size in order, each with exactly the expected flows (every bandwidth
/// flow with `iters` × `qps` requests, positive bandwidth, message rate and
/// latency, the probe flow with latency alone), per-rank totals that add up,
/// the aggregate and a fairness index in (0, 1].
fn cluster_json_ok(j: &serde_json::Value, w: &ClusterWant) -> bool {
    let pos = |v: &serde_json::Value| v.as_f64().is_some_and(|x| x > 0.0);
    let lat_pos = |f: &serde_json::Value| ["p50", "p99", "p999", "avg"].iter().all(|k| pos(&f["lat_us"][k]));
    let near = |a: f64, b: f64| (a - b).abs() <= 0.01 + 1e-3 * b.abs();
    let sizes: Vec<u64> = j["sizes"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(|v| v.as_u64()).collect());
    let results = j["results"].as_array().cloned().unwrap_or_default();
    let mut want_pairs: Vec<(u64, u64)> = w.bw.iter().copied().chain(w.probe).collect();
    want_pairs.sort();
    let result_ok = |r: &serde_json::Value, size: u64| {
        let flows = r["flows"].as_array().cloned().unwrap_or_default();
        let mut got: Vec<(u64, u64)> =
            flows.iter().filter_map(|f| Some((f["src"].as_u64()?, f["dst"].as_u64()?))).collect();
        got.sort();
        let flows_ok = flows.iter().all(|f| {
            let pair = (f["src"].as_u64().unwrap_or(9), f["dst"].as_u64().unwrap_or(9));
            if Some(pair) == w.probe {
                f["requests"].as_u64() == Some(0) && lat_pos(f)
            } else {
                f["requests"].as_u64() == Some(w.iters * w.qps)
                    && pos(&f["bw_mib_s"])
                    && pos(&f["msg_rate_mpps"])
                    && pos(&f["seconds"])
                    && (w.probe.is_some() || lat_pos(f))
            }
        });
        let bw = |f: &serde_json::Value| f["bw_mib_s"].as_f64().unwrap_or(0.0);
        let totals = r["rank_totals"].as_array().cloned().unwrap_or_default();
        let totals_ok = totals.len() == 3
            && totals.iter().enumerate().all(|(rank, t)| {
                let sum = |k: &str| flows.iter().filter(|f| f[k].as_u64() == Some(rank as u64)).map(bw).sum::<f64>();
                t["rank"].as_u64() == Some(rank as u64)
                    && near(t["out_mib_s"].as_f64().unwrap_or(-1.0), sum("src"))
                    && near(t["in_mib_s"].as_f64().unwrap_or(-1.0), sum("dst"))
            });
        let jain = r["jain_fairness"].as_f64().unwrap_or(0.0);
        r["size"].as_u64() == Some(size)
            && got == want_pairs
            && flows_ok
            && totals_ok
            && near(r["aggregate_mib_s"].as_f64().unwrap_or(-1.0), flows.iter().map(bw).sum())
            && jain > 0.0
            && jain <= 1.0 + 1e-9
    };
    j["mode"] == "cluster"
        && j["pattern"] == w.pattern
        && j["op"] == w.op
        && j["ranks"].as_u64() == Some(3)
        && j["qps_per_pair"].as_u64() == Some(w.qps)
        && j["threads_per_rank"].as_u64() == Some(w.threads)
        && j["iterations_per_qp"].as_u64() == Some(w.iters)
        && sizes == w.sizes
        && results.len() == w.sizes.len()
        && results.iter().zip(&w.sizes).all(|(r, &s)| result_ok(r, s))
}

/// `rrddmma-perf cluster` on three ranks: all-to-all and incast on the three
/// namespace hosts (`tests/cluster/hosts.sh`, set up here unless an earlier
/// check did) and under `mpirun -np 3`; then, with fewer iterations, outcast
/// (read) and ring (send) on the namespace hosts and loaded-latency (atomic)
/// under mpirun. Several QPs per pair, several threads per rank and several
/// sizes run in some of them; those stay at one packet per message (1024 B,
/// the rxe veths' MTU): with 4096-byte writes over 2 QPs per pair and 2
/// threads, rxe failed some runs with REM_INV_REQ_ERR (docs/perf.md).
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
        (true, vec![ClusterWant::new("all-to-all", "write", 1, 1, &[4096], 200)]),
        (false, vec![ClusterWant::new("incast", "write", 1, 1, &[4096], 200)]),
        (true, vec![ClusterWant::new("incast", "write", 1, 2, &[4096], 200)]),
        (
            false,
            vec![
                ClusterWant::new("outcast", "read", 2, 2, &[64, 1024], 50),
                ClusterWant::new("ring", "send", 2, 1, &[64, 1024], 50),
            ],
        ),
        (true, vec![ClusterWant::new("loaded-latency", "atomic", 1, 2, &[8], 50)]),
    ];
    let mut v = Vec::new();
    let mut port = 18690u16;
    for (k, (mpi, wants)) in runs.into_iter().enumerate() {
        let mut cmd = format!("{hosts_up} || exit 1; rc=0");
        for (i, w) in wants.iter().enumerate() {
            let dir = format!("/tmp/rrddmma-perf-cluster-{k}-{i}");
            port += 1;
            cmd += &format!(
                "; rm -rf {dir} && mkdir -p {dir} && {{ {launch} || rc=1; }}; cat {dir}/r.json; \
                 head -c 120 {dir}/r.svg; echo; head -c 120 {dir}/r-bars.svg; echo; head -3 {dir}/r.csv",
                launch = launch(mpi, port, &w.flags(&dir))
            );
        }
        cmd += "; exit $rc";
        let what: Vec<String> = wants
            .iter()
            .map(|w| {
                format!(
                    "{} {}, {} QP(s)/pair, {} thread(s)/rank, sizes {:?}",
                    w.pattern, w.op, w.qps, w.threads, w.sizes
                )
            })
            .collect();
        let name = format!(
            "perf cluster, 3 ranks, {}: {}: every pair present and non-zero, JSON schema, SVG",
            if mpi { "mpirun -np 3" } else { "three namespace hosts" },
            what.join("; ")
        );
        v.push(Check::verdict(&name, cmd, move |d| {
            let js = jsons_in(&d.output);
            let runs = wants.len();
            d.code == Some(0)
                && js.len() == runs
                && js.iter().zip(&wants).all(|(j, w)| cluster_json_ok(j, w))
                && d.output.matches("heap allocations inside measured loops: 0").count() == 3 * runs
                && (0..3).all(|r| d.output.matches(&format!("rank {r}/3: ")).count() == runs)
                && d.output.matches("<svg").count() == 2 * runs
                && d.output.matches("pattern,op,size,qps_per_pair,threads_per_rank,src,dst").count() == runs
        }));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rrddmma-perf's JSON for an outcast run, 2 QPs per pair, 10 per QP.
    fn outcast(second_flow: &str) -> String {
        format!(
            "noise\n{{\n  \"tool\": \"rrddmma-perf\",\n  \"mode\": \"cluster\",\n  \"pattern\": \"outcast\",\n  \
             \"op\": \"read\",\n  \"ranks\": 3,\n  \"qps_per_pair\": 2,\n  \"threads_per_rank\": 2,\n  \
             \"iterations_per_qp\": 10,\n  \"sizes\": [64],\n  \"results\": [\n    {{\"size\": 64, \"flows\": [\n      \
             {{\"src\": 0, \"dst\": 1, \"requests\": 20, \"seconds\": 1, \"bw_mib_s\": 2.0, \"msg_rate_mpps\": 1, \
             \"lat_us\": {{\"p50\": 1, \"p99\": 2, \"p999\": 3, \"avg\": 1}}}},\n      {second_flow}],\n      \
             \"rank_totals\": [{{\"rank\": 0, \"out_mib_s\": 5.0, \"in_mib_s\": 0}}, {{\"rank\": 1, \"out_mib_s\": 0, \
             \"in_mib_s\": 2.0}}, {{\"rank\": 2, \"out_mib_s\": 0, \"in_mib_s\": 3.0}}],\n      \
             \"aggregate_mib_s\": 5.0, \"jain_fairness\": 0.96}}\n  ]\n}}\nmore noise\n"
        )
    }

    #[test]
    fn cluster_json_must_hold_every_pair_with_its_requests() {
        let w = ClusterWant::new("outcast", "read", 2, 2, &[64], 10);
        let good = "{\"src\": 0, \"dst\": 2, \"requests\": 20, \"seconds\": 1, \"bw_mib_s\": 3.0, \
                    \"msg_rate_mpps\": 1, \"lat_us\": {\"p50\": 1, \"p99\": 2, \"p999\": 3, \"avg\": 1}}";
        let js = jsons_in(&format!("{}{}", outcast(good), outcast(good)));
        assert_eq!(js.len(), 2);
        assert!(cluster_json_ok(&js[0], &w));
        // Requests of one QP only, a zero latency, a missing pair, other settings: all refused.
        for bad in [
            good.replace("20", "10"),
            good.replace("\"p99\": 2", "\"p99\": 0"),
            good.replace("\"dst\": 2", "\"dst\": 1"),
        ] {
            assert!(!cluster_json_ok(&jsons_in(&outcast(&bad))[0], &w), "{bad}");
        }
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 1, 2, &[64], 10)));
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 2, 2, &[64, 128], 10)));
    }
}
