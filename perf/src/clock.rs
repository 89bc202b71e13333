//! The latency clock: the time-stamp counter on x86-64 (as perftest's
//! `get_cycles`), else `Instant` (CLOCK_MONOTONIC).
//!
//! Ticks become nanoseconds at a rate measured over each run against
//! `Instant` (the run's first and last stamps), so the rate is right
//! whatever the TSC's nominal frequency. Whether the CPU calls the TSC
//! invariant (CPUID leaf 0x8000_0007, EDX bit 8) and the kernel agrees
//! (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo) is reported: where
//! it is not, a frequency change in the middle of a run would skew that
//! run's samples (the rate is an average over it). A virtual machine
//! usually does not report it, and there the monotonic clock is the worse
//! choice: its read can leave the vDSO for the hypervisor or the kernel,
//! and what it costs lands inside every sample (`read_cost_ns` measures
//! it; the tool prints both).

use std::time::Instant;

/// Which clock stamps the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The time-stamp counter (RDTSC), calibrated against `Instant` over
    /// each run.
    Tsc,
    /// `Instant` (CLOCK_MONOTONIC through the vDSO).
    Monotonic,
}

impl Clock {
    /// The clock of this machine: the TSC on x86-64, else monotonic.
    /// `RRDDMMA_PERF_CLOCK=monotonic` forces the monotonic clock.
    pub fn detect() -> Clock {
        if std::env::var("RRDDMMA_PERF_CLOCK").is_ok_and(|v| v == "monotonic") || !cfg!(target_arch = "x86_64") {
            return Clock::Monotonic;
        }
        Clock::Tsc
    }

    /// Whether the TSC is reported invariant (by the CPU and the kernel).
    pub fn tsc_invariant() -> bool {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        cpuid_invariant_tsc() && kernel_trusts_tsc(&flags)
    }

    /// What one read of this clock costs here, in nanoseconds (the mean of
    /// 10,000 reads, timed with `Instant`): the part of every latency
    /// sample that is the clock's.
    pub fn read_cost_ns(self) -> f64 {
        const READS: u32 = 10_000;
        let t0 = Instant::now();
        let mut sink = 0u64;
        for _ in 0..READS {
            sink = sink.wrapping_add(std::hint::black_box(self.ticks(t0)));
        }
        std::hint::black_box(sink);
        t0.elapsed().as_nanos() as f64 / f64::from(READS)
    }

    /// The first output line's description: the clock, whether the TSC is
    /// reported invariant, and the cost of a read.
    pub fn describe(self, read_ns: f64) -> String {
        match self {
            Clock::Tsc if Clock::tsc_invariant() => format!("tsc (invariant; a read {read_ns:.0} ns)"),
            Clock::Tsc => {
                format!("tsc (not reported invariant: its rate is measured over each run; a read {read_ns:.0} ns)")
            }
            Clock::Monotonic => format!("monotonic (a read {read_ns:.0} ns)"),
        }
    }

    /// The name shown in the output and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Clock::Tsc => "tsc",
            Clock::Monotonic => "monotonic",
        }
    }

    /// A timestamp: TSC ticks, or nanoseconds since `t0`.
    #[inline(always)]
    pub fn ticks(self, t0: Instant) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: RDTSC exists on every x86-64 CPU and only reads the
            // counter.
            Clock::Tsc => unsafe { std::arch::x86_64::_rdtsc() },
            _ => t0.elapsed().as_nanos() as u64,
        }
    }
}

/// CPUID 0x8000_0007 EDX bit 8: the TSC runs at a constant rate in every
/// P-, C- and T-state.
fn cpuid_invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0000 gives
        // the highest extended leaf, checked before 0x8000_0007 is read.
        #[allow(unused_unsafe)]
        let max = unsafe { __cpuid(0x8000_0000) }.eax;
        if max < 0x8000_0007 {
            return false;
        }
        // SAFETY: as above; the leaf is within range.
        #[allow(unused_unsafe)]
        let edx = unsafe { __cpuid(0x8000_0007) }.edx;
        edx & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether every CPU's `flags` line in /proc/cpuinfo has `constant_tsc` and
/// `nonstop_tsc`.
fn kernel_trusts_tsc(cpuinfo: &str) -> bool {
    let mut lines = cpuinfo.lines().filter(|l| l.starts_with("flags")).peekable();
    lines.peek().is_some()
        && lines.all(|l| {
            let mut words = l.split_once(':').map_or("", |(_, w)| w).split_whitespace();
            let (mut c, mut n) = (false, false);
            for w in &mut words {
                c |= w == "constant_tsc";
                n |= w == "nonstop_tsc";
            }
            c && n
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_flags_need_both_on_every_cpu() {
        let both = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc sse\n";
        assert!(kernel_trusts_tsc(both));
        assert!(kernel_trusts_tsc(&format!("{both}{both}")));
        assert!(!kernel_trusts_tsc("flags\t\t: fpu tsc constant_tsc\n"));
        assert!(!kernel_trusts_tsc(&format!("{both}flags\t: tsc nonstop_tsc\n")));
        assert!(!kernel_trusts_tsc(""));
    }

    /// A read costs something and not much; the description says which
    /// clock, and its cost.
    #[test]
    fn read_cost_is_measured_and_described() {
        for c in [Clock::detect(), Clock::Monotonic] {
            let ns = c.read_cost_ns();
            assert!(ns > 0.0 && ns < 100_000.0, "{}: {ns} ns a read", c.name());
            let d = c.describe(ns);
            assert!(d.starts_with(c.name()) && d.contains(" ns)"), "{d}");
        }
        // On x86-64 the TSC, invariant or not, unless the fallback is asked for.
        if cfg!(target_arch = "x86_64") && std::env::var_os("RRDDMMA_PERF_CLOCK").is_none() {
            assert_eq!(Clock::detect(), Clock::Tsc);
        }
    }

    #[test]
    fn both_clocks_advance() {
        let t0 = Instant::now();
        for c in [Clock::detect(), Clock::Monotonic] {
            let a = c.ticks(t0);
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert!(c.ticks(t0) > a, "{} did not advance", c.name());
        }
        assert_eq!(Clock::Monotonic.name(), "monotonic");
    }
}
