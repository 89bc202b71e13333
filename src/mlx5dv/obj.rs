//! Direct views of a QP's send queue and a CQ (`mlx5dv_init_obj`).

use std::ops::{Deref, DerefMut};

use super::be::Be32;
use super::cq::CqRing;
use super::require;
use super::sq::SqRing;
use crate::bindings as ffi;
use crate::prim::{Cq, Error, Qp, Result};

/// A QP's send queue for direct WQE posting; borrows the QP.
///
/// Post through this view only, starting on a QP that has posted nothing
/// through verbs: the view keeps its own producer index.
#[derive(Debug)]
pub struct DirectSq<'q> {
    ring: SqRing,
    _qp: &'q Qp,
}

impl Deref for DirectSq<'_> {
    type Target = SqRing;
    fn deref(&self) -> &SqRing {
        &self.ring
    }
}

impl DerefMut for DirectSq<'_> {
    fn deref_mut(&mut self) -> &mut SqRing {
        &mut self.ring
    }
}

/// A CQ for direct polling; borrows the CQ. Poll through this view only.
#[derive(Debug)]
pub struct DirectCq<'c> {
    ring: CqRing,
    _cq: &'c Cq,
}

impl Deref for DirectCq<'_> {
    type Target = CqRing;
    fn deref(&self) -> &CqRing {
        &self.ring
    }
}

impl DerefMut for DirectCq<'_> {
    fn deref_mut(&mut self) -> &mut CqRing {
        &mut self.ring
    }
}

/// The send queue of `qp`. [`Error::Unsupported`] on a device that is not mlx5.
pub fn sq_ring(qp: &Qp) -> Result<DirectSq<'_>> {
    require(qp.pd().context(), "mlx5dv_init_obj")?;
    let mut out = ffi::mlx5dv_qp::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.qp.in_ = qp.as_ptr();
    obj.qp.out = &mut out;
    // SAFETY: an mlx5 QP (checked above); `obj` and `out` are valid for the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_QP.0)) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_init_obj", rc));
    }
    if out.sq.stride != 64 {
        return Err(Error::Unsupported { op: "mlx5dv_init_obj", feature: "a send queue stride other than 64 bytes" });
    }
    // SAFETY: libmlx5 reports the live QP's SQ buffer, its doorbell records
    // (`[1]` is the SQ's) and BlueFlame register; the view borrows the QP.
    let ring = unsafe {
        SqRing::from_raw(
            out.sq.buf.cast(),
            out.sq.wqe_cnt,
            out.dbrec.add(1).cast::<Be32>(),
            out.bf.reg.cast(),
            out.bf.size,
            qp.qpn(),
        )
    };
    Ok(DirectSq { ring, _qp: qp })
}

/// `cq` for direct polling. [`Error::Unsupported`] on a device that is not mlx5.
pub fn cq_ring(cq: &Cq) -> Result<DirectCq<'_>> {
    require(cq.context(), "mlx5dv_init_obj")?;
    let mut out = ffi::mlx5dv_cq::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.cq.in_ = cq.as_ptr();
    obj.cq.out = &mut out;
    // SAFETY: an mlx5 CQ (checked above); `obj` and `out` are valid for the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_CQ.0)) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_init_obj", rc));
    }
    // SAFETY: libmlx5 reports the live CQ's buffer, records and UAR; the view borrows the CQ.
    let ring = unsafe {
        CqRing::from_raw(out.buf.cast(), out.cqe_cnt, out.cqe_size, out.dbrec.cast(), out.cq_uar.cast(), out.cqn)
    };
    Ok(DirectCq { ring, _cq: cq })
}
