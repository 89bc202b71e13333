//! First real data movement: two RC QPs of one device connected to each other.

use rrddmma::prim::{device_names, RecvWr, SendWr, WcOpcode, WcStatus};

use crate::common::{open_device, poll_one, Loopback, LEN};
use rrddmma::prim::{PortState, QpState};

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// The build's linkage is the one the harness built for (static checks).
fn check_build_info() {
    let info = rrddmma::build_info();
    if let Ok(want) = std::env::var("RRDDMMA_EXPECT_LINKAGE") {
        assert_eq!(info.linkage, want, "build_info(): {info}");
    }
    if let Ok(want) = std::env::var("RRDDMMA_EXPECT_PROVIDERS") {
        assert_eq!(info.static_providers.join(","), want, "build_info(): {info}");
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn device_is_listed() {
    let ctx = open_device();
    let names = device_names().expect("ibv_get_device_list");
    assert!(names.iter().any(|n| n == ctx.name()), "{} not in {names:?}", ctx.name());
    let port = ctx.query_port(1).expect("ibv_query_port");
    assert_eq!(port.state(), PortState::ACTIVE, "port 1 of {} is not active", ctx.name());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn loopback_write_read_send_imm() {
    check_build_info();
    let mut lb = Loopback::new(Default::default());
    assert_eq!(lb.qa.query_state().expect("ibv_query_qp"), QpState::RTS);
    lb.a().copy_from_slice(&pattern(1));

    // RDMA WRITE a -> b.
    let sges = [lb.mr_a.sge_at(0, LEN)];
    let wr = SendWr::write(&sges, lb.mr_b.remote().addr_at(0)).wr_id(1).signaled();
    // SAFETY: the entry lies in `mr_a`; the buffers stay untouched until the completion.
    unsafe { lb.qa.post_send(&mut [wr]) }.expect("post WRITE");
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE, 1));
    assert_eq!(wc.qp_num(), lb.qa.qpn());
    assert_eq!(lb.b(), &pattern(1)[..], "RDMA WRITE: target differs from source");

    // RDMA READ b -> a, after b's memory changes.
    lb.b().copy_from_slice(&pattern(7));
    let wr = SendWr::read(&sges, lb.mr_b.remote().addr_at(0)).wr_id(2).signaled();
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [wr]) }.expect("post READ");
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::SUCCESS, WcOpcode::RDMA_READ, 2));
    assert_eq!(wc.byte_len(), LEN as u32, "RDMA READ byte_len");
    assert_eq!(lb.a(), &pattern(7)[..], "RDMA READ: local buffer differs from remote");

    // SEND with immediate a -> b, into a posted receive of b at an offset.
    const SEND_LEN: usize = 1000;
    lb.b().fill(0);
    lb.a().copy_from_slice(&pattern(42));
    let rsges = [lb.mr_b.sge_at(16, LEN - 16)];
    // SAFETY: the entry lies in `mr_b`, untouched until the completion.
    unsafe { lb.qb.post_recv(&mut [RecvWr::new(&rsges, 3)]) }.expect("post RECV");
    let ssges = [lb.mr_a.sge_at(8, SEND_LEN)];
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [SendWr::send_imm(&ssges, 0xdead_beef).wr_id(4).signaled()]) }
        .expect("post SEND_WITH_IMM");
    let (send, recv) = crate::common::poll_pair(&lb.cq, 4, 3);
    assert_eq!((send.status(), send.opcode()), (WcStatus::SUCCESS, WcOpcode::SEND));
    assert_eq!((recv.status(), recv.opcode()), (WcStatus::SUCCESS, WcOpcode::RECV));
    assert_eq!(recv.byte_len() as usize, SEND_LEN, "RECV byte_len");
    assert_eq!(recv.imm(), Some(0xdead_beef), "immediate data");
    assert_eq!(recv.qp_num(), lb.qb.qpn());
    let b = lb.b();
    assert_eq!(&b[16..16 + SEND_LEN], &pattern(42)[8..8 + SEND_LEN], "SEND payload");
    assert!(b[..16].iter().chain(&b[16 + SEND_LEN..]).all(|&x| x == 0), "bytes outside the SEND changed");
}
