//! Completion-channel event loops under CPU load: every round waits for one
//! completion that arrives from another thread or from the device's own
//! processing (a SEND of the peer's, at a varied delay, or a WRITE's
//! acknowledgement), while busy threads keep every CPU taken, so that the
//! completion lands before the first poll, between the poll and the arm,
//! or after the arm, round by round. A lost event (an arm after a poll
//! that found nothing, with no poll after it; an event taken and no poll
//! after it) leaves a round waiting for a completion that is already in
//! the CQ: every round is bounded, and the test fails naming the round and
//! whether the CQ held the completion. Each test prints its rounds' worst
//! and mean times.
//!
//! - `Cq::wait` (the blocking read and the `poll(2)` path) and
//!   `Cq::wait_one`;
//! - the channel through tokio's `AsyncFd`: poll, arm, poll, await
//!   readability, then `Cq::wait(Some(ZERO))` on a blocking channel, or
//!   `Cq::try_event`;
//! - `wrap::aio`: `LocalEndpoint::block_on` on a CQ with a channel, and
//!   the `RcEndpoint` driver task in event mode (`spin_polls(0)`: it arms
//!   at the first empty poll).
//!
//! Waits that block in the kernel with no timeout (`Cq::wait(None)`,
//! `LocalEndpoint::block_on`) are watched by a thread that, past the bound,
//! reports the round and aborts the process (nothing else would end it).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rrddmma::prim::{
    AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, RecvWr, SendWr, Wc, WcOpcode,
};

use crate::common::{open_device, Buf};

/// Rounds of each path.
const ROUNDS: u32 = 500;
/// A round that waits longer has lost its event: a round takes
/// milliseconds even in the emulated VM under load.
const BOUND: Duration = Duration::from_secs(15);
/// Receives kept posted on the waiting side's QP.
const RECVS: u32 = 16;

/// Threads that keep every CPU busy (at least two) until dropped.
struct Burners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl Burners {
    fn start() -> Burners {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|i| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..4096 {
                            x = std::hint::black_box(x.rotate_left(7).wrapping_mul(0x2545_f491_4f6c_dd1d));
                        }
                    }
                    x
                })
            })
            .collect();
        eprintln!("{n} busy threads");
        Burners { stop, threads }
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A small deterministic generator (xorshift), for the rounds' shapes and delays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
}

/// The rounds' times.
struct Timing {
    label: &'static str,
    worst: Duration,
    worst_round: u32,
    total: Duration,
    rounds: u32,
    start: Instant,
}

impl Timing {
    fn new(label: &'static str) -> Timing {
        Timing { label, worst: Duration::ZERO, worst_round: 0, total: Duration::ZERO, rounds: 0, start: Instant::now() }
    }

    fn record(&mut self, round: u32, took: Duration) {
        assert!(
            took <= BOUND,
            "{}: round {round} took {took:?} (bound {BOUND:?}): its completion event came late or was lost",
            self.label
        );
        if took > self.worst {
            self.worst = took;
            self.worst_round = round;
        }
        self.total += took;
        self.rounds += 1;
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        let mean = self.total.checked_div(self.rounds).unwrap_or_default();
        eprintln!(
            "{}: {} rounds in {:?}, worst round {:?} (round {}), mean {mean:?}, bound {BOUND:?}",
            self.label,
            self.rounds,
            self.start.elapsed(),
            self.worst,
            self.worst_round
        );
    }
}

/// Watches rounds that block with no timeout: past the bound, it reports
/// the round and whether the CQ holds a completion (the event was lost:
/// the completion is there, nobody was told), and aborts the process.
struct Watchdog {
    /// The round under way, plus one (0: none).
    round: Arc<AtomicU32>,
    /// When it began, in milliseconds since `base`.
    since: Arc<AtomicU64>,
    base: Instant,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// `cq`: the CQ to look into before aborting, when the test may keep a
    /// clone of it (a `LocalEndpoint` owns its CQ: none there).
    fn start(label: &'static str, cq: Option<Cq>) -> Watchdog {
        let round = Arc::new(AtomicU32::new(0));
        let since = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let base = Instant::now();
        let thread = {
            let (round, since, stop) = (round.clone(), since.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(100));
                    let r = round.load(Ordering::Acquire);
                    let at = Duration::from_millis(since.load(Ordering::Acquire));
                    if r == 0 || base.elapsed().saturating_sub(at) <= BOUND {
                        continue;
                    }
                    let mut wc = [Wc::default()];
                    let held = cq.as_ref().map(|cq| cq.poll(&mut wc).unwrap_or(0));
                    eprintln!(
                        "{label}: round {} has waited past {BOUND:?} in a blocking wait; the CQ {}. Aborting \
                         (nothing else ends a blocking wait).",
                        r - 1,
                        match held {
                            Some(0) => "is empty".to_string(),
                            Some(_) => format!("holds a completion ({:?}): the completion event was lost", wc[0]),
                            None => "was not looked into (the endpoint owns it)".to_string(),
                        },
                    );
                    std::process::abort();
                }
            })
        };
        Watchdog { round, since, base, stop, thread: Some(thread) }
    }

    fn begin(&self, round: u32) {
        self.since.store(self.base.elapsed().as_millis() as u64, Ordering::Release);
        self.round.store(round + 1, Ordering::Release);
    }

    fn end(&self) {
        self.round.store(0, Ordering::Release);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A thread that runs `act(n)` for each `n` sent to it, after a delay
/// varied round by round: none, a spin of up to 50 µs, a yield, a sleep of
/// 200 µs.
struct Sender {
    tx: Option<mpsc::Sender<(u32, u32)>>,
    thread: Option<JoinHandle<()>>,
}

impl Sender {
    fn spawn<F, A>(make: F) -> Sender
    where
        F: FnOnce() -> A + Send + 'static,
        A: FnMut(u32),
    {
        let (tx, rx) = mpsc::channel::<(u32, u32)>();
        let thread = std::thread::spawn(move || {
            let mut act = make();
            for (n, delay) in rx {
                match delay % 4 {
                    0 => {}
                    1 => {
                        let until = Instant::now() + Duration::from_micros(u64::from(delay % 50));
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                    }
                    2 => std::thread::yield_now(),
                    _ => std::thread::sleep(Duration::from_micros(200)),
                }
                act(n);
            }
        });
        Sender { tx: Some(tx), thread: Some(thread) }
    }

    fn go(&self, n: u32, delay: u32) {
        self.tx.as_ref().unwrap().send((n, delay)).expect("the sender thread is running");
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Two connected RC QPs of the test device: `qa` (the waiting side) on
/// `cqa`, which has a completion channel, and `qb` (the peer, driven by
/// a [`Sender`]) on `cqb`, polled. Field order is drop order.
struct Rig {
    qa: Qp,
    qb: Arc<Qp>,
    cqa: Cq,
    cqb: Cq,
    /// Read by the tokio tests only.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    ch: CompChannel,
    a: Buf,
    b: Arc<Buf>,
    /// Read by the tokio tests only.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pd: Pd,
    _ctx: Context,
}

fn rig() -> Rig {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).expect("ibv_alloc_pd");
    let ch = CompChannel::create(&ctx).expect("ibv_create_comp_channel");
    let cqa = Cq::builder(&ctx, 256).channel(&ch).build().expect("cq a");
    let cqb = Cq::create(&ctx, 256).expect("cq b");
    let caps = QpCaps::default().max_send_wr(64).max_recv_wr(64);
    let qa = Qp::builder(&pd, QpType::RC, &cqa, &cqa).caps(caps).build().expect("qp a");
    let qb = Qp::builder(&pd, QpType::RC, &cqb, &cqb).caps(caps).build().expect("qp b");
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE);
    crate::common::connect_pair(&qa, &qb, &opts, (100, 200));
    let a = Buf::new(&pd, 4096);
    let b = Arc::new(Buf::new(&pd, 4096));
    Rig { qa, qb: Arc::new(qb), cqa, cqb, ch, a, b, pd, _ctx: ctx }
}

impl Rig {
    /// A thread posting a SEND with immediate `n` (8 bytes: `n` twice) on `qb`, and polling its completion.
    fn sender(&self) -> Sender {
        let (qb, cqb, b) = (self.qb.clone(), self.cqb.clone(), self.b.clone());
        Sender::spawn(move || {
            move |n: u32| {
                let sges = [b.mr.sge_at(0, 8)];
                // SAFETY: the bytes are registered, live as long as the
                // thread (an `Arc`) and never written while a SEND reads them.
                unsafe { qb.post_send(&mut [SendWr::send_imm(&sges, n).wr_id(u64::from(n)).signaled()]) }
                    .expect("post SEND on qb");
                let wc = crate::common::poll_one(&cqb);
                wc.ok().expect("the SEND of qb completes");
            }
        })
    }

    /// Posts a receive into slot `slot` (64 bytes) of `a`'s buffer.
    fn post_recv(&self, slot: u32) {
        let sges = [self.a.mr.sge_at(1024 + 64 * slot as usize, 64)];
        // SAFETY: the slot's bytes are registered and live as long as the
        // QP (field order); the test reads none of them.
        unsafe { self.qa.post_recv(&mut [RecvWr::new(&sges, u64::from(RECV_TAG | slot))]) }.expect("post RECV on qa");
    }

    /// Posts a signaled 8-byte WRITE from `a`'s buffer into `b`'s, `wr_id` `n`.
    fn post_write(&self, n: u32) {
        let sges = [self.a.mr.sge_at(0, 8)];
        let wr = SendWr::write(&sges, self.b.mr.remote().addr_at(0)).wr_id(u64::from(n)).signaled();
        // SAFETY: registered bytes that live as long as the QP; the target
        // grants REMOTE_WRITE and is read by nobody.
        unsafe { self.qa.post_send(&mut [wr]) }.expect("post WRITE on qa");
    }

    /// Checks that `wc` is round `n`'s completion; re-posts a consumed receive.
    fn check(&self, wc: &Wc, n: u32, remote: bool) {
        let wc = wc.ok().unwrap_or_else(|e| panic!("round {n}: the completion failed: {e}"));
        if remote {
            assert_eq!(wc.opcode(), WcOpcode::RECV, "round {n}: {wc:?}");
            assert_eq!(wc.imm(), Some(n), "round {n}: the SEND's immediate");
            assert_eq!(wc.byte_len(), 8, "round {n}");
            self.post_recv((wc.wr_id() as u32) & !RECV_TAG);
        } else {
            assert_eq!(wc.opcode(), WcOpcode::RDMA_WRITE, "round {n}: {wc:?}");
            assert_eq!(wc.wr_id(), u64::from(n), "round {n}: the WRITE's wr_id");
        }
    }
}

/// The `wr_id` bit of `qa`'s receives.
const RECV_TAG: u32 = 1 << 31;

/// One completion, if there is one.
fn take(cq: &Cq) -> Option<Wc> {
    let mut wc = [Wc::default()];
    (cq.poll(&mut wc).expect("ibv_poll_cq") == 1).then(|| wc[0])
}

/// Starts round `n`: a SEND from the peer after a varied delay (`true`),
/// or a WRITE of our own, whose completion comes with the peer's ACK.
fn start_round(rig: &Rig, sender: &Sender, rng: &mut Rng, n: u32) -> bool {
    let remote = rng.next() % 3 != 0;
    if remote {
        sender.go(n, rng.next());
    } else {
        rig.post_write(n);
    }
    remote
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn event_loop_under_load_cq_wait() {
    let rig = rig();
    for slot in 0..RECVS {
        rig.post_recv(slot);
    }
    let sender = rig.sender();
    let watchdog = Watchdog::start("Cq::wait(None)", Some(rig.cqa.clone()));
    let burn = Burners::start();
    let mut rng = Rng(0x5eed_0001);
    let mut timing = Timing::new("Cq::wait, Cq::wait_one");
    let cq = &rig.cqa;
    for n in 0..ROUNDS {
        let shape = rng.next() % 3;
        let t = Instant::now();
        let remote = start_round(&rig, &sender, &mut rng, n);
        let wc = match shape {
            // Cq::wait_one: poll, arm, poll, wait on the channel.
            0 => cq.wait_one(BOUND).expect("wait_one").unwrap_or_else(|| {
                panic!("round {n}: Cq::wait_one found no completion within {BOUND:?}: its event was lost")
            }),
            // The same loop by hand, with a bounded wait (poll(2), then read).
            1 => loop {
                if let Some(wc) = take(cq) {
                    break wc;
                }
                cq.req_notify(false).expect("req_notify");
                if let Some(wc) = take(cq) {
                    break wc;
                }
                let left = BOUND.saturating_sub(t.elapsed());
                if !cq.wait(Some(left)).expect("Cq::wait") {
                    let held = take(cq);
                    panic!("round {n}: no event within {BOUND:?}; the CQ then held {held:?}: the event was lost");
                }
            },
            // And with the blocking read (`ibv_get_cq_event`), as C waits.
            _ => {
                watchdog.begin(n);
                let wc = loop {
                    if let Some(wc) = take(cq) {
                        break wc;
                    }
                    cq.req_notify(false).expect("req_notify");
                    if let Some(wc) = take(cq) {
                        break wc;
                    }
                    assert!(cq.wait(None).expect("Cq::wait(None)"));
                };
                watchdog.end();
                wc
            }
        };
        timing.record(n, t.elapsed());
        rig.check(&wc, n, remote);
    }
    drop(timing);
    drop(burn);
    aimed_rounds(&rig);
    assert!(take(cq).is_none(), "no completion beyond the rounds'");
}

/// Rounds aimed at the window between `Cq::wait_one`'s first poll and its
/// arm, with the CPUs otherwise idle (so that the two threads run at
/// once): the waiter raises a flag, spins 100 µs and enters `wait_one`; a
/// thread spinning on the flag posts the peer's SEND after a delay swept
/// from 0 to 150 µs round by round, so that the completion lands before,
/// inside and after the window.
fn aimed_rounds(rig: &Rig) {
    const AIMED: u32 = 300;
    let flag = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (qb, cqb, b, flag, stop) = (rig.qb.clone(), rig.cqb.clone(), rig.b.clone(), flag.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = 0;
            while !stop.load(Ordering::Acquire) {
                let f = flag.load(Ordering::Acquire);
                if f == seen {
                    std::hint::spin_loop();
                    continue;
                }
                seen = f;
                let n = f - 1;
                let until = Instant::now() + Duration::from_nanos(u64::from(n * 997 % 150_000));
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                let sges = [b.mr.sge_at(0, 8)];
                // SAFETY: as in `Rig::sender`.
                unsafe { qb.post_send(&mut [SendWr::send_imm(&sges, n).wr_id(u64::from(n)).signaled()]) }
                    .expect("post SEND on qb");
                crate::common::poll_one(&cqb).ok().expect("the SEND of qb completes");
            }
        })
    };
    let mut timing = Timing::new("Cq::wait_one, aimed");
    for n in 0..AIMED {
        let t = Instant::now();
        flag.store(n + 1, Ordering::Release);
        while t.elapsed() < Duration::from_micros(100) {
            std::hint::spin_loop();
        }
        let wc = rig.cqa.wait_one(BOUND).expect("wait_one").unwrap_or_else(|| {
            panic!("aimed round {n}: Cq::wait_one found no completion within {BOUND:?}: its event was lost")
        });
        timing.record(n, t.elapsed());
        rig.check(&wc, n, true);
    }
    drop(timing);
    stop.store(true, Ordering::Release);
    thread.join().unwrap();
}

#[cfg(feature = "tokio")]
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn event_loop_under_load_async_fd() {
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    let rig = rig();
    for slot in 0..RECVS {
        rig.post_recv(slot);
    }
    let sender = rig.sender();
    let _burn = Burners::start();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // SAFETY: the channel (a clone, moved into the `AsyncFd`) keeps its
        // descriptor open while it lives, and `as_raw_fd` always returns it.
        let fd = unsafe { AsyncFd::register_with_interest(rig.ch.clone(), Interest::READABLE) }
            .expect("register the channel");
        let cq = &rig.cqa;
        let mut rng = Rng(0x5eed_0002);
        // First on a blocking channel with `Cq::wait(Some(ZERO))`, then with
        // `Cq::try_event` (which makes the channel non-blocking).
        for (label, try_event) in [("AsyncFd + Cq::wait(ZERO)", false), ("AsyncFd + Cq::try_event", true)] {
            let mut timing = Timing::new(label);
            for n in 0..ROUNDS {
                let t = Instant::now();
                let remote = start_round(&rig, &sender, &mut rng, n);
                let wc = loop {
                    if let Some(wc) = take(cq) {
                        break wc;
                    }
                    cq.req_notify(false).expect("req_notify");
                    if let Some(wc) = take(cq) {
                        break wc;
                    }
                    let left = BOUND.saturating_sub(t.elapsed());
                    let Ok(ready) = tokio::time::timeout(left, fd.readable()).await else {
                        let held = take(cq);
                        panic!(
                            "{label}: round {n}: the channel was not readable within {BOUND:?}; the CQ then held \
                             {held:?}: the event was lost"
                        );
                    };
                    let mut guard = ready.expect("AsyncFd::readable");
                    let got = if try_event {
                        match cq.try_event() {
                            Ok(()) => true,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                            Err(e) => panic!("try_event: {e}"),
                        }
                    } else {
                        cq.wait(Some(Duration::ZERO)).expect("Cq::wait(ZERO)")
                    };
                    if !got {
                        guard.clear_ready();
                    }
                };
                timing.record(n, t.elapsed());
                rig.check(&wc, n, remote);
            }
        }
    });
    assert!(take(&rig.cqa).is_none(), "no completion beyond the rounds'");
}

#[cfg(feature = "tokio")]
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn event_loop_under_load_local_endpoint_block_on() {
    use std::alloc::Layout;
    use std::future::Future;

    use rrddmma::wrap::aio::{LocalEndpoint, MrPool};

    let Rig { qa, qb, cqa, cqb, ch, a, b, pd, _ctx } = rig();
    let watchdog = Watchdog::start("LocalEndpoint::block_on", None);
    let pool = MrPool::new(&pd, 1 << 16).expect("pool");
    // Its own CQ, with a channel: `block_on` sleeps on it.
    let ep = LocalEndpoint::new(qa, cqa, pool);
    let sender = {
        let (qb, cqb) = (qb.clone(), cqb.clone());
        let mut src = Buf::new(&pd, 64);
        Sender::spawn(move || {
            move |n: u32| {
                // Written only between SENDs: each waits for its completion.
                src.bytes()[..8].copy_from_slice(&u64::from(n).to_le_bytes());
                let sges = [src.mr.sge_at(0, 8)];
                // SAFETY: registered bytes the thread owns, untouched until
                // the completion polled below.
                unsafe { qb.post_send(&mut [SendWr::send(&sges).wr_id(u64::from(n)).signaled()]) }
                    .expect("post SEND on qb");
                crate::common::poll_one(&cqb).ok().expect("the SEND of qb completes");
            }
        })
    };
    let _burn = Burners::start();
    let mut rng = Rng(0x5eed_0003);
    let mut timing = Timing::new("LocalEndpoint::block_on");
    let layout = Layout::from_size_align(64, 8).unwrap();
    let target = b.mr.remote().addr_at(4096 - 64);
    for n in 0..ROUNDS {
        let remote = rng.next() % 3 != 0;
        let delay = rng.next();
        let buf = ep.alloc_local_mr(layout).expect("a buffer");
        let t = Instant::now();
        watchdog.begin(n);
        if remote {
            // The SEND goes once the receive is posted (at the first poll).
            let mut op = std::pin::pin!(ep.recv(buf));
            let mut told = false;
            let (len, got) = ep
                .block_on(std::future::poll_fn(|cx| {
                    let p = op.as_mut().poll(cx);
                    if !told {
                        told = true;
                        sender.go(n, delay);
                    }
                    p
                }))
                .unwrap_or_else(|e| panic!("round {n}: recv: {e}"));
            let mut bytes = [0u8; 8];
            got.read(0, &mut bytes);
            assert_eq!((len, u64::from_le_bytes(bytes)), (8, u64::from(n)), "round {n}: the SEND's bytes");
        } else {
            let mut buf = buf;
            buf.write(0, &u64::from(n).to_le_bytes());
            ep.block_on(ep.write(buf, 0..8, target)).unwrap_or_else(|e| panic!("round {n}: write: {e}"));
        }
        watchdog.end();
        timing.record(n, t.elapsed());
    }
    drop(timing);
    assert_eq!(ep.in_flight(), 0);
    drop(sender);
    drop(ep);
    drop((qb, cqb, ch, a));
}

#[cfg(feature = "tokio")]
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn event_loop_under_load_rc_endpoint_driver() {
    use std::alloc::Layout;

    use rrddmma::wrap::aio::{AioOpts, Listener, RcEndpoint};

    drop(open_device());
    let dev = std::env::var("RRDDMMA_TEST_DEVICE").unwrap();
    // Event mode, arming at the first empty poll.
    let o = AioOpts::new(&dev).pool_size(1 << 20).spin_polls(0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _burn = Burners::start();
    rt.block_on(async {
        let l = Listener::bind("127.0.0.1:0", o.clone()).await.expect("listen");
        let addr = l.local_addr().unwrap();
        let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
        let (server, client) = (server.expect("accept"), client.expect("connect"));
        let layout = Layout::from_size_align(64, 8).unwrap();
        let target = server.request_remote_mr(layout).await.expect("a region of the client's");
        // The client sends from a thread of its own, on a runtime of its
        // own; its driver task runs here.
        let sender = Sender::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            move |n: u32| {
                let mut buf = client.alloc_local_mr(layout).expect("a client buffer");
                buf.write(0, &u64::from(n).to_le_bytes());
                rt.block_on(client.send(buf, 0..8)).unwrap_or_else(|e| panic!("round {n}: client send: {e}"));
            }
        });
        let mut rng = Rng(0x5eed_0004);
        let mut timing = Timing::new("RcEndpoint driver (event mode)");
        for n in 0..ROUNDS {
            let remote = rng.next() % 3 != 0;
            let delay = rng.next();
            let buf = server.alloc_local_mr(layout).expect("a server buffer");
            let t = Instant::now();
            if remote {
                let op = server.recv(buf);
                tokio::pin!(op);
                // Posted at the first poll; then the client sends.
                let first = futures_poll_once(op.as_mut()).await;
                let r = match first {
                    Some(r) => r,
                    None => {
                        sender.go(n, delay);
                        match tokio::time::timeout(BOUND, op).await {
                            Ok(r) => r,
                            Err(_) => panic!("round {n}: recv not resolved within {BOUND:?}: its event was lost"),
                        }
                    }
                };
                let (got, mr) = r.unwrap_or_else(|e| panic!("round {n}: recv: {e}"));
                let mut bytes = [0u8; 8];
                mr.read(0, &mut bytes);
                assert_eq!((got.len, u64::from_le_bytes(bytes)), (8, u64::from(n)), "round {n}: the SEND's bytes");
            } else {
                let mut buf = buf;
                buf.write(0, &u64::from(n).to_le_bytes());
                match tokio::time::timeout(BOUND, server.write(buf, 0..8, target.addr_at(0))).await {
                    Ok(r) => drop(r.unwrap_or_else(|e| panic!("round {n}: write: {e}"))),
                    Err(_) => panic!("round {n}: write not resolved within {BOUND:?}: its event was lost"),
                }
            }
            timing.record(n, t.elapsed());
        }
        drop(timing);
        drop(sender);
        drop(server);
    });
}

/// Polls `f` once: its output if ready, `None` if pending.
#[cfg(feature = "tokio")]
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}
