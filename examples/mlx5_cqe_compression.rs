//! CQE compression on an mlx5 device: which mini-CQE formats the device
//! offers (`mlx5dv_query_device`'s `cqe_comp_caps`), how many CQEs one
//! compressed session holds, and for each offered format a compressing CQ
//! (`CqBuilder::mlx5_compression`) with its direct view, which expands compressed
//! sessions as it polls (`poll` for completions, `poll_cqes` for whole
//! CQEs with the RSS hash or checksum, `poll_scattered` for receives whose
//! payload the device scattered into the CQE). Every other format gives a
//! typed `Unsupported`. On any device that is not mlx5 it says so and exits with
//! status 0.
//!
//! ```text
//! cargo run --example mlx5_cqe_compression -- [DEVICE]
//! ```

mod cli;

use rrddmma::mlx5dv::cqe::Cqe64;
use rrddmma::mlx5dv::mini::CqeResFormat;
use rrddmma::mlx5dv::{self, comp};
use rrddmma::prim::{Context, Cq};

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
    for f in [CqeResFormat::Hash, CqeResFormat::Csum, CqeResFormat::CsumStridx] {
        let cq = match Cq::builder(&ctx, 256).mlx5_compression(f).build() {
            Ok(cq) => cq,
            Err(e) => {
                println!("  {}: {e}", f.name());
                continue;
            }
        };
        // SAFETY: this CQ is polled through this view only (the view
        // expands compressed sessions by itself; `Cq::poll` would panic).
        let mut view = unsafe { mlx5dv::obj::cq_ring(&cq) }?;
        let mut cqes = [Cqe64::default(); 16];
        let n = view.poll_cqes(&mut cqes);
        println!("  {}: compressing CQ {:#x} of {} entries, {n} CQEs waiting", f.name(), view.cqn(), cq.capacity());
        // Small receives may come with their payload in the CQE itself
        // (scatter-to-CQE: up to 32 bytes in a 64-byte CQE): it is copied
        // out before the entry goes back to the device.
        let mut payload = [0u8; 64];
        while let Some((c, len)) = view.poll_scattered(&mut payload) {
            println!(
                "    QP {:#x} WQE {}: {:?}, {len} payload bytes from the CQE: {:02x?}",
                c.qpn(),
                c.wqe_counter(),
                c.status(),
                &payload[..len]
            );
        }
    }
    Ok(())
}
