//! A send ring over host memory for unit tests: the WQEs a builder writes
//! are read back from the buffer; no device is involved.

use super::be::Be32;
use super::sq::{SqLimits, SqRing};

/// A [`SqRing`] of `entries` 64-byte slots over host memory, with its
/// doorbell record and BlueFlame page, limits 60 inline bytes, 1 SGE and
/// 255 × 16 bytes per WQE. The buffers live as long as the ring.
pub(crate) struct HostRing {
    /// The slots, as the device would read them.
    pub buf: Vec<u64>,
    _dbrec: Box<[Be32; 2]>,
    _bf: Vec<u64>,
    /// The ring.
    pub sq: SqRing,
}

/// A [`HostRing`] of 16 slots, QPN 0x42.
pub(crate) fn host_ring() -> HostRing {
    let mut buf = vec![0u64; 16 * 8];
    let mut dbrec = Box::new([Be32::default(); 2]);
    let mut bf = vec![0u64; 8];
    // SAFETY: test memory of the sizes and alignments `from_raw` asks for,
    // owned by the same `HostRing` as `sq`, so it lives as long as the ring;
    // no device reads it, and the BlueFlame page is only ever written
    // through the ring.
    let mut sq =
        unsafe { SqRing::from_raw(buf.as_mut_ptr().cast(), 16, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42) };
    sq.set_limits(SqLimits::new(60, 1, 255 * 16));
    HostRing { buf, _dbrec: dbrec, _bf: bf, sq }
}
