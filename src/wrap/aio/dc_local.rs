//! [`DcLocalEndpoint`]: the per-thread async path over a DCI pool. One
//! thread owns the pool, its CQ and the requests in flight to every
//! target: no lock, no driver task, no tokio type, as
//! [`LocalEndpoint`](super::LocalEndpoint) over one RC QP.
//!
//! A request goes to the pool at its first poll
//! ([`DciPool::post`], which picks the DCI and stream by the pool's policy);
//! one the policy holds back ([`PostError::Busy`]) waits in the endpoint's
//! queue of requests to post, in order, and is posted by a later poll;
//! one the device flushed ([`Outcome::Flushed`]: its channel went to
//! error before it ran) goes back to that queue and is posted again, so
//! only the request that failed reports the error.

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Range;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::error::{Error, Result};
use super::pool::{LocalMr, MrPool};
use crate::ctrl::DctInfo;
use crate::mlx5dv::dc::DctAddr;
use crate::prim::{Ah, Pd, RemoteAddr, SendWr, Sge, WcError, WcStatus};
use crate::wrap::dc::{DcCompletion, DciPool, Outcome, PostError};

/// An operation's slot before its first poll.
const NOT_STARTED: u32 = u32::MAX;

/// Completions taken per poll of the pool.
const POLL_CAP: usize = 16;

/// A DC target of a [`DcLocalEndpoint`]: its address handle, DCT number
/// and DC access key.
#[derive(Debug)]
pub struct DcTarget {
    ah: Ah,
    dctn: u32,
    key: u64,
}

impl DcTarget {
    /// The target at `dctn` with access key `key`, reached through `ah`.
    pub fn new(ah: Ah, dctn: u32, key: u64) -> DcTarget {
        DcTarget { ah, dctn, key }
    }

    /// The target a [`DctInfo`] describes (from
    /// [`Session::exchange_dcts`](crate::ctrl::Session::exchange_dcts)),
    /// its address handle made on `pd` through local `port` and GID index
    /// `sgid_index`.
    ///
    /// # Errors
    /// [`Error::Verbs`]: `ibv_create_ah` refused the address.
    ///
    /// # Panics
    /// If `info.has_dc` is false (that rank has no DC target: reach it over
    /// RC, as [`DcMesh`](crate::wrap::dc::DcMesh) does).
    pub fn from_info(pd: &Pd, info: &DctInfo, port: u8, sgid_index: u8) -> Result<DcTarget> {
        assert!(
            info.has_dc,
            "DcTarget::from_info: the entry has no DC target (its device refused DC): reach that rank over RC"
        );
        let ah = Ah::create(pd, &info.ah_attr(port, sgid_index))?;
        Ok(DcTarget { ah, dctn: info.dctn, key: info.key })
    }

    /// The DCT number.
    pub fn dctn(&self) -> u32 {
        self.dctn
    }
}

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Req {
    Write(RemoteAddr),
    Read(RemoteAddr),
    Send,
    FetchAdd(RemoteAddr, u64),
    CompareSwap(RemoteAddr, u64, u64),
}

impl Req {
    /// The request over the one entry `sge` (the caller sets `wr_id`).
    fn wr(self, sge: &[Sge; 1]) -> SendWr<'_> {
        match self {
            Req::Write(at) => SendWr::write(sge, at),
            Req::Read(at) => SendWr::read(sge, at),
            Req::Send => SendWr::send(sge),
            Req::FetchAdd(at, add) => SendWr::fetch_add(sge, at, add),
            Req::CompareSwap(at, compare, swap) => SendWr::compare_swap(sge, at, compare, swap),
        }
    }
}

/// Where one request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum St {
    /// Not in use.
    Free,
    /// In the queue of requests to post (held back by the policy, or
    /// flushed and to be posted again): the device does not hold it.
    Queued,
    /// Posted, its completion not taken.
    Posted,
    /// Completed, not yet collected: the status and the DCI's QP number.
    Done { status: WcStatus, qp_num: u32 },
    /// Ended with an error before its completion: the post was refused
    /// (`on_device` false), or the pool's CQ failed while it was posted
    /// (`on_device` true: the device may still hold its buffer).
    Refused { on_device: bool },
}

/// A request: its target, what it does, its entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) target: u32,
    pub(crate) req: Req,
    pub(crate) sge: Sge,
}

/// The requests of an endpoint: no device, so that the bookkeeping is
/// tested on its own (the pool's posts and completions come in as calls).
pub(crate) struct Table {
    pub(crate) st: Vec<St>,
    /// Whether the operation of the slot was dropped (its buffer in `held`).
    pub(crate) abandoned: Vec<bool>,
    pub(crate) ent: Vec<Entry>,
    pub(crate) wakers: Vec<Option<Waker>>,
    pub(crate) held: Vec<Option<LocalMr>>,
    /// The refusal of a `Refused` slot.
    refusal: Vec<Option<crate::prim::Error>>,
    free: Vec<u32>,
    /// Requests to post, in the order their operations were first polled
    /// (flushed ones appended as their completions come back).
    pub(crate) queue: VecDeque<u32>,
    /// Requests on the device.
    pub(crate) posted: usize,
    /// Targets held back in the current [`Table::pump`] (its scratch).
    blocked: Vec<u32>,
    /// A request of an operation run by [`DcLocalEndpoint::block_on`]
    /// (no waker of its own) ended: the future is to be polled again.
    pub(crate) driver_due: bool,
}

impl Table {
    pub(crate) fn new() -> Table {
        Table {
            st: Vec::with_capacity(64),
            abandoned: Vec::with_capacity(64),
            ent: Vec::with_capacity(64),
            wakers: Vec::with_capacity(64),
            held: Vec::with_capacity(64),
            refusal: Vec::with_capacity(64),
            free: Vec::with_capacity(64),
            queue: VecDeque::with_capacity(64),
            posted: 0,
            blocked: Vec::with_capacity(8),
            driver_due: false,
        }
    }

    /// Wakes the operation of slot `k`: its waker, or `block_on`'s pass.
    fn wake(&mut self, k: usize) {
        match self.wakers[k].take() {
            Some(w) => w.wake(),
            None => self.driver_due = true,
        }
    }

    /// A slot for a new request, queued to post.
    pub(crate) fn start(&mut self, e: Entry, w: Option<Waker>) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                let k = i as usize;
                self.st[k] = St::Queued;
                self.abandoned[k] = false;
                self.ent[k] = e;
                self.wakers[k] = w;
                i
            }
            None => {
                let i = u32::try_from(self.st.len())
                    .ok()
                    .filter(|&i| i != NOT_STARTED)
                    .expect("DcLocalEndpoint: fewer than 2^32 - 1 requests at once");
                self.st.push(St::Queued);
                self.abandoned.push(false);
                self.ent.push(e);
                self.wakers.push(w);
                self.held.push(None);
                self.refusal.push(None);
                i
            }
        };
        self.queue.push_back(i);
        i
    }

    fn release(&mut self, i: u32) {
        let k = i as usize;
        self.st[k] = St::Free;
        self.abandoned[k] = false;
        self.wakers[k] = None;
        self.refusal[k] = None;
        drop(self.held[k].take());
        self.free.push(i);
    }

    /// Posts the queue in order through `post` (the slot is the `wr_id`):
    /// a target the policy holds back keeps its later requests queued
    /// behind it (its order kept), the other targets' go on.
    pub(crate) fn pump(&mut self, mut post: impl FnMut(&Entry, u64) -> std::result::Result<(), PostError>) {
        self.blocked.clear();
        for _ in 0..self.queue.len() {
            let Some(i) = self.queue.pop_front() else { break };
            let k = i as usize;
            let e = self.ent[k];
            if self.blocked.contains(&e.target) {
                self.queue.push_back(i);
                continue;
            }
            match post(&e, u64::from(i)) {
                Ok(()) => {
                    self.st[k] = St::Posted;
                    self.posted += 1;
                }
                Err(PostError::Busy(_)) => {
                    self.blocked.push(e.target);
                    self.queue.push_back(i);
                }
                Err(PostError::Verbs(err)) => {
                    if self.abandoned[k] {
                        self.release(i);
                    } else {
                        self.st[k] = St::Refused { on_device: false };
                        self.refusal[k] = Some(err);
                        self.wake(k);
                    }
                }
            }
        }
    }

    /// A completion of the pool (`wr_id` a slot); `qp_num` the DCI's.
    /// Returns whether it ended a request (false: flushed and queued
    /// again, or not a request of the table).
    pub(crate) fn complete(&mut self, c: &DcCompletion, qp_num: u32) -> bool {
        let Ok(i) = u32::try_from(c.wr_id) else { return false };
        let k = i as usize;
        if self.st.get(k) != Some(&St::Posted) {
            return false;
        }
        self.posted -= 1;
        if c.outcome == Outcome::Flushed {
            // Never executed: posted again, in the order flushed.
            self.st[k] = St::Queued;
            self.queue.push_back(i);
            return false;
        }
        if self.abandoned[k] {
            // Its buffer goes back to the pool here.
            self.release(i);
            return true;
        }
        self.st[k] = St::Done { status: c.status, qp_num };
        self.wake(k);
        true
    }

    /// The operation of slot `i` was dropped with `buf`: freed now if the
    /// device does not hold the request, else when its completion comes.
    /// Returns the target whose last queued request this was (its place in
    /// the policy's wait queue is to be given up), if any.
    pub(crate) fn abandon(&mut self, i: u32, buf: Option<LocalMr>) -> Option<u32> {
        let k = i as usize;
        match self.st[k] {
            St::Queued => {
                let target = self.ent[k].target;
                self.queue.retain(|&q| q != i);
                drop(buf);
                self.release(i);
                let more = self.queue.iter().any(|&q| self.ent[q as usize].target == target);
                return (!more).then_some(target);
            }
            St::Posted => {
                self.abandoned[k] = true;
                self.wakers[k] = None;
                self.held[k] = buf;
            }
            St::Refused { on_device: true } => self.keep_until_gone(i, buf),
            _ => {
                drop(buf);
                self.release(i);
            }
        }
        None
    }

    /// Slot `i`, ended while the device may hold `buf`: kept (as an
    /// abandoned posted request) until a completion or the DCIs' end.
    fn keep_until_gone(&mut self, i: u32, buf: Option<LocalMr>) {
        let k = i as usize;
        self.st[k] = St::Posted;
        self.posted += 1;
        self.abandoned[k] = true;
        self.wakers[k] = None;
        self.refusal[k] = None;
        self.held[k] = buf;
    }

    /// Requests queued or on the device (dropped operations' included).
    pub(crate) fn in_flight(&self) -> usize {
        self.st.iter().filter(|s| matches!(s, St::Queued | St::Posted)).count()
    }
}

/// An async endpoint over a [`DciPool`] to many DC targets, living on one
/// thread (`!Send`, `!Sync`).
///
/// Built over a pool whose CQ nothing else can reach: the endpoint is its
/// only poller, and takes its completions through [`DciPool::poll`]
/// (which takes only the pool's DCIs' completions, and recovers channels
/// in error). Operations are futures as [`LocalEndpoint`](super::LocalEndpoint)'s, each
/// naming its target (an index of the targets given to
/// [`DcLocalEndpoint::new`]), with the same cancellation guarantee: a
/// future dropped before its completion leaves its buffer to the endpoint,
/// which frees it when the completion arrives or after the DCIs are
/// destroyed.
///
/// # Posting and order
/// A request is posted at its first poll, on the channel the pool's
/// policy picks for its target; the requests of one target complete in the
/// order posted (the pool's guarantee). Back-pressure of the policy
/// (every channel held, a spent quota, a full send queue, a channel being
/// recovered) queues the request, and every later request of the same
/// target behind it, until a later poll posts them; the other targets' go
/// on. A request the device flushed because its channel went to error (an
/// error of another request on it) is posted again: only the request that
/// failed ends with the error ([`Error::Completion`]).
///
/// # Running it
/// [`DcLocalEndpoint::block_on`] runs a future on this thread, polling
/// the pool between its passes (busy-polling: one thread per core). Any
/// executor that polls on one thread runs it too: its operations poll the
/// pool themselves and wake themselves while they wait.
///
/// Field order is drop order: the pool (its DCIs) goes first, then the
/// table that holds abandoned buffers.
pub struct DcLocalEndpoint {
    pool: RefCell<DciPool>,
    targets: Vec<DcTarget>,
    /// The pool's DCIs' QP numbers, by index.
    qpns: Vec<u32>,
    table: RefCell<Table>,
    mem: MrPool,
    driver: RefCell<Option<Waker>>,
    driven: Cell<bool>,
    _not_send: PhantomData<Rc<()>>,
}

impl std::fmt::Debug for DcLocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcLocalEndpoint").field("dcis", &self.qpns).field("targets", &self.targets.len()).finish()
    }
}

/// The waker of [`DcLocalEndpoint::block_on`]: a flag.
struct RunWaker(AtomicBool);

impl Wake for RunWaker {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Marks the endpoint driven for the guard's life.
struct Driving<'a>(&'a DcLocalEndpoint);

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        self.0.driven.set(false);
        self.0.driver.borrow_mut().take();
    }
}

impl DcLocalEndpoint {
    /// An endpoint over `pool` to `targets` (target `t` of the pool is
    /// `targets[t]`), with buffers from `mem` (registered on the pool's
    /// protection domain). The endpoint is the pool's CQ's only poller:
    /// the pool's DCIs and the pool must hold its only handles (no clone of
    /// the CQ kept, no other QP or view made on it).
    ///
    /// # Panics
    /// If the pool's CQ has other handles (a programming error: another
    /// poller would take the endpoint's completions), if the pool has
    /// requests in flight (their completions would be taken for the
    /// endpoint's), or if `targets` has
    /// fewer entries than the pool has targets.
    pub fn new(pool: DciPool, targets: Vec<DcTarget>, mem: MrPool) -> DcLocalEndpoint {
        let shape = pool.sched().shape();
        // The pool's own handle and each DCI's two (send and receive CQ).
        let ours = 1 + 2 * usize::from(shape.dcis);
        let others = pool.cq().handles().saturating_sub(ours);
        assert!(
            others == 0,
            "DcLocalEndpoint::new: the DCI pool's CQ has {others} other handle(s) (Cq clones, or other QPs, SRQs, \
             WQs or views made on it), and the endpoint must be its only poller: create the pool on a CQ of its \
             own and drop your Cq (and the other objects made on it) before DcLocalEndpoint::new"
        );
        let busy: u32 = (0..shape.targets).map(|t| pool.sched().inflight(t)).sum();
        assert!(
            busy == 0,
            "DcLocalEndpoint::new: the DCI pool has {busy} request(s) in flight, whose completions would be taken \
             for the endpoint's: poll them to completion (DciPool::poll) before DcLocalEndpoint::new"
        );
        assert!(
            targets.len() >= shape.targets as usize,
            "DcLocalEndpoint::new: the pool serves targets 0..{}, but {} DcTargets were given: give one per target",
            shape.targets,
            targets.len()
        );
        let qpns = (0..shape.dcis).map(|i| pool.dci(i).qpn()).collect();
        DcLocalEndpoint {
            pool: RefCell::new(pool),
            targets,
            qpns,
            table: RefCell::new(Table::new()),
            mem,
            driver: RefCell::new(None),
            driven: Cell::new(false),
            _not_send: PhantomData,
        }
    }

    /// The pool this endpoint's buffers come from.
    pub fn mem(&self) -> &MrPool {
        &self.mem
    }

    /// A buffer of `layout` from the pool.
    pub fn alloc_local_mr(&self, layout: Layout) -> Result<LocalMr> {
        self.mem.alloc(layout).ok_or(Error::PoolExhausted { size: layout.size(), free: self.mem.free_bytes() })
    }

    /// The targets.
    pub fn targets(&self) -> &[DcTarget] {
        &self.targets
    }

    /// Requests queued or on the device (dropped operations' included).
    pub fn in_flight(&self) -> usize {
        self.table.borrow().in_flight()
    }

    /// Runs `fut` to its end on this thread, polling the pool between its
    /// passes (busy-polling).
    ///
    /// # Panics
    /// If called inside another `block_on` of the same endpoint.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        assert!(
            !self.driven.get(),
            "DcLocalEndpoint::block_on called inside its own block_on: await the future instead"
        );
        let run = Arc::new(RunWaker(AtomicBool::new(false)));
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
            loop {
                if run.0.swap(false, Ordering::Acquire) {
                    break;
                }
                let mut t = self.table.borrow_mut();
                // An operation of this future ended (during its own poll,
                // or a sibling's, or the progress below): poll again.
                if std::mem::take(&mut t.driver_due) {
                    break;
                }
                if t.posted == 0 && t.queue.is_empty() {
                    drop(t);
                    std::hint::spin_loop();
                    continue;
                }
                self.progress(&mut t);
                if std::mem::take(&mut t.driver_due) {
                    break;
                }
                drop(t);
                std::hint::spin_loop();
            }
        }
    }

    /// Posts the queue and takes the completions there.
    fn progress(&self, t: &mut Table) {
        let Ok(mut pool) = self.pool.try_borrow_mut() else {
            panic!("DcLocalEndpoint: polled from inside one of its own wake-ups: poll it from the task")
        };
        let targets = &self.targets;
        t.pump(|e, wr_id| {
            let d = &targets[e.target as usize];
            let sge = [e.sge];
            let wr = e.req.wr(&sge);
            // SAFETY: every entry lies in a buffer its operation holds from
            // its first poll until its completion; an operation dropped
            // before leaves the buffer in the table (`Table::abandon`)
            // until the completion or the DCIs' destruction (the pool is
            // dropped before the table).
            unsafe { pool.post(e.target, &DctAddr::new(&d.ah, d.dctn, d.key), &wr, wr_id) }.map(|_| ())
        });
        let mut out = [None; POLL_CAP];
        loop {
            let n = match pool.poll(&mut out) {
                Ok(n) => n,
                Err(e) => {
                    // The pool's CQ failed, or a recovery did: every
                    // posted request's fate is unknown; they end with the
                    // error, their buffers kept until the DCIs are gone.
                    self.fail_posted(t, &e);
                    return;
                }
            };
            for c in out[..n].iter().flatten() {
                let qp_num = c.channel.map_or(0, |ch| self.qpns[usize::from(ch.dci)]);
                t.complete(c, qp_num);
            }
            if n < POLL_CAP {
                break;
            }
        }
        if !t.queue.is_empty() {
            // Flushed requests, or ones a completion just let go.
            t.pump(|e, wr_id| {
                let d = &targets[e.target as usize];
                let sge = [e.sge];
                let wr = e.req.wr(&sge);
                // SAFETY: as above.
                unsafe { pool.post(e.target, &DctAddr::new(&d.ah, d.dctn, d.key), &wr, wr_id) }.map(|_| ())
            });
        }
    }

    #[cold]
    fn fail_posted(&self, t: &mut Table, e: &crate::prim::Error) {
        for k in 0..t.st.len() {
            if t.st[k] == St::Posted && !t.abandoned[k] {
                // The device may still hold the buffer, which the
                // operation leaves to the table when it collects this.
                t.st[k] = St::Refused { on_device: true };
                t.refusal[k] =
                    Some(crate::prim::Error::Verbs { op: "ibv_poll_cq", errno: e.errno().unwrap_or(libc::EIO) });
                t.posted -= 1;
                t.wake(k);
            }
        }
    }

    fn is_driver(&self, cx: &Context<'_>) -> bool {
        self.driven.get() && self.driver.borrow().as_ref().is_some_and(|d| d.will_wake(cx.waker()))
    }

    fn waker_for(&self, cx: &Context<'_>) -> Option<Waker> {
        if self.is_driver(cx) {
            None
        } else {
            Some(cx.waker().clone())
        }
    }

    fn op<T, F: Fn(LocalMr) -> T>(
        &self,
        target: u32,
        buf: LocalMr,
        range: Range<usize>,
        req: Req,
        output: F,
    ) -> DcOp<'_, F> {
        assert!(
            (target as usize) < self.targets.len(),
            "DcLocalEndpoint: target {target} is not one of the endpoint's 0..{}",
            self.targets.len()
        );
        let sge = buf.sge(range);
        DcOp { ep: self, buf: Some(buf), entry: Entry { target, req, sge }, id: NOT_STARTED, output }
    }

    /// RDMA WRITE of `range` of `src` to `dst` at `target`; gives `src` back.
    ///
    /// # Panics
    /// For a target outside the endpoint's, or a range outside `src`.
    pub fn write(
        &self,
        target: u32,
        src: LocalMr,
        range: Range<usize>,
        dst: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.op(target, src, range, Req::Write(dst), |b| b)
    }

    /// RDMA READ from `src` at `target` into `range` of `dst`; gives `dst` back.
    ///
    /// # Panics
    /// As [`DcLocalEndpoint::write`].
    pub fn read(
        &self,
        target: u32,
        dst: LocalMr,
        range: Range<usize>,
        src: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.op(target, dst, range, Req::Read(src), |b| b)
    }

    /// SEND of `range` of `src` to `target` (consumes a receive of its
    /// DCT's SRQ).
    ///
    /// # Panics
    /// As [`DcLocalEndpoint::write`].
    pub fn send(&self, target: u32, src: LocalMr, range: Range<usize>) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.op(target, src, range, Req::Send, |b| b)
    }

    /// 8-byte fetch-and-add at `dst` (8-byte aligned) of `target`; the old value.
    pub async fn fetch_add(&self, target: u32, dst: RemoteAddr, add: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.op(target, old, 0..8, Req::FetchAdd(dst, add), |old| read_u64(&old)).await
    }

    /// 8-byte compare-and-swap at `dst` (8-byte aligned) of `target`:
    /// `swap` is written if the value there is `compare`; the old value.
    pub async fn compare_swap(&self, target: u32, dst: RemoteAddr, compare: u64, swap: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.op(target, old, 0..8, Req::CompareSwap(dst, compare, swap), |old| read_u64(&old)).await
    }
}

fn read_u64(mr: &LocalMr) -> u64 {
    let mut b = [0u8; 8];
    mr.read(0, &mut b);
    u64::from_ne_bytes(b)
}

/// The future of one request of a [`DcLocalEndpoint`].
struct DcOp<'a, F> {
    ep: &'a DcLocalEndpoint,
    buf: Option<LocalMr>,
    entry: Entry,
    id: u32,
    output: F,
}

impl<F> Unpin for DcOp<'_, F> {}

impl<T, F: Fn(LocalMr) -> T> DcOp<'_, F> {
    /// The result if the request has ended (its slot freed), else `None`
    /// with the waker kept.
    fn collect(&mut self, t: &mut Table, cx: &Context<'_>) -> Option<Result<T>> {
        let id = self.id;
        let k = id as usize;
        match t.st[k] {
            St::Done { status, qp_num } => {
                t.release(id);
                self.id = NOT_STARTED;
                let buf = self.buf.take().expect("an unresolved operation holds its buffer");
                if status.is_success() {
                    Some(Ok((self.output)(buf)))
                } else {
                    drop(buf);
                    Some(Err(Error::Completion(WcError {
                        wr_id: u64::from(id),
                        qp_num,
                        status,
                        opcode: None,
                        vendor_err: 0,
                    })))
                }
            }
            St::Refused { on_device } => {
                let e = t.refusal[k].take().unwrap_or(crate::prim::Error::Verbs { op: "ibv_post_send", errno: 0 });
                if on_device {
                    // The device may hold the buffer (a failed CQ): it
                    // stays in the table until the DCIs are gone.
                    t.keep_until_gone(id, self.buf.take());
                } else {
                    t.release(id);
                }
                self.id = NOT_STARTED;
                Some(Err(e.into()))
            }
            St::Queued | St::Posted => {
                let keep = match &t.wakers[k] {
                    Some(w) => w.will_wake(cx.waker()),
                    None => self.ep.is_driver(cx),
                };
                if !keep {
                    t.wakers[k] = self.ep.waker_for(cx);
                }
                None
            }
            St::Free => unreachable!("only this future frees its slot"),
        }
    }
}

impl<T, F: Fn(LocalMr) -> T> Future for DcOp<'_, F> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let ep = self.ep;
        let Ok(mut t) = ep.table.try_borrow_mut() else {
            panic!("DcLocalEndpoint: an operation polled from inside one of its own wake-ups: poll it from the task")
        };
        if self.id == NOT_STARTED {
            assert!(self.buf.is_some(), "DcLocalEndpoint: an operation polled after it resolved");
            self.id = t.start(self.entry, ep.waker_for(cx));
        } else if let Some(r) = self.collect(&mut t, cx) {
            return Poll::Ready(r);
        }
        ep.progress(&mut t);
        if let Some(r) = self.collect(&mut t, cx) {
            return Poll::Ready(r);
        }
        if ep.driven.get() {
            return Poll::Pending;
        }
        drop(t);
        // Busy polling: the next poll takes the completions again.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<F> Drop for DcOp<'_, F> {
    fn drop(&mut self) {
        if self.id == NOT_STARTED {
            return;
        }
        match self.ep.table.try_borrow_mut() {
            Ok(mut t) => {
                if let Some(target) = t.abandon(self.id, self.buf.take()) {
                    // Its target may wait for a channel it will not take.
                    if let Ok(mut pool) = self.ep.pool.try_borrow_mut() {
                        pool.cancel_wait(target);
                    }
                }
            }
            // Dropped from inside a wake-up: the buffer is never reused.
            Err(_) => std::mem::forget(self.buf.take()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::dc::{Busy, Channel};

    fn entry(target: u32) -> Entry {
        Entry { target, req: Req::Send, sge: Sge::from_raw(0x1000, 8, 1) }
    }

    fn done(wr_id: u64, target: u32, outcome: Outcome) -> DcCompletion {
        let status = match outcome {
            Outcome::Ok => WcStatus::SUCCESS,
            Outcome::Flushed => WcStatus::WR_FLUSH_ERR,
            Outcome::Failed => WcStatus::REM_ACCESS_ERR,
        };
        DcCompletion { target, wr_id, channel: Some(Channel { dci: 0, stream: 0 }), status, outcome }
    }

    fn busy(target: u32) -> PostError {
        PostError::Busy(Busy::Waiting { target, ahead: 0 })
    }

    #[test]
    fn a_held_back_target_keeps_its_order_and_others_go_on() {
        let mut t = Table::new();
        let a0 = t.start(entry(0), None);
        let b0 = t.start(entry(1), None);
        let a1 = t.start(entry(0), None);
        let mut posted = Vec::new();
        // Target 0's first request is held back (its second would have
        // been taken): the second must not pass the first.
        t.pump(|e, id| {
            if id == u64::from(a0) {
                Err(busy(e.target))
            } else {
                posted.push(id);
                Ok(())
            }
        });
        assert_eq!(posted, [u64::from(b0)]);
        assert_eq!(t.queue.iter().copied().collect::<Vec<_>>(), [a0, a1]);
        t.pump(|_, id| {
            posted.push(id);
            Ok(())
        });
        assert_eq!(posted, [u64::from(b0), u64::from(a0), u64::from(a1)]);
        assert_eq!((t.posted, t.queue.len()), (3, 0));
    }

    #[test]
    fn a_flushed_request_is_posted_again_and_only_the_failed_one_ends() {
        let mut t = Table::new();
        let ids: Vec<u32> = (0..3).map(|_| t.start(entry(5), None)).collect();
        t.pump(|_, _| Ok(()));
        assert!(t.complete(&done(u64::from(ids[0]), 5, Outcome::Failed), 0x77));
        assert_eq!(t.st[ids[0] as usize], St::Done { status: WcStatus::REM_ACCESS_ERR, qp_num: 0x77 });
        assert!(!t.complete(&done(u64::from(ids[1]), 5, Outcome::Flushed), 0x77));
        assert!(!t.complete(&done(u64::from(ids[2]), 5, Outcome::Flushed), 0x77));
        assert_eq!(t.queue.iter().copied().collect::<Vec<_>>(), [ids[1], ids[2]], "in the order flushed");
        assert_eq!(t.posted, 0);
        let mut again = Vec::new();
        t.pump(|_, id| {
            again.push(id);
            Ok(())
        });
        assert_eq!(again, [u64::from(ids[1]), u64::from(ids[2])]);
        assert!(t.complete(&done(u64::from(ids[1]), 5, Outcome::Ok), 0x77));
        assert_eq!(t.st[ids[1] as usize], St::Done { status: WcStatus::SUCCESS, qp_num: 0x77 });
    }

    #[test]
    fn an_abandoned_request_is_freed_by_its_completion_not_before() {
        let mut t = Table::new();
        let queued = t.start(entry(1), None);
        let posted = t.start(entry(2), None);
        t.pump(|e, _| if e.target == 1 { Err(busy(1)) } else { Ok(()) });
        // Never on the device: freed at once, and out of the queue; its
        // target had no other request queued (its wait is given up).
        assert_eq!(t.abandon(queued, None), Some(1));
        assert_eq!(t.st[queued as usize], St::Free);
        assert!(t.queue.is_empty());
        // On the device: kept until its completion.
        assert_eq!(t.abandon(posted, None), None);
        assert_eq!(t.st[posted as usize], St::Posted);
        assert_eq!(t.in_flight(), 1);
        // Flushed: posted again even though abandoned (the device held it).
        assert!(!t.complete(&done(u64::from(posted), 2, Outcome::Flushed), 1));
        t.pump(|_, _| Ok(()));
        assert!(t.complete(&done(u64::from(posted), 2, Outcome::Ok), 1));
        assert_eq!(t.st[posted as usize], St::Free);
        assert_eq!(t.in_flight(), 0);
        // A completion naming no posted request changes nothing.
        assert!(!t.complete(&done(u64::from(posted), 2, Outcome::Ok), 1));
        assert!(!t.complete(&done(999, 2, Outcome::Ok), 1));
    }

    #[test]
    fn a_dropped_queued_request_gives_up_the_wait_only_when_its_target_has_no_other() {
        let mut t = Table::new();
        let a0 = t.start(entry(4), None);
        let a1 = t.start(entry(4), None);
        t.pump(|e, _| Err(busy(e.target)));
        assert_eq!(t.abandon(a1, None), None, "a0 still queued for target 4");
        assert_eq!(t.abandon(a0, None), Some(4));
        assert!(t.queue.is_empty());
    }

    /// An operation run by `block_on` has no waker of its own: its end
    /// (by a sibling's poll, say) must still make `block_on` poll again.
    #[test]
    fn the_end_of_a_block_on_operation_is_due_to_the_driver() {
        let mut t = Table::new();
        let a = t.start(entry(0), None);
        t.pump(|_, _| Ok(()));
        assert!(!t.driver_due);
        assert!(t.complete(&done(u64::from(a), 0, Outcome::Ok), 1));
        assert!(t.driver_due, "a completion with no waker leaves the driver a pass to make");
        t.driver_due = false;
        let b = t.start(entry(1), None);
        t.pump(|_, _| Err(PostError::Verbs(crate::prim::Error::Verbs { op: "ibv_post_send", errno: libc::EINVAL })));
        assert_eq!(t.st[b as usize], St::Refused { on_device: false });
        assert!(t.driver_due, "so does a refusal");
    }

    #[test]
    fn a_refused_post_ends_that_request_alone() {
        let mut t = Table::new();
        let a = t.start(entry(0), None);
        let b = t.start(entry(1), None);
        t.pump(|e, _| {
            if e.target == 0 {
                Err(PostError::Verbs(crate::prim::Error::Verbs { op: "ibv_post_send", errno: libc::ENOMEM }))
            } else {
                Ok(())
            }
        });
        assert_eq!(t.st[a as usize], St::Refused { on_device: false });
        assert_eq!(t.st[b as usize], St::Posted);
        assert!(matches!(t.refusal[a as usize], Some(crate::prim::Error::Verbs { errno: libc::ENOMEM, .. })));
    }
}
