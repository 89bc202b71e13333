//! The latency clock: the time-stamp counter where it is invariant, else
//! `Instant` (CLOCK_MONOTONIC).
//!
//! The TSC is used only when the CPU says it is invariant (CPUID leaf
//! 0x8000_0007, EDX bit 8) and the kernel agrees (`constant_tsc` and
//! `nonstop_tsc` in /proc/cpuinfo): otherwise its rate can change with the
//! CPU's frequency or stop in deep sleep states, and intervals read from it
//! would be wrong.

use std::time::Instant;

/// Which clock stamps the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The invariant time-stamp counter (RDTSC), calibrated against
    /// `Instant` over each run.
    Tsc,
    /// `Instant` (CLOCK_MONOTONIC through the vDSO).
    Monotonic,
}

impl Clock {
    /// The clock of this machine: the TSC when invariant, else monotonic.
    /// `RRDDMMA_PERF_CLOCK=monotonic` forces the fallback.
    pub fn detect() -> Clock {
        if std::env::var("RRDDMMA_PERF_CLOCK").is_ok_and(|v| v == "monotonic") {
            return Clock::Monotonic;
        }
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        if cpuid_invariant_tsc() && kernel_trusts_tsc(&flags) {
            Clock::Tsc
        } else {
            Clock::Monotonic
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
