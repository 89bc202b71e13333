//! Raw Ethernet: raw packet QPs, flow steering rules, receive WQs, RSS
//! indirection tables and striding receive queues are refused with
//! `Error::Unsupported` naming the capability, before the system call, on a
//! device without them (SoftRoCE, siw). ConnectX runs them (hardware only).

use rrddmma::mlx5dv::mprq::{StridingParams, STRIDING_OP};
use rrddmma::prim::{Error, EthFilter, Flow, Ipv4Filter, PortFilter, QpCaps, QpType, RwqIndTable, Wq};

use crate::common::{refusal_test_skips, Loopback};

/// `e` is `Unsupported` from `want_op`, whose text names `want`, the device
/// and the way out: a ConnectX Ethernet port.
fn unsupported(e: &Error, want_op: &str, want: &str) {
    assert!(
        matches!(e, Error::Unsupported { op, .. } if *op == want_op) && e.to_string().contains(want),
        "expected Unsupported from {want_op} naming {want:?}, got {e:?}"
    );
    let lack = e.lack().unwrap();
    assert!(e.to_string().contains(&format!("not supported by {}", lack.device)), "{e}");
    assert!(lack.instead().contains("ConnectX") && lack.instead().contains("Ethernet"), "{e}");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn raw_ethernet_is_unsupported_without_the_capabilities() {
    let lb = Loopback::new(QpCaps::default());
    let dev = lb.ctx.query_device_ex().unwrap();
    if dev.raw_packet_caps != 0 || dev.max_wq_type_rq != 0 || rrddmma::mlx5dv::is_supported(&lb.ctx) {
        refusal_test_skips(&format!("the device has raw Ethernet (raw_packet_caps {:#x})", dev.raw_packet_caps));
        return;
    }
    // Raw packet QP: refused from raw_packet_caps.
    let e = rrddmma::prim::Qp::builder(&lb.pd, QpType::RAW_PACKET, &lb.cq, &lb.cq).build().unwrap_err();
    unsupported(&e, "ibv_create_qp", "raw packet QPs");

    // A steering rule (on the loopback's RC QP: refused before its type matters).
    let e = Flow::builder(&lb.qa, 1)
        .priority(1)
        .eth(
            EthFilter { ether_type: 0x0800, ..Default::default() },
            EthFilter { ether_type: 0xffff, ..Default::default() },
        )
        .ipv4(
            Ipv4Filter { dst: [10, 0, 0, 1].into(), ..Default::default() },
            Ipv4Filter { dst: [255, 255, 255, 255].into(), ..Default::default() },
        )
        .udp(PortFilter { dst_port: 4791, src_port: 0 }, PortFilter { dst_port: 0xffff, src_port: 0 })
        .build()
        .unwrap_err();
    unsupported(&e, "ibv_create_flow", "flow steering");

    // Receive WQ; striding one (mlx5 only); indirection table.
    let e = Wq::builder(&lb.pd, &lb.cq).max_wr(16).build().unwrap_err();
    unsupported(&e, "ibv_create_wq", "receive work queues");
    let striding = StridingParams { log_stride_bytes: 6, log_num_strides: 9, two_byte_shift: false };
    let e = Wq::builder(&lb.pd, &lb.cq).striding(striding).build().unwrap_err();
    unsupported(&e, STRIDING_OP, "mlx5dv_is_supported = false");
    let e = RwqIndTable::create(&lb.ctx, &[]).unwrap_err();
    unsupported(&e, "ibv_create_rwq_ind_table", "RSS indirection tables");
}
