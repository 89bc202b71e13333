//! Error paths: typed errors that say what to fix, never a panic or a hang.

use std::time::{Duration, Instant};

use rrddmma::prim::{
    AccessFlags, AttrMask, ConnectOpts, Context, Cq, Error, Mr, Pd, Qp, QpAttr, QpCaps, Refusal, SendWr, WcStatus,
};

use crate::common::{open_device, Loopback};
use rrddmma::prim::{MwType, QpState, QpType};

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn unknown_device_name_lists_the_available_ones() {
    let ctx = open_device();
    match Context::open("no_such_device_0") {
        Err(Error::DeviceNotFound { name, available }) => {
            assert_eq!(name, "no_such_device_0");
            assert!(available.iter().any(|a| a == ctx.name()), "{available:?}");
        }
        other => panic!("expected DeviceNotFound, got {other:?}"),
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn qp_caps_over_device_limits_name_the_cap() {
    let ctx = open_device();
    let limit = u32::try_from(ctx.query_device().unwrap().max_qp_wr).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 4).unwrap();
    let caps = QpCaps::default().max_send_wr(limit + 1);
    let err = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build().unwrap_err();
    match &err {
        Error::CapExceeded { what, asked, limit: l } => {
            assert_eq!((*what, *asked, *l), ("max_send_wr", u64::from(limit) + 1, u64::from(limit)));
        }
        other => panic!("expected CapExceeded, got {other:?}"),
    }
    assert!(err.to_string().contains("max_send_wr"), "{err}");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn modify_with_a_missing_attribute_names_it() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 4).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    // RESET -> INIT without access flags, with a Q_Key that RC does not take.
    let attr = QpAttr::new(QpState::INIT).pkey_index(0).port(1).qkey(5);
    let err = qp.modify(&attr).unwrap_err();
    match &err {
        Error::QpTransition { refusal: Refusal::Attributes { missing, forbidden }, .. } => {
            assert_eq!((*missing, *forbidden), (AttrMask::ACCESS_FLAGS, AttrMask::QKEY));
        }
        other => panic!("expected QpTransition, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("RC QP RESET -> INIT") && msg.contains("[access_flags]") && msg.contains("[qkey]"), "{msg}");
    // Nothing reached the device: the QP is still in RESET.
    assert_eq!(qp.query_state().unwrap(), QpState::RESET);
    // Skipping a state is refused too.
    let err = qp.modify(&QpAttr::new(QpState::RTS)).unwrap_err();
    assert!(matches!(err, Error::QpTransition { refusal: Refusal::NoTransition, .. }), "{err:?}");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn post_on_a_reset_qp_is_an_error() {
    let mut lb = Loopback::new(QpCaps::default());
    let cq = Cq::create(&lb.ctx, 4).unwrap();
    let qp = Qp::builder(&lb.pd, QpType::RC, &cq, &cq).build().unwrap();
    let s = [lb.mr_a.sge_at(0, 8)];
    let remote = lb.mr_b.remote().addr_at(0);
    // SAFETY: entries in registered regions.
    let err = unsafe { qp.post_send(&mut [SendWr::write(&s, remote).signaled()]) }.unwrap_err();
    match err {
        Error::Post { op, errno, index, unsupported } => {
            assert_eq!(op, "ibv_post_send");
            assert!(errno != 0);
            assert_eq!(unsupported, None, "a WRITE on a RESET QP is no missing operation");
            // rxe accepts the request into its queue and fails at the
            // doorbell system call, so it names no request; hardware
            // providers name the first.
            assert!(matches!(index, None | Some(0)), "refused request index {index:?}");
        }
        other => panic!("expected Post, got {other:?}"),
    }
    lb.a()[0] = 1; // the buffers are still ours
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn registering_an_invalid_range_is_an_error() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    // An address this process has not mapped.
    // SAFETY: registration of unmapped memory fails in the kernel; nothing is accessed.
    let err = unsafe { Mr::register(&pd, 0x10 as *mut u8, 1 << 20, AccessFlags::LOCAL_WRITE) }.unwrap_err();
    assert!(matches!(err, Error::Verbs { op: "ibv_reg_mr", .. }), "{err:?}");
    assert!(err.errno().is_some_and(|e| e != 0));
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn destroyed_peer_gives_retry_exceeded_not_a_hang() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 8).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    // timeout 12: 4.096 us * 2^12 = 16.8 ms per try; retry_cnt 2: three tries.
    let opts = ConnectOpts::default().timeout(12).retry_cnt(2).access(access);
    let (qa, qb) = rrddmma::wrap::connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 9, &opts).unwrap();
    let mut buf = vec![0u8; 64].into_boxed_slice();
    // SAFETY: `buf` outlives `mr`.
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), 64, access) }.unwrap();
    let remote = mr.remote().addr_at(0);
    drop(qb);
    let s = [mr.sge_at(0, 8)];
    let start = Instant::now();
    // SAFETY: entries in `mr`, alive until the completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, remote).wr_id(77).signaled()]) }.unwrap();
    let wc = crate::common::poll_one(&cq);
    let took = start.elapsed();
    assert_eq!(wc.wr_id(), 77);
    assert_eq!(wc.status(), WcStatus::RETRY_EXC_ERR, "{wc:?}");
    assert!(took < Duration::from_secs(5), "error completion took {took:?}");
    assert_eq!(qa.query_state().unwrap(), QpState::ERR);
    drop(mr);
}

/// A CQ of a second `Context` (same device) names an unrelated kernel handle
/// in the first: the build refuses it before any system call.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn qp_build_refuses_a_cq_of_another_context() {
    let ctx = open_device();
    let other = Context::open(ctx.name()).expect("second context of the same device");
    let pd = Pd::alloc(&ctx).unwrap();
    let mine = Cq::create(&ctx, 8).unwrap();
    let theirs = Cq::create(&other, 8).unwrap();
    let build = |send: &Cq, recv: &Cq| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Qp::builder(&pd, QpType::RC, send, recv).build()))
    };
    for (send, recv, what) in [(&theirs, &mine, "send CQ"), (&mine, &theirs, "receive CQ")] {
        let msg = build(send, recv).expect_err("a foreign CQ panics");
        let msg = msg.downcast_ref::<String>().expect("message");
        assert!(msg.contains(what) && msg.contains("another device context"), "{msg}");
    }
    let srq_other = rrddmma::prim::Srq::builder(&Pd::alloc(&other).unwrap()).max_wr(8).build().unwrap();
    let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Qp::builder(&pd, QpType::RC, &mine, &mine).srq(&srq_other).build()
    }))
    .expect_err("a foreign SRQ panics");
    assert!(msg.downcast_ref::<String>().expect("message").contains("SRQ"));
    // The same objects of one context build a QP.
    assert!(build(&mine, &mine).expect("no panic").is_ok());
}

/// `bind_mw` refuses a QP of another context than the window.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn bind_mw_refuses_a_qp_of_another_context() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let mut mem = vec![0u8; 4096].into_boxed_slice();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND;
    // SAFETY: `mem` outlives the region (declared first, dropped last).
    let mr = unsafe { Mr::register(&pd, mem.as_mut_ptr(), mem.len(), access) }.unwrap();
    let mut mw = rrddmma::prim::Mw::alloc(&pd, MwType::TYPE_1).expect("type 1 window");
    let lb = Loopback::new(QpCaps::default());
    // `lb` opened the device again: its QP is of another context.
    let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        lb.qa.bind_mw_at(&mut mw, &mr, 0, 64, AccessFlags::REMOTE_WRITE, 1)
    }))
    .expect_err("a QP of another context panics");
    let msg = msg.downcast_ref::<String>().expect("message");
    assert!(msg.contains("different device contexts"), "{msg}");
    drop((mw, mr));
}

/// `MLX5_SINGLE_THREADED=1` turns off the provider locks that the crate's
/// `Send + Sync` objects rely on: opening refuses, naming the variable.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn single_threaded_provider_mode_is_refused() {
    let ctx = open_device();
    std::env::set_var("MLX5_SINGLE_THREADED", "1");
    let r = Context::open(ctx.name());
    std::env::remove_var("MLX5_SINGLE_THREADED");
    match r {
        Err(e @ Error::Unsupported { .. }) => assert!(e.to_string().contains("MLX5_SINGLE_THREADED"), "{e}"),
        other => panic!("expected Unsupported naming MLX5_SINGLE_THREADED, got {other:?}"),
    }
    Context::open(ctx.name()).expect("opens again once the variable is gone");
}

/// Connecting from a GID index that is not the port's RoCE v2 GID fails at
/// INIT -> RTR; the error names the QP, the transition, the peer's address
/// and the local GID index, and points at the RoCE v2 GID. The default
/// (automatic GID) connects.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn a_wrong_gid_index_names_the_transition_the_peer_and_the_roce_v2_gid() {
    use rrddmma::prim::Qp;
    let ctx = open_device();
    assert!(ctx.query_port(1).unwrap().is_ethernet(), "this test is for RoCE ports");
    let best = ctx.roce_v2_gid_index(1).unwrap();
    let table = ctx.gid_table(1).unwrap();
    for e in &table {
        eprintln!("gid {} {} {}", e.index, e.gid, e.gid_type);
    }
    let wrong = table
        .iter()
        .filter(|e| e.index != u32::from(best) && e.index <= 255)
        .find(|e| {
            e.gid.0[..12] != table[usize::from(best)].gid.0[..12] || e.gid_type != rrddmma::prim::GidType::ROCE_V2
        })
        .map(|e| e.index as u8)
        .expect("a GID of another kind than the RoCE v2 IPv4 one");
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 8).unwrap();
    let qa = Qp::builder(&pd, rrddmma::prim::QpType::RC, &cq, &cq).build().unwrap();
    let qb = Qp::builder(&pd, rrddmma::prim::QpType::RC, &cq, &cq).build().unwrap();
    let eb = qb.endpoint(1, best, 2).unwrap();
    let o = crate::common::opts(&ctx).gid_index(Some(wrong));
    let err = qa.connect(&eb, 1, &o).expect_err("a link-local or RoCE v1 source GID cannot reach an IPv4 GID");
    let msg = err.to_string();
    eprintln!("{msg}");
    match &err {
        Error::Connect { qpn, to, remote, gid_index, hint, .. } => {
            assert_eq!((*qpn, *to, *remote, *gid_index), (qa.qpn(), QpState::RTR, eb, wrong));
            let hint = hint.as_deref().expect("a hint");
            assert!(hint.contains(&format!("GID index {wrong}")), "{hint}");
            assert!(hint.contains(&format!("RoCE v2 GID is index {best}")), "{hint}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    assert!(msg.contains(&format!("connecting QP {:#x}: INIT -> RTR refused", qa.qpn())), "{msg}");
    assert!(msg.contains(&format!("peer QPN {:#x}", eb.qpn)) && msg.contains(&eb.gid.to_string()), "{msg}");
    assert!(msg.contains(&format!("local GID index {wrong}")), "{msg}");
    // The default chooses the RoCE v2 GID and connects.
    let qc = Qp::builder(&pd, rrddmma::prim::QpType::RC, &cq, &cq).build().unwrap();
    qc.connect(&eb, 3, &crate::common::opts(&ctx)).expect("the automatic GID connects");
}

/// A READ of a region registered without REMOTE_READ: the completion's
/// `ok()` names the status and the usual fix.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn a_read_without_remote_read_access_names_the_status_and_the_fix() {
    let lb = Loopback::new(QpCaps::default());
    let mut target = vec![0u8; 64].into_boxed_slice();
    // SAFETY: `target` outlives the region (dropped at the end, after it).
    let no_read = unsafe { Mr::register(&lb.pd, target.as_mut_ptr(), 64, AccessFlags::LOCAL_WRITE) }.unwrap();
    let dst = [lb.mr_a.sge_at(0, 8)];
    let remote = no_read.remote();
    // SAFETY: `dst` lies in `lb`'s registered buffer, alive until the completion.
    unsafe { lb.qa.post_send(&mut [SendWr::read(&dst, remote.addr_at(0)).wr_id(77).signaled()]) }.unwrap();
    let wc = lb.cq.spin_one(Duration::from_secs(10)).unwrap().expect("a completion within 10 s");
    let dbg = format!("{wc:?}");
    assert!(dbg.contains("REM_ACCESS_ERR") || dbg.contains("REM_INV_REQ_ERR"), "{dbg}");
    let e = wc.ok().expect_err("the READ fails");
    assert_eq!((e.wr_id, e.qp_num), (77, lb.qa.qpn()));
    let msg = e.to_string();
    eprintln!("{msg}");
    if e.status == WcStatus::REM_ACCESS_ERR {
        assert!(msg.contains("REM_ACCESS_ERR") && msg.contains("REMOTE_READ"), "{msg}");
    }
    drop(no_read);
}
