//! Tag-matching SRQs: refused before the system call on a device whose
//! `tm_caps` is zero (SoftRoCE, siw), and the tag operations on one that has
//! them (ConnectX; run on hardware only). The direct path
//! (`mlx5dv::tm_wqe::TmRing`) has no entry point that takes a device: it is
//! made from raw parts, so there is nothing of it to refuse here.

use std::time::{Duration, Instant};

use rrddmma::prim::{
    ConnectOpts, Cq, Error, Qp, QpCaps, QpType, RecvWr, SendWr, Srq, TmConfig, TmInfo, TmOp, WcFlagsEx, WcOpcode,
    WcStatus,
};

use crate::common::{mlx5_test_skips, poll_one, refusal_test_skips, Loopback};

const CFG: TmConfig = TmConfig { max_num_tags: 16, max_ops: 4 };

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn tag_matching_is_unsupported_without_tm_caps() {
    let lb = Loopback::new(QpCaps::default());
    let caps = lb.ctx.query_device_ex().unwrap().tm_caps;
    if caps.max_num_tags != 0 && refusal_test_skips(&format!("the device has tag matching ({caps:?})")) {
        return;
    }
    let cq = Cq::builder(&lb.ctx, 16).tag_matching().build().unwrap();
    let e = Srq::builder(&lb.pd).tag_matching(CFG, &cq).build().unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { op: "ibv_create_srq_ex", feature, .. } if feature.contains("tag matching")),
        "{e:?}"
    );
    // Tag operations on an ordinary SRQ: refused before `ibv_post_srq_ops`.
    let srq = Srq::builder(&lb.pd).build().unwrap();
    assert!(!srq.is_tm());
    // SAFETY: a remove carries no memory.
    let e = unsafe { srq.post_tm_ops(&mut [TmOp::remove(0)]) }.unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { op: "ibv_post_srq_ops", feature, .. } if feature.contains("tag matching")),
        "{e:?}"
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn tag_add_and_remove_complete_on_a_tm_srq() {
    let lb = Loopback::new(QpCaps::default());
    let caps = lb.ctx.query_device_ex().unwrap().tm_caps;
    if caps.max_num_tags == 0 && mlx5_test_skips(&format!("{} has no tag matching", lb.ctx.name())) {
        return;
    }
    let cq = Cq::builder(&lb.ctx, 64).tag_matching().build().unwrap();
    let e = Srq::builder(&lb.pd)
        .tag_matching(TmConfig { max_num_tags: caps.max_num_tags + 1, max_ops: 1 }, &cq)
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::CapExceeded { what: "tm_caps.max_num_tags", .. }), "{e:?}");
    let srq = Srq::builder(&lb.pd).tag_matching(CFG, &cq).build().unwrap();
    assert!(srq.is_tm());
    let sge = [lb.mr_b.sge_at(0, 64)];
    let mut add = [TmOp::add(0x1234, !0, &sge, 77).signaled(1)];
    // SAFETY: the entry lies in `mr_b`, untouched until its completion.
    unsafe { srq.post_tm_ops(&mut add) }.unwrap();
    let (status, opcode, wr_id, _, _) = next_ex(&cq);
    assert_eq!((status, opcode, wr_id), (WcStatus::SUCCESS, WcOpcode::TM_ADD, 1));
    let handle = add[0].handle();
    // SAFETY: a remove carries no memory.
    unsafe { srq.post_tm_ops(&mut [TmOp::remove(handle).signaled(2)]) }.unwrap();
    let (status, opcode, wr_id, _, _) = next_ex(&cq);
    assert_eq!((status, opcode, wr_id), (WcStatus::SUCCESS, WcOpcode::TM_DEL, 2));
}

/// The next completion of an extended CQ: status, opcode, id, byte count
/// and tag-matching information.
fn next_ex(cq: &Cq) -> (WcStatus, WcOpcode, u64, u32, Option<TmInfo>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(p) = cq.start_poll().expect("ibv_start_poll") {
            let wc = p.wc();
            return (wc.status(), wc.opcode(), wc.wr_id(), wc.byte_len(), wc.tm_info());
        }
        assert!(Instant::now() < deadline, "no completion within 10 s");
        std::hint::spin_loop();
    }
}

/// A tagged message: the 16-byte header (`struct ibv_tmh`, opcode
/// `IBV_TMH_EAGER`) then the payload.
fn tagged(tag: u64, app_ctx: u32, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![3, 0, 0, 0];
    m.extend_from_slice(&app_ctx.to_be_bytes());
    m.extend_from_slice(&tag.to_be_bytes());
    m.extend_from_slice(payload);
    m
}

/// The MPI-style exchange of docs/mlx5dv.md: a message whose receive is not
/// posted yet lands in the SRQ's ordinary receive (unexpected, header
/// included); after a tag add with the sync count, the next message with
/// that tag lands in the tagged buffer (payload only).
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn an_unexpected_message_then_an_expected_one_on_a_tm_srq() {
    let mut lb = Loopback::new(QpCaps::default());
    let caps = lb.ctx.query_device_ex().unwrap().tm_caps;
    if caps.max_num_tags == 0 && mlx5_test_skips(&format!("{} has no tag matching", lb.ctx.name())) {
        return;
    }
    let rcq =
        Cq::builder(&lb.ctx, 64).tag_matching().extended(WcFlagsEx::BYTE_LEN | WcFlagsEx::TM_INFO).build().unwrap();
    let scq = Cq::create(&lb.ctx, 64).unwrap();
    let srq = Srq::builder(&lb.pd).max_wr(16).tag_matching(CFG, &rcq).build().unwrap();
    let sender = Qp::builder(&lb.pd, QpType::RC, &scq, &scq).build().unwrap();
    let receiver = Qp::builder(&lb.pd, QpType::RC, &rcq, &rcq).srq(&srq).build().unwrap();
    crate::common::connect_pair(&sender, &receiver, &ConnectOpts::default(), (3, 4));
    // Room for unexpected messages.
    let bounce = [lb.mr_b.sge_at(0, 1024)];
    // SAFETY: `mr_b` is this PD's, untouched until the completions.
    unsafe { srq.post_recv(&mut [RecvWr::new(&bounce, 50)]) }.unwrap();
    let send = |lb: &mut Loopback, msg: &[u8], wr_id: u64| {
        lb.a()[..msg.len()].copy_from_slice(msg);
        let sge = [lb.mr_a.sge_at(0, msg.len())];
        // SAFETY: `mr_a` is this PD's, untouched until the completion.
        unsafe { sender.post_send(&mut [SendWr::send(&sge).wr_id(wr_id).signaled()]) }.unwrap();
        let wc = poll_one(&scq);
        assert_eq!((wc.status(), wc.wr_id()), (WcStatus::SUCCESS, wr_id), "{wc:?}");
    };
    // Tag 7 before its receive: unexpected, the whole message in the bounce buffer.
    let early = tagged(7 << 32 | 1, 0xaa, b"early bird");
    send(&mut lb, &early, 1);
    let (status, opcode, wr_id, len, info) = next_ex(&rcq);
    assert_eq!((status, opcode, wr_id, len as usize), (WcStatus::SUCCESS, WcOpcode::TM_RECV, 50, early.len()));
    let info = info.expect("an unexpected message carries tm_info");
    assert_eq!((info.tag, info.app_ctx, info.matched), (7 << 32 | 1, 0xaa, false), "{info:?}");
    assert_eq!(&lb.b()[..early.len()], &early[..]);
    // The receive for tag 9 (any source: low 32 bits masked), synced with
    // the one unexpected message handled.
    let user = [lb.mr_b.sge_at(4096, 1024)];
    let mut add = [TmOp::add(9 << 32, 0xffff_ffff_0000_0000, &user, 60).signaled(2).with_sync(1)];
    // SAFETY: the entry lies in `mr_b`, untouched until its completion.
    unsafe { srq.post_tm_ops(&mut add) }.unwrap();
    let (status, opcode, wr_id, _, _) = next_ex(&rcq);
    assert_eq!((status, opcode, wr_id), (WcStatus::SUCCESS, WcOpcode::TM_ADD, 2));
    // Tag 9 from source 5: expected, the payload alone in the tagged buffer.
    send(&mut lb, &tagged(9 << 32 | 5, 0xbb, b"on time"), 3);
    let (status, opcode, wr_id, _, info) = next_ex(&rcq);
    assert_eq!((status, opcode, wr_id), (WcStatus::SUCCESS, WcOpcode::TM_RECV, 60));
    let info = info.expect("a match carries tm_info");
    assert_eq!((info.tag, info.app_ctx, info.matched, info.data_valid), (9 << 32 | 5, 0xbb, true, true), "{info:?}");
    assert_eq!(&lb.b()[4096..4096 + 7], b"on time");
}

/// The message of a panic caught by `catch_unwind`.
fn panic_message(err: &(dyn std::any::Any + Send)) -> String {
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// B-1′: libmlx5's classic poller (`mlx5_poll_cq`) reports a tag match as
/// an ordinary SRQ receive, frees an SRQ WQE still posted and leaves a
/// tag-list operation's completion unwritten. A CQ built for tag matching
/// refuses `Cq::poll` (and, through it, `poll_one` and `wait_one`), its
/// clones too, decided at creation; its extended poller works.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn b1_prime_a_tag_matching_cq_refuses_the_classic_poll() {
    let lb = Loopback::new(QpCaps::default());
    let channel = rrddmma::prim::CompChannel::create(&lb.ctx).unwrap();
    let cq = Cq::builder(&lb.ctx, 16).channel(&channel).tag_matching().build().unwrap();
    assert!(cq.is_tag_matching());
    assert_eq!(cq.wc_flags(), WcFlagsEx::empty(), "extended, with no fields asked for");
    let clone = cq.clone();
    assert!(clone.is_tag_matching());
    assert!(!Cq::create(&lb.ctx, 16).unwrap().is_tag_matching());
    type Call<'a> = (&'static str, Box<dyn Fn() + 'a>);
    let calls: [Call<'_>; 4] = [
        ("poll", Box::new(|| drop(cq.poll(&mut [rrddmma::prim::Wc::default(); 4])))),
        ("clone's poll", Box::new(|| drop(clone.poll(&mut [rrddmma::prim::Wc::default(); 4])))),
        ("poll_one", Box::new(|| drop(cq.poll_one()))),
        ("wait_one", Box::new(|| drop(clone.wait_one(Duration::from_millis(10))))),
    ];
    for (what, call) in calls {
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).expect_err(what);
        let msg = panic_message(&*err);
        assert!(msg.contains("Cq::poll on a CQ built for tag matching (CqBuilder::tag_matching)"), "{what}: {msg}");
        assert!(msg.contains("Cq::start_poll") && msg.contains("WcFlagsEx::TM_INFO"), "{what}: {msg}");
        assert!(msg.contains("TmRing::complete"), "{what}: {msg}");
    }
    // The extended poller is the way: an empty CQ, an empty pass.
    assert!(cq.start_poll().unwrap().is_none());
    assert!(clone.start_poll().unwrap().is_none());
}

/// B-1′: a tag-matching SRQ takes only a CQ built for tag matching
/// (checked before anything is created); with one, rxe still says
/// `Unsupported`.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn b1_prime_a_tag_matching_srq_needs_a_tag_matching_cq() {
    let lb = Loopback::new(QpCaps::default());
    for plain in
        [Cq::create(&lb.ctx, 16).unwrap(), Cq::builder(&lb.ctx, 16).extended(WcFlagsEx::empty()).build().unwrap()]
    {
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Srq::builder(&lb.pd).tag_matching(CFG, &plain);
        }))
        .expect_err("an ordinary CQ taken for a tag-matching SRQ");
        let msg = panic_message(&*err);
        assert!(msg.contains("SrqBuilder::tag_matching: the CQ"), "{msg}");
        assert!(msg.contains("is not built for tag matching"), "{msg}");
        assert!(msg.contains("Cq::builder(ctx, n).tag_matching()"), "{msg}");
    }
    let cq = Cq::builder(&lb.ctx, 16).tag_matching().build().unwrap();
    let built = Srq::builder(&lb.pd).tag_matching(CFG, &cq).build();
    if lb.ctx.query_device_ex().unwrap().tm_caps.max_num_tags == 0 {
        let e = built.unwrap_err();
        assert!(
            matches!(e, Error::Unsupported { op: "ibv_create_srq_ex", feature, .. } if feature.contains("tag matching")),
            "{e:?}"
        );
    } else {
        let srq = built.unwrap();
        assert!(srq.is_tm());
        // A QP taking receives from it needs a tag-matching receive CQ too.
        let plain = Cq::create(&lb.ctx, 16).unwrap();
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(Qp::builder(&lb.pd, QpType::RC, &plain, &plain).srq(&srq).build());
        }))
        .expect_err("a QP on a tag-matching SRQ receiving to an ordinary CQ");
        let msg = panic_message(&*err);
        assert!(msg.contains("QpBuilder::build: the receive CQ"), "{msg}");
        Qp::builder(&lb.pd, QpType::RC, &plain, &cq).srq(&srq).build().unwrap();
    }
}
