//! UD with address handles and GRH; shared receive queues.

use rrddmma::bindings as ffi;
use rrddmma::prim::{AccessFlags, Ah, AhAttr, Cq, Mr, Pd, Qp, QpCaps, RecvWr, SendWr, Srq, WcOpcode, WcStatus};

use crate::common::{open_device, poll_one, poll_pair, Loopback};
use rrddmma::prim::QpType;

const GRH: usize = 40;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn ud_send_with_grh_reports_source_qp() {
    let ctx = open_device();
    let gid_index = ctx.roce_v2_gid_index(1).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let ud = QpType::UD;
    let qa = Qp::builder(&pd, ud, &cq, &cq).build().unwrap();
    let qb = Qp::builder(&pd, ud, &cq, &cq).build().unwrap();
    const QKEY: u32 = 0x1111_1111;
    qa.bring_up_ud(1, 0, QKEY, 1).unwrap();
    qb.bring_up_ud(1, 0, QKEY, 2).unwrap();

    let mut buf = vec![0u8; 4096].into_boxed_slice();
    // SAFETY: `buf` outlives `mr` (dropped at the end of the test, after it).
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    let dgid = ctx.query_gid(1, u32::from(gid_index)).unwrap();
    let ah = Ah::create(&pd, &AhAttr::global(1, gid_index, dgid)).unwrap();

    let rs = [mr.sge_at(1024, GRH + 256)];
    // SAFETY: the receive lies in `mr`, untouched until the completion.
    unsafe { qb.post_recv(&mut [RecvWr::new(&rs, 1)]) }.unwrap();
    buf[..100].iter_mut().enumerate().for_each(|(i, x)| *x = i as u8 ^ 0x77);
    let ss = [mr.sge_at(0, 100)];
    // SAFETY: as above; `ah` lives until the completion.
    unsafe { qa.post_send(&mut [SendWr::send(&ss).ud(&ah, qb.qpn(), QKEY).wr_id(2).signaled()]) }.unwrap();
    let (recv, send) = poll_pair(&cq, 1, 2);
    assert_eq!((send.status(), send.opcode()), (WcStatus::SUCCESS, WcOpcode::SEND));
    assert_eq!((recv.status(), recv.opcode()), (WcStatus::SUCCESS, WcOpcode::RECV));
    assert_eq!(recv.byte_len(), (GRH + 100) as u32, "UD byte_len includes the 40-byte GRH");
    assert_eq!(recv.src_qp(), qa.qpn(), "source QP of a UD receive");
    assert_ne!(recv.0.wc_flags & ffi::ibv_wc_flags::IBV_WC_GRH.0, 0, "GRH flag");
    let expect: Vec<u8> = (0..100).map(|i| i as u8 ^ 0x77).collect();
    assert_eq!(&buf[1024 + GRH..1024 + GRH + 100], &expect[..]);
    drop(mr);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn srq_receives_for_a_qp_attached_to_it() {
    // A fresh pair where b takes receives from an SRQ.
    let lb = Loopback::new(QpCaps::default());
    let srq = Srq::builder(&lb.pd).max_wr(16).build().unwrap();
    let cq = Cq::create(&lb.ctx, 16).unwrap();
    let rc = QpType::RC;
    let qa = Qp::builder(&lb.pd, rc, &cq, &cq).build().unwrap();
    let qb = Qp::builder(&lb.pd, rc, &cq, &cq).srq(&srq).build().unwrap();
    let opts = rrddmma::prim::ConnectOpts::default();
    crate::common::connect_pair(&qa, &qb, &opts, (5, 6));

    let r1 = [lb.mr_b.sge_at(0, 64)];
    let r2 = [lb.mr_b.sge_at(64, 64)];
    // SAFETY: receives in `mr_b`, untouched until completion.
    unsafe { srq.post_recv(&mut [RecvWr::new(&r1, 100), RecvWr::new(&r2, 101)]) }.unwrap();
    let s = [lb.mr_a.sge_at(0, 32)];
    for i in 0..2u64 {
        // SAFETY: as above.
        unsafe { qa.post_send(&mut [SendWr::send_imm(&s, i as u32).wr_id(i).signaled()]) }.unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..4 {
        let wc = poll_one(&cq);
        assert_eq!(wc.status(), WcStatus::SUCCESS, "{wc:?}");
        if wc.opcode() == WcOpcode::RECV {
            assert_eq!(wc.qp_num(), qb.qpn(), "SRQ receive reports the QP it arrived on");
            assert_eq!(wc.byte_len(), 32);
            got.push((wc.wr_id(), wc.imm()));
        }
    }
    got.sort();
    assert_eq!(got, [(100, Some(0)), (101, Some(1))], "SRQ receives consumed in order");
}
