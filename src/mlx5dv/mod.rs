//! ConnectX direct verbs (mlx5dv): direct access to the mlx5 queues.
//!
//! - [`seg`] and [`cqe`]: WQE segments and CQEs as `#[repr(C)]` types with
//!   big-endian fields ([`be`]), with the encoders and decoders of
//!   `mlx5dv.h`, checked byte for byte against the header's helpers.
//! - [`sq::SqRing`]: a WQE writer over the send queue ring (DS accounting,
//!   inline padding, wrap-around, producer index) and libmlx5's doorbell /
//!   BlueFlame sequence behind the [`mmio::Mmio`] trait.
//! - [`wqe`]: typed WQE builders, one per opcode (the safe way to post).
//! - [`cq::CqRing`]: direct CQ polling (owner bit, consumer record) and
//!   arming; compressed sessions expanded as [`mini`] describes.
//! - [`comp`]: CQE compression: what the device offers (compressing CQs
//!   come from [`CqBuilder::mlx5_compression`](crate::prim::CqBuilder::mlx5_compression)).
//! - [`obj`]: the views of a real QP and CQ (`mlx5dv_init_obj`).
//! - [`eth`]: raw packet (Ethernet) send WQEs: the Ethernet segment,
//!   inline headers and checksum offload.
//! - [`dc`]: DC transport (targets, initiators, requests to a target), one
//!   API whether the build links rdma-core or MLNX_OFED 4.x.
//! - [`tm`], [`tm_wqe`]: tag matching: the TM CQE decoder, and the tag
//!   operations as direct WQEs on the SRQ's command QP with the tag list
//!   they keep ([`tm_wqe::TmRing`]).
//! - [`mprq`], [`mprq_wq`]: striding (multi-packet) receive queues: the
//!   striding WQE, stride completions, the ring that hands a WQE back once
//!   all its strides are consumed, and the WQ's creation against the
//!   device's `striding_rq_caps`.
//! - [`clock`]: device timestamps to nanoseconds.
//! - [`prm`]: the firmware command and context layouts (`mlx5_ifc.h`) as
//!   typed field accessors, checked against the kernel's `MLX5_SET` /
//!   `MLX5_GET`; the bytes of DEVX commands, off the data path.
//! - [`devx`]: DEVX, the firmware commands on the PRM's layouts: a context
//!   opened with DEVX, objects, UMEMs, UARs, event channels, the device's
//!   capabilities typed ([`devx::HcaCaps`]), the UDP source port, LAG port
//!   and DCI stream reset of verbs QPs, DEVX memory keys, packet pacing.
//!
//! The files sit in one folder per family (`queue/`, `completion/`, `dc/`,
//! `keys/`, `tags/`, `raw/`); each module is public here, at one path.
//!
//! On a device that is not mlx5 every entry point returns
//! [`Error::Unsupported`] before calling into libmlx5 with its objects.
//!
//! # MLNX_OFED 4.x
//! Built for MLNX_OFED 4.x (cfg `rrddmma_mlnx_ofed4`), the parts that call
//! rdma-core's libmlx5 (`mlx5dv_*`: `obj`, `is_supported`, `query_device`)
//! are left out, [`clock_info`] is answered by `ibv_exp_query_values`, [`dc`]
//! keeps its API over the experimental verbs, and `exp4` offers masked
//! atomics and completion timestamps (`docs/mlnx-ofed-4.md`). The segment,
//! CQE, ring and clock code is plain Rust and stays.

// The links above to `obj` and `Error` name items a 4.x build leaves out.
#![cfg_attr(rrddmma_mlnx_ofed4, allow(rustdoc::broken_intra_doc_links))]

mod completion;
pub mod dc;
mod deprecated;
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub mod devx;
#[cfg(rrddmma_mlnx_ofed4)]
#[cfg_attr(docsrs, doc(cfg(rrddmma_mlnx_ofed4)))]
pub mod exp4;
mod keys;
pub mod prm;
mod queue;
mod raw;
mod tags;

#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub use completion::comp;
pub use completion::{clock, cq, cqe, mini};
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub use keys::{mkey, mkey_wr, umr};
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub use queue::obj;
pub use queue::{av, be, mmio, seg, sq, wqe};
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub use raw::mprq_wq;
pub use raw::{eth, mprq};
pub use tags::{tm, tm_wqe};

#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::bindings as ffi;
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::prim::{Context, Error, Result};

#[cfg(rrddmma_mlnx_ofed4)]
#[cfg_attr(docsrs, doc(cfg(rrddmma_mlnx_ofed4)))]
pub use exp4::clock_info;

#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
/// Whether `ctx` is an mlx5 device (`mlx5dv_is_supported`).
pub fn is_supported(ctx: &Context) -> bool {
    // SAFETY: a live context points to its device.
    unsafe { ffi::mlx5dv_is_supported((*ctx.as_ptr()).device) }
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// `Err(Unsupported)` unless `ctx` is an mlx5 device; the error names the
/// device and what to do instead ([`NOT_MLX5`](crate::prim::unsupported::NOT_MLX5)).
pub(crate) fn require(ctx: &Context, op: &'static str) -> Result<()> {
    require_as(ctx, op, &crate::prim::unsupported::NOT_MLX5)
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// [`require`] for a family whose way out is its own (DC's is an RC mesh).
pub(crate) fn require_as(ctx: &Context, op: &'static str, missing: &'static crate::prim::Missing) -> Result<()> {
    if is_supported(ctx) {
        Ok(())
    } else {
        Err(Error::unsupported(op, missing, ctx.name(), "false"))
    }
}

#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub use crate::prim::mlx5::QUERY_DEVICE_MASK;

#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
/// mlx5 capabilities (`mlx5dv_query_device`), asking for every field the
/// bindings' struct holds ([`QUERY_DEVICE_MASK`]); `comp_mask` of the result
/// says which of them the library filled.
pub fn query_device(ctx: &Context) -> Result<ffi::mlx5dv_context> {
    require(ctx, "mlx5dv_query_device")?;
    crate::prim::mlx5::query_device_unchecked(ctx)
}

#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
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

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The request mask is every bit the bindings define, and the highest of
    /// them is the one for the struct's last field, so libmlx5 is never asked
    /// to fill a field past the end of `mlx5dv_context`.
    #[test]
    fn query_mask_stays_inside_the_struct() {
        let crypto = u64::from(ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD.0);
        assert_eq!(QUERY_DEVICE_MASK, (crypto << 1) - 1, "mask must be contiguous up to CRYPTO_OFFLOAD");
        assert_eq!(64 - QUERY_DEVICE_MASK.leading_zeros(), crypto.trailing_zeros() + 1);
        let end = offset_of!(ffi::mlx5dv_context, crypto_caps) + size_of::<ffi::mlx5dv_crypto_caps>();
        assert_eq!(end.next_multiple_of(8), size_of::<ffi::mlx5dv_context>(), "crypto_caps must be the last field");
        // Every MLX5DV_CONTEXT_MASK_* constant in the committed bindings is in
        // the mask: regenerated bindings with a new bit (and field) fail here
        // until the mask and this test are brought up to date.
        let sys = include_str!("../bindings/sys.rs");
        let mut seen = 0;
        let mut rest = sys;
        while let Some(i) = rest.find("pub const MLX5DV_CONTEXT_MASK_") {
            rest = &rest[i..];
            let open =
                rest.find("mlx5dv_context_comp_mask(").expect("constant value") + "mlx5dv_context_comp_mask(".len();
            let close = open + rest[open..].find(')').expect("closing parenthesis");
            let bit: u64 = rest[open..close].trim().trim_end_matches(',').trim().parse().expect("numeric mask bit");
            assert_eq!(QUERY_DEVICE_MASK & bit, bit, "bindings define mask bit {bit:#x} that the request leaves out");
            seen |= bit;
            rest = &rest[close..];
        }
        assert_eq!(seen, QUERY_DEVICE_MASK, "the request names a bit the bindings do not define");
    }
}
