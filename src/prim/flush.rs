//! FLUSH (IBTA 1.5, `ibv_wr_flush`): the responder makes earlier writes to a
//! region globally visible or persistent before it acknowledges.
//!
//! The pieces: a target region registered with
//! [`AccessFlags::FLUSH_GLOBAL`](super::AccessFlags::FLUSH_GLOBAL) and/or
//! [`AccessFlags::FLUSH_PERSISTENT`](super::AccessFlags::FLUSH_PERSISTENT);
//! a requester QP built with [`SendOps::FLUSH`](super::SendOps::FLUSH); the
//! request itself, [`WrBatch::flush`](super::WrBatch::flush), completing
//! as [`WcOpcode::FLUSH`](super::WcOpcode::FLUSH).
//!
//! Where it runs: SoftRoCE since Linux 6.2 with rdma-core 45 or later (the
//! provider's `wr_flush`); the device says so in
//! `ibv_device_attr_ex::device_cap_flags_ex`. An older provider refuses
//! the send-op flag, and the QP builder reports [`Error::Unsupported`](super::Error::Unsupported).

use super::error::{Error, Result};
use super::{Context, SendOps};
use crate::bindings as ffi;

/// `IB_UVERBS_DEVICE_FLUSH_GLOBAL` (the kernel's `ib_user_verbs.h`): the bit
/// of `device_cap_flags_ex` by which a device says it executes FLUSH to
/// global visibility.
pub(crate) const DEVICE_FLUSH_GLOBAL: u64 = 1 << 38;
/// `IB_UVERBS_DEVICE_FLUSH_PERSISTENT`: the same for persistence.
pub(crate) const DEVICE_FLUSH_PERSISTENT: u64 = 1 << 39;

/// How far a FLUSH pushes the data (`enum ibv_placement_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlushPlacement {
    /// Visible to every later reader of the responder's memory
    /// (`IBV_FLUSH_GLOBAL`); the region needs
    /// [`AccessFlags::FLUSH_GLOBAL`](super::AccessFlags::FLUSH_GLOBAL).
    Global,
    /// In persistent memory (`IBV_FLUSH_PERSISTENT`); the region needs
    /// [`AccessFlags::FLUSH_PERSISTENT`](super::AccessFlags::FLUSH_PERSISTENT).
    Persistent,
}

impl FlushPlacement {
    pub(crate) fn to_raw(self) -> u8 {
        let t = match self {
            FlushPlacement::Global => ffi::ibv_placement_type::IBV_FLUSH_GLOBAL,
            FlushPlacement::Persistent => ffi::ibv_placement_type::IBV_FLUSH_PERSISTENT,
        };
        t.0 as u8
    }
}

/// What a FLUSH covers (`enum ibv_selectivity_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlushLevel {
    /// The request's address range (`IBV_FLUSH_RANGE`).
    Range,
    /// The whole region the key names; address and length are ignored
    /// (`IBV_FLUSH_MR`).
    Region,
}

impl FlushLevel {
    pub(crate) fn to_raw(self) -> u8 {
        let l = match self {
            FlushLevel::Range => ffi::ibv_selectivity_level::IBV_FLUSH_RANGE,
            FlushLevel::Region => ffi::ibv_selectivity_level::IBV_FLUSH_MR,
        };
        l.0 as u8
    }
}

/// For [`QpBuilder::build`](super::QpBuilder::build): with
/// [`SendOps::FLUSH`], the device must report FLUSH (either placement).
pub(crate) fn check_device(ctx: &Context, ops: SendOps) -> Result<()> {
    if !ops.contains(SendOps::FLUSH) {
        return Ok(());
    }
    if ctx.query_device_ex()?.device_cap_flags_ex & (DEVICE_FLUSH_GLOBAL | DEVICE_FLUSH_PERSISTENT) == 0 {
        return Err(Error::unsupported("ibv_create_qp_ex", &crate::prim::unsupported::FLUSH, ctx.name(), "neither"));
    }
    Ok(())
}

/// A refused QP creation with [`SendOps::FLUSH`]: a provider older than
/// FLUSH (rdma-core 44 and before) answers `EOPNOTSUPP` for the flag.
pub(crate) fn refused(e: Error, ops: Option<SendOps>, device: &str) -> Error {
    if ops.is_some_and(|o| o.contains(SendOps::FLUSH)) {
        e.lacking(&super::unsupported::FLUSH_PROVIDER, device)
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_are_the_headers() {
        assert_eq!((FlushPlacement::Global.to_raw(), FlushPlacement::Persistent.to_raw()), (1, 2));
        assert_eq!((FlushLevel::Range.to_raw(), FlushLevel::Region.to_raw()), (0, 1));
    }
}
