//! rrddmma-perf's cluster-mode checks of offered load (three namespace
//! hosts): an open loop at a fixed rate below capacity, a Poisson open
//! loop of mixed operations and drawn sizes, a scenario file, and the
//! figures redrawn from saved JSON.

use serde_json::Value;

use super::testbed::testbed_ok;
use super::verdict::jsons_in;
use crate::device::Check;
use crate::Result;

/// Requests per second per flow of the fixed-rate ring: well below what
/// the emulated devices complete (some 250 per second per flow of 1 KiB in
/// a closed loop under TCG). At 50 per second on a host with a load
/// average near 20, latencies reached a second and a 4 s window came out
/// 20-25% fast: the window opens at the last warm-up completion, and a
/// late start shortens it by up to a latency.
const RATE: f64 = 20.0;
/// Arrivals per QP of the fixed-rate run after warm-up (10 s at `RATE`, so
/// that the latencies at the window's ends move it by little).
const ITERS: u64 = 200;
/// Arrivals per QP of the Poisson mix.
const MIX_N: u64 = 300;

/// Every flow of `j`'s single size: the per-repetition flows that carry
/// bandwidth.
fn rep_flows(j: &Value) -> Vec<Value> {
    let r = &j["results"][0]["reps"];
    r.as_array()
        .into_iter()
        .flatten()
        .flat_map(|rep| rep["flows"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["requests"].as_u64().unwrap_or(0) > 0)
        .collect()
}

/// A flow's load: `completed` requests after warm-up, a CDF rising from 0
/// to 1 with latency, a time series that adds up to the flow's bytes, and
/// loaded-latency percentiles as backed by `completed` samples.
fn load_ok(f: &Value, completed: u64) -> bool {
    let l = &f["load"];
    let n = |k: &str| l[k].as_u64().unwrap_or(u64::MAX);
    let cdf: Vec<(f64, f64)> = l["cdf_us"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| (p[0].as_f64().unwrap_or(-1.0), p[1].as_f64().unwrap_or(-1.0)))
        .collect();
    let series: u64 = l["series_bytes"].as_array().into_iter().flatten().filter_map(Value::as_u64).sum();
    let lat = &l["lat_us"];
    n("writes") + n("reads") + n("atomics") == completed
        && n("bytes") == f["bytes"].as_u64().unwrap_or(0)
        && series == n("bytes")
        && l["series_interval_s"].as_f64().is_some_and(|w| w > 0.0)
        && cdf.len() >= 101
        && cdf.first().is_some_and(|p| p.1 == 0.0)
        && cdf.last().is_some_and(|p| p.1 == 1.0)
        && cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1 && w[0].0 > 0.0)
        && lat["samples"].as_u64() == Some(completed)
        && lat["p50"].as_f64().is_some_and(|x| x > 0.0)
        && lat["p99"].as_f64().is_some_and(|x| x > 0.0) == (completed >= 100)
        && lat["p999"].as_f64().is_some_and(|x| x > 0.0) == (completed >= 1000)
}

/// The fixed-rate open-loop ring: every flow offered `RATE`, none dropped,
/// each cell's achieved rate within 5% of it, and every flow's load whole.
fn open_loop_ok(j: &Value) -> bool {
    let cells = j["results"][0]["flows"].as_array().cloned().unwrap_or_default();
    let flows = rep_flows(j);
    j["workload"]["rate"] == format!("{RATE}/s")
        && cells.len() == 3
        && cells.iter().all(|c| {
            let l = &c["load"];
            let frac = l["achieved_fraction"]["mean"].as_f64().unwrap_or(0.0);
            l["offered_per_s"].as_f64() == Some(RATE) && l["dropped"].as_u64() == Some(0) && (frac - 1.0).abs() <= 0.05
        })
        && flows.len() == 3
        && flows.iter().all(|f| load_ok(f, ITERS) && f["load"]["arrivals"].as_u64() == Some(ITERS + 16))
}

/// The Poisson mix: 70/20/10 operations (each within 0.1 of its share
/// over `MIX_N` requests), sizes from the file's 64 and 1024 B (atomics 8 B),
/// a mean size of 64·0.8 + 1024·0.2.
fn mix_ok(j: &Value) -> bool {
    let flows = rep_flows(j);
    let wl = &j["workload"];
    wl["mix"] == "write:70,read:20,atomic:10"
        && wl["size_dist"] == "64:8,1024:2"
        && wl["rate"] == "poisson:200/s"
        && wl["mean_size"].as_f64().is_some_and(|m| (m - 256.0).abs() < 1e-9)
        && j["sizes"] == serde_json::json!([1024])
        && flows.len() == 2
        && flows.iter().all(|f| {
            let l = &f["load"];
            let c = |k: &str| l[k].as_u64().unwrap_or(0);
            let share = |k: &str| c(k) as f64 / MIX_N as f64;
            let (small, big) = (
                8 * c("atomics") + 64 * (c("writes") + c("reads")),
                8 * c("atomics") + 1024 * (c("writes") + c("reads")),
            );
            load_ok(f, MIX_N)
                && (share("writes") - 0.7).abs() < 0.1
                && (share("reads") - 0.2).abs() < 0.1
                && (share("atomics") - 0.1).abs() < 0.1
                && (small..=big).contains(&c("bytes"))
                && c("bytes") > small
                && c("bytes") < big
        })
}

/// The scenario's two phases: `ring` at a fixed 200/s with 2 QPs per pair,
/// then explicit flows 1 -> 0 (closed loop of reads) and 2 -> 0 (Poisson
/// 200/s of 64..=512 B writes).
fn scenario_ok(js: &[Value]) -> bool {
    let [ring, explicit] = js else { return false };
    let ring_ok = ring["pattern"] == "ring"
        && ring["qps_per_pair"].as_u64() == Some(2)
        && ring["scenario"]["phase"] == "ring"
        && rep_flows(ring).len() == 3
        && rep_flows(ring).iter().all(|f| f["load"]["offered_per_s"].as_f64() == Some(200.0) && load_ok(f, 2 * 100));
    let flows = rep_flows(explicit);
    let find = |s: u64| flows.iter().find(|f| f["src"].as_u64() == Some(s)).cloned().unwrap_or(Value::Null);
    let (a, b) = (find(1), find(2));
    ring_ok
        && explicit["pattern"] == "explicit"
        && explicit["scenario"]["phase"] == "pair-mix"
        && flows.len() == 2
        && a["dst"].as_u64() == Some(0)
        && a["load"]["offered_per_s"].is_null()
        && a["load"]["reads"].as_u64() == Some(150)
        && load_ok(&a, 150)
        && b["load"]["offered_per_s"].as_f64() == Some(200.0)
        && b["load"]["writes"].as_u64() == Some(150)
        && load_ok(&b, 150)
        && (64 * 150..=512 * 150).contains(&b["bytes"].as_u64().unwrap_or(0))
}

/// The scenario file of [`scenario_ok`].
const SCENARIO: &str = r#"# rrddmma-perf cluster --scenario: two phases on three ranks
ranks = 3
warmup = 16
lat_samples = 30
threads = "per-qp"

[[phase]]
name = "ring"
pattern = "ring"
qps = 2
size = 1024
rate = "200"
iters = 100

[[phase]]
name = "pair-mix"
iters = 150
size = 512

[[phase.flow]]
src = 1
dst = 0
op = "read"

[[phase.flow]]
src = 2
dst = 0
rate = "poisson:200"
size_dist = "uniform:64-512"
"#;

/// The load checks, run with `launch(port, flags)` (the namespace hosts'
/// launcher of `cluster_checks`) and `me`, the quoted binary.
pub fn load_checks(me: &str, launch: &dyn Fn(u16, &str) -> String) -> Result<Vec<Check>> {
    let dir = "/tmp/rrddmma-perf-cluster-load";
    let common = "--threads per-qp --lat-samples 30";
    let open = format!(
        "cluster --pattern ring -s 1024 --rate {RATE} -n {ITERS} {common} --json {dir}/open.json --svg {dir}/open.svg"
    );
    let mix = format!(
        "cluster --pattern incast --mix write:70,read:20,atomic:10 --size-dist file:{dir}/sizes.txt --rate poisson:200 \
         -n {MIX_N} {common} --json {dir}/mix.json --svg {dir}/mix.svg"
    );
    let scenario = format!("cluster --scenario {dir}/s.toml --json {dir}/s.json --svg {dir}/s.svg");
    let cmd = format!(
        "{{ ip netns list | grep -q '^h1' || bash tests/cluster/hosts.sh 3 >/dev/null; }} || exit 1; rc=0; \
         rm -rf {dir} && mkdir -p {dir} && printf '# size weight\\n64 8\\n1024 2\\n' > {dir}/sizes.txt && \
         cat > {dir}/s.toml <<'EOF'\n{SCENARIO}EOF\n\
         {{ {} || rc=1; }}; {{ {} || rc=1; }}; {{ {} || rc=1; }}; \
         for f in open mix s-ring s-pair-mix; do cat {dir}/$f.json; done; \
         mkdir -p {dir}/re && cp {dir}/open.json {dir}/re/ && {me} plot {dir}/re/open.json || rc=1; \
         for f in {dir}/re/open.svg {dir}/re/open-bars.svg {dir}/re/open-cdf.svg {dir}/re/open-time.svg; do \
           echo \"figure $f: $(grep -c '<svg' $f) svg, $(grep -c 'class=\"legend\"' $f) legend, $(grep -c '<polyline' $f) lines\"; done; \
         cmp {dir}/open-cdf.svg {dir}/re/open-cdf.svg && cmp {dir}/open-time.svg {dir}/re/open-time.svg && echo redraw identical; \
         exit $rc",
        launch(18731, &open),
        launch(18732, &mix),
        launch(18733, &scenario)
    );
    let name = format!(
        "perf cluster load, 3 namespace hosts: open-loop ring at {RATE}/s per flow achieved within 5%; Poisson mix of \
         write/read/atomic with sizes from a file; a two-phase scenario file with explicit flows; every report's \
         testbed whole; plot RESULTS.json redraws the figures"
    );
    Ok(vec![Check::verdict(&name, cmd, move |d| {
        let js = jsons_in(&d.output);
        d.code == Some(0)
            && js.len() == 4
            && open_loop_ok(&js[0])
            && mix_ok(&js[1])
            && scenario_ok(&js[2..])
            && js.iter().all(|j| testbed_ok(j, false, &[]))
            && d.output.matches("heap allocations inside measured loops: 0").count() == 3 * 4
            && d.output.matches("svg, 1 legend").count() == 4
            && d.output.matches(" 3 lines").count() == 2
            && d.output.contains("redraw identical")
            && d.output.matches(" load: ").count() == 4
    })])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(src: u64, dst: u64, writes: u64, reads: u64, atomics: u64, bytes: u64) -> Value {
        let n = writes + reads + atomics;
        let cdf: Vec<Value> = (0..=100).map(|k| json!([1.0 + f64::from(k), f64::from(k) / 100.0])).collect();
        json!({"src": src, "dst": dst, "requests": n, "bytes": bytes, "load": {
            "offered_per_s": RATE, "arrivals": n + 16, "dropped": 0, "writes": writes, "reads": reads,
            "atomics": atomics, "sends": 0, "bytes": bytes, "cdf_us": cdf, "series_interval_s": 0.001,
            "series_bytes": [bytes / 2, bytes - bytes / 2],
            "lat_us": {"samples": n, "p50": 2.0, "p99": if n >= 100 { json!(3.0) } else { Value::Null },
                "p999": Value::Null, "avg": 2.1}}})
    }

    fn open(frac: f64, third: Value) -> Value {
        let mut flows = vec![third];
        for (s, d) in [(1, 2), (2, 0)] {
            flows.push(flow(s, d, ITERS, 0, 0, ITERS * 1024));
        }
        let cell = json!({"load": {"offered_per_s": RATE, "dropped": 0, "achieved_fraction": {"mean": frac}}});
        json!({"workload": {"rate": "20/s"}, "results": [{"flows": vec![cell; 3], "reps": [{"flows": flows}]}]})
    }

    #[test]
    fn open_loop_must_achieve_its_rate_with_every_flow_whole() {
        let good = flow(0, 1, ITERS, 0, 0, ITERS * 1024);
        assert!(open_loop_ok(&open(0.97, good.clone())));
        assert!(!open_loop_ok(&open(0.94, good.clone())), "6% below the offered rate");
        let mut lost = good.clone();
        lost["load"]["series_bytes"] = json!([1]);
        assert!(!open_loop_ok(&open(1.0, lost)), "a series that does not add up");
        let mut short = good.clone();
        short["load"]["writes"] = json!(ITERS - 1);
        assert!(!open_loop_ok(&open(1.0, short)));
        let mut unbacked = good;
        unbacked["load"]["lat_us"]["p999"] = json!(9.0);
        assert!(!open_loop_ok(&open(1.0, unbacked)), "p99.9 of 500 samples");
    }

    #[test]
    fn mix_must_hold_its_shares_and_sizes() {
        let doc = |f: Value| {
            json!({"workload": {"mix": "write:70,read:20,atomic:10", "size_dist": "64:8,1024:2",
                "rate": "poisson:200/s", "mean_size": 256.0}, "sizes": [1024],
                "results": [{"reps": [{"flows": [f.clone(), f]}]}]})
        };
        assert!(mix_ok(&doc(flow(1, 0, 210, 60, 30, 30 * 8 + 270 * 256))));
        assert!(!mix_ok(&doc(flow(1, 0, 270, 0, 30, 30 * 8 + 270 * 256))), "no reads");
        assert!(!mix_ok(&doc(flow(1, 0, 210, 60, 30, 30 * 8 + 270 * 64))), "every size the smallest");
    }
}
