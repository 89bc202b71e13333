//! Tag-matching SRQs: refused before the system call on a device whose
//! `tm_caps` is zero (SoftRoCE, siw), and the tag operations on one that has
//! them (ConnectX; run on hardware only).

use rrddmma::prim::{Cq, Error, QpCaps, Srq, TmConfig, TmOp, WcOpcode, WcStatus};

use crate::common::{poll_one, Loopback};

const CFG: TmConfig = TmConfig { max_num_tags: 16, max_ops: 4 };

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn tag_matching_is_unsupported_without_tm_caps() {
    let lb = Loopback::new(QpCaps::default());
    let caps = lb.ctx.query_device_ex().unwrap().tm_caps;
    if caps.max_num_tags != 0 {
        eprintln!("skipped: the device has tag matching ({caps:?})");
        return;
    }
    let cq = Cq::create(&lb.ctx, 16).unwrap();
    let e = Srq::builder(&lb.pd).tag_matching(CFG, &cq).build().unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { op: "ibv_create_srq_ex", feature } if feature.contains("tag matching")),
        "{e:?}"
    );
    // Tag operations on an ordinary SRQ: refused before `ibv_post_srq_ops`.
    let srq = Srq::builder(&lb.pd).build().unwrap();
    assert!(!srq.is_tm());
    // SAFETY: a remove carries no memory.
    let e = unsafe { srq.post_tm_ops(&mut [TmOp::remove(0)]) }.unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { op: "ibv_post_srq_ops", feature } if feature.contains("tag matching")),
        "{e:?}"
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn tag_add_and_remove_complete_on_a_tm_srq() {
    let lb = Loopback::new(QpCaps::default());
    let caps = lb.ctx.query_device_ex().unwrap().tm_caps;
    if caps.max_num_tags == 0 {
        eprintln!("skipped: the device has no tag matching");
        return;
    }
    let cq = Cq::create(&lb.ctx, 64).unwrap();
    let e = Srq::builder(&lb.pd)
        .tag_matching(TmConfig { max_num_tags: caps.max_num_tags + 1, max_ops: 1 }, &cq)
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::CapExceeded { what: "tm_caps.max_num_tags", .. }), "{e:?}");
    let srq = Srq::builder(&lb.pd).tag_matching(CFG, &cq).build().unwrap();
    assert!(srq.is_tm());
    let sge = [lb.mr_b.sge(0, 64)];
    let mut add = [TmOp::add(0x1234, !0, &sge, 77).signaled(1)];
    // SAFETY: the entry lies in `mr_b`, untouched until its completion.
    unsafe { srq.post_tm_ops(&mut add) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::SUCCESS, WcOpcode::TM_ADD, 1), "{wc:?}");
    let handle = add[0].handle();
    // SAFETY: a remove carries no memory.
    unsafe { srq.post_tm_ops(&mut [TmOp::remove(handle).signaled(2)]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::SUCCESS, WcOpcode::TM_DEL, 2), "{wc:?}");
}
