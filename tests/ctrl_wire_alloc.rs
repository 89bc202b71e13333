//! What decoding one frame makes this process allocate, measured with a
//! counting global allocator. A peer chooses every byte of a frame, so the
//! memory its decoding holds must be bounded by the frame itself, not by a
//! count the peer declares in it.
//!
//! This binary holds a single test so that no other test's allocations are
//! counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rrddmma::ctrl::wire::{Decoder, Msg, HEADER_LEN, MAGIC, VERSION};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are only updated beside it and never affect what is returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` above (so from `System`) with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// A gathered frame of `payload` bytes whose count is the largest the
/// payload can hold: every part empty, each costing only its 4-byte length.
fn largest_count_frame(payload: usize) -> Vec<u8> {
    let n = (payload - 8) / 4;
    let mut f = MAGIC.to_vec();
    f.extend_from_slice(&[VERSION, 5, 0, 0]);
    f.extend_from_slice(&((8 + 4 * n) as u32).to_be_bytes());
    f.extend_from_slice(&0u32.to_be_bytes());
    f.extend_from_slice(&(n as u32).to_be_bytes());
    f.extend(std::iter::repeat_n(0u8, 4 * n));
    f
}

#[test]
fn regression_gathered_count_cannot_reserve_more_than_the_frame() {
    let payload = 1 << 20;
    let frame = largest_count_frame(payload);
    let mut d = Decoder::new(payload as u32);
    d.feed(&frame);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let msg = d.next_msg().expect("a well-formed frame").expect("a whole frame");
    let held = LIVE.load(Ordering::Relaxed).saturating_sub(base);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    let Msg::Gathered { round: 0, parts } = &msg else { panic!("not a gathered frame: {msg:?}") };
    assert_eq!(parts.len(), (payload - 8) / 4);
    let limit = 2 * (frame.len() - HEADER_LEN);
    assert!(held <= limit, "decoding a {}-byte frame holds {held} bytes (limit {limit})", frame.len());
    assert!(peak <= limit, "decoding a {}-byte frame peaked at {peak} bytes (limit {limit})", frame.len());
    drop(msg);

    // Honest frames still decode, part for part.
    let parts: Vec<Vec<u8>> = vec![b"rank 0".to_vec(), vec![], vec![7; 300]];
    let honest = rrddmma::ctrl::wire::encode_gathered(4, &parts);
    let mut d = Decoder::new(4096);
    d.feed(&honest);
    let Some(Msg::Gathered { round: 4, parts: got }) = d.next_msg().unwrap() else { panic!("not decoded") };
    assert_eq!(got.len(), 3);
    assert_eq!(got.to_vecs(), parts);
    assert_eq!(Msg::Gathered { round: 4, parts: got }.encode(), honest);
}
