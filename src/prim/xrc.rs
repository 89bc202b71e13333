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
//!   extended post API sets it with `ibv_wr_set_xrc_srqn`).

use std::ptr::{self, NonNull};

use super::cq::Cq;
use super::dm::Xrcd;
use super::error::{Error, Result};
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
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("ibv_create_srq_ex").lacking("XRC"))?;
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
            return Err(Error::code("ibv_get_srq_num", rc).lacking("XRC"));
        }
        Ok(n)
    }
}
