//! DEVX: mlx5 firmware commands on the PRM's layouts (`mlx5dv_devx_*`),
//! with the crate's ownership rules.
//!
//! - [`DevxContext`]: a device opened with DEVX (`mlx5dv_open_device`),
//!   its general commands ([`DevxContext::general_cmd`]).
//! - [`DevxObj`]: a firmware object (create, query, modify, destroy); it
//!   holds what it references ([`Held`]) and is destroyed before it.
//! - [`Umem`] (memory registered for DEVX objects, owned by the
//!   registration), [`Uar`], [`EventChannel`] (an fd to poll, event
//!   subscription), [`CmdComp`] (asynchronous queries).
//! - [`HcaCaps`]: `QUERY_HCA_CAP`, typed (general, atomic, Ethernet
//!   offloads, ODP, RoCE; maximum or current), and the proofs other paths
//!   take from it ([`HwVlanInsert`], [`HcaCaps::check_atomic_size`]).
//! - [`verbs`]: query and modify of verbs QPs, CQs, SRQs and WQs; the RoCE
//!   UDP source port, LAG port and DCI stream reset; DEVX memory keys
//!   ([`DevxMkey`]) and packet pacing entries ([`PacketPacing`]).
//! - [`cmd`]: the command bytes, built by one function per command and
//!   compared with libmlx5 v59's (`tests/provider/devx.rs`).
//!
//! Firmware answers are checked: a status other than 0 is
//! [`Error::Firmware`](crate::prim::Error::Firmware) with its status and
//! syndrome. On a device that is not mlx5 every entry is
//! [`Error::Unsupported`](crate::prim::Error::Unsupported) naming DEVX, the
//! device and the way out, decided before any command is sent.
//!
//! - [`sched`]: NIC scheduling elements ([`SchedNode`], [`SchedLeaf`]) and
//!   QPs attached to them, as `mlx5dv_sched_*` send them.

mod caps;
pub mod cmd;
mod context;
mod event;
mod obj;
pub mod sched;
pub mod verbs;

pub use caps::{
    query_hca_cap, AtomicCaps, CapBlock, CapDisagreement, EthOffloads, HcaCaps, HwVlanInsert, OdpOps, ReportedCaps,
    RoceCaps,
};
pub use cmd::{KlmEntry, MkeyAccessMode, MkeySpec};
#[allow(deprecated)]
pub use context::KERNEL_REFUSED;
pub use context::{DevxContext, OPEN_OP};
pub use event::{AsyncAnswer, CmdComp, DevxEvent, EventChannel, MAX_EVENT_BYTES};
pub use obj::{DevxObj, Held, Uar, Umem};
pub use sched::{SchedAttr, SchedKind, SchedLeaf, SchedNode};
pub use verbs::{DevxMkey, KeyRange, PacketPacing, PpRate};
