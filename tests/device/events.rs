//! Asynchronous events, on a SoftRoCE device of the test's own over a veth pair.

use std::process::Command;
use std::time::Duration;

use rrddmma::prim::EventType;
use rrddmma::prim::{Context, EventElement};

fn sh(cmd: &str) -> bool {
    Command::new("sh").args(["-c", cmd]).status().is_ok_and(|s| s.success())
}

struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        sh("rdma link delete rxe_ev 2>/dev/null; ip link del rrev0 2>/dev/null");
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn port_down_raises_a_port_error_event() {
    let _ = crate::common::open_device();
    if std::env::var_os("RRDDMMA_TEST_SOFTROCE_ADMIN").is_none() {
        crate::common::test_skips(
            "creating a SoftRoCE device needs RRDDMMA_TEST_SOFTROCE_ADMIN (set by cargo xtask test)",
        );
        return;
    }
    let _cleanup = Cleanup;
    assert!(
        sh("ip link add rrev0 type veth peer name rrev1 && ip link set rrev0 up && ip link set rrev1 up \
            && rdma link add rxe_ev type rxe netdev rrev0"),
        "creating rxe_ev over a veth pair"
    );
    let ctx = Context::open("rxe_ev").unwrap();
    // Drain what device creation raised.
    while ctx.async_event(Some(Duration::from_millis(200))).unwrap().is_some() {}
    assert!(sh("ip link set rrev0 down"), "ip link set down");
    let mut seen = Vec::new();
    while let Some(ev) = ctx.async_event(Some(Duration::from_secs(5))).unwrap() {
        seen.push(ev);
        if ev.event_type == EventType::PORT_ERR {
            break;
        }
    }
    let last = seen.last().copied();
    assert!(
        last.is_some_and(|e| e.event_type == EventType::PORT_ERR && e.element == EventElement::Port(1)),
        "expected PORT_ERR on port 1, got {seen:?}"
    );
    assert!(!ctx.query_port(1).unwrap().is_active());
}
