//! RDMA WRITEs posted straight into an mlx5 send queue: WQEs built by
//! `mlx5dv::sq::SqRing`, the doorbell rung with BlueFlame, completions read
//! from the CQ ring directly. On any device that is not mlx5 it says so and
//! exits with status 0.
//!
//! ```text
//! cargo run --release --example mlx5_direct_write -- [DEVICE] [ITERATIONS]
//! ```

mod cli;

use std::time::Instant;

use rrddmma::mlx5dv::{self, cqe::Completion, mmio::HwMmio, obj, seg};
use rrddmma::prim::WcStatus;
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Mr, Pd, QpCaps};
use rrddmma::wrap::connected_rc_pair;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = cli::operands("Usage: mlx5_direct_write [DEVICE [ITERATIONS]]");
    let ctx = match args.first() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    let iters: u32 = args.get(1).map_or(Ok(1000), |s| s.parse())?;
    if !mlx5dv::is_supported(&ctx) {
        println!("unsupported: {} is not an mlx5 device; direct WQE posting needs ConnectX", ctx.name());
        return Ok(());
    }
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 64)?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE);
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 1, &opts)?;
    let mut src = vec![0x5au8; 64];
    let mut dst = vec![0u8; 64];
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    // SAFETY: both buffers outlive their regions and every request on them.
    let (mr_src, mr_dst) =
        unsafe { (Mr::register(&pd, src.as_mut_ptr(), 64, access)?, Mr::register(&pd, dst.as_mut_ptr(), 64, access)?) };
    // SAFETY: the QP's send queue is idle, the QP and CQ are used only
    // through these views below, and every WQE names the registered buffers,
    // which outlive the loop.
    let mut dcq = unsafe { obj::cq_ring(&cq)? };
    // SAFETY: as above.
    let mut sq = unsafe { obj::sq_ring(&qa, &dcq)? };
    let mut mmio = HwMmio;
    let mut out = [Completion::default(); 1];
    let start = Instant::now();
    for _ in 0..iters {
        let w = sq.write(seg::CtrlFlags::CQ_UPDATE, mr_dst.remote().addr_at(0));
        // SAFETY: `mr_src` covers these 64 bytes and outlives the loop.
        unsafe { w.data(64, mr_src.lkey(), mr_src.addr()) }.post(&mut mmio);
        while dcq.poll(&mut out) == 0 {}
        if out[0].status() != WcStatus::SUCCESS {
            return Err(format!("WRITE failed: {:?}", out[0]).into());
        }
        if !sq.retire(&out[0]) {
            return Err(format!("completion names no outstanding WQE of this QP: {:?}", out[0]).into());
        }
    }
    let t = start.elapsed();
    drop((mr_src, mr_dst));
    if dst != src {
        return Err("destination differs from source".into());
    }
    println!(
        "{iters} direct 64-byte RDMA WRITEs on {}: {:.2} us each (post + doorbell + poll)",
        ctx.name(),
        t.as_secs_f64() * 1e6 / f64::from(iters)
    );
    Ok(())
}
