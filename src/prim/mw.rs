//! Memory windows: remote access to a part of a region, granted and revoked
//! through the send queue.

use std::fmt;
use std::ptr::NonNull;

use super::error::{Error, Result};
use super::mr::{Mr, RemoteMr};
use super::pd::Pd;
use super::qp::Qp;
use crate::bindings as ffi;

/// A memory window (`struct ibv_mw`). Deallocated on drop.
///
/// # References
/// `ibv_alloc_mw(3)`, `ibv_bind_mw(3)`
pub struct Mw {
    mw: NonNull<ffi::ibv_mw>,
    _pd: Pd,
}

// SAFETY: a window handle is used through thread-safe verbs calls.
unsafe impl Send for Mw {}
// SAFETY: as above.
unsafe impl Sync for Mw {}

impl fmt::Debug for Mw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mw").field("rkey", &self.rkey()).finish()
    }
}

impl Mw {
    /// Allocates a window of `mw_type` (1: bound with [`Qp::bind_mw`]; 2:
    /// bound by a work request). [`Error::Unsupported`] where the device has none.
    pub fn alloc(pd: &Pd, mw_type: ffi::ibv_mw_type) -> Result<Mw> {
        // SAFETY: live PD.
        let mw = unsafe { ffi::ibv_alloc_mw(pd.as_ptr(), mw_type) };
        let mw = NonNull::new(mw).ok_or_else(|| Error::last("ibv_alloc_mw"))?;
        Ok(Mw { mw, _pd: pd.clone() })
    }

    /// The current remote key (changes with each bind).
    pub fn rkey(&self) -> u32 {
        // SAFETY: live window; the field is written only by a bind, which
        // takes `&mut self`.
        unsafe { std::ptr::addr_of!((*self.mw.as_ptr()).rkey).read() }
    }

    /// The raw window.
    pub fn as_ptr(&self) -> *mut ffi::ibv_mw {
        self.mw.as_ptr()
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: allocated by `ibv_alloc_mw`, deallocated once.
        unsafe { ffi::ibv_dealloc_mw(self.mw.as_ptr()) };
    }
}

impl Qp {
    /// Binds type 1 window `mw` to `len` bytes at `offset` of `mr` with
    /// remote `access`, through this QP's send queue (a signalled request
    /// with `wr_id`). Returns the window's token once the bind is posted; it
    /// is valid after the bind's completion. `len == 0` unbinds.
    ///
    /// # Panics
    /// If the range is outside `mr` (a programming error).
    pub fn bind_mw(
        &self,
        mw: &mut Mw,
        mr: &Mr,
        offset: u64,
        len: u64,
        access: ffi::ibv_access_flags,
        wr_id: u64,
    ) -> Result<RemoteMr> {
        assert!(
            offset.checked_add(len).is_some_and(|e| e <= mr.len() as u64),
            "window {offset}..+{len} is outside the memory region of {} bytes",
            mr.len()
        );
        let mut bind = ffi::ibv_mw_bind {
            wr_id,
            send_flags: ffi::ibv_send_flags::IBV_SEND_SIGNALED.0,
            bind_info: ffi::ibv_mw_bind_info {
                mr: if len == 0 { std::ptr::null_mut() } else { mr.as_ptr() },
                addr: if len == 0 { 0 } else { mr.addr() + offset },
                length: len,
                mw_access_flags: access.0,
            },
        };
        // SAFETY: live QP, window and region of the same PD.
        let rc = unsafe { ffi::ibv_bind_mw(self.as_ptr(), mw.as_ptr(), &mut bind) };
        if rc != 0 {
            return Err(Error::code("ibv_bind_mw", rc));
        }
        Ok(RemoteMr { addr: mr.addr() + offset, len, rkey: mw.rkey() })
    }
}
