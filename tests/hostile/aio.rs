//! Hostile-peer tests against the aio victim (`wrap::aio::Listener` /
//! `RcEndpoint`), and the aio fault table.
//!
//! The attacker is [`RawPeer`]: a program that speaks the set-up exchange
//! and the control protocol of docs/aio.md by hand, through the crate's
//! public `prim` API, and sends whatever it likes.

use std::alloc::Layout;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rrddmma::ctrl::QpInfo;
use rrddmma::prim::{
    ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, RecvWr, RemoteAddr, RemoteMr, SendWr, Wc, WcStatus,
};
use rrddmma::wrap::aio::{AioOpts, Denial, Error, Listener, RcEndpoint};
use rrddmma::wrap::RegisteredMem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::table;

const VICTIM: &str = "aio endpoint";

/// A hostile-table row on a line of its own (libtest prints `test NAME ... `
/// with no newline before a test's first output, and the table collector
/// reads only lines that start with `ROW`).
fn hostile_row(attack: &str, victim: &str, outcome: &str) {
    println!();
    table::hostile(attack, victim, outcome);
}

/// An aio fault-table row on a line of its own (as [`hostile_row`]).
fn fault_row(fault: &str, call: &str, outcome: &str) {
    println!();
    table::aio_fault(fault, call, outcome);
}

fn opts() -> AioOpts {
    // Set-up registers the 16 MiB pool; under emulation on a busy machine
    // that alone can take seconds, so the bound here is wide (tests of the
    // bound itself set their own).
    AioOpts::new(&table::device()).setup_timeout(Duration::from_secs(60))
}

fn layout(n: usize) -> Layout {
    Layout::from_size_align(n, 8).unwrap()
}

/// Receives the attacker keeps posted on its control QP, and their slot size.
const RECVS: usize = 512;
const SLOT: usize = 64;
/// Start of the attacker's scratch memory (after the receive slots).
const SCRATCH: usize = RECVS * SLOT;
const RECV_TAG: u64 = 1 << 40;

/// A peer that speaks the set-up and the control protocol by hand.
struct RawPeer {
    _ctx: Context,
    cq: Cq,
    data: Qp,
    ctrl: Qp,
    mem: RegisteredMem,
    tcp: Option<TcpStream>,
    stash: Vec<Wc>,
    msgs: VecDeque<[u8; 32]>,
    next: u64,
}

impl RawPeer {
    /// Connects to an aio listener at `addr` as `RcEndpoint::connect` does.
    async fn connect(addr: std::net::SocketAddr) -> RawPeer {
        RawPeer::connect_with(addr, RECVS).await
    }

    /// [`RawPeer::connect`] with `recvs` control receives posted.
    async fn connect_with(addr: std::net::SocketAddr, recvs: usize) -> RawPeer {
        let ctx = Context::open(&table::device()).unwrap();
        let pd = Pd::alloc(&ctx).unwrap();
        let cq = Cq::create(&ctx, 4096).unwrap();
        let caps = QpCaps::default().max_send_wr(1024).max_recv_wr(RECVS as u32);
        let caps = caps.max_inline_data(64);
        let data = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build().unwrap();
        let ctrl = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build().unwrap();
        let mem = RegisteredMem::new(&pd, SCRATCH + (1 << 20)).unwrap();
        let copts = ConnectOpts::default();
        let gid = copts.gid_index_on(&ctx).unwrap();
        let mtu = ctx.query_port(1).unwrap().active_mtu().min(rrddmma::prim::Mtu::MTU_1024);
        let psn = rrddmma::prim::random_psn();
        let mine = [
            QpInfo::new(&data.endpoint(1, gid, psn).unwrap(), gid, 1, mtu),
            QpInfo::new(&ctrl.endpoint(1, gid, psn + 1).unwrap(), gid, 1, mtu),
        ];
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(&[mine[0].to_bytes(), mine[1].to_bytes()].concat()).await.unwrap();
        let mut theirs = [0u8; 2 * QpInfo::WIRE_LEN];
        tcp.read_exact(&mut theirs).await.unwrap();
        let them = |i: usize| QpInfo::from_bytes(theirs[i..i + QpInfo::WIRE_LEN].try_into().unwrap()).unwrap();
        let copts = copts.gid_index(Some(gid)).mtu(mtu);
        data.connect(&them(0).endpoint(), psn, &copts).unwrap();
        ctrl.connect(&them(QpInfo::WIRE_LEN).endpoint(), psn + 1, &copts).unwrap();
        let mut p =
            RawPeer { _ctx: ctx, cq, data, ctrl, mem, tcp: None, stash: Vec::new(), msgs: VecDeque::new(), next: 1 };
        for i in 0..recvs {
            p.repost(i);
        }
        tcp.write_all(b"R").await.unwrap();
        let mut r = [0u8; 1];
        tcp.read_exact(&mut r).await.unwrap();
        p.tcp = Some(tcp);
        p
    }

    fn repost(&self, i: usize) {
        let sge = [self.mem.sge(i * SLOT..(i + 1) * SLOT)];
        // SAFETY: the slot is in `mem`, which outlives the QP's requests (the
        // QP is dropped first: field order).
        unsafe { self.ctrl.post_recv(&mut [RecvWr::new(&sge, RECV_TAG | i as u64)]).unwrap() };
    }

    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Sends `bytes` (up to 64) as one inline SEND on the control QP.
    fn send_ctrl(&mut self, bytes: &[u8]) -> u64 {
        let id = self.id();
        let sge = [rrddmma::prim::Sge::from_raw(bytes.as_ptr() as u64, bytes.len() as u32, 0)];
        // SAFETY: inline: copied during the call.
        unsafe { self.ctrl.post_send(&mut [SendWr::send(&sge).inline().wr_id(id).signaled()]).unwrap() };
        id
    }

    /// A control message of docs/aio.md's layout.
    fn msg(kind: u8, id: u32, t: RemoteMr) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0] = kind;
        b[4..8].copy_from_slice(&id.to_le_bytes());
        b[8..16].copy_from_slice(&t.addr.to_le_bytes());
        b[16..24].copy_from_slice(&t.len.to_le_bytes());
        b[24..28].copy_from_slice(&t.rkey.to_le_bytes());
        b
    }

    fn request(&mut self, id: u32, size: u64) -> u64 {
        self.send_ctrl(&RawPeer::msg(1, id, RemoteMr { addr: size, len: 8, rkey: 0 }))
    }

    /// RDMA WRITE of `local` (of the scratch memory) to `dst`.
    fn write(&mut self, local: Range<usize>, dst: RemoteAddr) -> u64 {
        let id = self.id();
        let sge = [self.mem.sge(SCRATCH + local.start..SCRATCH + local.end)];
        // SAFETY: `mem` outlives the request (dropped after the QPs).
        unsafe { self.data.post_send(&mut [SendWr::write(&sge, dst).wr_id(id).signaled()]).unwrap() };
        id
    }

    /// RDMA READ from `src` into `local` of the scratch memory.
    fn read(&mut self, local: Range<usize>, src: RemoteAddr) -> u64 {
        let id = self.id();
        let sge = [self.mem.sge(SCRATCH + local.start..SCRATCH + local.end)];
        // SAFETY: as in `write`.
        unsafe { self.data.post_send(&mut [SendWr::read(&sge, src).wr_id(id).signaled()]).unwrap() };
        id
    }

    fn poll(&mut self) {
        let mut wcs = [Wc::default(); 32];
        let n = self.cq.poll(&mut wcs).unwrap();
        for wc in &wcs[..n] {
            if wc.wr_id() & RECV_TAG != 0 {
                if wc.is_success() {
                    let i = (wc.wr_id() & !RECV_TAG) as usize;
                    let mut b = [0u8; 32];
                    self.mem.read(i * SLOT, &mut b);
                    if b[0] != 6 {
                        self.msgs.push_back(b); // keepalives are not kept
                    }
                    self.repost(i);
                }
            } else {
                self.stash.push(*wc);
            }
        }
    }

    /// The completion of request `id`.
    async fn wait(&mut self, id: u64) -> Wc {
        let t = Instant::now();
        loop {
            self.poll();
            if let Some(i) = self.stash.iter().position(|w| w.wr_id() == id) {
                return self.stash.swap_remove(i);
            }
            assert!(t.elapsed() < Duration::from_secs(20), "no completion for request {id}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The next control message the victim sent (keepalives skipped).
    async fn next_msg(&mut self) -> [u8; 32] {
        let t = Instant::now();
        loop {
            self.poll();
            if let Some(m) = self.msgs.pop_front() {
                return m;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "no control message from the victim");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Keeps polling (answering nothing) for `d`.
    async fn idle(&mut self, d: Duration) {
        let t = Instant::now();
        while t.elapsed() < d {
            self.poll();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The token of a grant message.
fn token(m: &[u8; 32]) -> RemoteMr {
    let u64_at = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
    RemoteMr { addr: u64_at(8), len: u64_at(16), rkey: u32::from_le_bytes(m[24..28].try_into().unwrap()) }
}

/// A victim endpoint accepted from a raw peer.
async fn victim_and_raw(o: AioOpts) -> (RcEndpoint, RawPeer) {
    let l = Listener::bind("127.0.0.1:0", o).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (v, raw) = tokio::join!(l.accept(), RawPeer::connect(addr));
    (v.expect("the victim accepts"), raw)
}

/// Waits (bounded) until the victim endpoint is closed; its reason.
async fn closed_within(v: &RcEndpoint, bound: Duration) -> (Error, Duration) {
    let t = Instant::now();
    loop {
        if let Some(e) = v.closed_reason() {
            return (e, t.elapsed());
        }
        assert!(t.elapsed() < bound, "the victim did not close within {bound:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Issue 22's attack, one fresh connection per try: granted 64 bytes, the
/// peer writes 4 KiB and 64 KiB past the grant, reads a piece the victim
/// holds, and uses a forged rkey. Each gets REM_ACCESS_ERR; no byte of the
/// victim's changes and the secret does not leave.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_isolation_granted_piece_only_write_past_read_held_forged_rkey() {
    for attack in
        ["write 4 KiB past a 64 B grant", "write 64 KiB past a 64 B grant", "read a held piece", "forged rkey"]
    {
        let (victim, mut raw) = victim_and_raw(opts()).await;
        let r = raw.request(1, 64);
        assert!(raw.wait(r).await.is_success());
        let grant = raw.next_msg().await;
        assert_eq!(grant[0], 2, "a grant");
        let g = token(&grant);
        assert_eq!(g.len, 64);
        // The victim's own memory, after the grant in its pool, never granted.
        let mut canary = victim.alloc_local_mr(layout(128 << 10)).unwrap();
        canary.write(0, &[0xa5; 128 << 10]);
        canary.write(0, b"secret!!");
        assert!(canary.addr() > g.addr, "the canary lies after the grant in the pool");
        // Inside the grant: allowed.
        raw.mem.write(SCRATCH, &[0x11; 64 << 10]);
        let w = raw.write(0..64, g.addr_at(0));
        assert_eq!(raw.wait(w).await.status(), WcStatus::SUCCESS, "the grant itself is writable");
        // The attacker forges a token as long as it likes.
        let forged = RemoteMr { len: 1 << 30, ..g };
        let id = match attack {
            "write 4 KiB past a 64 B grant" => raw.write(0..4096, forged.addr_at(64)),
            "write 64 KiB past a 64 B grant" => raw.write(0..(64 << 10), forged.addr_at(64)),
            "read a held piece" => raw.read(0..8, RemoteMr { addr: canary.addr(), len: 8, rkey: g.rkey }.addr_at(0)),
            _ => raw.write(0..8, RemoteMr { rkey: g.rkey ^ 0x100, ..g }.addr_at(0)),
        };
        let wc = raw.wait(id).await;
        assert_eq!(wc.status(), WcStatus::REM_ACCESS_ERR, "{attack}");
        let mut b = vec![0u8; 128 << 10];
        canary.read(0, &mut b);
        assert_eq!(&b[..8], b"secret!!", "{attack}");
        assert!(b[8..].iter().all(|&x| x == 0xa5), "{attack}: a byte outside the grant changed");
        let mut leaked = [0u8; 8];
        raw.mem.read(SCRATCH, &mut leaked);
        assert_ne!(&leaked, b"secret!!", "{attack}: the secret left");
        hostile_row(attack, VICTIM, "REM_ACCESS_ERR at the peer; 0 bytes outside the grant changed or read");
    }
}

/// A granted piece is deregistered on its return: the old token reaches
/// nothing, and the owner gets the piece with the peer's bytes.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_isolation_returned_piece_is_unreachable_with_its_old_token() {
    let (victim, mut raw) = victim_and_raw(opts()).await;
    let r = raw.request(1, 64);
    raw.wait(r).await;
    let g = token(&raw.next_msg().await);
    raw.mem.write(SCRATCH, b"peer wrote this");
    let w = raw.write(0..15, g.addr_at(0));
    assert!(raw.wait(w).await.is_success());
    let ret = raw.send_ctrl(&RawPeer::msg(5, 0, g));
    assert!(raw.wait(ret).await.is_success());
    let back = victim.receive_local_mr_with_timeout(Duration::from_secs(5)).await.unwrap();
    let mut b = [0u8; 15];
    back.read(0, &mut b);
    assert_eq!(&b, b"peer wrote this");
    assert_eq!(victim.granted_to_peer(), (0, 0));
    let again = raw.write(0..8, g.addr_at(0));
    assert_eq!(raw.wait(again).await.status(), WcStatus::REM_ACCESS_ERR);
    back.read(0, &mut b);
    assert_eq!(&b, b"peer wrote this", "the returned piece is unchanged");
    hostile_row("write with a token after returning it", VICTIM, "REM_ACCESS_ERR: deregistered on return");
}

/// A burst of 600 requests without waiting for answers: every one is
/// answered, grants stop at the quota (denied with its reason), the
/// victim's books match the grants, and nothing leaks.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_request_flood_is_bounded_by_the_grant_quota_and_leaks_nothing() {
    const N: u32 = 600;
    let o = opts();
    let (victim, mut raw) = victim_and_raw(o).await;
    let free0 = victim.pool().free_bytes();
    let mut sends = Vec::new();
    for i in 0..N {
        sends.push(raw.request(i + 1, 4096));
    }
    for s in sends {
        assert!(raw.wait(s).await.is_success());
    }
    let (mut grants, mut quota_denied) = (Vec::new(), 0);
    for _ in 0..N {
        let m = raw.next_msg().await;
        match m[0] {
            2 => grants.push(token(&m)),
            3 => {
                assert_eq!(m[1], 3, "denied for the count quota (code 3)");
                quota_denied += 1
            }
            k => panic!("unexpected kind {k}"),
        }
    }
    assert_eq!(grants.len(), 64, "the default grant_quota_count");
    assert_eq!(quota_denied, N as usize - 64);
    assert_eq!(victim.granted_to_peer(), (64 * 4096, 64));
    assert_eq!(victim.pool().free_bytes(), free0 - 64 * 4096);
    for g in &grants {
        let s = raw.send_ctrl(&RawPeer::msg(5, 0, *g));
        assert!(raw.wait(s).await.is_success());
    }
    for _ in 0..64 {
        drop(victim.receive_local_mr_with_timeout(Duration::from_secs(5)).await.unwrap());
    }
    assert_eq!(victim.granted_to_peer(), (0, 0));
    assert_eq!(victim.pool().free_bytes(), free0, "every grant back in the pool");
    assert!(victim.closed_reason().is_none());
    hostile_row(
        "flood of 600 Requests, not waiting for answers",
        VICTIM,
        "64 granted (quota), 536 denied QuotaCount; all answered; 0 leaked",
    );
}

/// The quotas through the public API: a request beyond either is a typed
/// refusal, and room comes back with each return.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_grant_quota_refuses_with_a_typed_denial() {
    let o = opts().grant_quota_count(3).grant_quota_bytes(1 << 20);
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
    let (server, client) = (server.unwrap(), client.unwrap());
    match client.request_remote_mr(layout(2 << 20)).await {
        Err(Error::Denied { size, why: Denial::QuotaBytes }) => assert_eq!(size, 2 << 20),
        other => panic!("beyond the byte quota: {other:?}"),
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(client.request_remote_mr(layout(4096)).await.unwrap());
    }
    let e = client.request_remote_mr(layout(4096)).await.unwrap_err();
    assert!(matches!(e, Error::Denied { why: Denial::QuotaCount, .. }), "{e:?}");
    assert!(e.to_string().contains("grant_quota_count"), "{e}");
    assert_eq!(server.granted_to_peer(), (3 * 4096, 3));
    client.send_remote_mr(held.pop().unwrap()).await.unwrap();
    drop(server.receive_local_mr().await.unwrap());
    client.request_remote_mr(layout(4096)).await.expect("room again after a return");
    hostile_row("Request beyond the grant quota", VICTIM, "typed refusal Error::Denied { QuotaCount / QuotaBytes }");
}

/// More lends than `lend_backlog` that nobody takes: a protocol violation
/// that closes the endpoint with a typed error, not an unbounded queue.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_lend_flood_beyond_the_backlog_closes_with_a_protocol_error() {
    let (victim, mut raw) = victim_and_raw(opts()).await;
    for i in 0..100u64 {
        let s = raw.send_ctrl(&RawPeer::msg(4, 0, RemoteMr { addr: 0x1000 * i, len: 64, rkey: 7 }));
        let _ = raw.wait(s).await;
    }
    let (e, _) = closed_within(&victim, Duration::from_secs(5)).await;
    assert!(matches!(&e, Error::Protocol(w) if w.contains("lend_backlog")), "{e:?}");
    // What was queued is still handed out, then the error.
    for _ in 0..64 {
        victim.receive_remote_mr().await.unwrap();
    }
    let e = victim.receive_remote_mr().await.unwrap_err();
    assert!(matches!(&e, Error::Protocol(w) if w.contains("lend_backlog")), "{e:?}");
    hostile_row("flood of 100 Lends nobody takes", VICTIM, "64 queued, then Error::Protocol (lend_backlog); closed");
}

/// Control messages of the wrong size: an undersized one is a protocol
/// error (not parsed with stale bytes), an oversized one fails the receive
/// and closes the endpoint.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_control_message_byte_len_is_checked() {
    let (victim, mut raw) = victim_and_raw(opts()).await;
    // A valid message first, so the receive buffers hold stale bytes.
    let r = raw.request(1, 64);
    raw.wait(r).await;
    let _ = raw.next_msg().await;
    let s = raw.send_ctrl(&[1u8; 8]);
    let _ = raw.wait(s).await;
    let (e, t) = closed_within(&victim, Duration::from_secs(5)).await;
    assert!(matches!(&e, Error::Protocol(w) if w.contains("8 bytes")), "{e:?}");
    assert!(matches!(victim.receive_remote_mr().await, Err(Error::Protocol(_))));
    hostile_row("undersized (8 B) control message", VICTIM, &format!("Error::Protocol, closed in {t:.1?}"));

    let (victim, mut raw) = victim_and_raw(opts()).await;
    let s = raw.send_ctrl(&[1u8; 64]);
    let _ = raw.wait(s).await;
    let (e, t) = closed_within(&victim, Duration::from_secs(5)).await;
    assert!(matches!(e, Error::Closed | Error::Protocol(_)), "{e:?}");
    assert_eq!(victim.granted_to_peer(), (0, 0), "nothing granted on garbage");
    hostile_row("oversized (64 B) control message", VICTIM, &format!("receive fails, {e:?} in {t:.1?}"));
}

/// A client that connects over TCP and says nothing: accept ends at
/// `setup_timeout` with a typed error, and the next client is served.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_silent_tcp_client_does_not_block_accept_forever() {
    // The honest client after the silent one must be served within the
    // same bound, which counts the set-up of both sides: under emulation on
    // a loaded host that took 3.6 to 8 s even with a 1 MiB pool and small
    // queues, so the bound is the default 10 s (not 2 s), the pool and
    // queues are small and the client sets up on a thread of its own (its
    // own bound is wide: only the listener's is under test).
    let caps = QpCaps::default().max_send_wr(16).max_recv_wr(16);
    let o = opts().setup_timeout(Duration::from_secs(10)).pool_size(1 << 20).caps(caps).cq_size(512);
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    let _silent = TcpStream::connect(addr).await.unwrap();
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), l.accept()).await.expect("accept ended");
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    let took = t.elapsed();
    assert!(took >= Duration::from_secs(10) && took < Duration::from_secs(15), "{took:?}");
    let t = Instant::now();
    let oc = o.clone().setup_timeout(Duration::from_secs(60));
    let client = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async { RcEndpoint::connect(addr, &oc).await.map(drop) })
    });
    let server = l.accept().await;
    let client = tokio::task::spawn_blocking(move || client.join()).await.unwrap().unwrap();
    let setup = t.elapsed();
    assert!(server.is_ok() && client.is_ok(), "next client not served in {setup:?}: {server:?}, {client:?}");
    hostile_row(
        "silent TCP client",
        VICTIM,
        &format!("accept: Error::Timeout in {took:.1?} (setup_timeout 10 s); next client served in {setup:.1?}"),
    );
}

/// Return ordering: a WRITE whose future was dropped, then
/// `send_remote_mr`: the owner gets the region only after the WRITE landed.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_return_is_ordered_after_a_dropped_write() {
    const LEN: usize = 8 << 20;
    let o = opts().pool_size(64 << 20).grant_quota_bytes(16 << 20);
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
    let (server, client) = (server.unwrap(), client.unwrap());
    for round in 0..5u8 {
        let remote = client.request_remote_mr(layout(LEN)).await.unwrap();
        let mut src = client.alloc_local_mr(layout(LEN)).unwrap();
        src.write(0, &vec![round + 1; LEN]);
        {
            let fut = client.write(src, 0..LEN, remote.addr_at(0));
            tokio::pin!(fut);
            tokio::select! { biased; _ = &mut fut => {}, _ = std::future::ready(()) => {} }
        }
        client.send_remote_mr(remote).await.unwrap();
        let back = server.receive_local_mr_with_timeout(Duration::from_secs(10)).await.unwrap();
        let mut b = vec![0u8; LEN];
        back.read(0, &mut b);
        assert!(b.iter().all(|&x| x == round + 1), "round {round}: the region came back before the WRITE landed");
    }
    fault_row(
        "send_remote_mr right after a dropped 8 MiB write",
        "send_remote_mr",
        "Return sent after the write completed; owner sees every byte",
    );
}

/// A cancelled `request_remote_mr` (timed out before its answer) leaks
/// nothing at the peer: the late grant goes straight back.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_cancelled_request_gives_a_late_grant_back() {
    let o = opts();
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
    let (server, client) = (server.unwrap(), client.unwrap());
    let free0 = server.pool().free_bytes();
    // 12: within the 16 requests that may await answers at once (a request
    // beyond them waits for a slot, and dropped there is never sent).
    for _ in 0..12 {
        let fut = client.request_remote_mr(layout(4096));
        tokio::pin!(fut);
        tokio::select! { biased; _ = &mut fut => {}, _ = std::future::ready(()) => {} }
    }
    // The peer answers in order: once this one is answered, the 12 earlier
    // grants have reached the client (and, cancelled, gone back).
    let last = client.request_remote_mr(layout(4096)).await.unwrap();
    client.send_remote_mr(last).await.unwrap();
    for i in 0..13 {
        let back = server.receive_local_mr_with_timeout(Duration::from_secs(3)).await;
        assert!(back.is_ok(), "piece {i} of 13 not given back: {back:?} (granted {:?})", server.granted_to_peer());
    }
    assert_eq!(server.granted_to_peer(), (0, 0));
    assert_eq!(server.pool().free_bytes(), free0, "every grant back in the pool");
    fault_row(
        "request_remote_mr dropped before its answer (x12)",
        "request_remote_mr",
        "late grants returned; 0 leaked",
    );
}

/// A peer that answers nothing: the `_with_timeout` forms end with
/// `Error::Timeout`; a peer whose QPs vanish without closing TCP is found
/// by the keepalive within `peer_timeout` and every waiting call ends.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_silent_or_vanished_peer_ends_every_waiting_call() {
    let o = opts().peer_timeout(Duration::from_secs(2));
    let (victim, mut raw) = victim_and_raw(o).await;
    let victim = Arc::new(victim);
    // Silent (alive, answers nothing).
    let (r, _) = tokio::join!(
        victim.request_remote_mr_with_timeout(layout(64), Duration::from_millis(500)),
        raw.idle(Duration::from_millis(700))
    );
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    let r = victim.receive_remote_mr_with_timeout(Duration::from_millis(300)).await;
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    let r = victim.receive_local_mr_with_timeout(Duration::from_millis(300)).await;
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    fault_row("silent peer", "*_with_timeout", "Error::Timeout at the bound");

    // Vanished: its QPs gone, its TCP connection kept open.
    let v = Arc::clone(&victim);
    let waiting = tokio::spawn(async move {
        let (a, b, c, d) = tokio::join!(
            v.receive_local_mr(),
            v.receive_remote_mr(),
            v.request_remote_mr(layout(64)),
            v.recv(v.alloc_local_mr(layout(64)).unwrap())
        );
        (a.map(drop), b.map(drop), c.map(drop), d.map(drop))
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let tcp = raw.tcp.take();
    let t = Instant::now();
    drop(raw);
    let (a, b, c, d) = tokio::time::timeout(Duration::from_secs(6), waiting).await.expect("all ended").unwrap();
    let took = t.elapsed();
    for r in [a, b, c, d] {
        assert!(matches!(r, Err(Error::Closed) | Err(Error::Completion(_))), "{r:?}");
    }
    drop(tcp);
    fault_row(
        "peer's QPs vanish, TCP stays open",
        "receive_local_mr, receive_remote_mr, request_remote_mr, recv",
        &format!("all end (Error::Closed / flush) in {took:.1?} (peer_timeout 2 s)"),
    );
}

/// The peer's process ends (its TCP connection closes) during each waiting
/// call and after it: every call ends with `Error::Closed` promptly.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_peer_gone_during_and_after_each_call_ends_it() {
    let o = opts();
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    // Before accept finishes: the client connects and vanishes.
    let gone = TcpStream::connect(addr).await.unwrap();
    drop(gone);
    let r = tokio::time::timeout(Duration::from_secs(5), l.accept()).await.expect("accept ended");
    assert!(r.is_err(), "{r:?}");
    fault_row("peer vanishes during set-up", "Listener::accept", "typed error (Io), no hang");

    for call in ["receive_local_mr", "receive_remote_mr", "request_remote_mr", "recv", "write"] {
        let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
        let (server, client) = (Arc::new(server.unwrap()), client.unwrap());
        let lent = {
            client.send_local_mr(client.alloc_local_mr(layout(4096)).unwrap()).await.unwrap();
            server.receive_remote_mr().await.unwrap()
        };
        let s = Arc::clone(&server);
        let waiting = tokio::spawn(async move {
            match call {
                "receive_local_mr" => s.receive_local_mr().await.map(drop),
                "receive_remote_mr" => s.receive_remote_mr().await.map(drop),
                "request_remote_mr" => {
                    // The peer is gone before the answer could come: keep asking.
                    loop {
                        s.request_remote_mr(layout(64)).await?;
                    }
                }
                "recv" => s.recv(s.alloc_local_mr(layout(64)).unwrap()).await.map(drop),
                _ => loop {
                    s.write(s.alloc_local_mr(layout(64)).unwrap(), 0..64, lent.addr_at(0)).await?;
                },
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t = Instant::now();
        drop(client);
        let r = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("the call ended").unwrap();
        let took = t.elapsed();
        assert!(matches!(r, Err(Error::Closed) | Err(Error::Completion(_))), "{call}: {r:?}");
        // After: every call ends at once.
        let after = server.receive_local_mr().await;
        assert!(matches!(after, Err(Error::Closed)), "{after:?}");
        let after = server.request_remote_mr(layout(8)).await;
        assert!(matches!(after, Err(Error::Closed)), "{after:?}");
        fault_row(
            "peer process ends during the call",
            call,
            &format!("{r:?} in {took:.1?}; later calls Error::Closed"),
        );
    }
}

/// The runtime shut down with operations in flight: nothing hangs or
/// crashes, and a new runtime serves new endpoints.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_runtime_shut_down_with_operations_in_flight() {
    for round in 0..2 {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let t = Instant::now();
        rt.block_on(async {
            let o = opts();
            let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
            let addr = l.local_addr().unwrap();
            let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
            let (server, client) = (Arc::new(server.unwrap()), Arc::new(client.unwrap()));
            server.send_local_mr(server.alloc_local_mr(layout(64 << 10)).unwrap()).await.unwrap();
            let lent = client.receive_remote_mr().await.unwrap();
            // SENDs the server has posted no receive for (RNR, retried
            // forever): they stay in flight however fast the device is
            // (a WRITE's completion can be there at its future's first poll).
            for _ in 0..50 {
                let c = Arc::clone(&client);
                let src = c.alloc_local_mr(layout(64 << 10)).unwrap();
                tokio::spawn(async move { c.send(src, 0..64 << 10).await });
            }
            // A WRITE beside them, through the lent region (RC keeps the
            // order: it waits behind the SENDs).
            let c = Arc::clone(&client);
            let src = c.alloc_local_mr(layout(64 << 10)).unwrap();
            tokio::spawn(async move { c.write(src, 0..64 << 10, lent.addr_at(0)).await });
            let s = Arc::clone(&server);
            tokio::spawn(async move { s.receive_local_mr().await });
            tokio::task::yield_now().await;
            assert!(client.in_flight() > 0, "writes in flight when the runtime stops (round {round})");
        });
        drop(rt);
        assert!(t.elapsed() < Duration::from_secs(20));
    }
    fault_row(
        "runtime shut down with 50 SENDs (receiver not ready) and a write in flight",
        "write, receive_local_mr",
        "no hang, no crash; next runtime serves",
    );
}

/// The harness's CM device address (an rxe device on a veth end).
fn cm_addr() -> std::net::SocketAddr {
    let ip: std::net::IpAddr = std::env::var("RRDDMMA_CM_ADDR")
        .expect("RRDDMMA_CM_ADDR is set by the harness (an rxe device on a veth end)")
        .parse()
        .expect("an IP address");
    std::net::SocketAddr::new(ip, 0)
}

/// Issue 22: a vanished CM peer left `receive_local_mr()` waiting forever
/// (nothing watched the CM id after set-up). Now the CM's `DISCONNECTED`
/// closes the endpoint and every waiting call ends with `Error::Closed`.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_CM_ADDR (cargo xtask test)"]
async fn regression_cm_peer_vanishing_ends_receive_local_mr() {
    let o = opts();
    let l = Listener::bind_cm(cm_addr(), o.clone()).await.expect("listen through the CM");
    let addr = l.local_addr().unwrap();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect_cm(addr, &o));
    let (server, client) = (Arc::new(server.unwrap()), client.unwrap());
    server.send_local_mr(server.alloc_local_mr(layout(1 << 20)).unwrap()).await.unwrap();
    let _lent = client.receive_remote_mr().await.unwrap();
    let s = Arc::clone(&server);
    let waiting = tokio::spawn(async move {
        let (a, b) = tokio::join!(s.receive_local_mr(), s.receive_remote_mr());
        (a.map(drop), b.map(drop))
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = std::time::Instant::now();
    drop(client);
    let (a, b) = tokio::time::timeout(Duration::from_secs(15), waiting).await.expect("no hang").unwrap();
    assert!(matches!(a, Err(Error::Closed)), "{a:?}");
    assert!(matches!(b, Err(Error::Closed)), "{b:?}");
    fault_row(
        "peer vanishes (CM path: DISCONNECTED)",
        "receive_local_mr, receive_remote_mr",
        &format!("Error::Closed in {:.1?}", t.elapsed()),
    );
}

/// `AioOpts::secret`: a client with the wrong secret, or none, is refused
/// with a typed error at both ends before the listener opens a device; the
/// right one is served; the CM path refuses a secret it cannot check.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_listener_secret_refuses_a_wrong_or_missing_secret() {
    let o = opts().secret("experiment-42").setup_timeout(Duration::from_secs(2));
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    let wrong = opts().secret("experiment-43");
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &wrong));
    assert!(matches!(&client, Err(Error::Protocol(w)) if w.contains("secret")), "{client:?}");
    assert!(server.is_err(), "{server:?}");
    let none = opts();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &none));
    assert!(matches!(&server, Err(Error::Protocol(w)) if w.contains("did not authenticate")), "{server:?}");
    assert!(client.is_err(), "{client:?}");
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
    let (server, client) = (server.unwrap(), client.unwrap());
    client.send_local_mr(client.alloc_local_mr(layout(64)).unwrap()).await.unwrap();
    server.receive_remote_mr().await.unwrap();
    let cm = Listener::bind_cm(cm_addr(), o.clone()).await;
    assert!(matches!(cm, Err(Error::Verbs(rrddmma::prim::Error::Unsupported { .. }))), "{cm:?}");
    hostile_row(
        "wrong or missing shared secret",
        VICTIM,
        "Error::Protocol at both ends before any device work; right secret served",
    );
}

/// A peer that takes no control messages (no receives posted) is lost
/// within `peer_timeout`: its keepalive fails (on rxe the RNR retries end
/// it well before) or stays unacknowledged for `peer_timeout`.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn regression_peer_taking_no_control_messages_is_lost_within_peer_timeout() {
    let o = opts().peer_timeout(Duration::from_secs(2));
    let l = Listener::bind("127.0.0.1:0", o).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (victim, raw) = tokio::join!(l.accept(), RawPeer::connect_with(addr, 0));
    let victim = victim.unwrap();
    let t = Instant::now();
    let waiting = victim.receive_remote_mr();
    let r = tokio::time::timeout(Duration::from_secs(6), waiting).await.expect("ended within 6 s");
    let took = t.elapsed();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    assert!(took < Duration::from_millis(2600), "{took:?}: later than peer_timeout and one tick");
    drop(raw);
    fault_row(
        "peer posts no control receives (keepalive stuck on RNR)",
        "receive_remote_mr",
        &format!("Error::Closed in {took:.1?} (peer_timeout 2 s)"),
    );
}

/// Fault-table rows: no listener at connect; a device error (a WRITE
/// outside the lent region) on an operation, and what follows it.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn fault_table_connect_refused_and_device_error() {
    let o = opts();
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = gone.local_addr().unwrap();
    drop(gone);
    let r = tokio::time::timeout(Duration::from_secs(5), RcEndpoint::connect(addr, &o)).await.expect("no hang");
    assert!(matches!(r, Err(Error::Io { .. })), "{r:?}");
    fault_row("peer vanished before the call (no listener)", "RcEndpoint::connect", "Error::Io (connection refused)");

    let l = Listener::bind("127.0.0.1:0", o.clone()).await.unwrap();
    let addr = l.local_addr().unwrap();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
    let (server, client) = (server.unwrap(), client.unwrap());
    server.send_local_mr(server.alloc_local_mr(layout(64)).unwrap()).await.unwrap();
    let lent = client.receive_remote_mr().await.unwrap();
    let past = RemoteMr { len: 1 << 20, ..lent }.addr_at(64);
    let r = client.write(client.alloc_local_mr(layout(64)).unwrap(), 0..64, past).await;
    assert!(matches!(&r, Err(Error::Completion(e)) if e.status == WcStatus::REM_ACCESS_ERR), "{r:?}");
    let next = tokio::time::timeout(
        Duration::from_secs(5),
        client.read(client.alloc_local_mr(layout(8)).unwrap(), 0..8, lent.addr_at(0)),
    )
    .await
    .expect("no hang");
    assert!(matches!(&next, Err(Error::Completion(e)) if e.status == WcStatus::WR_FLUSH_ERR), "{next:?}");
    fault_row(
        "device error: WRITE outside the lent region",
        "write, then read",
        "Error::Completion(REM_ACCESS_ERR); the next data op WR_FLUSH_ERR (the QP is in error), no hang",
    );
}

/// C1: a peer loops Request → Return while the victim's application never
/// calls `receive_local_mr` (it only serves grants). A returned piece
/// counts against the peer's quota until the application takes it, so the
/// loop gets one 4 MiB grant and then `QuotaBytes`, not the whole pool; with
/// 1-byte pieces it gets 64 (the count quota) and then `QuotaCount`, so the
/// queue of returned pieces holds at most 64. Taking them frees the quota.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn c1_request_return_loop_cannot_walk_around_the_grant_quota() {
    const MIB4: u64 = 4 << 20;
    let (victim, mut raw) = victim_and_raw(opts()).await;
    let free0 = victim.pool().free_bytes();
    // One Request, its answer, and (for a grant) at once a Return.
    async fn round(raw: &mut RawPeer, id: u32, size: u64) -> Result<RemoteMr, u8> {
        let s = raw.request(id, size);
        assert!(raw.wait(s).await.is_success());
        let m = raw.next_msg().await;
        match m[0] {
            2 => {
                let t = token(&m);
                let s = raw.send_ctrl(&RawPeer::msg(5, 0, t));
                assert!(raw.wait(s).await.is_success());
                Ok(t)
            }
            3 => Err(m[1]),
            k => panic!("unexpected kind {k}"),
        }
    }
    let mut answers = Vec::new();
    for i in 0..8 {
        answers.push(round(&mut raw, i + 1, MIB4).await.map(|t| t.len));
    }
    assert_eq!(answers[0], Ok(MIB4), "the first 4 MiB request is granted");
    assert!(answers[1..].iter().all(|a| *a == Err(2)), "then QuotaBytes (code 2), not a new grant: {answers:?}");
    assert_eq!(victim.granted_to_peer(), (4 << 20, 1), "the returned piece counts until taken");
    assert!(victim.pool().free_bytes() >= free0 - (4 << 20), "the pool lent at most the quota");
    let mine = victim.alloc_local_mr(layout(4 << 20)).expect("the pool still serves this side");
    drop(mine);
    drop(victim.receive_local_mr_with_timeout(Duration::from_secs(5)).await.unwrap());
    assert_eq!(victim.granted_to_peer(), (0, 0), "taking the return frees the quota");

    let mut granted = 0;
    let mut denied = 0;
    for i in 0..200 {
        match round(&mut raw, 100 + i, 1).await {
            Ok(_) => granted += 1,
            Err(code) => {
                assert_eq!(code, 3, "denied for the count quota (code 3)");
                denied += 1;
            }
        }
    }
    assert_eq!((granted, denied), (64, 136), "64 (grant_quota_count) granted and returned, then denied");
    let (bytes, count) = victim.granted_to_peer();
    assert_eq!(count, 64, "64 returned pieces wait, each counted");
    for _ in 0..64 {
        drop(victim.receive_local_mr_with_timeout(Duration::from_secs(5)).await.unwrap());
    }
    let r = victim.receive_local_mr_with_timeout(Duration::from_millis(200)).await;
    assert!(matches!(r, Err(Error::Timeout { .. })), "no 65th returned piece was queued: {r:?}");
    assert_eq!(victim.granted_to_peer(), (0, 0));
    assert_eq!(victim.pool().free_bytes(), free0, "every piece back in the pool");
    assert!(victim.closed_reason().is_none());
    hostile_row(
        "Request → Return loop, victim never taking returns (4 MiB, then 1 B pieces)",
        VICTIM,
        &format!(
            "1 of 8 granted then QuotaBytes; 64 of 200 then QuotaCount; returned pieces counted ({bytes} B, 64) \
             until taken; pool never emptied"
        ),
    );
}

/// C2: `send_remote_mr` waits for the data QP's earlier requests, and a
/// peer that posts no receive holds a SEND up for as long as it likes while
/// it acknowledges every keepalive: RNR NAKs, retried without end at the
/// default `rnr_retry` of 7 (SoftRoCE's completer lets its transport retry
/// counter run out during the RNR waits, so the connection's `retry_cnt` is
/// 7 here, which SoftRoCE also reads as "without end"). The wait ends with
/// `Error::Timeout` at `peer_timeout`.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn c2_send_remote_mr_behind_a_send_held_up_by_the_peer_ends_at_peer_timeout() {
    let bound = Duration::from_secs(2);
    let without_end = ConnectOpts::default().retry_cnt(7).access(rrddmma::prim::AccessFlags::REMOTE_WRITE);
    let (victim, mut raw) = victim_and_raw(opts().peer_timeout(bound).connect(without_end)).await;
    let victim = Arc::new(victim);
    let v = Arc::clone(&victim);
    let stuck = tokio::spawn(async move { v.send(v.alloc_local_mr(layout(64)).unwrap(), 0..64).await.map(drop) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let timed = async {
        let t = Instant::now();
        let give_back = victim.send_remote_mr(RemoteMr { addr: 0x1000, len: 64, rkey: 1 });
        (tokio::time::timeout(Duration::from_secs(15), give_back).await, t.elapsed())
    };
    let ((r, took), _) = tokio::join!(timed, raw.idle(bound + Duration::from_secs(1)));
    let r = r.expect("send_remote_mr ended within 15 s");
    if stuck.is_finished() {
        panic!("the SEND ended: {:?}; send_remote_mr: {r:?}; closed: {:?}", stuck.await, victim.closed_reason());
    }
    assert!(matches!(r, Err(Error::Timeout { after, .. }) if after == bound), "{r:?} after {took:?}");
    assert!(took >= bound && took < bound + Duration::from_secs(3), "ended after {took:?}, bound {bound:?}");
    assert!(victim.closed_reason().is_none(), "the peer acknowledges keepalives: the endpoint stays open");
    drop(raw);
    let _ = tokio::time::timeout(Duration::from_secs(10), stuck).await;
    fault_row(
        "peer holds a SEND up (RNR NAKs, retried without end), acknowledges keepalives",
        "send_remote_mr",
        &format!("Error::Timeout after {took:.1?} (peer_timeout {bound:?}); endpoint open"),
    );
}
