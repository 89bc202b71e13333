//! Direct views of a QP's send queue and a CQ (`mlx5dv_init_obj`).

use std::ops::Deref;

use super::be::Be32;
use super::cq::CqRing;
use super::cqe::Completion;
use super::mmio::Mmio;
use super::require;
use super::seg::{CtrlFlags, WqeOpcode};
use super::sq::{SqRing, WqeWriter};
use crate::bindings as ffi;
use crate::prim::{Cq, Error, Qp, Result};

/// A QP's send queue for direct WQE posting; borrows the QP.
///
/// Reads go through `Deref` to [`SqRing`]; writes through the view's own
/// methods. The view never hands out `&mut SqRing`, so one QP's ring cannot
/// be swapped into another QP's view:
///
/// ```compile_fail
/// fn swap(a: &mut rrddmma::mlx5dv::obj::DirectSq<'_>, b: &mut rrddmma::mlx5dv::obj::DirectSq<'_>) {
///     std::mem::swap(&mut **a, &mut **b);
/// }
/// ```
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

impl DirectSq<'_> {
    /// Starts a WQE ([`SqRing::wqe`]).
    #[inline(always)]
    pub fn wqe(&mut self, opcode: WqeOpcode, opmod: u8, fm_ce_se: CtrlFlags, imm: u32) -> WqeWriter<'_> {
        self.ring.wqe(opcode, opmod, fm_ce_se, imm)
    }

    /// Rings the doorbell for the WQEs finished since the last one ([`SqRing::ring`]).
    #[inline]
    pub fn ring<M: Mmio>(&mut self, mmio: &mut M) {
        self.ring.ring(mmio)
    }

    /// Frees WQEs up to the one a completion reports ([`SqRing::retire`]).
    #[inline]
    pub fn retire(&mut self, c: &Completion) -> bool {
        self.ring.retire(c)
    }

    /// [`SqRing::set_prefer_bf`].
    pub fn set_prefer_bf(&mut self, yes: bool) {
        self.ring.set_prefer_bf(yes)
    }

    /// [`SqRing::set_blueflame`].
    ///
    /// # Safety
    /// As [`SqRing::set_blueflame`]: with `yes`, the QP's BlueFlame register
    /// must be its own.
    pub unsafe fn set_blueflame(&mut self, yes: bool) {
        // SAFETY: forwarded contract.
        unsafe { self.ring.set_blueflame(yes) }
    }
}

/// A CQ for direct polling; borrows the CQ. Poll through this view only.
///
/// As with [`DirectSq`], the ring is reachable for writes only through the
/// view's methods, never as `&mut CqRing`:
///
/// ```compile_fail
/// fn swap(a: &mut rrddmma::mlx5dv::obj::DirectCq<'_>, b: &mut rrddmma::mlx5dv::obj::DirectCq<'_>) {
///     std::mem::swap(&mut **a, &mut **b);
/// }
/// ```
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

impl DirectCq<'_> {
    /// Polls completions into `out` ([`CqRing::poll`]).
    #[inline]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.ring.poll(out)
    }

    /// Arms the CQ ([`CqRing::arm`]).
    pub fn arm<M: Mmio>(&mut self, mmio: &mut M, solicited: bool) {
        self.ring.arm(mmio, solicited)
    }

    /// [`CqRing::event_received`].
    pub fn event_received(&mut self) {
        self.ring.event_received()
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
/// - The send queue must be idle when the view is made: no request posted
///   through libibverbs still outstanding (the view starts retiring from the
///   producer index it reads, and knows nothing of earlier WQEs).
/// - While the view lives, the QP's send queue is posted to through it only
///   (no `Qp::post_send`, `Qp::wr_batch` or second view, on any thread).
/// - After the view is dropped, the QP must not be posted to through
///   libibverbs again (`Qp::post_send`, `Qp::wr_batch`): libmlx5's own
///   producer index and bookkeeping are stale, and it would overwrite WQEs
///   or ring a doorbell with a wrong index. A new view is fine.
/// - Every WQE written through it must meet the contract of
///   [`Qp::post_send`]: its memory registered, alive and untouched until
///   completion (see [`WqeWriter::data`]).
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
/// - While the view lives, the CQ is polled and armed through it only (no
///   `Cq::poll`, `Cq::start_poll`, `Cq::wait` or second view, on any thread).
/// - After the view is dropped, the CQ must not be polled or armed through
///   libibverbs again: libmlx5's consumer index is stale. A new view is fine.
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
