//! On a device that is not mlx5, every mlx5dv entry point reports Unsupported.

use rrddmma::mlx5dv::{self, dc};
use rrddmma::prim::{Cq, CqeSize, Error, Mlx5QpFlags, Pd, Qp, QpCaps, QpType, Srq};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{open_device, opts, refusal_test_skips};
use rrddmma::prim::QpState;

fn unsupported<T: std::fmt::Debug>(r: rrddmma::prim::Result<T>, what: &str) {
    match r {
        Err(Error::Unsupported { .. }) => {}
        other => panic!("{what}: expected Unsupported, got {other:?}"),
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn every_entry_point_is_unsupported_off_mlx5() {
    let ctx = open_device();
    if mlx5dv::is_supported(&ctx) && refusal_test_skips(&format!("{} is an mlx5 device", ctx.name())) {
        return;
    }
    unsupported(mlx5dv::query_device(&ctx), "query_device");
    unsupported(mlx5dv::clock_info(&ctx), "clock_info");
    unsupported(mlx5dv::comp::cqe_compression_caps(&ctx), "cqe_compression_caps");
    for f in
        [mlx5dv::mini::CqeResFormat::Hash, mlx5dv::mini::CqeResFormat::Csum, mlx5dv::mini::CqeResFormat::CsumStridx]
    {
        unsupported(mlx5dv::comp::require_cqe_compression(&ctx, f), f.name());
        unsupported(Cq::builder(&ctx, 64).mlx5_compression(f).build(), f.name());
    }
    // Every mlx5 creation option of the builders, alone and together.
    for size in [CqeSize::B64, CqeSize::B128] {
        unsupported(Cq::builder(&ctx, 64).mlx5_cqe_size(size).build(), "CqBuilder::mlx5_cqe_size");
    }
    unsupported(Cq::builder(&ctx, 64).mlx5_cqe_pad(true).build(), "CqBuilder::mlx5_cqe_pad");
    unsupported(
        Cq::builder(&ctx, 64).mlx5_cqe_size(CqeSize::B128).mlx5_cqe_pad(true).build(),
        "CqBuilder::mlx5_cqe_size + mlx5_cqe_pad",
    );
    let named = |r: rrddmma::prim::Result<Cq>, what: &str, name: &str| match r {
        Err(e @ Error::Unsupported { .. }) => assert!(e.to_string().contains(name), "{what}: {e}"),
        other => panic!("{what}: expected Unsupported, got {other:?}"),
    };
    named(Cq::builder(&ctx, 64).mlx5_cqe_pad(true).build(), "CQE padding", "CQE_PAD");
    named(
        Cq::builder(&ctx, 64).mlx5_compression(mlx5dv::mini::CqeResFormat::Csum).build(),
        "compression",
        "MLX5DV_CQE_RES_FORMAT_CSUM",
    );
    named(Cq::builder(&ctx, 64).mlx5_cqe_size(CqeSize::B128).build(), "CQE size", "CQE_SIZE");
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 8).unwrap();
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 1, &opts(&ctx)).unwrap();
    // SAFETY: the view is refused before it exists. (`sq_ring` needs a
    // `DirectCq` of the QP's send CQ, which this refusal leaves none of.)
    unsupported(unsafe { mlx5dv::obj::cq_ring(&cq) }, "cq_ring");
    let gid_index = ctx.roce_v2_gid_index(1).unwrap();
    let dgid = ctx.query_gid(1, u32::from(gid_index)).unwrap();
    let ah = rrddmma::prim::Ah::create(&pd, &rrddmma::prim::AhAttr::global(1, gid_index, dgid)).unwrap();
    unsupported(mlx5dv::av::AddressVector::of(&ah), "AddressVector::of");
    let srq = Srq::builder(&pd).max_wr(4).build().unwrap();
    unsupported(dc::Dct::create(&pd, &cq, &srq, 0x1234, &dc::DctOpts::default()), "Dct::create");
    unsupported(dc::Dci::create(&pd, &cq, &cq, QpCaps::default()), "Dci::create");
    // DCI streams: the caps and the creation are refused before libmlx5 is
    // asked anything (a DCI, whose stream reset and direct view
    // `Dci::sq_ring` would be next, cannot be made here at all).
    for r in [
        dc::dci_stream_caps(&ctx).map(|_| ()),
        dc::Dci::create_with_streams(
            &pd,
            &cq,
            &cq,
            QpCaps::default(),
            dc::DciStreams { log_num_concurrent: 2, log_num_errored: 1 },
        )
        .map(|_| ()),
    ] {
        match r {
            Err(Error::Unsupported { op, .. }) => {
                assert!(op.contains("DCI streams"), "the refusal names streams: {op}")
            }
            other => panic!("DCI streams: expected Unsupported, got {other:?}"),
        }
    }
    for ty in [QpType::RC, QpType::UD] {
        for flags in [Mlx5QpFlags::ALLOW_SCATTER_TO_CQE, Mlx5QpFlags::DISABLE_SCATTER_TO_CQE, Mlx5QpFlags::empty()] {
            let r = Qp::builder(&pd, ty, &cq, &cq).mlx5_create_flags(flags).build();
            match r {
                Err(e @ Error::Unsupported { .. }) => assert!(e.to_string().contains("mlx5_create_flags"), "{e}"),
                other => panic!("{ty:?} {flags:?}: expected Unsupported, got {other:?}"),
            }
        }
    }
    // The clock of the direct path.
    unsupported(mlx5dv::clock::Clock::new(&ctx), "Clock::new");

    // The QP is untouched and still usable through verbs.
    assert_eq!(qa.query_state().unwrap(), QpState::RTS);
}

/// The error names the device and what to use instead.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn hint_non_mlx5_error_names_the_device_and_the_way_out() {
    let ctx = open_device();
    if mlx5dv::is_supported(&ctx) && refusal_test_skips(&format!("{} is an mlx5 device", ctx.name())) {
        return;
    }
    let e = mlx5dv::query_device(&ctx).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("is not supported by {} (mlx5dv_is_supported = false)", ctx.name())), "{msg}");
    assert!(msg.contains("Qp::post_send and Cq::poll), which runs on every device"), "{msg}");
    assert!(e.is_unsupported(), "{e:?}");
}
