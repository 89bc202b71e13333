//! Thread domains (`ibv_alloc_td`): present on ConnectX (mlx5), reported
//! as [`Error::Unsupported`] by providers without them (rxe among them).
//! A thread domain takes effect through a parent domain
//! ([`TdParentDomain`](super::TdParentDomain)).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use crate::bindings as ffi;

pub(crate) struct TdInner {
    ctx: Context,
}

// SAFETY: `ibv_dealloc_td` releases what the matching create verb made; a TD handle is only passed to thread-safe verbs calls (parent domain allocation, deallocation); the one-thread contract is on the objects created under it (see `prim::local`).
unsafe impl Destroy for TdInner {
    type Raw = ffi::ibv_td;
    const VERB: &'static str = "ibv_dealloc_td";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_td>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_dealloc_td(raw.as_ptr()) }
    }
}

/// A thread domain (`struct ibv_td`). Cloning shares it; freed when the last
/// clone and the last parent domain using it are gone.
///
/// Alone it does nothing: it takes effect through a parent domain
/// ([`TdParentDomain`](super::TdParentDomain)).
///
/// # References
/// `ibv_alloc_td(3)`
///
/// Neither `Send` nor `Sync`: every object under a thread domain stays on
/// the thread that allocated it (see [`TdParentDomain`](super::TdParentDomain)).
#[derive(Clone)]
pub struct Td(TdKeep, PhantomData<*const ()>);

/// What a parent domain keeps of its thread domain: the handle, without the
/// thread binding (the parent domain is reachable only through thread-bound
/// types, see `prim::local`).
pub(crate) type TdKeep = Arc<Owned<TdInner>>;

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
        let td = NonNull::new(td)
            .ok_or_else(|| Error::last("ibv_alloc_td").lacking(&crate::prim::unsupported::THREAD_DOMAIN, ctx.name()))?;
        Ok(Td(
            Arc::new(
                // SAFETY: just made by its create verb, owned by nothing else.
                unsafe { Owned::new(td, TdInner { ctx: ctx.clone() }) },
            ),
            PhantomData,
        ))
    }

    /// The device context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    /// The raw thread domain.
    pub fn as_ptr(&self) -> *mut ffi::ibv_td {
        self.0.as_ptr()
    }

    /// The handle a parent domain keeps.
    pub(crate) fn keep(&self) -> TdKeep {
        self.0.clone()
    }
}
