//! A counting global allocator: allocations made by a thread while it is
//! inside a measured loop are counted, so the tool can prove (and insist)
//! that its data path allocates nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting what measured loops allocate.
pub struct Counting;

static IN_LOOP_ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

fn note() {
    // `try_with`: the thread-local may already be gone while a thread exits.
    if MEASURING.try_with(Cell::get).unwrap_or(false) {
        IN_LOOP_ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// bookkeeping touches only an atomic and a const-initialised thread-local,
// neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Marks the calling thread as inside (or outside) a measured loop.
pub fn measuring(on: bool) {
    MEASURING.with(|m| m.set(on));
}

/// Allocations made inside measured loops so far, by any thread.
pub fn in_loop_allocations() -> u64 {
    IN_LOOP_ALLOCS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_inside_measured_loops() {
        let before = in_loop_allocations();
        let outside = vec![1u8; 64];
        assert_eq!(in_loop_allocations(), before, "outside a loop nothing is counted");
        measuring(true);
        let inside = vec![2u8; 64];
        measuring(false);
        assert!(in_loop_allocations() > before, "an allocation inside a loop is counted");
        drop((outside, inside));
    }
}
