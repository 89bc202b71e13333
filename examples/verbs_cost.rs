//! The Rust side of `cargo xtask bench-verbs`: a loopback RC pair on one
//! device; each iteration arms the CQ, posts BATCH requests of one kind
//! (only the last signaled), waits for the completion event, and takes the
//! completion with one poll. callgrind counts only the functions named
//! `verbs_cost_*`; the C side is `benches/verbs_cost/verbs_cost.c`, making
//! the same verbs calls.
//!
//! Kinds: `write`, `read`, `send` (BATCH receives posted as one prebuilt
//! [`RecvList`], then the sends; both CQs polled), `faa` and `cas` (8-byte
//! atomics), all posted
//! as one prebuilt [`SendList`] with `Qp::post_send_list` and polled with
//! `Cq::poll`; `wr` (RDMA WRITEs through the extended post API,
//! `Qp::wr_batch`, one doorbell) and `cqex` (RDMA WRITEs as `write`, the
//! completion taken from an extended CQ with `Cq::start_poll`).
//!
//! ```text
//! cargo run --release --example verbs_cost -- DEVICE KIND BATCH ITERATIONS
//! ```

mod cli;

use rrddmma::prim::{
    AccessFlags, CompChannel, ConnectOpts, Context, Cq, Error, Mr, Pd, Qp, QpCaps, QpType, RecvList, RecvWr,
    RemoteAddr, SendFlags, SendList, SendOps, SendWr, Sge, Wc, WcFlagsEx,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "Usage: verbs_cost DEVICE write|read|send|faa|cas|wr|cqex BATCH ITERATIONS";

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

/// One prebuilt request of the extended API (what the C side reads from
/// its `ibv_send_wr` array).
#[derive(Debug)]
pub struct WrItem {
    wr_id: u64,
    flags: SendFlags,
    sge: Sge,
    remote: RemoteAddr,
}

/// The measured post of the extended API: `ibv_wr_start`, one operation
/// and its entry per request, `ibv_wr_complete`.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_post_wr(qp: &Qp, wrs: &[WrItem]) {
    // SAFETY: as `verbs_cost_post`.
    let mut b = unsafe { qp.wr_batch() };
    for w in wrs {
        // SAFETY: as `verbs_cost_post`.
        unsafe { b.rdma_write(w.wr_id, w.flags, &w.sge, w.remote) };
    }
    if let Err(e) = b.complete() {
        die(e)
    }
}

/// The measured receive post: one `ibv_post_recv` of the whole prebuilt list.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_post_recv(qp: &Qp, list: &mut RecvList<'_>) {
    // SAFETY: the entries lie in a registered region alive for the whole run,
    // and every batch completes before the next is posted.
    if let Err(e) = unsafe { qp.post_recv_list(list) } {
        die(e)
    }
}

/// The measured poll: one `ibv_poll_cq` into a caller buffer; the count
/// returned as 32 bits, as the C side returns its `int`.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_poll(cq: &Cq, wcs: &mut [Wc]) -> u32 {
    match cq.poll(wcs) {
        // At most `wcs.len()` (32).
        #[allow(clippy::cast_possible_truncation)]
        Ok(n) => n as u32,
        Err(e) => die(e),
    }
}

/// The measured extended poll: one pass (`ibv_start_poll`, `ibv_next_poll`
/// until empty, the pass's end), each completion's status checked; returns
/// how many completions were taken, or `usize::MAX` on a failed one.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_poll_ex(cq: &Cq) -> usize {
    let mut n = 0;
    let mut p = match cq.start_poll() {
        Ok(Some(p)) => p,
        Ok(None) => return 0,
        Err(e) => die(e),
    };
    loop {
        if !p.wc().status().is_success() {
            return usize::MAX;
        }
        n += 1;
        p = match p.advance() {
            Ok(Some(p)) => p,
            Ok(None) => return n,
            Err(e) => die(e),
        };
    }
}

fn main() -> Res<()> {
    let args = cli::operands(USAGE);
    let [dev, kind, batch, iters] = &args[..] else {
        return Err(USAGE.into());
    };
    let kind = kind.as_str();
    if !["write", "read", "send", "faa", "cas", "wr", "cqex"].contains(&kind) {
        return Err(USAGE.into());
    }
    let batch: usize = batch.parse()?;
    let iters: usize = iters.parse()?;
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let ch = CompChannel::create(&ctx)?;
    let mut cqb = Cq::builder(&ctx, 64).channel(&ch);
    if kind == "cqex" {
        cqb = cqb.extended(WcFlagsEx::default());
    }
    let cq = cqb.build()?;
    let rcq = Cq::create(&ctx, 64)?;
    let access =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let opts = ConnectOpts::default().access(access);
    let caps = QpCaps::default().max_send_wr(64).max_recv_wr(64);
    let mut qb = Qp::builder(&pd, QpType::RC, &cq, &rcq).caps(caps);
    if kind == "wr" {
        qb = qb.send_ops(SendOps::RDMA_WRITE);
    }
    let qa = qb.build()?;
    let qb = Qp::builder(&pd, QpType::RC, &cq, &rcq).caps(caps).build()?;
    let gi = opts.gid_index_on(&ctx)?;
    let (ea, eb) = (qa.endpoint(opts.get_port(), gi, 1)?, qb.endpoint(opts.get_port(), gi, 2)?);
    qa.connect(&eb, ea.psn, &opts)?;
    qb.connect(&ea, eb.psn, &opts)?;
    // Per request 64 bytes at i * 64 (local) and (batch + i) * 64 (remote).
    let mut buf = vec![0u8; 2 * 64 * batch];
    // SAFETY: `buf` outlives the MR (declared before it) and all requests.
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), access)? };
    let len = if kind == "faa" || kind == "cas" { 8 } else { 64 };
    let sges: Vec<[Sge; 1]> = (0..batch).map(|i| [mr.sge_at(i * 64, len)]).collect();
    let rsges: Vec<[Sge; 1]> = (0..batch).map(|i| [mr.sge_at((batch + i) * 64, 64)]).collect();
    let wrs: Vec<SendWr<'_>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let remote = mr.remote().addr_at((batch + i) * 64);
            let wr = match kind {
                "read" => SendWr::read(s, remote),
                "send" => SendWr::send(s),
                "faa" => SendWr::fetch_add(s, remote, 1),
                "cas" => SendWr::compare_swap(s, remote, 0, 0),
                _ => SendWr::write(s, remote),
            }
            .wr_id(i as u64);
            if i + 1 == batch {
                wr.signaled()
            } else {
                wr
            }
        })
        .collect();
    let mut recvs = RecvList::new(rsges.iter().enumerate().map(|(i, s)| RecvWr::new(s, i as u64)).collect());
    let wr_list: Vec<WrItem> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| WrItem {
            wr_id: i as u64,
            flags: if i + 1 == batch { SendFlags::SIGNALED } else { SendFlags::empty() },
            sge: s[0],
            remote: mr.remote().addr_at((batch + i) * 64),
        })
        .collect();
    let mut list = SendList::new(wrs);
    let mut wcs = [Wc::default(); 32];
    for i in 0..iters {
        if kind == "send" {
            verbs_cost_post_recv(&qb, &mut recvs);
        }
        cq.req_notify(false)?;
        if kind == "wr" {
            verbs_cost_post_wr(&qa, &wr_list);
        } else {
            verbs_cost_post(&qa, &mut list);
        }
        while !cq.wait(None)? {}
        let (n, ok) = if kind == "cqex" {
            let n = verbs_cost_poll_ex(&cq);
            (n, n != usize::MAX)
        } else {
            let n = verbs_cost_poll(&cq, &mut wcs) as usize;
            (n, n > 0 && wcs[0].is_success())
        };
        if n != 1 || !ok {
            return Err(format!("iteration {i}: {n} completions, first {:?}", wcs[0]).into());
        }
        if kind == "send" {
            // The receives completed before the send's acknowledgement; one
            // measured poll takes them, a short one is topped up unmeasured.
            let mut got = verbs_cost_poll(&rcq, &mut wcs) as usize;
            while got < batch {
                got += rcq.poll(&mut wcs[got..])?;
            }
            if got != batch || !wcs[..batch].iter().all(Wc::is_success) {
                return Err(format!("iteration {i}: {got} receive completions, first {:?}", wcs[0]).into());
            }
        }
    }
    println!("{iters} x {batch} {kind} requests posted and completed");
    Ok(())
}
