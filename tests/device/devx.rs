//! DEVX (`mlx5dv::devx`): off mlx5 every entry is a typed `Unsupported`
//! naming DEVX, the device and the way out, decided before any command is
//! sent (libmlx5, asked, would answer a bare EOPNOTSUPP without that text);
//! on ConnectX the capabilities are read and cross-checked with mlx5dv.

use rrddmma::mlx5dv::devx::{self, verbs, DevxContext, HcaCaps, MkeySpec, ReportedCaps, OPEN_OP};
use rrddmma::mlx5dv::prm::CapMode;
use rrddmma::mlx5dv::{self as dv};
use rrddmma::prim::{Cq, Error, Pd, Qp, QpCaps, QpType, Srq};

use crate::common::open_device;

/// The refusal `e` must be: `Unsupported` of `op`, whose text names DEVX,
/// the device and what to open instead.
fn assert_refusal(e: Result<impl std::fmt::Debug, Error>, op: &str, device: &str) {
    match e {
        Err(ref err @ Error::Unsupported { op: o, feature, ref lack, .. }) => {
            assert_eq!(o, op, "{err}");
            assert!(feature.starts_with("DEVX"), "the refusal names DEVX: {feature}");
            assert_eq!(lack.device, device, "the refusal names the device {device}: {err}");
            assert!(lack.instead().contains("mlx5_N"), "the refusal says what to open instead: {err}");
            let msg = err.to_string();
            assert!(msg.contains(op) && msg.contains("DEVX") && msg.contains("is not supported"), "{msg}");
        }
        other => panic!("{op} off mlx5: expected Unsupported naming DEVX, got {other:?}"),
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn devx_open_is_refused_off_mlx5_with_devx_named() {
    let ctx = open_device();
    let name = ctx.name().to_string();
    if dv::is_supported(&ctx) {
        let d = DevxContext::open(&name).expect("DEVX context on an mlx5 device");
        let caps = HcaCaps::query(&d, CapMode::CUR).expect("QUERY_HCA_CAP");
        assert!(caps.log_max_qp() > 0, "a ConnectX has QPs");
        // LAG ports against mlx5dv (DCI stream and tag-matching caps: the
        // test devx_caps_agree_with_what_mlx5dv_reports_on_mlx5).
        let attr = dv::query_device(&ctx).unwrap();
        assert_eq!(caps.lag().1.max(1), attr.num_lag_ports.max(1), "LAG ports: HCA caps vs mlx5dv_query_device");
        return;
    }
    // Opened twice: the refusal is the same each time, and the verbs
    // context of the same device still opens (nothing was left half-open).
    for _ in 0..2 {
        assert_refusal(DevxContext::open(&name), OPEN_OP, &name);
    }
    let again = rrddmma::prim::Context::open(&name).expect("the verbs context opens after a DEVX refusal");
    assert_eq!(again.name(), name);
}

/// On ConnectX: the DCI stream caps `mlx5dv_query_device` reports and the
/// tag-matching caps of `ibv_query_device_ex` are what the current HCA caps
/// read through DEVX imply (`HcaCaps::disagreements`, none).
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn devx_caps_agree_with_what_mlx5dv_reports_on_mlx5() {
    let ctx = open_device();
    if !dv::is_supported(&ctx)
        && crate::common::mlx5_test_skips("needs a ConnectX (mlx5) device: HCA caps read through DEVX")
    {
        return;
    }
    let d = DevxContext::open(ctx.name()).expect("DEVX context on an mlx5 device");
    let caps = HcaCaps::query(&d, CapMode::CUR).expect("QUERY_HCA_CAP (current)");
    let reported = ReportedCaps::new(&dv::query_device(&ctx).unwrap(), ctx.query_device_ex().unwrap().tm_caps);
    let d = caps.disagreements(&reported);
    assert!(d.is_empty(), "HCA caps vs mlx5dv / ibv_query_device_ex: {}", {
        let all: Vec<String> = d.iter().map(ToString::to_string).collect();
        all.join("; ")
    });
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn devx_entries_on_verbs_objects_are_refused_off_mlx5() {
    let ctx = open_device();
    if dv::is_supported(&ctx) {
        eprintln!("skipped: {} is an mlx5 device (the refusals are for other devices)", ctx.name());
        return;
    }
    let name = ctx.name().to_string();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(QpCaps::default()).build().unwrap();
    let srq = Srq::builder(&pd).build().unwrap();
    let q = devx::cmd::query_qp(qp.qpn());
    let mut out = vec![0u8; devx::cmd::QUERY_QP_OUT_BYTES];

    assert_refusal(verbs::qp_query(&qp, &q, &mut out), "mlx5dv_devx_qp_query", &name);
    assert_refusal(
        verbs::qp_modify(&qp, &devx::cmd::rts2rts_udp_sport(qp.qpn(), 49152), &mut out),
        "mlx5dv_devx_qp_modify",
        &name,
    );
    assert_refusal(verbs::set_udp_sport(&qp, 49152), "mlx5dv_devx_qp_modify", &name);
    assert_refusal(verbs::udp_sport(&qp), "mlx5dv_devx_qp_query", &name);
    assert_refusal(verbs::dp_ordering(&qp), "mlx5dv_devx_qp_query", &name);
    assert_refusal(verbs::lag_port(&qp), "mlx5dv_query_qp_lag_port (DEVX)", &name);
    assert_refusal(verbs::set_lag_port(&qp, 2), "mlx5dv_query_qp_lag_port (DEVX)", &name);
    assert_refusal(verbs::reset_dci_stream(&qp, 1), "mlx5dv_devx_qp_modify", &name);
    assert_refusal(devx::SchedLeaf::attach(&qp, None, None), "mlx5dv_devx_qp_modify", &name);
    assert_refusal(verbs::cq_query(&cq, &q, &mut out), "mlx5dv_devx_cq_query", &name);
    assert_refusal(verbs::cq_modify(&cq, &q, &mut out), "mlx5dv_devx_cq_modify", &name);
    assert_refusal(verbs::srq_query(&srq, &q, &mut out), "mlx5dv_devx_srq_query", &name);
    assert_refusal(verbs::srq_modify(&srq, &q, &mut out), "mlx5dv_devx_srq_modify", &name);
    assert_refusal(verbs::pdn(&pd), "mlx5dv_init_obj (PD)", &name);
    // The refusal text the entries share is the one the module documents.
    assert!(verbs::refusal_text(&name).contains(&name));
    // The command builders need no device: an indirect key's request is
    // what mlx5dv_create_mkey would send (tests/provider/devx.rs).
    assert_eq!(devx::cmd::create_mkey(&MkeySpec::indirect(1, 4)).len(), devx::cmd::CREATE_MKEY_IN_BYTES);
}
