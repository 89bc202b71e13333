//! The completion path: the table of requests in flight (a slab indexed by
//! `wr_id`), the CQ drain that hands each completion to its request, the
//! future an operation awaits (it posts its request at its first poll,
//! drains the CQ itself when polled, and registers the request only if its
//! completion was not there at once), and
//! the driver task, which drains when no operation does and sleeps on the
//! completion channel.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{watch, Notify};

use super::pool::LocalMr;
use crate::prim::{CompChannel, Cq, Qp, QpAttr, QpState, Wc};

/// Where a request in flight stands.
enum State {
    /// Not in use; the next free slot's index ([`NO_SLOT`] for none).
    Free(u32),
    /// Posted; the waker of the operation awaiting it, once it was polled.
    Waiting(Option<Waker>),
    /// Completed; the operation has not collected it yet.
    Done(Wc),
    /// Posted, and its operation was dropped: the slot holds the buffer
    /// until the completion arrives, then frees both.
    Abandoned,
}

/// One request in flight.
struct Slot {
    /// Bumped each time the slot is freed: part of the `wr_id`, so a
    /// completion can only ever match the request it was posted for.
    gen: u32,
    state: State,
    /// The buffer of an abandoned request (the device may access it until
    /// the completion); a live operation's future holds its own.
    buf: Option<LocalMr>,
    /// A send-queue request (it may touch the peer's memory), not a receive.
    sq: bool,
    /// Order of registration ([`Shared::mark`]).
    seq: u64,
}

const NO_SLOT: u32 = u32::MAX;
/// The generation's bits in a `wr_id` (bits 32..63; bit 63 is [`CONTROL_BIT`]).
const GEN_MASK: u32 = 0x7fff_ffff;
/// Completions polled at once.
const BATCH: usize = 16;

/// The requests in flight, the CQ's poll buffer, and whether the driver
/// has stopped taking requests.
pub(crate) struct Table {
    slots: Vec<Slot>,
    /// Head of the free slots' list.
    free: u32,
    /// Requests posted whose completion has not arrived (abandoned ones included).
    pending: usize,
    /// Requests registered so far ([`Slot::seq`]).
    seq: u64,
    /// Set when the driver has exited or failed: nothing registered
    /// afterwards would ever be answered, so nothing is.
    stopped: bool,
    /// A poller is handing completions over with the lock released (waking
    /// operations, running the control protocol): nobody else polls the
    /// CQ meanwhile, so completions are handed over in the CQ's order.
    polling: bool,
    /// What the CQ is polled into.
    wcs: [Wc; BATCH],
    /// Wakers and control completions of a batch, handed over once the lock
    /// is released (kept here for their capacity).
    wake: Vec<Waker>,
    control: Vec<Wc>,
}

impl Table {
    fn new() -> Table {
        Table {
            slots: Vec::new(),
            free: NO_SLOT,
            pending: 0,
            seq: 0,
            stopped: false,
            polling: false,
            wcs: [Wc::default(); BATCH],
            wake: Vec::new(),
            control: Vec::new(),
        }
    }

    /// The `wr_id` the next [`Table::insert`] returns, a free slot made
    /// first if there is none.
    #[inline]
    fn next_id(&mut self) -> u64 {
        if self.free == NO_SLOT {
            self.grow();
        }
        (u64::from(self.slots[self.free as usize].gen) << 32) | u64::from(self.free)
    }

    /// One more free slot, for a table whose slots are all in use.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let i = u32::try_from(self.slots.len()).expect("fewer than 2^32 requests in flight");
        self.slots.push(Slot { gen: 0, state: State::Free(NO_SLOT), buf: None, sq: false, seq: 0 });
        self.free = i;
    }

    /// Retires a `wr_id` of free slot `i` that a request used without ever
    /// being registered (its completion was taken at once, or its post
    /// unwound): the slot's generation moves on, so that no later
    /// completion with this `wr_id` matches the slot's next request.
    fn retire(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        debug_assert!(matches!(s.state, State::Free(_)), "only a free slot's wr_id is retired");
        s.gen = s.gen.wrapping_add(1) & GEN_MASK;
    }

    /// A slot for a request about to be posted; its `wr_id`.
    fn insert(&mut self, sq: bool) -> u64 {
        let id = self.next_id();
        let seq = self.seq;
        self.seq += 1;
        self.pending += 1;
        let s = &mut self.slots[self.free as usize];
        if let State::Free(next) = s.state {
            self.free = next;
        }
        s.state = State::Waiting(None);
        s.sq = sq;
        s.seq = seq;
        id
    }

    /// The slot of a request in flight with this `wr_id`; `None` for any
    /// other value (a free slot, an old generation, out of range).
    fn get(&mut self, id: u64) -> Option<(u32, &mut Slot)> {
        let i = id as u32;
        let s = self.slots.get_mut(i as usize)?;
        let live = !matches!(s.state, State::Free(_)) && u64::from(s.gen) == id >> 32;
        live.then_some((i, s))
    }

    /// Frees slot `i`; the buffer it held (an abandoned request's).
    fn remove(&mut self, i: u32) -> Option<LocalMr> {
        let s = &mut self.slots[i as usize];
        if !matches!(s.state, State::Done(_)) {
            self.pending -= 1;
        }
        s.state = State::Free(self.free);
        s.gen = s.gen.wrapping_add(1) & GEN_MASK;
        self.free = i;
        s.buf.take()
    }

    /// Takes the completion of a request whose operation is polling (the
    /// slot is freed): whether `id` is a request waiting for it.
    fn take(&mut self, id: u64) -> bool {
        match self.get(id) {
            Some((i, s)) if matches!(s.state, State::Waiting(_)) => {
                self.remove(i);
                true
            }
            _ => false,
        }
    }

    /// Hands a completion to its request: the waker to wake, if any. A
    /// `wr_id` that matches no request in flight is ignored.
    fn complete(&mut self, wc: &Wc) -> Option<Waker> {
        let (i, s) = self.get(wc.wr_id())?;
        match std::mem::replace(&mut s.state, State::Done(*wc)) {
            State::Waiting(w) => {
                self.pending -= 1;
                w
            }
            State::Abandoned => {
                // Nobody collects it: the buffer is freed now, after its completion.
                s.state = State::Abandoned;
                drop(self.remove(i));
                None
            }
            // Two completions for one request: the device's fault; keep the first.
            old => {
                s.state = old;
                None
            }
        }
    }
}

/// Completions of the control QP's receives go to the control protocol.
pub(crate) const CONTROL_BIT: u64 = 1 << 63;

/// The control protocol's handler of control-QP completions.
pub(crate) type OnControl = Box<dyn Fn(&Shared, Wc) + Send + Sync>;

/// What the driver and the endpoint share.
///
/// Field order is drop order: the QPs go first (after `ibv_destroy_qp` the
/// device touches none of their requests' memory), then the table and the
/// control protocol, which hold that memory.
pub(crate) struct Shared {
    pub data: Qp,
    pub ctrl: Qp,
    pub cq: Cq,
    table: Mutex<Table>,
    pub closing: AtomicBool,
    pub wake: Notify,
    /// Notified (all waiters) whenever requests are retired, while anyone
    /// watches ([`Shared::watch_progress`]).
    pub progress: Notify,
    /// Callers waiting on `progress`.
    watchers: AtomicUsize,
    /// `true` once the endpoint is closing: every waiting call watches it.
    pub closed: watch::Sender<bool>,
    /// Why the endpoint was closed, when the peer broke the protocol.
    pub fault: OnceLock<String>,
    pub busy_poll: bool,
    /// Most empty polls (each after yielding to the runtime) before the
    /// driver arms the CQ and sleeps ([`Spin`]).
    pub spin_polls: u32,
    /// The control protocol's handler; it owns the protocol's memory
    /// (posted receives, regions lent or granted to the peer), dropped with
    /// this, after the QPs.
    pub on_control: OnceLock<OnControl>,
}

/// What one drain found.
enum Drained {
    /// Another poller is at work.
    Busy,
    /// Completions handed over, and whether the completion of the request
    /// the caller awaits was among them.
    Polled(usize, bool),
}

impl Shared {
    /// The shared state of an endpoint over these QPs and their CQ.
    pub fn new(data: Qp, ctrl: Qp, cq: Cq, busy_poll: bool, spin_polls: u32) -> Shared {
        Shared {
            data,
            ctrl,
            cq,
            table: Mutex::new(Table::new()),
            closing: AtomicBool::new(false),
            wake: Notify::new(),
            progress: Notify::new(),
            watchers: AtomicUsize::new(0),
            closed: watch::channel(false).0,
            fault: OnceLock::new(),
            busy_poll,
            spin_polls,
            on_control: OnceLock::new(),
        }
    }

    #[inline]
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An operation: the request `post` posts (given the data QP and its
    /// `wr_id`; `sq`: on the send queue), whose entries lie in `buf`, and
    /// then its completion, which `output` turns into the operation's
    /// result. Its first poll posts the request, polls the CQ and
    /// registers the request if its completion was not there, under one
    /// lock. Dropped before it resolves, it hands `buf` to the table, which
    /// keeps it until the completion arrives (or until the QPs are
    /// destroyed).
    pub fn operation<P, F, T>(&self, sq: bool, buf: LocalMr, post: P, output: F) -> Completion<'_, P, F>
    where
        P: Fn(&Qp, u64) -> crate::prim::Result<()>,
        F: Fn(&Wc, LocalMr) -> T,
    {
        Completion { shared: self, post, output, id: UNPOSTED, buf: Some(buf), sq, done: false }
    }

    /// A mark for [`Shared::sq_before`]: requests registered from now on are at or after it.
    pub fn mark(&self) -> u64 {
        self.lock().seq
    }

    /// Whether a send-queue request registered before `mark` is still
    /// waiting for its completion.
    pub fn sq_before(&self, mark: u64) -> bool {
        let t = self.lock();
        t.pending > 0
            && t.slots.iter().any(|s| s.sq && s.seq < mark && matches!(s.state, State::Waiting(_) | State::Abandoned))
    }

    /// Requests posted whose completion has not arrived.
    pub fn in_flight(&self) -> usize {
        self.lock().pending
    }

    /// Whether the driver has stopped (every request answered, or the CQ failed).
    pub fn is_stopped(&self) -> bool {
        self.lock().stopped
    }

    /// Polls the CQ once and hands every completion over: control ones to
    /// the control protocol, the others to their requests (waking their
    /// operations), except the one of request `mine`, which is written to
    /// `out` (its slot freed).
    fn drain(&self, mine: Option<u64>, out: &mut Wc) -> crate::prim::Result<Drained> {
        let mut guard = self.lock();
        let t = &mut *guard;
        if t.polling {
            return Ok(Drained::Busy);
        }
        let n = self.cq.poll(&mut t.wcs)?;
        if n == 0 {
            return Ok(Drained::Polled(0, false));
        }
        Ok(self.hand_over(guard, n, mine, out))
    }

    /// Hands over the `n` completions just polled into the table's buffer,
    /// as [`Shared::drain`] does.
    fn hand_over(
        &self,
        mut guard: std::sync::MutexGuard<'_, Table>,
        n: usize,
        mine: Option<u64>,
        out: &mut Wc,
    ) -> Drained {
        let t = &mut *guard;
        let mut taken = false;
        for k in 0..n {
            let id = t.wcs[k].wr_id();
            if id & CONTROL_BIT != 0 {
                let wc = t.wcs[k];
                t.control.push(wc);
            } else if Some(id) == mine && t.take(id) {
                *out = t.wcs[k];
                taken = true;
            } else {
                let wc = t.wcs[k];
                if let Some(w) = t.complete(&wc) {
                    t.wake.push(w);
                }
            }
        }
        if t.wake.is_empty() && t.control.is_empty() {
            drop(guard);
        } else {
            // Handed over with the lock released: a waker may run code that
            // drops an operation (which takes the lock), the control
            // protocol may shut the endpoint down.
            t.polling = true;
            let (mut wake, mut control) = (std::mem::take(&mut t.wake), std::mem::take(&mut t.control));
            drop(guard);
            let done = Polling(self);
            if let Some(f) = self.on_control.get() {
                control.iter().for_each(|wc| f(self, *wc));
            }
            wake.drain(..).for_each(Waker::wake);
            control.clear();
            drop(done);
            let mut t = self.lock();
            (t.wake, t.control) = (wake, control);
        }
        self.progressed();
        Drained::Polled(n, taken)
    }

    /// Requests were retired: the callers watching for it are told.
    #[inline]
    fn progressed(&self) {
        if self.watchers.load(Ordering::SeqCst) > 0 {
            self.progress.notify_waiters();
        }
    }

    /// Registers a caller of [`Shared::progress`] for as long as the guard
    /// lives: only then does a drain notify it. Register before checking
    /// the condition awaited.
    pub fn watch_progress(&self) -> ProgressWatch<'_> {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        ProgressWatch(self)
    }

    /// The error a closed endpoint's calls return: the peer's protocol
    /// violation if that closed it, else [`Error::Closed`](super::Error::Closed).
    pub fn close_error(&self) -> super::Error {
        match self.fault.get() {
            Some(why) => super::Error::Protocol(why.clone()),
            None => super::Error::Closed,
        }
    }

    /// Resolves once the endpoint is closing.
    pub async fn closed(&self) {
        let mut rx = self.closed.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Resolves once the driver has stopped (after the endpoint closed and
    /// every request was answered): every completion that was in the CQ has
    /// been handed over by then.
    pub async fn stopped(&self) {
        loop {
            let _watch = self.watch_progress();
            let progress = self.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            progress.await;
        }
    }

    /// Closes the endpoint because the peer broke the protocol (`why`).
    pub fn violated(&self, why: String) {
        let _ = self.fault.set(why);
        self.shut_down();
    }

    /// Moves both QPs to ERR: the device flushes every outstanding request
    /// with `WR_FLUSH_ERR`, so each waiting operation gets an answer; every
    /// call waiting on the control protocol is told.
    pub fn shut_down(&self) {
        if !self.closing.swap(true, Ordering::AcqRel) {
            let _ = self.data.modify(&QpAttr::new(QpState::ERR));
            let _ = self.ctrl.modify(&QpAttr::new(QpState::ERR));
        }
        self.closed.send_replace(true);
        self.wake.notify_one();
    }
}

/// Ends a hand-over with the lock released ([`Table::polling`]), also when
/// the control protocol's handler panics.
struct Polling<'a>(&'a Shared);

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        self.0.lock().polling = false;
    }
}

/// A registered watcher of [`Shared::progress`] ([`Shared::watch_progress`]).
pub(crate) struct ProgressWatch<'a>(&'a Shared);

impl Drop for ProgressWatch<'_> {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The future of one request ([`Shared::operation`]): posted at its first
/// poll, then its completion, turned into the operation's output by `F`.
///
/// It holds only what the post needs besides the data QP (it is called with
/// the QP, once), so that an operation's future stays small: each is moved
/// at least once, into the task that awaits it.
pub(crate) struct Completion<'a, P, F> {
    shared: &'a Shared,
    /// The post: called once, at the first poll.
    post: P,
    /// What the operation makes of a successful completion and its buffer.
    output: F,
    /// The request's `wr_id`, from its first poll on; [`UNPOSTED`] before.
    id: u64,
    /// The request's memory, until the future resolves or hands it to the table.
    buf: Option<LocalMr>,
    /// A send-queue request.
    sq: bool,
    /// Resolved (or never posted): the slot is no longer this future's.
    done: bool,
}

/// [`Completion::id`] before the first poll: a `wr_id` no request of the
/// data QP has (it carries [`CONTROL_BIT`]).
const UNPOSTED: u64 = u64::MAX;

// Nothing of a `Completion` is pinned: the post and the output are
// closures called through a reference, never futures polled in place.
impl<P, F> Unpin for Completion<'_, P, F> {}

impl<P, F: Fn(&Wc, LocalMr) -> T, T> Completion<'_, P, F> {
    /// Resolves with `wc`: the operation's output from a successful
    /// completion and the buffer, the completion's error otherwise (the
    /// buffer goes back to the pool).
    #[inline(always)]
    fn resolve(&mut self, wc: &Wc) -> super::Result<T> {
        self.done = true;
        let buf = self.buf.take().expect("an unresolved completion holds its buffer");
        if wc.is_success() {
            Ok((self.output)(wc, buf))
        } else {
            Err(failed(wc))
        }
    }
}

impl<P, F, T> Future for Completion<'_, P, F>
where
    P: Fn(&Qp, u64) -> crate::prim::Result<()>,
    F: Fn(&Wc, LocalMr) -> T,
{
    /// The operation's output from a successful completion and the
    /// request's buffer; a failed completion's error, or the closed
    /// endpoint's ([`Shared::close_error`]) when it will never come.
    type Output = super::Result<T>;

    /// Drains the CQ first, unless another poller is at it: a completion
    /// that is already there is taken without the driver, a wake-up or a
    /// task switch.
    ///
    /// Each poll spends a unit of the task's tokio budget (as tokio's own
    /// sockets and channels do): a loop of operations whose completions are
    /// always there at once would otherwise never return `Pending`, and on
    /// a current-thread runtime would starve every other task, the driver
    /// and the timers included. With the budget spent, the poll returns
    /// `Pending` and the task is scheduled again at once.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        assert!(!self.done, "a Completion polled after it resolved");
        let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        let shared = self.shared;
        let mut wc = Wc::default();
        let drained = match self.id {
            // The first poll: posted (refused once the endpoint is
            // closing: checked under the lock the driver holds when it
            // decides to exit, so a request in the table is always one the
            // driver will answer), polled, and registered if its
            // completion was not there, under one lock.
            UNPOSTED => {
                let mut t = shared.lock();
                if t.stopped || shared.closing.load(Ordering::Acquire) {
                    drop(t);
                    // Never posted: the buffer goes back with the future.
                    self.done = true;
                    coop.made_progress();
                    return Poll::Ready(Err(shared.close_error()));
                }
                // The request is registered only if its completion is not
                // in the poll that follows its post: both run under this
                // lock, so nobody else can poll in between, and a
                // completion found there is this request's alone.
                let id = t.next_id();
                self.id = id;
                // Were the post to unwind, the `wr_id` is retired before
                // the lock is released, and the drop keeps the buffer.
                let unwinding = Retire(&mut t, id as u32);
                let posted = (self.post)(&shared.data, id);
                std::mem::forget(unwinding);
                if let Err(e) = posted {
                    // The device never saw it: the buffer goes back with
                    // the future.
                    drop(t);
                    self.done = true;
                    coop.made_progress();
                    return Poll::Ready(Err(e.into()));
                }
                let polled = if t.polling { Ok(0) } else { shared.cq.poll(&mut t.wcs) };
                let n = *polled.as_ref().unwrap_or(&0);
                if let Some(k) = t.wcs[..n].iter().position(|w| w.wr_id() == id) {
                    wc = t.wcs[k];
                    t.retire(id as u32);
                    if n == 1 {
                        drop(t);
                        shared.progressed();
                    } else {
                        // The others of the batch are handed over as any
                        // drain does (this one matches nothing now).
                        shared.hand_over(t, n, None, &mut Wc::default());
                    }
                    coop.made_progress();
                    return Poll::Ready(self.resolve(&wc));
                }
                // The slot `next_id` named: nothing changed the table since.
                t.insert(self.sq);
                match polled {
                    Ok(0) => {
                        drop(t);
                        Ok(Drained::Polled(0, false))
                    }
                    Ok(n) => Ok(shared.hand_over(t, n, None, &mut wc)),
                    Err(e) => Err(e),
                }
            }
            id => shared.drain(Some(id), &mut wc),
        };
        match drained {
            Ok(Drained::Polled(_, true)) => {
                coop.made_progress();
                return Poll::Ready(self.resolve(&wc));
            }
            Ok(_) => {}
            // The CQ failed: the driver finds it so too and stops the endpoint.
            Err(_) => shared.wake.notify_one(),
        }
        let mut t = shared.lock();
        let stopped = t.stopped;
        let (i, s) = t.get(self.id).expect("a request in flight keeps its slot until its future collects it");
        match &mut s.state {
            State::Done(wc) => {
                let wc = *wc;
                t.remove(i);
                drop(t);
                coop.made_progress();
                Poll::Ready(self.resolve(&wc))
            }
            State::Waiting(_) if stopped => {
                // Nobody will answer it; the buffer goes to the table (the
                // device may still own it) and stays until the QPs are gone.
                s.state = State::Abandoned;
                s.buf = self.buf.take();
                drop(t);
                self.done = true;
                coop.made_progress();
                Poll::Ready(Err(shared.close_error()))
            }
            State::Waiting(w) => {
                if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *w = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            State::Free(_) | State::Abandoned => unreachable!("only this future frees or abandons its slot"),
        }
    }
}

impl<P, F> Drop for Completion<'_, P, F> {
    /// A dropped operation: a completed request's buffer goes back to the
    /// pool now; a pending one's goes to the table, which keeps it until
    /// the completion arrives; one never posted keeps its buffer, which
    /// goes back with it.
    #[inline(always)]
    fn drop(&mut self) {
        if !self.done && self.id != UNPOSTED {
            self.shared.abandon(self.id, &mut self.buf);
        }
    }
}

impl Shared {
    /// The drop of an operation posted (request `id`, memory `buf`) and
    /// not resolved.
    #[cold]
    #[inline(never)]
    fn abandon(&self, id: u64, buf: &mut Option<LocalMr>) {
        let mut t = self.lock();
        match t.get(id) {
            Some((i, s)) if matches!(s.state, State::Done(_)) => drop(t.remove(i)),
            Some((_, s)) => {
                s.state = State::Abandoned;
                s.buf = buf.take();
            }
            // Its post unwound before the request was registered (the
            // `wr_id` was retired then): whether the device saw it is
            // unknown, so the buffer is never reused.
            None => std::mem::forget(buf.take()),
        }
        drop(t);
    }
}

/// The error of a failed completion.
#[cold]
#[inline(never)]
fn failed(wc: &Wc) -> super::Error {
    match wc.ok() {
        Ok(_) => unreachable!("a failed completion's status is not success"),
        Err(e) => e.into(),
    }
}

/// Retires a `wr_id` of an unregistered request when dropped: armed
/// across a post, which forgets it when it returns.
struct Retire<'a, 'b>(&'a mut std::sync::MutexGuard<'b, Table>, u32);

impl Drop for Retire<'_, '_> {
    fn drop(&mut self) {
        self.0.retire(self.1);
    }
}

/// Runs until the endpoint is closed and every request it posted has
/// completed: drains the CQ while completions arrive (and while the
/// operations awaiting them are not polling it themselves), then arms it and
/// sleeps on the completion channel.
pub(crate) async fn run(shared: Arc<Shared>, channel: CompChannel) {
    // However the task ends (returned, cancelled with its runtime, or
    // unwound by a panicking waker or control handler), the endpoint is
    // closed and every waiting operation is told; after a normal end this
    // finds nothing left to do.
    let _closed = Ended(&shared);
    // SAFETY: the channel owns its descriptor, which stays open while the
    // channel (moved into the `AsyncFd`) lives, and `as_raw_fd` always
    // returns that descriptor.
    let fd = match unsafe { AsyncFd::register_with_interest(channel, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(_) => return fail_all(&shared),
    };
    let mut armed = false;
    let mut spin = Spin::new(shared.spin_polls);
    loop {
        let n = match shared.drain(None, &mut Wc::default()) {
            Ok(Drained::Polled(n, _)) => n,
            // Another poller is handing completions over (on another
            // thread, without awaiting): after the arm, a completion that
            // came before it must be found by a poll of this task's, which
            // began after it; try again.
            Ok(Drained::Busy) => {
                tokio::task::yield_now().await;
                continue;
            }
            Err(_) => return fail_all(&shared),
        };
        if n > 0 {
            spin.found();
            continue;
        }
        if shared.closing.load(Ordering::Acquire) {
            let mut t = shared.lock();
            if t.pending == 0 {
                t.stopped = true;
                drop(t);
                shared.progress.notify_waiters();
                return;
            }
        }
        if shared.busy_poll {
            tokio::task::yield_now().await;
            continue;
        }
        // Completions have been arriving: let the woken operations run
        // (and post their next requests), then poll again before paying
        // for the arm, the reactor and the channel read.
        // `yield_now` (not a self-wake): on a current-thread runtime the
        // future `block_on` runs is polled only between rounds of the run
        // queue, which a self-waking task would keep busy.
        if !armed && spin.empty() {
            tokio::task::yield_now().await;
            continue;
        }
        if !armed {
            if shared.cq.req_notify(false).is_err() {
                return fail_all(&shared);
            }
            // A completion between the poll and the arm raises no event:
            // poll once more before sleeping.
            armed = true;
            continue;
        }
        tokio::select! {
            ready = fd.readable() => {
                let Ok(mut guard) = ready else { return fail_all(&shared) };
                match shared.cq.try_event() {
                    Ok(()) => armed = false,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => guard.clear_ready(),
                    Err(_) => return fail_all(&shared),
                }
            }
            _ = shared.wake.notified() => {}
        }
    }
}

/// The adaptive spin before arming: after a poll that found completions the
/// driver polls again, yielding to the runtime in between, up to `budget`
/// times; a spin that runs out finds the CQ idle and halves the next
/// budget, a spin that finds a completion doubles it (never past `max`).
/// A busy endpoint therefore rarely arms; an idle one arms after a few
/// polls, and the bound keeps the cost of a wrong guess at `max` polls.
#[derive(Debug)]
pub(crate) struct Spin {
    max: u32,
    budget: u32,
    /// Empty polls left before arming.
    left: u32,
    /// Empty polls so far in this spin.
    spun: u32,
}

impl Spin {
    pub(crate) fn new(max: u32) -> Spin {
        Spin { max, budget: max, left: 0, spun: 0 }
    }

    /// A poll found completions: spin again after it, with twice the
    /// budget if empty polls came before it (a completion that arming
    /// would have paid a wake-up for).
    pub(crate) fn found(&mut self) {
        if self.spun > 0 {
            self.budget = self.budget.saturating_mul(2).clamp(1, self.max);
        }
        self.spun = 0;
        self.left = self.budget;
    }

    /// A poll found nothing: `true` to yield and poll again, `false` to arm.
    pub(crate) fn empty(&mut self) -> bool {
        if self.left == 0 {
            self.spun = 0;
            return false;
        }
        self.left -= 1;
        self.spun += 1;
        if self.left == 0 {
            // The whole budget in vain: the CQ went idle.
            self.budget = (self.budget / 2).max(self.max.min(1));
        }
        true
    }
}

/// Calls [`fail_all`] when the driver task ends, however it ends.
struct Ended<'a>(&'a Shared);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        fail_all(self.0);
    }
}

/// The CQ or its channel failed, or the driver task ended: the QPs are
/// moved to ERR (the peer can no longer reach the pool through them), every
/// waiting operation is told (woken to find the table stopped, which it
/// reads as a closed endpoint), and the buffers are kept until the QPs are
/// destroyed with the shared state.
fn fail_all(shared: &Shared) {
    shared.shut_down();
    let mut table = shared.lock();
    table.stopped = true;
    let wake: Vec<Waker> = table
        .slots
        .iter_mut()
        .filter_map(|s| match &mut s.state {
            State::Waiting(w) => w.take(),
            _ => None,
        })
        .collect();
    drop(table);
    wake.into_iter().for_each(Waker::wake);
    shared.progress.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::{Spin, State, Table, Wc, CONTROL_BIT};

    fn wc(id: u64) -> Wc {
        let mut w = Wc::default();
        w.0.wr_id = id;
        w
    }

    #[test]
    fn table_slots_are_reused_and_stale_ids_match_nothing() {
        let mut t = Table::new();
        let (a, b) = (t.insert(true), t.insert(false));
        assert_eq!((a, b), (0, 1), "fresh slots, generation 0");
        assert_eq!(t.pending, 2);
        assert!(t.complete(&wc(a)).is_none(), "no waker registered yet");
        assert!(matches!(t.get(a), Some((0, s)) if matches!(s.state, State::Done(_))));
        assert_eq!(t.pending, 1, "a completed request is no longer pending");
        // A second completion for the same request is ignored (the first is kept).
        assert!(t.complete(&wc(a)).is_none());
        assert_eq!(t.pending, 1);
        // Collected: the slot is free and its next user has a new generation.
        assert!(t.remove(0).is_none());
        let c = t.insert(true);
        assert_eq!(c, 1 << 32, "slot 0 reused with generation 1");
        // The old id, a free slot's, one out of range and a control id match nothing.
        for bogus in [a, 5, u64::from(u32::MAX), CONTROL_BIT | c, c + (1 << 32)] {
            assert!(t.get(bogus).is_none(), "{bogus:#x}");
            assert!(t.complete(&wc(bogus)).is_none());
        }
        assert_eq!(t.pending, 2);
        // An abandoned request is freed by its completion.
        t.get(b).unwrap().1.state = State::Abandoned;
        assert!(t.complete(&wc(b)).is_none());
        assert!(t.get(b).is_none());
        assert_eq!(t.pending, 1);
        // A request whose post failed is taken back while still pending.
        assert!(t.remove(c as u32).is_none());
        assert_eq!(t.pending, 0);
        // A polling operation takes its own completion: slot freed at once.
        let d = t.insert(true);
        assert!(!t.take(d + (1 << 32)), "not with a stale generation");
        assert!(t.take(d));
        assert!(t.get(d).is_none());
        assert!(!t.take(d), "only once");
        assert_eq!((t.pending, t.seq), (0, 4), "every registration counted");
    }

    #[test]
    fn an_id_used_unregistered_is_retired_and_never_matches_again() {
        let mut t = Table::new();
        // An empty table makes a free slot for the id it names.
        let a = t.next_id();
        assert_eq!((a, t.slots.len(), t.pending), (0, 1, 0), "named, not registered");
        assert!(t.get(a).is_none(), "a free slot matches nothing");
        // Taken at once (completed at the post's own poll): retired.
        t.retire(a as u32);
        let b = t.next_id();
        assert_eq!(b, 1 << 32, "the same slot, the next generation");
        assert!(!t.take(a) && t.complete(&wc(a)).is_none(), "the retired id matches nothing");
        // Registered: insert takes exactly the slot next_id named.
        assert_eq!(t.insert(true), b);
        assert!(t.get(a).is_none(), "not even once the slot is in use again");
        assert!(t.get(b).is_some());
        // With every slot in use, the next id is a new slot's.
        assert_eq!(t.next_id(), 1);
        assert_eq!(t.insert(false), 1);
        assert_eq!((t.pending, t.slots.len()), (2, 2));
    }

    #[test]
    fn generations_wrap_below_the_control_bit() {
        let mut t = Table::new();
        let id = t.insert(true);
        t.slots[0].gen = super::GEN_MASK;
        assert!(t.remove(id as u32).is_none());
        assert_eq!(t.insert(true), 0, "generation wrapped to 0");
        t.slots[0].gen = super::GEN_MASK;
        let top = u64::from(super::GEN_MASK) << 32;
        assert!(t.get(top).is_some());
        assert_eq!(top & CONTROL_BIT, 0, "a data wr_id never carries the control bit");
    }

    /// Empty polls a spin allows before arming, starting from a found
    /// completion.
    fn spins(s: &mut Spin) -> u32 {
        s.found();
        let mut n = 0;
        while s.empty() {
            n += 1;
        }
        n
    }

    #[test]
    fn spin_is_bounded_and_adapts() {
        let mut s = Spin::new(16);
        // Idle: each vain spin halves the next one, down to one poll.
        assert_eq!([spins(&mut s), spins(&mut s), spins(&mut s)], [16, 8, 4]);
        for _ in 0..5 {
            spins(&mut s);
        }
        assert_eq!(spins(&mut s), 1);
        // Completions found after empty polls double it, never past the bound.
        for _ in 0..10 {
            s.found();
            assert!(s.empty());
            s.found();
        }
        assert_eq!(spins(&mut s), 16);
        // Zero turns the spin off: the driver arms at the first empty poll.
        let mut off = Spin::new(0);
        assert_eq!(spins(&mut off), 0);
        off.found();
        assert!(!off.empty());
    }
}
