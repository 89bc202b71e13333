//! Every operation of the send queue, byte for byte, with completion fields.

use rrddmma::prim::{QpCaps, RecvWr, SendWr, Sge, WcOpcode, WcStatus};

use crate::common::{poll_one, poll_pair, Loopback, LEN};
use rrddmma::prim::{QpState, QpType};

fn u64_at(buf: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(buf[off..off + 8].try_into().unwrap())
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn atomics_return_the_old_value_and_update_memory() {
    let mut lb = Loopback::new(QpCaps::default());
    lb.b()[64..72].copy_from_slice(&100u64.to_ne_bytes());
    let old = [lb.mr_a.sge_at(0, 8)];
    let target = lb.mr_b.remote().addr_at(64);

    // Fetch-and-add: old value back, memory increased.
    // SAFETY: entries in registered regions, untouched until completion.
    unsafe { lb.qa.post_send(&mut [SendWr::fetch_add(&old, target, 23).wr_id(1).signaled()]) }.unwrap();
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::SUCCESS, WcOpcode::FETCH_ADD, 1));
    assert_eq!(wc.byte_len(), 8);
    assert_eq!(u64_at(lb.a(), 0), 100, "FAA returns the old value");
    assert_eq!(u64_at(lb.b(), 64), 123, "FAA adds");

    // Compare-and-swap that matches: swapped.
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [SendWr::compare_swap(&old, target, 123, 7).wr_id(2).signaled()]) }.unwrap();
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.status(), wc.opcode()), (WcStatus::SUCCESS, WcOpcode::COMP_SWAP));
    assert_eq!(u64_at(lb.a(), 0), 123);
    assert_eq!(u64_at(lb.b(), 64), 7, "CAS with a matching compare swaps");

    // Compare-and-swap that does not match: memory unchanged, old value back.
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [SendWr::compare_swap(&old, target, 999, 55).wr_id(3).signaled()]) }.unwrap();
    let wc = poll_one(&lb.cq);
    assert_eq!(wc.status(), WcStatus::SUCCESS);
    assert_eq!(u64_at(lb.a(), 0), 7);
    assert_eq!(u64_at(lb.b(), 64), 7, "CAS with a different compare leaves memory alone");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn write_with_immediate_consumes_a_receive() {
    let mut lb = Loopback::new(QpCaps::default());
    lb.a()[..512].iter_mut().enumerate().for_each(|(i, x)| *x = (i % 256) as u8);
    // SAFETY: an empty receive; the WRITE's entries lie in registered regions.
    unsafe { lb.qb.post_recv(&mut [RecvWr::empty(10)]) }.unwrap();
    let src = [lb.mr_a.sge_at(0, 512)];
    // SAFETY: as above.
    unsafe {
        lb.qa
            .post_send(&mut [SendWr::write_imm(&src, lb.mr_b.remote().addr_at(1024), 0x0bad_cafe).wr_id(11).signaled()])
    }
    .unwrap();
    let (send, recv) = poll_pair(&lb.cq, 11, 10);
    assert_eq!((send.status(), send.opcode()), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE));
    assert_eq!((recv.status(), recv.opcode()), (WcStatus::SUCCESS, WcOpcode::RECV_RDMA_WITH_IMM));
    assert_eq!(recv.imm(), Some(0x0bad_cafe));
    assert_eq!(recv.byte_len(), 512);
    let expect: Vec<u8> = (0..512).map(|i| (i % 256) as u8).collect();
    assert_eq!(&lb.b()[1024..1536], &expect[..]);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn batch_of_writes_with_one_post_and_selective_signalling() {
    const N: usize = 16;
    const CHUNK: usize = LEN / N;
    let mut lb = Loopback::new(QpCaps::default().max_send_wr(N as u32));
    lb.a().iter_mut().enumerate().for_each(|(i, x)| *x = (i * 7 % 253) as u8);
    let sges: Vec<[Sge; 1]> = (0..N).map(|i| [lb.mr_a.sge_at(i * CHUNK, CHUNK)]).collect();
    let remote = lb.mr_b.remote();
    let mut wrs: Vec<SendWr<'_>> =
        (0..N).map(|i| SendWr::write(&sges[i], remote.addr_at(i * CHUNK)).wr_id(i as u64)).collect();
    // Only the last is signalled; on an RC QP its completion implies the others.
    wrs[N - 1] = wrs[N - 1].signaled();
    // SAFETY: entries in registered regions, untouched until completion.
    unsafe { lb.qa.post_send(&mut wrs) }.unwrap();
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.status(), wc.opcode(), wc.wr_id()), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE, (N - 1) as u64));
    let mut more = [rrddmma::prim::Wc::default(); 4];
    assert_eq!(lb.cq.poll(&mut more).unwrap(), 0, "unsignalled requests produce no completion");
    let a = lb.a().to_vec();
    assert_eq!(lb.b(), &a[..]);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn inline_fenced_and_solicited_sends() {
    let mut lb = Loopback::new(QpCaps::default().max_inline_data(64));
    assert!(lb.qa.caps().get_max_inline_data() >= 64, "provider granted {:?}", lb.qa.caps());
    lb.a()[..48].copy_from_slice(&[0x5a; 48]);
    let src = [lb.mr_a.sge_at(0, 48)];
    // Inline WRITE: the payload is copied at the call.
    // SAFETY: inline payload copied at post; entries in registered regions.
    unsafe { lb.qa.post_send(&mut [SendWr::write(&src, lb.mr_b.remote().addr_at(0)).inline().wr_id(1).signaled()]) }
        .unwrap();
    lb.a()[..48].fill(0); // changing the source after posting must not matter
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.status(), wc.opcode()), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE));
    assert_eq!(&lb.b()[..48], &[0x5a; 48]);

    // READ, then a fenced WRITE that must not start before the READ is done.
    lb.b()[256..264].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let dst = [lb.mr_a.sge_at(256, 8)];
    let src2 = [lb.mr_a.sge_at(512, 8)];
    lb.a()[512..520].copy_from_slice(&[9; 8]);
    let remote = lb.mr_b.remote();
    let mut wrs = [
        SendWr::read(&dst, remote.addr_at(256)).wr_id(2).signaled(),
        SendWr::write(&src2, remote.addr_at(256)).fence().wr_id(3).signaled(),
    ];
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut wrs) }.unwrap();
    let (r, w) = poll_pair(&lb.cq, 2, 3);
    assert_eq!((r.status(), w.status()), (WcStatus::SUCCESS, WcStatus::SUCCESS));
    assert_eq!(&lb.a()[256..264], &[1, 2, 3, 4, 5, 6, 7, 8], "the READ saw memory before the fenced WRITE");
    assert_eq!(&lb.b()[256..264], &[9; 8]);

    // Solicited SEND: delivered like any SEND (the bit matters to event channels).
    let rs = [lb.mr_b.sge_at(1024, 64)];
    // SAFETY: as above.
    unsafe { lb.qb.post_recv(&mut [RecvWr::new(&rs, 20)]) }.unwrap();
    let ss = [lb.mr_a.sge_at(512, 8)];
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [SendWr::send(&ss).solicited().wr_id(21).signaled()]) }.unwrap();
    let (s, r) = poll_pair(&lb.cq, 21, 20);
    assert_eq!((s.status(), r.status(), r.byte_len()), (WcStatus::SUCCESS, WcStatus::SUCCESS, 8));
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn multi_sge_gather_and_scatter() {
    let mut lb = Loopback::new(QpCaps::default().max_send_sge(3).max_recv_sge(2));
    lb.a()[0..10].copy_from_slice(b"0123456789");
    lb.a()[100..105].copy_from_slice(b"abcde");
    lb.a()[200..207].copy_from_slice(b"ABCDEFG");
    let gather = [lb.mr_a.sge_at(0, 10), lb.mr_a.sge_at(100, 5), lb.mr_a.sge_at(200, 7)];
    let scatter = [lb.mr_b.sge_at(0, 12), lb.mr_b.sge_at(2000, 100)];
    // SAFETY: entries in registered regions, untouched until completion.
    unsafe { lb.qb.post_recv(&mut [RecvWr::new(&scatter, 1)]) }.unwrap();
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [SendWr::send(&gather).wr_id(2).signaled()]) }.unwrap();
    let (recv, send) = poll_pair(&lb.cq, 1, 2);
    assert_eq!((send.status(), recv.status()), (WcStatus::SUCCESS, WcStatus::SUCCESS));
    assert_eq!(recv.byte_len(), 22);
    assert_eq!(&lb.b()[0..12], b"0123456789ab");
    assert_eq!(&lb.b()[2000..2010], b"cdeABCDEFG");
    assert_eq!(lb.b()[12], 0);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn uc_write_and_send() {
    use rrddmma::prim::{Cq, Pd, Qp};
    let ctx = crate::common::open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let uc = QpType::UC;
    let qa = Qp::builder(&pd, uc, &cq, &cq).build().unwrap();
    let qb = Qp::builder(&pd, uc, &cq, &cq).build().unwrap();
    let o = crate::common::opts(&ctx).access(rrddmma::prim::AccessFlags::REMOTE_WRITE);
    crate::common::connect_pair(&qa, &qb, &o, (11, 22));
    assert_eq!(qa.query_state().unwrap(), QpState::RTS);
    let mut a = crate::common::Buf::new(&pd, 256);
    let mut b = crate::common::Buf::new(&pd, 256);
    a.bytes().fill(0x61);
    let s = [a.mr.sge_at(0, 128)];
    // SAFETY: entries in registered memory, alive until completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, b.mr.remote().addr_at(0)).wr_id(1).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.status(), wc.opcode()), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE));
    let r = [b.mr.sge_at(128, 128)];
    // SAFETY: as above.
    unsafe { qb.post_recv(&mut [RecvWr::new(&r, 2)]) }.unwrap();
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::send(&s).wr_id(3).signaled()]) }.unwrap();
    let (recv, send) = poll_pair(&cq, 2, 3);
    assert_eq!((send.status(), recv.status(), recv.byte_len()), (WcStatus::SUCCESS, WcStatus::SUCCESS, 128));
    assert!(b.bytes().iter().all(|&x| x == 0x61), "UC WRITE and SEND both landed");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn send_list_posts_a_prebuilt_chain_and_names_the_refused_request() {
    use rrddmma::prim::{Error, SendList};

    let mut lb = Loopback::new(QpCaps::default().max_send_wr(8));
    lb.a()[..256].iter_mut().enumerate().for_each(|(i, x)| *x = i as u8 ^ 0x5a);
    let src = lb.a()[..256].to_vec();
    let sges: Vec<[Sge; 1]> = (0..4).map(|i| [lb.mr_a.sge_at(i * 64, 64)]).collect();
    let remote = lb.mr_b.remote();
    let wrs = sges.iter().enumerate().map(|(i, s)| SendWr::write(s, remote.addr_at(1024 + i * 64)).wr_id(i as u64));
    let mut list = SendList::new(wrs.collect());
    list.set(3, SendWr::write(&sges[3], remote.addr_at(1024 + 192)).wr_id(3).signaled());
    for round in 0..3 {
        lb.b()[1024..1280].fill(0);
        // SAFETY: entries in registered regions, untouched until completion.
        unsafe { lb.qa.post_send_list(&mut list) }.unwrap();
        let wc = poll_one(&lb.cq);
        assert_eq!((wc.status(), wc.wr_id()), (WcStatus::SUCCESS, 3), "round {round}");
        assert_eq!(&lb.b()[1024..1280], &src[..], "round {round}: all four WRITEs of the list landed");
    }

    // More requests than the send queue holds: the provider refuses one,
    // and the list says which.
    let one = [lb.mr_a.sge_at(0, 8)];
    let mut long = SendList::new((0..4096).map(|i| SendWr::write(&one, remote.addr_at(0)).wr_id(i)).collect());
    // SAFETY: as above; the requests that were posted complete unsignaled.
    let err = unsafe { lb.qa.post_send_list(&mut long) }.unwrap_err();
    assert!(matches!(err, Error::Post { index: None, .. }), "{err:?}");
    assert!(err.errno().is_some_and(|e| e != 0), "{err:?}");
    let k = long.refused().expect("the provider names the refused request");
    assert!((1..4096).contains(&k), "refused at {k}: the queue holds at least one and fewer than 4096");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn recv_list_reposts_a_prebuilt_chain_and_names_the_refused_request() {
    use rrddmma::prim::{Error, RecvList};

    let mut lb = Loopback::new(QpCaps::default().max_send_wr(8).max_recv_wr(8));
    let dst: Vec<[Sge; 1]> = (0..2).map(|i| [lb.mr_b.sge_at(i * 64, 64)]).collect();
    let mut list = RecvList::new(dst.iter().enumerate().map(|(i, s)| RecvWr::new(s, 100 + i as u64)).collect());
    let src: Vec<[Sge; 1]> = (0..2).map(|i| [lb.mr_a.sge_at(512 + i * 64, 64)]).collect();
    for round in 0..3u8 {
        lb.a()[512..640].iter_mut().enumerate().for_each(|(i, x)| *x = (i as u8).wrapping_mul(3) ^ round);
        let sent = lb.a()[512..640].to_vec();
        lb.b()[..128].fill(0);
        // SAFETY: entries in registered regions, untouched until completion.
        unsafe { lb.qb.post_recv_list(&mut list) }.unwrap();
        let mut sends = [SendWr::send(&src[0]).wr_id(1).signaled(), SendWr::send(&src[1]).wr_id(2).signaled()];
        // SAFETY: as above.
        unsafe { lb.qa.post_send(&mut sends) }.unwrap();
        let mut got: Vec<(u64, u32)> = (0..4)
            .map(|_| {
                let wc = poll_one(&lb.cq);
                assert_eq!(wc.status(), WcStatus::SUCCESS, "round {round}");
                (wc.wr_id(), if wc.wr_id() >= 100 { wc.byte_len() } else { 0 })
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![(1, 0), (2, 0), (100, 64), (101, 64)],
            "round {round}: both receives of the list completed"
        );
        assert_eq!(&lb.b()[..128], &sent[..], "round {round}: the SENDs landed in the list's buffers, in order");
    }

    // More receives than the queue holds: the provider refuses one, and the
    // list says which.
    let one = [lb.mr_b.sge_at(1024, 8)];
    let mut long = RecvList::new((0..4096).map(|i| RecvWr::new(&one, i)).collect());
    // SAFETY: as above; the posted receives are never consumed.
    let err = unsafe { lb.qb.post_recv_list(&mut long) }.unwrap_err();
    assert!(matches!(err, Error::Post { index: None, .. }), "{err:?}");
    let k = long.refused().expect("the provider names the refused request");
    assert!((1..4096).contains(&k), "refused at {k}: the queue holds at least one and fewer than 4096");
}
