//! [`LocalEndpoint`]: the per-thread async path. One thread owns the QP,
//! its CQ and the requests in flight: no lock, no driver task, no tokio
//! type. One-sided requests and SENDs wait in a submission queue and are
//! posted together, one `ibv_post_send` (one doorbell) per flush; the CQ is
//! drained by [`LocalEndpoint::block_on`] between its passes, or else by
//! whichever operation is polled, and the operation whose `wr_id` arrived
//! is woken.

use std::alloc::Layout;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Range;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::error::{Error, Result};
use super::pool::{LocalMr, MrPool};
use crate::bindings as ffi;
use crate::prim::{Cq, Qp, RecvWr, RemoteAddr, SendWr, Sge, Wc, WrOpcode};

/// Requests a submission queue holds before it is flushed on its own.
const SQ_CAP: usize = 32;

/// Completions taken per `ibv_poll_cq`.
const POLL_CAP: usize = 32;

/// An operation's `id` before its first poll.
const NOT_STARTED: u32 = u32::MAX;

/// The next endpoint's tag: the high 32 bits of its requests' `wr_id`s
/// (bit 31 set, see [`LocalEndpoint::new`]; the low 32 bits are the slot).
static NEXT_TAG: AtomicU32 = AtomicU32::new(0);

/// Where one request stands. Plain data: a request's waker and an
/// abandoned request's buffer live beside it (`Slots::wakers`,
/// `Slots::held`), so the hot path moves no value that needs dropping.
#[derive(Clone, Copy)]
enum St {
    /// Not in use.
    Free,
    /// Queued or posted; its operation's waker in `Slots::wakers` (`None`
    /// when that is [`LocalEndpoint::block_on`]'s own, which re-polls after
    /// every drain that found a completion).
    Waiting,
    /// Completed, not yet collected by its operation: the completion's
    /// status, byte count and vendor error (what an operation's result
    /// needs).
    Done {
        /// `ibv_wc.status`.
        status: u32,
        /// `ibv_wc.byte_len`.
        byte_len: u32,
        /// `ibv_wc.vendor_err`.
        vendor_err: u32,
    },
    /// Handed to the device and failed before it ran: the post was refused
    /// (`posted: false`: the device does not hold the buffer) or its fate
    /// is unknown (`posted: true`: a refused list whose provider named no
    /// request, or a CQ that failed: the buffer must stay until the QP is
    /// destroyed). `op` and `errno` are the failed call's.
    Failed {
        /// The call that failed.
        op: &'static str,
        /// Its error.
        errno: i32,
        /// Whether the device may still hold the request.
        posted: bool,
    },
    /// Queued or posted, its operation dropped: the buffer stays in
    /// `Slots::held` until the completion arrives (or the QP is destroyed).
    Abandoned,
}

/// The requests of one thread's endpoint, and its submission queue.
struct Slots {
    st: Vec<St>,
    /// The waker of each `Waiting` request (`None`: `block_on`'s own).
    wakers: Vec<Option<Waker>>,
    /// The buffer of each `Abandoned` request (and of a `Failed` one whose
    /// operation has gone).
    held: Vec<Option<LocalMr>>,
    free: Vec<u32>,
    /// Requests posted whose completion has not been taken.
    posted: usize,
    /// The submission queue: `wrs[..queued]`, each over its own entry list
    /// of `LocalEndpoint::sges` (at the same index).
    wrs: Box<[SendWr<'static>]>,
    queued: usize,
    wcs: [Wc; POLL_CAP],
}

impl Slots {
    /// The slot the next `take` returns.
    #[inline]
    fn next_id(&self) -> u32 {
        match self.free.last() {
            Some(&i) => i,
            None => u32::try_from(self.st.len())
                .ok()
                .filter(|&i| i != NOT_STARTED)
                .expect("LocalEndpoint: fewer than 2^32 - 1 requests in flight"),
        }
    }

    /// Takes a free slot for a waiting request.
    #[inline]
    fn take(&mut self, w: Option<Waker>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.st[i as usize] = St::Waiting;
                // A free slot's waker is always `None` (taken when its
                // request ended): nothing to drop.
                std::mem::forget(std::mem::replace(&mut self.wakers[i as usize], w));
                i
            }
            None => self.grow(w),
        }
    }

    /// A new slot for a waiting request.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, w: Option<Waker>) -> u32 {
        let i = self.next_id();
        self.st.push(St::Waiting);
        self.wakers.push(w);
        self.held.push(None);
        i
    }

    /// Frees slot `i`.
    #[inline]
    fn release(&mut self, i: u32) {
        self.st[i as usize] = St::Free;
        self.free.push(i);
    }
}

/// An async RC endpoint that lives on one thread (`!Send`, `!Sync`).
///
/// Built over a connected QP whose send and receive queues complete to
/// `cq`, which nothing else can reach: the endpoint is the CQ's only
/// poller, and takes only its own requests' completions. Its operations are futures as
/// [`RcEndpoint`](super::RcEndpoint)'s are, with the same cancellation
/// guarantee: a future dropped before its completion leaves its buffer to
/// the endpoint, which frees it when the completion arrives or after the
/// QP is destroyed.
///
/// # Posting
/// A WRITE, READ, SEND or atomic polled while the endpoint is idle
/// (nothing queued, nothing in flight) is posted at once and the CQ
/// polled in the same poll; the others are not posted when their future
/// is first polled: they join the endpoint's submission queue, which is
/// posted as one linked list (one `ibv_post_send`, one doorbell) at the end
/// of the pass, so N operations polled in one pass (N coroutines, or a join
/// of N futures) cost at most two posts
/// ([`LocalEndpoint::post_when_idle`]`(false)`: always one). The queue is
/// flushed by [`LocalEndpoint::block_on`] when its future returns
/// `Pending`, by any operation polled a second time, by
/// [`LocalEndpoint::flush`], and when it holds 32 requests. Receives are
/// posted at once.
///
/// # Running it
/// [`LocalEndpoint::block_on`] runs a future on this thread with the
/// endpoint as its event source: after each pass it posts the queue and
/// drains the CQ, and when nothing has completed it waits as
/// [`Cq::wait_one`] does (poll, arm, poll, sleep on the CQ's completion
/// channel; a CQ without a channel is busy-polled). This is the cheap way:
/// an operation is polled twice, once to queue it and once to collect it.
///
/// Any other executor that polls futures on one thread runs it too (tokio's
/// current-thread runtime with a `LocalSet`, or any `block_on`): it needs
/// no runtime, no timer and no I/O reactor, as its operations, polled
/// under another executor, flush the queue and drain the CQ themselves and
/// wake themselves while they wait (a busy-polling design: one thread per
/// core).
///
/// Field order is drop order: the QP goes first, then the slots that hold
/// abandoned buffers.
pub struct LocalEndpoint {
    qp: Qp,
    /// Held by no one else (checked by `new`; never handed out).
    cq: Cq,
    /// `qp`'s number, which every completion taken names.
    qpn: u32,
    /// This endpoint's tag in the high 32 bits (the low 32 are 0): every
    /// `wr_id` it posts is `tag | slot`, and a completion whose `wr_id`
    /// has other high bits is not its own.
    tag: u64,
    slots: RefCell<Slots>,
    /// The entry lists of the queued requests (`Slots::wrs`), one each, at
    /// a fixed heap address; written only while its index is not queued.
    sges: Box<[UnsafeCell<[Sge; 1]>]>,
    pool: MrPool,
    /// The waker of the running [`LocalEndpoint::block_on`], if any.
    driver: RefCell<Option<Waker>>,
    driven: Cell<bool>,
    /// [`LocalEndpoint::post_when_idle`].
    when_idle: bool,
    _not_send: PhantomData<Rc<()>>,
}

impl std::fmt::Debug for LocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEndpoint").field("qpn", &self.qp.qpn()).finish_non_exhaustive()
    }
}

/// The waker of [`LocalEndpoint::block_on`]: a flag, and the thread to
/// unpark when it is raised from elsewhere.
struct RunWaker {
    woken: AtomicBool,
    thread: std::thread::Thread,
}

impl Wake for RunWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.woken.swap(true, Ordering::Release) {
            self.thread.unpark();
        }
    }
}

/// Marks the endpoint driven for the guard's life.
struct Driving<'a>(&'a LocalEndpoint);

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        self.0.driven.set(false);
        self.0.driver.borrow_mut().take();
    }
}

impl LocalEndpoint {
    /// An endpoint over `qp` (connected, RC), whose send and receive
    /// queues both complete to `cq`, with buffers from `pool` (registered
    /// on `qp`'s protection domain). The endpoint is `cq`'s only poller:
    /// `qp` and `cq` must be its only handles (no clone of `cq` kept, no
    /// other QP, SRQ, WQ or view made on it), and the endpoint never hands
    /// either out. Give `cq` a completion channel
    /// ([`CqBuilder::channel`](crate::prim::CqBuilder::channel)) for
    /// [`LocalEndpoint::block_on`] to sleep on; without one it busy-polls.
    ///
    /// The endpoint's `wr_id`s have bit 63 set (the high 32 bits are a tag
    /// of this endpoint, the low 32 its slot); a completion of another
    /// `wr_id` or QP is passed over. So requests `qp` still has in flight
    /// (posted with [`Qp::post_send`] or [`Qp::post_recv`], whose contract
    /// asks bit 63 clear of them) are never taken for the endpoint's: a
    /// peer's SEND may land in such a receive, and its completion is not
    /// reported to anyone (its buffer stays the device's until the QP is
    /// destroyed, when the endpoint is dropped).
    ///
    /// # Panics
    /// If `qp`'s send or receive queue completes to another CQ than `cq`,
    /// if `qp` receives through an SRQ (the endpoint posts its own
    /// receives), or if any handle to `cq` lives besides `cq` and `qp`
    /// (programming errors: another poller would take the endpoint's
    /// completions, or the endpoint another's); if `cq` compresses its
    /// CQEs or serves tag matching (`Cq::poll` refuses such a CQ); if an
    /// mlx5dv view drives or drove `qp`'s send queue.
    pub fn new(qp: Qp, cq: Cq, pool: MrPool) -> LocalEndpoint {
        let qpn = qp.qpn();
        let (send_cq, recv_cq) = qp.cqs();
        assert!(
            send_cq.as_ptr() == cq.as_ptr() && recv_cq.as_ptr() == cq.as_ptr(),
            "LocalEndpoint::new: QP {qpn:#x} does not complete to the CQ given (its send and receive queues must \
             both use it): build the QP with Qp::builder(pd, QpType::RC, &cq, &cq) and give the endpoint that cq"
        );
        assert!(
            !qp.has_srq(),
            "LocalEndpoint::new: QP {qpn:#x} receives through an SRQ, and the endpoint posts its own receives: \
             build the QP without QpBuilder::srq"
        );
        // `cq` and the QP's two.
        let others = cq.handles().saturating_sub(3);
        assert!(
            others == 0,
            "LocalEndpoint::new: the CQ of QP {qpn:#x} has {others} other handle(s) (Cq clones, or other QPs, \
             SRQs, WQs or views made on it), and the endpoint must be its CQ's only poller: give it a CQ of its \
             own, and drop the clones and the other objects made on that CQ first"
        );
        assert!(
            cq.compression().is_none() && !cq.is_tag_matching(),
            "LocalEndpoint::new: the CQ of QP {qpn:#x} compresses its CQEs or serves tag matching, and the endpoint \
             polls with Cq::poll, which refuses such a CQ: give the endpoint a CQ built without \
             CqBuilder::mlx5_compression and CqBuilder::tag_matching"
        );
        assert!(
            !qp.direct.ever_viewed(),
            "LocalEndpoint::new: the send queue of QP {qpn:#x} is or was driven through an mlx5dv view, and \
             libibverbs' producer index no longer matches the device's: give the endpoint a QP never viewed"
        );
        let tag = u64::from(NEXT_TAG.fetch_add(1, Ordering::Relaxed) | 1 << 31) << 32;
        let sges: Box<[UnsafeCell<[Sge; 1]>]> =
            (0..SQ_CAP).map(|_| UnsafeCell::new([Sge::from_raw(0, 0, 0)])).collect();
        let wrs = sges
            .iter()
            .map(|cell| {
                // SAFETY: the lists live in `sges` (boxed: their addresses
                // never change) as long as the endpoint, which owns the
                // queue; the `'static` borrows never leave it.
                let list: &'static [Sge; 1] = unsafe { &*cell.get() };
                SendWr::send(list).signaled()
            })
            .collect();
        let slots = Slots {
            st: Vec::with_capacity(64),
            wakers: Vec::with_capacity(64),
            held: Vec::with_capacity(64),
            free: Vec::with_capacity(64),
            posted: 0,
            wrs,
            queued: 0,
            wcs: [Wc::default(); POLL_CAP],
        };
        LocalEndpoint {
            qp,
            cq,
            qpn,
            tag,
            slots: RefCell::new(slots),
            sges,
            pool,
            driver: RefCell::new(None),
            driven: Cell::new(false),
            when_idle: true,
            _not_send: PhantomData,
        }
    }

    /// With `yes` (the default), a one-sided request or SEND polled while
    /// the endpoint is idle (nothing queued, nothing in flight) is posted
    /// at once and the CQ polled in the same poll: on a device that
    /// completes it before the poll (SoftRoCE on loopback does, in the
    /// post's system call), the operation resolves at its first poll, with
    /// no second poll and no pass of the executor, and it takes no slot.
    /// Requests polled while others are in flight still join the queue.
    /// With `no`, every request joins the queue: N operations polled in
    /// one pass always share one doorbell (the first of them no longer
    /// has one of its own), at the cost of a second poll per operation.
    pub fn post_when_idle(mut self, yes: bool) -> LocalEndpoint {
        self.when_idle = yes;
        self
    }

    /// The pool this endpoint's buffers come from.
    pub fn pool(&self) -> &MrPool {
        &self.pool
    }

    /// A buffer of `layout` from the pool.
    pub fn alloc_local_mr(&self, layout: Layout) -> Result<LocalMr> {
        self.pool.alloc(layout).ok_or(Error::PoolExhausted { size: layout.size(), free: self.pool.free_bytes() })
    }

    /// Requests queued or posted whose completion has not arrived
    /// (including those of dropped operations).
    pub fn in_flight(&self) -> usize {
        let s = self.slots.borrow();
        s.st.iter().filter(|s| matches!(s, St::Waiting | St::Abandoned)).count()
    }

    /// The QP, CQ and pool back, for another endpoint over the same
    /// connection and memory ([`RcEndpoint::new`](super::RcEndpoint::new),
    /// or a new `LocalEndpoint`), or for the synchronous API. Only an idle
    /// endpoint gives them: nothing queued, nothing in flight (no
    /// operation, dropped or not, whose completion has not been taken), so
    /// the device holds none of the endpoint's buffers and the CQ holds
    /// none of its completions; otherwise the endpoint comes back, boxed,
    /// as the error (await or drop its operations, and let their
    /// completions arrive, with [`LocalEndpoint::block_on`] or any poll,
    /// first).
    pub fn into_parts(self) -> std::result::Result<(Qp, Cq, MrPool), Box<LocalEndpoint>> {
        let idle = {
            let s = self.slots.borrow();
            s.queued == 0 && s.st.iter().all(|st| matches!(st, St::Free))
        };
        if !idle {
            return Err(Box::new(self));
        }
        let LocalEndpoint { qp, cq, pool, .. } = self;
        Ok((qp, cq, pool))
    }

    /// Posts the submission queue now (one `ibv_post_send`). A refused
    /// post is reported to the operations it refused, not here.
    pub fn flush(&self) {
        match self.slots.try_borrow_mut() {
            Ok(mut s) => self.flush_in(&mut s),
            Err(_) => panic!("LocalEndpoint::flush called from inside one of its own wake-ups: call it from the task"),
        }
    }

    /// Runs `fut` to its end on this thread, with this endpoint's CQ as
    /// its event source: after each pass the submission queue is posted
    /// and the CQ drained; when no completion is there and nothing else
    /// woke the future, the thread waits for one as [`Cq::wait_one`] does
    /// (on the completion channel if the CQ has one, else busy-polling),
    /// or, with no request in flight, sleeps until the future is woken.
    ///
    /// # Panics
    /// If called inside another `block_on` of the same endpoint.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        assert!(!self.driven.get(), "LocalEndpoint::block_on called inside its own block_on: await the future instead");
        let run = Arc::new(RunWaker { woken: AtomicBool::new(false), thread: std::thread::current() });
        let waker = Waker::from(run.clone());
        *self.driver.borrow_mut() = Some(waker.clone());
        self.driven.set(true);
        let _guard = Driving(self);
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            self.wait_pass(&run);
        }
    }

    /// Between two passes of `block_on`: post, then wait until a
    /// completion arrived or the future was woken.
    fn wait_pass(&self, run: &RunWaker) {
        let mut s = self.slots.borrow_mut();
        self.flush_in(&mut s);
        let mut armed = false;
        loop {
            if run.woken.swap(false, Ordering::Acquire) {
                return;
            }
            if s.posted == 0 {
                drop(s);
                // Nothing of ours in flight: the future waits on something
                // else, which wakes it.
                while !run.woken.swap(false, Ordering::Acquire) {
                    std::thread::park();
                }
                return;
            }
            match self.drain(&mut s) {
                Ok(0) => {}
                Ok(_) => return,
                Err(e) => return self.fail_all(&mut s, &e),
            }
            if self.cq.channel().is_none() {
                continue;
            }
            if !armed {
                // A completion between the poll and the arm raises no
                // event: armed, poll again before sleeping.
                if let Err(e) = self.cq.req_notify(false) {
                    return self.fail_all(&mut s, &e);
                }
                armed = true;
                continue;
            }
            armed = false;
            if let Err(e) = self.cq.wait(None) {
                return self.fail_all(&mut s, &e);
            }
        }
    }

    /// The CQ failed: every posted request's operation ends with the
    /// error; their buffers stay in their slots (the device may own them).
    #[cold]
    fn fail_all(&self, s: &mut Slots, e: &crate::prim::Error) {
        let (op, errno) = match e {
            crate::prim::Error::Verbs { op, errno } => (*op, *errno),
            _ => ("ibv_poll_cq", e.errno().unwrap_or(libc::EIO)),
        };
        for (st, w) in s.st.iter_mut().zip(s.wakers.iter_mut()) {
            if let St::Waiting = st {
                *st = St::Failed { op, errno, posted: true };
                self.wake(w.take());
            }
        }
    }

    /// Wakes an operation: its own waker, or the running `block_on`.
    #[inline]
    fn wake(&self, w: Option<Waker>) {
        match w {
            Some(w) => w.wake(),
            None => {
                if let Ok(d) = self.driver.try_borrow() {
                    d.iter().for_each(Waker::wake_by_ref);
                }
            }
        }
    }

    /// Posts the submission queue as one list.
    #[inline]
    fn flush_in(&self, s: &mut Slots) {
        let n = s.queued;
        if n == 0 {
            return;
        }
        s.queued = 0;
        // SAFETY: every queued entry lies in a buffer its operation holds
        // from before it was queued until its completion; an operation
        // dropped before leaves the buffer in its slot until the completion
        // or the QP's destruction (the QP is dropped before the slots). The
        // entry lists live in `self.sges`, not written again until their
        // index is queued anew, after this post.
        match unsafe { self.qp.post_send(&mut s.wrs[..n]) } {
            Ok(()) => s.posted += n,
            Err(e) => self.refused(s, n, &e),
        }
    }

    /// A refused flush of `n` requests: those before the one the provider
    /// named were posted; the rest were not (or, when it named none, may
    /// have been).
    #[cold]
    fn refused(&self, s: &mut Slots, n: usize, e: &crate::prim::Error) {
        let (op, errno, index) = match e {
            crate::prim::Error::Post { op, errno, index, .. } => (*op, *errno, *index),
            _ => ("ibv_post_send", e.errno().unwrap_or(libc::EIO), None),
        };
        for k in 0..n {
            #[allow(clippy::cast_possible_truncation)]
            let id = s.wrs[k].as_raw().wr_id as u32;
            let on_device = index.is_none_or(|i| k < i);
            if on_device {
                s.posted += 1;
            }
            if index.is_some_and(|i| k < i) {
                continue;
            }
            let i = id as usize;
            match s.st[i] {
                St::Waiting => {
                    s.st[i] = St::Failed { op, errno, posted: on_device };
                    self.wake(s.wakers[i].take());
                }
                St::Abandoned if on_device => {}
                St::Abandoned => {
                    drop(s.held[i].take());
                    s.release(id);
                }
                _ => {}
            }
        }
    }

    /// Drains the CQ: each completion goes to its slot, waking its
    /// operation; an abandoned request's buffer is freed; a completion of
    /// a request the endpoint did not post (one in flight on the QP before
    /// `new`) is passed over. The number of the endpoint's completions
    /// taken: 0 when the CQ had none (or nothing of the endpoint's was in
    /// flight).
    fn drain(&self, s: &mut Slots) -> crate::prim::Result<usize> {
        let (qpn, tag) = (self.qpn, self.tag);
        let mut total = 0;
        loop {
            let want = s.posted.clamp(1, POLL_CAP);
            let n = self.cq.poll(&mut s.wcs[..want])?;
            let before = s.posted;
            let Slots { st, wakers, free, held, posted, wcs, .. } = &mut *s;
            for wc in &wcs[..n] {
                let wc = &wc.0;
                // Another QP's, or not posted by this endpoint: its
                // `posted` count does not include it.
                if wc.qp_num != qpn || (wc.wr_id ^ tag) >> 32 != 0 {
                    continue;
                }
                #[allow(clippy::cast_possible_truncation)]
                let i = wc.wr_id as u32 as usize;
                let Some(slot) = st.get_mut(i) else { continue };
                match *slot {
                    St::Waiting => {
                        *slot = St::Done { status: wc.status.0, byte_len: wc.byte_len, vendor_err: wc.vendor_err };
                        // `None`: `block_on`'s own waker; it re-polls after
                        // every drain that took a completion.
                        if let Some(w) = wakers[i].take() {
                            w.wake();
                        }
                    }
                    St::Abandoned => {
                        // Its buffer goes back to the pool here.
                        *slot = St::Free;
                        #[allow(clippy::cast_possible_truncation)]
                        free.push(i as u32);
                        drop(held[i].take());
                    }
                    // A request whose fate was unknown completed after
                    // all: its operation, which has its error, may now
                    // take its buffer back.
                    St::Failed { op, errno, posted: true } => *slot = St::Failed { op, errno, posted: false },
                    // A `wr_id` this endpoint did not post: left as it was.
                    _ => continue,
                }
                *posted = posted.saturating_sub(1);
            }
            total += before - s.posted;
            // Fewer than asked for: the CQ is empty; nothing of ours in
            // flight: nothing is left to take. Else (a full batch, or
            // completions passed over) poll on.
            if n < want || s.posted == 0 {
                return Ok(total);
            }
        }
    }

    /// The waker to keep for an operation polled with `cx`: none when it is
    /// `block_on`'s own.
    #[inline]
    fn waker_for(&self, cx: &Context<'_>) -> Option<Waker> {
        if self.is_driver(cx) {
            None
        } else {
            Some(cx.waker().clone())
        }
    }

    /// Whether `cx` is the running `block_on`'s.
    #[inline]
    fn is_driver(&self, cx: &Context<'_>) -> bool {
        self.driven.get() && self.driver.borrow().as_ref().is_some_and(|d| d.will_wake(cx.waker()))
    }

    /// Queues request `id` (flushing a full queue first).
    #[inline]
    fn queue(&self, s: &mut Slots, id: u32, req: Req, sge: Sge) {
        if s.queued == SQ_CAP {
            self.flush_in(s);
        }
        let k = s.queued;
        self.fill(s, k, id, req, sge);
        s.queued = k + 1;
    }

    /// Writes request `id` as entry `k` of the submission queue.
    #[inline]
    fn fill(&self, s: &mut Slots, k: usize, id: u32, req: Req, sge: Sge) {
        let cell = &self.sges[k];
        // SAFETY: index `k` is not queued (the queue holds the indices
        // below it, posted or not yet), so nothing reads this list now.
        unsafe { *cell.get() = [sge] };
        req.fill(s.wrs[k].raw_mut(), self.wr_id(id));
    }

    /// The `wr_id` of request `id`.
    #[inline]
    fn wr_id(&self, id: u32) -> u64 {
        self.tag | u64::from(id)
    }

    #[inline]
    fn op<T, F: Fn(u32, LocalMr) -> T>(
        &self,
        buf: LocalMr,
        range: Range<usize>,
        req: Req,
        output: F,
    ) -> LocalOp<'_, F> {
        let sge = buf.sge(range);
        LocalOp { ep: self, buf: Some(buf), sge, req, id: NOT_STARTED, output }
    }

    /// RDMA WRITE of `range` of `src` to `dst`; gives `src` back.
    #[inline]
    pub fn write(
        &self,
        src: LocalMr,
        range: Range<usize>,
        dst: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.op(src, range, Req::Write(dst), |_, b| b)
    }

    /// RDMA READ from `src` into `range` of `dst`; gives `dst` back.
    #[inline]
    pub fn read(
        &self,
        dst: LocalMr,
        range: Range<usize>,
        src: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.op(dst, range, Req::Read(src), |_, b| b)
    }

    /// SEND of `range` of `src` (consumes a receive at the peer).
    pub fn send(&self, src: LocalMr, range: Range<usize>) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.op(src, range, Req::Send, |_, b| b)
    }

    /// 8-byte fetch-and-add at `dst` (8-byte aligned); the old value.
    pub async fn fetch_add(&self, dst: RemoteAddr, add: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.op(old, 0..8, Req::FetchAdd(dst, add), |_, old| read_u64(&old)).await
    }

    /// 8-byte compare-and-swap at `dst` (8-byte aligned): `swap` is
    /// written if the value there is `compare`; the old value.
    pub async fn compare_swap(&self, dst: RemoteAddr, compare: u64, swap: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.op(old, 0..8, Req::CompareSwap(dst, compare, swap), |_, old| read_u64(&old)).await
    }

    /// Receives one message into `dst`; its length and `dst`.
    pub fn recv(&self, dst: LocalMr) -> impl Future<Output = Result<(usize, LocalMr)>> + '_ {
        let len = dst.len();
        self.op(dst, 0..len, Req::Recv, |len, b| (len as usize, b))
    }
}

fn read_u64(mr: &LocalMr) -> u64 {
    let mut b = [0u8; 8];
    mr.read(0, &mut b);
    u64::from_ne_bytes(b)
}

/// What a request does.
#[derive(Clone, Copy)]
enum Req {
    Write(RemoteAddr),
    Read(RemoteAddr),
    Send,
    FetchAdd(RemoteAddr, u64),
    CompareSwap(RemoteAddr, u64, u64),
    Recv,
}

impl Req {
    /// Makes `wr` (a signaled request over one entry, its list in place)
    /// request `wr_id` doing this; the fields this request does not use
    /// are left as they were, and the provider does not read them.
    #[inline]
    fn fill(self, wr: &mut ffi::ibv_send_wr, wr_id: u64) {
        use ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 as Rdma;
        use ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 as Atomic;
        wr.wr_id = wr_id;
        let op = match self {
            Req::Write(at) => {
                wr.wr.rdma = Rdma { remote_addr: at.addr, rkey: at.rkey };
                WrOpcode::RDMA_WRITE
            }
            Req::Read(at) => {
                wr.wr.rdma = Rdma { remote_addr: at.addr, rkey: at.rkey };
                WrOpcode::RDMA_READ
            }
            Req::Send => WrOpcode::SEND,
            Req::FetchAdd(at, add) => {
                wr.wr.atomic = Atomic { remote_addr: at.addr, compare_add: add, swap: 0, rkey: at.rkey };
                WrOpcode::ATOMIC_FETCH_AND_ADD
            }
            Req::CompareSwap(at, compare, swap) => {
                wr.wr.atomic = Atomic { remote_addr: at.addr, compare_add: compare, swap, rkey: at.rkey };
                WrOpcode::ATOMIC_CMP_AND_SWP
            }
            Req::Recv => unreachable!("receives are posted at once"),
        };
        wr.opcode = op.into();
    }
}

/// The future of one request of a [`LocalEndpoint`]: queued (a receive:
/// posted) at its first poll, collected when its completion is there.
struct LocalOp<'a, F> {
    ep: &'a LocalEndpoint,
    buf: Option<LocalMr>,
    sge: Sge,
    req: Req,
    /// Its slot, or `NOT_STARTED`.
    id: u32,
    output: F,
}

impl<F> Unpin for LocalOp<'_, F> {}

impl<T, F: Fn(u32, LocalMr) -> T> LocalOp<'_, F> {
    /// The result of a finished request.
    #[inline]
    fn finish(&mut self, id: u32, status: u32, byte_len: u32, vendor_err: u32) -> Result<T> {
        self.id = NOT_STARTED;
        let buf = self.buf.take().expect("an unresolved operation holds its buffer");
        if status == 0 {
            Ok((self.output)(byte_len, buf))
        } else {
            drop(buf);
            Err(failed(self.ep, id, status, vendor_err))
        }
    }

    /// The first poll: the request queued (a receive posted; with
    /// [`LocalEndpoint::post_when_idle`], a request on an idle endpoint
    /// posted, and its completion taken if it is there).
    #[inline]
    fn start(&mut self, s: &mut Slots, cx: &Context<'_>) -> First {
        let ep = self.ep;
        assert!(self.buf.is_some(), "LocalEndpoint: an operation polled after it resolved");
        if let Req::Recv = self.req {
            let id = s.next_id();
            let sge = [self.sge];
            // SAFETY: as in `LocalEndpoint::flush_in`.
            if let Err(e) = unsafe { ep.qp.post_recv(&mut [RecvWr::new(&sge, ep.wr_id(id))]) } {
                // Never posted: the buffer goes back with the future.
                return First::Refused(e.into());
            }
            self.id = s.take(ep.waker_for(cx));
            s.posted += 1;
            return First::Posted;
        }
        if !(ep.when_idle && s.posted == 0 && s.queued == 0) {
            let id = s.take(ep.waker_for(cx));
            ep.queue(s, id, self.req, self.sge);
            self.id = id;
            return First::Queued;
        }
        // Idle: posted alone, under the slot it takes only if it does not
        // complete at once.
        let id = s.next_id();
        ep.fill(s, 0, id, self.req, self.sge);
        // SAFETY: as in `LocalEndpoint::flush_in`.
        if let Err(e) = unsafe { ep.qp.post_send(&mut s.wrs[..1]) } {
            // Never posted (one request: refused whole).
            return First::Refused(e.into());
        }
        // Nothing else of ours is in flight: a completion there is this
        // request's, or one of a request posted on the QP before `new`
        // (another `wr_id`), passed over as a drain does.
        if let Ok(1) = ep.cq.poll(&mut s.wcs[..1]) {
            let wc = &s.wcs[0].0;
            if wc.wr_id == ep.wr_id(id) && wc.qp_num == ep.qpn {
                let (status, byte_len, vendor_err) = (wc.status.0, wc.byte_len, wc.vendor_err);
                return First::Done { id, status, byte_len, vendor_err };
            }
        }
        self.id = s.take(ep.waker_for(cx));
        s.posted += 1;
        First::Posted
    }

    /// The operation's result from its finished slot, or `None` (and the
    /// waker kept) while it waits.
    #[inline]
    fn collect(&mut self, s: &mut Slots, cx: &Context<'_>) -> Option<Result<T>> {
        let id = self.id;
        match s.st[id as usize] {
            St::Done { status, byte_len, vendor_err } => {
                s.release(id);
                Some(self.finish(id, status, byte_len, vendor_err))
            }
            St::Waiting => {
                let w = &mut s.wakers[id as usize];
                let keep = match w {
                    Some(w) => w.will_wake(cx.waker()),
                    None => self.ep.is_driver(cx),
                };
                if !keep {
                    *w = self.ep.waker_for(cx);
                }
                None
            }
            St::Failed { op, errno, posted } => {
                let e = crate::prim::Error::Verbs { op, errno };
                if posted {
                    // The device may hold the buffer: it stays in the slot.
                    s.st[id as usize] = St::Abandoned;
                    s.held[id as usize] = self.buf.take();
                } else {
                    s.release(id);
                }
                self.id = NOT_STARTED;
                Some(Err(e.into()))
            }
            St::Free | St::Abandoned => unreachable!("only this future frees or abandons its slot"),
        }
    }
}

impl<T, F: Fn(u32, LocalMr) -> T> Future for LocalOp<'_, F> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let ep = self.ep;
        let Ok(mut s) = ep.slots.try_borrow_mut() else {
            panic!("LocalEndpoint: an operation polled from inside one of its own wake-ups: poll it from the task")
        };
        let posted = if self.id == NOT_STARTED {
            match self.start(&mut s, cx) {
                First::Done { id, status, byte_len, vendor_err } => {
                    return Poll::Ready(self.finish(id, status, byte_len, vendor_err))
                }
                First::Refused(e) => return Poll::Ready(Err(e)),
                First::Queued if ep.driven.get() => return Poll::Pending,
                First::Queued => {
                    drop(s);
                    // Under another executor: the next poll posts the
                    // queue (the pass has ended by then) and drains.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                First::Posted => true,
            }
        } else {
            if let Some(r) = self.collect(&mut s, cx) {
                return Poll::Ready(r);
            }
            if ep.driven.get() {
                // `block_on` posts and drains between passes.
                return Poll::Pending;
            }
            false
        };
        if !posted {
            ep.flush_in(&mut s);
        }
        if let Err(e) = ep.drain(&mut s) {
            ep.fail_all(&mut s, &e);
        }
        if let Some(r) = self.collect(&mut s, cx) {
            return Poll::Ready(r);
        }
        if ep.driven.get() {
            return Poll::Pending;
        }
        drop(s);
        // Busy polling: the next poll drains the CQ again.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// How a first poll left its request.
enum First {
    /// Posted and completed at once (its slot never taken).
    Done {
        /// Its `wr_id`.
        id: u32,
        /// `ibv_wc.status`.
        status: u32,
        /// `ibv_wc.byte_len`.
        byte_len: u32,
        /// `ibv_wc.vendor_err`.
        vendor_err: u32,
    },
    /// Refused by the provider: never posted.
    Refused(Error),
    /// In the submission queue.
    Queued,
    /// Posted, its completion not taken yet.
    Posted,
}

impl<F> Drop for LocalOp<'_, F> {
    /// A dropped operation: a finished request's slot is freed and its
    /// buffer goes back to the pool; a queued or posted one's buffer stays
    /// in the slot until its completion arrives.
    #[inline]
    fn drop(&mut self) {
        if self.id != NOT_STARTED {
            self.abandon();
        }
    }
}

impl<F> LocalOp<'_, F> {
    /// A started operation dropped before it resolved.
    #[cold]
    fn abandon(&mut self) {
        let id = self.id;
        let Ok(mut s) = self.ep.slots.try_borrow_mut() else {
            // Dropped from inside a drain (a waker that drops futures):
            // the buffer is never reused.
            std::mem::forget(self.buf.take());
            return;
        };
        let i = id as usize;
        match s.st[i] {
            St::Done { .. } | St::Failed { posted: false, .. } => s.release(id),
            _ => {
                s.st[i] = St::Abandoned;
                s.wakers[i] = None;
                s.held[i] = self.buf.take();
            }
        }
    }
}

/// The error of a failed completion, from what its slot kept.
#[cold]
fn failed(ep: &LocalEndpoint, id: u32, status: u32, vendor_err: u32) -> Error {
    let wc = Wc(crate::bindings::ibv_wc {
        wr_id: ep.wr_id(id),
        status: crate::bindings::ibv_wc_status(status),
        vendor_err,
        qp_num: ep.qpn,
        ..Default::default()
    });
    match wc.ok() {
        Ok(_) => unreachable!("a failed completion's status is not success"),
        Err(e) => e.into(),
    }
}
