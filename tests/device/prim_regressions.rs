//! Regressions of issue 22's prim findings: each test names the finding it
//! covers and fails when its fix is undone.

use rrddmma::prim::{
    destroy_failures, AccessFlags, CompChannel, Cq, Gid, Mr, Mw, MwType, Pd, Qp, QpCaps, QpType, WcOpcode, WcStatus,
};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{open_device, opts, panic_message, poll_one};
use crate::resources;

/// Issue 22: `CqBuilder::build` took the channel after creating the CQ, so a
/// second CQ on one channel panicked with the CQ made and never destroyed.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_cq_builder_second_cq_on_a_channel_panics_before_creating_it() {
    let ctx = open_device();
    let dev = resources::device();
    let ch = CompChannel::create(&ctx).unwrap();
    let first = Cq::builder(&ctx, 16).channel(&ch).build().unwrap();
    let before = resources::count(&dev, "cq");
    let msg = panic_message(|| Cq::builder(&ctx, 16).channel(&ch).build());
    assert!(msg.contains("already serves a CQ"), "{msg}");
    assert_eq!(resources::count(&dev, "cq"), before, "the refused build left a CQ behind on {dev}");
    // The channel is free again once its CQ is destroyed.
    drop(first);
    assert_eq!(resources::count(&dev, "cq"), before - 1);
    let again = Cq::builder(&ctx, 16).channel(&ch).build().expect("the channel serves a new CQ once the first is gone");
    assert_eq!(resources::count(&dev, "cq"), before);
    drop(again);
}

/// Issue 22: a QP attached to a multicast group could not be destroyed
/// (`EBUSY`), yet everything it named was released.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_qp_attached_to_a_multicast_group_is_destroyed_on_drop() {
    let ctx = open_device();
    let dev = resources::device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let qp = Qp::builder(&pd, QpType::UD, &cq, &cq).build().unwrap();
    qp.bring_up_ud(1, 0, 0x1111_1111, 0).unwrap();
    // The RoCE GID of the IPv4 group 239.77.0.9, and a second group.
    let group = |last: u8| Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 77, 0, last]);
    qp.attach_mcast(group(9), 0).expect("attach to 239.77.0.9");
    qp.attach_mcast(group(10), 0).expect("attach to 239.77.0.10");
    qp.attach_mcast(group(9), 0).expect("attaching twice is accepted");
    qp.detach_mcast(group(10), 0).expect("detach from 239.77.0.10");
    let (qps, failures) = (resources::count(&dev, "qp"), destroy_failures());
    drop(qp);
    assert_eq!(destroy_failures(), failures, "ibv_destroy_qp failed on the dropped QP (still attached?)");
    assert_eq!(resources::count(&dev, "qp"), qps - 1, "the QP is gone from {dev}");
}

/// Issue 22: a memory window rebind released the old region when the bind
/// was posted, while the window could still grant access to it until the
/// device executed the bind.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn regression_mw_rebind_keeps_the_old_region_until_the_window_is_gone() {
    let ctx = open_device();
    let dev = resources::device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let (_qa, qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 7, &opts(&ctx)).unwrap();
    // Declared before the regions and the window: freed after them.
    let mut mem_a = vec![0u8; 4096].into_boxed_slice();
    let mut mem_b = vec![0u8; 4096].into_boxed_slice();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND;
    // SAFETY: `mem_a` and `mem_b` outlive the regions and the window (declared first, dropped last).
    let mr_a = unsafe { Mr::register(&pd, mem_a.as_mut_ptr(), mem_a.len(), access) }.unwrap();
    // SAFETY: as above.
    let mr_b = unsafe { Mr::register(&pd, mem_b.as_mut_ptr(), mem_b.len(), access) }.unwrap();
    let mut mw = match Mw::alloc(&pd, MwType::TYPE_1) {
        Ok(mw) => mw,
        Err(e) => {
            assert!(e.is_unsupported(), "{e:?}");
            crate::common::test_skips(&format!("memory windows are not supported by {}", ctx.name()));
            return;
        }
    };
    qb.bind_mw_at(&mut mw, &mr_a, 0, 1024, AccessFlags::REMOTE_WRITE, 1).unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (1, WcStatus::SUCCESS, WcOpcode::BIND_MW));
    assert_eq!(mw.retired_regions(), 0);
    let (mrs, failures) = (resources::count(&dev, "mr"), destroy_failures());
    // Rebind to B, then let go of A before the bind's completion.
    qb.bind_mw_at(&mut mw, &mr_b, 0, 1024, AccessFlags::REMOTE_WRITE, 2).unwrap();
    drop(mr_a);
    assert_eq!(mw.retired_regions(), 1, "the window keeps A");
    assert_eq!(resources::count(&dev, "mr"), mrs, "A stays registered while the window may grant it");
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (2, WcStatus::SUCCESS));
    // Rebinding to B again keeps one entry per region.
    qb.bind_mw_at(&mut mw, &mr_b, 1024, 1024, AccessFlags::REMOTE_WRITE, 3).unwrap();
    assert_eq!(poll_one(&cq).wr_id(), 3);
    assert_eq!(mw.retired_regions(), 1);
    // SAFETY: every bind posted on `mw` has completed (polled above).
    unsafe { mw.release_retired() };
    assert_eq!(mw.retired_regions(), 0);
    assert_eq!(resources::count(&dev, "mr"), mrs - 1, "A deregistered once released");
    drop(mw);
    drop(mr_b);
    assert_eq!(resources::count(&dev, "mr"), mrs - 2);
    assert_eq!(destroy_failures(), failures, "no deregistration failed");
    drop((mem_a, mem_b));
}
