//! The frame decoder on arbitrary bytes, whole and split at an arbitrary point:
//! it must never panic, must agree with itself however the bytes arrive, and
//! every message it yields must re-encode to the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rrddmma::ctrl::wire::{decode_all, Decoder, Msg};

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
    // What decoded re-encodes to the same prefix (reject reasons may be re-cut
    // only if they were not valid UTF-8).
    let encoded: Vec<u8> = whole.iter().flat_map(Msg::encode).collect();
    let lossless = whole.iter().all(|m| !matches!(m, Msg::Reject { reason, .. } if reason.contains('\u{fffd}')));
    if lossless {
        assert_eq!(&data[..encoded.len()], &encoded[..]);
    }
});
