//! Implicit on-demand paging on ConnectX: one region over the whole
//! address space (`Mr::register_implicit_odp`), through which a peer
//! WRITEs, READs and fetch-and-adds pages the process never registered nor
//! touched, and through which a local READ lands as well.
//!
//! Off mlx5, or on a ConnectX whose kernel or firmware reports no implicit
//! ODP, the test skips through `mlx5_test_skips` (a failure under
//! `--expect mlx5`). SoftRoCE's refusal is asserted by
//! `newer_kernel::odp_prefetch_and_implicit_odp_work_or_are_unsupported`.
//! Written for hardware, never run on it here.

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv;
use rrddmma::prim::{AccessFlags, Cq, Mr, Pd, QpCaps, SendWr, WcOpcode, WcStatus};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{mlx5_test_skips, open_device, opts, poll_one, Buf};

const PAGE: usize = 4096;
/// Fresh anonymous memory: the allocator maps it untouched.
const SPAN: usize = 1 << 20;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn implicit_odp_takes_write_read_and_fetch_add_on_untouched_pages_on_mlx5() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    let attr = ctx.query_device_ex().unwrap();
    let general = attr.odp_caps.general_caps;
    let bit = |b: ffi::ibv_odp_general_caps| general & u64::from(b.0) != 0;
    let rc = attr.odp_caps.per_transport_caps.rc_odp_caps;
    let wanted = ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_WRITE.0
        | ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_READ.0
        | ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_ATOMIC.0;
    let implicit = bit(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT)
        && bit(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT_IMPLICIT)
        && rc & wanted == wanted;
    if !implicit
        && mlx5_test_skips(&format!(
            "{}: no implicit ODP for RC WRITE, READ and atomics (general_caps {general:#x}, rc_odp_caps {rc:#x}; \
             the kernel needs CONFIG_INFINIBAND_ON_DEMAND_PAGING)",
            ctx.name()
        ))
    {
        return;
    }
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let access =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let mut block = vec![0u8; SPAN + PAGE].into_boxed_slice();
    let skip = block.as_ptr().align_offset(PAGE);
    let base = block[skip..].as_mut_ptr() as usize;
    // SAFETY: the region's keys go to the requests below only, each into
    // `block` (or `src`), which outlive it: the region drops first.
    let whole = unsafe { Mr::register_implicit_odp(&pd, access) }.unwrap();
    assert_eq!((whole.addr(), whole.len()), (0, usize::MAX));
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0x1dc, &opts(&ctx)).unwrap();
    let mut src = Buf::new(&pd, PAGE);
    let far = whole.remote();

    // WRITE into an untouched page, by its virtual address.
    for (i, b) in src.bytes()[..256].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(13) ^ 0x3c;
    }
    let written = src.bytes()[..256].to_vec();
    let s = [src.mr.sge_at(0, 256)];
    // SAFETY: `src` and `block` outlive the completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, far.addr_at(base + 3 * PAGE)).wr_id(1).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (1, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE), "{wc:?}");

    // READ it back, and READ a page nobody touched (zeros).
    src.bytes().fill(0xee);
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::read(&s, far.addr_at(base + 3 * PAGE)).wr_id(2).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (2, WcStatus::SUCCESS, WcOpcode::RDMA_READ), "{wc:?}");
    assert_eq!(&src.bytes()[..256], &written[..], "READ through the implicit region");
    src.bytes().fill(0xee);
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::read(&s, far.addr_at(base + SPAN / 2)).wr_id(3).signaled()]) }.unwrap();
    assert_eq!(poll_one(&cq).status(), WcStatus::SUCCESS);
    assert!(src.bytes()[..256].iter().all(|&b| b == 0), "an untouched page reads as zeros");

    // Fetch-and-add on another untouched page: old value 0.
    let old = [src.mr.sge_at(0, 8)];
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::fetch_add(&old, far.addr_at(base + SPAN / 4), 41).wr_id(4).signaled()]) }
        .unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status(), wc.opcode()), (4, WcStatus::SUCCESS, WcOpcode::FETCH_ADD), "{wc:?}");
    assert_eq!(u64::from_ne_bytes(src.bytes()[..8].try_into().unwrap()), 0);

    // The implicit region as the local side: a READ of `src` lands in an
    // untouched page named by its address under the implicit key.
    src.bytes()[..64].fill(0x77);
    let local = [whole.sge_at(base + 5 * PAGE, 64)];
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::read(&local, src.mr.remote().addr_at(0)).wr_id(5).signaled()]) }.unwrap();
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (5, WcStatus::SUCCESS), "{wc:?}");

    drop(whole);
    let mem = &block[skip..skip + SPAN];
    assert_eq!(&mem[3 * PAGE..3 * PAGE + 256], &written[..], "the WRITE landed in process memory");
    let q = SPAN / 4;
    assert_eq!(u64::from_ne_bytes(mem[q..q + 8].try_into().unwrap()), 41, "the atomic landed in process memory");
    assert!(mem[5 * PAGE..5 * PAGE + 64].iter().all(|&b| b == 0x77), "the READ landed through the local key");
    eprintln!("{}: implicit ODP WRITE, READ, FETCH_ADD and a local READ on untouched pages", ctx.name());
}
