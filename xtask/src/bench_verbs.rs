//! `cargo xtask bench-verbs [--record | --gate] [KIND..]`: callgrind's
//! count of userspace instructions per post + poll, rrddmma against C verbs
//! calls.
//!
//! The counts repeat to the instruction, so the rows' counts (ours and C's)
//! are recorded in `benches/verbs_cost/counts.json` (`--record` writes the
//! rows measured); the instruction gate of `cargo xtask test`
//! ([`gate_check`], through the shared [`gate`] module) runs the rows of
//! [`GATE_ROWS`] once each and fails when one of ours is above its
//! recorded count by more than the file's margin; `--gate` runs that gate
//! alone.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bench_wqe::gate;
use crate::callgrind::collected;
use crate::device::{self, Check, Step};
use crate::tally::Tally;
use crate::{root, run, Result};

/// Iteration counts whose difference gives the per-iteration count.
const VERBS_N: [u64; 2] = [100, 400];

/// The bench-verbs rows: (kind argument, batch, what is posted and polled).
const VERBS_ROWS: [(&str, u32, &str); 9] = [
    ("write", 1, "RDMA WRITE 64 B"),
    ("write", 32, "RDMA WRITE 64 B"),
    ("read", 1, "RDMA READ 64 B"),
    ("send", 1, "SEND 64 B + its RECV (post_recv, 2 polls)"),
    ("faa", 1, "atomic fetch-and-add"),
    ("cas", 1, "atomic compare-and-swap"),
    ("wr", 1, "RDMA WRITE, `ibv_wr_*` (`Qp::wr_batch`)"),
    ("wr", 32, "RDMA WRITE, `ibv_wr_*` (`Qp::wr_batch`)"),
    ("cqex", 1, "RDMA WRITE, extended CQ (`Cq::start_poll`)"),
];

/// The target ratio to C of a kind's row: the classic post and poll (one
/// provider call each, as in C) at C's cost, the others within 2 %.
fn target(kind: &str) -> f64 {
    if matches!(kind, "write" | "read" | "faa" | "cas") {
        1.00
    } else {
        1.02
    }
}

/// `cargo xtask bench-verbs`: userspace instructions per iteration (post +
/// poll) of each of [`VERBS_ROWS`], rrddmma (`examples/verbs_cost.rs`)
/// against C (`benches/verbs_cost/verbs_cost.c`), counted by callgrind
/// inside the functions named `verbs_cost_*` only, on the default device.
/// With `kinds` (e.g. `wr cqex`), only their rows run; kind `aio` names
/// the async rows ([`bench_aio`]), which run first when no kind is named.
pub fn bench_verbs(args: &[String]) -> Result<()> {
    let record = args.iter().any(|a| a == "--record");
    if args.iter().any(|a| a == "--gate") {
        return device::run_alone("bench-verbs instruction gate", &[gate_check()?]);
    }
    let kinds: Vec<String> = args.iter().filter(|a| !a.starts_with("--")).cloned().collect();
    let kinds = &kinds[..];
    if let Some(k) = kinds.iter().find(|k| *k != "aio" && !VERBS_ROWS.iter().any(|(kind, _, _)| kind == k)) {
        return Err(format!("bench-verbs: no row of kind {k:?}; kinds: write read send faa cas wr cqex aio").into());
    }
    let aio = kinds.iter().any(|k| k == "aio");
    if kinds.is_empty() || aio {
        bench_aio()?;
    }
    if aio && kinds.len() == 1 {
        return Ok(());
    }
    let rows: Vec<_> =
        VERBS_ROWS.iter().filter(|(kind, _, _)| kinds.is_empty() || kinds.iter().any(|k| k == kind)).collect();
    let (rust, c) = build()?;
    let place = device::locate(None)?;
    eprintln!("bench-verbs on {}", place.describe());
    let mut steps = Vec::new();
    for (kind, batch, _) in &rows {
        for (side, exe) in [("rrddmma", &rust), ("C", &c)] {
            for n in VERBS_N {
                steps.push(Step {
                    name: format!("{side} {kind} batch {batch} n {n}"),
                    command: callgrind(exe, kind, *batch, n),
                });
            }
        }
    }
    let done = device::run_steps(&place, &steps)?;
    let mut counts = Vec::new();
    for d in &done {
        match collected(&d.output) {
            Some(n) if d.code == Some(0) => counts.push(n),
            _ => return Err(format!("{} failed ({:?}):\n{}", d.name, d.code, d.output).into()),
        }
    }
    let per = |i: usize| (counts[i + 1] as f64 - counts[i] as f64) / (VERBS_N[1] - VERBS_N[0]) as f64;
    println!("| requests | per post | C (libibverbs calls) | rrddmma | ratio rrddmma / C |");
    println!("|---|---|---|---|---|");
    let mut over = Vec::new();
    let mut measured = Vec::new();
    for (row, (kind, batch, what)) in rows.iter().enumerate() {
        let (r, cc) = (per(row * 4), per(row * 4 + 2));
        measured.push(gate::Measured { row: row_name(kind, *batch), ours: r, reference: Some(cc) });
        // Compared at the two decimals the targets are stated in.
        if (r / cc * 100.0).round() / 100.0 > target(kind) {
            over.push(format!("{kind} x{batch} {:.3} (target {:.2})", r / cc, target(kind)));
        }
        println!("| {what} | {batch} | {cc:.1} | {r:.1} | {:.3} |", r / cc);
    }
    println!(
        "\nuserspace instructions per iteration (post + poll), device {}; {}",
        place.device(),
        if over.is_empty() {
            "every row at its target (classic rows 1.00x C, the others 1.02x)".to_string()
        } else {
            format!("above target: {}", over.join(", "))
        }
    );
    if record {
        // The rows not measured now keep their recorded counts.
        let mut all = measured.clone();
        if let Ok(old) = gate::read(&counts_file()) {
            for (row, (ours, reference)) in old.rows {
                if !all.iter().any(|m| m.row == row) {
                    all.push(gate::Measured { row, ours, reference });
                }
            }
        }
        all.sort_by(|a, b| a.row.cmp(&b.row));
        gate::record(&counts_file(), GATE_WHAT, &all)?;
    } else if let Ok(counts) = gate::read(&counts_file()) {
        let (fail, note) = gate::judge(&counts, &measured);
        for f in fail.iter().chain(&note) {
            println!("against {}: {f}", counts_file().strip_prefix(root()).unwrap_or(&counts_file()).display());
        }
    }
    Ok(())
}

/// What the counts file holds.
const GATE_WHAT: &str = "bench-verbs rows: userspace instructions per iteration (post + poll), rrddmma and C, on rxe0 \
                         in the VM (cargo xtask bench-verbs --record)";

/// The rows the instruction gate of `cargo xtask test` runs (kind, batch):
/// the classic post and poll, SEND + RECV and the extended CQ, one request
/// each (the other rows run the same post and poll entries).
const GATE_ROWS: [(&str, u32); 3] = [("write", 1), ("send", 1), ("cqex", 1)];

/// Iterations of a gate run: one run per row, its count divided by this
/// (the measured functions do no one-off work, so a run of N iterations
/// collects exactly N times the per-iteration count).
const GATE_N: u64 = 100;

/// The counts file of the verbs rows.
fn counts_file() -> PathBuf {
    root().join("benches/verbs_cost/counts.json")
}

/// A row's name in the counts file.
fn row_name(kind: &str, batch: u32) -> String {
    format!("{kind} x{batch}")
}

/// Builds the Rust example (release) and the C program: their paths.
fn build() -> Result<(PathBuf, PathBuf)> {
    run(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--example", "verbs_cost"]))?;
    let rust = root().join("target/release/examples/verbs_cost");
    let c = root().join("target/xtask/verbs_cost_c");
    std::fs::create_dir_all(root().join("target/xtask"))?;
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&c)
        .arg(root().join("benches/verbs_cost/verbs_cost.c"))
        .arg("-libverbs"))?;
    Ok((rust, c))
}

/// The callgrind command of one run: `n` iterations of `kind` x `batch`.
fn callgrind(exe: &Path, kind: &str, batch: u32, n: u64) -> String {
    format!(
        "valgrind --tool=callgrind --vgdb=no --callgrind-out-file=/dev/null --toggle-collect='verbs_cost_*' '{}' \
         \"$RRDDMMA_TEST_DEVICE\" {kind} {batch} {n}",
        exe.display()
    )
}

/// The marker a gate run's output starts with.
const GATE_MARK: &str = "== gate row ";

/// The instruction gate of the verbs rows, as one device check for the
/// session `cargo xtask test` already runs: rrddmma's side of each of
/// [`GATE_ROWS`] once under callgrind ([`GATE_N`] iterations), judged by
/// [`gate::check`] against `benches/verbs_cost/counts.json`.
pub fn gate_check() -> Result<Check> {
    let (rust, _) = build()?;
    let command = GATE_ROWS
        .iter()
        .map(|(kind, batch)| {
            format!(
                "echo '{GATE_MARK}{}'; {} 2>&1 || exit 1",
                row_name(kind, *batch),
                callgrind(&rust, kind, *batch, GATE_N)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Check { step: Step { name: "instruction gate (verbs rows)".into(), command }, judge: Box::new(judge_gate) })
}

/// Reads the gate runs' counts out of `d` and checks them.
fn judge_gate(d: &device::Done, tally: &mut Tally) {
    let what = "verbs rows (bench-verbs)";
    let runs: Vec<(&str, Option<u64>)> =
        d.output.split(GATE_MARK).skip(1).map(|run| (run.lines().next().unwrap_or(""), collected(run))).collect();
    let measured: Vec<gate::Measured> = runs
        .iter()
        .filter_map(|(row, n)| {
            Some(gate::Measured { row: row.to_string(), ours: (*n)? as f64 / GATE_N as f64, reference: None })
        })
        .collect();
    if d.code != Some(0) || measured.len() != GATE_ROWS.len() {
        tally.check_output(&format!("instruction gate: {what} measured (exit {:?})", d.code), false, &d.output);
        return;
    }
    for m in &measured {
        println!("  instruction gate: {} {:.2} instructions per iteration", m.row, m.ours);
    }
    gate::check(tally, what, &counts_file(), &measured);
}

/// Operation counts of the async rows' two runs (whole batches of 1 or 32).
const AIO_N: [u64; 2] = [320, 1280];

/// The async rows' targets: `aio local` / sync event at 1 and 32 in flight.
const AIO_TARGET: [(u32, f64); 2] = [(1, 1.10), (32, 1.05)];

/// The async paths of `examples/aio_cost.rs`: (its argument, row name,
/// whether the row is held to the targets: the endpoint as built, under
/// its own `block_on` and under tokio's; the always-queueing rule and the
/// `Sync` endpoint are shown beside them).
const AIO_SIDES: [(&str, &str, bool); 5] = [
    ("event", "sync event (`Qp::post_send` + `Cq::wait_one`)", false),
    ("local", "aio local (`LocalEndpoint`, its `block_on`)", true),
    ("local-tokio", "aio local, under tokio's `block_on`", true),
    (
        "local-queue",
        "aio local, `post_when_idle(false)`: one doorbell per pass (its `block_on`; not held to the targets)",
        false,
    ),
    ("rc", "aio `RcEndpoint` (`Sync`, its driver task), under tokio's `block_on`", false),
];

/// The async rows: userspace instructions per awaited 64-byte RDMA WRITE,
/// 1 and 32 in flight, through the synchronous event path, `LocalEndpoint`
/// under its own `block_on` and under tokio's, `LocalEndpoint` with
/// `post_when_idle(false)` under its own, and the `Sync` `RcEndpoint`
/// under tokio's, each
/// counted by callgrind inside the functions named `verbs_cost_*` of
/// `examples/aio_cost.rs` (the whole measured loop, waiting included),
/// with the ratio to the synchronous event path.
fn bench_aio() -> Result<()> {
    run(Command::new(env!("CARGO")).args([
        "build",
        "--release",
        "--quiet",
        "--features",
        "tokio",
        "--example",
        "aio_cost",
    ]))?;
    let exe = root().join("target/release/examples/aio_cost");
    let place = device::locate(None)?;
    eprintln!("bench-verbs (aio) on {}", place.describe());
    let mut steps = Vec::new();
    for (batch, _) in AIO_TARGET {
        for (side, _, _) in AIO_SIDES {
            for n in AIO_N {
                steps.push(Step {
                    name: format!("aio {side} batch {batch} n {n}"),
                    command: format!(
                        "valgrind --tool=callgrind --vgdb=no --callgrind-out-file=/dev/null \
                         --toggle-collect='verbs_cost_*' '{}' \"$RRDDMMA_TEST_DEVICE\" {side} {batch} {}",
                        exe.display(),
                        n / u64::from(batch)
                    ),
                });
            }
        }
    }
    let done = device::run_steps(&place, &steps)?;
    let mut counts = Vec::new();
    for d in &done {
        match collected(&d.output) {
            Some(n) if d.code == Some(0) => counts.push(n),
            _ => return Err(format!("{} failed ({:?}):\n{}", d.name, d.code, d.output).into()),
        }
    }
    let per = |i: usize| (counts[i + 1] as f64 - counts[i] as f64) / (AIO_N[1] - AIO_N[0]) as f64;
    println!("| path | in flight | instructions per op | ratio to sync event |");
    println!("|---|---|---|---|");
    let mut verdicts = Vec::new();
    for (b, (batch, target)) in AIO_TARGET.iter().enumerate() {
        let base = b * AIO_SIDES.len() * 2;
        let sync = per(base);
        for (k, (side, what, held)) in AIO_SIDES.iter().enumerate() {
            let x = per(base + k * 2);
            println!("| {what} | {batch} | {x:.1} | {:.3} |", x / sync);
            if *held {
                let ok = (x / sync * 100.0).round() / 100.0 <= *target;
                verdicts.push(format!(
                    "{side} x{batch} {:.3} (target {target:.2}: {})",
                    x / sync,
                    if ok { "met" } else { "NOT met" }
                ));
            }
        }
    }
    println!(
        "\nuserspace instructions per awaited 64-byte RDMA WRITE, device {}; {}\n",
        place.device(),
        verdicts.join(", ")
    );
    Ok(())
}
