//! perftest's rate limiter: `--rate_limit R` with `--rate_units` (M, g, p),
//! `--rate_limit_type` (SW, HW) and `--burst_size`. SW paces the bandwidth
//! loop in bursts ([`Pacer`]); HW asks the device to pace each sending QP
//! (`Qp::set_rate_limit`, packet pacing).

use std::time::{Duration, Instant};

/// Who enforces the limit (`--rate_limit_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateKind {
    /// The bandwidth loop: a burst of requests, then a wait until the
    /// burst's time is up (perftest's `SW`).
    Sw,
    /// The device: packet pacing on each sending QP (`HW`).
    Hw,
}

/// The unit of `--rate_limit` (`--rate_units`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateUnits {
    /// MiB/s (perftest's `M`).
    MiBps,
    /// Gb/s, 10^9 bit (perftest's `g`, the default).
    Gbps,
    /// Messages per second (perftest's `p`).
    Pps,
}

/// A rate limit as the command line gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    /// `--rate_limit`, in [`Rate::units`].
    pub value: f64,
    pub units: RateUnits,
    pub kind: RateKind,
    /// Whether `--rate_limit_type` was given: without it a device that
    /// refuses HW pacing falls back to SW, as perftest does.
    pub kind_given: bool,
    /// Requests per burst (`--burst_size`; default the tx depth).
    pub burst: u32,
}

impl Rate {
    /// Messages per second for `size`-byte messages (perftest's `rate_limit_pps`).
    pub fn pps(&self, size: usize) -> f64 {
        let size = size.max(1) as f64;
        match self.units {
            RateUnits::MiBps => self.value * 1_048_576.0 / size,
            RateUnits::Gbps => self.value * 1e9 / (size * 8.0),
            RateUnits::Pps => self.value,
        }
    }

    /// The limit in kilobits per second, for the device's packet pacing
    /// (a rate in messages per second has no bit rate: refused, as perftest
    /// refuses `p` with its HW limiter).
    pub fn kbps(&self) -> Result<u32, String> {
        let kbps = match self.units {
            RateUnits::MiBps => self.value * 1_048_576.0 * 8.0 / 1000.0,
            RateUnits::Gbps => self.value * 1e6,
            RateUnits::Pps => {
                return Err("--rate_units p with --rate_limit_type HW: the device paces bits per second, not \
                            messages; give --rate_units M or g, or use --rate_limit_type SW"
                    .into())
            }
        };
        if !(1.0..=f64::from(u32::MAX)).contains(&kbps.round()) {
            return Err(format!(
                "--rate_limit {}: {kbps} kbit/s is outside what the device's pacing takes (1 to {} kbit/s)",
                self.value,
                u32::MAX
            ));
        }
        Ok(kbps.round() as u32)
    }

    /// How the limit reads in the run's first lines.
    pub fn describe(&self) -> String {
        let unit = match self.units {
            RateUnits::MiBps => "MiB/s",
            RateUnits::Gbps => "Gb/s",
            RateUnits::Pps => "messages/s",
        };
        match self.kind {
            RateKind::Sw => format!("{} {unit}, paced in software in bursts of {}", self.value, self.burst),
            RateKind::Hw => format!("{} {unit}, paced by the device (packet pacing)", self.value),
        }
    }
}

/// SW pacing of one bandwidth thread, as perftest's `run_iter_bw`: a burst
/// of `burst` requests may be posted at once; the next burst starts no
/// earlier than `gap` after the previous one started, `gap` being the time
/// `burst` messages take at the limit.
pub struct Pacer {
    gap: Duration,
    next: Instant,
    left: u64,
    burst: u64,
}

impl Pacer {
    /// The pacing of one of `threads` threads sending `size`-byte messages
    /// (each thread takes an equal share of the limit).
    pub fn new(rate: &Rate, size: usize, threads: u32) -> Pacer {
        let pps = rate.pps(size) / f64::from(threads.max(1));
        let burst = u64::from(rate.burst.max(1));
        let gap = Duration::try_from_secs_f64(burst as f64 / pps).unwrap_or(Duration::MAX);
        Pacer { gap, next: Instant::now(), left: 0, burst }
    }

    /// Whether a request may be posted now: inside a burst, or a new burst
    /// starts (its time was up).
    #[inline]
    pub fn may_post(&mut self) -> bool {
        if self.left > 0 {
            return true;
        }
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now.checked_add(self.gap).unwrap_or(now);
        self.left = self.burst;
        true
    }

    /// `n` requests were posted.
    #[inline]
    pub fn posted(&mut self, n: u64) {
        self.left = self.left.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(value: f64, units: RateUnits, burst: u32) -> Rate {
        Rate { value, units, kind: RateKind::Sw, kind_given: true, burst }
    }

    #[test]
    fn units_as_perftest_converts_them() {
        assert_eq!(rate(10.0, RateUnits::MiBps, 1).pps(4096), 2560.0);
        assert_eq!(rate(1.0, RateUnits::Gbps, 1).pps(1000), 125_000.0);
        assert_eq!(rate(500.0, RateUnits::Pps, 1).pps(65536), 500.0);
        assert_eq!(rate(1.0, RateUnits::Gbps, 1).kbps(), Ok(1_000_000));
        assert_eq!(rate(1.0, RateUnits::MiBps, 1).kbps(), Ok(8389));
        assert!(rate(5.0, RateUnits::Pps, 1).kbps().unwrap_err().contains("--rate_limit_type SW"));
        assert!(rate(1e-9, RateUnits::Gbps, 1).kbps().unwrap_err().contains("outside"));
    }

    /// 200 posts at 1000 messages/s in bursts of 10 take about 0.19 s: 19
    /// gaps of 10 ms after the first burst (the upper bound is loose for a
    /// loaded machine; a pacer that does not wait fails the lower one).
    #[test]
    fn bursts_are_spaced_by_the_limit() {
        let mut p = Pacer::new(&rate(1000.0, RateUnits::Pps, 10), 64, 1);
        let start = Instant::now();
        let mut posted = 0u64;
        let mut refused = 0u64;
        while posted < 200 {
            if p.may_post() {
                p.posted(1);
                posted += 1;
            } else {
                refused += 1;
            }
        }
        let t = start.elapsed();
        assert!(t >= Duration::from_millis(190), "{t:?}");
        assert!(t < Duration::from_secs(2), "{t:?}");
        assert!(refused > 0);
        // Two threads share the limit: each burst's gap doubles.
        assert_eq!(Pacer::new(&rate(1000.0, RateUnits::Pps, 10), 64, 2).gap, Duration::from_millis(20));
    }
}
