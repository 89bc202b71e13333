//! `ibv_open_qp`: another handle on an XRC receive QP, by its number.
//! SoftRoCE has no XRC: the domain, which the call needs, is a typed
//! `Unsupported` there (asserted); the positive path runs on ConnectX.

use rrddmma::prim::{Cq, Error, Pd, Qp, QpCaps, QpType, XrcTargetQp, Xrcd};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn open_qp_gives_a_second_handle_on_an_xrc_receive_qp_or_is_unsupported() {
    let ctx = open_device();
    let software = ctx.query_device().unwrap().vendor_id == 0xff_ffff || ctx.name().starts_with("siw");
    let xrcd = match Xrcd::open(&ctx) {
        Err(e) => {
            assert!(software, "only software devices are expected to lack XRC: {e:?}");
            assert!(matches!(e, Error::Unsupported { op: "ibv_open_xrcd", .. }), "{e:?}");
            eprintln!("{}: XRC domain Unsupported (asserted), so ibv_open_qp has nothing to open", ctx.name());
            return;
        }
        Ok(x) => x,
    };
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let tgt = Qp::builder(&pd, QpType::XRC_RECV, &cq, &cq)
        .xrcd(&xrcd)
        .caps(QpCaps::default().max_recv_wr(0))
        .build()
        .expect("an XRC_RECV QP on a device with XRC");
    let opened = XrcTargetQp::open(&xrcd, tgt.qpn()).expect("ibv_open_qp on an XRC_RECV QP of the domain");
    assert_eq!(opened.qpn(), tgt.qpn());
    // The QP lives on while the opened handle does.
    let qpn = tgt.qpn();
    drop(tgt);
    assert_eq!(opened.qpn(), qpn);
    let again = XrcTargetQp::open(&xrcd, qpn).expect("the QP is still open through the first handle");
    drop((opened, again));
    let e = XrcTargetQp::open(&xrcd, qpn).unwrap_err();
    assert!(matches!(e, Error::Verbs { op: "ibv_open_qp", .. }), "no QP left to open: {e:?}");
    eprintln!("{}: ibv_open_qp handles on XRC_RECV QP {qpn:#x}", ctx.name());
}
