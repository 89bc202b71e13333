//! Thin, zero-cost verbs objects.
//!
//! Resources hold their parents by `Arc` (a QP keeps its PD, CQs and SRQ
//! alive, an MR its PD, every object its device context), so there are no
//! lifetime parameters on resource types and no reference counting on the
//! data path. Posting and polling are `#[inline]` calls straight into the
//! provider, with batches linked in place (no allocation).

mod ah;
mod channel;
mod clock;
#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
pub mod cm;
mod counters;
mod cq;
pub(crate) mod cvalue;
mod deprecated;
mod device;
mod dm;
mod domain;
mod ece;
mod error;
mod event;
mod flow;
mod flush;
mod gid;
mod handle;
mod local;
pub mod mlx5;
pub(crate) mod mr;
mod mr_ex;
mod mw;
mod odp;
mod pacing;
mod pd;
mod port;
mod qp;
mod quirks;
mod rss;
mod srq;
mod td;
mod tm;
mod tm_config;
pub mod unsupported;
mod values;
mod wq;
mod wr;
mod xrc;

pub use ah::{Ah, AhAttr, GRH_LEN};
pub use channel::CompChannel;
pub use clock::CoreClock;
pub use counters::{CounterKind, Counters};
pub use cq::{Cq, CqBuilder, ExWc, Poller, TmInfo, Wc, WcError, WcFlagsEx};
pub use device::{device_names, Context};
pub use dm::{Dm, DmMr, Xrcd};
pub use domain::ParentDomain;
pub use ece::Ece;
#[allow(unused_imports)]
pub(crate) use error::count_destroy_failure;
pub use error::{destroy_failures, Error, Result};
pub use event::{AsyncEvent, EventElement};
pub use flow::{EthFilter, Flow, FlowBuilder, FlowTarget, Ipv4Filter, Ipv6Filter, PortFilter};
pub use flush::{FlushLevel, FlushPlacement};
pub use gid::{Gid, GidEntry, GidType};
pub use local::{LocalCq, LocalQp, TdParentDomain};
pub use mlx5::{CqeResFormat, CqeSize, Mlx5QpFlags, Mlx5SendOps};
pub use mr::{Mr, RangeError, RangeErrorKind, RemoteMr};
pub use mr_ex::{DmaHandle, MrExOptions, MrMemory, TphMemType};
pub use mw::Mw;
pub use odp::Advice;
pub use pacing::RateLimit;
pub use pd::Pd;
pub use port::{PortAttr, Speed, Width};
pub use qp::{
    random_psn, AttrMask, BatchQp, ConnectOpts, Endpoint, Qp, QpAttr, QpBuilder, QpCaps, Refusal, Rule, SendOps,
    WrBatch,
};
pub use rss::{RssQp, RxHashFields};
pub use srq::{Srq, SrqBuilder};
pub use td::Td;
pub use tm::TmOp;
pub use tm_config::{TmCaps, TmConfig};
pub use unsupported::{Lack, Missing};
pub use wq::{RwqIndTable, Wq, WqBuilder};
pub use wr::{RecvList, RecvWr, RemoteAddr, SendList, SendWr, Sge};
pub use xrc::XrcTargetQp;

pub use values::{
    AccessFlags, EventType, MigState, Mtu, MwType, PortState, QpState, QpType, SendFlags, WcFlags, WcOpcode, WcStatus,
    WrOpcode,
};
