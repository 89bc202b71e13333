//! `cargo xtask bench-verbs`: callgrind's count of userspace instructions
//! per post + poll, rrddmma against C verbs calls.

use std::process::Command;

use crate::callgrind::collected;
use crate::device::{self, Step};
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
/// With `kinds` (e.g. `wr cqex`), only their rows run.
pub fn bench_verbs(kinds: &[String]) -> Result<()> {
    if let Some(k) = kinds.iter().find(|k| !VERBS_ROWS.iter().any(|(kind, _, _)| kind == k)) {
        return Err(format!("bench-verbs: no row of kind {k:?}; kinds: write read send faa cas wr cqex").into());
    }
    let rows: Vec<_> =
        VERBS_ROWS.iter().filter(|(kind, _, _)| kinds.is_empty() || kinds.iter().any(|k| k == kind)).collect();
    run(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--example", "verbs_cost"]))?;
    let rust = root().join("target/release/examples/verbs_cost");
    let c = root().join("target/xtask/verbs_cost_c");
    std::fs::create_dir_all(root().join("target/xtask"))?;
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&c)
        .arg(root().join("benches/verbs_cost/verbs_cost.c"))
        .arg("-libverbs"))?;
    let place = device::locate(None)?;
    eprintln!("bench-verbs on {}", place.describe());
    let mut steps = Vec::new();
    for (kind, batch, _) in &rows {
        for (side, exe) in [("rrddmma", &rust), ("C", &c)] {
            for n in VERBS_N {
                steps.push(Step {
                    name: format!("{side} {kind} batch {batch} n {n}"),
                    command: format!(
                        "valgrind --tool=callgrind --vgdb=no --callgrind-out-file=/dev/null \
                         --toggle-collect='verbs_cost_*' '{}' \"$RRDDMMA_TEST_DEVICE\" {kind} {batch} {n}",
                        exe.display()
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
    let per = |i: usize| (counts[i + 1] as f64 - counts[i] as f64) / (VERBS_N[1] - VERBS_N[0]) as f64;
    println!("| requests | per post | C (libibverbs calls) | rrddmma | ratio rrddmma / C |");
    println!("|---|---|---|---|---|");
    let mut over = Vec::new();
    for (row, (kind, batch, what)) in rows.iter().enumerate() {
        let (r, cc) = (per(row * 4), per(row * 4 + 2));
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
    Ok(())
}
