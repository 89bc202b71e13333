//! Statistics over repetitions: mean, sample standard deviation, a 95%
//! confidence interval of the mean (Student's t) and min–max; and the rule
//! saying when a latency percentile has enough samples behind it.

use serde::Serialize;

/// The two-sided 95% critical value of Student's t for 1..=30 degrees of
/// freedom (the 0.975 quantile).
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The 0.975 quantile of Student's t with `df` degrees of freedom (at least
/// 1). Past 30 it takes the value of the next lower tabulated row (40, 60,
/// 120), so the interval is never narrower than the exact one.
pub fn t975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T975[df - 1],
        31..=39 => 2.042,
        40..=59 => 2.021,
        60..=119 => 2.000,
        _ => 1.980,
    }
}

/// A value measured once per repetition, summarised.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Repetitions behind the figures.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); `null` for a
    /// single repetition.
    pub sd: Option<f64>,
    /// The 95% confidence interval of the mean, mean ± t(0.975, n − 1) ·
    /// sd / √n; `null` for a single repetition.
    pub ci95: Option<[f64; 2]>,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// The summary of `x` (None when `x` is empty).
    pub fn of(x: &[f64]) -> Option<Summary> {
        let n = x.len();
        if n == 0 {
            return None;
        }
        let mean = x.iter().sum::<f64>() / n as f64;
        let min = x.iter().copied().fold(f64::INFINITY, f64::min);
        let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (sd, ci95) = if n >= 2 {
            let sd = (x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64).sqrt();
            let h = t975(n - 1) * sd / (n as f64).sqrt();
            (Some(sd), Some([mean - h, mean + h]))
        } else {
            (None, None)
        };
        Some(Summary { n, mean, sd, ci95, min, max })
    }

    /// `mean ± sd [lo, hi] (min–max)`, or the single value for one
    /// repetition, with `prec` decimals.
    pub fn text(&self, prec: usize) -> String {
        match (self.sd, self.ci95) {
            (Some(sd), Some([lo, hi])) => format!(
                "{:.p$} ± {:.p$} [{:.p$}, {:.p$}] ({:.p$}–{:.p$})",
                self.mean,
                sd,
                lo,
                hi,
                self.min,
                self.max,
                p = prec
            ),
            _ => format!("{:.p$}", self.mean, p = prec),
        }
    }
}

/// The fewest samples a percentile needs: pQ is shown only when at least
/// 1 / (1 − Q) samples back it, so that at least one sample lies above it
/// (p50 needs 2, p99 needs 100, p99.9 needs 1,000). Below that the "p99.9"
/// of 200 samples would just be their largest.
pub fn samples_for(q: f64) -> u64 {
    (1.0 / (1.0 - q)).round() as u64
}

/// `v` when `n` samples back the percentile `q`, else None.
pub fn backed(q: f64, n: u64, v: f64) -> Option<f64> {
    (n >= samples_for(q)).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_has_sample_sd_and_student_t_interval() {
        // 2, 4, 6: mean 4, sample sd 2, t(0.975, 2) = 4.303: 4 ± 4.303·2/√3.
        let s = Summary::of(&[2.0, 4.0, 6.0]).unwrap();
        assert_eq!((s.n, s.mean, s.sd, s.min, s.max), (3, 4.0, Some(2.0), 2.0, 6.0));
        let h = 4.303 * 2.0 / 3f64.sqrt();
        let [lo, hi] = s.ci95.unwrap();
        assert!((lo - (4.0 - h)).abs() < 1e-12 && (hi - (4.0 + h)).abs() < 1e-12, "{lo} {hi}");
        assert_eq!(s.text(1), "4.0 ± 2.0 [-1.0, 9.0] (2.0–6.0)");
        // One repetition: no spread to speak of.
        let one = Summary::of(&[7.5]).unwrap();
        assert_eq!((one.sd, one.ci95, one.text(2)), (None, None, "7.50".to_string()));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn t_values_shrink_towards_the_normal_and_stay_conservative() {
        assert_eq!((t975(1), t975(2), t975(30)), (12.706, 4.303, 2.042));
        assert_eq!((t975(35), t975(40), t975(100), t975(10_000)), (2.042, 2.021, 2.000, 1.980));
        assert!((1..200).all(|d| t975(d) >= t975(d + 1)));
    }

    #[test]
    fn percentiles_need_their_samples() {
        assert_eq!((samples_for(0.5), samples_for(0.99), samples_for(0.999)), (2, 100, 1000));
        assert_eq!(backed(0.999, 999, 3.0), None);
        assert_eq!(backed(0.999, 1000, 3.0), Some(3.0));
        assert_eq!(backed(0.99, 99, 3.0), None);
        assert_eq!(backed(0.99, 200, 3.0), Some(3.0));
    }
}
