//! The receive ring of a striding WQ ([`MprqRing`]) over the WQ's
//! buffer and doorbell record (`mlx5dv_init_obj`, `MLX5DV_OBJ_RWQ`). The
//! WQ itself is a [`Wq`] built with
//! [`WqBuilder::striding`](crate::prim::WqBuilder::striding), checked
//! against the device's [`striding_rq_caps`](crate::mlx5dv::raw::mprq::striding_rq_caps).
//!
//! ```no_run
//! # fn f(pd: &rrddmma::prim::Pd, cq: &rrddmma::prim::Cq) -> rrddmma::prim::Result<()> {
//! use rrddmma::mlx5dv::{mprq::StridingParams, mprq_wq, obj};
//! use rrddmma::prim::Wq;
//! let params = StridingParams { log_stride_bytes: 6, log_num_strides: 9, two_byte_shift: false };
//! let wq = Wq::builder(pd, cq).max_wr(64).striding(params).build()?;
//! wq.ready()?;
//! // SAFETY: the CQ is polled through this view only.
//! let cq_view = unsafe { obj::cq_ring(cq) }?;
//! // SAFETY: the WQ is posted through this ring only.
//! let mut ring = unsafe { mprq_wq::ring(&wq, &cq_view) }?;
//! # Ok(()) }
//! ```

use std::ptr;

use crate::bindings as ffi;
use crate::mlx5dv::queue::obj::DirectCq;
use crate::mlx5dv::raw::mprq::MprqRing;
use crate::prim::{Error, Result, Wq};

/// The WQ's receive ring (`mlx5dv_init_obj`, `MLX5DV_OBJ_RWQ`), its
/// producer index taken from the doorbell record, taking the completions
/// that `cq` (a view of the WQ's CQ) polls with
/// [`CqRing::poll_strides`](crate::mlx5dv::completion::cq::CqRing::poll_strides)
/// ([`MprqRing::bind_cq`]: completions already in the CQ are not taken).
///
/// # Safety
/// While the ring lives, the WQ is posted through it only (no second
/// ring; [`Wq::post_recv`] refuses a striding WQ), and the ring must not
/// outlive the WQ.
///
/// # Panics
/// When `wq` was not built with [`WqBuilder::striding`](crate::prim::WqBuilder::striding),
/// or `cq` is not a view of the WQ's CQ (programming errors).
pub unsafe fn ring(wq: &Wq, cq: &DirectCq<'_>) -> Result<MprqRing> {
    let params = wq.striding().unwrap_or_else(|| {
        panic!(
            "mprq_wq::ring: WQ {:#x} is not a striding WQ; build it with WqBuilder::striding(StridingParams)",
            wq.num()
        )
    });
    // SAFETY: a live WQ; `cq` is set at creation and never changes.
    let wq_cq = unsafe { (*wq.as_ptr()).cq };
    assert!(
        ptr::eq(wq_cq, cq.cq().as_ptr()),
        "mprq_wq::ring: the DirectCq given for WQ {:#x} views CQ {:#x}, not the WQ's CQ: pass a view of the CQ \
         the WQ was built with",
        wq.num(),
        cq.cqn()
    );
    let mut out = ffi::mlx5dv_rwq::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.rwq.in_ = wq.as_ptr();
    obj.rwq.out = &mut out;
    // SAFETY: an mlx5 WQ (`mlx5dv_create_wq` made every striding one); `obj` and `out` valid for the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_RWQ.0)) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_init_obj", rc));
    }
    if out.stride < 32 || !out.stride.is_power_of_two() || !out.wqe_cnt.is_power_of_two() {
        return Err(Error::unsupported(
            "mlx5dv_init_obj",
            &crate::prim::unsupported::RAW_STRIDING_SHAPE,
            // SAFETY: a live WQ points to its live context.
            &unsafe { crate::prim::unsupported::device_name((*wq.as_ptr()).context) },
            format_args!("({}, {})", out.stride, out.wqe_cnt),
        ));
    }
    // SAFETY: libmlx5 reports the live WQ's buffer and doorbell record;
    // the caller keeps the ring the WQ's only poster, within its life.
    let mut ring =
        unsafe { MprqRing::from_raw(out.buf.cast(), out.wqe_cnt, out.stride, out.dbrec.cast(), params, wq.num(), cq) };
    // SAFETY: `out.dbrec` is the live WQ's doorbell record as libmlx5
    // reported it (mapped and 4-byte aligned while the WQ lives); no other
    // poster writes it (the caller's contract above), so the read races with
    // nothing. It holds the producer index's low 16 bits.
    let pi = unsafe { ptr::read_volatile(out.dbrec) };
    ring.start_at(u32::from_be(pi) & 0xffff);
    Ok(ring)
}
