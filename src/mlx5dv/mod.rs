//! ConnectX direct verbs (mlx5dv): direct access to the mlx5 queues.
//!
//! - [`seg`] and [`cqe`]: WQE segments and CQEs as `#[repr(C)]` types with
//!   big-endian fields ([`be`]), with the encoders and decoders of
//!   `mlx5dv.h`, checked byte for byte against the header's helpers.
//! - [`sq::SqRing`]: a WQE writer over the send queue ring (DS accounting,
//!   inline padding, wrap-around, producer index) and libmlx5's doorbell /
//!   BlueFlame sequence behind the [`mmio::Mmio`] trait.
//! - [`cq::CqRing`]: direct CQ polling (owner bit, consumer record) and arming.
//! - [`obj`]: the views of a real QP and CQ (`mlx5dv_init_obj`).
//! - [`dc`]: DC transport (DCT and DCI through `mlx5dv_create_qp`).
//! - [`clock`]: device timestamps to nanoseconds.
//!
//! On a device that is not mlx5 every entry point returns
//! [`Error::Unsupported`] before calling into libmlx5 with its objects.
//!
//! # MLNX_OFED 4.x
//! Built for MLNX_OFED 4.x (cfg `rrddmma_mlnx_ofed4`), the parts that call
//! rdma-core's libmlx5 (`mlx5dv_*`: `obj`, `dc`, `is_supported`,
//! `query_device`) are left out, [`clock_info`] is answered by
//! `ibv_exp_query_values`, and `exp4` offers DC, masked atomics and
//! completion timestamps through the experimental verbs
//! (`docs/mlnx-ofed-4.md`). The segment, CQE, ring and clock code is plain
//! Rust and stays.

// The links above to `obj`, `dc` and `Error` name items a 4.x build leaves out.
#![cfg_attr(rrddmma_mlnx_ofed4, allow(rustdoc::broken_intra_doc_links))]

pub mod be;
pub mod clock;
pub mod cq;
pub mod cqe;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod dc;
#[cfg(rrddmma_mlnx_ofed4)]
pub mod exp4;
pub mod mmio;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod obj;
pub mod seg;
pub mod sq;

#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::bindings as ffi;
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::prim::{Context, Error, Result};

#[cfg(rrddmma_mlnx_ofed4)]
pub use exp4::clock_info;

#[cfg(not(rrddmma_mlnx_ofed4))]
/// Whether `ctx` is an mlx5 device (`mlx5dv_is_supported`).
pub fn is_supported(ctx: &Context) -> bool {
    // SAFETY: a live context points to its device.
    unsafe { ffi::mlx5dv_is_supported((*ctx.as_ptr()).device) }
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// `Err(Unsupported)` unless `ctx` is an mlx5 device.
pub(crate) fn require(ctx: &Context, op: &'static str) -> Result<()> {
    if is_supported(ctx) {
        Ok(())
    } else {
        Err(Error::Unsupported { op, feature: "mlx5 direct verbs (the device is not mlx5)" })
    }
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// mlx5 capabilities (`mlx5dv_query_device`), asking for every field.
pub fn query_device(ctx: &Context) -> Result<ffi::mlx5dv_context> {
    require(ctx, "mlx5dv_query_device")?;
    let mut attr = ffi::mlx5dv_context { comp_mask: u64::MAX >> 1, ..Default::default() };
    // SAFETY: an mlx5 context (checked above); `attr` is valid for writes.
    let rc = unsafe { ffi::mlx5dv_query_device(ctx.as_ptr(), &mut attr) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_query_device", rc));
    }
    Ok(attr)
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// The device clock parameters for [`clock::ts_to_ns`] (`mlx5dv_get_clock_info`).
pub fn clock_info(ctx: &Context) -> Result<clock::ClockInfo> {
    require(ctx, "mlx5dv_get_clock_info")?;
    let mut ci = clock::ClockInfo::default();
    // SAFETY: an mlx5 context (checked above); `ci` is valid for writes.
    let rc = unsafe { ffi::mlx5dv_get_clock_info(ctx.as_ptr(), &mut ci) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_get_clock_info", rc));
    }
    Ok(ci)
}
