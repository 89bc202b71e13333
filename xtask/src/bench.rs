//! `cargo xtask bench-wqe`: instructions per RDMA WRITE WQE built and
//! doorbell rung, the Rust `SqRing` writer against the same sequence written
//! with the `mlx5dv.h` helpers, counted by callgrind (the difference between
//! runs of N and 0 iterations, so start-up cost cancels).

use std::process::Command;

use crate::{root, run, Result};

const N: u64 = 100_000;

fn instructions(cmd: &[&str]) -> Result<u64> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .args(cmd)
        .output()
        .map_err(|e| format!("valgrind: {e} (Debian: apt-get install valgrind)"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no instruction count from callgrind:\n{err}").into())
}

fn per_op(exe: &str) -> Result<f64> {
    let zero = instructions(&[exe, "0"])?;
    let n = instructions(&[exe, &N.to_string()])?;
    Ok((n - zero) as f64 / N as f64)
}

/// Runs the comparison and prints a table.
pub fn run_bench() -> Result<()> {
    run(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--example", "wqe_cost"]))?;
    let c_exe = root().join("target/xtask/wqe_cost_c");
    std::fs::create_dir_all(root().join("target/xtask"))?;
    run(Command::new("cc").args(["-O2", "-o"]).arg(&c_exe).arg(root().join("benches/wqe_cost/wqe_cost.c")))?;
    let rust = per_op(&root().join("target/release/examples/wqe_cost").to_string_lossy())?;
    let c = per_op(&c_exe.to_string_lossy())?;
    println!("| writer | instructions per WRITE WQE + doorbell |");
    println!("|---|---|");
    println!("| C, mlx5dv.h helpers (benches/wqe_cost/wqe_cost.c) | {c:.1} |");
    println!("| Rust, mlx5dv::sq::SqRing (examples/wqe_cost.rs) | {rust:.1} |");
    println!("| ratio Rust / C | {:.2} |", rust / c);
    Ok(())
}
