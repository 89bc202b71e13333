//! First real data movement: two RC QPs of one device connected to each other.

use rrddmma::bindings as ffi;
use rrddmma::prim::{device_names, AccessFlags, ConnectOpts, Cq, Mr, Pd, QpCaps, WcOpcode, WcStatus, WrOpcode};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{open_device, poll_one};

const LEN: usize = 4096;

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn rdma_wr(opcode: WrOpcode, sge: &mut ffi::ibv_sge, remote: &Mr, wr_id: u64) -> ffi::ibv_send_wr {
    let mut wr = ffi::ibv_send_wr {
        wr_id,
        sg_list: sge,
        num_sge: 1,
        opcode,
        send_flags: ffi::ibv_send_flags::IBV_SEND_SIGNALED.0,
        ..Default::default()
    };
    wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: remote.addr(), rkey: remote.rkey() };
    wr
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
    assert_eq!(port.state, ffi::ibv_port_state::IBV_PORT_ACTIVE, "port 1 of {} is not active", ctx.name());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn loopback_write_read_send_imm() {
    check_build_info();
    let ctx = open_device();
    let gid_index = ctx.roce_v2_gid_index(1).expect("GID table");
    let pd = Pd::new(&ctx).expect("ibv_alloc_pd");
    let cq = Cq::new(&ctx, 64).expect("ibv_create_cq");
    let access = AccessFlags::IBV_ACCESS_LOCAL_WRITE
        | AccessFlags::IBV_ACCESS_REMOTE_WRITE
        | AccessFlags::IBV_ACCESS_REMOTE_READ;
    let opts = ConnectOpts {
        gid_index: u8::try_from(gid_index).expect("GID index < 256"),
        access: AccessFlags::IBV_ACCESS_REMOTE_WRITE | AccessFlags::IBV_ACCESS_REMOTE_READ,
        ..ConnectOpts::default()
    };
    let (qa, qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0x1234, &opts).expect("connect RC pair");
    assert_eq!(qa.state().expect("ibv_query_qp"), ffi::ibv_qp_state::IBV_QPS_RTS);

    let mut buf_a = pattern(1);
    let mut buf_b = vec![0u8; LEN];
    // SAFETY: the buffers are declared before the MRs, so they outlive them,
    // and no work request is outstanding when they drop.
    let (mr_a, mr_b) = unsafe {
        (
            Mr::register(&pd, buf_a.as_mut_ptr(), LEN, access).expect("ibv_reg_mr a"),
            Mr::register(&pd, buf_b.as_mut_ptr(), LEN, access).expect("ibv_reg_mr b"),
        )
    };

    // RDMA WRITE a -> b.
    let mut sge = mr_a.sge(0, LEN as u32);
    let mut wr = rdma_wr(WrOpcode::IBV_WR_RDMA_WRITE, &mut sge, &mr_b, 1);
    // SAFETY: the SGE lies in `mr_a`; `buf_a`/`buf_b` stay untouched until the completion.
    unsafe { qa.post_send(&mut wr) }.expect("post WRITE");
    let wc = poll_one(&cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::IBV_WC_SUCCESS, WcOpcode::IBV_WC_RDMA_WRITE, 1));
    assert_eq!(wc.qp_num(), qa.qpn());
    assert_eq!(buf_b, pattern(1), "RDMA WRITE: target differs from source");

    // RDMA READ b -> a, after b's memory changes.
    buf_b.copy_from_slice(&pattern(7));
    let mut sge = mr_a.sge(0, LEN as u32);
    let mut wr = rdma_wr(WrOpcode::IBV_WR_RDMA_READ, &mut sge, &mr_b, 2);
    // SAFETY: as above.
    unsafe { qa.post_send(&mut wr) }.expect("post READ");
    let wc = poll_one(&cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::IBV_WC_SUCCESS, WcOpcode::IBV_WC_RDMA_READ, 2));
    assert_eq!(wc.byte_len(), LEN as u32, "RDMA READ byte_len");
    assert_eq!(buf_a, pattern(7), "RDMA READ: local buffer differs from remote");

    // SEND with immediate a -> b, into a posted receive of b.
    const SEND_LEN: u32 = 1000;
    buf_b.fill(0);
    buf_a.copy_from_slice(&pattern(42));
    let mut rsge = mr_b.sge(16, LEN as u32 - 16);
    let mut rwr = ffi::ibv_recv_wr { wr_id: 3, sg_list: &mut rsge, num_sge: 1, ..Default::default() };
    // SAFETY: the SGE lies in `mr_b`; `buf_b` is untouched until the completion.
    unsafe { qb.post_recv(&mut rwr) }.expect("post RECV");
    let mut sge = mr_a.sge(8, SEND_LEN);
    let mut wr = ffi::ibv_send_wr {
        wr_id: 4,
        sg_list: &mut sge,
        num_sge: 1,
        opcode: WrOpcode::IBV_WR_SEND_WITH_IMM,
        send_flags: ffi::ibv_send_flags::IBV_SEND_SIGNALED.0,
        ..Default::default()
    };
    wr.__bindgen_anon_1.imm_data = 0xdead_beef_u32.to_be();
    // SAFETY: as above.
    unsafe { qa.post_send(&mut wr) }.expect("post SEND_WITH_IMM");
    let (mut send, mut recv) = (None, None);
    for _ in 0..2 {
        let wc = poll_one(&cq);
        match wc.wr_id() {
            3 => recv = Some(wc),
            4 => send = Some(wc),
            other => panic!("unexpected completion {other}: {wc:?}"),
        }
    }
    let (send, recv) = (send.expect("send completion"), recv.expect("recv completion"));
    assert_eq!((send.status(), send.opcode()), (WcStatus::IBV_WC_SUCCESS, WcOpcode::IBV_WC_SEND));
    assert_eq!((recv.status(), recv.opcode()), (WcStatus::IBV_WC_SUCCESS, WcOpcode::IBV_WC_RECV));
    assert_eq!(recv.byte_len(), SEND_LEN, "RECV byte_len");
    assert_eq!(recv.imm(), Some(0xdead_beef), "immediate data");
    assert_eq!(recv.qp_num(), qb.qpn());
    assert_eq!(&buf_b[16..16 + SEND_LEN as usize], &pattern(42)[8..8 + SEND_LEN as usize], "SEND payload");
    assert!(
        buf_b[..16].iter().chain(&buf_b[16 + SEND_LEN as usize..]).all(|&b| b == 0),
        "bytes outside the SEND changed"
    );
    drop((mr_a, mr_b));
}
