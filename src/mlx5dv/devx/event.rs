//! The DEVX event channel (events of subscribed objects) and asynchronous
//! command completions: each an fd to poll, every wait with a timeout,
//! every read into a bounded buffer.

use std::os::fd::{AsFd, BorrowedFd};
use std::ptr::NonNull;
use std::time::Duration;

use super::context::DevxContext;
use super::obj::DevxObj;
use crate::bindings as ffi;
use crate::prim::{Error, Result};

/// Waits up to `timeout` for `fd` to be readable: `Ok(false)` on timeout.
fn wait_readable(fd: i32, timeout: Duration, op: &'static str) -> Result<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let e = Error::last(op);
        if e.errno() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Largest event a channel hands back: the 8-byte cookie and an EQE's data.
pub const MAX_EVENT_BYTES: usize = 8 + 64;

/// One event: the cookie given at subscription and the EQE's data (empty
/// on a channel made with `omit_data`, or for an event without data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevxEvent {
    /// The subscription's cookie.
    pub cookie: u64,
    /// The event's data (at most 64 bytes).
    pub data: Vec<u8>,
}

/// An event channel (`mlx5dv_devx_create_event_channel`).
pub struct EventChannel {
    raw: NonNull<ffi::mlx5dv_devx_event_channel>,
    /// Subscribed objects stay alive while the channel may report them.
    subscribed: Vec<DevxObj>,
    _ctx: DevxContext,
}

// SAFETY: an fd-backed kernel object owned by this value; reads go through `&mut self`.
unsafe impl Send for EventChannel {}
// SAFETY: `&EventChannel` only hands out the fd.
unsafe impl Sync for EventChannel {}

impl std::fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventChannel").field("fd", &self.fd_raw()).finish()
    }
}

impl EventChannel {
    /// Creates a channel; `omit_data`: events carry only their cookie.
    ///
    /// # References
    /// `mlx5dv_devx_create_event_channel(3)`
    pub fn new(ctx: &DevxContext, omit_data: bool) -> Result<EventChannel> {
        let flags = ffi::mlx5_ib_uapi_devx_create_event_channel_flags(u32::from(omit_data));
        // SAFETY: a live DEVX context.
        let raw = unsafe { ffi::mlx5dv_devx_create_event_channel(ctx.as_ptr(), flags) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("mlx5dv_devx_create_event_channel"))?;
        Ok(EventChannel { raw, subscribed: Vec::new(), _ctx: ctx.clone() })
    }

    fn fd_raw(&self) -> i32 {
        // SAFETY: a live channel.
        unsafe { (*self.raw.as_ptr()).fd }
    }

    /// Subscribes to `events` (PRM event types) of `obj`, reported with
    /// `cookie`; the channel keeps `obj` alive.
    ///
    /// # References
    /// `mlx5dv_devx_subscribe_devx_event(3)`
    pub fn subscribe(&mut self, obj: &DevxObj, events: &[u16], cookie: u64) -> Result<()> {
        let mut ev = events.to_vec();
        let sz = u16::try_from(std::mem::size_of_val(events)).map_err(|_| Error::BadArgument {
            op: "mlx5dv_devx_subscribe_devx_event",
            what: "events",
            why: "at most 32767 event types",
        })?;
        // SAFETY: a live channel and object; `ev` holds `sz` bytes.
        let rc = unsafe {
            ffi::mlx5dv_devx_subscribe_devx_event(self.raw.as_ptr(), obj.as_ptr(), sz, ev.as_mut_ptr(), cookie)
        };
        if rc != 0 {
            return Err(Error::code("mlx5dv_devx_subscribe_devx_event", rc));
        }
        self.subscribed.push(obj.clone());
        Ok(())
    }

    /// Waits up to `timeout` for an event: `Ok(None)` when none came.
    ///
    /// # References
    /// `mlx5dv_devx_get_event(3)`
    pub fn get_event(&mut self, timeout: Duration) -> Result<Option<DevxEvent>> {
        const OP: &str = "mlx5dv_devx_get_event";
        if !wait_readable(self.fd_raw(), timeout, OP)? {
            return Ok(None);
        }
        #[repr(C, align(8))]
        struct Buf([u8; MAX_EVENT_BYTES]);
        let mut buf = Buf([0; MAX_EVENT_BYTES]);
        // SAFETY: a live channel; `buf` is MAX_EVENT_BYTES bytes, 8-aligned,
        // starting with the header's cookie.
        let n = unsafe { ffi::mlx5dv_devx_get_event(self.raw.as_ptr(), buf.0.as_mut_ptr().cast(), MAX_EVENT_BYTES) };
        if n < 0 {
            let e = Error::last(OP);
            return if e.is_would_block() { Ok(None) } else { Err(e) };
        }
        let n = (n as usize).min(MAX_EVENT_BYTES);
        if n < 8 {
            return Err(Error::Verbs { op: OP, errno: libc::EPROTO });
        }
        let cookie = u64::from_ne_bytes(buf.0[..8].try_into().expect("eight bytes"));
        Ok(Some(DevxEvent { cookie, data: buf.0[8..n].to_vec() }))
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the channel's fd is open while the channel lives.
        unsafe { BorrowedFd::borrow_raw(self.fd_raw()) }
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_devx_create_event_channel`, destroyed only here.
        unsafe { ffi::mlx5dv_devx_destroy_event_channel(self.raw.as_ptr()) }
    }
}

/// Asynchronous command completions (`mlx5dv_devx_create_cmd_comp`):
/// queries sent with [`CmdComp::query_async`] answer here.
pub struct CmdComp {
    raw: NonNull<ffi::mlx5dv_devx_cmd_comp>,
    /// Objects with a query in flight stay alive.
    pending: Vec<DevxObj>,
    max_out: usize,
    _ctx: DevxContext,
}

// SAFETY: an fd-backed kernel object owned by this value; reads through `&mut self`.
unsafe impl Send for CmdComp {}
// SAFETY: `&CmdComp` only hands out the fd.
unsafe impl Sync for CmdComp {}

impl std::fmt::Debug for CmdComp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmdComp").field("pending", &self.pending.len()).finish()
    }
}

/// One asynchronous answer: the request's `wr_id` and its answer bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsyncAnswer {
    /// The id given to [`CmdComp::query_async`].
    pub wr_id: u64,
    /// The answer (the `*_out` layout; its status is checked by [`CmdComp::get`]).
    pub out: Vec<u8>,
}

impl CmdComp {
    /// Creates the completion channel; answers are at most `max_out` bytes.
    pub fn new(ctx: &DevxContext, max_out: usize) -> Result<CmdComp> {
        // SAFETY: a live DEVX context.
        let raw = unsafe { ffi::mlx5dv_devx_create_cmd_comp(ctx.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("mlx5dv_devx_create_cmd_comp"))?;
        Ok(CmdComp { raw, pending: Vec::new(), max_out, _ctx: ctx.clone() })
    }

    /// Sends the query `cmd_in` about `obj` without waiting; the answer
    /// (`outlen` bytes, at most this channel's `max_out`) comes to [`CmdComp::get`] with `wr_id`.
    ///
    /// # Panics
    /// If `outlen` is above `max_out` or below the 16-byte output header.
    pub fn query_async(&mut self, obj: &DevxObj, cmd_in: &[u8], outlen: usize, wr_id: u64) -> Result<()> {
        assert!(
            (16..=self.max_out).contains(&outlen),
            "CmdComp::query_async: outlen {outlen} outside 16..={}",
            self.max_out
        );
        // SAFETY: a live object and channel; `cmd_in` valid (copied by the kernel).
        let rc = unsafe {
            ffi::mlx5dv_devx_obj_query_async(
                obj.as_ptr(),
                cmd_in.as_ptr().cast(),
                cmd_in.len(),
                outlen,
                wr_id,
                self.raw.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(Error::code("mlx5dv_devx_obj_query_async", rc));
        }
        self.pending.push(obj.clone());
        Ok(())
    }

    /// Waits up to `timeout` for an answer: `Ok(None)` when none came. The
    /// answer's status is checked ([`crate::prim::Error::Firmware`]).
    pub fn get(&mut self, timeout: Duration) -> Result<Option<AsyncAnswer>> {
        const OP: &str = "mlx5dv_devx_get_async_cmd_comp";
        // SAFETY: a live channel.
        let fd = unsafe { (*self.raw.as_ptr()).fd };
        if !wait_readable(fd, timeout, OP)? {
            return Ok(None);
        }
        let mut buf = vec![0u64; (8 + self.max_out).div_ceil(8)];
        let len = buf.len() * 8;
        // SAFETY: `buf` holds `len` bytes, 8-aligned, starting with the header's wr_id.
        let rc = unsafe { ffi::mlx5dv_devx_get_async_cmd_comp(self.raw.as_ptr(), buf.as_mut_ptr().cast(), len) };
        if rc != 0 {
            return Err(Error::code(OP, rc));
        }
        // SAFETY: `buf` is `len` initialised bytes.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) };
        let wr_id = u64::from_ne_bytes(bytes[..8].try_into().expect("eight bytes"));
        let out = bytes[8..8 + self.max_out].to_vec();
        if !self.pending.is_empty() {
            self.pending.remove(0);
        }
        super::cmd::check_out(OP, 0, &out)?;
        Ok(Some(AsyncAnswer { wr_id, out }))
    }
}

impl AsFd for CmdComp {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the channel's fd is open while it lives.
        unsafe { BorrowedFd::borrow_raw((*self.raw.as_ptr()).fd) }
    }
}

impl Drop for CmdComp {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_devx_create_cmd_comp`, destroyed only here.
        unsafe { ffi::mlx5dv_devx_destroy_cmd_comp(self.raw.as_ptr()) }
    }
}
