//! Thread domains, parent domains (a QP and a CQ on one) and dma-buf memory
//! regions: data through them where the device has them, the typed
//! `Unsupported` asserted where it does not (SoftRoCE). On ConnectX
//! (libmlx5 has all three) a refusal of a domain fails the test, and a
//! dma-buf region that cannot be tried skips through `mlx5_test_skips`
//! (a failure under `--expect mlx5`).

use std::fs::{self, File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

use rrddmma::prim::{
    AccessFlags, Context, Cq, Error, Mr, ParentDomain, Pd, Qp, QpCaps, QpType, SendWr, Td, TdParentDomain, WcStatus,
};

use crate::common::{mlx5_test_skips, open_device, opts, poll_one, test_skips, Buf};

/// rxe's vendor ID: SoftRoCE lacks all three features in rdma-core 44 and
/// kernel 6.1, so there the `Unsupported` branch is asserted, not accepted.
fn is_rxe(ctx: &Context) -> bool {
    ctx.query_device().unwrap().vendor_id == 0xff_ffff
}

/// `e` is the refusal `row` of `prim::unsupported::ALL` from `op`: the
/// device, the provider's answer, the way out.
fn assert_unsupported(e: &Error, op: &str, row: &str) {
    assert!(
        matches!(e, Error::Unsupported { op: o, lack, .. } if *o == op && lack.missing.name == row),
        "expected Unsupported {{ {op}, row {row} }}: {e:?}"
    );
    let lack = e.lack().unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "{op}: {} is not supported by {} ({}); {}",
            lack.missing.feature,
            lack.device,
            lack.value,
            lack.instead()
        )
    );
    assert!(lack.value.ends_with("= EOPNOTSUPP") || lack.value.ends_with("= ENOSYS"), "{e}");
    assert_eq!(e.errno(), Some(libc::EOPNOTSUPP));
}

/// Connects `qa` (on whatever PD) with a plain QP `qb`, WRITEs 256 bytes
/// from `qa`'s side into `qb`'s buffer, and checks them.
fn write_through(ctx: &Context, pd_a: &Pd, cq_a: &Cq, qa: &Qp, pd_b: &Pd) {
    let cq_b = Cq::create(ctx, 16).unwrap();
    let qb = Qp::builder(pd_b, rrddmma::prim::QpType::RC, &cq_b, &cq_b).build().unwrap();
    let o = opts(ctx);
    crate::common::connect_pair(qa, &qb, &o, (100, 200));
    let mut src = Buf::new(pd_a, 256);
    let mut dst = Buf::new(pd_b, 256);
    for (i, b) in src.bytes().iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7) ^ 0x5a;
    }
    let s = [src.mr.sge_at(0, 256)];
    // SAFETY: both buffers are registered and outlive the completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, dst.mr.remote().addr_at(0)).wr_id(9).signaled()]) }.unwrap();
    let wc = poll_one(cq_a);
    assert_eq!((wc.wr_id(), wc.status()), (9, WcStatus::SUCCESS), "{wc:?}");
    let want = src.bytes().to_vec();
    assert_eq!(dst.bytes(), &want[..]);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn thread_and_parent_domains_or_unsupported() {
    let ctx = open_device();
    let rxe = is_rxe(&ctx);
    let mlx5 = rrddmma::mlx5dv::is_supported(&ctx);
    let pd = Pd::alloc(&ctx).unwrap();

    // Thread domain; with it, a parent domain whose objects lose their locks.
    match Td::alloc(&ctx) {
        Err(e) if rxe => assert_unsupported(&e, "ibv_alloc_td", "THREAD_DOMAIN"),
        Err(e) => {
            assert!(!mlx5, "{}: libmlx5 allocates thread domains, yet: {e:?}", ctx.name());
            assert!(e.is_unsupported(), "{e:?}");
        }
        Ok(td) => {
            let dom = TdParentDomain::alloc(&pd, &td).unwrap();
            assert_eq!(dom.protection_domain().as_ptr(), pd.as_ptr());
            let cq = dom.cq(16).unwrap();
            let qa = dom.qp(QpType::RC, &cq, &cq, QpCaps::default()).unwrap();
            // SAFETY: every object on this parent domain stays on this thread.
            let (pdom, cq, qa) = unsafe { (dom.as_parent_domain(), cq.as_cq(), qa.as_qp()) };
            assert!(pdom.has_thread_domain());
            write_through(&ctx, pdom, cq, qa, &pd);
        }
    }

    // Parent domain without a thread domain.
    let failures = rrddmma::prim::destroy_failures();
    let dom = match ParentDomain::alloc(&pd) {
        Err(e) if rxe => return assert_unsupported(&e, "ibv_alloc_parent_domain", "PARENT_DOMAIN"),
        Err(e) => {
            assert!(!mlx5, "{}: libmlx5 allocates parent domains, yet: {e:?}", ctx.name());
            assert!(e.is_unsupported(), "{e:?}");
            test_skips(&format!("{} has no parent domains: {e}", ctx.name()));
            return;
        }
        Ok(dom) => dom,
    };
    assert_eq!(dom.protection_domain().as_ptr(), pd.as_ptr());
    assert!(dom.parent().is_some() && !dom.has_thread_domain());
    // A CQ on the parent domain, classic and extended; a QP on it through
    // the QP builder, carrying data.
    let cq = Cq::builder(&ctx, 16).parent_domain(&dom).build().unwrap();
    let ex = Cq::builder(&ctx, 16).extended(Default::default()).parent_domain(&dom).build().unwrap();
    let qa = Qp::builder(&dom, QpType::RC, &cq, &ex).build().unwrap();
    assert_eq!(qa.pd().as_ptr(), dom.as_ptr());
    write_through(&ctx, &dom, &cq, &qa, &pd);
    drop(dom);
    // The QP and CQs keep the parent domain (and its PD) alive.
    drop((qa, cq, ex, pd));
    assert_eq!(rrddmma::prim::destroy_failures(), failures, "every destroy succeeded, children first");
}

/// A dma-buf of `len` bytes from vgem (the kernel's virtual GEM driver, a
/// dma-buf exporter with no hardware): its DRM device, and the buffer.
fn vgem_dmabuf(len: u32) -> Option<(File, OwnedFd)> {
    if std::env::var_os("RRDDMMA_TEST_SOFTROCE_ADMIN").is_some() {
        // The harness's VM (root): load the exporter.
        let _ = Command::new("modprobe").arg("vgem").status();
    }
    let card = fs::read_dir("/sys/class/drm").ok()?.filter_map(|e| e.ok()).find(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.starts_with("card")
            && !name.contains('-')
            && fs::read_link(e.path().join("device")).is_ok_and(|l| l.ends_with("vgem"))
    })?;
    let dev =
        OpenOptions::new().read(true).write(true).open(format!("/dev/dri/{}", card.file_name().to_string_lossy()));
    let dev = dev.expect("open the vgem DRM device");
    // struct drm_mode_create_dumb: height, width, bpp, flags, handle, pitch (u32); size (u64).
    let mut dumb = [0u32; 8];
    dumb[..3].copy_from_slice(&[1, len / 4, 32]);
    const DRM_IOCTL_MODE_CREATE_DUMB: libc::c_ulong = 0xC020_64B2;
    // SAFETY: the ioctl reads and writes the 32-byte struct in `dumb`.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), DRM_IOCTL_MODE_CREATE_DUMB, dumb.as_mut_ptr()) };
    assert_eq!(rc, 0, "DRM_IOCTL_MODE_CREATE_DUMB on vgem: {}", std::io::Error::last_os_error());
    // struct drm_prime_handle: handle, flags (u32); fd (i32).
    let mut prime = [dumb[4], (libc::O_CLOEXEC | libc::O_RDWR) as u32, u32::MAX];
    const DRM_IOCTL_PRIME_HANDLE_TO_FD: libc::c_ulong = 0xC00C_642D;
    // SAFETY: the ioctl reads and writes the 12-byte struct in `prime`.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), DRM_IOCTL_PRIME_HANDLE_TO_FD, prime.as_mut_ptr()) };
    assert_eq!(rc, 0, "DRM_IOCTL_PRIME_HANDLE_TO_FD on vgem: {}", std::io::Error::last_os_error());
    // SAFETY: the kernel returned a new descriptor, owned by nothing else.
    let buf = unsafe { OwnedFd::from_raw_fd(prime[2] as i32) };
    // A real dma-buf: a file of the kernel's dma-buf file system, whose
    // fdinfo names its exporter (vgem exports through DRM PRIME: "drm") and size.
    let info = fs::read_to_string(format!("/proc/self/fdinfo/{}", buf.as_raw_fd())).unwrap();
    let link = fs::read_link(format!("/proc/self/fd/{}", buf.as_raw_fd())).unwrap();
    eprintln!("dma-buf from vgem: {} ({})", link.display(), info.split_whitespace().collect::<Vec<_>>().join(" "));
    assert!(link.to_string_lossy().starts_with("/dmabuf:"), "{}", link.display());
    assert!(info.lines().any(|l| l.starts_with("exp_name:")), "{info}");
    assert!(info.lines().any(|l| l.split_whitespace().eq(["size:".to_string(), len.to_string()])), "{info}");
    Some((dev, buf))
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dmabuf_region_or_unsupported() {
    const LEN: usize = 4096;
    let ctx = open_device();
    let rxe = is_rxe(&ctx);
    let mlx5 = rrddmma::mlx5dv::is_supported(&ctx);
    let pd = Pd::alloc(&ctx).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;

    // Ranges that cannot be a region panic before any call, on any device
    // (the program wrote them: the error policy's programming errors).
    let file = File::open("/proc/self/exe").unwrap();
    for (offset, len, iova, what) in
        [(u64::MAX, 1, 0, "offset 0x"), (0, 0, 0, "length is 0"), (0, 8, u64::MAX, "iova 0x")]
    {
        let m = crate::common::panic_message(|| Mr::register_dmabuf(&pd, file.as_fd(), offset, len, iova, access));
        assert!(m.starts_with(&format!("Mr::register_dmabuf: {what}")), "{m}");
    }
    // A descriptor that is no dma-buf: rxe's provider refuses the verb
    // before the kernel sees it; elsewhere the kernel refuses the descriptor.
    match Mr::register_dmabuf(&pd, file.as_fd(), 0, LEN, 0, access) {
        Err(e) if rxe => assert_unsupported(&e, "ibv_reg_dmabuf_mr", "DMABUF"),
        Err(e) => eprintln!("a non-dma-buf descriptor: {e}"),
        Ok(mr) => panic!("a regular file registered as a dma-buf: {mr:?}"),
    }

    let Some((_card, buf)) = vgem_dmabuf(LEN as u32) else {
        assert!(
            std::env::var_os("RRDDMMA_TEST_SOFTROCE_ADMIN").is_none(),
            "the harness's VM must provide a vgem dma-buf exporter (modprobe vgem)"
        );
        let why = "no vgem dma-buf exporter here (modprobe vgem as root)";
        if mlx5 {
            mlx5_test_skips(&format!("{}: {why}", ctx.name()));
        } else {
            test_skips(why);
        }
        return;
    };
    let mr = match Mr::register_dmabuf(&pd, buf.as_fd(), 0, LEN, 0, access) {
        Err(e) if rxe => return assert_unsupported(&e, "ibv_reg_dmabuf_mr", "DMABUF"),
        Err(e) => {
            assert!(e.is_unsupported(), "{e:?}");
            let why = format!("{} has no dma-buf regions: {e}", ctx.name());
            if mlx5 {
                // mlx5_ib registers dma-bufs through its on-demand paging.
                mlx5_test_skips(&why);
            } else {
                test_skips(&why);
            }
            return;
        }
        Ok(mr) => mr,
    };
    drop(buf); // the kernel holds the dma-buf for the region
    assert_eq!((mr.addr(), mr.len()), (0, LEN));
    // A WRITE into the dma-buf region, read back by an RDMA READ.
    let cq = Cq::create(&ctx, 16).unwrap();
    let (qa, _qb) = rrddmma::wrap::connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 3, &opts(&ctx)).unwrap();
    let mut src = Buf::new(&pd, 512);
    let mut back = Buf::new(&pd, 512);
    for (i, b) in src.bytes().iter_mut().enumerate() {
        *b = (i as u8) ^ 0xa5;
    }
    let s = [src.mr.sge_at(0, 512)];
    // SAFETY: registered buffers, alive until the completions.
    unsafe { qa.post_send(&mut [SendWr::write(&s, mr.remote().addr_at(1024)).wr_id(1).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (1, WcStatus::SUCCESS), "{wc:?}");
    let r = [back.mr.sge_at(0, 512)];
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::read(&r, mr.remote().addr_at(1024)).wr_id(2).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (2, WcStatus::SUCCESS), "{wc:?}");
    let want = src.bytes().to_vec();
    assert_eq!(back.bytes(), &want[..]);
}
