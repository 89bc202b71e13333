//! Protection domains.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use crate::bindings as ffi;

struct PdInner {
    pd: NonNull<ffi::ibv_pd>,
    ctx: Context,
}

// SAFETY: a PD is used only through thread-safe verbs calls.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by `ibv_alloc_pd`; children hold an `Arc` to this.
        let rc = unsafe { ffi::ibv_dealloc_pd(self.pd.as_ptr()) };
        if rc != 0 {
            crate::prim::error::count_destroy_failure("ibv_dealloc_pd", rc);
        }
    }
}

/// A protection domain. Cloning shares it.
///
/// # References
/// `ibv_alloc_pd(3)`
#[derive(Clone)]
pub struct Pd(Arc<PdInner>);

impl fmt::Debug for Pd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pd").field("device", &self.0.ctx.name()).finish()
    }
}

impl Pd {
    /// Allocates a protection domain on `ctx`.
    pub fn new(ctx: &Context) -> Result<Pd> {
        // SAFETY: live context.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| Error::last("ibv_alloc_pd"))?;
        Ok(Pd(Arc::new(PdInner { pd, ctx: ctx.clone() })))
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    /// The raw PD.
    pub fn as_ptr(&self) -> *mut ffi::ibv_pd {
        self.0.pd.as_ptr()
    }
}
