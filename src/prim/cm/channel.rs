//! The event channel: where CM events arrive, the queue of events read for
//! an id other than the one waiting, and the lock that orders librdmacm's
//! writes into the ids on the channel with the reads of their accessors.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::bindings as ffi;
use crate::bindings::cm as cmffi;
use crate::prim::handle::{Destroy, Owned};
use crate::prim::{Error, Result};

use super::event::{CmEvent, RawEvent};
use super::CmId;

/// Connect requests a channel keeps for a listener while its events are
/// read by another id's [`CmId::expect`]; one more is rejected (its new id
/// destroyed), so that a flood of requests cannot grow the queue without
/// bound. Other events are kept whatever their number: each comes from an
/// id of this program, a few per id.
pub const QUEUED_REQUESTS_MAX: usize = 1024;

/// A queued event, and the channel its id is on when that is not the
/// queue's own: a listener's connect requests keep the channel they came
/// on (where their new ids stay) when the listener migrates.
pub(super) struct Entry {
    /// Dropped first: a request's id is destroyed before its channel goes.
    ev: RawEvent,
    pub(super) origin: Option<EventChannel>,
}

/// Events read from the channel for an id other than the one that read
/// them, oldest first, each kept until its own id asks
/// ([`CmId::expect`]) or [`EventChannel::get`] takes it.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) events: VecDeque<Entry>,
    requests: usize,
}

impl Queue {
    /// Keeps `e` for its id; a connect request beyond
    /// [`QUEUED_REQUESTS_MAX`] is dropped, which rejects it.
    fn push(&mut self, e: Entry) {
        if e.ev.is_request() {
            if self.requests >= QUEUED_REQUESTS_MAX {
                return;
            }
            self.requests += 1;
        }
        self.events.push_back(e);
    }

    fn remove(&mut self, i: usize) -> Option<Entry> {
        let e = self.events.remove(i)?;
        if e.ev.is_request() {
            self.requests -= 1;
        }
        Some(e)
    }

    /// The oldest queued event for `id` (as the id or the listening id).
    fn take_for(&mut self, id: *mut cmffi::rdma_cm_id) -> Option<Entry> {
        let i = self.events.iter().position(|e| e.ev.is_for(id))?;
        self.remove(i)
    }

    /// Every queued event for `id`, oldest first.
    fn drain_for(&mut self, id: *mut cmffi::rdma_cm_id) -> Vec<Entry> {
        let mut out = Vec::new();
        while let Some(e) = self.take_for(id) {
            out.push(e);
        }
        out
    }

    /// Drops every queued event for `id`, which is being destroyed: with
    /// them go the connect requests it listened for (rejected) and the
    /// events queued here for those requests' ids, so that no queued event
    /// names an id that no longer exists (its address may be reused).
    /// Requests that came on another channel (before a `migrate`) have
    /// their ids' events there: returned with their ids still alive, for
    /// [`Elsewhere::forget`] once this queue's lock is released (two channel
    /// locks are taken together only in address order, by `migrate`), which
    /// forgets those events before it destroys the id.
    pub(super) fn forget(&mut self, id: *mut cmffi::rdma_cm_id) -> Vec<Elsewhere> {
        let mut elsewhere = Vec::new();
        for e in self.drain_for(id) {
            match (e.ev.new_id_ptr(), &e.origin) {
                (Some(new), None) => drop(self.drain_for(new)),
                (Some(_), Some(_)) => elsewhere.push(Elsewhere(e)),
                (None, _) => {}
            }
        }
        elsewhere
    }

    /// Moves the events queued for `id` from `from` (this queue, of channel
    /// `from_ch`) to `to` (the queue of `to_ch`), oldest first; each keeps
    /// the channel its own id is on.
    pub(super) fn migrate(
        from: &mut Queue,
        from_ch: &EventChannel,
        to: &mut Queue,
        to_ch: &EventChannel,
        id: *mut cmffi::rdma_cm_id,
    ) {
        for mut e in from.drain_for(id) {
            let origin = e.origin.take().unwrap_or_else(|| from_ch.clone());
            e.origin = (!origin.same(to_ch)).then_some(origin);
            to.push(e);
        }
    }
}

/// A queued connect request whose new id is on another channel (its
/// origin), where that id's events are queued; the id lives until
/// [`forget`](Self::forget).
pub(super) struct Elsewhere(Entry);

impl Elsewhere {
    /// Forgets the id's events on its origin channel, then destroys the id
    /// (rejecting the request), both under the origin's lock: no event of
    /// the id is left queued when its address becomes free for another id.
    /// The caller holds no channel lock.
    pub(super) fn forget(self) {
        let Elsewhere(entry) = self;
        let (Some(new), Some(origin)) = (entry.ev.new_id_ptr(), entry.origin.clone()) else { return };
        let mut q = origin.lock();
        drop(q.drain_for(new));
        drop(entry);
        drop(q);
    }
}

/// What [`Owned`] needs to destroy an event channel, and its queue.
pub(crate) struct ChannelHandle {
    queue: Mutex<Queue>,
}

// SAFETY: `rdma_destroy_event_channel` releases what
// `rdma_create_event_channel` made; a channel is used from any thread, and
// every librdmacm call that reads events from it or writes into one of its
// ids runs under `queue`'s lock.
unsafe impl Destroy for ChannelHandle {
    type Raw = cmffi::rdma_event_channel;
    const VERB: &'static str = "rdma_destroy_event_channel";
    unsafe fn destroy(&mut self, raw: NonNull<cmffi::rdma_event_channel>) -> i32 {
        // Queued connect requests own ids on this channel, or on the
        // channel they came on (before a listener's `migrate`): destroyed
        // (rejected) first, as the channel must outlive its ids; those on
        // another channel after their events there are forgotten.
        let queue = std::mem::take(self.queue.get_mut().unwrap_or_else(PoisonError::into_inner));
        for e in queue.events {
            if e.origin.is_some() && e.ev.is_request() {
                Elsewhere(e).forget();
            }
        }
        // SAFETY: the caller's contract; every CmId holds this channel by
        // `Arc`, so none lives any more. The call returns nothing.
        unsafe { cmffi::rdma_destroy_event_channel(raw.as_ptr()) };
        0
    }
}

/// An RDMA CM event channel (`rdma_event_channel`). Cheap to clone (shared);
/// destroyed when the last clone and the last [`CmId`] on it are gone.
///
/// Its descriptor is non-blocking: [`get`](Self::get) returns an error of
/// kind [`io::ErrorKind::WouldBlock`] when no event is queued, and
/// [`wait`](Self::wait) polls it up to a deadline.
///
/// Many ids may share a channel: [`CmId::expect`] takes only its own id's
/// events and keeps the others queued for theirs (connect requests up to
/// [`QUEUED_REQUESTS_MAX`]); [`get`](Self::get) and [`wait`](Self::wait)
/// return queued events first.
#[derive(Clone)]
pub struct EventChannel(Arc<Owned<ChannelHandle>>);

impl fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventChannel").field("fd", &self.as_raw_fd()).finish()
    }
}

impl EventChannel {
    /// Opens a channel (`rdma_create_event_channel`), its descriptor set non-blocking.
    ///
    /// # References
    /// `rdma_create_event_channel(3)`
    #[doc(alias = "rdma_create_event_channel")]
    pub fn create() -> Result<EventChannel> {
        ffi::register_static_providers();
        // SAFETY: no arguments; null on failure with errno set.
        let raw = unsafe { cmffi::rdma_create_event_channel() };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("rdma_create_event_channel"))?;
        let handle = ChannelHandle { queue: Mutex::new(Queue::default()) };
        // SAFETY: made by `rdma_create_event_channel` just now, owned by nothing else.
        let ch = EventChannel(Arc::new(unsafe { Owned::new(raw, handle) }));
        let fd = ch.as_raw_fd();
        // SAFETY: `fd` is the channel's open descriptor; F_GETFL/F_SETFL take ints.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
        if rc < 0 {
            return Err(Error::last("fcntl(O_NONBLOCK) on the CM event channel"));
        }
        Ok(ch)
    }

    /// The raw channel, for librdmacm calls of your own.
    pub fn as_ptr(&self) -> *mut cmffi::rdma_event_channel {
        self.0.as_ptr()
    }

    /// Whether `self` and `other` are one channel.
    pub(super) fn same(&self, other: &EventChannel) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The channel's lock, with its queue. librdmacm writes into an id's
    /// fields (addresses, device, port, route) in the calls on the id and
    /// while it reads the id's events from the channel, without a lock the
    /// reader could take; every such call, and every read of those fields,
    /// runs under this lock.
    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        self.0.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads one event from the descriptor (the caller holds the lock, as
    /// `_held` shows): [`Error::Verbs`] with `EAGAIN` when none is there.
    fn read(&self, _held: &mut Queue) -> Result<Entry> {
        let mut ev: *mut cmffi::rdma_cm_event = ptr::null_mut();
        // SAFETY: live channel; `ev` receives an event owned by librdmacm until acked.
        let rc = unsafe { cmffi::rdma_get_cm_event(self.0.as_ptr(), &mut ev) };
        if rc != 0 {
            return Err(Error::last("rdma_get_cm_event"));
        }
        // SAFETY: `ev` is a live event from this channel, read under its
        // lock, acked exactly once inside.
        Ok(Entry { ev: unsafe { RawEvent::read(ev) }, origin: None })
    }

    /// The event handed to the program: a connect request's new id becomes
    /// a [`CmId`] on the channel it came on.
    fn deliver(&self, e: Entry) -> CmEvent {
        let Entry { mut ev, origin } = e;
        let channel = origin.as_ref().unwrap_or(self);
        let request = ev.take_new_id().map(|(id, ps)| {
            // SAFETY: a connect request's id is new, on `channel` (where the
            // request was read), and owned by nothing else once taken out
            // of the event.
            unsafe { CmId::from_request(id.as_ptr(), channel, ps) }
        });
        CmEvent::new(ev, request)
    }

    /// The next event, queued or on the descriptor, if there is one; an
    /// error of kind [`io::ErrorKind::WouldBlock`] (`errno` `EAGAIN`) otherwise.
    pub fn get(&self) -> Result<CmEvent> {
        let mut q = self.lock();
        let raw = match q.remove(0) {
            Some(raw) => raw,
            None => self.read(&mut q)?,
        };
        drop(q);
        Ok(self.deliver(raw))
    }

    /// The next event, waiting until `deadline`; [`Error::Timeout`] past it.
    pub fn wait(&self, deadline: Instant) -> Result<CmEvent> {
        let allowed = deadline.saturating_duration_since(Instant::now());
        loop {
            match self.get() {
                Err(Error::Verbs { errno, .. }) if errno == libc::EAGAIN => {}
                other => return other,
            }
            self.poll_until(deadline, "waiting for a CM event", allowed)?;
        }
    }

    /// The next event for `id` (as the id, or as the listening id of a
    /// connect request), waiting until `deadline`; events for other ids are
    /// queued for them. [`Error::Timeout`] (with `op`) past the deadline.
    pub(super) fn next_for(&self, id: *mut cmffi::rdma_cm_id, deadline: Instant, op: &'static str) -> Result<CmEvent> {
        let allowed = deadline.saturating_duration_since(Instant::now());
        loop {
            let mut q = self.lock();
            if let Some(raw) = q.take_for(id) {
                drop(q);
                return Ok(self.deliver(raw));
            }
            loop {
                match self.read(&mut q) {
                    Ok(raw) if raw.ev.is_for(id) => {
                        drop(q);
                        return Ok(self.deliver(raw));
                    }
                    Ok(raw) => {
                        q.push(raw);
                        // Events for other ids may keep coming faster than
                        // they are read: the deadline bounds the reading too.
                        if Instant::now() >= deadline {
                            return Err(Error::Timeout { op, after: allowed });
                        }
                    }
                    Err(Error::Verbs { errno, .. }) if errno == libc::EAGAIN => break,
                    Err(e) => return Err(e),
                }
            }
            drop(q);
            self.poll_until(deadline, op, allowed)?;
        }
    }

    /// Sleeps until the descriptor is readable or `deadline`;
    /// [`Error::Timeout`] (with `op` and `allowed`) when the deadline has passed.
    fn poll_until(&self, deadline: Instant, op: &'static str, allowed: Duration) -> Result<()> {
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout { op, after: allowed });
        }
        let ms = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
        let mut pfd = libc::pollfd { fd: self.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(Error::last("poll on the CM event channel"));
        }
        Ok(())
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while the channel (borrowed here) lives.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl AsRawFd for EventChannel {
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: live channel; `fd` is set at creation and never changed.
        unsafe { (*self.0.as_ptr()).fd }
    }
}
