//! The extended post API (`ibv_wr_*`): one doorbell for a batch of mixed requests.

use rrddmma::prim::{Cq, Pd, Qp, QpCaps, RecvWr, SendOps, SendWr, Wc, WcOpcode, WcStatus};

use crate::common::{open_device, opts, panic_message, poll_one, Buf};
use rrddmma::prim::QpType;

fn ex_pair(pd: &Pd, cq: &Cq, caps: QpCaps) -> (Qp, Qp) {
    let ctx = pd.context();
    let o = opts(ctx);
    let build = || Qp::builder(pd, QpType::RC, cq, cq).caps(caps).send_ops(SendOps::BASIC).build().unwrap();
    let (a, b) = (build(), build());
    crate::common::connect_pair(&a, &b, &o, (100, 200));
    (a, b)
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn mixed_batch_with_one_doorbell() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 64).unwrap();
    let caps = QpCaps::default().max_send_sge(4).max_inline_data(64);
    let (qa, qb) = ex_pair(&pd, &cq, caps);
    let mut a = Buf::new(&pd, 8192);
    let mut b = Buf::new(&pd, 8192);
    a.bytes().iter_mut().enumerate().for_each(|(i, x)| *x = (i % 251) as u8);
    b.bytes()[4096..4104].copy_from_slice(&40u64.to_ne_bytes());
    b.bytes()[4104..4112].copy_from_slice(&5u64.to_ne_bytes());
    b.bytes()[6000..6064].fill(0xee);
    let rb = b.mr.remote();

    // Entries of unequal lengths (1024 + 512 + 512): what rdma-core < 64 rxe miscounts.
    let gather = [a.mr.sge_at(0, 1024), a.mr.sge_at(2048, 512), a.mr.sge_at(3072, 512)];
    // Inline list (5 + 7 + 9 bytes): what rdma-core < 64 rxe posts as empty.
    let inl = [a.mr.sge_at(1100, 5), a.mr.sge_at(1200, 7), a.mr.sge_at(1300, 9)];
    let read_into = [a.mr.sge_at(5000, 64)];
    let old_faa = [a.mr.sge_at(6000, 8)];
    let old_cas = [a.mr.sge_at(6008, 8)];
    let recv1 = [b.mr.sge_at(7000, 64)];
    let recv2 = [b.mr.sge_at(7100, 64)];
    // SAFETY: receives in registered memory, untouched until completion.
    unsafe { qb.post_recv(&mut [RecvWr::new(&recv1, 901), RecvWr::new(&recv2, 902)]) }.unwrap();

    let wrs = [
        SendWr::write(&gather, rb.addr_at(0)).wr_id(1).signaled(),
        SendWr::send(&inl).inline().wr_id(2).signaled(),
        SendWr::read(&read_into, rb.addr_at(6000)).wr_id(3).signaled(),
        SendWr::fetch_add(&old_faa, rb.addr_at(4096), 2).wr_id(4).signaled(),
        SendWr::compare_swap(&old_cas, rb.addr_at(4104), 5, 77).wr_id(5).signaled(),
        SendWr::send_imm(&read_into[..0], 0xabcd).wr_id(6).signaled(),
    ];
    // SAFETY: every entry lies in registered memory, untouched until completion.
    let mut batch = unsafe { qa.wr_batch() };
    for wr in &wrs {
        // SAFETY: as above.
        unsafe { batch.post(wr) }.unwrap();
    }
    a.bytes()[1100..1105].fill(0); // inline payloads were copied at post time
    batch.complete().unwrap();

    let mut got: Vec<Wc> = (0..8).map(|_| poll_one(&cq)).collect();
    got.sort_by_key(|w| w.wr_id());
    for w in &got {
        assert_eq!(w.status(), WcStatus::SUCCESS, "{w:?}");
    }
    let ops: Vec<(u64, WcOpcode)> = got.iter().map(|w| (w.wr_id(), w.opcode())).collect();
    assert_eq!(
        ops,
        [
            (1, WcOpcode::RDMA_WRITE),
            (2, WcOpcode::SEND),
            (3, WcOpcode::RDMA_READ),
            (4, WcOpcode::FETCH_ADD),
            (5, WcOpcode::COMP_SWAP),
            (6, WcOpcode::SEND),
            (901, WcOpcode::RECV),
            (902, WcOpcode::RECV),
        ]
    );
    let expect = |r: std::ops::Range<usize>| r.map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let mut written = expect(0..1024);
    written.extend(expect(2048..2560));
    written.extend(expect(3072..3584));
    assert!(b.bytes()[..2048] == written[..], "gathered WRITE differs");
    assert_eq!(got[6].byte_len(), 21, "inline SEND length");
    let mut inline_payload = expect(1100..1105);
    inline_payload.extend(expect(1200..1207));
    inline_payload.extend(expect(1300..1309));
    assert_eq!(&b.bytes()[7000..7021], &inline_payload[..], "inline SEND payload");
    assert_eq!((got[7].byte_len(), got[7].imm()), (0, Some(0xabcd)));
    assert_eq!(&a.bytes()[5000..5064], &[0xee; 64], "READ");
    assert_eq!(u64::from_ne_bytes(a.bytes()[6000..6008].try_into().unwrap()), 40, "FAA old value");
    assert_eq!(u64::from_ne_bytes(b.bytes()[4096..4104].try_into().unwrap()), 42, "FAA result");
    assert_eq!(u64::from_ne_bytes(a.bytes()[6008..6016].try_into().unwrap()), 5, "CAS old value");
    assert_eq!(u64::from_ne_bytes(b.bytes()[4104..4112].try_into().unwrap()), 77, "CAS result");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dropped_batch_posts_nothing() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let (qa, _qb) = ex_pair(&pd, &cq, QpCaps::default());
    let mut a = Buf::new(&pd, 64);
    let mut b = Buf::new(&pd, 64);
    a.bytes().fill(1);
    let s = [a.mr.sge_at(0, 64)];
    {
        // SAFETY: entries in registered memory.
        let mut batch = unsafe { qa.wr_batch() };
        // SAFETY: as above.
        unsafe { batch.post(&SendWr::write(&s, b.mr.remote().addr_at(0)).wr_id(1).signaled()) }.unwrap();
    } // aborted
      // A later batch still works, and only its request completes.
      // SAFETY: as above.
    let mut batch = unsafe { qa.wr_batch() };
    // SAFETY: as above.
    unsafe { batch.post(&SendWr::write(&s[..], b.mr.remote().addr_at(0)).wr_id(2).signaled()) }.unwrap();
    batch.complete().unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (2, WcStatus::SUCCESS));
    let mut more = [Wc::default(); 2];
    assert_eq!(cq.poll(&mut more).unwrap(), 0, "the aborted request never completes");
    assert_eq!(b.bytes(), &[1u8; 64][..]);
}

/// A QP made without send ops opens a batch on a stand-in view whose
/// entries touch nothing: posting the batch, or adding a request with
/// `WrBatch::post`, panics naming the fix, dropping it does nothing, and the
/// QP still posts the classic way.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn batch_on_a_qp_without_send_ops_panics_naming_the_fix() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let (qa, _qb) = rrddmma::wrap::connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 3, &opts(&ctx)).unwrap();
    let mut a = Buf::new(&pd, 64);
    let mut b = Buf::new(&pd, 64);
    a.bytes().fill(5);
    let s = [a.mr.sge_at(0, 64)];
    let fix = "wr_batch on a QP without send_ops: create it with QpBuilder::send_ops";
    // SAFETY: nothing reaches the device (the batch panics or is dropped).
    assert_eq!(panic_message(|| unsafe { qa.wr_batch() }.complete().unwrap()), fix);
    assert_eq!(
        panic_message(|| {
            // SAFETY: as above.
            let mut batch = unsafe { qa.wr_batch() };
            // SAFETY: entries in registered memory.
            let _ = unsafe { batch.post(&SendWr::write(&s, b.mr.remote().addr_at(0)).wr_id(1).signaled()) };
        }),
        fix
    );
    assert_eq!(
        panic_message(|| {
            // SAFETY: as above.
            let mut batch = unsafe { qa.wr_batch() };
            batch.local_inv(3, rrddmma::prim::SendFlags::empty(), b.mr.rkey());
        }),
        fix
    );
    // SAFETY: as above.
    drop(unsafe { qa.wr_batch() });
    let mut wrs = [SendWr::write(&s, b.mr.remote().addr_at(0)).wr_id(2).signaled()];
    // SAFETY: entries in registered memory, alive until completion.
    unsafe { qa.post_send(&mut wrs) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (2, WcStatus::SUCCESS), "only the classic post completes");
    let mut more = [Wc::default(); 2];
    assert_eq!(cq.poll(&mut more).unwrap(), 0, "nothing of the batches reached the device");
    assert_eq!(b.bytes(), &[5u8; 64][..]);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn one_entry_methods_write_read_send_and_atomics() {
    use rrddmma::prim::SendFlags;
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 64).unwrap();
    let (qa, qb) = ex_pair(&pd, &cq, QpCaps::default());
    let mut a = Buf::new(&pd, 4096);
    let mut b = Buf::new(&pd, 4096);
    a.bytes()[..64].iter_mut().enumerate().for_each(|(i, x)| *x = i as u8 + 1);
    b.bytes()[1024..1088].fill(0x5a);
    b.bytes()[2048..2056].copy_from_slice(&10u64.to_ne_bytes());
    b.bytes()[2056..2064].copy_from_slice(&3u64.to_ne_bytes());
    let rb = b.mr.remote();
    let recv = [b.mr.sge_at(3000, 64)];
    // SAFETY: a receive in registered memory, untouched until completion.
    unsafe { qb.post_recv(&mut [RecvWr::new(&recv, 900)]) }.unwrap();

    let sig = SendFlags::SIGNALED;
    // SAFETY: every entry lies in registered memory, untouched until completion.
    let mut batch = unsafe { qa.wr_batch() };
    // SAFETY: as above (`INLINE` is masked out: the entry is registered).
    unsafe {
        batch.rdma_write(1, sig | SendFlags::INLINE, &a.mr.sge_at(0, 64), rb.addr_at(0));
        batch.rdma_read(2, sig, &a.mr.sge_at(100, 64), rb.addr_at(1024));
        batch.send(3, sig, &a.mr.sge_at(0, 16));
        batch.fetch_add(4, sig, &a.mr.sge_at(200, 8), rb.addr_at(2048), 5);
        batch.compare_swap(5, sig, &a.mr.sge_at(208, 8), rb.addr_at(2056), 3, 99);
    }
    batch.complete().unwrap();
    let mut got: Vec<Wc> = (0..6).map(|_| poll_one(&cq)).collect();
    got.sort_by_key(|w| w.wr_id());
    let ops: Vec<(u64, WcOpcode, WcStatus)> = got.iter().map(|w| (w.wr_id(), w.opcode(), w.status())).collect();
    use WcOpcode as O;
    let ok = WcStatus::SUCCESS;
    assert_eq!(
        ops,
        [
            (1, O::RDMA_WRITE, ok),
            (2, O::RDMA_READ, ok),
            (3, O::SEND, ok),
            (4, O::FETCH_ADD, ok),
            (5, O::COMP_SWAP, ok),
            (900, O::RECV, ok)
        ]
    );
    let expect: Vec<u8> = (1..=64).collect();
    assert_eq!(&b.bytes()[..64], &expect[..], "the WRITE landed");
    assert_eq!(&a.bytes()[100..164], &[0x5a; 64][..], "the READ brought the bytes back");
    assert_eq!(&b.bytes()[3000..3016], &expect[..16], "the SEND arrived");
    assert_eq!(u64::from_ne_bytes(a.bytes()[200..208].try_into().unwrap()), 10, "FAA's old value");
    assert_eq!(u64::from_ne_bytes(b.bytes()[2048..2056].try_into().unwrap()), 15);
    assert_eq!(u64::from_ne_bytes(a.bytes()[208..216].try_into().unwrap()), 3, "CAS's old value");
    assert_eq!(u64::from_ne_bytes(b.bytes()[2056..2064].try_into().unwrap()), 99);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn one_entry_methods_refuse_ud() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let qp = Qp::builder(&pd, QpType::UD, &cq, &cq).send_ops(SendOps::SEND).build().unwrap();
    let a = Buf::new(&pd, 64);
    let sge = a.mr.sge_at(0, 8);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: registered entry; the call panics before anything is written.
        let mut batch = unsafe { qp.wr_batch() };
        // SAFETY: as above.
        unsafe { batch.send(1, rrddmma::prim::SendFlags::SIGNALED, &sge) };
    }));
    let msg = r.expect_err("a one-entry send on a UD QP panics");
    let msg = msg.downcast_ref::<&str>().copied().map(String::from).or_else(|| msg.downcast_ref::<String>().cloned());
    assert!(msg.unwrap_or_default().contains("WrBatch::post with SendWr::ud"), "names the fix");
    // The other one-entry methods need their send op (the provider, which
    // refuses RDMA send ops on UD, left the entry unset): a contract of the
    // unsafe call, which debug builds (these tests) check.
    if cfg!(debug_assertions) {
        let remote = a.mr.remote().addr_at(8);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: registered entry; in a debug build the call panics
            // before anything is called.
            let mut batch = unsafe { qp.wr_batch() };
            // SAFETY: as above.
            unsafe { batch.rdma_write(2, rrddmma::prim::SendFlags::SIGNALED, &sge, remote) };
        }));
        let msg = r.expect_err("a one-entry RDMA WRITE on a QP without SendOps::RDMA_WRITE panics");
        let msg =
            msg.downcast_ref::<&str>().copied().map(String::from).or_else(|| msg.downcast_ref::<String>().cloned());
        let msg = msg.unwrap_or_default();
        assert!(msg.contains("wr_rdma_write") && msg.contains("SendOps::RDMA_WRITE"), "names the fix: {msg}");
    }
}
