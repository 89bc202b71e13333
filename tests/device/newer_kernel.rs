//! Rows only a newer SoftRoCE has (the kernel matrix: `cargo xtask test` runs
//! them under Debian stable's kernel and under Debian's newest).
//!
//! `RRDDMMA_EXPECT_ODP=1` (set by the harness under the newest kernel, whose
//! rxe has on-demand paging since 6.14) makes the positive path mandatory;
//! `=0` (Debian stable's 6.1) makes the typed `Unsupported` mandatory; unset,
//! the device's reported capabilities decide.
//!
//! ODP prefetch (`ibv_advise_mr`) also needs the provider's entry point,
//! which SoftRoCE's provider has in rdma-core v59 and lacks in 44: the
//! release comes from `RRDDMMA_EXPECT_USERSPACE` (checked against the
//! libibverbs loaded, `userspace.rs`).

use rrddmma::bindings as ffi;
use rrddmma::prim::{AccessFlags, Cq, Error, Mr, Pd, QpCaps, SendWr, WcOpcode, WcStatus};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{connect_pair, kernel, kernel_version, open_device, opts, poll_one, Buf};

/// Big enough that the allocator maps fresh pages and leaves them untouched.
const ODP_LEN: usize = 1 << 20;
const PAGE: usize = 4096;
/// One packet at the default path MTU (1024).
const PACKET: usize = 1024;

/// What the harness says this kernel's rxe must do, if it says.
fn expect_odp() -> Option<bool> {
    std::env::var("RRDDMMA_EXPECT_ODP").ok().map(|v| v == "1")
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn odp_region_takes_write_read_and_atomic_on_pages_never_touched() {
    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let general = attr.odp_caps.general_caps & u64::from(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT.0) != 0;
    let rc = attr.odp_caps.per_transport_caps.rc_odp_caps;
    let wanted = ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_WRITE.0
        | ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_READ.0
        | ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_ATOMIC.0;
    let supported = general && rc & wanted == wanted;
    if let Some(expected) = expect_odp() {
        assert_eq!(supported, expected, "RC ODP (WRITE, READ, ATOMIC) on {} under kernel {}", ctx.name(), kernel());
    }

    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
        | AccessFlags::ON_DEMAND;
    // Zeroed by the allocator with fresh anonymous pages: none is faulted in
    // before the NIC touches it. The region starts at the first page start
    // inside (see the WRITE below for why).
    let mut block = vec![0u8; ODP_LEN + PAGE].into_boxed_slice();
    let skip = block.as_ptr().align_offset(PAGE);
    let mem = &mut block[skip..skip + ODP_LEN];
    // SAFETY: `block` outlives the region: the region is dropped first, below.
    let odp = unsafe { Mr::register(&pd, mem.as_mut_ptr(), ODP_LEN, access) };
    if !general {
        let e = odp.unwrap_err();
        assert!(matches!(e, Error::Unsupported { op: "ibv_reg_mr", feature: "on-demand paging", .. }), "{e:?}");
        eprintln!("odp: typed Unsupported on {} under kernel {}", ctx.name(), kernel());
        return;
    }
    let odp = odp.expect("ibv_reg_mr with ON_DEMAND on a device that reports ODP");
    assert!(supported, "ODP without RC WRITE/READ/ATOMIC: rc_odp_caps {rc:#x}");
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0x0d9, &opts(&ctx)).unwrap();
    let mut src = Buf::new(&pd, 4096);

    // WRITE into a page the process never touched: one packet (the path MTU
    // is 1024) at the page's start. rxe under 7.3.4 drops the offset within
    // the page (docs/testing.md, "Kernel matrix and soft-iWARP").
    let at = 3 * (ODP_LEN / 4);
    for (i, b) in src.bytes().iter_mut().enumerate() {
        *b = (i % 251) as u8 ^ 0x5a;
    }
    let expected = src.bytes()[..PACKET].to_vec();
    let s = [src.mr.sge_at(0, PACKET)];
    // SAFETY: the entry lies in `src`, untouched until the completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, odp.remote().addr_at(at)).wr_id(1).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (1, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE));

    // READ back from it, and READ a page nobody wrote (zeros).
    src.bytes().fill(0xee);
    let s = [src.mr.sge_at(0, PACKET)];
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::read(&s, odp.remote().addr_at(at)).wr_id(2).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (2, WcStatus::SUCCESS, WcOpcode::RDMA_READ));
    assert_eq!(&src.bytes()[..PACKET], &expected[..], "READ through the ODP region");
    src.bytes().fill(0xee);
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::read(&s, odp.remote().addr_at(ODP_LEN / 2)).wr_id(3).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (3, WcStatus::SUCCESS));
    assert!(src.bytes()[..PACKET].iter().all(|&b| b == 0), "an untouched ODP page reads as zeros");

    // Fetch-and-add on another untouched page.
    let old = [src.mr.sge_at(0, 8)];
    let target = odp.remote().addr_at(ODP_LEN / 4);
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::fetch_add(&old, target, 41).wr_id(4).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (4, WcStatus::SUCCESS, WcOpcode::FETCH_ADD));
    assert_eq!(u64::from_ne_bytes(src.bytes()[..8].try_into().unwrap()), 0, "old value of an untouched page");

    drop(odp);
    assert_eq!(&mem[at..at + PACKET], &expected[..], "the WRITE landed in process memory");
    let q = ODP_LEN / 4;
    assert_eq!(u64::from_ne_bytes(mem[q..q + 8].try_into().unwrap()), 41, "the atomic landed in process memory");
    eprintln!("odp: WRITE, READ and FETCH_ADD through untouched pages on {} under kernel {}", ctx.name(), kernel());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn atomic_write_places_eight_bytes_or_is_unsupported() {
    use rrddmma::prim::{ConnectOpts, Qp, QpType, SendFlags, SendOps};

    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let reported = attr.device_cap_flags_ex & (1 << 40) != 0;
    // rxe executes ATOMIC WRITE since Linux 6.2.
    if attr.orig_attr.vendor_id == 0xff_ffff {
        assert_eq!(reported, kernel_version() >= (6, 2), "rxe's ATOMIC WRITE capability under kernel {}", kernel());
    }
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let ops = SendOps::BASIC | SendOps::ATOMIC_WRITE;
    let built = Qp::builder(&pd, QpType::RC, &cq, &cq).send_ops(ops).build();
    if !reported {
        let e = built.unwrap_err();
        assert!(
            matches!(e, Error::Unsupported { op: "ibv_create_qp_ex", feature, .. } if feature.contains("ATOMIC WRITE")),
            "{e:?}"
        );
        eprintln!("atomic write: typed Unsupported on {} under kernel {}", ctx.name(), kernel());
        return;
    }
    let qa = built.expect("an extended QP with ATOMIC WRITE on a device that reports it");
    let qb = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    let o = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    connect_pair(&qa, &qb, &o, (11, 12));
    let mut target = Buf::new(&pd, 4096);
    target.bytes().fill(0xab);
    let value = 0x0123_4567_89ab_cdef_u64;
    // SAFETY: the batch names no local memory.
    let mut batch = unsafe { qa.wr_batch() };
    batch.atomic_write(5, SendFlags::SIGNALED, target.mr.remote().addr_at(64), value).expect("ibv_wr_atomic_write");
    batch.complete().unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (5, WcStatus::SUCCESS, WcOpcode::ATOMIC_WRITE));
    let b = target.bytes();
    assert_eq!(u64::from_ne_bytes(b[64..72].try_into().unwrap()), value, "the eight bytes landed");
    assert!(b[56..64].iter().chain(&b[72..80]).all(|&x| x == 0xab), "nothing beside them changed");
    eprintln!("atomic write: eight bytes placed on {} under kernel {}", ctx.name(), kernel());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn odp_prefetch_and_implicit_odp_work_or_are_unsupported() {
    use rrddmma::prim::Advice;

    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let caps = attr.odp_caps.general_caps;
    let general = caps & u64::from(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT.0) != 0;
    let implicit = general && caps & u64::from(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT_IMPLICIT.0) != 0;
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;

    // Implicit ODP: the device's capability decides, before the system call.
    // SAFETY: the region's keys go to no request and no peer but the WRITE
    // below, into `landing`, which outlives it.
    let whole = unsafe { Mr::register_implicit_odp(&pd, access) };
    let mut landing = vec![0u8; 2 * PAGE].into_boxed_slice();
    match whole {
        Err(e) => {
            assert!(!implicit, "implicit ODP reported but refused: {e:?}");
            assert!(
                matches!(e, Error::Unsupported { op: "ibv_reg_mr", feature: "implicit on-demand paging", .. }),
                "{e:?}"
            );
            eprintln!("odp: implicit ODP typed Unsupported on {} under kernel {}", ctx.name(), kernel());
        }
        Ok(whole) => {
            assert!(implicit, "implicit ODP registered although the device does not report it");
            assert_eq!((whole.addr(), whole.len()), (0, usize::MAX));
            let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0x1d9, &opts(&ctx)).unwrap();
            let mut src = Buf::new(&pd, 4096);
            src.bytes()[..64].copy_from_slice(&[0x3c; 64]);
            let s = [src.mr.sge_at(0, 64)];
            let at = landing.as_mut_ptr() as usize + PAGE;
            // SAFETY: `src` and `landing` outlive the completion.
            unsafe { qa.post_send(&mut [SendWr::write(&s, whole.remote().addr_at(at)).wr_id(9).signaled()]) }.unwrap();
            let wc = poll_one(&cq);
            assert_eq!((wc.wr_id(), wc.status()), (9, WcStatus::SUCCESS));
            drop(whole);
            assert_eq!(&landing[PAGE..PAGE + 64], &[0x3c; 64], "WRITE through the implicit region");
            eprintln!("odp: implicit ODP WRITE on {} under kernel {}", ctx.name(), kernel());
        }
    }

    // Prefetch: needs an ODP region and the provider's entry point.
    let release = crate::userspace::userspace();
    let rxe = attr.orig_attr.vendor_id == 0xff_ffff;
    let prefetch_expected = !rxe || release >= 59;
    if !general {
        // No ODP region can be made (rxe under 6.1), and `Pd::advise_mr`
        // takes only ODP regions (a plain one is refused before the call:
        // `features::d1_advise_mr_refuses_a_region_without_odp`).
        return;
    }
    let mut block = vec![0u8; ODP_LEN + PAGE].into_boxed_slice();
    let skip = block.as_ptr().align_offset(PAGE);
    let mem = &mut block[skip..skip + ODP_LEN];
    // SAFETY: `block` outlives the region (dropped first, below).
    let odp = unsafe { Mr::register(&pd, mem.as_mut_ptr(), ODP_LEN, access | AccessFlags::ON_DEMAND) }.unwrap();
    let ranges = [odp.sge_at(0, 4 * PAGE), odp.sge_at(ODP_LEN / 2, PAGE)];
    match pd.advise_mr(Advice::PrefetchWrite, true, &odp, &ranges) {
        Ok(()) => {
            assert!(prefetch_expected, "advise_mr worked on rxe with rdma-core {release}, whose provider lacks it");
            pd.advise_mr(Advice::Prefetch, false, &odp, &ranges[..1]).expect("a prefetch for reading");
            pd.advise_mr(Advice::PrefetchNoFault, true, &odp, &ranges[1..]).expect("a prefetch without faults");
            // Not tried here: a region without ODP, which oopses rxe under
            // 7.3.4 (docs/testing.md, "Kernel matrix").
            eprintln!("odp: advise_mr prefetch on {} under kernel {} + rdma-core {release}", ctx.name(), kernel());
        }
        Err(e) => {
            assert!(!prefetch_expected, "advise_mr refused on {} with rdma-core {release}: {e:?}", ctx.name());
            assert!(
                matches!(e, Error::Unsupported { op: "ibv_advise_mr", feature: "ODP prefetch (advise_mr)", .. }),
                "{e:?}"
            );
            eprintln!("odp: advise_mr typed Unsupported on {} under kernel {}", ctx.name(), kernel());
        }
    }
    drop(odp);
}
