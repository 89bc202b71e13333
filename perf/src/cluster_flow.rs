//! One cluster flow's load figures beside its bandwidth: arrivals offered
//! and dropped, requests per operation, latency of every request measured
//! from its arrival (or post, in closed loop) to its completion, and bytes
//! completed per interval (the throughput-over-time series). Each QP fills
//! a [`Tally`] in the measured loop without allocating; the source rank
//! folds its QPs' tallies into one [`LoadResult`] per flow, which travels
//! to rank 0 as one `load {json}` line.

use serde::{Deserialize, Serialize};

use crate::args::Verb;
use crate::stats;

type Res<T> = Result<T, String>;

/// Bins of a QP's time series; when a run outlasts them, neighbouring bins
/// merge and the interval doubles.
pub const BINS: usize = 256;

/// Latency samples kept per QP and repetition (later completions are
/// counted but not timed).
pub const LAT_CAP: usize = 1 << 18;

/// Slots of the per-operation counts: write, read, send, atomic.
fn op_index(v: Verb) -> usize {
    match v {
        Verb::Write => 0,
        Verb::Read => 1,
        Verb::Send => 2,
        Verb::Atomic => 3,
    }
}

/// What one QP saw in one phase. Every buffer is allocated before the
/// measured loop and never grows in it.
pub struct Tally {
    pub arrivals: u64,
    pub dropped: u64,
    pub backlog_max: u64,
    /// Completed requests (after warm-up) per operation.
    pub ops: [u64; 4],
    pub bytes: u64,
    /// Latencies in ns, at most [`LAT_CAP`].
    pub lat: Vec<f64>,
    /// Bytes completed per `width` seconds from the phase start.
    pub bins: Vec<u64>,
    pub width: f64,
}

impl Tally {
    /// An empty tally whose series starts at `width` seconds per bin.
    pub fn new(width: f64, lat_cap: usize) -> Tally {
        Tally {
            arrivals: 0,
            dropped: 0,
            backlog_max: 0,
            ops: [0; 4],
            bytes: 0,
            lat: Vec::with_capacity(lat_cap.min(LAT_CAP)),
            bins: vec![0; BINS],
            width,
        }
    }

    /// A completion after warm-up: `bytes` of `v`, `lat_ns` after its
    /// arrival, at `t` seconds from the phase start.
    #[inline]
    pub fn complete(&mut self, v: Verb, bytes: usize, lat_ns: f64, t: f64) {
        self.ops[op_index(v)] += 1;
        self.bytes += bytes as u64;
        if self.lat.len() < self.lat.capacity() {
            self.lat.push(lat_ns);
        }
        let mut i = (t / self.width) as usize;
        while i >= BINS {
            // Halve the resolution in place.
            for k in 0..BINS / 2 {
                self.bins[k] = self.bins[2 * k] + self.bins[2 * k + 1];
            }
            self.bins[BINS / 2..].iter_mut().for_each(|b| *b = 0);
            self.width *= 2.0;
            i = (t / self.width) as usize;
        }
        self.bins[i] += bytes as u64;
    }
}

/// Latency of one flow's requests under load, µs; a percentile is `null`
/// unless its samples back it ([`stats::samples_for`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadedLat {
    pub samples: u64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub avg: Option<f64>,
}

/// One flow's load figures in one repetition of one size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    pub src: u32,
    pub dst: u32,
    pub size: usize,
    pub rep: u32,
    /// Requests per second offered to the flow; `null` in closed loop.
    pub offered_per_s: Option<f64>,
    /// Requests that arrived (warm-up included); in closed loop, posted.
    pub arrivals: u64,
    /// Arrivals dropped because the QP's backlog was full (never posted).
    pub dropped: u64,
    /// The most arrivals one QP of the flow held waiting for send-queue room.
    pub backlog_max: u64,
    /// Completed requests after warm-up, per operation.
    pub writes: u64,
    pub reads: u64,
    pub sends: u64,
    pub atomics: u64,
    /// Bytes completed after warm-up.
    pub bytes: u64,
    /// Arrival (or post) to completion, every request after warm-up.
    pub lat_us: LoadedLat,
    /// The latency CDF: (µs, fraction of requests at or below), at every
    /// percent and at 99.9% and 99.99% when their samples back them.
    pub cdf_us: Vec<[f64; 2]>,
    /// Seconds per bin of `series_bytes`.
    pub series_interval_s: f64,
    /// Bytes completed per interval from the phase start, warm-up excluded.
    pub series_bytes: Vec<u64>,
}

/// `bins` of `width` seconds each summed into bins of `to` seconds (a
/// power-of-two multiple of `width`).
fn coarsen(bins: &[u64], width: f64, to: f64) -> Vec<u64> {
    let k = ((to / width).round() as usize).max(1);
    bins.chunks(k).map(|c| c.iter().sum()).collect()
}

impl LoadResult {
    /// Folds a flow's QP tallies; `offered` is the flow's rate.
    pub fn of(src: u32, dst: u32, size: usize, rep: u32, offered: Option<f64>, tallies: &[&Tally]) -> LoadResult {
        let width = tallies.iter().map(|t| t.width).fold(0.0, f64::max);
        let mut series = vec![0u64; BINS];
        for t in tallies {
            for (s, b) in series.iter_mut().zip(coarsen(&t.bins, t.width, width)) {
                *s += b;
            }
        }
        while series.len() > 1 && series.last() == Some(&0) {
            series.pop();
        }
        let mut lat: Vec<f64> = tallies.iter().flat_map(|t| t.lat.iter().copied()).collect();
        lat.sort_by(f64::total_cmp);
        let n = lat.len() as u64;
        let at = |q: f64| lat[((q * n as f64).ceil() as usize).clamp(1, lat.len()) - 1] / 1e3;
        let lat_us = if lat.is_empty() {
            LoadedLat::default()
        } else {
            LoadedLat {
                samples: n,
                p50: stats::backed(0.5, n, at(0.5)),
                p99: stats::backed(0.99, n, at(0.99)),
                p999: stats::backed(0.999, n, at(0.999)),
                avg: Some(lat.iter().sum::<f64>() / n as f64 / 1e3),
            }
        };
        let mut cdf = Vec::new();
        if !lat.is_empty() {
            cdf.push([lat[0] / 1e3, 0.0]);
            for k in 1..=100 {
                cdf.push([at(k as f64 / 100.0), k as f64 / 100.0]);
            }
            for q in [0.999, 0.9999] {
                if n >= stats::samples_for(q) {
                    cdf.push([at(q), q]);
                }
            }
            cdf.sort_by(|a, b| a[1].total_cmp(&b[1]));
        }
        let sum = |f: fn(&Tally) -> u64| tallies.iter().map(|t| f(t)).sum::<u64>();
        LoadResult {
            src,
            dst,
            size,
            rep,
            offered_per_s: offered,
            arrivals: sum(|t| t.arrivals),
            dropped: sum(|t| t.dropped),
            backlog_max: tallies.iter().map(|t| t.backlog_max).max().unwrap_or(0),
            writes: sum(|t| t.ops[0]),
            reads: sum(|t| t.ops[1]),
            sends: sum(|t| t.ops[2]),
            atomics: sum(|t| t.ops[3]),
            bytes: sum(|t| t.bytes),
            lat_us,
            cdf_us: cdf,
            series_interval_s: width,
            series_bytes: series,
        }
    }

    /// Completed requests after warm-up.
    pub fn completed(&self) -> u64 {
        self.writes + self.reads + self.sends + self.atomics
    }

    /// The line sent to rank 0.
    pub fn encode(&self) -> Res<String> {
        Ok(format!("load {}\n", serde_json::to_string(self).map_err(|e| format!("encoding a load result: {e}"))?))
    }

    /// Rank `rank`'s `load` line (`Ok(None)` for another kind of line),
    /// checked: its own flows, a known size and repetition, bounded lists,
    /// finite non-negative figures; anything else is an error naming the
    /// rank and the value.
    pub fn decode(rank: usize, line: &str, ranks: u32, sizes: &[usize], reps: u32) -> Res<Option<LoadResult>> {
        let Some(json) = line.strip_prefix("load ") else { return Ok(None) };
        let bad = |what: String| Err(format!("rank {rank} sent a bad load result ({what}): {line:.120?}"));
        let l: LoadResult = match serde_json::from_str(json) {
            Ok(l) => l,
            Err(e) => return bad(e.to_string()),
        };
        if l.src as usize != rank || l.dst >= ranks || l.dst == l.src {
            return bad(format!("flow {} -> {} (a rank reports its own flows to other ranks)", l.src, l.dst));
        }
        if !sizes.contains(&l.size) || l.rep >= reps {
            return bad(format!(
                "size {} repetition {} (this run: sizes {sizes:?}, {reps} repetition(s))",
                l.size, l.rep
            ));
        }
        if l.series_bytes.len() > BINS || l.cdf_us.len() > 103 {
            return bad(format!(
                "{} series bins and {} CDF points (at most {BINS} and 103)",
                l.series_bytes.len(),
                l.cdf_us.len()
            ));
        }
        let figures = [l.offered_per_s.unwrap_or(1.0), l.series_interval_s]
            .into_iter()
            .chain([l.lat_us.p50, l.lat_us.p99, l.lat_us.p999, l.lat_us.avg].into_iter().flatten())
            .chain(l.cdf_us.iter().flatten().copied());
        if let Some(v) = figures.into_iter().find(|v| !v.is_finite() || *v < 0.0) {
            return bad(format!("figure {v} (figures are finite and not negative)"));
        }
        if l.series_interval_s <= 0.0 {
            return bad("a series interval of 0 s".into());
        }
        Ok(Some(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_fold_into_one_flow_and_round_trip() {
        let mut a = Tally::new(0.001, 100);
        let mut b = Tally::new(0.001, 100);
        for i in 0..100 {
            a.complete(Verb::Write, 1000, 1000.0 * f64::from(i + 1), 0.0005 + 0.001 * f64::from(i % 4));
        }
        // b outlasts its bins: they merge until 2 s fit (8 ms × 256 > 2 s).
        b.complete(Verb::Atomic, 8, 5000.0, 2.0);
        assert_eq!(b.width, 0.008);
        let l = LoadResult::of(0, 1, 1000, 0, Some(10.0), &[&a, &b]);
        assert_eq!((l.writes, l.atomics, l.bytes, l.completed()), (100, 1, 100_008, 101));
        assert_eq!(l.series_interval_s, 0.008);
        assert_eq!(l.series_bytes[0], 100_000, "a's four 1 ms bins fold into the first 8 ms bin");
        assert_eq!(l.series_bytes.len(), 251);
        assert_eq!(*l.series_bytes.last().unwrap(), 8);
        assert_eq!(l.lat_us.samples, 101);
        assert_eq!(l.lat_us.p50, Some(50.0), "the 51st of 1..=100 µs and another 5 µs");
        assert_eq!(l.lat_us.p99, Some(99.0));
        assert_eq!(l.lat_us.p999, None, "101 samples do not back p99.9");
        assert_eq!(l.cdf_us.len(), 101);
        assert_eq!((l.cdf_us[0], l.cdf_us[100]), ([1.0, 0.0], [100.0, 1.0]));
        let line = l.encode().unwrap();
        assert_eq!(LoadResult::decode(0, line.trim(), 3, &[1000], 1), Ok(Some(l.clone())));
        assert_eq!(LoadResult::decode(0, "apart 1", 3, &[1000], 1), Ok(None));
        assert!(LoadResult::decode(1, line.trim(), 3, &[1000], 1)
            .unwrap_err()
            .contains("rank 1 sent a bad load result (flow 0 -> 1"));
        assert!(LoadResult::decode(0, line.trim(), 3, &[64], 1).unwrap_err().contains("size 1000"));
        let mut neg = l.clone();
        neg.cdf_us[3][0] = -1.0;
        assert!(LoadResult::decode(0, neg.encode().unwrap().trim(), 3, &[1000], 1).unwrap_err().contains("figure -1"));
        assert!(LoadResult::decode(0, "load {", 3, &[1000], 1).unwrap_err().contains("rank 0 sent a bad load result"));
    }

    #[test]
    fn latency_buffer_never_grows() {
        let mut t = Tally::new(0.001, 4);
        for _ in 0..10 {
            t.complete(Verb::Read, 1, 1.0, 0.0);
        }
        assert_eq!((t.lat.len(), t.lat.capacity(), t.ops[1]), (4, 4, 10));
    }
}
