//! Direct views of a QP's send queue and a CQ (`mlx5dv_init_obj`).

use std::ops::{Deref, DerefMut};

use super::be::Be32;
use super::cq::CqRing;
use super::require;
use super::sq::SqRing;
use crate::bindings as ffi;
use crate::prim::{Cq, Error, Qp, Result};

/// A QP's send queue for direct WQE posting; borrows the QP.
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

/// The send queue of `qp`, its indices taken from the doorbell record.
/// [`Error::Unsupported`] on a device that is not mlx5.
///
/// The view rings plain doorbells; BlueFlame is off, because the register
/// libmlx5 gave the QP may be shared with other QPs of the context
/// ([`SqRing::set_blueflame`] turns it on for a dedicated one).
///
/// # Safety
/// While the view lives, the QP's send queue is posted to through it only
/// (no `Qp::post_send`, `Qp::wr_batch` or second view, on any thread), and
/// every WQE written through it must meet the contract of
/// [`Qp::post_send`]: its memory registered, alive and untouched until
/// completion.
pub unsafe fn sq_ring(qp: &Qp) -> Result<DirectSq<'_>> {
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
    // (`[1]` is the SQ's) and BlueFlame register; the view borrows the QP,
    // and the caller gives it the queue alone.
    let mut ring = unsafe {
        SqRing::from_raw(
            out.sq.buf.cast(),
            out.sq.wqe_cnt,
            out.dbrec.add(1).cast::<Be32>(),
            out.bf.reg.cast(),
            0,
            qp.qpn(),
        )
    };
    // SAFETY: as above; the record holds the producer index's low 16 bits.
    let pi = unsafe { std::ptr::read_volatile(out.dbrec.add(1).cast::<Be32>()) }.get() & 0xffff;
    ring.start_at(pi);
    ring.bf_size_available = out.bf.size;
    Ok(DirectSq { ring, _qp: qp })
}

/// `cq` for direct polling, its consumer index taken from the doorbell
/// record. [`Error::Unsupported`] on a device that is not mlx5.
///
/// # Safety
/// While the view lives, the CQ is polled and armed through it only (no
/// `Cq::poll`, `Cq::start_poll` or second view, on any thread).
pub unsafe fn cq_ring(cq: &Cq) -> Result<DirectCq<'_>> {
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
    // SAFETY: libmlx5 reports the live CQ's buffer, records and UAR; the view
    // borrows the CQ, and the caller gives it the CQ alone.
    let mut ring = unsafe {
        CqRing::from_raw(out.buf.cast(), out.cqe_cnt, out.cqe_size, out.dbrec.cast(), out.cq_uar.cast(), out.cqn)
    };
    // SAFETY: as above; record 0 holds the consumer index's low 24 bits.
    let ci = unsafe { std::ptr::read_volatile(out.dbrec.cast::<Be32>()) }.get() & 0xff_ffff;
    ring.start_at(ci);
    Ok(DirectCq { ring, _cq: cq })
}
