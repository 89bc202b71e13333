//! The device's free-running clock through verbs: reading it
//! (`ibv_query_rt_values_ex`) and converting its ticks (completion
//! timestamps among them) to nanoseconds with the core clock frequency the
//! device reports (`hca_core_clock`). Present on ConnectX; reported as
//! [`Error::Unsupported`] by providers without a device clock (rxe among
//! them).
//!
//! The conversion is the plain one perftest and the verbs man pages use:
//! ticks × 10⁶ / kHz. It is exact for durations (the difference of two
//! timestamps); [`crate::mlx5dv::clock`] converts absolute mlx5 timestamps
//! to the host's time with the driver's adjusted clock information.

use super::device::Context;
use super::error::{Error, Result};
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::bindings as ffi;

/// The frequency of the device's core clock, which counts completion
/// timestamps ([`ExWc::completion_ts`](super::ExWc::completion_ts)) and
/// [`Context::raw_clock`] readings. From [`Context::core_clock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreClock {
    khz: u64,
    mask: u64,
}

impl CoreClock {
    /// A clock of `khz` kilohertz whose counter keeps the bits of `mask`
    /// (`completion_timestamp_mask`; 0 is read as all 64 bits).
    ///
    /// # Panics
    /// If `khz` is 0 (a device without a clock has no [`CoreClock`]).
    pub const fn new(khz: u64, mask: u64) -> CoreClock {
        assert!(khz > 0, "CoreClock::new: a clock of 0 kHz counts nothing");
        CoreClock { khz, mask: if mask == 0 { u64::MAX } else { mask } }
    }

    /// The frequency in kilohertz (`hca_core_clock`).
    pub const fn khz(&self) -> u64 {
        self.khz
    }

    /// The bits the counter keeps (`completion_timestamp_mask`).
    pub const fn mask(&self) -> u64 {
        self.mask
    }

    /// `ticks` of this clock in nanoseconds (rounded down; no overflow: the
    /// product is taken in 128 bits and saturates at `u64::MAX`).
    pub const fn ticks_to_ns(&self, ticks: u64) -> u64 {
        let ns = ticks as u128 * 1_000_000 / self.khz as u128;
        if ns > u64::MAX as u128 {
            u64::MAX
        } else {
            ns as u64
        }
    }

    /// Nanoseconds from timestamp `earlier` to timestamp `later`, taken
    /// modulo the counter's width (one wrap-around between them is
    /// allowed for).
    pub const fn elapsed_ns(&self, earlier: u64, later: u64) -> u64 {
        self.ticks_to_ns(later.wrapping_sub(earlier) & self.mask)
    }
}

impl Context {
    /// The device's core clock (`hca_core_clock` and
    /// `completion_timestamp_mask` of `ibv_query_device_ex`).
    /// [`Error::Unsupported`] (feature `device core clock`) when the device
    /// reports none (a frequency of 0).
    ///
    /// # References
    /// `ibv_query_device_ex(3)`
    pub fn core_clock(&self) -> Result<CoreClock> {
        let attr = self.query_device_ex()?;
        if attr.hca_core_clock == 0 {
            return Err(Error::unsupported(
                "ibv_query_device_ex",
                &crate::prim::unsupported::CLOCK,
                self.name(),
                "hca_core_clock 0",
            ));
        }
        Ok(CoreClock::new(attr.hca_core_clock, attr.completion_timestamp_mask))
    }

    /// Reads the device's free-running clock now, in its ticks (mlx5 reports
    /// the cycle counter; the value is `tv_sec` × 10⁹ + `tv_nsec` of the
    /// `raw_clock` the provider fills in). [`Error::Unsupported`] (feature
    /// `device clock`) when the provider has no clock to read.
    ///
    /// # References
    /// `ibv_query_rt_values_ex(3)`
    #[doc(alias = "ibv_query_rt_values_ex")]
    pub fn raw_clock(&self) -> Result<u64> {
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            Err(Error::unsupported(
                "ibv_query_rt_values_ex",
                &crate::prim::unsupported::OFED4,
                self.name(),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let mut v = ffi::ibv_values_ex {
                comp_mask: ffi::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK.0,
                ..Default::default()
            };
            // SAFETY: live context; `v` is valid for the call.
            let rc = unsafe { ffi::ibv_query_rt_values_ex(self.as_ptr(), &mut v) };
            if rc != 0 {
                return Err(
                    Error::code("ibv_query_rt_values_ex", rc).lacking(&crate::prim::unsupported::CLOCK, self.name())
                );
            }
            if v.comp_mask & ffi::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK.0 == 0 {
                return Err(Error::unsupported(
                    "ibv_query_rt_values_ex",
                    &crate::prim::unsupported::CLOCK,
                    self.name(),
                    "no raw_clock",
                ));
            }
            let secs = u64::try_from(v.raw_clock.tv_sec).unwrap_or(0);
            let nsecs = u64::try_from(v.raw_clock.tv_nsec).unwrap_or(0);
            Ok(secs.wrapping_mul(1_000_000_000).wrapping_add(nsecs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CoreClock;

    #[test]
    fn ticks_convert_at_the_reported_frequency() {
        // ConnectX-5 reports 156,250 kHz: 156.25 ticks per microsecond.
        let c = CoreClock::new(156_250, (1 << 63) - 1);
        assert_eq!(c.ticks_to_ns(156_250), 1_000_000);
        assert_eq!(c.ticks_to_ns(15_625), 100_000);
        assert_eq!(c.ticks_to_ns(1), 6, "rounded down: 6.4 ns");
        assert_eq!(c.ticks_to_ns(u64::MAX), u64::MAX, "saturates instead of overflowing");
        assert_eq!(c.elapsed_ns(1000, 1000 + 156_250), 1_000_000);
        // A 48-bit counter that wrapped between the two stamps.
        let c = CoreClock::new(1_000_000, (1 << 48) - 1);
        assert_eq!(c.elapsed_ns((1 << 48) - 10, 5), 15);
        assert_eq!(CoreClock::new(1000, 0).mask(), u64::MAX);
    }

    #[test]
    #[should_panic(expected = "a clock of 0 kHz counts nothing")]
    fn a_clock_of_zero_khz_is_a_programming_error() {
        let _ = CoreClock::new(0, 0);
    }
}
