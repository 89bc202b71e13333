//! DC transport: DC targets (DCT) and DC initiators (DCI) through
//! `mlx5dv_create_qp`, and posting to a DCT with `mlx5dv_wr_set_dc_addr`.
//!
//! A DCI is a [`Dci`], whose extended view is taken only after
//! `mlx5dv_create_qp` succeeded, so `mlx5dv_qp_ex_from_ibv_qp_ex` is never
//! reached with a QP of another provider.

use std::fmt;
use std::ptr::{self, NonNull};

use super::require;
use crate::bindings as ffi;
use crate::prim::QpType;
use crate::prim::{Ah, Cq, Error, Pd, Qp, QpCaps, Result, SendOps, SendWr, Srq, WrBatch};

fn create(
    pd: &Pd,
    send_cq: &Cq,
    recv_cq: &Cq,
    srq: Option<&Srq>,
    caps: QpCaps,
    ops: Option<SendOps>,
    dc: ffi::mlx5dv_dc_init_attr,
) -> Result<NonNull<ffi::ibv_qp>> {
    let ctx = pd.context();
    require(ctx, "mlx5dv_create_qp")?;
    let mut attr = ffi::ibv_qp_init_attr_ex {
        send_cq: send_cq.as_ptr(),
        recv_cq: recv_cq.as_ptr(),
        srq: srq.map_or(ptr::null_mut(), Srq::as_ptr),
        cap: caps.to_raw(false),
        qp_type: QpType::DRIVER.into(),
        comp_mask: ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0,
        pd: pd.as_ptr(),
        ..Default::default()
    };
    if let Some(ops) = ops {
        attr.comp_mask |= ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.0;
        attr.send_ops_flags = ops.bits();
    }
    let mut dv = ffi::mlx5dv_qp_init_attr {
        comp_mask: u64::from(ffi::mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_DC.0),
        dc_init_attr: dc,
        ..Default::default()
    };
    // SAFETY: an mlx5 context (checked above); both attribute structs are valid.
    let qp = unsafe { ffi::mlx5dv_create_qp(ctx.as_ptr(), &mut attr, &mut dv) };
    NonNull::new(qp).ok_or_else(|| Error::last("mlx5dv_create_qp"))
}

/// Creates a DC target on `srq` with access key `key`; bring it up with
/// `modify` (INIT: pkey, port, access; RTR: path MTU, address vector,
/// minimum RNR timer). [`Error::Unsupported`] on a device that is not mlx5.
pub fn create_dct(pd: &Pd, cq: &Cq, srq: &Srq, key: u64) -> Result<Qp> {
    let mut dc = ffi::mlx5dv_dc_init_attr { dc_type: ffi::mlx5dv_dc_type::MLX5DV_DCTYPE_DCT, ..Default::default() };
    dc.__bindgen_anon_1.dct_access_key = key;
    let qp = create(pd, cq, cq, Some(srq), QpCaps::default(), None, dc)?;
    // SAFETY: created just now on `pd` with these CQs and SRQ.
    Ok(unsafe { Qp::from_parts(qp, None, QpType::DRIVER, QpCaps::default(), pd, cq, cq, Some(srq)) })
}

/// A DC initiator: sends to any DCT, each request addressed with [`DctAddr`].
pub struct Dci {
    qp: Qp,
    mqp: NonNull<ffi::mlx5dv_qp_ex>,
}

// SAFETY: posting is serialised by the provider's lock, as for any QP.
unsafe impl Send for Dci {}
// SAFETY: as above.
unsafe impl Sync for Dci {}

impl fmt::Debug for Dci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dci").field("qpn", &self.qp.qpn()).finish()
    }
}

/// Where a DCI request goes: an address handle to the target's port, its
/// DCT number and access key.
#[derive(Debug, Clone, Copy)]
pub struct DctAddr<'a> {
    /// Address handle for the target's port.
    pub ah: &'a Ah,
    /// DCT number.
    pub dctn: u32,
    /// DC access key.
    pub key: u64,
}

impl Dci {
    /// Creates a DC initiator posting `ops`; bring it up with `modify`
    /// (INIT, RTR with path MTU, RTS). [`Error::Unsupported`] on a device
    /// that is not mlx5.
    pub fn new(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps, ops: SendOps) -> Result<Dci> {
        let dc = ffi::mlx5dv_dc_init_attr { dc_type: ffi::mlx5dv_dc_type::MLX5DV_DCTYPE_DCI, ..Default::default() };
        let raw = create(pd, send_cq, recv_cq, None, caps, Some(ops), dc)?;
        // SAFETY: `raw` is an mlx5 QP created with send ops, so it has an
        // extended view; the mlx5 view is taken only from a non-null one.
        let (ex, mqp) = unsafe {
            let ex = NonNull::new(ffi::ibv_qp_to_qp_ex(raw.as_ptr()));
            (ex, ex.and_then(|e| NonNull::new(ffi::mlx5dv_qp_ex_from_ibv_qp_ex(e.as_ptr()))))
        };
        // SAFETY: created just now on `pd` with these CQs.
        let qp = unsafe { Qp::from_parts(raw, ex, QpType::DRIVER, caps, pd, send_cq, recv_cq, None) };
        let mqp = mqp.ok_or(Error::Unsupported { op: "mlx5dv_qp_ex_from_ibv_qp_ex", feature: "DC" })?;
        Ok(Dci { qp, mqp })
    }

    /// The DCI's QP number.
    pub fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    /// Modifies the DCI's QP ([`Qp::modify`]): the RESET → INIT → RTR → RTS
    /// transitions of a DCI.
    pub fn modify(&self, attr: &crate::prim::QpAttr) -> Result<()> {
        self.qp.modify(attr)
    }

    /// The DCI's state, queried from the device ([`Qp::query_state`]).
    pub fn query_state(&self) -> Result<crate::prim::QpState> {
        self.qp.query_state()
    }

    /// The underlying QP.
    ///
    /// A DCI request needs a DC address ([`DciBatch::post`] sets one); the
    /// plain posting paths of [`Qp`] would send without one.
    ///
    /// # Safety
    /// Nothing may be posted through the returned QP (`post_send`,
    /// `post_send_list`, `wr_batch`): use [`Dci::batch`].
    pub unsafe fn qp(&self) -> &Qp {
        &self.qp
    }

    /// Opens a batch of requests, each to its own DCT.
    ///
    /// # Safety
    /// As [`Qp::wr_batch`].
    pub unsafe fn batch(&self) -> DciBatch<'_> {
        // SAFETY: forwarded contract; a DCI always has send ops.
        DciBatch { inner: unsafe { self.qp.wr_batch() }, mqp: self.mqp }
    }
}

/// An open batch of a [`Dci`].
#[derive(Debug)]
pub struct DciBatch<'q> {
    inner: WrBatch<'q>,
    mqp: NonNull<ffi::mlx5dv_qp_ex>,
}

impl DciBatch<'_> {
    /// Adds `wr`, addressed to `to`.
    ///
    /// # Safety
    /// As [`WrBatch::post`](crate::prim::WrBatch::post): the entries of `wr`
    /// name registered memory, alive and untouched until completion.
    pub unsafe fn post(&mut self, wr: &SendWr<'_>, to: &DctAddr<'_>) -> Result<()> {
        let mqp = self.mqp.as_ptr();
        self.inner.post_with(wr, |_| {
            // SAFETY: an open batch on a live DCI with an operation started.
            unsafe { ffi::mlx5dv_wr_set_dc_addr(mqp, to.ah.as_ptr(), to.dctn, to.key) }
        })
    }

    /// Posts the batch with one doorbell.
    pub fn complete(self) -> Result<()> {
        self.inner.complete()
    }
}
