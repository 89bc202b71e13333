//! The libmlx5 differential harness (tests/mlx5_provider.rs, host only):
//! builds the mlx5 provider of the pinned rdma-core tree and the C half of the
//! harness, runs rrddmma's WQE writer and CQE decoder beside libmlx5's
//! `mlx5_post_send` and `mlx5_poll_cq`, and prints the per-kind counts, the
//! mismatches (0) and the mutation checks (which must be caught).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::capture::capture;
use crate::tally::Tally;

/// Runs the harness on the rdma-core tree or tarball `src`.
pub fn check(tally: &mut Tally, src: &Path) {
    let start = Instant::now();
    let (ok, out) = capture(
        Command::new(env!("CARGO"))
            .args(["test", "-p", "rrddmma", "--test", "mlx5_provider", "--", "--ignored", "--nocapture"])
            .env("RRDDMMA_RDMA_CORE_SRC", src),
    );
    println!("libmlx5 differential harness (rdma-core v59 provider vs rrddmma::mlx5dv):");
    for line in out.lines().filter_map(|l| l.strip_prefix("mlx5-provider: ")) {
        println!("  {line}");
    }
    println!("  took {:.0} s, building libmlx5 and the harness included", start.elapsed().as_secs_f64());
    tally.add_run("libmlx5 differential harness", ok, &out);
}
