//! The third column of the `zip` row: libmlx5 does not expand compressed
//! CQEs, so the column runs the Linux kernel's own mlx5e decompression
//! instead. benches/wqe_cost/wqe_cost_kernel.c is compiled after
//! `mlx5e_poll_rx_cq` and the functions and definitions it needs, cut from
//! Debian's `linux-source-6.1` ([`crate::kernel_src`], downloaded once) by
//! the kernel oracle's extractor (tests/kernel_oracle/extract.rs, with its
//! user-space plumbing), and drains the same sessions as the C and Rust
//! programs' `zip` row.

use std::path::PathBuf;
use std::process::Command;

use crate::{root, run, Result};

#[allow(dead_code)] // the extractor's other cuts serve the oracle
#[path = "../../../tests/kernel_oracle/extract.rs"]
mod extract;

/// Builds `wqe_cost_kernel` (rows: `zip`); an error says why there is none.
pub fn build() -> Result<(PathBuf, String)> {
    let src = crate::kernel_src::unpacked(crate::kernel_src::ORACLE_SERIES)?;
    let here = root().join("tests/kernel_oracle");
    // The extractor panics, naming the definition, on a tree without it.
    let parts = std::panic::catch_unwind(|| extract::mlx5e_rx(&src.tree, &here, |_, text| text)).map_err(|_| {
        format!("{} lacks a definition the kernel column cuts (see the panic above)", src.tree.display())
    })?;
    let out = root().join("target/xtask/wqe-kernel");
    std::fs::create_dir_all(&out)?;
    let c = out.join("wqe_cost_kernel.c");
    let driver = std::fs::read_to_string(root().join("benches/wqe_cost/wqe_cost_kernel.c"))?;
    std::fs::write(&c, format!("{}\n\n{driver}", parts.join("\n\n")))?;
    let exe = out.join("wqe_cost_kernel");
    run(Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-o"])
        .arg(&exe)
        .arg(&c))?;
    Ok((exe, format!("{} {}", src.package, src.version)))
}

/// Puts the kernel's count into the `zip` row's libmlx5 column (`libmlx5`,
/// one entry per row of `rows`) and says so in its note; a kernel program
/// that cannot be built leaves the column as it was, with the reason.
pub fn fill(rows: &[(&str, &str)], libmlx5: &mut [Option<f64>], notes: &mut Vec<String>) {
    let Some(i) = rows.iter().position(|(r, _)| *r == "zip") else { return };
    if !notes.iter().any(|n| n.starts_with("zip, libmlx5 v59:")) {
        notes.push("zip, libmlx5 v59: libmlx5 does not expand compressed CQEs".into());
    }
    let note = notes.iter_mut().find(|n| n.starts_with("zip, libmlx5 v59:"));
    match build().and_then(|(exe, source)| Ok((super::measure(&[(exe, "zip".to_string())])?, source))) {
        Ok((counts, source)) => {
            libmlx5[i] = Some(counts[0]);
            if let Some(n) = note {
                *n = format!(
                    "zip, libmlx5 v59: libmlx5 does not expand compressed CQEs; this column is the Linux kernel's \
                     mlx5e decompression ({source}'s mlx5e_poll_rx_cq, budget 8, benches/wqe_cost/wqe_cost_kernel.c)"
                );
            }
        }
        Err(e) => {
            if let Some(n) = note {
                n.push_str(&format!("; the kernel's mlx5e column was not built ({e})"));
            }
        }
    }
}
