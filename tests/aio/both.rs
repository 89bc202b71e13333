//! Device tests of `RcEndpoint::new`: an `RcEndpoint` over a connection and
//! memory the caller already has, and the same operations run through a
//! `LocalEndpoint` and an `RcEndpoint` over the same QPs and pool.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rrddmma::prim::{AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, RemoteMr};
use rrddmma::wrap::aio::{AioOpts, LocalEndpoint, LocalMr, MrPool, RcEndpoint};
use rrddmma::wrap::RegisteredMem;

use super::local::{join_all, open};
use super::{bytes, layout};

/// An RC QP on `pd` completing both queues to `cq`.
fn rc_qp(pd: &Pd, cq: &Cq, caps: QpCaps) -> Qp {
    Qp::builder(pd, QpType::RC, cq, cq).caps(caps).build().expect("qp")
}

/// Connects `qa` and `qb` to each other with `access` granted (rnr_retry
/// 7, the default: a control SEND waits until the peer's receives are up).
fn connect(ctx: &Context, qa: &Qp, qb: &Qp, access: AccessFlags, psn: u32) {
    let opts = ConnectOpts::default().access(access);
    let gid = opts.gid_index_on(ctx).expect("gid index");
    let opts = opts.gid_index(Some(gid));
    let ea = qa.endpoint(opts.get_port(), gid, psn).expect("endpoint a");
    let eb = qb.endpoint(opts.get_port(), gid, psn + 1000).expect("endpoint b");
    qa.connect(&eb, ea.psn, &opts).expect("connect a");
    qb.connect(&ea, eb.psn, &opts).expect("connect b");
}

const OPEN: AccessFlags = AccessFlags::REMOTE_WRITE.union(AccessFlags::REMOTE_READ).union(AccessFlags::REMOTE_ATOMIC);

/// The pattern slot `i` of a run tagged `tag` holds.
fn pattern(tag: u8, i: usize) -> [u8; 64] {
    [tag ^ (i as u8).wrapping_mul(7); 64]
}

/// What one run of the operations gave: the 32 slots read back, and the
/// old values the fetch-and-add and the compare-and-swap returned.
type Run = (Vec<Vec<u8>>, u64, u64);

/// What a WRITE or READ gives back.
type Op = rrddmma::wrap::aio::Result<LocalMr>;

/// The same operations through either endpoint (they share no trait: the
/// macro names the same methods on each): 32 WRITEs of 64 bytes in flight
/// at once, each from its own buffer, to slots `base + 64 i` of `table`;
/// 32 READs of them back, in flight at once; a fetch-and-add of 5 and a
/// compare-and-swap on the word at `base + 2048`. Offsets into the remote
/// table and the local buffers are the same `usize`s.
macro_rules! same_operations {
    ($ep:expr, $table:expr, $base:expr, $tag:expr) => {
        async {
            let (ep, table, base, tag): (_, RemoteMr, usize, u8) = ($ep, $table, $base, $tag);
            let writes: Vec<Pin<Box<dyn Future<Output = Op>>>> = (0..32usize)
                .map(|i| {
                    let mut b = ep.alloc_local_mr(layout(64)).expect("buffer");
                    b.write(0, &pattern(tag, i));
                    let at = table.checked_addr_at(base + 64 * i, 64).expect("slot inside the table");
                    Box::pin(ep.write(b, 0..64, at)) as Pin<Box<dyn Future<Output = Op>>>
                })
                .collect();
            for w in join_all(writes).await {
                w.expect("WRITE");
            }
            let reads: Vec<Pin<Box<dyn Future<Output = Op>>>> = (0..32usize)
                .map(|i| {
                    let b = ep.alloc_local_mr(layout(64)).expect("buffer");
                    let at = table.checked_addr_at(base + 64 * i, 64).expect("slot inside the table");
                    Box::pin(ep.read(b, 0..64, at)) as Pin<Box<dyn Future<Output = Op>>>
                })
                .collect();
            let got: Vec<Vec<u8>> = join_all(reads).await.into_iter().map(|r| bytes(&r.expect("READ"), 64)).collect();
            let word = table.checked_addr_at(base + 2048, 8).expect("word inside the table");
            let old = ep.fetch_add(word, 5).await.expect("FETCH_ADD");
            let cas = ep.compare_swap(word, old + 5, 1000 + u64::from(tag)).await.expect("CMP_SWP");
            (got, old, cas)
        }
    };
}

/// What a run at `base` tagged `tag` must have given and left in `table`.
fn check(run: &Run, table: &RegisteredMem, base: usize, tag: u8, who: &str) {
    let (got, old, cas) = run;
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g[..], pattern(tag, i)[..], "{who}: READ of slot {i}");
        let mut t = [0u8; 64];
        table.read(base + 64 * i, &mut t);
        assert_eq!(t, pattern(tag, i), "{who}: the table's slot {i} after the WRITE");
    }
    assert_eq!((*old, *cas), (0, 5), "{who}: FETCH_ADD's and CMP_SWP's old values");
    assert_eq!(table.load_acquire_u64(base + 2048), 1000 + u64::from(tag), "{who}: the word after the swap");
}

/// One program, one connection, one pool: the operations through a
/// `LocalEndpoint`, which then gives its QP, CQ and pool back
/// (`into_parts`), and the same operations through an `RcEndpoint` made
/// over them with `RcEndpoint::new` (plus a control QP), each run's data
/// checked in the reads and in the peer's table; then the `RcEndpoint`'s
/// memory-region protocol over the caller's control QPs.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn local_and_rc_endpoints_run_the_same_operations_over_one_connection_and_pool() {
    let (ctx, pd) = open();
    let (cha, chb) = (CompChannel::create(&ctx).expect("channel a"), CompChannel::create(&ctx).expect("channel b"));
    let cqa = Cq::builder(&ctx, 1024).channel(&cha).build().expect("cq a");
    let cqb = Cq::builder(&ctx, 1024).channel(&chb).build().expect("cq b");
    let qa = rc_qp(&pd, &cqa, QpCaps::default().max_send_wr(64));
    let qb = rc_qp(&pd, &cqb, QpCaps::default());
    connect(&ctx, &qa, &qb, OPEN, 100);
    // The peer's table: registered with remote access by the caller.
    let table = RegisteredMem::new(&pd, 1 << 16).expect("table");
    let token = table.remote();
    let pool = MrPool::new(&pd, 1 << 20).expect("pool a");
    let free = pool.free_bytes();

    // Through the per-thread endpoint, on this thread.
    let local = LocalEndpoint::new(qa, cqa, pool);
    let run = local.block_on(same_operations!(&local, token, 0, 0x10));
    check(&run, &table, 0, 0x10, "LocalEndpoint");
    let (qa, cqa, pool) = local.into_parts().expect("an idle LocalEndpoint gives its parts back");
    assert_eq!(pool.free_bytes(), free, "every buffer back in the pool");

    // The same QP, CQ and pool under an RcEndpoint, with a control QP each
    // side (no remote access on it).
    let ca = rc_qp(&pd, &cqa, RcEndpoint::control_caps());
    let cb = rc_qp(&pd, &cqb, RcEndpoint::control_caps());
    connect(&ctx, &ca, &cb, AccessFlags::empty(), 300);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let o = AioOpts::new("unused: the caller's QPs").peer_timeout(Duration::from_secs(30));
        let a = RcEndpoint::new(qa, ca, cqa, pool, &o).expect("RcEndpoint over the caller's QPs");
        let b = RcEndpoint::new(qb, cb, cqb, MrPool::new(&pd, 1 << 20).expect("pool b"), &o).expect("peer");
        let run = same_operations!(&a, token, 4096, 0x20).await;
        check(&run, &table, 4096, 0x20, "RcEndpoint");
        assert_eq!(a.pool().free_bytes(), free - 64 * 32, "the pool is the same one (its control buffers taken)");

        // The memory-region protocol over the caller's control QPs: a piece
        // of b's pool, granted to a, written, given back, read by b.
        let granted = a.request_remote_mr(layout(256)).await.expect("request_remote_mr");
        let mut src = a.alloc_local_mr(layout(256)).expect("buffer");
        src.write(0, &[0x5a; 256]);
        let src = a.write(src, 0..256, granted.checked_addr_at(0, 256).expect("inside")).await.expect("WRITE");
        drop(src);
        assert!(granted.checked_addr_at(1, 256).is_err(), "one byte past the grant is refused before the post");
        a.send_remote_mr(granted).await.expect("send_remote_mr");
        let back = b.receive_local_mr().await.expect("receive_local_mr");
        assert_eq!(bytes(&back, 256), vec![0x5a; 256], "the peer's piece holds what was written");
        assert!(a.closed_reason().is_none() && b.closed_reason().is_none(), "both endpoints open");
    });
}

/// `RcEndpoint::new` keeps the isolation rules: a control QP that grants
/// remote access is refused (the control QP takes only SENDs), as is one
/// too small for the protocol.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn rc_endpoint_new_refuses_a_control_qp_with_remote_access() {
    let (ctx, pd) = open();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let _in_runtime = rt.enter();
    let refused = |ctrl_access: AccessFlags, ctrl_caps: QpCaps| {
        let ch = CompChannel::create(&ctx).expect("channel");
        let cq = Cq::builder(&ctx, 1024).channel(&ch).build().expect("cq");
        let cq_peer = Cq::create(&ctx, 1024).expect("cq peer");
        let (qa, qb) = (rc_qp(&pd, &cq, QpCaps::default()), rc_qp(&pd, &cq_peer, QpCaps::default()));
        let (ca, cb) = (rc_qp(&pd, &cq, ctrl_caps), rc_qp(&pd, &cq_peer, RcEndpoint::control_caps()));
        connect(&ctx, &qa, &qb, OPEN, 500);
        connect(&ctx, &ca, &cb, ctrl_access, 700);
        let pool = MrPool::new(&pd, 1 << 16).expect("pool");
        let o = AioOpts::new("unused");
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| RcEndpoint::new(qa, ca, cq, pool, &o)))
            .expect_err("RcEndpoint::new must refuse");
        p.downcast_ref::<String>().cloned().expect("a message")
    };
    let msg = refused(AccessFlags::REMOTE_WRITE, RcEndpoint::control_caps());
    assert!(msg.contains("grants remote access") && msg.contains("ConnectOpts::access(AccessFlags::empty())"), "{msg}");
    let msg = refused(AccessFlags::empty(), QpCaps::default());
    assert!(msg.contains("RcEndpoint::control_caps()"), "{msg}");
}
