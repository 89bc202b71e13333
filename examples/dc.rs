//! DC transport on one device: a DC target and a DC initiator; the
//! initiator WRITEs 64 bytes into the target's memory and READs them back,
//! each checked byte for byte.
//!
//! With rdma-core both go through the DCI's direct view and the typed DC
//! builders (`Dci::sq_ring`, `DirectSq::dc(&target).write(..)`): no raw
//! WQE writer, and no `unsafe` beyond the memory and exclusive-queue
//! contracts (registered buffers outliving their requests; the CQ and the
//! send queue used through their views alone). With MLNX_OFED 4.x, which has
//! no direct views, the same transfers go through `Dci::post`. The program
//! builds both ways (`cargo xtask test` builds it both ways). On a device
//! without DC (not mlx5, e.g. SoftRoCE) it says so and exits with status 0.
//!
//! ```text
//! cargo run --example dc -- [DEVICE]
//! ```

mod cli;

use std::time::Duration;

use rrddmma::mlx5dv::dc::{Dci, DciOpts, Dct, DctAddr, DctOpts};
use rrddmma::prim::{AccessFlags, Ah, AhAttr, Context, Cq, Mr, Pd, QpCaps, RemoteAddr, Srq};
#[cfg(rrddmma_mlnx_ofed4)]
use rrddmma::prim::{SendWr, WcOpcode};

const KEY: u64 = 0x0dc0_ffee;
const LEN: usize = 64;

/// WRITE `src` to `remote`, then READ it back into `back`, each waited for:
/// through the DCI's direct view and the typed DC builders.
#[cfg(not(rrddmma_mlnx_ofed4))]
fn transfer(
    dci: &Dci,
    cq: &Cq,
    ah: &Ah,
    to: &DctAddr<'_>,
    (src, back): (&Mr, &Mr),
    remote: RemoteAddr,
) -> Result<(), Box<dyn std::error::Error>> {
    use rrddmma::mlx5dv::{av::AddressVector, cqe::Completion, mmio::HwMmio, obj, seg::CtrlFlags};
    use rrddmma::prim::WcStatus;

    // The DC address of every WQE: the AH's path, the DCT number and key.
    let target = AddressVector::of(ah)?.dc(to.dctn, to.key);
    // SAFETY: the CQ is polled through this view alone from here on (the
    // DCT completes nothing for WRITE and READ), and never through
    // libibverbs after it.
    let mut dcq = unsafe { obj::cq_ring(cq)? };
    // SAFETY: nothing was posted on the DCI before; from here on it is
    // posted to through this view alone, and each WQE's buffer is
    // registered and outlives its completion, waited for below.
    let mut sq = unsafe { dci.sq_ring(&dcq)? };
    let mut mmio = HwMmio;
    let mut out = [Completion::default(); 1];
    let mut wait = |sq: &mut rrddmma::mlx5dv::obj::DirectSq<'_>, what: &str| {
        let start = std::time::Instant::now();
        while dcq.poll(&mut out) == 0 {
            if start.elapsed() > Duration::from_secs(5) {
                return Err(format!("no completion of the DC {what} within 5 s"));
            }
        }
        if out[0].status() != WcStatus::SUCCESS || !sq.retire(&out[0]) {
            return Err(format!("the DC {what} failed: {:?} (stream {:?})", out[0], sq.stream_of(&out[0])));
        }
        Ok(())
    };
    let w = sq.dc(&target).write(CtrlFlags::CQ_UPDATE, remote);
    // SAFETY: `src` covers these bytes and outlives the completion.
    unsafe { w.data(LEN as u32, src.lkey(), src.addr()) }.post(&mut mmio);
    wait(&mut sq, "WRITE")?;
    let w = sq.dc(&target).read(CtrlFlags::CQ_UPDATE, remote);
    // SAFETY: `back` is registered with local write and outlives the completion.
    unsafe { w.data(LEN as u32, back.lkey(), back.addr()) }.post(&mut mmio);
    wait(&mut sq, "READ")?;
    Ok(())
}

/// WRITE `src` to `remote`, then READ it back into `back`, each waited for:
/// through `Dci::post` (MLNX_OFED 4.x has no direct views).
#[cfg(rrddmma_mlnx_ofed4)]
fn transfer(
    dci: &Dci,
    cq: &Cq,
    _ah: &Ah,
    to: &DctAddr<'_>,
    (src, back): (&Mr, &Mr),
    remote: RemoteAddr,
) -> Result<(), Box<dyn std::error::Error>> {
    let sge = [src.sge_at(0, LEN)];
    // SAFETY: `sge` names `src`, registered and untouched until the completion.
    unsafe { dci.post(&SendWr::write(&sge, remote).wr_id(1).signaled(), to)? };
    complete(cq, 1, WcOpcode::RDMA_WRITE)?;
    let sge = [back.sge_at(0, LEN)];
    // SAFETY: as above, for `back`.
    unsafe { dci.post(&SendWr::read(&sge, remote).wr_id(2).signaled(), to)? };
    complete(cq, 2, WcOpcode::RDMA_READ)
}

/// Waits for the completion of `wr_id` and checks it.
#[cfg(rrddmma_mlnx_ofed4)]
fn complete(cq: &Cq, wr_id: u64, opcode: WcOpcode) -> Result<(), Box<dyn std::error::Error>> {
    let wc = cq.spin_one(Duration::from_secs(5))?.ok_or("no completion within 5 s")?;
    if !wc.is_success() || wc.wr_id() != wr_id || wc.opcode() != opcode {
        return Err(format!("expected a successful {opcode} of request {wr_id}, got {wc:?}").into());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = cli::operands("Usage: dc [DEVICE]");
    let ctx = match args.first() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 16)?;
    let srq = Srq::builder(&pd).max_wr(4).build()?;
    let opts = DctOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    let dct = match Dct::create(&pd, &cq, &srq, KEY, &opts) {
        Err(e) if e.is_unsupported() => {
            println!("unsupported: {} has no DC transport ({e})", ctx.name());
            return Ok(());
        }
        r => r?,
    };
    let dci = Dci::create(&pd, &cq, &cq, QpCaps::default())?;
    dci.connect(&DciOpts::default().key(KEY))?;

    // The target is on this device's port 1.
    let port = ctx.query_port(1)?;
    let path = if port.is_ethernet() {
        let index = ctx.roce_v2_gid_index(1)?;
        AhAttr::global(1, index, ctx.query_gid(1, index.into())?)
    } else {
        AhAttr::lid(1, port.lid())
    };
    let ah = Ah::create(&pd, &path)?;
    let to = DctAddr::new(&ah, dct.dctn(), dct.key());

    let mut src: Vec<u8> = (0..LEN as u8).collect();
    let mut dst = vec![0u8; LEN];
    let mut back = vec![0u8; LEN];
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    // SAFETY: the buffers outlive their regions, and every request on them
    // completes (or fails) before the regions are dropped.
    let (mr_src, mr_dst, mr_back) = unsafe {
        (
            Mr::register(&pd, src.as_mut_ptr(), LEN, access)?,
            Mr::register(&pd, dst.as_mut_ptr(), LEN, access)?,
            Mr::register(&pd, back.as_mut_ptr(), LEN, access)?,
        )
    };
    let remote = mr_dst.remote().addr_at(0);
    transfer(&dci, &cq, &ah, &to, (&mr_src, &mr_back), remote)?;

    drop((mr_src, mr_dst, mr_back));
    if dst != src || back != src {
        return Err("the target's memory differs from what was written".into());
    }
    let how = if cfg!(rrddmma_mlnx_ofed4) { "Dci::post" } else { "the typed DC builders on the DCI's direct view" };
    println!("DC on {}: WRITE and READ of {LEN} bytes through DCT {:#x} ({how}) checked", ctx.name(), dct.dctn());
    Ok(())
}
