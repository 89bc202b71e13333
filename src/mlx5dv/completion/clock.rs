//! Device clock: converting CQE timestamps to nanoseconds.
//!
//! A CQE's timestamp (bytes 48-55 of a successful CQE, [`Completion::timestamp`])
//! comes in one of two formats, chosen per CQ when it is created:
//! - **free-running**: cycles of the device's core clock, converted with the
//!   clock parameters the kernel keeps up to date (`mlx5dv_get_clock_info`,
//!   [`ts_to_ns`]);
//! - **real time**: the high 32 bits are seconds and the low 32 bits
//!   nanoseconds of the device's real-time clock ([`real_time_to_ns`]), the
//!   format the kernel's mlx5 core reads such timestamps in. A device that
//!   offers it says `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`; libmlx5 then asks
//!   for it on a CQ created extended with
//!   [`WcFlagsEx::COMPLETION_TIMESTAMP_WALLCLOCK`] and without
//!   [`WcFlagsEx::COMPLETION_TIMESTAMP`] (and nowhere else).
//!
//! [`Clock`] knows both: made once from the context, it converts a CQ's
//! timestamps in that CQ's format. Every mlx5 CQ carries a timestamp in its
//! successful CQEs (the direct view reads them whatever the CQ was created
//! with); an error CQE has none (its bytes 54-55 hold the syndrome).

use crate::bindings as ffi;
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::prim::{Context, Cq, Result, WcFlagsEx, WcStatus};

#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::mlx5dv::completion::cqe::Completion;

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

/// Converts a real-time device timestamp (seconds in the high 32 bits,
/// nanoseconds in the low 32) to nanoseconds. Any value converts (a
/// nanosecond field past 10^9, which no device writes, adds as it is; the
/// sum wraps past `u64::MAX`).
#[inline]
pub const fn real_time_to_ns(device_timestamp: u64) -> u64 {
    (device_timestamp >> 32).wrapping_mul(1_000_000_000).wrapping_add(device_timestamp & 0xffff_ffff)
}

/// A device's clock, for turning its CQEs' timestamps into nanoseconds in
/// one call ([`Clock::completion_ns`]). Made once per context
/// ([`Clock::new`]); the free-running parameters are re-read at each
/// conversion (`mlx5dv_get_clock_info` reads a page the kernel keeps up to
/// date, without a system call), so the clock never goes stale.
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
#[derive(Debug, Clone)]
pub struct Clock {
    ctx: Context,
    real_time: bool,
}

#[cfg(not(rrddmma_mlnx_ofed4))]
impl Clock {
    /// The clock of `ctx`: whether the device stamps CQEs in real time
    /// where asked (`MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`). [`Error::Unsupported`](crate::prim::Error::Unsupported)
    /// on a device that is not mlx5 (decided before any other libmlx5 call).
    pub fn new(ctx: &Context) -> Result<Clock> {
        let attr = crate::mlx5dv::query_device(ctx)?;
        let flag = u64::from(ffi::mlx5dv_context_flags::MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS.0);
        Ok(Clock { ctx: ctx.clone(), real_time: attr.flags & flag != 0 })
    }

    /// Whether the device offers real-time timestamps
    /// (`MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`).
    pub fn real_time_capable(&self) -> bool {
        self.real_time
    }

    /// Whether `cq`'s CQEs carry real-time timestamps: the device offers
    /// them and `cq` was created with the flags for which libmlx5 asks for
    /// them (see the [module docs](self)).
    pub fn is_real_time(&self, cq: &Cq) -> bool {
        real_time_cq(self.real_time, cq.wc_flags())
    }

    /// The timestamp `ts` of a CQE of `cq` in nanoseconds: real time
    /// ([`real_time_to_ns`]) or free-running ([`ts_to_ns`] with the clock
    /// parameters read now).
    pub fn ns(&self, cq: &Cq, ts: u64) -> Result<u64> {
        if self.is_real_time(cq) {
            return Ok(real_time_to_ns(ts));
        }
        Ok(ts_to_ns(&crate::mlx5dv::clock_info(&self.ctx)?, ts))
    }

    /// The time a completion polled from `cq`'s direct view was stamped, in
    /// nanoseconds; `None` for an error completion (whose timestamp bytes
    /// hold the syndrome).
    pub fn completion_ns(&self, cq: &Cq, c: &Completion) -> Result<Option<u64>> {
        match stamp(c) {
            Some(ts) => self.ns(cq, ts).map(Some),
            None => Ok(None),
        }
    }
}

/// The timestamp bytes of `c` when they hold a timestamp: a successful
/// completion's; an error completion's hold the syndrome.
#[cfg(not(rrddmma_mlnx_ofed4))]
fn stamp(c: &Completion) -> Option<u64> {
    (c.status() == WcStatus::SUCCESS).then_some(c.timestamp())
}

/// Whether a CQ created with `flags` on a device that offers real-time
/// timestamps (`capable`) gets them: libmlx5 asks for them when the CQ
/// wants wall-clock nanoseconds and not raw cycles.
#[cfg(not(rrddmma_mlnx_ofed4))]
fn real_time_cq(capable: bool, flags: WcFlagsEx) -> bool {
    capable
        && flags.contains(WcFlagsEx::COMPLETION_TIMESTAMP_WALLCLOCK)
        && !flags.contains(WcFlagsEx::COMPLETION_TIMESTAMP)
}

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod tests {
    use super::*;

    /// Only a successful completion's timestamp bytes are a timestamp.
    #[test]
    fn only_successful_completions_carry_a_stamp() {
        use crate::mlx5dv::completion::cqe::{Cqe64, CqeOpcode, Syndrome};
        use crate::mlx5dv::queue::be::Be64;
        let cqe =
            |op: CqeOpcode, ts: u64| Cqe64 { timestamp: Be64::new(ts), op_own: op.to_raw() << 4, ..Cqe64::default() };
        let ok = cqe(CqeOpcode::REQ, 0x1234).decode();
        assert_eq!(stamp(&ok), Some(0x1234));
        for syndrome in [Syndrome::LOCAL_LENGTH_ERR, Syndrome::WR_FLUSH_ERR, Syndrome::REMOTE_ACCESS_ERR] {
            let err = cqe(CqeOpcode::REQ_ERR, 0x1200 | u64::from(syndrome.to_raw())).decode();
            assert_ne!(err.status(), WcStatus::SUCCESS);
            assert_eq!(stamp(&err), None, "{syndrome:?}: its timestamp bytes hold the syndrome");
        }
    }

    /// The documented format: seconds above, nanoseconds below.
    #[test]
    fn real_time_stamps_are_seconds_and_nanoseconds() {
        assert_eq!(real_time_to_ns(0), 0);
        assert_eq!(real_time_to_ns(1 << 32), 1_000_000_000);
        assert_eq!(real_time_to_ns((1_700_000_000 << 32) | 999_999_999), 1_700_000_000_999_999_999);
        assert_eq!(real_time_to_ns(5), 5);
        // The largest value wraps, never panics.
        let _ = real_time_to_ns(u64::MAX);
    }

    /// Real time only where libmlx5 asks the kernel for it.
    #[test]
    fn real_time_follows_the_device_flag_and_the_cq_flags() {
        let wall = WcFlagsEx::COMPLETION_TIMESTAMP_WALLCLOCK;
        let raw = WcFlagsEx::COMPLETION_TIMESTAMP;
        assert!(real_time_cq(true, wall));
        assert!(!real_time_cq(true, wall | raw));
        assert!(!real_time_cq(true, raw));
        assert!(!real_time_cq(true, WcFlagsEx::empty()));
        assert!(!real_time_cq(false, wall));
    }
}
