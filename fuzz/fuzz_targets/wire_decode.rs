//! The frame decoder on arbitrary bytes, whole and split at an arbitrary point:
//! it must never panic, must agree with itself however the bytes arrive, and
//! every message it yields must re-encode to the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rrddmma::ctrl::wire::{decode_all, Decoder, Msg, MAX_REASON};
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
    // What decoded re-encodes to the bytes it came from, but for rejects: they
    // are read from any version, unknown codes become `Unknown`, and reasons
    // are cut to MAX_REASON bytes and read lossily as UTF-8.
    let mut off = 0;
    for m in &whole {
        let len = 12 + u32::from_be_bytes(data[off + 8..off + 12].try_into().unwrap()) as usize;
        let frame = &data[off..off + len];
        let e = m.encode();
        match m {
            Msg::Reject { code, reason, .. } => {
                assert!(reason.len() <= MAX_REASON);
                assert_eq!(&frame[..4], &e[..4]);
                if *code != RejectCode::Unknown {
                    assert_eq!(frame[12], e[12]);
                }
                assert_eq!(&frame[13..17], &e[13..17]);
                if !reason.contains('\u{fffd}') {
                    assert!(frame[17..].starts_with(reason.as_bytes()));
                }
            }
            _ => assert_eq!(frame, &e[..]),
        }
        off += len;
    }
});
