//! DC for applications: a pool of DC initiators ([`DciPool`]) whose
//! requests to a target go on the DCI (and stream) a policy picks, with
//! UCX's policies by their names ([`DcPolicy`]: `dcs`, `dcs_quota`,
//! `hw_dcs`, `rand`).
//!
//! [`DcMesh`] gives every rank of a [`Session`](crate::ctrl::Session) DC
//! endpoints to all others with one DCT and one pool per rank (the DCT
//! directory exchanged as [`DctInfo`](crate::ctrl::DctInfo)s), and an RC
//! mesh where the device lacks DC.
//!
//! The policy is a state machine without a device ([`DcSched`]): the pool
//! drives it with its CQ's completions, and tests drive it with a model of
//! them (tests/dc_pool.rs). Under every policy a target's requests in
//! flight are all on one channel, so they complete in the order posted; a
//! channel in error flushes its requests ([`Outcome::Flushed`], post them
//! again) and is recovered while the others go on; when every channel is
//! held, targets wait in a queue of a bound given at creation
//! ([`Busy::WaitQueueFull`] beyond it), never an unbounded one.
//!
//! [`indirect_mkey`] lays an indirect memory key out for a process whose
//! data path is DC alone (libmlx5 posts UMR on RC QPs only): one call, the
//! RC pair it needs private to the call.
//!
//! docs/mlx5dv.md ("DC for applications") says when DC pays and which
//! policy when.

mod mesh;
#[cfg(not(rrddmma_mlnx_ofed4))]
mod mkey;
mod pool;
mod sched;

pub use mesh::{DcMesh, DcMeshOpts};
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
pub use mkey::{configure_mkey, indirect_mkey, MkeyError, UMR_TIMEOUT};
pub use pool::{DcCompletion, DciPool, DciPoolOpts, PostError};
pub use sched::{Busy, Channel, DcPolicy, DcSched, Done, Outcome, Recovery, SchedShape, Ticket};
