//! CQE compression: what the device offers (`mlx5dv_query_device`'s
//! `cqe_comp_caps`) and the check a CQ created with a compression format
//! must pass first.
//!
//! A compressing CQ writes sessions of mini-CQEs that only a direct poller
//! expanding them can read (libmlx5's `mlx5_poll_cq` does not expand
//! them). docs/mlx5dv.md says what rrddmma supports so far.

use super::{query_device, require};
use crate::bindings as ffi;
use crate::prim::{Context, Error, Result};

/// The contents of the mini-CQEs of a compressed session
/// (`enum mlx5dv_cqe_comp_res_format`): besides the byte count, each mini-CQE
/// carries one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "mlx5dv_cqe_comp_res_format")]
pub enum CqeResFormat {
    /// `MLX5DV_CQE_RES_FORMAT_HASH`: the RSS hash result.
    Hash,
    /// `MLX5DV_CQE_RES_FORMAT_CSUM`: the packet checksum.
    Csum,
    /// `MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`: checksum and stride index
    /// (striding RQs).
    CsumStridx,
}

impl CqeResFormat {
    /// The C value (`MLX5DV_CQE_RES_FORMAT_*`).
    pub const fn to_raw(self) -> u8 {
        use ffi::mlx5dv_cqe_comp_res_format as F;
        (match self {
            CqeResFormat::Hash => F::MLX5DV_CQE_RES_FORMAT_HASH.0,
            CqeResFormat::Csum => F::MLX5DV_CQE_RES_FORMAT_CSUM.0,
            CqeResFormat::CsumStridx => F::MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX.0,
        }) as u8
    }

    /// The C name.
    pub const fn name(self) -> &'static str {
        match self {
            CqeResFormat::Hash => "MLX5DV_CQE_RES_FORMAT_HASH",
            CqeResFormat::Csum => "MLX5DV_CQE_RES_FORMAT_CSUM",
            CqeResFormat::CsumStridx => "MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX",
        }
    }
}

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
/// `MLX5DV_CONTEXT_MASK_CQE_COMPRESION`). [`Error::Unsupported`] on a
/// device that is not mlx5.
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
/// [`Error::Unsupported`] naming the format (where libmlx5's
/// `mlx5dv_create_cq` fails with a bare `EINVAL`).
pub fn require_cqe_compression(ctx: &Context, f: CqeResFormat) -> Result<()> {
    let caps = cqe_compression_caps(ctx)?;
    if caps.supports(f) {
        Ok(())
    } else {
        Err(Error::Unsupported {
            op: "mlx5dv_create_cq (cqe_comp_res_format)",
            feature: match f {
                CqeResFormat::Hash => "CQE compression in format MLX5DV_CQE_RES_FORMAT_HASH on this device",
                CqeResFormat::Csum => "CQE compression in format MLX5DV_CQE_RES_FORMAT_CSUM on this device",
                CqeResFormat::CsumStridx => {
                    "CQE compression in format MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX on this device"
                }
            },
        })
    }
}
