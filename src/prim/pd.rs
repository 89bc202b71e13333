//! Protection domains.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::td::{Td, TdKeep};
use crate::bindings as ffi;

pub(crate) struct PdInner {
    ctx: Context,
    /// For a parent domain: the PD it extends and its thread domain, released
    /// after the parent domain (fields drop after `Drop::drop`).
    parent: Option<Pd>,
    td: Option<TdKeep>,
}

// SAFETY: `ibv_dealloc_pd` releases what `ibv_alloc_pd` or `ibv_alloc_parent_domain` made; a PD is used only through thread-safe verbs calls.
unsafe impl Destroy for PdInner {
    type Raw = ffi::ibv_pd;
    const VERB: &'static str = "ibv_dealloc_pd";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_pd>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_dealloc_pd(raw.as_ptr()) }
    }
}

#[cfg(test)]
impl Pd {
    /// A PD over a host-made `ibv_pd` of the host context `ctx`, for host
    /// tests of objects that need one; leaked (never deallocated).
    pub(crate) fn for_host_tests(ctx: &Context) -> &'static Pd {
        let raw: &'static mut ffi::ibv_pd = Box::leak(Box::default());
        raw.context = ctx.as_ptr();
        let inner = PdInner { ctx: ctx.clone(), parent: None, td: None };
        // SAFETY: the host PD is never deallocated (the `Pd` is leaked).
        Box::leak(Box::new(Pd(Arc::new(unsafe { Owned::new(NonNull::from(raw), inner) }))))
    }
}

/// A protection domain. Cloning shares it.
///
/// A [parent domain](super::ParentDomain) is also a `Pd` (it derefs to one):
/// what takes a `&Pd` takes it too.
///
/// # References
/// `ibv_alloc_pd(3)`
#[derive(Clone)]
pub struct Pd(Arc<Owned<PdInner>>);

impl fmt::Debug for Pd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pd")
            .field("device", &self.0.ctx.name())
            .field("parent_domain", &self.0.parent.is_some())
            .field("thread_domain", &self.0.td.is_some())
            .finish()
    }
}

impl Pd {
    /// Allocates a protection domain on `ctx`.
    ///
    /// # References
    /// `ibv_alloc_pd(3)`
    #[doc(alias = "ibv_alloc_pd")]
    pub fn alloc(ctx: &Context) -> Result<Pd> {
        // SAFETY: live context.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| Error::last("ibv_alloc_pd"))?;
        Ok(Pd(Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe { Owned::new(pd, PdInner { ctx: ctx.clone(), parent: None, td: None }) },
        )))
    }

    /// Takes ownership of a parent domain allocated over `parent` (and `td`).
    ///
    /// # Safety
    /// `pd` must come from `ibv_alloc_parent_domain` over `parent` and `td`,
    /// owned by nothing else.
    pub(crate) unsafe fn from_parent_domain(pd: NonNull<ffi::ibv_pd>, parent: &Pd, td: Option<&Td>) -> Pd {
        Pd(Arc::new(
            // SAFETY: the caller's contract.
            unsafe {
                Owned::new(
                    pd,
                    PdInner { ctx: parent.context().clone(), parent: Some(parent.clone()), td: td.map(Td::keep) },
                )
            },
        ))
    }

    /// For a parent domain, the PD it extends; `None` for a plain PD.
    pub fn parent(&self) -> Option<&Pd> {
        self.0.parent.as_ref()
    }

    /// Whether this is a parent domain with a thread domain (only reachable
    /// through the `unsafe` accessors of [`TdParentDomain`](super::TdParentDomain)).
    pub fn has_thread_domain(&self) -> bool {
        self.0.td.is_some()
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    /// The raw PD.
    pub fn as_ptr(&self) -> *mut ffi::ibv_pd {
        self.0.as_ptr()
    }
}
