//! CQE compression: what the device offers (`mlx5dv_query_device`'s
//! `cqe_comp_caps`), the check a format must pass, and compressing CQs
//! (`mlx5dv_create_cq` with `cqe_comp_res_format`).
//!
//! A compressing CQ writes sessions of mini-CQEs ([`super::mini`]) that only
//! a direct poller expanding them can read: libmlx5's `mlx5_poll_cq` does
//! not expand them, so such a CQ is polled through its view
//! ([`CompressedCq::cq_ring`]), which does.

use std::ptr::NonNull;

use super::mini::CqeResFormat;
use super::obj::{cq_ring, DirectCq};
use super::{query_device, require};
use crate::bindings as ffi;
use crate::prim::{Context, Cq, Error, Result};

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

/// A CQ whose CQEs the device may compress in one format
/// ([`create_cq`]). Create QPs on [`CompressedCq::cq`]; poll it through
/// [`CompressedCq::cq_ring`] only: `Cq::poll` goes through libmlx5, which
/// does not expand compressed sessions (it reports their entries as
/// ordinary CQEs, with wrong fields).
#[derive(Debug)]
pub struct CompressedCq {
    cq: Cq,
    format: CqeResFormat,
}

impl CompressedCq {
    /// The CQ, for creating the QPs whose completions it takes.
    pub fn cq(&self) -> &Cq {
        &self.cq
    }

    /// The mini-CQE format it was created with.
    pub fn format(&self) -> CqeResFormat {
        self.format
    }

    /// The CQ's direct view ([`cq_ring`]), expanding compressed sessions in
    /// the CQ's format ([`CqRing::set_compression`](super::cq::CqRing::set_compression)).
    ///
    /// # Safety
    /// As [`cq_ring`]: the CQ is polled and armed through the view only.
    pub unsafe fn cq_ring(&self) -> Result<DirectCq<'_>> {
        // SAFETY: forwarded contract.
        let mut view = unsafe { cq_ring(&self.cq) }?;
        // SAFETY: the buffer is libmlx5's CQ buffer, writable memory that
        // only the device and this view write.
        unsafe { view.set_compression(Some(self.format)) };
        Ok(view)
    }
}

/// A CQ of at least `cqe` entries whose CQEs the device may compress in
/// format `format` (`mlx5dv_create_cq`, `MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE`).
/// [`Error::Unsupported`] naming the format where the device does not
/// compress in it ([`require_cqe_compression`]), or is not mlx5.
pub fn create_cq(ctx: &Context, cqe: u32, format: CqeResFormat) -> Result<CompressedCq> {
    require_cqe_compression(ctx, format)?;
    let mut attr = ffi::ibv_cq_init_attr_ex { cqe, ..Default::default() };
    let mut dv = ffi::mlx5dv_cq_init_attr {
        comp_mask: u64::from(ffi::mlx5dv_cq_init_attr_mask::MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE.0),
        cqe_comp_res_format: format.to_raw(),
        ..Default::default()
    };
    // SAFETY: an mlx5 context (checked above); `attr` and `dv` are valid for the call.
    let ex = unsafe { ffi::mlx5dv_create_cq(ctx.as_ptr(), &mut attr, &mut dv) };
    let raw = NonNull::new(ex.cast::<ffi::ibv_cq>()).ok_or_else(|| Error::last("mlx5dv_create_cq"))?;
    // SAFETY: a live CQ of `ctx` just made without a channel, owned by
    // nothing else (an `ibv_cq_ex` begins with its `ibv_cq`).
    let cq = unsafe { Cq::from_exp(ctx, raw) }?;
    Ok(CompressedCq { cq, format })
}
