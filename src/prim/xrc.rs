//! XRC shared receive queues: present on ConnectX (mlx5), reported as
//! [`Error::Unsupported`] by providers without XRC (rxe among them).
//!
//! The pieces of an XRC connection:
//! - an [`Xrcd`] on each side;
//! - on the receiving side, an XRC SRQ ([`Srq::create_xrc`]) on that domain,
//!   whose number ([`Srq::srq_num`]) the sender names in each request, and
//!   an `XRC_RECV` QP ([`QpBuilder::xrcd`](super::QpBuilder::xrcd)) that
//!   the sender's QP connects to;
//! - on the sending side, an `XRC_SEND` QP, each request carrying the
//!   remote SRQ number ([`SendWr::xrc_srqn`](super::SendWr::xrc_srqn); the
//!   extended post API sets it with `ibv_wr_set_xrc_srqn`);
//! - another handle on the receiving side's `XRC_RECV` QP, by its number
//!   ([`XrcTargetQp::open`], `ibv_open_qp`): the QP outlives the context
//!   that created it as long as a handle is open.

use std::fmt;
use std::ptr::{self, NonNull};

use super::cq::Cq;
use super::dm::Xrcd;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::pd::Pd;
use super::srq::Srq;
use crate::bindings as ffi;

impl Srq {
    /// An XRC SRQ on `xrcd`, completing on `cq`, holding `max_wr` receives
    /// of `max_sge` entries each (`ibv_create_srq_ex` with
    /// `IBV_SRQT_XRC`). It keeps `pd`, `xrcd` and `cq` alive.
    /// [`Error::Unsupported`] (feature `XRC`) where the provider has no XRC.
    ///
    /// # Panics
    /// If `xrcd` or `cq` belong to another device context than `pd` (a
    /// programming error: open the device once and create all three from it).
    ///
    /// # References
    /// `ibv_create_srq_ex(3)`
    #[doc(alias = "ibv_create_srq_ex")]
    pub fn create_xrc(pd: &Pd, xrcd: &Xrcd, cq: &Cq, max_wr: u32, max_sge: u32) -> Result<Srq> {
        let ctx = pd.context();
        assert!(
            xrcd.context().as_ptr() == ctx.as_ptr() && cq.context().as_ptr() == ctx.as_ptr(),
            "Srq::create_xrc: the XRC domain or the CQ belongs to another device context than the PD \
             (open the device once and create the PD, XRCD and CQ from that Context)"
        );
        use ffi::ibv_srq_init_attr_mask as M;
        let mut attr = ffi::ibv_srq_init_attr_ex {
            srq_context: ptr::null_mut(),
            attr: ffi::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
            comp_mask: M::IBV_SRQ_INIT_ATTR_TYPE.0
                | M::IBV_SRQ_INIT_ATTR_PD.0
                | M::IBV_SRQ_INIT_ATTR_XRCD.0
                | M::IBV_SRQ_INIT_ATTR_CQ.0,
            srq_type: ffi::ibv_srq_type::IBV_SRQT_XRC,
            pd: pd.as_ptr(),
            xrcd: xrcd.as_ptr(),
            cq: cq.as_ptr(),
            ..Default::default()
        };
        // SAFETY: live context; `attr` is valid and names live objects of it
        // (checked above).
        let raw = unsafe { ffi::ibv_create_srq_ex(ctx.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::last("ibv_create_srq_ex").lacking(&crate::prim::unsupported::XRC, pd.context().name())
        })?;
        // SAFETY: made just now on `pd` with `xrcd` and `cq`, owned by the result.
        Ok(unsafe { Srq::from_raw(raw, pd, Some((xrcd.clone(), cq.clone()))) })
    }

    /// The SRQ's number: what a sender puts in each request to an XRC SRQ
    /// ([`SendWr::xrc_srqn`](super::SendWr::xrc_srqn)).
    /// [`Error::Unsupported`] (feature `XRC`) where the provider has no XRC.
    ///
    /// # References
    /// `ibv_get_srq_num(3)`
    #[doc(alias = "ibv_get_srq_num")]
    pub fn srq_num(&self) -> Result<u32> {
        let mut n = 0;
        // SAFETY: live SRQ; `n` is valid for writes.
        let rc = unsafe { ffi::ibv_get_srq_num(self.as_ptr(), &mut n) };
        if rc != 0 {
            return Err(Error::code("ibv_get_srq_num", rc).lacking(&crate::prim::unsupported::XRC, &{
                // SAFETY: a live SRQ points to its live context.
                unsafe { crate::prim::unsupported::device_name((*self.as_ptr()).context) }
            }));
        }
        Ok(n)
    }
}

pub(crate) struct OpenedQp {
    xrcd: Xrcd,
}

// SAFETY: `ibv_destroy_qp` releases a QP handle made by `ibv_open_qp` (the
// QP itself stays while other handles or its creator hold it); the handle
// is used only through thread-safe verbs calls.
unsafe impl Destroy for OpenedQp {
    type Raw = ffi::ibv_qp;
    const VERB: &'static str = "ibv_destroy_qp";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_qp>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_qp(raw.as_ptr()) }
    }
}

/// A handle on an existing XRC receive QP (`XRC_RECV`, the target of XRC
/// requests), opened by its number in an XRC domain (`ibv_open_qp`). While
/// any handle is open the QP lives on, even after the context that created
/// it closes it, so several contexts or processes sharing the domain can
/// hand one target QP among them. Its receives land in the XRC SRQs the
/// requests name; this handle posts nothing. Dropping it closes the handle
/// (`ibv_destroy_qp`).
///
/// # References
/// `ibv_open_qp(3)`
pub struct XrcTargetQp(Owned<OpenedQp>);

impl fmt::Debug for XrcTargetQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XrcTargetQp").field("qpn", &self.qpn()).finish()
    }
}

impl XrcTargetQp {
    /// Opens the `XRC_RECV` QP number `qpn` of `xrcd`, on the domain's
    /// device context. [`Error::Unsupported`] (feature `XRC`) where the
    /// provider has no XRC; [`Error::Verbs`] with the kernel's errno when
    /// the domain holds no such QP.
    #[doc(alias = "ibv_open_qp")]
    pub fn open(xrcd: &Xrcd, qpn: u32) -> Result<XrcTargetQp> {
        use ffi::ibv_qp_open_attr_mask as M;
        let mut attr = ffi::ibv_qp_open_attr {
            comp_mask: M::IBV_QP_OPEN_ATTR_NUM.0
                | M::IBV_QP_OPEN_ATTR_XRCD.0
                | M::IBV_QP_OPEN_ATTR_CONTEXT.0
                | M::IBV_QP_OPEN_ATTR_TYPE.0,
            qp_num: qpn,
            xrcd: xrcd.as_ptr(),
            qp_context: ptr::null_mut(),
            qp_type: ffi::ibv_qp_type::IBV_QPT_XRC_RECV,
        };
        // SAFETY: live context and XRCD of it; `attr` is valid for the call.
        let raw = unsafe { ffi::ibv_open_qp(xrcd.context().as_ptr(), &mut attr) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last("ibv_open_qp").lacking(&crate::prim::unsupported::XRC, xrcd.context().name()))?;
        // SAFETY: made just now by `ibv_open_qp`, owned by the result; it
        // keeps the domain open.
        Ok(XrcTargetQp(unsafe { Owned::new(raw, OpenedQp { xrcd: xrcd.clone() }) }))
    }

    /// The QP's number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: live QP handle; `qp_num` is set at creation and never changes.
        unsafe { (*self.0.as_ptr()).qp_num }
    }

    /// The domain the QP belongs to.
    pub fn xrcd(&self) -> &Xrcd {
        &self.0.xrcd
    }

    /// The raw handle, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *mut ffi::ibv_qp {
        self.0.as_ptr()
    }
}
