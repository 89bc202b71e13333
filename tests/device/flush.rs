//! FLUSH (`ibv_wr_flush`): SoftRoCE executes it since Linux 6.2; the
//! provider's `wr_flush` came after rdma-core 44. So it runs under the
//! newest kernel with rdma-core v59, and is a typed `Unsupported` under
//! Debian stable's kernel (the device does not report it) and under the
//! newest kernel with rdma-core 44 (the provider refuses the send-op flag).

use rrddmma::prim::{
    AccessFlags, ConnectOpts, Cq, Error, FlushLevel, FlushPlacement, Pd, Qp, QpType, SendFlags, SendOps, SendWr,
    WcOpcode, WcStatus,
};

use crate::common::{connect_pair, kernel, kernel_version, open_device, poll_one, Buf};
use crate::userspace::userspace;

/// `IB_UVERBS_DEVICE_FLUSH_GLOBAL | IB_UVERBS_DEVICE_FLUSH_PERSISTENT`.
const DEVICE_FLUSH: u64 = (1 << 38) | (1 << 39);

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn flush_after_write_completes_and_the_data_is_there_or_is_unsupported() {
    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let reported = attr.device_cap_flags_ex & DEVICE_FLUSH != 0;
    let rxe = attr.orig_attr.vendor_id == 0xff_ffff;
    let release = userspace();
    if rxe {
        assert_eq!(reported, kernel_version() >= (6, 2), "rxe's FLUSH capability under kernel {}", kernel());
    }
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let ops = SendOps::BASIC | SendOps::FLUSH;
    let built = Qp::builder(&pd, QpType::RC, &cq, &cq).send_ops(ops).build();
    let expected = reported && (!rxe || release >= 45);
    if !expected {
        let e = built.unwrap_err();
        let row = if reported { "FLUSH_PROVIDER" } else { "FLUSH" };
        assert!(
            matches!(&e, Error::Unsupported { op: "ibv_create_qp_ex", lack, .. } if lack.missing.name == row),
            "{e:?}"
        );
        eprintln!("flush: typed Unsupported on {} under kernel {} + rdma-core {release}: {e}", ctx.name(), kernel());
        return;
    }
    let qa = built.expect("an extended QP with FLUSH on a device and provider that have it");
    let qb = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    // The responder QP must allow FLUSH too (rxe checks the QP's access
    // flags for the placement type, then the region's).
    let o = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::FLUSH_GLOBAL);
    connect_pair(&qa, &qb, &o, (21, 22));

    // The target region takes FLUSH to global visibility.
    let mut target = vec![0u8; 4096].into_boxed_slice();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::FLUSH_GLOBAL;
    // SAFETY: `target` outlives the region (dropped first, below).
    let mr = unsafe { rrddmma::prim::Mr::register(&pd, target.as_mut_ptr(), target.len(), access) }
        .expect("ibv_reg_mr with IBV_ACCESS_FLUSH_GLOBAL");
    let mut src = Buf::new(&pd, 4096);
    for (i, b) in src.bytes().iter_mut().enumerate() {
        *b = (i % 253) as u8 ^ 0xc3;
    }
    let expected_bytes = src.bytes()[..512].to_vec();
    let s = [src.mr.sge_at(0, 512)];
    // SAFETY: `src` and `target` outlive the completions below.
    unsafe { qa.post_send(&mut [SendWr::write(&s, mr.remote().addr_at(256)).wr_id(1)]) }.unwrap();
    // SAFETY: FLUSH names no local memory.
    let mut batch = unsafe { qa.wr_batch() };
    batch
        .flush(2, SendFlags::SIGNALED, mr.remote().addr_at(256), 512, FlushPlacement::Global, FlushLevel::Range)
        .expect("ibv_wr_flush");
    batch.complete().expect("ibv_wr_complete");
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (2, WcStatus::SUCCESS, WcOpcode::FLUSH));

    // The whole region, too.
    // SAFETY: as above.
    let mut batch = unsafe { qa.wr_batch() };
    batch.flush(3, SendFlags::SIGNALED, mr.remote().addr_at(0), 0, FlushPlacement::Global, FlushLevel::Region).unwrap();
    batch.complete().unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (3, WcStatus::SUCCESS, WcOpcode::FLUSH));
    drop(mr);
    assert_eq!(&target[256..768], &expected_bytes[..], "the WRITE before the FLUSH landed");
    assert!(target[..256].iter().chain(&target[768..]).all(|&b| b == 0), "nothing beside it changed");
    eprintln!(
        "flush: WRITE then FLUSH (range and region) on {} under kernel {} + rdma-core {release}",
        ctx.name(),
        kernel()
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
#[should_panic(expected = "WrBatch::flush on a QP built without SendOps::FLUSH")]
fn flush_on_a_qp_without_the_send_op_is_a_programming_error() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let qa = Qp::builder(&pd, QpType::RC, &cq, &cq).send_ops(SendOps::BASIC).build().unwrap();
    let remote = rrddmma::prim::RemoteAddr { addr: 0, rkey: 0 };
    // SAFETY: nothing is posted (the call panics first; the batch is aborted).
    let mut batch = unsafe { qa.wr_batch() };
    let _ = batch.flush(1, SendFlags::SIGNALED, remote, 8, FlushPlacement::Global, FlushLevel::Range);
}
