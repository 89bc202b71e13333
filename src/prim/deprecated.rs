//! The constructors' names before the sweep that named them for the C verb
//! (docs/upgrading.md, "Construction: named for the C verb"): each old name
//! compiles with a deprecation note naming its replacement, and does what
//! the replacement does. Hidden from the documentation, which shows the one
//! way; removed in a later release.

#[cfg(feature = "cm")]
use super::cm::{CmId, EventChannel, PortSpace};
use super::{Ah, AhAttr, CompChannel, Context, Cq, CqBuilder, ParentDomain, Pd, Qp, QpBuilder, QpCaps, QpType};
use super::{AttrMask, Result, Srq};

impl Pd {
    /// Old name of [`Pd::alloc`].
    #[deprecated(note = "renamed for the C verb: use `Pd::alloc(&ctx)` (ibv_alloc_pd); see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn new(ctx: &Context) -> Result<Pd> {
        Pd::alloc(ctx)
    }
}

impl ParentDomain {
    /// Old name of [`ParentDomain::alloc`].
    #[deprecated(
        note = "renamed for the C verb: use `ParentDomain::alloc(&pd)` (ibv_alloc_parent_domain); see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new(pd: &Pd) -> Result<ParentDomain> {
        ParentDomain::alloc(pd)
    }
}

impl Cq {
    /// Old name of [`Cq::create`].
    #[deprecated(note = "renamed for the C verb: use `Cq::create(&ctx, cqe)` (ibv_create_cq); see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn new(ctx: &Context, cqe: u32) -> Result<Cq> {
        Cq::create(ctx, cqe)
    }
}

impl CqBuilder<'_> {
    /// Old way to start a [`CqBuilder`].
    #[deprecated(
        note = "a builder starts from its type: use `Cq::builder(&ctx, cqe)` and its setters, then `build()`; \
                see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new(ctx: &Context, cqe: u32) -> CqBuilder<'_> {
        Cq::builder(ctx, cqe)
    }
}

impl<'a> QpBuilder<'a> {
    /// Old way to start a [`QpBuilder`].
    #[deprecated(
        note = "a builder starts from its type: use `Qp::builder(&pd, qp_type, &send_cq, &recv_cq)` and its setters, \
                then `build()`; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new(pd: &'a Pd, qp_type: QpType, send_cq: &'a Cq, recv_cq: &'a Cq) -> QpBuilder<'a> {
        Qp::builder(pd, qp_type, send_cq, recv_cq)
    }
}

impl Qp {
    /// Old RC shorthand.
    #[deprecated(
        note = "one way to make a QP: use `Qp::builder(&pd, QpType::RC, &send_cq, &recv_cq).caps(caps).build()`; \
                see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new_rc(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Qp> {
        Qp::builder(pd, QpType::RC, send_cq, recv_cq).caps(caps).build()
    }
}

impl CompChannel {
    /// Old name of [`CompChannel::create`].
    #[deprecated(
        note = "renamed for the C verb: use `CompChannel::create(&ctx)` (ibv_create_comp_channel); see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new(ctx: &Context) -> Result<CompChannel> {
        CompChannel::create(ctx)
    }
}

impl Ah {
    /// Old name of [`Ah::create`].
    #[deprecated(note = "renamed for the C verb: use `Ah::create(&pd, &attr)` (ibv_create_ah); see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn new(pd: &Pd, attr: &AhAttr) -> Result<Ah> {
        Ah::create(pd, attr)
    }
}

impl Srq {
    /// Old constructor with the two sizes.
    #[deprecated(
        note = "an SRQ with options has a builder: use `Srq::builder(&pd).max_wr(max_wr).max_sge(max_sge).build()` \
                (ibv_create_srq), not `Srq::create_xrc`; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn new(pd: &Pd, max_wr: u32, max_sge: u32) -> Result<Srq> {
        Srq::builder(pd).max_wr(max_wr).max_sge(max_sge).build()
    }
}

#[cfg(feature = "cm")]
impl EventChannel {
    /// Old name of [`EventChannel::create`].
    #[deprecated(note = "renamed for the C verb: use `cm::EventChannel::create()` (rdma_create_event_channel); \
                see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn new() -> Result<EventChannel> {
        EventChannel::create()
    }
}

#[cfg(feature = "cm")]
impl CmId {
    /// Old name of [`CmId::create`].
    #[deprecated(note = "renamed for the C verb: use `cm::CmId::create(&channel, port_space)` (rdma_create_id); \
                see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn new(channel: &EventChannel, ps: PortSpace) -> Result<CmId> {
        CmId::create(channel, ps)
    }
}

impl AttrMask {
    /// Old name of [`AttrMask::empty`].
    #[deprecated(note = "use `AttrMask::empty()`; see docs/upgrading.md")]
    #[doc(hidden)]
    pub const EMPTY: AttrMask = AttrMask::empty();

    /// Old name of `|` ([`AttrMask::union`] in `const`).
    #[deprecated(note = "use `a | b` (or `AttrMask::union` in const); see docs/upgrading.md")]
    #[doc(hidden)]
    pub const fn or(self, other: AttrMask) -> AttrMask {
        self.union(other)
    }

    /// Old name of `-` ([`AttrMask::difference`] in `const`).
    #[deprecated(note = "use `a - b` (or `AttrMask::difference` in const); see docs/upgrading.md")]
    #[doc(hidden)]
    pub const fn minus(self, other: AttrMask) -> AttrMask {
        self.difference(other)
    }

    /// Old form of [`AttrMask::field_names`]: the C field names, one string each.
    #[deprecated(note = "use `AttrMask::field_names()` (displays `av, dest_qpn`); see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn names(self) -> Vec<String> {
        let all = self.field_names().to_string();
        all.split(", ").filter(|s| !s.is_empty()).map(str::to_string).collect()
    }
}
