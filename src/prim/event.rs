//! Asynchronous device events (`ibv_get_async_event`).

use std::os::fd::RawFd;
use std::time::Duration;

use super::channel::{set_nonblocking, wait_readable};
use super::device::Context;
use super::error::{Error, Result};
use crate::bindings as ffi;

/// An asynchronous event, copied out and acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// The event (`IBV_EVENT_*`); any value is representable.
    pub event_type: super::EventType,
    /// What it concerns.
    pub element: EventElement,
}

/// The object an asynchronous event concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventElement {
    /// A QP, by number.
    Qp(u32),
    /// A CQ (its address, to compare with [`super::Cq::as_ptr`]).
    Cq(usize),
    /// An SRQ (its address, to compare with [`super::Srq::as_ptr`]).
    Srq(usize),
    /// A port.
    Port(u8),
    /// The whole device, or an element this library does not interpret.
    Device,
}

fn element(ev: &ffi::ibv_async_event) -> EventElement {
    use ffi::ibv_event_type as E;
    // SAFETY: the union member read is the one the event type names, as
    // `ibv_get_async_event(3)` documents; the objects stay alive until the
    // event is acknowledged, which happens after this.
    unsafe {
        match ev.event_type {
            E::IBV_EVENT_CQ_ERR => EventElement::Cq(ev.element.cq as usize),
            E::IBV_EVENT_QP_FATAL
            | E::IBV_EVENT_QP_REQ_ERR
            | E::IBV_EVENT_QP_ACCESS_ERR
            | E::IBV_EVENT_COMM_EST
            | E::IBV_EVENT_SQ_DRAINED
            | E::IBV_EVENT_PATH_MIG
            | E::IBV_EVENT_PATH_MIG_ERR
            | E::IBV_EVENT_QP_LAST_WQE_REACHED => {
                let qp = ev.element.qp;
                if qp.is_null() {
                    EventElement::Device
                } else {
                    EventElement::Qp((*qp).qp_num)
                }
            }
            E::IBV_EVENT_SRQ_ERR | E::IBV_EVENT_SRQ_LIMIT_REACHED => EventElement::Srq(ev.element.srq as usize),
            E::IBV_EVENT_PORT_ACTIVE
            | E::IBV_EVENT_PORT_ERR
            | E::IBV_EVENT_LID_CHANGE
            | E::IBV_EVENT_PKEY_CHANGE
            | E::IBV_EVENT_SM_CHANGE
            | E::IBV_EVENT_CLIENT_REREGISTER
            | E::IBV_EVENT_GID_CHANGE => {
                u8::try_from(ev.element.port_num).map_or(EventElement::Device, EventElement::Port)
            }
            _ => EventElement::Device,
        }
    }
}

impl Context {
    /// The descriptor that becomes readable when an asynchronous event is
    /// pending (for `poll`, `epoll` or an async runtime).
    pub fn async_fd(&self) -> RawFd {
        // SAFETY: live context.
        unsafe { (*self.as_ptr()).async_fd }
    }

    /// Waits up to `timeout` (`None`: forever) for the next asynchronous
    /// event; `Ok(None)` on timeout. The event is acknowledged before it is
    /// returned.
    ///
    /// # References
    /// `ibv_get_async_event(3)`
    pub fn async_event(&self, timeout: Option<Duration>) -> Result<Option<AsyncEvent>> {
        if !wait_readable(self.async_fd(), timeout)? {
            return Ok(None);
        }
        match self.take_async_event()? {
            Some(ev) => Ok(Some(ev)),
            // Another thread took the event.
            None => Ok(None),
        }
    }

    /// The next asynchronous event if one is pending, without blocking:
    /// `Err` of kind [`std::io::ErrorKind::WouldBlock`] when none is, so it
    /// fits `AsyncFd::try_io` and other reactors' readiness loops (the
    /// descriptor is [`Context::async_fd`]). The event is acknowledged.
    pub fn try_async_event(&self) -> std::io::Result<AsyncEvent> {
        match self.take_async_event() {
            Ok(Some(ev)) => Ok(ev),
            Ok(None) => Err(std::io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(e.into()),
        }
    }

    fn take_async_event(&self) -> Result<Option<AsyncEvent>> {
        // Never block here: the descriptor stays non-blocking.
        set_nonblocking(self.async_fd(), true)?;
        let mut ev = std::mem::MaybeUninit::<ffi::ibv_async_event>::zeroed();
        // SAFETY: live context; `ev` is valid for writes.
        let rc = unsafe { ffi::ibv_get_async_event(self.as_ptr(), ev.as_mut_ptr()) };
        if rc != 0 {
            let e = Error::last("ibv_get_async_event");
            return if e.errno() == Some(libc::EAGAIN) { Ok(None) } else { Err(e) };
        }
        // SAFETY: filled by a successful call.
        let mut ev = unsafe { ev.assume_init() };
        let out = AsyncEvent { event_type: ev.event_type.into(), element: element(&ev) };
        // SAFETY: the event just read, acknowledged once.
        unsafe { ffi::ibv_ack_async_event(&mut ev) };
        Ok(Some(out))
    }
}
