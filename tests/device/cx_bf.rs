//! Dedicated BlueFlame on a ConnectX: an RC QP created on a thread domain's
//! parent domain gets a UAR register of its own (libmlx5's `mlx5_alloc_td`),
//! so its direct view may copy each single-WQE post into the BlueFlame
//! buffer (`DirectSq::enable_blueflame`); WRITEs posted that way, inline and
//! through a data segment, land in the peer's memory.
//!
//! Off mlx5 (SoftRoCE) the test skips through `mlx5_test_skips`. Written for
//! hardware, never run on it here.

use std::time::{Duration, Instant};

use rrddmma::mlx5dv;
use rrddmma::mlx5dv::cqe::Completion;
use rrddmma::mlx5dv::mmio::HwMmio;
use rrddmma::mlx5dv::obj;
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::prim::{Cq, Pd, Qp, QpCaps, QpType, Td, TdParentDomain, WcStatus};

use crate::common::{connect_pair, mlx5_test_skips, open_device, opts, Buf};

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dedicated_blueflame_writes_land_on_mlx5() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    let pd = Pd::alloc(&ctx).unwrap();
    // libmlx5 has thread domains on every mlx5 device.
    let td = Td::alloc(&ctx).unwrap();
    let dom = TdParentDomain::alloc(&pd, &td).unwrap();
    let lcq = dom.cq(64).unwrap();
    let caps = QpCaps::default().max_send_wr(64).max_inline_data(64);
    let lqp = dom.qp(QpType::RC, &lcq, &lcq, caps).unwrap();
    // SAFETY: this test's thread alone uses the thread domain's objects.
    let (pdom, cq, qa) = unsafe { (dom.as_parent_domain(), lcq.as_cq(), lqp.as_qp()) };
    let peer_cq = Cq::create(&ctx, 16).unwrap();
    let qb = Qp::builder(&pd, QpType::RC, &peer_cq, &peer_cq).build().unwrap();
    connect_pair(qa, &qb, &opts(&ctx), (7, 8));
    let mut src = Buf::new(pdom, 4096);
    let mut dst = Buf::new(&pd, 4096);

    // SAFETY: the QP's send CQ is polled through this view alone.
    let mut dcq = unsafe { obj::cq_ring(cq) }.unwrap();
    // SAFETY: nothing was posted on `qa`; from here it is posted to through
    // this view alone, each WQE's memory outliving its completion.
    let mut sq = unsafe { obj::sq_ring(qa, &dcq) }.unwrap();
    assert!(sq.blueflame_dedicated(), "a QP on a thread domain's parent domain has a register of its own");
    if let Err(e) = sq.enable_blueflame() {
        // A register without a BlueFlame buffer (libmlx5 reports size 0:
        // doorbell-only UARs, or MLX5_SHUT_UP_BF set) is the device's or the
        // environment's choice, not a failure of the path under test.
        if mlx5_test_skips(&format!("{}: {e}", ctx.name())) {
            return;
        }
    }
    let mut mmio = HwMmio;
    let mut out = [Completion::default()];
    // 64 WRITEs of 48 bytes, one doorbell each (one WQE, so each is a
    // BlueFlame copy): even ones inline, odd ones through a data segment.
    for i in 0..64u32 {
        let data: Vec<u8> = (0..48).map(|k| (i as u8).wrapping_mul(17) ^ k).collect();
        let at = i as usize * 64;
        let remote = dst.mr.remote().addr_at(at);
        if i % 2 == 0 {
            sq.write(CtrlFlags::CQ_UPDATE, remote).inline(&data).post(&mut mmio);
        } else {
            src.bytes()[at..at + 48].copy_from_slice(&data);
            let w = sq.write(CtrlFlags::CQ_UPDATE, remote);
            // SAFETY: `src` is registered (on the parent domain) and outlives the completion.
            unsafe { w.data(48, src.mr.lkey(), src.mr.addr() + at as u64) }.post(&mut mmio);
        }
        let t = Instant::now();
        while dcq.poll(&mut out) == 0 {
            assert!(t.elapsed() < Duration::from_secs(5), "no completion of WRITE {i} posted through BlueFlame");
        }
        assert_eq!(out[0].status(), WcStatus::SUCCESS, "WRITE {i}: {:?}", out[0]);
        assert!(sq.retire(&out[0]), "WRITE {i}: the completion frees its WQE");
        assert_eq!(&dst.bytes()[at..at + 48], &data[..], "WRITE {i} (BlueFlame) landed");
        assert!(dst.bytes()[at + 48..at + 64].iter().all(|&b| b == 0), "WRITE {i} wrote 48 bytes only");
    }
    drop(sq);
}
