//! The frame decoder on arbitrary bytes, whole and split at an arbitrary point:
//! it must never panic, must agree with itself however the bytes arrive, and
//! every message it yields must re-encode to the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rrddmma::ctrl::wire::{decode_all, Decoder, Msg};
use rrddmma::ctrl::RejectCode;

fuzz_target!(|data: &[u8]| {
    let cap = 1 << 16;
    let (whole, err) = decode_all(data, cap);
    // Split delivery yields the same messages.
    let split = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut d = Decoder::new(cap);
    let mut pieces = Vec::new();
    d.feed(&data[..split]);
    while let Ok(Some(m)) = d.next_msg() {
        pieces.push(m);
    }
    d.feed(&data[split..]);
    while let Ok(Some(m)) = d.next_msg() {
        pieces.push(m);
    }
    if err.is_none() {
        assert_eq!(whole, pieces);
    }
    // What decoded re-encodes to the bytes it came from, but for the version
    // byte (rejects of other versions are read, and re-encoded as ours),
    // reject codes this build does not know, and reasons that were not UTF-8.
    let mut off = 0;
    for m in &whole {
        let e = m.encode();
        let lossy = matches!(m, Msg::Reject { code, reason, .. }
            if *code == RejectCode::Unknown || reason.contains('\u{fffd}'));
        if !lossy {
            assert_eq!(&data[off..off + 4], &e[..4]);
            assert_eq!(&data[off + 5..off + e.len()], &e[5..]);
        }
        off +=
            if lossy { 12 + u32::from_be_bytes(data[off + 8..off + 12].try_into().unwrap()) as usize } else { e.len() };
    }
});
