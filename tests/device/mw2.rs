//! Type-2 memory windows: bound through the extended send queue
//! (`ibv_wr_bind_mw`), invalidated by the owner (`ibv_wr_local_inv`) or by
//! the peer (`ibv_wr_send_inv`); a key once invalidated is refused.

use rrddmma::prim::{
    AccessFlags, ConnectOpts, Context, Cq, Mr, Mw, MwType, Pd, Qp, QpType, RecvWr, SendFlags, SendOps, SendWr, WcFlags,
    WcOpcode, WcStatus,
};

use crate::common::{open_device, poll_one, Buf};

const S: SendFlags = SendFlags::SIGNALED;

/// A connected RC pair: `a` may SEND with invalidate, `b` (the window's
/// owner) binds and invalidates windows.
struct Pair {
    pd: Pd,
    cq_a: Cq,
    cq_b: Cq,
    a: Qp,
    b: Qp,
}

fn pair(ctx: &Context) -> Pair {
    let pd = Pd::alloc(ctx).unwrap();
    let (cq_a, cq_b) = (Cq::create(ctx, 32).unwrap(), Cq::create(ctx, 32).unwrap());
    let a = Qp::builder(&pd, QpType::RC, &cq_a, &cq_a).send_ops(SendOps::BASIC | SendOps::SEND_WITH_INV).build();
    let a = a.expect("an extended QP with SEND_WITH_INV");
    let b = Qp::builder(&pd, QpType::RC, &cq_b, &cq_b).send_ops(SendOps::BASIC | SendOps::BIND_MW | SendOps::LOCAL_INV);
    let b = b.build().expect("an extended QP with BIND_MW and LOCAL_INV");
    let o = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    crate::common::connect_pair(&a, &b, &o, (21, 22));
    Pair { pd, cq_a, cq_b, a, b }
}

/// A region of `len` bytes that windows may be bound to.
struct Target {
    mr: Mr,
    mem: Box<[u8]>,
}

fn target(pd: &Pd, len: usize) -> Target {
    let mut mem = vec![0u8; len].into_boxed_slice();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::MW_BIND;
    // SAFETY: `mem` lives in the same struct, dropped after `mr` (and the
    // windows bound to it are dropped before the struct in each test).
    let mr = unsafe { Mr::register(pd, mem.as_mut_ptr(), len, access) }.unwrap();
    Target { mr, mem }
}

/// Binds `mw` on `p.b` to bytes 256..1280 of `t`; checks the completion.
fn bind(p: &Pair, mw: &mut Mw, t: &Target, wr_id: u64) -> rrddmma::prim::RemoteMr {
    let before = mw.rkey();
    // SAFETY: the bind names no local memory beyond the region (checked).
    let mut batch = unsafe { p.b.wr_batch() };
    let remote = batch.bind_mw_at(wr_id, S, mw, &t.mr, (256, 1024), AccessFlags::REMOTE_WRITE).expect("ibv_wr_bind_mw");
    batch.complete().unwrap();
    let wc = poll_one(&p.cq_b);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (wr_id, WcStatus::SUCCESS, WcOpcode::BIND_MW));
    assert_eq!(remote.rkey, mw.rkey(), "the window answers to the key of its last bind");
    assert_ne!(remote.rkey, before, "each bind takes a new key");
    assert_eq!(remote.rkey & !0xff, before & !0xff, "only the key's tag (low 8 bits) changes");
    assert_eq!((remote.addr, remote.len), (t.mr.addr() + 256, 1024));
    remote
}

/// WRITEs 64 bytes of `fill` from `p.a` at the window's offset `at`.
fn write(p: &Pair, src: &mut Buf, remote: &rrddmma::prim::RemoteMr, at: usize, fill: u8, wr_id: u64) -> WcStatus {
    src.bytes()[..64].fill(fill);
    let s = [src.mr.sge_at(0, 64)];
    // SAFETY: `src` outlives the completion polled below.
    unsafe { p.a.post_send(&mut [SendWr::write(&s, remote.addr_at(at)).wr_id(wr_id).signaled()]) }.unwrap();
    let wc = poll_one(&p.cq_a);
    assert_eq!(wc.wr_id(), wr_id);
    wc.status()
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn type2_window_bind_write_then_local_inv_refuses_the_key() {
    let ctx = open_device();
    let p = pair(&ctx);
    let t = target(&p.pd, 4096);
    let mut src = Buf::new(&p.pd, 4096);
    let mut mw = Mw::alloc(&p.pd, MwType::TYPE_2).expect("ibv_alloc_mw type 2");
    assert_eq!(mw.mw_type(), MwType::TYPE_2);

    let w = bind(&p, &mut mw, &t, 1);
    assert_eq!(write(&p, &mut src, &w, 100, 0x5a, 2), WcStatus::SUCCESS);
    assert!(t.mem[356..420].iter().all(|&x| x == 0x5a), "the WRITE landed through the window");

    // SAFETY: names no memory.
    let mut batch = unsafe { p.b.wr_batch() };
    batch.local_inv(3, S, w.rkey);
    batch.complete().unwrap();
    let wc = poll_one(&p.cq_b);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (3, WcStatus::SUCCESS, WcOpcode::LOCAL_INV));

    let status = write(&p, &mut src, &w, 200, 0xa5, 4);
    assert_eq!(status, WcStatus::REM_ACCESS_ERR, "a WRITE with the invalidated key");
    assert!(t.mem[456..520].iter().all(|&x| x == 0), "nothing landed");
    drop(mw);
    eprintln!("mw type 2: bind, WRITE, LOCAL_INV, key refused ({status}) on {}", ctx.name());
}

/// Polls `p.b`'s receive of a SEND_WITH_INV: its `wr_id` and length, and
/// the invalidated key `rkey`.
fn received_with_inv(ctx: &Context, p: &Pair, (wr_id, len): (u64, u32), rkey: u32) {
    let wc = poll_one(&p.cq_b);
    assert_eq!((wc.wr_id(), wc.status(), wc.byte_len()), (wr_id, WcStatus::SUCCESS, len));
    if wc.flags().contains(WcFlags::WITH_INV) {
        assert_eq!(wc.invalidated_rkey(), Some(rkey));
    } else {
        // rxe writes the kernel's IB_WC_WITH_INVALIDATE (1 << 2) into the
        // completion, where rdma-core's IBV_WC_IP_CSUM_OK sits
        // (IBV_WC_WITH_INV is 1 << 3); the key is in its place all the same.
        assert_eq!(ctx.query_device().unwrap().vendor_id, 0xff_ffff, "no WITH_INV flag: {:?}", wc.flags());
        assert!(wc.flags().contains(WcFlags::IP_CSUM_OK), "{:?}", wc.flags());
        assert_eq!(wc.invalidated_rkey(), None, "rxe: without WITH_INV the accessor reports no key");
        // SAFETY: both members of the union are plain u32.
        assert_eq!(unsafe { wc.0.__bindgen_anon_1.invalidated_rkey }, rkey, "rxe: the invalidated key");
        eprintln!("mw type 2: rxe flags the invalidation as {:?} (the kernel's bit)", wc.flags());
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn type2_window_send_with_invalidate_then_rebind_and_the_old_key_is_refused() {
    let ctx = open_device();
    let p = pair(&ctx);
    let t = target(&p.pd, 4096);
    let mut src = Buf::new(&p.pd, 4096);
    let mut inbox = Buf::new(&p.pd, 256);
    let mut mw = Mw::alloc(&p.pd, MwType::TYPE_2).unwrap();
    let w = bind(&p, &mut mw, &t, 1);

    // The peer invalidates the window with its SEND.
    let r = [inbox.mr.sge_at(0, 256)];
    // SAFETY: `inbox` outlives the completion.
    unsafe { p.b.post_recv(&mut [RecvWr::new(&r, 7)]) }.unwrap();
    src.bytes()[..5].copy_from_slice(b"done.");
    let s = [src.mr.sge_at(0, 5)];
    // SAFETY: `src` outlives the completion.
    let mut batch = unsafe { p.a.wr_batch() };
    // SAFETY: as above.
    unsafe { batch.send_inv(8, S, &s[0], w.rkey) };
    batch.complete().unwrap();
    let wc = poll_one(&p.cq_a);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (8, WcStatus::SUCCESS, WcOpcode::SEND));
    received_with_inv(&ctx, &p, (7, 5), w.rkey);
    assert_eq!(&inbox.bytes()[..5], b"done.");

    // Bound again under a new key: that one works.
    let w2 = bind(&p, &mut mw, &t, 9);
    assert_eq!(write(&p, &mut src, &w2, 0, 0x11, 10), WcStatus::SUCCESS);

    // The same through `WrBatch::post` with `SendWr::send_inv`: the peer's
    // completion names the new key.
    // SAFETY: `inbox` outlives the completion.
    unsafe { p.b.post_recv(&mut [RecvWr::new(&r, 13)]) }.unwrap();
    src.bytes()[..4].copy_from_slice(b"next");
    let s = [src.mr.sge_at(0, 4)];
    // SAFETY: `src` outlives the completion.
    let mut batch = unsafe { p.a.wr_batch() };
    // SAFETY: as above.
    unsafe { batch.post(&SendWr::send_inv(&s, w2.rkey).wr_id(12).flags(S)) }.unwrap();
    batch.complete().unwrap();
    let wc = poll_one(&p.cq_a);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (12, WcStatus::SUCCESS, WcOpcode::SEND));
    received_with_inv(&ctx, &p, (13, 4), w2.rkey);
    assert_eq!(&inbox.bytes()[..4], b"next");

    // The first key, invalidated and replaced, is refused.
    let status = write(&p, &mut src, &w, 0, 0x22, 11);
    assert_eq!(status, WcStatus::REM_ACCESS_ERR, "a WRITE with the key the SEND invalidated");
    drop(mw);
    drop(t);
    eprintln!("mw type 2: SEND_WITH_INV, rebind, old key refused ({status}) on {}", ctx.name());
}
