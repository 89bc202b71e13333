//! Device clock: converting CQE timestamps to nanoseconds.

use crate::bindings as ffi;

/// `struct mlx5dv_clock_info`, from `mlx5dv_get_clock_info`.
pub type ClockInfo = ffi::mlx5dv_clock_info;

/// Converts a free-running device timestamp to nanoseconds, as
/// `mlx5dv_ts_to_ns` does: timestamps up to half the counter's range before
/// `last_cycles` count as earlier, the rest as later. A `shift` of 64 or
/// more (undefined in C; no device reports one) shifts everything out.
#[inline]
pub fn ts_to_ns(ci: &ClockInfo, device_timestamp: u64) -> u64 {
    let shr = |v: u64| v.checked_shr(ci.shift).unwrap_or(0);
    let delta = device_timestamp.wrapping_sub(ci.last_cycles) & ci.mask;
    if delta > ci.mask / 2 {
        let delta = ci.last_cycles.wrapping_sub(device_timestamp) & ci.mask;
        ci.nsec.wrapping_sub(shr(delta.wrapping_mul(u64::from(ci.mult)).wrapping_sub(ci.frac)))
    } else {
        ci.nsec.wrapping_add(shr(delta.wrapping_mul(u64::from(ci.mult)).wrapping_add(ci.frac)))
    }
}
