//! CQE compression on an mlx5 device: which mini-CQE formats the device
//! offers (`mlx5dv_query_device`'s `cqe_comp_caps`) and how many CQEs one
//! compressed session holds. On any device that is not mlx5 it says so and
//! exits with status 0.
//!
//! Creating a compressing CQ and expanding its sessions in the direct
//! poller are not in rrddmma yet (docs/mlx5dv.md).
//!
//! ```text
//! cargo run --example mlx5_cqe_compression -- [DEVICE]
//! ```

mod cli;

use rrddmma::mlx5dv::{self, comp};
use rrddmma::prim::Context;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = cli::operands("Usage: mlx5_cqe_compression [DEVICE]");
    let ctx = match args.first() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    if !mlx5dv::is_supported(&ctx) {
        println!("unsupported: {} is not an mlx5 device; CQE compression needs ConnectX", ctx.name());
        return Ok(());
    }
    let caps = comp::cqe_compression_caps(&ctx)?;
    println!("{}: up to {} CQEs per compressed session", ctx.name(), caps.max_num);
    for f in [comp::CqeResFormat::Hash, comp::CqeResFormat::Csum, comp::CqeResFormat::CsumStridx] {
        match comp::require_cqe_compression(&ctx, f) {
            Ok(()) => println!("  {}: supported", f.name()),
            Err(e) => println!("  {}: {e}", f.name()),
        }
    }
    Ok(())
}
