//! Flow counters (`struct ibv_counters`): packet and byte counts of what a
//! steering rule matches. Present on ConnectX; reported as
//! [`Error::Unsupported`] elsewhere (rxe among them).
//!
//! The order the verbs require: [`Counters::create`], then
//! [`Counters::attach`] for each value to count (its description and its
//! index in what [`Counters::read`] returns), then the flow that counts:
//! [`FlowBuilder::count`](super::FlowBuilder::count) hands them to the
//! [`Flow`](super::Flow), which holds them (an `IBV_FLOW_SPEC_ACTION_COUNT`
//! spec naming [`Counters::as_ptr`]) and is destroyed before them.

use std::fmt;
use std::ptr::NonNull;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use crate::bindings as ffi;
use crate::prim::cvalue::c_type;

c_type! {
    /// What a counter counts (`enum ibv_counter_description`).
    #[doc(alias = "ibv_counter_description")]
    pub value CounterKind: u32, from enum ffi::ibv_counter_description {
        PACKETS = IBV_COUNTER_PACKETS "IBV_COUNTER_PACKETS",
        BYTES = IBV_COUNTER_BYTES "IBV_COUNTER_BYTES",
    }
}

pub(crate) struct CountersData {
    _ctx: Context,
    /// Counters attached so far: the values [`Counters::read`] returns.
    attached: u32,
}

// SAFETY: `ibv_destroy_counters` releases what `ibv_create_counters` made;
// attaching and reading go through the provider's thread-safe entries.
unsafe impl Destroy for CountersData {
    type Raw = ffi::ibv_counters;
    const VERB: &'static str = "ibv_destroy_counters";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_counters>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_counters(raw.as_ptr()) }
    }
}

/// A set of flow counters. Destroyed on drop.
///
/// # References
/// `ibv_create_counters(3)`, `ibv_attach_counters_point_flow(3)`, `ibv_read_counters(3)`
pub struct Counters(Owned<CountersData>);

impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counters").field("attached", &self.0.attached).finish()
    }
}

impl Counters {
    /// An empty set of counters on `ctx`. [`Error::Unsupported`] (feature
    /// `flow counters`) where the provider has none.
    ///
    /// # References
    /// `ibv_create_counters(3)`
    #[doc(alias = "ibv_create_counters")]
    pub fn create(ctx: &Context) -> Result<Counters> {
        if cfg!(rrddmma_mlnx_ofed4) {
            return Err(Error::unsupported(
                "ibv_create_counters",
                &crate::prim::unsupported::OFED4,
                ctx.name(),
                "rrddmma_mlnx_ofed4",
            ));
        }
        let mut attr = ffi::ibv_counters_init_attr { comp_mask: 0 };
        // SAFETY: live context; `attr` is valid for the call.
        let raw = unsafe { ffi::ibv_create_counters(ctx.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::last("ibv_create_counters").lacking(&crate::prim::unsupported::FLOW_COUNTERS, ctx.name())
        })?;
        // SAFETY: made just now, owned by nothing else.
        Ok(Counters(unsafe { Owned::new(raw, CountersData { _ctx: ctx.clone(), attached: 0 }) }))
    }

    /// Counts `kind` at `index` of what [`Counters::read`] returns, for the
    /// flow created next with these counters (attach before the flow).
    ///
    /// # References
    /// `ibv_attach_counters_point_flow(3)`
    #[doc(alias = "ibv_attach_counters_point_flow")]
    pub fn attach(&mut self, kind: CounterKind, index: u32) -> Result<()> {
        let mut attr = ffi::ibv_counter_attach_attr { counter_desc: kind.into(), index, comp_mask: 0 };
        // SAFETY: live counters; `attr` is valid; no flow yet (null).
        let rc = unsafe { ffi::ibv_attach_counters_point_flow(self.0.as_ptr(), &mut attr, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(Error::code("ibv_attach_counters_point_flow", rc)
                .lacking(&crate::prim::unsupported::FLOW_COUNTERS, &self.device()));
        }
        self.0.data_mut().attached = self.0.attached.max(index.saturating_add(1));
        Ok(())
    }

    /// How many values [`Counters::read`] fills: one past the highest
    /// index attached.
    pub fn len(&self) -> usize {
        self.0.attached as usize
    }

    /// Whether nothing is attached yet.
    pub fn is_empty(&self) -> bool {
        self.0.attached == 0
    }

    /// Reads the counters into `out` (index as attached). `cached`: the
    /// provider may return its last cached values instead of asking the
    /// device (`IBV_READ_COUNTERS_ATTR_PREFER_CACHED`).
    ///
    /// # Panics
    /// If `out` holds fewer than [`Counters::len`] values (a programming error).
    ///
    /// # References
    /// `ibv_read_counters(3)`
    #[doc(alias = "ibv_read_counters")]
    pub fn read(&self, out: &mut [u64], cached: bool) -> Result<()> {
        assert!(
            out.len() >= self.len(),
            "Counters::read: {} values are attached but `out` holds {}",
            self.len(),
            out.len()
        );
        let flags = if cached { ffi::ibv_read_counters_flags::IBV_READ_COUNTERS_ATTR_PREFER_CACHED.0 } else { 0 };
        let n = u32::try_from(out.len()).unwrap_or(u32::MAX);
        // SAFETY: live counters; `out` is valid for `n` writes.
        let rc = unsafe { ffi::ibv_read_counters(self.0.as_ptr(), out.as_mut_ptr(), n, flags) };
        if rc != 0 {
            return Err(
                Error::code("ibv_read_counters", rc).lacking(&crate::prim::unsupported::FLOW_COUNTERS, &self.device())
            );
        }
        Ok(())
    }

    /// The raw counters, for the flow spec (`ibv_flow_spec_counter_action`).
    pub fn as_ptr(&self) -> *mut ffi::ibv_counters {
        self.0.as_ptr()
    }

    /// The name of the counters' device, for a refusal.
    fn device(&self) -> String {
        // SAFETY: live counters point to their live context.
        unsafe { crate::prim::unsupported::device_name((*self.as_ptr()).context) }
    }
}
