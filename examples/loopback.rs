//! Loopback: two RC QPs of one device connected to each other; RDMA WRITE,
//! RDMA READ and SEND between them, each checked byte for byte and timed.
//!
//! ```text
//! cargo run --release --example loopback -- [DEVICE] [ITERATIONS] [SIZE]
//! ```
//! DEVICE defaults to the first device libibverbs lists.

mod cli;

use std::time::{Duration, Instant};

use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Mr, Pd, Qp, QpCaps, RecvWr, SendWr, Wc, WcStatus};
use rrddmma::wrap::connected_rc_pair;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const DEPTH: usize = 16;

/// Posts `iters` signalled work requests, at most `DEPTH` outstanding, and
/// waits for all completions.
fn run<'a>(qp: &Qp, cq: &Cq, iters: usize, make: impl Fn(usize) -> SendWr<'a>) -> Res<Duration> {
    let start = Instant::now();
    let (mut posted, mut done) = (0, 0);
    let mut wcs = [Wc::default(); DEPTH];
    while done < iters {
        while posted < iters && posted - done < DEPTH {
            // SAFETY: `make` builds requests whose entries lie in registered
            // regions that outlive this function.
            unsafe { qp.post_send(&mut [make(posted)])? };
            posted += 1;
        }
        let n = cq.poll(&mut wcs)?;
        for wc in &wcs[..n] {
            if wc.status() != WcStatus::SUCCESS {
                return Err(format!("work request {} failed: {wc:?}", wc.wr_id()).into());
            }
        }
        done += n;
    }
    Ok(start.elapsed())
}

fn report(what: &str, iters: usize, size: usize, t: Duration) {
    let bytes = (iters * size) as f64;
    println!(
        "{what:<11} {iters} x {size} B = {:.1} MiB in {:.3} s: {:.1} MiB/s, {:.1} us per op",
        bytes / 1048576.0,
        t.as_secs_f64(),
        bytes / 1048576.0 / t.as_secs_f64(),
        t.as_secs_f64() * 1e6 / iters as f64
    );
}

fn main() -> Res<()> {
    let args = cli::operands("Usage: loopback [DEVICE [ITERATIONS [SIZE]]]");
    let ctx = match args.first() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    let iters: usize = args.get(1).map_or(Ok(256), |s| s.parse())?;
    let size: usize = args.get(2).map_or(Ok(65536), |s| s.parse())?;
    println!("device {} ({})", ctx.name(), rrddmma::build_info());

    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, DEPTH as u32)?;
    let recv_cq = Cq::create(&ctx, DEPTH as u32)?;
    let gid_index = ctx.roce_v2_gid_index(1)?;
    let opts =
        ConnectOpts::default().gid_index(Some(gid_index)).access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    let caps = QpCaps::default().max_send_wr(DEPTH as u32).max_recv_wr(DEPTH as u32);
    let (qa, qb) = connected_rc_pair(&pd, &cq, &recv_cq, caps, 1, &opts)?;
    println!("QPs {} <-> {} connected (RC, GID index {gid_index})", qa.qpn(), qb.qpn());

    let mut src: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let mut dst = vec![0u8; size];
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    // SAFETY: the buffers are declared before the MRs, so they outlive them,
    // and every work request completes before `main` returns.
    let (mr_src, mr_dst) = unsafe {
        (Mr::register(&pd, src.as_mut_ptr(), size, access)?, Mr::register(&pd, dst.as_mut_ptr(), size, access)?)
    };

    let src_sges = [mr_src.checked_sge_at(0, size)?]; // over 4 GiB - 1: a RangeError
    let remote = mr_dst.remote().addr_at(0);
    let t = run(&qa, &cq, iters, |i| SendWr::write(&src_sges, remote).wr_id(i as u64).signaled())?;
    if dst != src {
        return Err("RDMA WRITE: destination differs from source".into());
    }
    report("RDMA WRITE", iters, size, t);

    dst.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 13) as u8);
    let t = run(&qa, &cq, iters, |i| SendWr::read(&src_sges, remote).wr_id(i as u64).signaled())?;
    if src != dst {
        return Err("RDMA READ: local buffer differs from remote".into());
    }
    report("RDMA READ", iters, size, t);

    // SEND: one receive posted on qb per send from qa, into `dst`.
    dst.fill(0);
    let mut sent = 0;
    let mut wcs = [Wc::default(); 1];
    let start = Instant::now();
    for i in 0..iters {
        let rsges = [mr_dst.sge_at(0, size)];
        // SAFETY: the entry lies in `mr_dst`, alive until the end of `main`.
        unsafe { qb.post_recv(&mut [RecvWr::new(&rsges, i as u64)])? };
        run(&qa, &cq, 1, |i| SendWr::send(&src_sges).wr_id(i as u64).signaled())?;
        while recv_cq.poll(&mut wcs)? == 0 {}
        if !wcs[0].is_success() || wcs[0].byte_len() as usize != size {
            return Err(format!("receive {i} failed: {:?}", wcs[0]).into());
        }
        sent += wcs[0].byte_len() as usize;
    }
    let t = start.elapsed();
    if dst != src || sent != iters * size {
        return Err("SEND: received bytes differ".into());
    }
    report("SEND/RECV", iters, size, t);
    Ok(())
}
