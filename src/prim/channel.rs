//! Completion channels and waiting for file descriptors.

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use crate::bindings as ffi;

pub(crate) struct ChannelInner {
    /// Set once a CQ is created on the channel: the safe API gives each
    /// channel to one CQ, so that every event read is that CQ's.
    attached: AtomicBool,
    /// Set once the descriptor was made non-blocking for `Cq::try_event`.
    nonblocking: AtomicBool,
    _ctx: Context,
}

// SAFETY: `ibv_destroy_comp_channel` releases what the matching create verb made; the channel is a file descriptor with kernel-side locking.
unsafe impl Destroy for ChannelInner {
    type Raw = ffi::ibv_comp_channel;
    const VERB: &'static str = "ibv_destroy_comp_channel";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_comp_channel>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_comp_channel(raw.as_ptr()) }
    }
}

/// A completion event channel: a file descriptor that becomes readable when
/// an armed CQ gets a completion. Usable with `poll`, `epoll` or an async
/// runtime through [`AsFd`]. Give it to one CQ with
/// [`super::CqBuilder::channel`]; then arm with [`super::Cq::req_notify`] and
/// wait with [`super::Cq::wait`].
///
/// # References
/// `ibv_create_comp_channel(3)`, `ibv_get_cq_event(3)`
#[derive(Clone)]
pub struct CompChannel(Arc<Owned<ChannelInner>>);

impl fmt::Debug for CompChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompChannel").field("fd", &self.as_raw_fd()).finish()
    }
}

impl CompChannel {
    /// Creates a channel on `ctx`.
    ///
    /// # References
    /// `ibv_create_comp_channel(3)`
    #[doc(alias = "ibv_create_comp_channel")]
    pub fn create(ctx: &Context) -> Result<CompChannel> {
        // SAFETY: live context.
        let ch = unsafe { ffi::ibv_create_comp_channel(ctx.as_ptr()) };
        let ch = NonNull::new(ch).ok_or_else(|| Error::last("ibv_create_comp_channel"))?;
        Ok(CompChannel(Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe {
                Owned::new(
                    ch,
                    ChannelInner {
                        attached: AtomicBool::new(false),
                        nonblocking: AtomicBool::new(false),
                        _ctx: ctx.clone(),
                    },
                )
            },
        )))
    }

    /// The raw channel.
    pub fn as_ptr(&self) -> *mut ffi::ibv_comp_channel {
        self.0.as_ptr()
    }

    /// Makes reads non-blocking (for event loops), or blocking again.
    pub fn set_nonblocking(&self, yes: bool) -> Result<()> {
        set_nonblocking(self.as_raw_fd(), yes)?;
        self.0.nonblocking.store(yes, Ordering::Release);
        Ok(())
    }

    /// Whether reads were made non-blocking through [`CompChannel::set_nonblocking`]
    /// (or `Cq::try_event`).
    pub(crate) fn is_nonblocking(&self) -> bool {
        self.0.nonblocking.load(Ordering::Acquire)
    }

    /// Non-blocking from now on, with no system call once it is.
    pub(crate) fn ensure_nonblocking(&self) -> Result<()> {
        if self.0.nonblocking.load(Ordering::Acquire) {
            return Ok(());
        }
        self.set_nonblocking(true)
    }

    /// Marks the channel as taken by a CQ.
    ///
    /// # Panics
    /// If a CQ already uses it (a programming error).
    pub(crate) fn attach(&self) {
        assert!(
            !self.0.attached.swap(true, Ordering::AcqRel),
            "this CompChannel already serves a CQ: create one channel per CQ"
        );
    }

    /// Gives the channel back: the CQ it was taken for was not created, or
    /// has been destroyed.
    pub(crate) fn detach(&self) {
        self.0.attached.store(false, Ordering::Release);
    }
}

impl AsRawFd for CompChannel {
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: the channel is live while `self` is.
        unsafe { self.0.raw().as_ref() }.fd
    }
}

impl AsFd for CompChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor stays open while the channel lives, which
        // outlasts the borrow of `self`.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd, yes: bool) -> Result<()> {
    // SAFETY: fcntl on a descriptor we own; no pointers involved.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(Error::last("fcntl(F_GETFL)"));
    }
    let flags = if yes { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
        return Err(Error::last("fcntl(F_SETFL)"));
    }
    Ok(())
}

/// Waits until `fd` is readable; `false` on timeout (`None`: wait forever).
pub(crate) fn wait_readable(fd: RawFd, timeout: Option<Duration>) -> Result<bool> {
    let ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    loop {
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let e = Error::last("poll");
        if e.errno() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}
