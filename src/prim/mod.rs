//! Thin, zero-cost verbs objects.
//!
//! Resources hold their parents by `Arc` (a QP keeps its PD and CQs alive, an
//! MR its PD, every object its device context), so there are no lifetime
//! parameters on resource types and no reference counting on the data path.
//! Posting and polling are `#[inline]` calls straight into the provider.
//!
//! Present: device listing and opening, port and GID queries, PD, MR, CQ,
//! RC queue pairs with their state transitions, posting and polling.

mod cq;
mod device;
mod error;
mod mr;
mod pd;
mod qp;

pub use cq::{Cq, Wc};
pub use device::{device_names, Context, Gid};
pub use error::{Error, Result};
pub use mr::Mr;
pub use pd::Pd;
pub use qp::{ConnectOpts, Endpoint, Qp, QpCaps};

/// Values of C enums and flags, re-exported from the bindings.
pub use crate::bindings::{
    ibv_access_flags as AccessFlags, ibv_send_flags as SendFlags, ibv_wc_opcode as WcOpcode, ibv_wc_status as WcStatus,
    ibv_wr_opcode as WrOpcode,
};
