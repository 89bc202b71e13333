//! Thread domains (`ibv_alloc_td`): present on ConnectX (mlx5), reported
//! as [`Error::Unsupported`] by providers without them (rxe among them).
//! A thread domain takes effect through a parent domain
//! ([`ParentDomain::with_td`](super::ParentDomain::with_td)).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use crate::bindings as ffi;

struct TdInner {
    td: NonNull<ffi::ibv_td>,
    ctx: Context,
}

// SAFETY: a TD handle is only passed to thread-safe verbs calls (parent
// domain allocation, deallocation); the one-thread contract is on the
// objects created under it (see `ParentDomain::with_td`).
unsafe impl Send for TdInner {}
// SAFETY: as above.
unsafe impl Sync for TdInner {}

impl Drop for TdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by `ibv_alloc_td`, freed once, after every parent
        // domain using it (they hold an `Arc` to this).
        let rc = unsafe { ffi::ibv_dealloc_td(self.td.as_ptr()) };
        if rc != 0 {
            crate::prim::error::count_destroy_failure("ibv_dealloc_td", rc);
        }
    }
}

/// A thread domain (`struct ibv_td`). Cloning shares it; freed when the last
/// clone and the last parent domain using it are gone.
///
/// Alone it does nothing: it takes effect through a parent domain
/// ([`ParentDomain::with_td`](super::ParentDomain::with_td)).
///
/// # References
/// `ibv_alloc_td(3)`
#[derive(Clone)]
pub struct Td(Arc<TdInner>);

impl fmt::Debug for Td {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Td").field("device", &self.0.ctx.name()).finish()
    }
}

impl Td {
    /// Allocates a thread domain. [`Error::Unsupported`] (feature
    /// `thread-domain allocation`) when the provider has none.
    pub fn alloc(ctx: &Context) -> Result<Td> {
        let mut attr = ffi::ibv_td_init_attr { comp_mask: 0 };
        // SAFETY: live context; `attr` is valid for the call.
        let td = unsafe { ffi::ibv_alloc_td(ctx.as_ptr(), &mut attr) };
        let td = NonNull::new(td).ok_or_else(|| Error::last("ibv_alloc_td").lacking("thread-domain allocation"))?;
        Ok(Td(Arc::new(TdInner { td, ctx: ctx.clone() })))
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    /// The raw thread domain.
    pub fn as_ptr(&self) -> *mut ffi::ibv_td {
        self.0.td.as_ptr()
    }
}
