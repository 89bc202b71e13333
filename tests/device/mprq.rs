//! Striding receive WQs: refused before any system call on a device that
//! is not mlx5 (SoftRoCE, siw), with the capability named; on a ConnectX,
//! created within its `striding_rq_caps`, refused outside them, and posted
//! through its ring (run on hardware only).

use rrddmma::mlx5dv::{self, mprq, mprq::StridingParams, mprq_wq};
use rrddmma::prim::{AccessFlags, Cq, Error, Mr, Pd, Wq};

use crate::common::{mlx5_test_skips, open_device, refusal_test_skips};

const PARAMS: StridingParams = StridingParams { log_stride_bytes: 6, log_num_strides: 4, two_byte_shift: false };

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn striding_rq_is_unsupported_off_mlx5() {
    let ctx = open_device();
    if mlx5dv::is_supported(&ctx) && refusal_test_skips(&format!("{} is an mlx5 device", ctx.name())) {
        return;
    }
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    for two_byte_shift in [false, true] {
        let p = StridingParams { two_byte_shift, ..PARAMS };
        let e = Wq::builder(&pd, &cq).max_wr(8).striding(p).build().unwrap_err();
        assert!(
            matches!(&e, Error::Unsupported { op, lack, .. }
                if op.contains("MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ") && lack.value.starts_with("mlx5dv_is_supported = false")
                    && lack.instead().contains("ConnectX (mlx5) Ethernet port")),
            "{e:?}"
        );
        assert!(e.to_string().contains("striding RQ") && e.to_string().contains(ctx.name()), "{e}");
    }
    let e = mprq::striding_rq_caps(&ctx).unwrap_err();
    assert!(matches!(e, Error::Unsupported { op, .. } if op.contains("striding RQ")), "{e:?}");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn striding_rq_is_created_within_the_caps_on_mlx5() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    let caps = mprq::striding_rq_caps(&ctx).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 64).unwrap();
    if !caps.available() {
        let e = Wq::builder(&pd, &cq).striding(PARAMS).build().unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
        return;
    }
    let too_many = StridingParams { log_num_strides: (caps.max_log_num_strides + 1) as u8, ..PARAMS };
    let e = Wq::builder(&pd, &cq).striding(too_many).build().unwrap_err();
    assert!(matches!(e, Error::CapExceeded { what, .. } if what.contains("single_wqe_log_num_of_strides")), "{e:?}");
    let p = StridingParams {
        log_stride_bytes: caps.min_log_stride_bytes.max(6) as u8,
        log_num_strides: caps.min_log_num_strides.max(3) as u8,
        two_byte_shift: false,
    };
    let wq = Wq::builder(&pd, &cq).max_wr(4).striding(p).build().unwrap();
    wq.ready().unwrap();
    assert_eq!(wq.striding(), Some(p));
    // SAFETY: the CQ is polled through this view only.
    let view = unsafe { mlx5dv::obj::cq_ring(&cq) }.unwrap();
    // SAFETY: the WQ is posted through this ring only; the ring is dropped first.
    let mut ring = unsafe { mprq_wq::ring(&wq, &view) }.unwrap();
    assert_eq!(ring.wqn(), wq.num());
    let mut mem = vec![0u8; (p.wqe_bytes() * ring.wqe_cnt()) as usize];
    // SAFETY: `mem` outlives the MR and the WQ (dropped after them).
    let mr = unsafe { Mr::register(&pd, mem.as_mut_ptr(), mem.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    for i in 0..ring.wqe_cnt() {
        let addr = mem.as_ptr() as u64 + u64::from(i * p.wqe_bytes());
        // SAFETY: registered memory left to the device while the WQ lives.
        assert!(unsafe { ring.post(mr.lkey(), addr) }.is_some());
    }
    ring.ring_doorbell();
    assert_eq!(ring.free(), 0);
    drop(ring);
    drop(wq);
    drop(mr);
    drop(mem);
}
