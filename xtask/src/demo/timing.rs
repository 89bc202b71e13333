//! The demo's timed runs: every test kind with each tool against its own
//! server, repeated with the tools alternating; a table, ratios and a plot.

use std::process::Command;

use crate::device;
use crate::pairs::{pair, rows};
use crate::{root, run, Result};

/// Iterations per demo run.
const DEMO_ITERS: u64 = 1000;

/// Latency runs per bandwidth run: a latency pair takes seconds, and its
/// ratio swings with the VM's scheduling (runs of one tool fall into modes
/// µs apart), so the median of more pairs is what keeps it meaningful.
const LAT_FACTOR: usize = 3;

/// The repetitions of each latency test when the bandwidth runs are repeated `reps` times.
pub(crate) fn latency_reps(reps: usize) -> usize {
    reps * LAT_FACTOR
}

/// The repetitions of `it` when the bandwidth runs are repeated `reps` times.
fn reps_of(it: &Item, reps: usize) -> usize {
    if it.bw {
        reps
    } else {
        latency_reps(reps)
    }
}

/// One demo measurement: (perftest command, rrddmma-perf test, flags, size).
struct Item {
    name: &'static str,
    perftest: &'static str,
    ours: &'static str,
    size: u64,
    bw: bool,
}

fn demo_items() -> Vec<Item> {
    let mut v: Vec<Item> = (1..=16)
        .map(|i| Item { name: "write bw", perftest: "ib_write_bw", ours: "write bw", size: 1 << i, bw: true })
        .collect();
    v.push(Item { name: "write lat", perftest: "ib_write_lat", ours: "write lat", size: 2, bw: false });
    v.push(Item { name: "read lat", perftest: "ib_read_lat", ours: "read lat", size: 2, bw: false });
    v.push(Item { name: "send lat", perftest: "ib_send_lat", ours: "send lat", size: 2, bw: false });
    v.push(Item { name: "atomic lat", perftest: "ib_atomic_lat", ours: "atomic lat", size: 8, bw: false });
    v
}

/// The median ratio rrddmma-perf / perftest of the repetitions that have
/// both, with its spread (lowest, highest); `None` when none has both.
fn ratio_spread(p: &[Option<f64>], r: &[Option<f64>]) -> Option<(f64, f64, f64)> {
    // A value that is not a positive finite number (perftest prints "inf"
    // or 0 when its clock estimate fails) has no ratio.
    let ok = |v: &Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    let ratios: Vec<f64> = p.iter().zip(r).filter_map(|(p, r)| Some(ok(r)? / ok(p)?)).collect();
    let lo = ratios.iter().copied().fold(f64::MAX, f64::min);
    let hi = ratios.iter().copied().fold(f64::MIN, f64::max);
    Some((median(ratios)?, lo, hi))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 })
}

/// The client's result row of one run: (bandwidth MiB/s) or (median, p99) in
/// µs. Bandwidth comes from the message rate (printed with six decimals by
/// both tools; MB/s has two, too coarse for small messages here).
fn client_numbers(out: &str, size: u64, perftest: bool, bw: bool) -> Option<(f64, f64)> {
    let client = out.split("--- server output").next()?;
    let r = rows(client, size).into_iter().next()?;
    let mib = |mpps: f64| mpps * 1e6 * size as f64 / 1048576.0;
    match (bw, perftest) {
        (true, true) => Some((mib(*r.get(4)?), 0.0)),
        (true, false) => Some((mib(r[3]), 0.0)),
        (false, _) => Some((*r.get(4)?, *r.get(7)?)),
    }
}

/// The timed runs: every [`demo_items`] entry with each tool against its own
/// server, `reps` times, the tools alternating.
pub(crate) fn timing_script(me: &str, reps: usize) -> String {
    let items = demo_items();
    let mut script = String::new();
    let mut port = 18700;
    for rep in 0..latency_reps(reps) {
        for (k, it) in items.iter().enumerate().filter(|(_, it)| rep < reps_of(it, reps)) {
            let size_flag = if it.ours.starts_with("atomic") { String::new() } else { format!("-s {}", it.size) };
            let common = format!("-d $D -x $X -n {DEMO_ITERS} {size_flag}");
            let runs = [
                // `-F`: perftest's CPU-frequency estimate fails under TCG
                // ("Correlation coefficient r^2 < 0.9") and it then refuses
                // to print its report.
                ("perftest", format!("{} {common} -F", it.perftest)),
                ("rrddmma", format!("{me} {} {common} --no-progress", it.ours)),
            ];
            let order: Vec<usize> = if (rep + k) % 2 == 0 { vec![0, 1] } else { vec![1, 0] };
            for i in order {
                let (tool, cmd) = &runs[i];
                port = if port >= 18790 { 18700 } else { port + 1 };
                script.push_str(&format!(
                    "echo '=== {tool}|{k}|{rep}'; ( {} ); ",
                    pair(&format!("{cmd} -p {port}"), &format!("{cmd} -p {port} 127.0.0.1"))
                ));
            }
        }
    }
    script.push_str("echo '=== end'");
    script
}

/// One tool's values per repetition of an item (`None`: failed or not run).
type Samples = Vec<Option<(f64, f64)>>;

/// Files each run of `out` under its item and repetition: `results[k]` =
/// (perftest values, rrddmma values), one slot per repetition; a run
/// without numbers or with a failed side goes to `failures`.
fn file_runs(out: &str, items: &[Item], reps: usize, results: &mut [(Samples, Samples)], failures: &mut Vec<String>) {
    for chunk in out.split("=== ").skip(1) {
        let head = chunk.lines().next().unwrap_or("");
        let f: Vec<&str> = head.split('|').collect();
        let [tool, k, rep] = f[..] else { continue };
        let (Ok(k), Ok(rep)) = (k.parse::<usize>(), rep.parse::<usize>()) else { continue };
        let Some(it) = items.get(k).filter(|it| rep < reps_of(it, reps)) else { continue };
        let perftest = tool == "perftest";
        let ok = chunk.contains("CLIENT-RC=0") && chunk.contains("SERVER-RC=0");
        match client_numbers(chunk, it.size, perftest, it.bw).filter(|_| ok) {
            Some(v) if perftest => results[k].0[rep] = Some(v),
            Some(v) => results[k].1[rep] = Some(v),
            None => failures.push(format!("{tool} {} {} B:\n{chunk}", it.name, it.size)),
        }
    }
}

/// The timed runs' table, ratios and plot; returns the failed runs.
pub(crate) fn timing_report(
    out: &str,
    place: &device::Place,
    reps: usize,
    exe: &std::path::Path,
) -> Result<Vec<String>> {
    let items = demo_items();
    let dir = root().join("target/demo");
    let mut results: Vec<(Samples, Samples)> =
        items.iter().map(|it| (vec![None; reps_of(it, reps)], vec![None; reps_of(it, reps)])).collect();
    let mut failures = Vec::new();
    file_runs(out, &items, reps, &mut results, &mut failures);

    let mut csv = String::from("series,size,value\n");
    println!(
        "\nrrddmma-perf vs perftest on {} ({reps} alternating runs of each bandwidth size, {} of each latency \
         test, {DEMO_ITERS} iterations each, inline off; values are medians, the ratio is the median of the \
         runs' ratios, spread its lowest-highest)\n",
        place.describe(),
        latency_reps(reps)
    );
    println!("| test | size (B) | perftest | rrddmma-perf | ratio | spread |");
    println!("|---|---|---|---|---|---|");
    let mut bw_ratios = Vec::new();
    let mut lat_ratios = Vec::new();
    for (it, (p, r)) in items.iter().zip(&results) {
        let whats: &[(usize, &str)] = if it.bw { &[(0, "MiB/s")] } else { &[(0, "median µs"), (1, "p99 µs")] };
        for &(i, what) in whats {
            let pick = |v: &Samples| -> Vec<Option<f64>> {
                v.iter().map(|x| x.map(|x| if i == 0 { x.0 } else { x.1 })).collect()
            };
            let (pv, rv) = (pick(p), pick(r));
            let (Some(pm), Some(rm), Some((ratio, lo, hi))) = (
                median(pv.iter().flatten().copied().collect()),
                median(rv.iter().flatten().copied().collect()),
                ratio_spread(&pv, &rv),
            ) else {
                println!("| {} {what} | {} | failed | failed | - | - |", it.name, it.size);
                continue;
            };
            if it.bw {
                csv.push_str(&format!(
                    "perftest (ib_write_bw),{},{pm:.3}\nrrddmma-perf,{},{rm:.3}\n",
                    it.size, it.size
                ));
                bw_ratios.push(ratio);
            } else {
                lat_ratios.push((format!("{} {}", it.name, what.trim_end_matches(" µs")), ratio, lo, hi));
            }
            println!("| {} {what} | {} | {pm:.2} | {rm:.2} | {ratio:.2}x | {lo:.2}-{hi:.2}x |", it.name, it.size);
        }
    }
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp();
    println!();
    if !bw_ratios.is_empty() {
        let min = bw_ratios.iter().copied().fold(f64::MAX, f64::min);
        println!("write bandwidth rrddmma-perf / perftest: geometric mean {:.3}x, lowest {min:.3}x (>= 1.00 is as fast or faster)", geo(&bw_ratios));
    }
    for (name, r, lo, hi) in &lat_ratios {
        println!(
            "{name} latency rrddmma-perf / perftest: {r:.3}x, spread {lo:.3}-{hi:.3}x (<= 1.00 is as fast or faster)"
        );
    }
    let csv_path = dir.join("write_bw_sweep.csv");
    let svg_path = dir.join("write_bw_sweep.svg");
    std::fs::write(&csv_path, &csv)?;
    run(Command::new(exe)
        .arg("plot")
        .arg(&csv_path)
        .arg(&svg_path)
        .arg(format!("RDMA WRITE bandwidth on {}, rrddmma-perf vs perftest", place.device()))
        .arg("MiB/s"))?;
    println!("plot: {}\ndata: {}", svg_path.display(), csv_path.display());
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's ratio is the median of the repetitions' own ratios; a
    /// repetition missing either tool is left out of the ratio and spread.
    #[test]
    fn demo_ratio_is_the_median_of_paired_runs_with_its_spread() {
        let p = [Some(10.0), Some(20.0), None, Some(10.0), Some(10.0)];
        let r = [Some(12.0), Some(20.0), Some(99.0), Some(9.0), None];
        let (m, lo, hi) = ratio_spread(&p, &r).unwrap();
        assert_eq!((m, lo, hi), (1.0, 0.9, 1.2));
        assert!(ratio_spread(&[None], &[Some(1.0)]).is_none());
        // perftest's "inf" or 0 (clock estimate failed) gives no ratio.
        let p = [Some(f64::INFINITY), Some(0.0), Some(10.0)];
        let r = [Some(5.0), Some(5.0), Some(11.0)];
        assert_eq!(ratio_spread(&p, &r).unwrap(), (1.1, 1.1, 1.1));
    }

    /// Each latency test runs three times as often as each bandwidth size,
    /// both tools every time, and the report files each run under its own
    /// repetition (a latency run past the bandwidth repetitions included).
    #[test]
    fn demo_runs_each_latency_test_three_times_per_bandwidth_run() {
        let script = timing_script("me", 5);
        let items = demo_items();
        for (k, it) in items.iter().enumerate() {
            for tool in ["perftest", "rrddmma"] {
                let runs = script.matches(&format!("=== {tool}|{k}|")).count();
                assert_eq!(runs, if it.bw { 5 } else { 15 }, "{} {tool}", it.name);
            }
        }
        let send = items.iter().position(|it| it.name == "send lat").unwrap();
        let row = |v: &str| {
            format!(
                "=== {{}}|{send}|14\n #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%\n                  2 1000 1.0 9.0 {v} 5.0 1.0 8.0 9.0\nCLIENT-RC=0\nSERVER-RC=0\n--- server output\n"
            )
        };
        let out = row("10.0").replace("{}", "perftest") + &row("9.0").replace("{}", "rrddmma");
        let mut samples = vec![(vec![None; 15], vec![None; 15]); items.len()];
        file_runs(&out, &items, 5, &mut samples, &mut Vec::new());
        assert_eq!(samples[send].0[14].map(|v| v.0), Some(10.0));
        assert_eq!(samples[send].1[14].map(|v| v.0), Some(9.0));
    }
}
