//! Memory windows; device features SoftRoCE lacks report a typed Unsupported.

use rrddmma::bindings as ffi;
use rrddmma::prim::{AccessFlags, Cq, Dm, Mr, Mw, Pd, QpCaps, SendWr, WcOpcode, WcStatus, Xrcd};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{open_device, opts, poll_one, Buf};
use rrddmma::prim::MwType;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn odp_dm_and_xrc_are_unsupported_where_absent() {
    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let pd = Pd::alloc(&ctx).unwrap();

    let mut buf = vec![0u8; 4096].into_boxed_slice();
    let odp = AccessFlags::LOCAL_WRITE | AccessFlags::ON_DEMAND;
    // SAFETY: `buf` outlives the region (dropped at the end of the test).
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), odp) };
    if attr.odp_caps.general_caps & u64::from(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT.0) == 0 {
        let e = mr.unwrap_err();
        assert!(
            matches!(e, rrddmma::prim::Error::Unsupported { op: "ibv_reg_mr", feature: "on-demand paging", .. }),
            "{e:?}"
        );
    } else {
        drop(mr.unwrap());
    }

    match Dm::alloc(&ctx, 4096) {
        Ok(dm) => {
            assert!(attr.max_dm_size > 0);
            dm.write(0, b"hello").unwrap();
            let mut back = [0u8; 5];
            dm.read(0, &mut back).unwrap();
            assert_eq!(&back, b"hello");
        }
        Err(e) => assert!(e.is_unsupported() && attr.max_dm_size == 0, "{e:?}"),
    }

    match Xrcd::open(&ctx) {
        Ok(_) => {}
        Err(e) => assert!(e.is_unsupported(), "XRC absent must be Unsupported: {e:?}"),
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn memory_window_grants_part_of_a_region() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let (qa, qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 7, &opts(&ctx)).unwrap();
    let mut src = Buf::new(&pd, 256);
    let mut mem = vec![0u8; 8192].into_boxed_slice();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND;
    // SAFETY: `mem` outlives the region (declared first, dropped last).
    let mr = unsafe { Mr::register(&pd, mem.as_mut_ptr(), mem.len(), access) }.unwrap();
    let mut mw = match Mw::alloc(&pd, MwType::TYPE_1) {
        Ok(mw) => mw,
        Err(e) => {
            assert!(e.is_unsupported(), "{e:?}");
            crate::common::test_skips(&format!("memory windows are not supported by {}", ctx.name()));
            return;
        }
    };
    // The owner (b) grants remote write to 1 KiB at offset 4096.
    let token = qb.bind_mw_at(&mut mw, &mr, 4096, 1024, AccessFlags::REMOTE_WRITE, 50).unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (50, WcStatus::SUCCESS, WcOpcode::BIND_MW));
    assert_eq!(token.rkey, mw.rkey());
    assert_ne!(token.rkey, mr.rkey(), "the window has its own key");

    src.bytes().fill(0x3c);
    let s = [src.mr.sge_at(0, 256)];
    // SAFETY: entries in registered memory, alive until completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, token.addr_at(512)).wr_id(51).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (51, WcStatus::SUCCESS));
    assert!(mem[4096 + 512..4096 + 768].iter().all(|&b| b == 0x3c), "write through the window landed");
    assert!(mem[..4096 + 512].iter().all(|&b| b == 0), "nothing outside the target range changed");

    // Outside the window: refused by the responder. SoftRoCE (rxe) checks
    // only the underlying region's range, not the window's, so there the
    // write lands: recorded, not asserted.
    let outside = rrddmma::prim::RemoteAddr { addr: token.addr + 2048, rkey: token.rkey };
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::write(&s, outside).wr_id(52).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!(wc.wr_id(), 52);
    let rxe = ctx.query_device().unwrap().vendor_id == 0xff_ffff;
    if rxe && wc.status() == WcStatus::SUCCESS {
        eprintln!("note: {} does not enforce memory-window bounds (wrote outside: {})", ctx.name(), mem[6144] == 0x3c);
    } else {
        assert_eq!(wc.status(), WcStatus::REM_ACCESS_ERR, "{wc:?}");
    }
    drop((mw, mr));
}

/// D1: `Pd::advise_mr` refuses a region registered without ODP before any
/// call (SoftRoCE under Linux 7.3.4 crashes the kernel on one), whichever PD
/// it is of; a region's access is the one it was registered with.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn d1_advise_mr_refuses_a_region_without_odp() {
    use rrddmma::prim::Advice;
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let other_pd = Pd::alloc(&ctx).unwrap();
    let plain = Buf::new(&pd, 4096);
    let other = Buf::new(&other_pd, 4096);
    assert_eq!(
        plain.mr.access(),
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
    );
    let refused = |f: &dyn Fn() -> rrddmma::prim::Result<()>| {
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("refused before the call");
        p.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let m = refused(&|| pd.advise_mr(Advice::PrefetchWrite, true, &plain.mr, &[plain.mr.sge_at(0, 4096)]));
    assert!(m.starts_with("Pd::advise_mr: the region at ") && m.contains("without AccessFlags::ON_DEMAND"), "{m}");
    let m = refused(&|| pd.advise_mr(Advice::Prefetch, false, &other.mr, &[other.mr.sge_at(0, 64)]));
    assert!(m.contains("without AccessFlags::ON_DEMAND"), "{m}");
    println!("d1: a region without ODP refused before the call: {m}");
}
