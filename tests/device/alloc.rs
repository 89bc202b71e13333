//! The data path allocates nothing: 10,000 work requests posted and polled,
//! one by one and in batches, classic and extended, under a counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rrddmma::prim::{Cq, QpCaps, SendWr, Sge, Wc, WcFlagsEx, WcStatus};

use crate::common::Loopback;
use rrddmma::prim::QpType;

/// Counts this thread's allocations; passes everything to the system allocator.
pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`, only adding a thread-local counter (const
// initialised, so counting itself never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// The counter sees this thread's allocations (so a zero below means something).
fn assert_counting() {
    let before = allocations();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(16)));
    assert!(allocations() > before, "the counting allocator is not installed");
}

const N: usize = 10_000;
const BATCH: usize = 16;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn posting_and_polling_allocate_nothing() {
    let lb = Loopback::new(QpCaps::default().max_send_wr(2 * BATCH as u32));
    let sges: [[Sge; 1]; BATCH] = std::array::from_fn(|i| [lb.mr_a.sge_at(i * 64, 64)]);
    let remote = lb.mr_b.remote();
    let mut wcs = [Wc::default(); BATCH];

    assert_counting();
    let before = allocations();
    // One request at a time, each signalled.
    for i in 0..N {
        let wr = SendWr::write(&sges[i % BATCH], remote.addr_at((i % BATCH) * 64)).wr_id(i as u64).signaled();
        // SAFETY: entries in registered memory, alive until completion.
        unsafe { lb.qa.post_send(&mut [wr]) }.unwrap();
        loop {
            let n = lb.cq.poll(&mut wcs).unwrap();
            if n == 1 {
                assert_eq!(wcs[0].status(), WcStatus::SUCCESS);
                break;
            }
        }
    }
    // Batches of 16 with one doorbell, only the last signalled.
    for b in 0..N / BATCH {
        let mut wrs: [SendWr<'_>; BATCH] =
            std::array::from_fn(|i| SendWr::write(&sges[i], remote.addr_at(i * 64)).wr_id((b * BATCH + i) as u64));
        wrs[BATCH - 1] = wrs[BATCH - 1].signaled();
        // SAFETY: as above.
        unsafe { lb.qa.post_send(&mut wrs) }.unwrap();
        while lb.cq.poll(&mut wcs).unwrap() == 0 {}
    }
    let classic = allocations() - before;
    assert_eq!(classic, 0, "the classic post/poll path allocated {classic} times");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn extended_post_and_poll_allocate_nothing() {
    let ctx = crate::common::open_device();
    let pd = rrddmma::prim::Pd::alloc(&ctx).unwrap();
    let cq = Cq::builder(&ctx, 64).extended(WcFlagsEx::STANDARD).build().unwrap();
    let caps = QpCaps::default().max_send_wr(2 * BATCH as u32);
    let o = crate::common::opts(&ctx);
    let build = || {
        rrddmma::prim::Qp::builder(&pd, QpType::RC, &cq, &cq)
            .caps(caps)
            .send_ops(rrddmma::prim::SendOps::BASIC)
            .build()
            .unwrap()
    };
    let (qa, qb) = (build(), build());
    crate::common::connect_pair(&qa, &qb, &o, (1, 2));
    let a = crate::common::Buf::new(&pd, BATCH * 64);
    let b = crate::common::Buf::new(&pd, BATCH * 64);
    let sges: [[Sge; 1]; BATCH] = std::array::from_fn(|i| [a.mr.sge_at(i * 64, 64)]);
    let remote = b.mr.remote();

    assert_counting();
    let before = allocations();
    let mut done = 0;
    for round in 0..N / BATCH {
        // SAFETY: entries in registered memory, alive until completion.
        let mut batch = unsafe { qa.wr_batch() };
        for (i, s) in sges.iter().enumerate() {
            let mut wr = SendWr::write(s, remote.addr_at(i * 64)).wr_id((round * BATCH + i) as u64);
            if i == BATCH - 1 {
                wr = wr.signaled();
            }
            // SAFETY: as above.
            unsafe { batch.post(&wr) }.unwrap();
        }
        batch.complete().unwrap();
        let mut got = 0;
        while got == 0 {
            let mut pass = cq.start_poll().unwrap();
            while let Some(p) = pass {
                assert_eq!(p.wc().status(), WcStatus::SUCCESS);
                got += 1;
                pass = p.advance().unwrap();
            }
        }
        done += got;
    }
    let extended = allocations() - before;
    assert_eq!(done, N / BATCH);
    assert_eq!(extended, 0, "the extended post/poll path allocated {extended} times");
}
