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
    /// Regions of earlier binds: a rebind or unbind takes effect when the
    /// device executes it, not when it is posted, so until then the window
    /// may still grant access to these. Kept until the window is
    /// deallocated or [`Mw::release_retired`]; one entry per region.
    retired: Vec<Mr>,
}

// SAFETY: `ibv_dealloc_mw` releases what `ibv_alloc_mw` made; a window
// handle is used through thread-safe verbs calls.
unsafe impl Destroy for MwData {
    type Raw = ffi::ibv_mw;
    const VERB: &'static str = "ibv_dealloc_mw";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_mw>) -> i32 {
        // SAFETY: the caller's contract. `bound` and `retired` drop after
        // this: the regions outlive the window.
        unsafe { ffi::ibv_dealloc_mw(raw.as_ptr()) }
    }
    fn keep_on_failure(&mut self) {
        // The window may still grant access: keep its regions registered.
        std::mem::forget(self.bound.take());
        std::mem::forget(std::mem::take(&mut self.retired));
    }
}

impl fmt::Debug for Mw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mw").field("rkey", &self.rkey()).finish()
    }
}

impl Mw {
    /// Allocates a window of `mw_type` (1: bound with [`Qp::bind_mw_at`]; 2:
    /// bound by a work request). [`Error::Unsupported`] where the device has none.
    pub fn alloc(pd: &Pd, mw_type: MwType) -> Result<Mw> {
        // SAFETY: live PD.
        let mw = unsafe { ffi::ibv_alloc_mw(pd.as_ptr(), mw_type.into()) };
        let mw = NonNull::new(mw).ok_or_else(|| Error::last("ibv_alloc_mw"))?;
        // SAFETY: made by `ibv_alloc_mw` just now, owned by nothing else.
        Ok(Mw(unsafe { Owned::new(mw, MwData { pd: pd.clone(), bound: None, retired: Vec::new() }) }))
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

    /// How many regions of earlier binds the window still keeps registered
    /// (see [`Qp::bind_mw_at`]).
    pub fn retired_regions(&self) -> usize {
        self.0.retired.len()
    }

    /// Releases the regions of earlier binds, which the window otherwise
    /// keeps until it is deallocated (see [`Qp::bind_mw_at`]).
    ///
    /// # Safety
    /// Every bind and unbind posted on this window has completed (its work
    /// completion was polled, successful or not), so that the window grants
    /// access to no region but the current one.
    pub unsafe fn release_retired(&mut self) {
        self.0.data_mut().retired.clear();
    }

    /// Records a posted bind to `mr` (`None`: an unbind): the region of the
    /// previous bind joins the retired ones, once.
    /// The window's type, as allocated.
    pub fn mw_type(&self) -> MwType {
        // SAFETY: live window; a plain field set at allocation.
        unsafe { std::ptr::addr_of!((*self.0.as_ptr()).type_).read() }.into()
    }

    /// Records a type-2 bind posted with `rkey`: the window answers to it
    /// from now on ([`Mw::rkey`]), and keeps `mr` (if any) registered.
    pub(crate) fn bound_type2(&mut self, rkey: u32, mr: Option<&Mr>) {
        // SAFETY: live window; the rkey of a type-2 window is the
        // application's to track (`ibv_wr_bind_mw(3)`), and this crate
        // keeps it in the window's own field, as `ibv_bind_mw` does for type 1.
        unsafe { std::ptr::addr_of_mut!((*self.0.as_ptr()).rkey).write(rkey) };
        self.rebound(mr);
    }

    /// The checks every bind makes (programming errors, so panics).
    /// `qpn` and `qp_ctx`: the binding QP's number and device context.
    #[track_caller]
    pub(crate) fn check_bind(&self, (qpn, qp_ctx): (u32, *mut ffi::ibv_context), mr: &Mr, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|e| e <= mr.len()),
            "window {offset}..+{len} is outside the memory region of {} bytes",
            mr.len()
        );
        assert!(
            mr.pd().as_ptr() == self.0.pd.as_ptr(),
            "bind_mw on QP {qpn:#x}: the window and the region must belong to one PD"
        );
        assert!(
            qp_ctx == self.0.pd.context().as_ptr(),
            "bind_mw on QP {qpn:#x}: the QP and the window belong to different device contexts \
             (open the device once and create both from that Context)"
        );
    }

    fn rebound(&mut self, mr: Option<&Mr>) {
        let d = self.0.data_mut();
        if let Some(old) = d.bound.take() {
            let same = |m: &Mr| m.as_ptr() == old.as_ptr();
            if !mr.is_some_and(same) && !d.retired.iter().any(same) {
                d.retired.push(old);
            }
        }
        d.bound = mr.cloned();
    }
}

impl Qp {
    /// Binds type 1 window `mw` to `len` bytes at `offset` of `mr` with
    /// remote `access`, through this QP's send queue (a signalled request
    /// with `wr_id`). Returns the window's token once the bind is posted; it
    /// is valid after the bind's completion. `len == 0` unbinds. Offsets
    /// and lengths are `usize`, as everywhere in the memory APIs
    /// ([`RangeError`](super::RangeError) says why).
    ///
    /// The window keeps a clone of `mr`, so the region (and memory that it
    /// owns, such as a [`RegisteredMem`](crate::wrap::RegisteredMem)'s)
    /// stays registered while a peer may use the window's key. A rebind or
    /// an unbind takes effect only when the device executes it, so the
    /// window keeps the regions of earlier binds too (one clone per region)
    /// until it is deallocated, or until [`Mw::release_retired`] once the
    /// binds have completed.
    ///
    /// # Panics
    /// If the range is outside `mr`, if the window and the region are of
    /// different PDs, or if the QP is of another device context than the
    /// window (programming errors: handles of another context would name
    /// unrelated kernel objects).
    #[track_caller]
    #[doc(alias = "ibv_bind_mw")]
    pub fn bind_mw_at(
        &self,
        mw: &mut Mw,
        mr: &Mr,
        offset: usize,
        len: usize,
        access: AccessFlags,
        wr_id: u64,
    ) -> Result<RemoteMr> {
        mw.check_bind((self.qpn(), self.pd().context().as_ptr()), mr, offset, len);
        let (offset, len) = (offset as u64, len as u64);
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
        // The old region stays with the window: until the device executes
        // this bind, the window still grants access to it.
        mw.rebound((len != 0).then_some(mr));
        Ok(RemoteMr { addr: mr.addr() + offset, len, rkey: mw.rkey() })
    }

    /// Old form of [`Qp::bind_mw_at`], with `u64` offset and length.
    #[deprecated(
        note = "offsets and lengths are usize across the memory APIs: use `qp.bind_mw_at(mw, mr, offset, len, \
                access, wr_id)`; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    #[track_caller]
    pub fn bind_mw(
        &self,
        mw: &mut Mw,
        mr: &Mr,
        offset: u64,
        len: u64,
        access: AccessFlags,
        wr_id: u64,
    ) -> Result<RemoteMr> {
        let fit = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        self.bind_mw_at(mw, mr, fit(offset), fit(len), access, wr_id)
    }
}
