//! The Rust side of `cargo xtask bench-verbs`: a loopback RC pair on one
//! device; each iteration arms the CQ, posts BATCH RDMA WRITEs of 64 bytes as
//! one prebuilt `SendList` (only the last signaled) with `Qp::post_send_list`, waits for
//! the completion event, and takes the one completion with one `Cq::poll`.
//! callgrind counts only `verbs_cost_post` and `verbs_cost_poll`; the C side
//! is `benches/verbs_cost/verbs_cost.c`, making the same verbs calls.
//!
//! ```text
//! cargo run --release --example verbs_cost -- DEVICE BATCH ITERATIONS
//! ```

mod cli;

use rrddmma::prim::{
    AccessFlags, CompChannel, ConnectOpts, Context, Cq, CqBuilder, Error, Mr, Pd, Qp, QpCaps, SendList, SendWr, Wc,
};
use rrddmma::wrap::connected_rc_pair;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Ends the program on a failed call (the C side's `die`).
#[cold]
#[inline(never)]
fn die(e: Error) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}

/// The measured post: one `ibv_post_send` of the whole list.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_post(qp: &Qp, list: &mut SendList<'_>) {
    // SAFETY: the entries lie in a registered region alive for the whole run,
    // and every batch completes before the next is posted.
    if let Err(e) = unsafe { qp.post_send_list(list) } {
        die(e)
    }
}

/// The measured poll: one `ibv_poll_cq` into a caller buffer.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_poll(cq: &Cq, wcs: &mut [Wc]) -> usize {
    match cq.poll(wcs) {
        Ok(n) => n,
        Err(e) => die(e),
    }
}

fn main() -> Res<()> {
    let args = cli::operands("Usage: verbs_cost DEVICE BATCH ITERATIONS");
    let [dev, batch, iters] = &args[..] else {
        return Err("usage: verbs_cost DEVICE BATCH ITERATIONS".into());
    };
    let batch: usize = batch.parse()?;
    let iters: usize = iters.parse()?;
    let ctx = Context::open(dev)?;
    let pd = Pd::new(&ctx)?;
    let ch = CompChannel::new(&ctx)?;
    let cq = CqBuilder::new(&ctx, 64).channel(&ch).build()?;
    let rcq = Cq::new(&ctx, 64)?;
    let opts = ConnectOpts { access: AccessFlags::REMOTE_WRITE, ..ConnectOpts::default() };
    let caps = QpCaps { max_send_wr: 64, max_recv_wr: 1, ..QpCaps::default() };
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &rcq, caps, 1, &opts)?;
    let mut buf = vec![0u8; 2 * 64 * batch];
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    // SAFETY: `buf` outlives the MR (declared before it) and all requests.
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), access)? };
    let sges: Vec<[rrddmma::prim::Sge; 1]> = (0..batch).map(|i| [mr.sge(i * 64, 64)]).collect();
    let wrs: Vec<SendWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let wr = SendWr::write(s, mr.remote().at(((batch + i) * 64) as u64)).wr_id(i as u64);
            if i + 1 == batch {
                wr.signaled()
            } else {
                wr
            }
        })
        .collect();
    let mut list = SendList::new(wrs);
    let mut wcs = [Wc::default(); 32];
    for i in 0..iters {
        cq.req_notify(false)?;
        verbs_cost_post(&qa, &mut list);
        while !cq.wait(None)? {}
        let n = verbs_cost_poll(&cq, &mut wcs);
        if n != 1 || !wcs[0].is_success() {
            return Err(format!("iteration {i}: {n} completions, first {:?}", wcs[0]).into());
        }
    }
    println!("{iters} x {batch} RDMA WRITEs posted and completed");
    Ok(())
}
