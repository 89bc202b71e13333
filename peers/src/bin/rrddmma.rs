//! rrddmma's peer benchmark. `rrddmma prim|wrap DEVICE WORKLOAD N [settle]`:
//! `prim` builds the pair from `prim` objects (QP builder, endpoint,
//! connect) and registers a `Vec` with `Mr::register`; `wrap` uses
//! `wrap::connected_rc_pair` and `wrap::RegisteredMem`. The operations are
//! `prim` calls in both (`Qp::post_send` of a slice of `SendWr`, `Cq::poll`;
//! 32 WRITEs per post through `Qp::wr_batch`, the `ibv_wr_*` API).
//!
//! `rrddmma event|aio|aio-nospin|aio-local DEVICE OP-SIZE-INFLIGHT N`: the async
//! comparison (module `asynch`).

#[path = "../../common.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use common::{die, peers_settle, report, Counting};
use rrddmma::prim::{
    AccessFlags, ConnectOpts, Context, Cq, Mr, Pd, Qp, QpCaps, QpType, RecvWr, SendFlags, SendOps, SendWr, Sge, Wc,
    WrOpcode,
};
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

/// `batch`: the QPs take `ibv_wr_*` RDMA WRITEs (`QpBuilder::send_ops`),
/// for the 32-per-post workload.
fn setup(wrap: bool, dev: &str, batch: bool) -> Pair {
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
        let build = || {
            let q = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps);
            let q = if batch { q.send_ops(SendOps::RDMA_WRITE) } else { q };
            q.build().unwrap_or_else(|e| die("Qp build", e))
        };
        let (a, b) = (build(), build());
        let gi = opts.gid_index_on(&ctx).unwrap_or_else(|e| die("gid_index_on", e));
        let opts = opts.gid_index(Some(gi));
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
fn poll(p: &Pair, wcs: &mut [Wc; 4], want: usize, empty: &AtomicU64) {
    let mut got = 0;
    while got < want {
        let n = p.cq.poll(wcs).unwrap_or_else(|e| die("Cq::poll", e));
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
    let mut argv: Vec<String> = std::env::args().collect();
    argv.remove(1);
    let a = common::args_from(&argv[1..], "rrddmma");
    let wrap = match variant.as_str() {
        "prim" => false,
        "wrap" => true,
        "event" | "aio" | "aio-nospin" | "aio-local" => return asynch::main(&variant, &a),
        _ => {
            eprintln!("usage: rrddmma prim|wrap|event|aio|aio-nospin|aio-local DEVICE WORKLOAD N [settle]");
            std::process::exit(2)
        }
    };
    let krate = if wrap { "rrddmma-wrap" } else { "rrddmma-prim" };
    let empty = AtomicU64::new(0);
    if a.workload == "setup" {
        return report(krate, &a, &empty, || {
            for _ in 0..a.iters {
                drop(std::hint::black_box(setup(wrap, &a.device, false)));
            }
        });
    }
    let p = setup(wrap, &a.device, a.workload == "write32");
    let mr = p.buf.mr();
    let remote = mr.remote();
    let wl = a.workload.as_str();
    let sges32: [Sge; 32] = std::array::from_fn(|i| mr.sge_at(i * 64, 64));
    // One completion array for the run, as the other programs keep theirs.
    let mut wcs = [Wc::default(); 4];
    // The workload is chosen once; each loop does only its own work.
    report(krate, &a, &empty, || match wl {
        "write1" | "read" | "faa" => {
            let (len, op) = match wl {
                "write1" => (64, WrOpcode::RDMA_WRITE),
                "read" => (64, WrOpcode::RDMA_READ),
                _ => (8, WrOpcode::ATOMIC_FETCH_AND_ADD),
            };
            for _ in 0..a.iters {
                // Every request built per post, as the C program does.
                let sges = [mr.sge_at(0, len)];
                let at = remote.addr_at(32 * 64);
                let wr = match op {
                    WrOpcode::RDMA_WRITE => SendWr::write(&sges, at),
                    WrOpcode::RDMA_READ => SendWr::read(&sges, at),
                    _ => SendWr::fetch_add(&sges, at, 1),
                };
                // SAFETY: the entries lie in `mr`, alive for the run; each
                // request completes before the next is posted.
                unsafe { p.a.post_send(&mut [wr.signaled()]) }.unwrap_or_else(|e| die("post_send", e));
                peers_settle(a.settle);
                poll(&p, &mut wcs, 1, &empty);
            }
        }
        "write32" => {
            for _ in 0..a.iters {
                // The batch API (`ibv_wr_*`), as sideway posts: every
                // request written into the send queue per post, the last
                // signaled, one doorbell.
                // SAFETY: the entries lie in `mr`, alive for the run; the
                // batch completes before the next is posted.
                let mut b = unsafe { p.a.wr_batch() };
                for (i, sge) in sges32.iter().enumerate() {
                    let flags = if i == 31 { SendFlags::SIGNALED } else { SendFlags::empty() };
                    // SAFETY: as above; the QP was made with RDMA_WRITE.
                    unsafe { b.rdma_write(i as u64, flags, sge, remote.addr_at((32 + i) * 64)) };
                }
                b.complete().unwrap_or_else(|e| die("WrBatch::complete", e));
                peers_settle(a.settle);
                poll(&p, &mut wcs, 1, &empty);
            }
        }
        _ => {
            for _ in 0..a.iters {
                let rs = [mr.sge_at(32 * 64, 64)];
                let ss = [mr.sge_at(0, 64)];
                // SAFETY: as above.
                unsafe { p.b.post_recv(&mut [RecvWr::new(&rs, 1)]) }.unwrap_or_else(|e| die("post_recv", e));
                // SAFETY: as above.
                unsafe { p.a.post_send(&mut [SendWr::send(&ss).signaled()]) }.unwrap_or_else(|e| die("post_send", e));
                peers_settle(a.settle);
                poll(&p, &mut wcs, 2, &empty);
            }
        }
    });
}

/// The async layer beside the synchronous event path: RDMA WRITE or READ of
/// SIZE bytes, INFLIGHT at a time, each signaled and awaited.
///
/// - `event`: `prim` on a CQ with a completion channel: post INFLIGHT
///   requests (one `Qp::post_send` each), then `Cq::wait_one` for each
///   completion (poll; when empty, arm and sleep on the channel);
/// - `aio`: `wrap::aio::RcEndpoint::write` / `read` awaited (INFLIGHT
///   futures joined), the driver with its default adaptive spin;
/// - `aio-nospin`: the same with `AioOpts::spin_polls(0)` (the driver arms
///   at its first empty poll).
/// - `aio-local`: `wrap::aio::LocalEndpoint::write` / `read` awaited
///   (INFLIGHT futures joined) on one thread under the endpoint's own
///   `block_on` (the requests of a pass posted as one list; sleeps on the
///   CQ's completion channel), no driver task.
///
/// `frontpage` (`aio` and `aio-nospin`; `event` prints UNSUPPORTED):
/// async-rdma's README exchange per iteration, as `peers/async-rdma` runs
/// it: the client requests an 8-byte region of the server
/// (`request_remote_mr`), writes the second half of its own region into
/// it, reads it back and checks it, and gives it back (`send_remote_mr`);
/// the server takes it back (`receive_local_mr`) and checks it.
///
/// A warm-up of [`WARM_UP`] operations runs before the measured region,
/// which then runs N operations.
mod asynch {
    use std::alloc::Layout;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::AtomicU64;
    use std::task::Poll;
    use std::time::Duration;

    use rrddmma::prim::{AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, SendWr};
    use rrddmma::wrap::aio::{AioOpts, Listener, LocalEndpoint, LocalMr, MrPool, RcEndpoint};
    use rrddmma::wrap::{connected_rc_pair, RegisteredMem};

    use crate::common::{die, report, Args};

    /// Operations run before the measured region (whole batches).
    const WARM_UP: usize = 64;

    /// The README's data: the second half of the client's 8 bytes written.
    const EXPECTED: [u8; 8] = [0, 0, 0, 0, 1, 1, 1, 1];

    /// (is a WRITE, bytes, in flight) of `OP-SIZE-INFLIGHT`.
    fn parse(w: &str) -> (bool, usize, usize) {
        let mut it = w.split('-');
        let (op, size, n) = (it.next(), it.next(), it.next());
        let num = |s: Option<&str>| s.and_then(|s| s.parse().ok()).unwrap_or_else(|| die("workload", w));
        (op == Some("write"), num(size), num(n))
    }

    pub fn main(variant: &str, a: &Args) {
        let empty = AtomicU64::new(0);
        let krate = format!("rrddmma-{variant}");
        if a.workload == "frontpage" && (variant == "event" || variant == "aio-local") {
            println!("UNSUPPORTED crate={krate} workload=frontpage reason=this path has no memory-region calls");
            return;
        }
        let (write, size, inflight) = if a.workload == "frontpage" { (true, 8, 1) } else { parse(&a.workload) };
        let batches = (a.iters as usize).div_ceil(inflight);
        if variant == "event" {
            return event(&krate, a, write, size, inflight, batches, &empty);
        }
        if variant == "aio-local" {
            return local(&krate, a, write, size, inflight, batches, &empty);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| die("tokio runtime", e));
        let o = if variant == "aio" { AioOpts::new(&a.device) } else { AioOpts::new(&a.device).spin_polls(0) };
        let (server, client) = rt.block_on(async {
            let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap_or_else(|e| die("Listener::bind", e));
            let addr = l.local_addr().unwrap_or_else(|e| die("local_addr", e));
            let (s, c) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
            (s.unwrap_or_else(|e| die("accept", e)), c.unwrap_or_else(|e| die("connect", e)))
        });
        if a.workload == "frontpage" {
            let run = |n: u64| {
                rt.block_on(async {
                    for _ in 0..n {
                        frontpage(&server, &client).await
                    }
                })
            };
            run(WARM_UP as u64);
            return report(&krate, a, &empty, || run(a.iters));
        }
        let (s, c) = (&server, &client);
        let (remote, mut bufs) = rt.block_on(async {
            let layout = Layout::from_size_align(size * inflight, 64).expect("layout");
            let target = s.alloc_local_mr(layout).unwrap_or_else(|e| die("alloc_local_mr", e));
            s.send_local_mr(target).await.unwrap_or_else(|e| die("send_local_mr", e));
            let remote = c.receive_remote_mr().await.unwrap_or_else(|e| die("receive_remote_mr", e));
            let one = Layout::from_size_align(size, 64).expect("layout");
            let bufs: Vec<_> = (0..inflight)
                .map(|_| Some(c.alloc_local_mr(one).unwrap_or_else(|e| die("alloc_local_mr", e))))
                .collect();
            (remote, bufs)
        });
        let client = &client;
        let round = |bufs: &mut Vec<Option<LocalMr>>, batches: usize| {
            rt.block_on(async {
                for _ in 0..batches {
                    if inflight == 1 {
                        let b = bufs[0].take().expect("buffer");
                        let at = remote.addr_at(0);
                        let r =
                            if write { client.write(b, 0..size, at).await } else { client.read(b, 0..size, at).await };
                        bufs[0] = Some(r.unwrap_or_else(|e| die("write/read", e)));
                    } else if write {
                        together(bufs, |b, j| client.write(b, 0..size, remote.addr_at(j * size))).await;
                    } else {
                        together(bufs, |b, j| client.read(b, 0..size, remote.addr_at(j * size))).await;
                    }
                }
            })
        };
        round(&mut bufs, WARM_UP.div_ceil(inflight));
        report(&krate, &Args { iters: (batches * inflight) as u64, ..a.clone() }, &empty, || round(&mut bufs, batches));
        drop(server);
    }

    /// One iteration of async-rdma's README exchange, both sides awaited
    /// together.
    async fn frontpage(server: &RcEndpoint, client: &RcEndpoint) {
        let client_side = async {
            let layout = Layout::new::<[u8; 8]>();
            let rmr = client.request_remote_mr(layout).await.unwrap_or_else(|e| die("request_remote_mr", e));
            let mut lmr = client.alloc_local_mr(layout).unwrap_or_else(|e| die("alloc_local_mr", e));
            lmr.write(0, &[1; 8]);
            // The second half of the local region into the remote one's.
            let half = rmr.checked_addr_at(4, 4).unwrap_or_else(|e| die("checked_addr_at", e));
            let lmr = client.write(lmr, 4..8, half).await.unwrap_or_else(|e| die("write", e));
            // The whole remote region read back and checked.
            let lmr = client.read(lmr, 0..8, rmr.addr_at(0)).await.unwrap_or_else(|e| die("read", e));
            check("client", &lmr);
            client.send_remote_mr(rmr).await.unwrap_or_else(|e| die("send_remote_mr", e));
        };
        let server_side = async {
            let lmr = server.receive_local_mr().await.unwrap_or_else(|e| die("receive_local_mr", e));
            check("server", &lmr);
        };
        tokio::join!(client_side, server_side);
    }

    fn check(who: &str, lmr: &LocalMr) {
        let mut data = [0u8; 8];
        lmr.read(0, &mut data);
        if data != EXPECTED {
            die(&format!("{who}: the region holds"), data);
        }
    }

    /// One operation per buffer (`op` of the buffer and its index), awaited
    /// together; each buffer back in its place.
    async fn together<F>(bufs: &mut [Option<LocalMr>], op: impl Fn(LocalMr, usize) -> F)
    where
        F: Future<Output = rrddmma::wrap::aio::Result<LocalMr>>,
    {
        let futs: Vec<_> = bufs.iter_mut().enumerate().map(|(j, b)| op(b.take().expect("buffer"), j)).collect();
        for (slot, r) in bufs.iter_mut().zip(join_all(futs).await) {
            *slot = Some(r.unwrap_or_else(|e| die("write/read", e)));
        }
    }

    /// Awaits every future of `v`, polled together (each pinned in place
    /// inside the `Vec`, which is not resized while they run).
    async fn join_all<F: Future>(mut v: Vec<F>) -> Vec<F::Output> {
        let mut out: Vec<Option<F::Output>> = v.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, o) in v.iter_mut().zip(out.iter_mut()) {
                if o.is_none() {
                    // SAFETY: the futures stay in the `Vec`'s buffer, which
                    // neither moves nor is resized until they are dropped
                    // with it, after their last poll.
                    match unsafe { Pin::new_unchecked(f) }.poll(cx) {
                        Poll::Ready(r) => *o = Some(r),
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        out.into_iter().map(|o| o.expect("every future finished")).collect()
    }

    fn local(krate: &str, a: &Args, write: bool, size: usize, inflight: usize, batches: usize, empty: &AtomicU64) {
        let ctx = Context::open(&a.device).unwrap_or_else(|e| die("Context::open", e));
        let pd = Pd::alloc(&ctx).unwrap_or_else(|e| die("Pd::alloc", e));
        let ch = CompChannel::create(&ctx).unwrap_or_else(|e| die("CompChannel::create", e));
        let cq = Cq::builder(&ctx, 128).channel(&ch).build().unwrap_or_else(|e| die("Cq build", e));
        let peer_cq = Cq::create(&ctx, 128).unwrap_or_else(|e| die("Cq::create", e));
        let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
        let caps = QpCaps::default().max_send_wr(64).max_recv_wr(64);
        // The QP completes to `cq` alone (the endpoint is its CQ's only
        // poller), its peer to `peer_cq`.
        let build = |cq: &Cq| Qp::builder(&pd, QpType::RC, cq, cq).caps(caps).build();
        let qp = build(&cq).unwrap_or_else(|e| die("Qp build", e));
        let peer = build(&peer_cq).unwrap_or_else(|e| die("Qp build", e));
        let gid = opts.gid_index_on(&ctx).unwrap_or_else(|e| die("gid_index_on", e));
        let opts = opts.gid_index(Some(gid));
        let (e, pe) = (qp.endpoint(opts.get_port(), gid, 1), peer.endpoint(opts.get_port(), gid, 2));
        let (e, pe) = (e.unwrap_or_else(|e| die("endpoint", e)), pe.unwrap_or_else(|e| die("endpoint", e)));
        qp.connect(&pe, e.psn, &opts).unwrap_or_else(|e| die("connect", e));
        peer.connect(&e, pe.psn, &opts).unwrap_or_else(|e| die("connect", e));
        let mem = RegisteredMem::new(&pd, size * inflight).unwrap_or_else(|e| die("RegisteredMem::new", e));
        let remote = mem.remote();
        let pool = MrPool::new(&pd, 64 * size * inflight + 4096).unwrap_or_else(|e| die("MrPool::new", e));
        let ep = LocalEndpoint::new(qp, cq, pool);
        let one = Layout::from_size_align(size, 64).expect("layout");
        let mut bufs: Vec<_> =
            (0..inflight).map(|_| Some(ep.alloc_local_mr(one).unwrap_or_else(|e| die("alloc_local_mr", e)))).collect();
        let ep = &ep;
        let round = |bufs: &mut Vec<Option<LocalMr>>, batches: usize| {
            ep.block_on(async {
                for _ in 0..batches {
                    if inflight == 1 {
                        let b = bufs[0].take().expect("buffer");
                        let at = remote.addr_at(0);
                        let r = if write { ep.write(b, 0..size, at).await } else { ep.read(b, 0..size, at).await };
                        bufs[0] = Some(r.unwrap_or_else(|e| die("write/read", e)));
                    } else if write {
                        together(bufs, |b, j| ep.write(b, 0..size, remote.addr_at(j * size))).await;
                    } else {
                        together(bufs, |b, j| ep.read(b, 0..size, remote.addr_at(j * size))).await;
                    }
                }
            })
        };
        round(&mut bufs, WARM_UP.div_ceil(inflight));
        report(krate, &Args { iters: (batches * inflight) as u64, ..a.clone() }, empty, || round(&mut bufs, batches));
    }

    fn event(krate: &str, a: &Args, write: bool, size: usize, inflight: usize, batches: usize, empty: &AtomicU64) {
        let ctx = Context::open(&a.device).unwrap_or_else(|e| die("Context::open", e));
        let pd = Pd::alloc(&ctx).unwrap_or_else(|e| die("Pd::alloc", e));
        let ch = CompChannel::create(&ctx).unwrap_or_else(|e| die("CompChannel::create", e));
        let cq = Cq::builder(&ctx, 128).channel(&ch).build().unwrap_or_else(|e| die("Cq build", e));
        let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
        let caps = QpCaps::default().max_send_wr(64).max_recv_wr(64);
        let (qp, _peer) =
            connected_rc_pair(&pd, &cq, &cq, caps, 1, &opts).unwrap_or_else(|e| die("connected_rc_pair", e));
        let mem = RegisteredMem::new(&pd, 2 * size * inflight).unwrap_or_else(|e| die("RegisteredMem::new", e));
        let remote = mem.remote();
        let base = size * inflight;
        let round = |batches: usize| {
            for _ in 0..batches {
                for j in 0..inflight {
                    let sge = [mem.sge(j * size..(j + 1) * size)];
                    let at = remote.addr_at(base + j * size);
                    let wr = if write { SendWr::write(&sge, at) } else { SendWr::read(&sge, at) };
                    // SAFETY: `mem` outlives every completion awaited below.
                    unsafe { qp.post_send(&mut [wr.wr_id(j as u64).signaled()]) }
                        .unwrap_or_else(|e| die("post_send", e));
                }
                for _ in 0..inflight {
                    match cq.wait_one(Duration::from_secs(10)) {
                        Ok(Some(wc)) if wc.is_success() => {}
                        other => die("wait_one", other.map(|w| w.map(|w| w.status()))),
                    }
                }
            }
        };
        round(WARM_UP.div_ceil(inflight));
        report(krate, &Args { iters: (batches * inflight) as u64, ..a.clone() }, empty, || round(batches));
    }
}
