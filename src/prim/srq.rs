//! Shared receive queues.

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use super::error::{Error, Result};
use super::pd::Pd;
use super::wr::{link_in_place, RecvWr};
use crate::bindings as ffi;

struct SrqInner {
    srq: NonNull<ffi::ibv_srq>,
    _pd: Pd,
}

// SAFETY: posting to an SRQ is thread-safe in libibverbs providers.
unsafe impl Send for SrqInner {}
// SAFETY: as above.
unsafe impl Sync for SrqInner {}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_srq`; QPs using it hold an `Arc` to this.
        let rc = unsafe { ffi::ibv_destroy_srq(self.srq.as_ptr()) };
        if rc != 0 {
            crate::prim::error::count_destroy_failure("ibv_destroy_srq", rc);
        }
    }
}

/// A shared receive queue. Cloning shares it.
///
/// # References
/// `ibv_create_srq(3)`, `ibv_post_srq_recv(3)`
#[derive(Clone)]
pub struct Srq(Arc<SrqInner>);

impl fmt::Debug for Srq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srq").field("ptr", &self.0.srq).finish()
    }
}

impl Srq {
    /// Creates an SRQ with room for `max_wr` receives of up to `max_sge` entries.
    pub fn new(pd: &Pd, max_wr: u32, max_sge: u32) -> Result<Srq> {
        let mut attr = ffi::ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: ffi::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
        };
        // SAFETY: live PD; `attr` is valid for the call.
        let srq = unsafe { ffi::ibv_create_srq(pd.as_ptr(), &mut attr) };
        let srq = NonNull::new(srq).ok_or_else(|| Error::last("ibv_create_srq"))?;
        Ok(Srq(Arc::new(SrqInner { srq, _pd: pd.clone() })))
    }

    /// The PD the SRQ belongs to.
    pub fn pd(&self) -> &Pd {
        &self.0._pd
    }

    /// The raw SRQ.
    pub fn as_ptr(&self) -> *mut ffi::ibv_srq {
        self.0.srq.as_ptr()
    }

    /// Posts receives, linked in place and handed over with one call.
    ///
    /// # Safety
    /// Every entry must lie in memory registered on this SRQ's PD with local
    /// write access, alive and untouched until its completion.
    #[inline]
    pub unsafe fn post_recv(&self, wrs: &mut [RecvWr<'_>]) -> Result<()> {
        let Some(head) = link_in_place!(&mut *wrs) else { return Ok(()) };
        let mut bad = ptr::null_mut();
        // SAFETY: live SRQ; the list is linked above; memory is the caller's contract.
        let rc = unsafe { ffi::ibv_post_srq_recv(self.as_ptr(), head, &mut bad) };
        if rc != 0 {
            return Err(Error::post("ibv_post_srq_recv", rc, head, bad));
        }
        Ok(())
    }
}
