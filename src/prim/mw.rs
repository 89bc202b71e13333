//! Memory windows: remote access to a part of a region, granted and revoked
//! through the send queue.

use std::fmt;
use std::ptr::NonNull;

use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::mr::{Mr, RemoteMr};
use super::pd::Pd;
use super::qp::Qp;
use crate::bindings as ffi;
use crate::prim::{AccessFlags, MwType, SendFlags};

/// A memory window (`struct ibv_mw`). Deallocated on drop.
///
/// # References
/// `ibv_alloc_mw(3)`, `ibv_bind_mw(3)`
pub struct Mw(Owned<MwData>);

pub(crate) struct MwData {
    pd: Pd,
    /// The region of the last bind: the window keeps it (and the memory
    /// under it) registered for as long as the window may grant access.
    bound: Option<Mr>,
}

// SAFETY: `ibv_dealloc_mw` releases what `ibv_alloc_mw` made; a window
// handle is used through thread-safe verbs calls.
unsafe impl Destroy for MwData {
    type Raw = ffi::ibv_mw;
    const VERB: &'static str = "ibv_dealloc_mw";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_mw>) -> i32 {
        // SAFETY: the caller's contract. `bound` drops after this: the
        // region outlives the window.
        unsafe { ffi::ibv_dealloc_mw(raw.as_ptr()) }
    }
    fn keep_on_failure(&mut self) {
        // The window may still grant access: keep its region registered.
        std::mem::forget(self.bound.take());
    }
}

impl fmt::Debug for Mw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mw").field("rkey", &self.rkey()).finish()
    }
}

impl Mw {
    /// Allocates a window of `mw_type` (1: bound with [`Qp::bind_mw`]; 2:
    /// bound by a work request). [`Error::Unsupported`] where the device has none.
    pub fn alloc(pd: &Pd, mw_type: MwType) -> Result<Mw> {
        // SAFETY: live PD.
        let mw = unsafe { ffi::ibv_alloc_mw(pd.as_ptr(), mw_type.into()) };
        let mw = NonNull::new(mw).ok_or_else(|| Error::last("ibv_alloc_mw"))?;
        // SAFETY: made by `ibv_alloc_mw` just now, owned by nothing else.
        Ok(Mw(unsafe { Owned::new(mw, MwData { pd: pd.clone(), bound: None }) }))
    }

    /// The current remote key (changes with each bind).
    pub fn rkey(&self) -> u32 {
        // SAFETY: live window; the field is written only by a bind, which
        // takes `&mut self`.
        unsafe { std::ptr::addr_of!((*self.0.as_ptr()).rkey).read() }
    }

    /// The raw window.
    pub fn as_ptr(&self) -> *mut ffi::ibv_mw {
        self.0.as_ptr()
    }
}

impl Qp {
    /// Binds type 1 window `mw` to `len` bytes at `offset` of `mr` with
    /// remote `access`, through this QP's send queue (a signalled request
    /// with `wr_id`). Returns the window's token once the bind is posted; it
    /// is valid after the bind's completion. `len == 0` unbinds.
    ///
    /// The window keeps a clone of `mr` until it is bound again or dropped,
    /// so the region (and memory that it owns, such as a
    /// [`RegisteredMem`](crate::wrap::RegisteredMem)'s) stays registered
    /// while a peer may use the window's key.
    ///
    /// # Panics
    /// If the range is outside `mr`, if the window and the region are of
    /// different PDs, or if the QP is of another device context than the
    /// window (programming errors: handles of another context would name
    /// unrelated kernel objects).
    pub fn bind_mw(
        &self,
        mw: &mut Mw,
        mr: &Mr,
        offset: u64,
        len: u64,
        access: AccessFlags,
        wr_id: u64,
    ) -> Result<RemoteMr> {
        assert!(
            offset.checked_add(len).is_some_and(|e| e <= mr.len() as u64),
            "window {offset}..+{len} is outside the memory region of {} bytes",
            mr.len()
        );
        assert!(
            mr.pd().as_ptr() == mw.0.pd.as_ptr(),
            "bind_mw on QP {:#x}: the window and the region must belong to one PD",
            self.qpn()
        );
        assert!(
            self.pd().context().as_ptr() == mw.0.pd.context().as_ptr(),
            "bind_mw on QP {:#x}: the QP and the window belong to different device contexts \
             (open the device once and create both from that Context)",
            self.qpn()
        );
        let mut bind = ffi::ibv_mw_bind {
            wr_id,
            send_flags: SendFlags::SIGNALED.bits(),
            bind_info: ffi::ibv_mw_bind_info {
                mr: if len == 0 { std::ptr::null_mut() } else { mr.as_ptr() },
                addr: if len == 0 { 0 } else { mr.addr() + offset },
                length: len,
                mw_access_flags: access.bits(),
            },
        };
        // SAFETY: live QP, window and region of the same PD.
        let rc = unsafe { ffi::ibv_bind_mw(self.as_ptr(), mw.as_ptr(), &mut bind) };
        if rc != 0 {
            return Err(Error::code("ibv_bind_mw", rc));
        }
        // A rebind keeps the new region; the old one is released (its
        // deregistration, if the provider still refuses it, leaks the memory
        // rather than freeing it: see `Mr`).
        if len != 0 {
            mw.0.data_mut().bound = Some(mr.clone());
        }
        Ok(RemoteMr { addr: mr.addr() + offset, len, rkey: mw.rkey() })
    }
}
