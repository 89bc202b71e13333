//! Payload checking (`--check-payload`): the sender writes a known pattern,
//! the receiver compares what arrived with it.
//!
//! Latency tests use a pattern per iteration (the iteration number is mixed
//! into every byte) and check every message inside the loop. Bandwidth tests
//! keep their source buffers fixed during the run (rewriting them would race
//! with requests in flight), so their pattern depends on the byte's position
//! in the buffer only, and the receiver checks every region the run wrote
//! after the run. `RRDDMMA_PERF_CORRUPT=1` makes the sending side flip one
//! byte on purpose, to show that a corrupted byte is caught.

/// The pattern byte of iteration `iter` at position `pos`.
#[inline(always)]
pub fn byte(iter: u64, pos: usize) -> u8 {
    let x = (iter as usize).wrapping_mul(0x9e37_79b9).wrapping_add(pos.wrapping_mul(131));
    (x ^ (x >> 11) ^ (pos >> 8)) as u8
}

/// Whether the sender should corrupt one byte on purpose.
pub fn corrupt_requested() -> bool {
    std::env::var_os("RRDDMMA_PERF_CORRUPT").is_some_and(|v| v == "1")
}

/// Writes the pattern of `iter` to `len` bytes at `ptr`, whose first byte is
/// at position `pos0` of the pattern.
///
/// # Safety
/// `ptr..ptr+len` lies in memory this process owns and no request in flight
/// reads it.
#[inline(always)]
pub unsafe fn fill(ptr: *mut u8, len: usize, iter: u64, pos0: usize) {
    for j in 0..len {
        // SAFETY: in bounds by the caller's contract; volatile because the
        // device reads the memory.
        unsafe { ptr.add(j).write_volatile(byte(iter, pos0 + j)) };
    }
}

/// Flips the first byte at `ptr` (the deliberate corruption).
///
/// # Safety
/// As for [`fill`], for one byte.
pub unsafe fn flip(ptr: *mut u8) {
    // SAFETY: by the caller's contract.
    unsafe { ptr.write_volatile(!ptr.read_volatile()) };
}

/// Compares `len` bytes at `ptr` (pattern positions from `pos0`) with the
/// pattern of `iter`; the error names `what`, the iteration, the byte and
/// both values.
///
/// # Safety
/// `ptr..ptr+len` lies in memory this process owns.
#[inline(always)]
pub unsafe fn verify(ptr: *const u8, len: usize, iter: u64, pos0: usize, what: &str) -> Result<(), String> {
    for j in 0..len {
        // SAFETY: in bounds by the caller's contract; volatile because the
        // device wrote the memory.
        let got = unsafe { ptr.add(j).read_volatile() };
        let want = byte(iter, pos0 + j);
        if got != want {
            return Err(mismatch(what, iter, j, want, got));
        }
    }
    Ok(())
}

#[cold]
fn mismatch(what: &str, iter: u64, j: usize, want: u8, got: u8) -> String {
    format!(
        "payload check failed: {what}, iteration {iter}, byte {j}: expected {want:#04x}, found {got:#04x} \
         (the data that arrived is not what the peer sent; both sides need --check-payload)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flipped_byte_is_named() {
        let mut b = vec![0u8; 300];
        // SAFETY: `b` is a live local buffer of 300 bytes.
        unsafe {
            fill(b.as_mut_ptr(), 300, 7, 0);
            verify(b.as_ptr(), 300, 7, 0, "x").unwrap();
            assert!(verify(b.as_ptr(), 300, 8, 0, "x").is_err(), "another iteration's pattern differs");
            flip(b.as_mut_ptr().add(257));
            let e = verify(b.as_ptr(), 300, 7, 0, "write lat").unwrap_err();
            assert!(e.contains("write lat, iteration 7, byte 257"), "{e}");
        }
    }
}
