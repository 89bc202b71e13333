//! Indirect memory keys: refused off mlx5 with the capability named, before
//! any libmlx5 call; created, read and destroyed on ConnectX.

use std::time::{Duration, Instant};

use rrddmma::mlx5dv::cqe::Completion;
use rrddmma::mlx5dv::mmio::HwMmio;
use rrddmma::mlx5dv::seg::CtrlFlags;
use rrddmma::mlx5dv::umr::{MkeyConf, MkeyLayout, MrRange};
use rrddmma::mlx5dv::{self, mkey::Mkey, mkey::INDIRECT_FEATURE, obj};
use rrddmma::prim::{AccessFlags, Cq, Error, Mlx5SendOps, Mr, Pd, Qp, QpCaps, QpType, SendOps, WcStatus};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{mlx5_test_skips, open_device, opts, refusal_test_skips};

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn indirect_mkey_unsupported_off_mlx5_created_on_mlx5() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    if !mlx5dv::is_supported(&ctx) {
        match Mkey::new_indirect(&pd, 4) {
            Err(ref e @ Error::Unsupported { op, feature, ref lack, .. }) => {
                assert_eq!(op, "mlx5dv_create_mkey");
                assert_eq!(feature, INDIRECT_FEATURE);
                // The device, the capability with its value, the way out (a ConnectX).
                assert_eq!(lack.device, ctx.name(), "{e}");
                assert_eq!(lack.value, "mlx5dv_is_supported = false", "{e}");
                assert!(lack.instead().contains("ConnectX"), "{e}");
            }
            other => panic!("Mkey::new_indirect off mlx5: expected Unsupported, got {other:?}"),
        }
        return;
    }
    // ConnectX: the key exists, its keys are distinct from a region's, and
    // it keeps a held region registered past the caller's handle.
    let mut key = Mkey::new_indirect(&pd, 4).unwrap();
    assert_eq!(key.max_entries(), 4, "libmlx5 rounds max_entries up to a multiple of 4");
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the region and the key, which drop first.
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    assert_ne!(key.lkey(), mr.lkey());
    key.hold(&mr);
    drop(mr);
    assert_eq!(key.held_regions(), 1);
    drop(key);
}

/// The configure entry points off mlx5: the QP knob that installs libmlx5's
/// `mlx5dv_wr_*` mkey entries is refused before any system call, naming the
/// option (the typed builders need an `Mkey` and a direct view, both refused
/// already).
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn mkey_send_ops_unsupported_off_mlx5() {
    let ctx = open_device();
    if mlx5dv::is_supported(&ctx) && refusal_test_skips(&format!("{} is an mlx5 device", ctx.name())) {
        return;
    }
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 8).unwrap();
    for ops in [Mlx5SendOps::MR_LIST, Mlx5SendOps::MR_INTERLEAVED, Mlx5SendOps::MKEY_CONFIGURE] {
        let r = Qp::builder(&pd, QpType::RC, &cq, &cq)
            .send_ops(SendOps::RDMA_WRITE | SendOps::LOCAL_INV)
            .mlx5_send_ops(ops)
            .build();
        match r {
            Err(e @ Error::Unsupported { op: "mlx5dv_create_qp", .. }) => {
                assert!(e.to_string().contains("QpBuilder::mlx5_send_ops"), "{e}")
            }
            other => panic!("QpBuilder::mlx5_send_ops({ops:?}) off mlx5: expected Unsupported, got {other:?}"),
        }
    }
}

/// ConnectX: one remote range over three regions. An indirect key is laid
/// over three separate buffers through the direct send queue; a WRITE
/// through the key's rkey at 0..48 lands 16 bytes in each, in order. (Runs
/// only with an mlx5 device: `cargo xtask test --device mlx5_0`.)
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn mkey_one_remote_range_over_three_regions_on_mlx5() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let caps = QpCaps::default().max_inline_data(128);
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, caps, 1, &opts(&ctx)).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mut parts = [vec![0u8; 64], vec![0u8; 64], vec![0u8; 64]];
    let mut src = vec![0u8; 48];
    for (i, b) in src.iter_mut().enumerate() {
        *b = i as u8 + 1;
    }
    // SAFETY: the buffers outlive their regions, the key and every request.
    let mrs: Vec<Mr> =
        parts.iter_mut().map(|p| unsafe { Mr::register(&pd, p.as_mut_ptr(), p.len(), access) }.unwrap()).collect();
    // SAFETY: as above.
    let mr_src = unsafe { Mr::register(&pd, src.as_mut_ptr(), src.len(), access) }.unwrap();
    let mut key = Mkey::new_indirect(&pd, 4).unwrap();
    // SAFETY: the QP's send queue and the CQ are used only through these views.
    let mut dcq = unsafe { obj::cq_ring(&cq) }.unwrap();
    // SAFETY: as above; every WQE names registered memory that outlives it.
    let mut sq = unsafe { obj::sq_ring(&qa, &dcq) }.unwrap();
    let ranges: Vec<MrRange<'_>> = mrs.iter().map(|mr| MrRange { mr, offset: 8, len: 16 }).collect();
    let conf = MkeyConf { access: Some(access), layout: Some(MkeyLayout::List(&ranges)) };
    sq.mkey_configure(CtrlFlags::CQ_UPDATE, &mut key, conf).unwrap();
    let mut mmio = HwMmio;
    sq.ring(&mut mmio);
    let mut out = [Completion::default()];
    let mut wait = |sq: &mut obj::DirectSq<'_>| {
        let t = Instant::now();
        while dcq.poll(&mut out) == 0 {
            assert!(t.elapsed() < Duration::from_secs(5), "no completion");
        }
        assert_eq!(out[0].status(), WcStatus::SUCCESS, "{:?}", out[0]);
        assert!(sq.retire(&out[0]));
    };
    wait(&mut sq);
    assert_eq!(key.held_regions(), 3);
    // A range beyond its region is refused, nothing posted.
    let past = [MrRange { mr: &mrs[0], offset: 60, len: 16 }];
    let conf = MkeyConf { access: None, layout: Some(MkeyLayout::List(&past)) };
    assert!(sq.mkey_configure(CtrlFlags::empty(), &mut key, conf).is_err());
    let w = sq.write(CtrlFlags::CQ_UPDATE, key.addr_at(0));
    // SAFETY: `mr_src` covers these 48 bytes and outlives the request.
    unsafe { w.data(48, mr_src.lkey(), mr_src.addr()) }.post(&mut mmio);
    wait(&mut sq);
    drop(sq);
    drop(mrs);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(&p[8..24], &src[i * 16..i * 16 + 16], "region {i}");
        assert!(p[..8].iter().chain(&p[24..]).all(|&b| b == 0), "region {i}: only its range is written");
    }
}
