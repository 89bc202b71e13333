//! Device tests of `LocalEndpoint`, the per-thread async path: every
//! operation with its data checked, a dropped future, 32 in flight, all on
//! one thread with no driver task.

use std::alloc::Layout;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskCx, Poll};

use rrddmma::prim::{
    AccessFlags, CompChannel, ConnectOpts, Context, Cq, Mr, Pd, Qp, QpCaps, QpType, RecvWr, RemoteAddr, SendWr,
};
use rrddmma::wrap::aio::{LocalEndpoint, LocalMr, MrPool};
use rrddmma::wrap::RegisteredMem;

const REMOTE_LEN: usize = 1 << 16;

/// Two local endpoints connected to each other, each with its own CQ, and
/// a region of `b`'s side open to remote access (its memory box outlives it).
struct Pair {
    a: LocalEndpoint,
    b: LocalEndpoint,
    _ch: Option<CompChannel>,
    remote: Mr,
    _mem: Box<[u8]>,
    _pd: Pd,
    _ctx: Context,
}

fn pair() -> Pair {
    pair_on(false, false)
}

/// [`pair`], `a`'s CQ with a completion channel when `channel` (for
/// `LocalEndpoint::block_on` to sleep on), `a` posting at once when idle
/// when `idle` (`LocalEndpoint::post_when_idle`).
fn pair_on(channel: bool, idle: bool) -> Pair {
    let (ctx, pd) = open();
    let ch = channel.then(|| CompChannel::create(&ctx).expect("channel"));
    let cqa = match &ch {
        Some(ch) => Cq::builder(&ctx, 256).channel(ch).build().expect("cq a"),
        None => Cq::create(&ctx, 256).expect("cq a"),
    };
    let cqb = Cq::create(&ctx, 256).expect("cq b");
    let qa = rc_qp(&pd, &cqa);
    let qb = rc_qp(&pd, &cqb);
    connect(&ctx, &qa, &qb);
    let mut mem = vec![0u8; REMOTE_LEN].into_boxed_slice();
    let access =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    // SAFETY: the box lives in the same struct, dropped after the region
    // (field order); its heap memory never moves.
    let remote = unsafe { Mr::register(&pd, mem.as_mut_ptr(), REMOTE_LEN, access) }.expect("ibv_reg_mr");
    let a = LocalEndpoint::new(qa, cqa, MrPool::new(&pd, 1 << 20).expect("pool a")).post_when_idle(idle);
    let b = LocalEndpoint::new(qb, cqb, MrPool::new(&pd, 1 << 20).expect("pool b"));
    Pair { a, b, _ch: ch, remote, _mem: mem, _pd: pd, _ctx: ctx }
}

/// The test device and a PD on it.
pub(super) fn open() -> (Context, Pd) {
    let dev = std::env::var("RRDDMMA_TEST_DEVICE").expect("RRDDMMA_TEST_DEVICE names the device for device tests");
    let ctx = Context::open(&dev).expect("open device");
    let pd = Pd::alloc(&ctx).expect("ibv_alloc_pd");
    (ctx, pd)
}

/// An RC QP on `pd` completing both queues to `cq`.
fn rc_qp(pd: &Pd, cq: &Cq) -> Qp {
    Qp::builder(pd, QpType::RC, cq, cq).caps(QpCaps::default()).build().expect("qp")
}

/// Connects `qa` and `qb` to each other, remote access open.
fn connect(ctx: &Context, qa: &Qp, qb: &Qp) {
    let opts = ConnectOpts::default()
        .access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC);
    let gid = opts.gid_index_on(ctx).expect("gid index");
    let opts = opts.gid_index(Some(gid));
    let ea = qa.endpoint(opts.get_port(), gid, 100).expect("endpoint a");
    let eb = qb.endpoint(opts.get_port(), gid, 200).expect("endpoint b");
    qa.connect(&eb, ea.psn, &opts).expect("connect a");
    qb.connect(&ea, eb.psn, &opts).expect("connect b");
}

impl Pair {
    fn mem(&self) -> &[u8] {
        &self._mem
    }
}

fn layout(n: usize) -> Layout {
    Layout::from_size_align(n, 8).unwrap()
}

fn bytes(mr: &LocalMr, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    mr.read(0, &mut b);
    b
}

/// Polls every future in one pass until all resolve, on this thread.
pub(super) async fn join_all<T>(mut futs: Vec<Pin<Box<dyn Future<Output = T> + '_>>>) -> Vec<T> {
    let mut out: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx: &mut TaskCx<'_>| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(out.iter_mut().map(|o| o.take().unwrap()).collect())
        }
    })
    .await
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn local_write_read_atomic_send_recv_with_data_checked() {
    let p = pair();
    let dst = p.remote.remote();
    // WRITE.
    let mut src = p.a.alloc_local_mr(layout(64)).unwrap();
    src.write(0, &[7u8; 64]);
    let src = p.a.write(src, 0..64, dst.addr_at(128)).await.expect("WRITE");
    assert_eq!(&p.mem()[128..192], &[7u8; 64][..], "WRITE: the remote bytes");
    assert_eq!(p.mem()[192], 0, "WRITE: nothing past its range");
    drop(src);
    // READ back what was written.
    let buf = p.a.alloc_local_mr(layout(64)).unwrap();
    let buf = p.a.read(buf, 0..64, dst.addr_at(128)).await.expect("READ");
    assert_eq!(bytes(&buf, 64), vec![7u8; 64], "READ: the local bytes");
    // Fetch-and-add twice: the old values, then the remote value.
    assert_eq!(p.a.fetch_add(dst.addr_at(0), 5).await.expect("FETCH_ADD"), 0);
    assert_eq!(p.a.fetch_add(dst.addr_at(0), 3).await.expect("FETCH_ADD"), 5);
    assert_eq!(u64::from_ne_bytes(p.mem()[..8].try_into().unwrap()), 8, "FETCH_ADD: the remote value");
    // SEND/RECV: b's receive first, then a's send; both polled on this thread.
    let rbuf = p.b.alloc_local_mr(layout(256)).unwrap();
    let mut sbuf = p.a.alloc_local_mr(layout(256)).unwrap();
    let msg: Vec<u8> = (0..100u8).collect();
    sbuf.write(0, &msg);
    let (recv, send) = tokio::join!(p.b.recv(rbuf), p.a.send(sbuf, 0..100));
    send.expect("SEND");
    let (len, rbuf) = recv.expect("RECV");
    assert_eq!(len, 100, "RECV: the message's length");
    assert_eq!(bytes(&rbuf, 100), msg, "RECV: the message's bytes");
    assert_eq!((p.a.in_flight(), p.b.in_flight()), (0, 0));
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn local_dropped_future_keeps_its_buffer_until_completion() {
    let p = pair();
    let pool_free = p.b.pool().free_bytes();
    // A receive posted and dropped: nothing has arrived, so its buffer must
    // stay with the endpoint (the device still owns it).
    let rbuf = p.b.alloc_local_mr(layout(4096)).unwrap();
    {
        let mut recv = Box::pin(p.b.recv(rbuf));
        let waker = std::task::Waker::noop();
        assert!(recv.as_mut().poll(&mut TaskCx::from_waker(waker)).is_pending(), "a receive with no message");
    }
    assert_eq!(p.b.in_flight(), 1, "the dropped receive is still in flight");
    assert_eq!(p.b.pool().free_bytes(), pool_free - 4096, "its buffer is not back in the pool");
    // The message arrives: the next drain (any operation's poll) frees it.
    let mut sbuf = p.a.alloc_local_mr(layout(64)).unwrap();
    sbuf.write(0, &[9u8; 64]);
    p.a.send(sbuf, 0..64).await.expect("SEND");
    let probe = p.b.alloc_local_mr(layout(8)).unwrap();
    let probe = p.b.read(probe, 0..8, p.remote.remote().addr_at(0)).await.expect("READ that drains b's CQ");
    drop(probe);
    assert_eq!(p.b.in_flight(), 0, "the completion freed the dropped receive's slot");
    assert_eq!(p.b.pool().free_bytes(), pool_free, "the buffer is back in the pool after its completion");
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn local_thirty_two_reads_in_flight_on_one_thread() {
    // The first READ is posted at once (the endpoint is idle), the
    // others join the queue.
    let p = pair_on(false, true);
    let mem: Vec<u8> = (0..32 * 64).map(|i| (i * 7 % 251) as u8).collect();
    let mut src = p.a.alloc_local_mr(layout(mem.len())).unwrap();
    src.write(0, &mem);
    let src = p.a.write(src, 0..mem.len(), p.remote.remote().addr_at(0)).await.expect("WRITE");
    drop(src);
    let reads = (0..32usize)
        .map(|i| {
            let buf = p.a.alloc_local_mr(layout(64)).unwrap();
            Box::pin(p.a.read(buf, 0..64, p.remote.remote().addr_at(i * 64))) as Pin<Box<dyn Future<Output = _>>>
        })
        .collect();
    let out: Vec<rrddmma::wrap::aio::Result<LocalMr>> = join_all(reads).await;
    for (i, r) in out.into_iter().enumerate() {
        let buf = r.expect("READ");
        assert_eq!(bytes(&buf, 64), &mem[i * 64..i * 64 + 64], "READ {i}: its bytes");
    }
    assert_eq!(p.a.in_flight(), 0);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn local_block_on_every_operation_with_data_checked() {
    let p = pair_on(true, false);
    let dst = p.remote.remote();
    p.a.block_on(async {
        // 32 WRITEs polled in one pass: one list, one doorbell.
        let writes = (0..32usize)
            .map(|i| {
                let mut b = p.a.alloc_local_mr(layout(64)).unwrap();
                b.write(0, &[i as u8 + 1; 64]);
                Box::pin(p.a.write(b, 0..64, dst.addr_at(1024 + i * 64))) as Pin<Box<dyn Future<Output = _>>>
            })
            .collect();
        let out: Vec<rrddmma::wrap::aio::Result<LocalMr>> = join_all(writes).await;
        for r in out {
            r.expect("WRITE");
        }
        for i in 0..32usize {
            let at = 1024 + i * 64;
            assert_eq!(&p.mem()[at..at + 64], &[i as u8 + 1; 64][..], "WRITE {i}: the remote bytes");
        }
        // 32 READs of them.
        let reads = (0..32usize)
            .map(|i| {
                let b = p.a.alloc_local_mr(layout(64)).unwrap();
                Box::pin(p.a.read(b, 0..64, dst.addr_at(1024 + i * 64))) as Pin<Box<dyn Future<Output = _>>>
            })
            .collect();
        let out: Vec<rrddmma::wrap::aio::Result<LocalMr>> = join_all(reads).await;
        for (i, r) in out.into_iter().enumerate() {
            assert_eq!(bytes(&r.expect("READ"), 64), vec![i as u8 + 1; 64], "READ {i}: the local bytes");
        }
        // Atomics: fetch-and-add, then a compare-and-swap that fails and one that succeeds.
        assert_eq!(p.a.fetch_add(dst.addr_at(8), 10).await.expect("FETCH_ADD"), 0);
        assert_eq!(
            p.a.compare_swap(dst.addr_at(8), 3, 99).await.expect("CMP_SWAP"),
            10,
            "a failed swap: the old value"
        );
        assert_eq!(p.a.compare_swap(dst.addr_at(8), 10, 99).await.expect("CMP_SWAP"), 10);
    });
    assert_eq!(u64::from_ne_bytes(p.mem()[8..16].try_into().unwrap()), 99, "CMP_SWAP: the remote value");
    assert_eq!(p.a.in_flight(), 0);
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn local_queued_write_dropped_before_its_flush() {
    let p = pair();
    let free = p.a.pool().free_bytes();
    let mut src = p.a.alloc_local_mr(layout(4096)).unwrap();
    src.write(0, &[5u8; 4096]);
    {
        // Polled once: queued, not posted; then dropped.
        let mut w = Box::pin(p.a.write(src, 0..4096, p.remote.remote().addr_at(4096)));
        let waker = std::task::Waker::noop();
        assert!(w.as_mut().poll(&mut TaskCx::from_waker(waker)).is_pending(), "a queued WRITE");
    }
    assert_eq!(p.a.in_flight(), 1, "the dropped WRITE is still to be posted");
    assert_eq!(p.a.pool().free_bytes(), free - 4096, "its buffer stays with the endpoint");
    // The next operation's polls post it and take its completion.
    p.a.flush();
    let probe = p.a.alloc_local_mr(layout(8)).unwrap();
    drop(p.a.read(probe, 0..8, p.remote.remote().addr_at(0)).await.expect("READ"));
    assert_eq!(p.a.in_flight(), 0, "the dropped WRITE completed");
    assert_eq!(p.a.pool().free_bytes(), free, "its buffer is back after its completion");
    assert_eq!(&p.mem()[4096..8192], &[5u8; 4096][..], "the dropped WRITE's bytes arrived");
}

/// A WRITE under a key the peer never gave fails with the remote access
/// error in both posting modes (posted alone when idle, queued otherwise),
/// and its slot and buffer come back.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn local_failed_write_ends_with_its_status_in_both_modes() {
    for idle in [true, false] {
        let p = pair_on(true, idle);
        let free = p.a.pool().free_bytes();
        let bad =
            RemoteAddr { addr: p.remote.remote().addr_at(0).addr, rkey: p.remote.remote().addr_at(0).rkey ^ 0xff };
        let src = p.a.alloc_local_mr(layout(64)).unwrap();
        let e = p.a.block_on(p.a.write(src, 0..64, bad)).expect_err("a WRITE under a wrong rkey");
        let msg = e.to_string();
        assert!(msg.contains("REM_ACCESS"), "idle {idle}: the completion's status in {msg:?}");
        assert!(matches!(e, rrddmma::wrap::aio::Error::Completion(_)), "idle {idle}: a completion error, got {e:?}");
        assert_eq!(p.a.in_flight(), 0, "idle {idle}: the failed WRITE's slot is free");
        assert_eq!(p.a.pool().free_bytes(), free, "idle {idle}: its buffer is back in the pool");
    }
}

/// `LocalEndpoint::new`'s endpoint, or its refusal message.
fn built(new: impl FnOnce() -> LocalEndpoint) -> Result<LocalEndpoint, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(new)).map_err(|p| {
        p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
    })
}

/// Polls `fut` with a waker that does nothing for about `ms` milliseconds;
/// its output if it resolved.
fn poll_for<F: Future + Unpin>(fut: &mut F, ms: u64) -> Option<F::Output> {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
    let mut cx = TaskCx::from_waker(&waker);
    for _ in 0..ms {
        if let Poll::Ready(v) = Pin::new(&mut *fut).poll(&mut cx) {
            return Some(v);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

const OWN_CQ: &str = "the endpoint must be its CQ's only poller";

/// Two endpoints on one CQ (one thread each, the natural shape) are
/// refused: numbered from the same ids, each would take the other's
/// completions as its own. Accepted, `b`'s receive, with nothing sent to
/// `b`'s QP, resolves with `a`'s WRITE completion while the device still
/// holds its buffer.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn local_a1_prime_two_endpoints_on_one_cq_are_refused() {
    let (ctx, pd) = open();
    let cq = Cq::create(&ctx, 256).expect("cq");
    let peer_cq = Cq::create(&ctx, 256).expect("peer cq");
    let (qa, qb) = (rc_qp(&pd, &cq), rc_qp(&pd, &cq));
    let (pa, pb) = (rc_qp(&pd, &peer_cq), rc_qp(&pd, &peer_cq));
    connect(&ctx, &qa, &pa);
    connect(&ctx, &qb, &pb);
    let target = RegisteredMem::new(&pd, 64).expect("target");
    let mut a = None;
    let b = built(|| {
        let ep = LocalEndpoint::new(qa, cq.clone(), MrPool::new(&pd, 1 << 16).expect("pool a"));
        a = Some(ep.post_when_idle(false));
        LocalEndpoint::new(qb, cq, MrPool::new(&pd, 1 << 16).expect("pool b"))
    });
    let b = match b {
        Err(msg) => {
            assert!(msg.contains("LocalEndpoint::new") && msg.contains(OWN_CQ), "the refusal: {msg}");
            assert!(msg.contains("give it a CQ of its own"), "the refusal says what to do: {msg}");
            assert!(a.is_none(), "the first endpoint is refused too (the second QP holds the CQ)");
            return;
        }
        Ok(b) => b,
    };
    let a = a.unwrap();
    // Accepted: b's receive waits; nothing is ever sent to b's QP.
    let rbuf = b.alloc_local_mr(layout(64)).unwrap();
    let mut recv = Box::pin(b.recv(rbuf));
    assert!(poll_for(&mut recv, 1).is_none(), "a receive with nothing sent");
    // a's WRITE (queued, then posted by the flush) completes on the CQ.
    let src = a.alloc_local_mr(layout(64)).unwrap();
    let mut write = Box::pin(a.write(src, 0..64, target.remote().addr_at(0)));
    assert!(poll_for(&mut write, 1).is_none(), "a queued WRITE");
    a.flush();
    if let Some(r) = poll_for(&mut recv, 500) {
        panic!("b's receive resolved ({r:?}) with nothing sent to its QP: it took a's WRITE completion");
    }
    panic!("two LocalEndpoints on one CQ were accepted");
}

/// A receive posted on the QP before it is handed to `new` (wr_id 0, as
/// the endpoint's first request was numbered) takes the peer's first
/// message; the endpoint's own receive is not resolved by that completion,
/// keeps its buffer, and gets the second message.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn local_a1_prime_receive_in_flight_before_new_is_not_taken() {
    let (ctx, pd) = open();
    let (cqa, cqb) = (Cq::create(&ctx, 256).expect("cq a"), Cq::create(&ctx, 256).expect("cq b"));
    let (qa, qb) = (rc_qp(&pd, &cqa), rc_qp(&pd, &cqb));
    connect(&ctx, &qa, &qb);
    // Declared before the endpoint: dropped after its QP.
    let foreign = RegisteredMem::new(&pd, 64).expect("foreign buffer");
    let sge = [foreign.sge(0..64)];
    // SAFETY: `foreign` is registered on the QP's PD with local write and
    // outlives the QP (dropped after the endpoint that owns it).
    unsafe { qa.post_recv(&mut [RecvWr::new(&sge, 0)]) }.expect("post_recv");
    let a = LocalEndpoint::new(qa, cqa, MrPool::new(&pd, 1 << 16).expect("pool a"));
    let b = LocalEndpoint::new(qb, cqb, MrPool::new(&pd, 1 << 16).expect("pool b"));
    let rbuf = a.alloc_local_mr(layout(64)).unwrap();
    let mut recv = Box::pin(a.recv(rbuf));
    assert!(poll_for(&mut recv, 1).is_none(), "a receive with nothing sent");
    // The first message takes the receive posted first: the foreign one.
    let mut first = b.alloc_local_mr(layout(64)).unwrap();
    first.write(0, &[1u8; 64]);
    drop(b.send(first, 0..64).await.expect("first SEND"));
    if let Some(r) = poll_for(&mut recv, 300) {
        let got = r.as_ref().map(|(n, buf)| (*n, bytes(buf, 64)));
        panic!("the endpoint's receive resolved by the completion of the receive posted before new: {got:?}");
    }
    let mut landed = [0u8; 64];
    foreign.read(0, &mut landed);
    assert_eq!(landed, [1u8; 64], "the first message landed in the receive posted first");
    assert_eq!(a.in_flight(), 1, "the endpoint's receive is still in flight");
    // The second message is the endpoint's.
    let mut second = b.alloc_local_mr(layout(64)).unwrap();
    second.write(0, &[2u8; 64]);
    drop(b.send(second, 0..64).await.expect("second SEND"));
    let (len, rbuf) = recv.await.expect("RECV");
    assert_eq!((len, bytes(&rbuf, 64)), (64, vec![2u8; 64]), "the endpoint's receive holds the second message");
    assert_eq!(a.in_flight(), 0);
}

/// A signaled WRITE posted on the QP before it is handed to `new` (wr_id
/// 0), its completion waiting in the CQ: the endpoint's first WRITE,
/// posted at once on the idle endpoint, is not resolved by it there, and
/// its own completion does not later resolve the next request of its slot
/// (a receive, with nothing sent).
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn local_a1_prime_write_in_flight_before_new_is_not_taken() {
    let (ctx, pd) = open();
    let (cqa, cqb) = (Cq::create(&ctx, 256).expect("cq a"), Cq::create(&ctx, 256).expect("cq b"));
    let (qa, qb) = (rc_qp(&pd, &cqa), rc_qp(&pd, &cqb));
    connect(&ctx, &qa, &qb);
    let mut target = RegisteredMem::new(&pd, 128).expect("target");
    target.write(0, &[0u8; 128]);
    // Declared before the endpoint: dropped after its QP.
    let mut foreign = RegisteredMem::new(&pd, 64).expect("foreign buffer");
    foreign.write(0, &[3u8; 64]);
    let sge = [foreign.sge(0..64)];
    // SAFETY: `foreign` is registered on the QP's PD and outlives the QP
    // (dropped after the endpoint that owns it).
    unsafe { qa.post_send(&mut [SendWr::write(&sge, target.remote().addr_at(0)).signaled().wr_id(0)]) }
        .expect("post_send");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let a = LocalEndpoint::new(qa, cqa, MrPool::new(&pd, 1 << 16).expect("pool a"));
    let mut src = a.alloc_local_mr(layout(64)).unwrap();
    src.write(0, &[4u8; 64]);
    drop(a.write(src, 0..64, target.remote().addr_at(64)).await.expect("WRITE"));
    let mut landed = [0u8; 128];
    target.read(0, &mut landed);
    assert_eq!(landed, [[3u8; 64], [4u8; 64]].concat()[..], "both WRITEs' bytes");
    assert_eq!(a.in_flight(), 0, "the endpoint's WRITE took its own completion");
    let rbuf = a.alloc_local_mr(layout(64)).unwrap();
    let mut recv = Box::pin(a.recv(rbuf));
    if let Some(r) = poll_for(&mut recv, 300) {
        panic!("a receive resolved ({r:?}) with nothing sent: the WRITE's completion was left for its slot");
    }
}

/// A CQ another QP completes to, a CQ with a clone kept, and a QP whose
/// queues complete elsewhere are refused, each with what to fix; the same
/// QP and CQ alone are accepted.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn local_a1_prime_cq_shared_with_another_qp_is_refused() {
    let (ctx, pd) = open();
    let pool = || MrPool::new(&pd, 4096).expect("pool");
    // Another QP on the CQ.
    let cq = Cq::create(&ctx, 64).expect("cq");
    let (qa, other) = (rc_qp(&pd, &cq), rc_qp(&pd, &cq));
    let msg = built(|| LocalEndpoint::new(qa, cq, pool())).expect_err("a CQ another QP completes to");
    assert!(msg.contains(OWN_CQ) && msg.contains("2 other handle"), "the refusal: {msg}");
    drop(other);
    // A clone of the CQ kept.
    let cq = Cq::create(&ctx, 64).expect("cq");
    let (qa, kept) = (rc_qp(&pd, &cq), cq.clone());
    let msg = built(|| LocalEndpoint::new(qa, cq, pool())).expect_err("a CQ with a clone kept");
    assert!(msg.contains(OWN_CQ) && msg.contains("1 other handle"), "the refusal: {msg}");
    drop(kept);
    // A QP whose receives complete to another CQ.
    let (cq, elsewhere) = (Cq::create(&ctx, 64).expect("cq"), Cq::create(&ctx, 64).expect("cq"));
    let qa = Qp::builder(&pd, QpType::RC, &cq, &elsewhere).build().expect("qp");
    let msg = built(|| LocalEndpoint::new(qa, cq, pool())).expect_err("a QP that completes elsewhere");
    assert!(msg.contains("does not complete") && msg.contains("Qp::builder(pd, QpType::RC, &cq, &cq)"), "{msg}");
    // A CQ whose classic poll refuses (tag matching): refused at `new`,
    // not at the first poll.
    let cq = Cq::builder(&ctx, 64).tag_matching().build().expect("a tag-matching CQ (extended, no TM_INFO)");
    let qa = rc_qp(&pd, &cq);
    let msg = built(|| LocalEndpoint::new(qa, cq, pool())).expect_err("a tag-matching CQ");
    assert!(msg.contains("serves tag matching") && msg.contains("CqBuilder::tag_matching"), "the refusal: {msg}");
    // The QP and its CQ alone.
    let cq = Cq::create(&ctx, 64).expect("cq");
    let qa = rc_qp(&pd, &cq);
    built(|| LocalEndpoint::new(qa, cq, pool())).expect("a QP and a CQ of its own");
}
