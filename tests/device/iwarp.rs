//! iWARP (soft-iWARP `siw0`, built by the harness: docs/testing.md): what the
//! transport lacks is a typed error. `RRDDMMA_EXPECT_IWARP=1` (set by the
//! harness on siw0) makes the iWARP branch mandatory; on RoCE the same calls
//! must succeed.

use rrddmma::bindings as ffi;
use rrddmma::prim::{Cq, Pd, Qp, QpType};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn iwarp_refuses_ud_with_a_typed_error_and_reports_no_atomics() {
    let ctx = open_device();
    let iwarp = std::env::var("RRDDMMA_EXPECT_IWARP").is_ok_and(|v| v == "1");
    let attr = ctx.query_device_ex().unwrap();
    let none = attr.orig_attr.atomic_cap == ffi::ibv_atomic_cap::IBV_ATOMIC_NONE;
    assert_eq!(none, iwarp, "atomic_cap {:?} on {} (iWARP expected: {iwarp})", attr.orig_attr.atomic_cap, ctx.name());
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    match Qp::builder(&pd, QpType::UD, &cq, &cq).build() {
        Ok(_) => assert!(!iwarp, "{} created a UD QP although it is iWARP", ctx.name()),
        Err(e) => {
            assert!(iwarp, "UD QP on {}: {e:?}", ctx.name());
            assert!(e.is_unsupported(), "UD on iWARP must be a typed Unsupported: {e:?}");
            eprintln!("iwarp: UD refused with {e} on {}", ctx.name());
        }
    }
}
