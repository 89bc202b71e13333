//! `cargo xtask demo`: rrddmma-perf beside perftest on one device, timed
//! ([`timing`]) and by userspace instructions per message ([`instr`]);
//! on a ConnectX also the direct path's rows ([`wqe`]).

mod instr;
mod timing;
mod wqe;

use instr::{instr_report, instr_script};
use timing::{timing_report, timing_script};

use std::process::Command;

use crate::device::{self, Step};
use crate::pairs::binary;
use crate::{root, Result};

/// Repetitions of every bandwidth measurement by default, three times as
/// many of each latency test (tools alternate, the order flips every
/// repetition); `--reps N` asks for more (at least 5).
const REPS: usize = 5;

/// `cargo xtask demo [--device NAME] [--reps N] [--no-instructions |
/// --instructions-only] [--no-peers]`: rrddmma-perf and perftest side by
/// side, timed (see [`timing_script`]) and by userspace instructions per
/// message (see [`instr_script`]); then, unless `--no-peers` or
/// `--instructions-only`, one smoke
/// round of `cargo xtask bench-peers` (every Rust peer and C, every
/// workload and ping-pong once, no callgrind) on the same device. When
/// the device is a ConnectX, also `cargo xtask bench-wqe`'s rows (with the
/// instructions) and its WRITE row posted on the device's ring (with the
/// timing); elsewhere a line saying why they are skipped ([`wqe::plan`]).
pub fn demo(args: &[String]) -> Result<()> {
    let wanted = args.iter().position(|a| a == "--device").and_then(|i| args.get(i + 1));
    let reps = match args.iter().position(|a| a == "--reps").and_then(|i| args.get(i + 1)) {
        None => REPS,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= REPS => n,
            _ => return Err(format!("demo --reps {v}: want a whole number of at least {REPS}").into()),
        },
    };
    let instr = !args.iter().any(|a| a == "--no-instructions");
    let timing = !args.iter().any(|a| a == "--instructions-only");
    if !instr && !timing {
        return Err("demo: --no-instructions and --instructions-only together leave nothing to run".into());
    }
    crate::deps::ensure()?;
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let place = device::locate(wanted.map(String::as_str))?;
    let rows = wqe::plan(&place, &crate::report::host_driver(place.device()));
    let direct = match (&rows, timing) {
        (wqe::WqeRows::Run, true) => {
            crate::run(Command::new(env!("CARGO")).args([
                "build",
                "--release",
                "--quiet",
                "--example",
                "mlx5_direct_write",
            ]))?;
            Some(root().join("target/release/examples/mlx5_direct_write"))
        }
        _ => None,
    };
    let mut steps = Vec::new();
    if timing {
        eprintln!(
            "demo: {}; {reps} alternating repetitions of each bandwidth run, {} of each latency run",
            place.describe(),
            timing::latency_reps(reps)
        );
        steps.push(Step { name: "demo".into(), command: timing_script(&me, reps) });
    }
    if instr {
        eprintln!("demo: {}; instructions per message under callgrind (client side)", place.describe());
        steps.push(Step { name: "instructions".into(), command: instr_script(&me) });
    }
    if let Some(exe) = &direct {
        let command = wqe::device_script(&format!("'{}'", exe.display()));
        steps.push(Step { name: "direct WRITE row on the device's ring".into(), command });
    }
    let done = device::run_steps(&place, &steps)?;
    let dir = root().join("target/demo");
    std::fs::create_dir_all(&dir)?;
    let log: String = done.iter().map(|d| d.output.as_str()).collect();
    std::fs::write(dir.join("runs.log"), &log)?;
    let mut outputs = done.iter().map(|d| d.output.as_str());
    let mut failures = Vec::new();
    if timing {
        failures.extend(timing_report(outputs.next().unwrap_or(""), &place, reps, &exe)?);
    }
    if instr {
        failures.extend(instr_report(outputs.next().unwrap_or("")));
    }
    if direct.is_some() {
        failures.extend(wqe::device_report(outputs.next().unwrap_or("")).err());
    }
    match &rows {
        wqe::WqeRows::Skip(why) => println!("\n{why}"),
        wqe::WqeRows::Run if instr => {
            println!("\ndirect-path rows: cargo xtask bench-wqe (instructions per WQE, plain memory)");
            if let Err(e) = crate::bench_wqe::run(&[]) {
                failures.push(format!("bench-wqe: {e}"));
            }
        }
        wqe::WqeRows::Run => {}
    }
    for f in &failures {
        eprintln!("run failed: {f}");
    }
    println!("every run's output: {}", dir.join("runs.log").display());
    if timing && !args.iter().any(|a| a == "--no-peers") {
        let mut peers = vec!["--smoke".to_string()];
        if let Some(d) = wanted {
            peers.extend(["--device".to_string(), d.clone()]);
        }
        if let Err(e) = crate::bench_peers::run_peers(&peers) {
            failures.push(format!("bench-peers --smoke: {e}"));
            eprintln!("run failed: bench-peers --smoke: {e}");
        }
    }
    if !failures.is_empty() {
        return Err(format!("{} demo run(s) failed", failures.len()).into());
    }
    Ok(())
}
