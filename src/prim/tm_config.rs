//! Tag-matching settings and the device's capabilities, checked before a
//! tag-matching SRQ is created (shared by the SRQ builder and the tag
//! operations).

use super::error::{Error, Result};
use crate::bindings as ffi;

/// The device's tag-matching capabilities (`ibv_device_attr_ex::tm_caps`).
/// All zero on a device without tag matching (SoftRoCE, siw).
pub type TmCaps = ffi::ibv_tm_caps;

/// Tag-matching settings of an SRQ, given to [`SrqBuilder::tag_matching`](super::SrqBuilder::tag_matching).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmConfig {
    /// Tagged receives the device list holds (`ibv_tm_cap::max_num_tags`).
    pub max_num_tags: u32,
    /// Outstanding tag operations (`ibv_tm_cap::max_ops`).
    pub max_ops: u32,
}

/// Checks `cfg` against the device's capabilities: `Unsupported` when the
/// device has no tag matching, `CapExceeded` naming the capability when a
/// count is above it.
pub(crate) fn check_caps(device: &str, caps: &TmCaps, cfg: &TmConfig) -> Result<()> {
    if caps.max_num_tags == 0 {
        return Err(Error::unsupported("ibv_create_srq_ex", &crate::prim::unsupported::TAG_MATCHING, device, 0));
    }
    if cfg.max_num_tags > caps.max_num_tags {
        return Err(Error::CapExceeded {
            what: "tm_caps.max_num_tags",
            asked: cfg.max_num_tags.into(),
            limit: caps.max_num_tags.into(),
        });
    }
    if cfg.max_ops > caps.max_ops {
        return Err(Error::CapExceeded {
            what: "tm_caps.max_ops",
            asked: cfg.max_ops.into(),
            limit: caps.max_ops.into(),
        });
    }
    Ok(())
}
