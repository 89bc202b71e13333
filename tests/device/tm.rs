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
    if caps.max_num_tags == 0 {
        eprintln!("skipped: the device has no tag matching");
        return;
    }
    let rcq = Cq::builder(&lb.ctx, 64).extended(WcFlagsEx::BYTE_LEN | WcFlagsEx::TM_INFO).build().unwrap();
    let scq = Cq::create(&lb.ctx, 64).unwrap();
    let srq = Srq::builder(&lb.pd).max_wr(16).tag_matching(CFG, &rcq).build().unwrap();
    let sender = Qp::builder(&lb.pd, QpType::RC, &scq, &scq).build().unwrap();
    let receiver = Qp::builder(&lb.pd, QpType::RC, &rcq, &rcq).srq(&srq).build().unwrap();
    crate::common::connect_pair(&sender, &receiver, &ConnectOpts::default(), (3, 4));
    // Room for unexpected messages.
    let bounce = [lb.mr_b.sge(0, 1024)];
    // SAFETY: `mr_b` is this PD's, untouched until the completions.
    unsafe { srq.post_recv(&mut [RecvWr::new(&bounce, 50)]) }.unwrap();
    let send = |lb: &mut Loopback, msg: &[u8], wr_id: u64| {
        lb.a()[..msg.len()].copy_from_slice(msg);
        let sge = [lb.mr_a.sge(0, msg.len() as u32)];
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
    let user = [lb.mr_b.sge(4096, 1024)];
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
