//! Loopback: two RC QPs of one device connected to each other; RDMA WRITE,
//! RDMA READ and SEND between them, each checked byte for byte and timed.
//!
//! ```text
//! cargo run --release --example loopback -- [DEVICE] [ITERATIONS] [SIZE]
//! ```
//! DEVICE defaults to the first device libibverbs lists.

use std::time::{Duration, Instant};

use rrddmma::bindings as ffi;
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Mr, Pd, Qp, QpCaps, Wc, WcStatus, WrOpcode};
use rrddmma::wrap::connected_rc_pair;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const DEPTH: usize = 16;

/// Posts `iters` signalled work requests, at most `DEPTH` outstanding, and
/// waits for all completions.
fn run(qp: &Qp, cq: &Cq, iters: usize, mut make: impl FnMut(usize) -> ffi::ibv_send_wr) -> Res<Duration> {
    let start = Instant::now();
    let (mut posted, mut done) = (0, 0);
    let mut wcs = [Wc::default(); DEPTH];
    while done < iters {
        while posted < iters && posted - done < DEPTH {
            let mut wr = make(posted);
            // SAFETY: `make` builds requests whose SGEs lie in registered
            // regions that outlive this function.
            unsafe { qp.post_send(&mut wr)? };
            posted += 1;
        }
        let n = cq.poll(&mut wcs)?;
        for wc in &wcs[..n] {
            if wc.status() != WcStatus::IBV_WC_SUCCESS {
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ctx = match args.first() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    let iters: usize = args.get(1).map_or(Ok(256), |s| s.parse())?;
    let size: usize = args.get(2).map_or(Ok(65536), |s| s.parse())?;
    let len = u32::try_from(size)?;
    println!("device {} ({})", ctx.name(), rrddmma::build_info());

    let pd = Pd::new(&ctx)?;
    let cq = Cq::new(&ctx, DEPTH as u32)?;
    let recv_cq = Cq::new(&ctx, DEPTH as u32)?;
    let gid_index = u8::try_from(ctx.roce_v2_gid_index(1)?)?;
    let opts = ConnectOpts {
        gid_index,
        access: AccessFlags::IBV_ACCESS_REMOTE_WRITE | AccessFlags::IBV_ACCESS_REMOTE_READ,
        ..ConnectOpts::default()
    };
    let caps = QpCaps { max_send_wr: DEPTH as u32, max_recv_wr: DEPTH as u32, ..QpCaps::default() };
    let (qa, qb) = connected_rc_pair(&pd, &cq, &recv_cq, caps, 1, &opts)?;
    println!("QPs {} <-> {} connected (RC, GID index {gid_index})", qa.qpn(), qb.qpn());

    let mut src: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let mut dst = vec![0u8; size];
    let access = AccessFlags::IBV_ACCESS_LOCAL_WRITE
        | AccessFlags::IBV_ACCESS_REMOTE_WRITE
        | AccessFlags::IBV_ACCESS_REMOTE_READ;
    // SAFETY: the buffers are declared before the MRs, so they outlive them,
    // and every work request completes before `main` returns.
    let (mr_src, mr_dst) = unsafe {
        (Mr::register(&pd, src.as_mut_ptr(), size, access)?, Mr::register(&pd, dst.as_mut_ptr(), size, access)?)
    };

    let mut sge_src = mr_src.sge(0, len);
    let rdma = |opcode, sge: &mut ffi::ibv_sge, remote: &Mr, i: usize| {
        let mut wr = ffi::ibv_send_wr {
            wr_id: i as u64,
            sg_list: sge,
            num_sge: 1,
            opcode,
            send_flags: ffi::ibv_send_flags::IBV_SEND_SIGNALED.0,
            ..Default::default()
        };
        wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: remote.addr(), rkey: remote.rkey() };
        wr
    };

    let t = run(&qa, &cq, iters, |i| rdma(WrOpcode::IBV_WR_RDMA_WRITE, &mut sge_src, &mr_dst, i))?;
    if dst != src {
        return Err("RDMA WRITE: destination differs from source".into());
    }
    report("RDMA WRITE", iters, size, t);

    dst.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 13) as u8);
    let t = run(&qa, &cq, iters, |i| rdma(WrOpcode::IBV_WR_RDMA_READ, &mut sge_src, &mr_dst, i))?;
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
        let mut rsge = mr_dst.sge(0, len);
        let mut rwr = ffi::ibv_recv_wr { wr_id: i as u64, sg_list: &mut rsge, num_sge: 1, ..Default::default() };
        // SAFETY: the SGE lies in `mr_dst`, alive until the end of `main`.
        unsafe { qb.post_recv(&mut rwr)? };
        run(&qa, &cq, 1, |i| ffi::ibv_send_wr {
            opcode: WrOpcode::IBV_WR_SEND,
            ..rdma(WrOpcode::IBV_WR_SEND, &mut sge_src, &mr_dst, i)
        })?;
        while recv_cq.poll(&mut wcs)? == 0 {}
        if !wcs[0].is_success() || wcs[0].byte_len() != len {
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
