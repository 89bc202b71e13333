//! rrddmma's peer benchmark. `rrddmma prim|wrap DEVICE WORKLOAD N [settle]`:
//! `prim` builds the pair from `prim` objects (QP builder, endpoint,
//! connect) and registers a `Vec` with `Mr::register`; `wrap` uses
//! `wrap::connected_rc_pair` and `wrap::RegisteredMem`. The operations are
//! `prim` calls in both (`Qp::post_send` of a slice of `SendWr`, `Cq::poll`).

#[path = "../../common.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use common::{die, peers_settle, report, Counting};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Mr, Pd, Qp, QpCaps, QpType, RecvWr, SendWr, Wc};
use rrddmma::wrap::{connected_rc_pair, RegisteredMem};

#[global_allocator]
static A: Counting = Counting;

const ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// The buffer: 32 local slots of 64 B, then 32 remote ones.
const LEN: usize = 64 * 64;

/// The MR is the first field: dropped (deregistered) before its memory.
enum Buf {
    Vec(Mr, #[allow(dead_code)] Vec<u8>),
    Wrap(RegisteredMem),
}

impl Buf {
    fn mr(&self) -> &Mr {
        match self {
            Buf::Vec(mr, _) => mr,
            Buf::Wrap(m) => m.mr(),
        }
    }
}

struct Pair {
    cq: Cq,
    a: Qp,
    b: Qp,
    buf: Buf,
    _pd: Pd,
    _ctx: Context,
}

fn setup(wrap: bool, dev: &str) -> Pair {
    let ctx = Context::open(dev).unwrap_or_else(|e| die("Context::open", e));
    let pd = Pd::alloc(&ctx).unwrap_or_else(|e| die("Pd::alloc", e));
    let cq = Cq::create(&ctx, 128).unwrap_or_else(|e| die("Cq::create", e));
    let opts = ConnectOpts::default().access(ACCESS);
    let caps = QpCaps::default().max_send_wr(64).max_recv_wr(64);
    let (a, b, buf) = if wrap {
        let (a, b) = connected_rc_pair(&pd, &cq, &cq, caps, 1, &opts).unwrap_or_else(|e| die("connected_rc_pair", e));
        let mem = RegisteredMem::new(&pd, LEN).unwrap_or_else(|e| die("RegisteredMem::new", e));
        (a, b, Buf::Wrap(mem))
    } else {
        let a = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build().unwrap_or_else(|e| die("Qp build", e));
        let b = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build().unwrap_or_else(|e| die("Qp build", e));
        let gi = opts.gid_index_on(&ctx).unwrap_or_else(|e| die("gid_index_on", e));
        let ea = a.endpoint(opts.get_port(), gi, 1).unwrap_or_else(|e| die("endpoint", e));
        let eb = b.endpoint(opts.get_port(), gi, 2).unwrap_or_else(|e| die("endpoint", e));
        a.connect(&eb, ea.psn, &opts).unwrap_or_else(|e| die("connect", e));
        b.connect(&ea, eb.psn, &opts).unwrap_or_else(|e| die("connect", e));
        let mut v = vec![0u8; LEN];
        // SAFETY: the Vec lives in the same `Buf` as the MR and is never
        // moved out of it; `Pair` drops the MR with it.
        let mr =
            unsafe { Mr::register(&pd, v.as_mut_ptr(), v.len(), ACCESS) }.unwrap_or_else(|e| die("Mr::register", e));
        (a, b, Buf::Vec(mr, v))
    };
    Pair { cq, a, b, buf, _pd: pd, _ctx: ctx }
}

/// Polls until `want` completions arrived, each a success.
fn poll(p: &Pair, want: usize, empty: &AtomicU64) {
    let mut wcs = [Wc::default(); 4];
    let mut got = 0;
    while got < want {
        let n = p.cq.poll(&mut wcs).unwrap_or_else(|e| die("Cq::poll", e));
        if n == 0 {
            empty.fetch_add(1, Relaxed);
        }
        for wc in &wcs[..n] {
            if !wc.is_success() {
                die("completion", wc);
            }
        }
        got += n;
    }
}

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_default();
    let wrap = match variant.as_str() {
        "prim" => false,
        "wrap" => true,
        _ => {
            eprintln!("usage: rrddmma prim|wrap DEVICE WORKLOAD N [settle]");
            std::process::exit(2)
        }
    };
    let mut argv: Vec<String> = std::env::args().collect();
    argv.remove(1);
    let a = common::args_from(&argv[1..], "rrddmma");
    let krate = if wrap { "rrddmma-wrap" } else { "rrddmma-prim" };
    let empty = AtomicU64::new(0);
    if a.workload == "setup" {
        return report(krate, &a, &empty, || {
            for _ in 0..a.iters {
                drop(std::hint::black_box(setup(wrap, &a.device)));
            }
        });
    }
    let p = setup(wrap, &a.device);
    let mr = p.buf.mr();
    let remote = mr.remote();
    let wl = a.workload.as_str();
    report(krate, &a, &empty, || {
        for _ in 0..a.iters {
            match wl {
                "write1" | "read" | "faa" => {
                    let sges = [mr.sge(0, if wl == "faa" { 8 } else { 64 })];
                    let at = remote.at(32 * 64);
                    let wr = match wl {
                        "write1" => SendWr::write(&sges, at),
                        "read" => SendWr::read(&sges, at),
                        _ => SendWr::fetch_add(&sges, at, 1),
                    };
                    // SAFETY: the entries lie in `mr`, alive for the run; each
                    // request completes before the next is posted.
                    unsafe { p.a.post_send(&mut [wr.signaled()]) }.unwrap_or_else(|e| die("post_send", e));
                    peers_settle(a.settle);
                    poll(&p, 1, &empty);
                }
                "write32" => {
                    let sges: [[rrddmma::prim::Sge; 1]; 32] = std::array::from_fn(|i| [mr.sge(i * 64, 64)]);
                    let mut wrs: [SendWr<'_>; 32] = std::array::from_fn(|i| {
                        let wr = SendWr::write(&sges[i], remote.at(((32 + i) * 64) as u64)).wr_id(i as u64);
                        if i == 31 {
                            wr.signaled()
                        } else {
                            wr
                        }
                    });
                    // SAFETY: as above.
                    unsafe { p.a.post_send(&mut wrs) }.unwrap_or_else(|e| die("post_send", e));
                    peers_settle(a.settle);
                    poll(&p, 1, &empty);
                }
                _ => {
                    let rs = [mr.sge(32 * 64, 64)];
                    let ss = [mr.sge(0, 64)];
                    // SAFETY: as above.
                    unsafe { p.b.post_recv(&mut [RecvWr::new(&rs, 1)]) }.unwrap_or_else(|e| die("post_recv", e));
                    // SAFETY: as above.
                    unsafe { p.a.post_send(&mut [SendWr::send(&ss).signaled()]) }
                        .unwrap_or_else(|e| die("post_send", e));
                    peers_settle(a.settle);
                    poll(&p, 2, &empty);
                }
            }
        }
    });
}
