//! The constructors' old names (deprecated shims, docs/upgrading.md) make
//! what their replacements make.
#![allow(deprecated)]

use rrddmma::prim::{AhAttr, CompChannel, Cq, CqBuilder, Pd, Qp, QpBuilder, QpCaps, QpState, QpType, Srq};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn deprecated_constructors_make_what_their_replacements_make() {
    let ctx = open_device();
    let pd = Pd::new(&ctx).expect("Pd::new");
    assert_eq!(pd.context().name(), ctx.name());
    let cq = Cq::new(&ctx, 16).expect("Cq::new");
    assert!(cq.capacity() >= 16, "capacity {}", cq.capacity());
    let cq2 = CqBuilder::new(&ctx, 32).build().expect("CqBuilder::new");
    assert!(cq2.capacity() >= 32, "capacity {}", cq2.capacity());
    let caps = QpCaps::default();
    let qp = Qp::new_rc(&pd, &cq, &cq2, caps).expect("Qp::new_rc");
    assert_eq!((qp.qp_type(), qp.query_state().expect("query")), (QpType::RC, QpState::RESET));
    let ud = QpBuilder::new(&pd, QpType::UD, &cq, &cq).build().expect("QpBuilder::new");
    assert_eq!(ud.qp_type(), QpType::UD);
    let srq = Srq::new(&pd, 8, 1).expect("Srq::new");
    assert!(srq.query().expect("query").max_wr >= 8);
    CompChannel::new(&ctx).expect("CompChannel::new");
    let gid_index = ctx.roce_v2_gid_index(1).expect("a RoCE v2 GID");
    let gid = ctx.query_gid(1, u32::from(gid_index)).expect("the GID");
    let ah = rrddmma::prim::Ah::new(&pd, &AhAttr::global(1, gid_index, gid)).expect("Ah::new");
    assert_eq!(ah.pd().context().name(), ctx.name());
}
