//! The libmlx5 differential harness (tests/mlx5_provider.rs, host only):
//! builds the mlx5 provider of the pinned rdma-core tree and the C half of the
//! harness (an executable and a library), runs rrddmma's WQE writer,
//! `WrBatch` / `DciBatch` and CQE decoder beside libmlx5's `mlx5_post_send`,
//! `ibv_wr_*` entries and `mlx5_poll_cq`, masked atomics against independent
//! references, and prints the per-kind counts, the mismatches (0) and the
//! mutation checks (which must be caught). In the same run, CQE compression
//! against the kernel's mlx5e decompression (tests/mlx5_kernel_oracle.rs),
//! from Debian's `linux-source-6.1` ([`crate::kernel_src`]), and the PRM
//! layouts of `mlx5dv::prm` against the kernel's `mlx5_ifc.h` through its
//! `MLX5_SET` / `MLX5_GET` (tests/mlx5_prm_oracle.rs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::capture::capture;
use crate::root;
use crate::tally::Tally;

/// The rdma-core build folder of the static `mlx5` source build
/// (`target/static-mlx5`), when it has built the provider.
pub(crate) fn source_build() -> Option<PathBuf> {
    let base = root().join("target/static-mlx5/debug/build");
    std::fs::read_dir(base)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rrddmma-"))
        .map(|e| e.path().join("out/rdma-core-build"))
        .filter(|d| d.join("lib/statics/libmlx5.a").is_file() && d.join("CMakeCache.txt").is_file())
        .max_by_key(|d| std::fs::metadata(d.join("lib/statics/libmlx5.a")).and_then(|m| m.modified()).ok())
}

/// Runs the harness: on the source build's provider when `cargo xtask test`
/// has made it, else on its own build of the rdma-core tree or tarball `src`.
pub fn check(tally: &mut Tally, src: &Path) {
    let start = Instant::now();
    // The kernel oracle's source: downloaded and unpacked once, shared with siw.
    let linux = crate::kernel_src::unpacked(crate::kernel_src::ORACLE_SERIES);
    // The PRM members only the newest kernel's mlx5_ifc.h has (dp_ordering).
    let newest = crate::kernel_src::newest();
    let fetched = start.elapsed().as_secs_f64();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["test", "-p", "rrddmma", "--test", "mlx5_provider"]);
    match &linux {
        Ok(l) => {
            cmd.args(["--test", "mlx5_kernel_oracle", "--test", "mlx5_prm_oracle"])
                .env("RRDDMMA_LINUX_SRC", &l.tree)
                .env("RRDDMMA_LINUX_SRC_VERSION", &l.version);
        }
        Err(e) => tally.check(&format!("kernel mlx5e oracle: linux-source-6.1 downloaded and unpacked ({e})"), false),
    }
    match &newest {
        Ok(l) => {
            cmd.env("RRDDMMA_LINUX_NEWEST_SRC", &l.tree).env("RRDDMMA_LINUX_NEWEST_SRC_VERSION", &l.version);
        }
        Err(e) => tally.check(&format!("PRM oracle: the newest kernel's source downloaded and unpacked ({e})"), false),
    }
    cmd.args(["--", "--ignored", "--nocapture"]).env("RRDDMMA_RDMA_CORE_SRC", src);
    if let Some(dir) = source_build() {
        cmd.env("RRDDMMA_MLX5_PROVIDER_BUILD", dir);
    }
    let (ok, out) = capture(&mut cmd);
    println!("libmlx5 differential harness (rdma-core v59 provider vs rrddmma::mlx5dv) and the kernel mlx5e oracle:");
    for line in out.lines().filter_map(|l| l.strip_prefix("mlx5-provider: ")) {
        println!("  {line}");
    }
    println!(
        "  took {:.0} s, building libmlx5 and the harness included ({fetched:.0} s of it for the kernel sources)",
        start.elapsed().as_secs_f64()
    );
    tally.add_run("libmlx5 differential harness and kernel mlx5e oracle", ok, &out);
}
