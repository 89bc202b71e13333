//! Creating a striding receive WQ (`mlx5dv_create_wq` with
//! `MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ`), checked against the device's
//! `striding_rq_caps`, and its receive ring ([`MprqRing`]).
//!
//! ```no_run
//! # fn f(pd: &rrddmma::prim::Pd, cq: &rrddmma::prim::Cq) -> rrddmma::prim::Result<()> {
//! use rrddmma::mlx5dv::mprq::StridingParams;
//! use rrddmma::mlx5dv::mprq_wq::StridingWq;
//! let params = StridingParams { log_stride_bytes: 6, log_num_strides: 9, two_byte_shift: false };
//! let wq = StridingWq::builder(pd, cq, params).max_wr(64).build()?;
//! // SAFETY: the WQ is posted through this ring only.
//! let mut ring = unsafe { wq.ring() }?;
//! # Ok(()) }
//! ```
//!
//! On a device that is not mlx5 (rxe, siw) [`StridingWqBuilder::build`]
//! returns [`Error::Unsupported`] before any system call.

use std::ptr::{self, NonNull};

use super::mprq::{MprqRing, StridingParams};
use super::{not_mlx5, query_device};
use crate::bindings as ffi;
use crate::prim::{count_destroy_failure, Cq, Error, Pd, Result};

/// The operation named by the errors of [`StridingWqBuilder::build`].
const OP: &str = "mlx5dv_create_wq (striding RQ, MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ)";

/// What the device offers for striding WQs (`struct mlx5dv_striding_rq_caps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridingRqCaps {
    /// Smallest `log_stride_bytes`.
    pub min_log_stride_bytes: u32,
    /// Largest `log_stride_bytes`.
    pub max_log_stride_bytes: u32,
    /// Smallest `log_num_strides`.
    pub min_log_num_strides: u32,
    /// Largest `log_num_strides`.
    pub max_log_num_strides: u32,
    /// QP types that may use them (`IBV_QPT_*` bits).
    pub supported_qpts: u32,
}

impl StridingRqCaps {
    /// Whether the device has striding WQs at all.
    pub fn available(&self) -> bool {
        self.max_log_num_strides > 0 && self.max_log_stride_bytes > 0
    }

    /// `Ok` when WQEs of shape `p` fit these capabilities, else
    /// [`Error::CapExceeded`] naming the field (where libmlx5 fails with a
    /// bare `EINVAL`).
    pub fn check(&self, p: &StridingParams) -> Result<()> {
        let (b, s) = (u32::from(p.log_stride_bytes), u32::from(p.log_num_strides));
        if b < self.min_log_stride_bytes || b > self.max_log_stride_bytes {
            let limit =
                if b < self.min_log_stride_bytes { self.min_log_stride_bytes } else { self.max_log_stride_bytes };
            return Err(Error::CapExceeded {
                what: "striding_rq_caps: single_stride_log_num_of_bytes outside min..=max",
                asked: b.into(),
                limit: limit.into(),
            });
        }
        if s < self.min_log_num_strides || s > self.max_log_num_strides {
            let limit = if s < self.min_log_num_strides { self.min_log_num_strides } else { self.max_log_num_strides };
            return Err(Error::CapExceeded {
                what: "striding_rq_caps: single_wqe_log_num_of_strides outside min..=max",
                asked: s.into(),
                limit: limit.into(),
            });
        }
        Ok(())
    }
}

/// The device's striding-WQ capabilities (`mlx5dv_query_device`,
/// `MLX5DV_CONTEXT_MASK_STRIDING_RQ`); all zero when it reports none.
/// [`Error::Unsupported`] on a device that is not mlx5.
pub fn striding_rq_caps(ctx: &crate::prim::Context) -> Result<StridingRqCaps> {
    if !super::is_supported(ctx) {
        return Err(Error::Unsupported { op: OP, feature: not_mlx5(ctx.name()) });
    }
    let attr = query_device(ctx)?;
    let mask = ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_STRIDING_RQ.0;
    if attr.comp_mask & u64::from(mask) == 0 {
        return Ok(StridingRqCaps::default());
    }
    let c = attr.striding_rq_caps;
    Ok(StridingRqCaps {
        min_log_stride_bytes: c.min_single_stride_log_num_of_bytes,
        max_log_stride_bytes: c.max_single_stride_log_num_of_bytes,
        min_log_num_strides: c.min_single_wqe_log_num_of_strides,
        max_log_num_strides: c.max_single_wqe_log_num_of_strides,
        supported_qpts: c.supported_qpts,
    })
}

/// A striding receive WQ, ready (`IBV_WQS_RDY`); destroyed on drop. Made
/// by [`StridingWq::builder`]. It keeps its PD and CQ alive.
#[derive(Debug)]
pub struct StridingWq {
    raw: NonNull<ffi::ibv_wq>,
    params: StridingParams,
    _pd: Pd,
    _cq: Cq,
}

// SAFETY: the WQ is a kernel object reached through its pointer; libmlx5
// locks its own state, and destroying it from another thread is allowed.
unsafe impl Send for StridingWq {}

impl Drop for StridingWq {
    fn drop(&mut self) {
        // SAFETY: made by `mlx5dv_create_wq`, destroyed once, here.
        let rc = unsafe { ffi::ibv_destroy_wq(self.raw.as_ptr()) };
        if rc != 0 {
            count_destroy_failure("ibv_destroy_wq", rc);
        }
    }
}

/// Creates a striding WQ: [`StridingWq::builder`], setters,
/// [`StridingWqBuilder::build`].
#[derive(Debug)]
pub struct StridingWqBuilder<'a> {
    pd: &'a Pd,
    cq: &'a Cq,
    params: StridingParams,
    max_wr: u32,
}

impl StridingWqBuilder<'_> {
    /// WQEs the WQ holds (`ibv_wq_init_attr::max_wr`; libmlx5 rounds it up
    /// to a power of two). Default 16.
    pub fn max_wr(mut self, n: u32) -> Self {
        self.max_wr = n;
        self
    }

    /// Checks the mlx5 device and its `striding_rq_caps`, creates the WQ
    /// (`mlx5dv_create_wq`, one scatter entry per WQE) and moves it to
    /// ready (`ibv_modify_wq`).
    ///
    /// Errors: [`Error::Unsupported`] on a device that is not mlx5 (before
    /// any system call) or one whose caps offer no striding WQ;
    /// [`Error::CapExceeded`] for a stride size or count outside the caps;
    /// [`Error::Verbs`] from the calls.
    pub fn build(self) -> Result<StridingWq> {
        let ctx = self.pd.context();
        let caps = striding_rq_caps(ctx)?;
        if !caps.available() {
            return Err(Error::Unsupported {
                op: OP,
                feature: "striding receive queues (the device's striding_rq_caps are empty)",
            });
        }
        caps.check(&self.params)?;
        let mut attr = ffi::ibv_wq_init_attr {
            wq_context: ptr::null_mut(),
            wq_type: ffi::ibv_wq_type::IBV_WQT_RQ,
            max_wr: self.max_wr,
            max_sge: 1,
            pd: self.pd.as_ptr(),
            cq: self.cq.as_ptr(),
            comp_mask: 0,
            create_flags: 0,
        };
        let mut dv = ffi::mlx5dv_wq_init_attr {
            comp_mask: u64::from(ffi::mlx5dv_wq_init_attr_mask::MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ.0),
            striding_rq_attrs: ffi::mlx5dv_striding_rq_init_attr {
                single_stride_log_num_of_bytes: self.params.log_stride_bytes.into(),
                single_wqe_log_num_of_strides: self.params.log_num_strides.into(),
                two_byte_shift_en: self.params.two_byte_shift.into(),
            },
        };
        // SAFETY: an mlx5 context (checked above); live PD and CQ; the
        // attributes are valid for the call.
        let raw = unsafe { ffi::mlx5dv_create_wq(ctx.as_ptr(), &mut attr, &mut dv) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("mlx5dv_create_wq"))?;
        let wq = StridingWq { raw, params: self.params, _pd: self.pd.clone(), _cq: self.cq.clone() };
        let mut m = ffi::ibv_wq_attr {
            attr_mask: ffi::ibv_wq_attr_mask::IBV_WQ_ATTR_STATE.0,
            wq_state: ffi::ibv_wq_state::IBV_WQS_RDY,
            curr_wq_state: ffi::ibv_wq_state::IBV_WQS_RESET,
            flags: 0,
            flags_mask: 0,
        };
        // SAFETY: the live WQ made above; `m` valid for the call.
        let rc = unsafe { ffi::ibv_modify_wq(raw.as_ptr(), &mut m) };
        if rc != 0 {
            return Err(Error::code("ibv_modify_wq", rc));
        }
        Ok(wq)
    }
}

impl StridingWq {
    /// Starts a striding WQ on `pd` completing to `cq`, whose WQEs have the
    /// shape `params`.
    pub fn builder<'a>(pd: &'a Pd, cq: &'a Cq, params: StridingParams) -> StridingWqBuilder<'a> {
        StridingWqBuilder { pd, cq, params, max_wr: 16 }
    }

    /// The WQ number (`ibv_wq::wq_num`), the QPN its CQEs carry.
    pub fn wq_num(&self) -> u32 {
        // SAFETY: a live WQ.
        unsafe { (*self.raw.as_ptr()).wq_num }
    }

    /// The WQEs' shape.
    pub fn params(&self) -> StridingParams {
        self.params
    }

    /// The raw WQ.
    pub fn as_ptr(&self) -> *mut ffi::ibv_wq {
        self.raw.as_ptr()
    }

    /// The WQ's receive ring (`mlx5dv_init_obj`, `MLX5DV_OBJ_RWQ`), its
    /// producer index taken from the doorbell record.
    ///
    /// # Safety
    /// While the ring lives, the WQ is posted through it only (no
    /// `ibv_post_wq_recv`, no second ring), and the ring must not outlive
    /// the WQ.
    pub unsafe fn ring(&self) -> Result<MprqRing> {
        let mut out = ffi::mlx5dv_rwq::default();
        let mut obj = ffi::mlx5dv_obj::default();
        obj.rwq.in_ = self.raw.as_ptr();
        obj.rwq.out = &mut out;
        // SAFETY: an mlx5 WQ (made by `build`); `obj` and `out` valid for the call.
        let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_RWQ.0)) };
        if rc != 0 {
            return Err(Error::code("mlx5dv_init_obj", rc));
        }
        if out.stride < 32 || !out.stride.is_power_of_two() || !out.wqe_cnt.is_power_of_two() {
            return Err(Error::Unsupported {
                op: "mlx5dv_init_obj",
                feature: "a striding WQ whose reported WQE size or count is not a power of two (of at least 32)",
            });
        }
        // SAFETY: libmlx5 reports the live WQ's buffer and doorbell record;
        // the caller keeps the ring the WQ's only poster, within its life.
        let mut ring =
            unsafe { MprqRing::from_raw(out.buf.cast(), out.wqe_cnt, out.stride, out.dbrec.cast(), self.params) };
        // SAFETY: as above; the record holds the producer index's low 16 bits.
        let pi = unsafe { ptr::read_volatile(out.dbrec) };
        ring.start_at(u32::from_be(pi) & 0xffff);
        Ok(ring)
    }
}
