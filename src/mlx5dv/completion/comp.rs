//! CQE compression: what the device offers (`mlx5dv_query_device`'s
//! `cqe_comp_caps`) and the check a format must pass.
//!
//! A compressing CQ comes from [`CqBuilder::mlx5_compression`]
//! (`mlx5dv_create_cq` with `cqe_comp_res_format`). It writes sessions of
//! mini-CQEs ([`crate::mlx5dv::completion::mini`]) that only a direct poller expanding them can
//! read: libmlx5's `mlx5_poll_cq` does not expand them, so the CQ knows it
//! compresses: [`Cq::poll`](crate::prim::Cq::poll) panics on it, and its
//! view ([`cq_ring`](crate::mlx5dv::queue::obj::cq_ring)) expands sessions by itself.
//!
//! [`CqBuilder::mlx5_compression`]: crate::prim::CqBuilder::mlx5_compression

use crate::bindings as ffi;
use crate::mlx5dv::completion::mini::CqeResFormat;
use crate::mlx5dv::{query_device, require};
use crate::prim::{mlx5, Context, Result};

/// CQE compression as the device offers it (`struct mlx5dv_cqe_comp_caps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqeCompressionCaps {
    /// Most CQEs in one compressed session; 0: no compression.
    pub max_num: u32,
    /// The raw `supported_format` bits (`MLX5DV_CQE_RES_FORMAT_*`).
    pub supported_format: u32,
}

impl CqeCompressionCaps {
    /// Whether the device compresses CQEs in format `f`.
    pub fn supports(&self, f: CqeResFormat) -> bool {
        self.max_num > 0 && self.supported_format & u32::from(f.to_raw()) != 0
    }
}

/// The device's CQE compression (`mlx5dv_query_device`,
/// `MLX5DV_CONTEXT_MASK_CQE_COMPRESION`). [`Error::Unsupported`](crate::prim::Error::Unsupported)
/// on a device that is not mlx5.
pub fn cqe_compression_caps(ctx: &Context) -> Result<CqeCompressionCaps> {
    require(ctx, "mlx5dv_query_device (CQE compression)")?;
    let attr = query_device(ctx)?;
    let mask = ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_CQE_COMPRESION.0;
    if attr.comp_mask & u64::from(mask) == 0 {
        return Ok(CqeCompressionCaps::default());
    }
    Ok(CqeCompressionCaps {
        max_num: attr.cqe_comp_caps.max_num,
        supported_format: attr.cqe_comp_caps.supported_format,
    })
}

/// `Ok` when a CQ of `ctx` may compress its CQEs in format `f`, else
/// [`Error::Unsupported`](crate::prim::Error::Unsupported) naming the
/// format (where libmlx5's `mlx5dv_create_cq` fails with a bare `EINVAL`);
/// the check [`CqBuilder::build`](crate::prim::CqBuilder::build) makes.
pub fn require_cqe_compression(ctx: &Context, f: CqeResFormat) -> Result<()> {
    let attr = query_device(ctx)?;
    mlx5::check_compression(ctx.name(), &attr, f)
}

/// Old name of a compressing CQ, which is a plain [`Cq`](crate::prim::Cq) now.
#[deprecated(
    note = "a compressing CQ is a plain Cq now: use `prim::Cq`, from `Cq::builder(&ctx, cqe).mlx5_compression(format).build()`; see docs/upgrading.md"
)]
#[doc(hidden)]
pub type CompressedCq = crate::prim::Cq;

/// Old way to make a compressing CQ.
#[deprecated(
    note = "use `Cq::builder(&ctx, cqe).mlx5_compression(format).build()` (a plain Cq; `Cq::compression()` says its format); see docs/upgrading.md"
)]
#[doc(hidden)]
pub fn create_cq(ctx: &Context, cqe: u32, format: CqeResFormat) -> Result<crate::prim::Cq> {
    crate::prim::Cq::builder(ctx, cqe).mlx5_compression(format).build()
}
