//! Rank 0's report of `rrddmma-perf cluster`: per size, the per-flow matrix,
//! per-rank totals, the aggregate and Jain's fairness index, as a table,
//! JSON, CSV and two SVG charts (a heatmap and per-rank bars, one panel per
//! size).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::cluster_env::{self, RankEnv};
use crate::cluster_flow::LoadResult;
use crate::cluster_opts::ClusterOpts;
use crate::out::Series;
use crate::plot::{self, Axes};
use crate::stats::{self, Summary};

type Res<T> = Result<T, String>;

/// One flow's outcome in one repetition, measured by its source rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    /// Repetition, from 0.
    pub rep: u32,
    /// Requests completed inside the measurement window (warm-up excluded).
    pub ops: u64,
    /// The window's start: seconds from the phase start to the end of the
    /// flow's warm-up (its earliest QP).
    pub start: f64,
    /// The window's end: seconds from the phase start to the flow's last
    /// completion (its slowest QP).
    pub secs: f64,
    pub size: usize,
    /// Bytes completed inside the window.
    pub bytes: u64,
    /// Latency samples behind `lat`.
    pub lat_n: u64,
    /// Latency percentiles in µs: p50, p99, p99.9, mean (0 without samples).
    pub lat: [f64; 4],
}

impl FlowResult {
    /// The window's length in seconds.
    fn window(&self) -> f64 {
        (self.secs - self.start).max(0.0)
    }

    fn mib_s(&self) -> f64 {
        if self.window() > 0.0 {
            self.bytes as f64 / self.window() / 1048576.0
        } else {
            0.0
        }
    }

    fn mpps(&self) -> f64 {
        if self.window() > 0.0 {
            self.ops as f64 / self.window() / 1e6
        } else {
            0.0
        }
    }

    pub fn encode(&self) -> String {
        format!(
            "{} {} {} {} {:e} {:e} {} {} {} {:e} {:e} {:e} {:e}\n",
            self.src,
            self.dst,
            self.rep,
            self.ops,
            self.start,
            self.secs,
            self.size,
            self.bytes,
            self.lat_n,
            self.lat[0],
            self.lat[1],
            self.lat[2],
            self.lat[3]
        )
    }

    pub fn decode(line: &str) -> Res<FlowResult> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("malformed flow result {line:?}");
        if w.len() != 13 {
            return Err(bad());
        }
        let f = |i: usize| w[i].parse::<f64>().map_err(|_| bad());
        Ok(FlowResult {
            src: w[0].parse().map_err(|_| bad())?,
            dst: w[1].parse().map_err(|_| bad())?,
            rep: w[2].parse().map_err(|_| bad())?,
            ops: w[3].parse().map_err(|_| bad())?,
            start: f(4)?,
            secs: f(5)?,
            size: w[6].parse().map_err(|_| bad())?,
            bytes: w[7].parse().map_err(|_| bad())?,
            lat_n: w[8].parse().map_err(|_| bad())?,
            lat: [f(9)?, f(10)?, f(11)?, f(12)?],
        })
    }
}

/// Rank 0's view of another rank's result lines: what they may say.
#[derive(Clone, Copy, Debug)]
pub struct Expect<'a> {
    /// Ranks in the cluster.
    pub ranks: u32,
    /// The sizes every rank runs.
    pub sizes: &'a [usize],
    /// Repetitions of each size.
    pub reps: u32,
    /// Latency samples per flow and repetition.
    pub lat_samples: u32,
}

/// Parses rank `rank`'s gathered results: a first line `apart 0|1` (whether
/// each of its threads posted to one destination only), then one
/// [`FlowResult::encode`] line per flow, size and repetition, checking every
/// value against `e`: a line that is malformed or out of range is an error
/// naming the rank, the line and the value, never a panic in the report.
pub fn decode_rank(rank: usize, text: &str, e: Expect) -> Res<(bool, Vec<FlowResult>)> {
    let max_lines = (e.ranks as usize).saturating_sub(1) * e.sizes.len() * e.reps as usize;
    let mut lines = text.lines();
    let apart = match lines.next() {
        Some("apart 1") => true,
        Some("apart 0") => false,
        other => {
            return Err(format!("rank {rank} sent {other:?} where its results start with \"apart 0\" or \"apart 1\""))
        }
    };
    let mut out = Vec::new();
    for (k, line) in lines.enumerate() {
        if k >= max_lines {
            return Err(format!(
                "rank {rank} sent more than {max_lines} result lines (one per flow, size and repetition at most; do \
                 all ranks run the same -s and --reps with the same number of ranks?)"
            ));
        }
        let f = FlowResult::decode(line).map_err(|m| format!("rank {rank}: {m}"))?;
        let bad = |what: String| Err(format!("rank {rank} sent an out-of-range result in {line:?}: {what}"));
        if f.src as usize != rank {
            return bad(format!("source rank {} (a rank reports only its own flows)", f.src));
        }
        if f.dst >= e.ranks || f.dst == f.src {
            return bad(format!("destination rank {} (ranks are 0..{}, not the source)", f.dst, e.ranks));
        }
        if !e.sizes.contains(&f.size) {
            return bad(format!("size {} (this run's sizes are {:?})", f.size, e.sizes));
        }
        if f.rep >= e.reps {
            return bad(format!("repetition {} (this run has {})", f.rep, e.reps));
        }
        if f.lat_n > u64::from(e.lat_samples) {
            return bad(format!("{} latency samples (this run takes {})", f.lat_n, e.lat_samples));
        }
        if f.ops.checked_mul(f.size as u64).is_none_or(|most| f.bytes > most) {
            return bad(format!("{} bytes in {} requests of at most {} bytes", f.bytes, f.ops, f.size));
        }
        if let Some(v) = [f.start, f.secs].into_iter().chain(f.lat).find(|v| !v.is_finite() || *v < 0.0) {
            return bad(format!("time {v} (times are finite and not negative)"));
        }
        if f.start > f.secs {
            return bad(format!("a window from {} s to {} s (it ends before it starts)", f.start, f.secs));
        }
        out.push(f);
    }
    Ok((apart, out))
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || q == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * q)
}

/// The flows of one message size, every repetition.
struct SizeRun {
    size: usize,
    flows: Vec<FlowResult>,
}

/// Summary of `x`, or a zero one when it is empty.
fn summary(x: &[f64]) -> Summary {
    Summary::of(x).unwrap_or(Summary { n: 0, mean: 0.0, sd: None, ci95: None, min: 0.0, max: 0.0 })
}

impl SizeRun {
    /// Repetition `rep`'s bandwidth flows.
    fn bw_flows(&self, rep: u32) -> impl Iterator<Item = &FlowResult> {
        self.flows.iter().filter(move |f| f.rep == rep && f.ops > 0)
    }

    /// The repetitions present.
    fn reps(&self) -> Vec<u32> {
        let mut r: Vec<u32> = self.flows.iter().map(|f| f.rep).collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// The (source, destination) cells present, sorted.
    fn cells(&self) -> Vec<(u32, u32)> {
        let mut c: Vec<(u32, u32)> = self.flows.iter().map(|f| (f.src, f.dst)).collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    /// One cell's results, in repetition order.
    fn cell(&self, (src, dst): (u32, u32)) -> Vec<&FlowResult> {
        let mut v: Vec<&FlowResult> = self.flows.iter().filter(|f| f.src == src && f.dst == dst).collect();
        v.sort_by_key(|f| f.rep);
        v
    }

    /// Repetition `rep`'s (out MiB/s, in MiB/s) per rank of `n`.
    fn totals(&self, n: u32, rep: u32) -> Vec<(f64, f64)> {
        let mut t = vec![(0.0, 0.0); n as usize];
        // Ranks are checked when the results are decoded (`decode_rank`);
        // anything else is left out rather than indexed.
        for f in self.bw_flows(rep) {
            if let Some(s) = t.get_mut(f.src as usize) {
                s.0 += f.mib_s();
            }
            if let Some(d) = t.get_mut(f.dst as usize) {
                d.1 += f.mib_s();
            }
        }
        t
    }

    /// Per rank, the mean over repetitions of its (out, in) MiB/s.
    fn mean_totals(&self, n: u32) -> Vec<(f64, f64)> {
        let reps = self.reps();
        let mut t = vec![(0.0, 0.0); n as usize];
        for &rep in &reps {
            for (a, b) in t.iter_mut().zip(self.totals(n, rep)) {
                a.0 += b.0 / reps.len() as f64;
                a.1 += b.1 / reps.len() as f64;
            }
        }
        t
    }

    fn aggregate(&self, rep: u32) -> f64 {
        self.bw_flows(rep).map(FlowResult::mib_s).sum()
    }

    fn fairness(&self, rep: u32) -> f64 {
        jain(&self.bw_flows(rep).map(FlowResult::mib_s).collect::<Vec<_>>())
    }

    /// The aggregate's and Jain's index's summaries over repetitions.
    fn aggregate_summary(&self) -> (Summary, Summary) {
        let reps = self.reps();
        let a: Vec<f64> = reps.iter().map(|&r| self.aggregate(r)).collect();
        let j: Vec<f64> = reps.iter().map(|&r| self.fairness(r)).collect();
        (summary(&a), summary(&j))
    }

    /// The mean bandwidth of a cell over repetitions (None when absent or
    /// a latency-only flow).
    fn mean_bw(&self, c: (u32, u32)) -> Option<f64> {
        let v: Vec<f64> = self.cell(c).iter().filter(|f| f.ops > 0).map(|f| f.mib_s()).collect();
        Summary::of(&v).map(|s| s.mean)
    }
}

/// Latency of one flow in one repetition; a percentile is `null` unless its
/// samples back it ([`stats::samples_for`]).
#[derive(Serialize)]
struct LatJson {
    samples: u64,
    p50: Option<f64>,
    p99: Option<f64>,
    p999: Option<f64>,
    avg: Option<f64>,
}

fn lat_json(f: &FlowResult) -> LatJson {
    LatJson {
        samples: f.lat_n,
        p50: stats::backed(0.5, f.lat_n, f.lat[0]),
        p99: stats::backed(0.99, f.lat_n, f.lat[1]),
        p999: stats::backed(0.999, f.lat_n, f.lat[2]),
        avg: (f.lat_n > 0).then_some(f.lat[3]),
    }
}

/// One flow in one repetition.
#[derive(Serialize)]
struct RepFlowJson<'a> {
    src: u32,
    dst: u32,
    requests: u64,
    /// The measurement window, seconds from the phase start.
    window_start_s: f64,
    window_end_s: f64,
    seconds: f64,
    bw_mib_s: f64,
    msg_rate_mpps: f64,
    /// Bytes completed in the window.
    bytes: u64,
    lat_us: LatJson,
    /// Offered and achieved load, requests per operation, loaded latency,
    /// its CDF and the throughput series (`null` for a latency-only flow).
    load: Option<&'a LoadResult>,
}

/// One flow's load over the repetitions.
#[derive(Serialize)]
struct CellLoadJson {
    /// Requests per second offered; `null` in closed loop.
    offered_per_s: Option<f64>,
    /// Requests completed per second of the window.
    achieved_per_s: Summary,
    /// Achieved over offered; `null` in closed loop.
    achieved_fraction: Option<Summary>,
    /// Arrivals dropped, summed over the repetitions.
    dropped: u64,
    /// Loaded latency percentiles (µs) over the repetitions, when every
    /// repetition's samples back them.
    lat_us: LatSummaryJson,
}

/// One repetition of one size.
#[derive(Serialize)]
struct RepJson<'a> {
    rep: u32,
    flows: Vec<RepFlowJson<'a>>,
    aggregate_mib_s: f64,
    jain_fairness: f64,
}

/// One flow over the repetitions.
#[derive(Serialize)]
struct CellJson {
    src: u32,
    dst: u32,
    /// `null` for a latency-only flow (loaded-latency's probe).
    bw_mib_s: Option<Summary>,
    msg_rate_mpps: Option<Summary>,
    /// Each repetition's window length in seconds.
    window_s: Summary,
    lat_samples_per_rep: u64,
    /// Each percentile's summary over the repetitions' values; `null` when
    /// a repetition's samples do not back it.
    lat_us: LatSummaryJson,
    load: Option<CellLoadJson>,
}

#[derive(Serialize)]
struct LatSummaryJson {
    p50: Option<Summary>,
    p99: Option<Summary>,
    p999: Option<Summary>,
    avg: Option<Summary>,
}

/// One size's results.
#[derive(Serialize)]
struct SizeJson<'a> {
    size: usize,
    /// Per flow, summaries over the repetitions.
    flows: Vec<CellJson>,
    /// Per rank, the mean over repetitions.
    rank_totals: Vec<TotalJson>,
    aggregate_mib_s: Summary,
    jain_fairness: Summary,
    /// Every repetition's own figures.
    reps: Vec<RepJson<'a>>,
}

#[derive(Serialize)]
struct TotalJson {
    rank: usize,
    out_mib_s: f64,
    in_mib_s: f64,
}

/// The version of the cluster JSON document's layout: raised on every
/// change a reader could trip on (2: a flow's `bw_mib_s` became a summary
/// object under `--reps`); fields only added keep it. docs/perf.md lists
/// the versions.
pub const SCHEMA_VERSION: u32 = 2;

/// The JSON document (`--json`).
#[derive(Serialize)]
struct ReportJson<'a> {
    tool: &'static str,
    schema_version: u32,
    mode: &'static str,
    pattern: &'static str,
    op: &'static str,
    ranks: u32,
    qps_per_pair: u32,
    /// `null` with `--threads per-qp` (one thread per QP).
    threads_per_rank: Option<u32>,
    tx_depth: u32,
    /// `null` with `-D`.
    iterations_per_qp: Option<u64>,
    /// `null` without `-D`.
    duration_s: Option<f64>,
    warmup_requests_per_qp: u64,
    repetitions: u32,
    lat_samples: u32,
    /// Always true: every flow has QPs, a window and a posting schedule of
    /// its own, kept full independently of the source's other flows, so
    /// each cell is that flow's figure and Jain's index is over flows.
    per_flow: bool,
    /// Ranks where one thread posted to several destinations: those flows
    /// shared the thread's CPU time, so a CPU-bound thread caps their sum.
    shared_posting_thread: &'a [u32],
    /// The rule for percentiles: pQ needs at least 1 / (1 − Q) samples.
    percentile_min_samples: PctRule,
    sizes: &'a [usize],
    workload: WorkloadJson,
    /// The scenario file's name, the phase and the file's text; `null` for
    /// a command-line run.
    scenario: Option<ScenarioJson<'a>>,
    results: Vec<SizeJson<'a>>,
    testbed: TestbedJson<'a>,
    counters: Vec<CountersJson<'a>>,
}

#[derive(Serialize)]
struct ScenarioJson<'a> {
    file: &'a str,
    phase: &'a str,
    text: &'a str,
}

/// Every flow's offered load (a scenario's explicit flows may each have
/// their own: the flows' `load` says what each was offered and did).
#[derive(Serialize)]
struct WorkloadJson {
    /// `closed`, `R/s` (evenly spaced) or `poisson:R/s`, per flow.
    rate: String,
    /// `write:70,read:30`: relative weights.
    mix: String,
    /// The sizes drawn: `N` (fixed; the result's size), `uniform:LO-HI`
    /// or `SIZE:WEIGHT,...`.
    size_dist: String,
    mean_size: Option<f64>,
    seed: u64,
    /// Arrivals a QP holds waiting for send-queue room; more are dropped.
    backlog_per_qp: usize,
}

/// What the run ran on.
#[derive(Serialize)]
struct TestbedJson<'a> {
    date_utc: &'a str,
    command_line: &'a [String],
    transport: &'static str,
    rrddmma_perf_version: &'static str,
    /// Rank → host, device, firmware, link layer, rate, active MTU, GID
    /// index and type, kernel, CPU model, clock source, the rdma-core
    /// (libibverbs) it loaded, the rrddmma version and git revision it was
    /// built from, as each rank read them.
    ranks: Vec<RankTestbedJson<'a>>,
}

#[derive(Serialize)]
struct RankTestbedJson<'a> {
    rank: usize,
    #[serde(flatten)]
    facts: &'a BTreeMap<String, String>,
}

/// One rank's counter deltas over the whole run.
#[derive(Serialize)]
struct CountersJson<'a> {
    rank: usize,
    /// Every counter the device exports, moved or not.
    deltas: &'a BTreeMap<String, u64>,
}

#[derive(Serialize)]
struct PctRule {
    p50: u64,
    p99: u64,
    p999: u64,
}

/// A CSV row (`--csv`): the header comes from the field names.
#[derive(Serialize)]
struct FlowCsv {
    pattern: &'static str,
    op: &'static str,
    size: usize,
    qps_per_pair: u32,
    threads_per_rank: String,
    rep: u32,
    src: u32,
    dst: u32,
    requests: u64,
    window_start_s: f64,
    window_end_s: f64,
    bw_mib_s: f64,
    msg_rate_mpps: f64,
    lat_samples: u64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    p999_us: Option<f64>,
    avg_us: Option<f64>,
}

/// Rank 0's view of every flow of every size and repetition.
pub struct Report<'a> {
    o: &'a ClusterOpts,
    n: u32,
    runs: Vec<SizeRun>,
    /// Sources some of whose flows shared a posting thread.
    shared: Vec<u32>,
    /// Each rank's testbed and counter deltas, by rank.
    envs: Vec<RankEnv>,
    /// Every flow's load figures, of every size and repetition.
    loads: Vec<LoadResult>,
    /// The command line and the date of the report.
    command_line: Vec<String>,
    date: String,
}

/// Panels per row in the SVGs.
const PANEL_COLUMNS: usize = 4;

/// A figure's value label: one decimal, or two significant digits below
/// 0.1 so that a slow flow does not read as 0.0.
pub fn value_label(v: f64) -> String {
    if v >= 0.1 || v <= 0.0 || !v.is_finite() {
        format!("{v:.1}")
    } else {
        let digits = (1.0 - v.log10().floor()) as usize;
        format!("{v:.digits$}")
    }
}

/// `v` with `prec` decimals, or "-" when None.
fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

impl<'a> Report<'a> {
    /// Groups `every` flow by size, in the order of `o.sizes`, each sorted
    /// by (source, destination, repetition).
    pub fn new(o: &'a ClusterOpts, n: u32, every: Vec<FlowResult>) -> Report<'a> {
        let mut runs: Vec<SizeRun> = o.sizes.iter().map(|&size| SizeRun { size, flows: Vec::new() }).collect();
        for f in every {
            if let Some(r) = runs.iter_mut().find(|r| r.size == f.size) {
                r.flows.push(f);
            }
        }
        for r in &mut runs {
            r.flows.sort_by_key(|f| (f.src, f.dst, f.rep));
        }
        Report {
            o,
            n,
            runs,
            shared: Vec::new(),
            envs: Vec::new(),
            loads: Vec::new(),
            command_line: std::env::args().collect(),
            date: cluster_env::utc_now(),
        }
    }

    /// Records the sources that drove several flows from one thread.
    pub fn shared_threads(mut self, shared: Vec<u32>) -> Self {
        self.shared = shared;
        self
    }

    /// Records every flow's load figures.
    pub fn loads(mut self, loads: Vec<LoadResult>) -> Self {
        self.loads = loads;
        self
    }

    /// The load figures of `f`'s flow, size and repetition.
    fn load_of(&self, f: &FlowResult) -> Option<&LoadResult> {
        self.loads.iter().find(|l| (l.src, l.dst, l.size, l.rep) == (f.src, f.dst, f.size, f.rep))
    }

    /// Requests completed per second of `f`'s window.
    fn achieved(f: &FlowResult) -> f64 {
        f.mpps() * 1e6
    }

    /// The cell's load over its repetitions (None for a latency-only flow
    /// or without load figures).
    fn cell_load(&self, cell: &[&FlowResult]) -> Option<CellLoadJson> {
        let bw: Vec<&FlowResult> = cell.iter().copied().filter(|f| f.ops > 0).collect();
        let loads: Vec<&LoadResult> = bw.iter().filter_map(|f| self.load_of(f)).collect();
        if loads.is_empty() || loads.len() != bw.len() {
            return None;
        }
        let offered = loads[0].offered_per_s;
        let ach: Vec<f64> = bw.iter().map(|f| Self::achieved(f)).collect();
        let lat = |g: fn(&LoadResult) -> Option<f64>| {
            loads.iter().map(|l| g(l)).collect::<Option<Vec<f64>>>().and_then(|v| Summary::of(&v))
        };
        Some(CellLoadJson {
            offered_per_s: offered,
            achieved_per_s: summary(&ach),
            achieved_fraction: offered.and_then(|o| Summary::of(&ach.iter().map(|a| a / o).collect::<Vec<_>>())),
            dropped: loads.iter().map(|l| l.dropped).sum(),
            lat_us: LatSummaryJson {
                p50: lat(|l| l.lat_us.p50),
                p99: lat(|l| l.lat_us.p99),
                p999: lat(|l| l.lat_us.p999),
                avg: lat(|l| l.lat_us.avg),
            },
        })
    }

    /// Records each rank's testbed and counter deltas (by rank).
    pub fn environment(mut self, envs: Vec<RankEnv>) -> Self {
        self.envs = envs;
        self
    }

    /// The counters that moved, per rank: (rank, name, delta), in rank
    /// and name order.
    fn moved(&self) -> Vec<(usize, &str, u64)> {
        self.envs
            .iter()
            .enumerate()
            .flat_map(|(r, e)| e.counters.iter().filter(|(_, &v)| v > 0).map(move |(k, &v)| (r, k.as_str(), v)))
            .collect()
    }

    /// The cell's latency percentile `i` (0 p50, 1 p99, 2 p99.9, 3 mean) over
    /// its repetitions, when every repetition's samples back it.
    fn lat_summary(cell: &[&FlowResult], i: usize) -> Option<Summary> {
        let q = [0.5, 0.99, 0.999, 0.0][i];
        let v: Option<Vec<f64>> = cell
            .iter()
            .map(|f| if i == 3 { (f.lat_n > 0).then_some(f.lat[3]) } else { stats::backed(q, f.lat_n, f.lat[i]) })
            .collect();
        v.and_then(|v| Summary::of(&v))
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let reps = self.o.reps;
        let _ = writeln!(
            s,
            " bandwidth per flow: {} over {reps} repetition(s); each window opens after {} warm-up request(s) per QP (not counted; in open loop it opens at the first measured request's arrival) and closes at the flow's last completion",
            if reps > 1 { "mean ± sd [95% CI, Student's t] (min–max)" } else { "one run, no spread" },
            self.o.warmup
        );
        let _ = writeln!(
            s,
            " latency: pQ shown only with at least 1/(1-Q) samples (p50 {}, p99 {}, p99.9 {}); n = samples per repetition, values are means over repetitions",
            stats::samples_for(0.5),
            stats::samples_for(0.99),
            stats::samples_for(0.999)
        );
        if !self.shared.is_empty() {
            let _ = writeln!(
                s,
                " flows share a posting thread: rank(s) {:?} drove several flows from one thread; each flow keeps its own QP(s), window and posting schedule full independently, so every figure is the flow's own, but the flows share the thread's CPU time and a CPU-bound thread caps their sum (--threads per-qp gives every QP a thread)",
                self.shared
            );
        }
        for r in &self.runs {
            let _ = writeln!(s, " size {} B", r.size);
            let _ = writeln!(
                s,
                " {:>3} -> {:<3}  {:<9} {:<10} {:<43} {:<5} {:<9} {:<9} {:<9} avg[us]",
                "src", "dst", "requests", "window[s]", "MiB/s", "n", "p50[us]", "p99[us]", "p99.9[us]"
            );
            for c in r.cells() {
                let cell = r.cell(c);
                let bw: Vec<f64> = cell.iter().filter(|f| f.ops > 0).map(|f| f.mib_s()).collect();
                let win: Vec<f64> = cell.iter().map(|f| f.window()).collect();
                let reqs = cell.iter().map(|f| f.ops).sum::<u64>() / cell.len().max(1) as u64;
                let lat = |i: usize| opt(Self::lat_summary(&cell, i).map(|x| x.mean), 2);
                let _ = writeln!(
                    s,
                    " {:>3} -> {:<3}  {:<9} {:<10.4} {:<43} {:<5} {:<9} {:<9} {:<9} {}",
                    c.0,
                    c.1,
                    reqs,
                    summary(&win).mean,
                    Summary::of(&bw).map_or("-".into(), |x| x.text(2)),
                    cell.first().map_or(0, |f| f.lat_n),
                    lat(0),
                    lat(1),
                    lat(2),
                    lat(3)
                );
            }
            self.load_table(&mut s, r);
            s.push_str(" rank   out MiB/s    in MiB/s   (means over repetitions)\n");
            for (rank, (o, i)) in r.mean_totals(self.n).iter().enumerate() {
                let _ = writeln!(s, " {rank:<6} {o:<12.2} {i:.2}");
            }
            let (agg, j) = r.aggregate_summary();
            let _ = writeln!(s, " aggregate {} MiB/s, Jain's fairness index {} over flows", agg.text(2), j.text(4));
        }
        let moved = self.moved();
        let blind: Vec<usize> =
            self.envs.iter().enumerate().filter(|(_, e)| e.counters.is_empty()).map(|(r, _)| r).collect();
        if !blind.is_empty() {
            let _ = writeln!(
                s,
                " port counters: rank(s) {blind:?} see none in sysfs (no counters or hw_counters under \
                 /sys/class/infiniband/DEV/ports/*; a rank in another network namespace than its device's sees none)"
            );
        }
        if blind.len() == self.envs.len() {
        } else if moved.is_empty() {
            s.push_str(" port counters: none of the devices' counters moved during the run\n");
        } else {
            s.push_str(" port counters that moved during the run (sysfs counters and hw_counters, delta per rank):\n");
            for (r, k, v) in moved {
                let _ = writeln!(s, "   rank {r} {k} +{v}");
            }
        }
        s.pop();
        s
    }

    /// Per flow of `r`: offered and achieved requests per second, drops,
    /// requests per operation, and latency under the load (means over
    /// repetitions).
    fn load_table(&self, s: &mut String, r: &SizeRun) {
        let wl = &self.o.workload;
        let cells: Vec<(u32, u32, Option<CellLoadJson>, Vec<&LoadResult>)> = r
            .cells()
            .into_iter()
            .map(|c| {
                let cell = r.cell(c);
                let ls: Vec<&LoadResult> = cell.iter().filter(|f| f.ops > 0).filter_map(|f| self.load_of(f)).collect();
                (c.0, c.1, self.cell_load(&cell), ls)
            })
            .filter(|c| c.2.is_some())
            .collect();
        if cells.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            " load: {}, mix {}, sizes {}; achieved = requests completed per second of the window; dropped = arrivals \
             beyond a QP's {}-request backlog (never posted); latency under load from arrival (closed loop: post) to \
             completion, every request",
            wl.rate.name(),
            wl.mix.name(),
            match &wl.sizes {
                crate::load::Sizes::Fixed(_) => format!("{} B", r.size),
                d => format!("{} (mean {:.0} B)", d.name(), d.mean()),
            },
            crate::load::BACKLOG
        );
        let _ = writeln!(
            s,
            " {:>3} -> {:<3}  {:<10} {:<12} {:<7} {:<8} {:<20} {:<8} {:<9} {:<9} {:<9} avg[us]",
            "src",
            "dst",
            "offered/s",
            "achieved/s",
            "%",
            "dropped",
            "write/read/atomic",
            "n",
            "p50[us]",
            "p99[us]",
            "p99.9[us]"
        );
        for (src, dst, l, ls) in cells {
            let Some(l) = l else { continue };
            let k = ls.len().max(1) as u64;
            let per = |g: fn(&LoadResult) -> u64| ls.iter().map(|x| g(x)).sum::<u64>() / k;
            let _ = writeln!(
                s,
                " {src:>3} -> {dst:<3}  {:<10} {:<12.0} {:<7} {:<8} {:<20} {:<8} {:<9} {:<9} {:<9} {}",
                l.offered_per_s.map_or("closed".into(), |o| format!("{o:.0}")),
                l.achieved_per_s.mean,
                l.achieved_fraction.map_or("-".into(), |f| format!("{:.1}", 100.0 * f.mean)),
                l.dropped,
                format!("{}/{}/{}", per(|x| x.writes), per(|x| x.reads), per(|x| x.atomics)),
                per(|x| x.lat_us.samples),
                opt(l.lat_us.p50.map(|x| x.mean), 2),
                opt(l.lat_us.p99.map(|x| x.mean), 2),
                opt(l.lat_us.p999.map(|x| x.mean), 2),
                opt(l.lat_us.avg.map(|x| x.mean), 2)
            );
        }
    }

    /// Writes the heatmap to `p`, and beside it (its stem plus `-bars`,
    /// `-cdf` and `-time`) the per-rank bars, the latency CDFs and the
    /// throughput series.
    pub fn write_figures(&self, p: &std::path::Path) -> Res<()> {
        let stem = p.file_stem().map_or("cluster".into(), |s| s.to_string_lossy().into_owned());
        let figures = [
            (p.to_path_buf(), self.heatmap()),
            (p.with_file_name(format!("{stem}-bars.svg")), self.bars()),
            (p.with_file_name(format!("{stem}-cdf.svg")), self.cdf()),
            (p.with_file_name(format!("{stem}-time.svg")), self.timeline()),
        ];
        for (path, svg) in figures {
            std::fs::write(&path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// The first repetition's load figures of every bandwidth flow, size
    /// by size, named `src -> dst` (and the size when there are several).
    fn first_loads(&self) -> Vec<(String, &LoadResult)> {
        let several = self.runs.len() > 1;
        let mut v: Vec<(String, &LoadResult)> = self
            .loads
            .iter()
            .filter(|l| l.rep == 0 && l.completed() > 0)
            .map(|l| {
                let name = if several {
                    format!("{} -> {}, {} B", l.src, l.dst, l.size)
                } else {
                    format!("{} -> {}", l.src, l.dst)
                };
                (name, l)
            })
            .collect();
        v.sort_by_key(|(_, l)| (l.size, l.src, l.dst));
        v
    }

    /// The latency-under-load CDF of every flow (first repetition), on a
    /// logarithmic latency axis.
    pub fn cdf(&self) -> String {
        let series: Vec<Series> = self
            .first_loads()
            .into_iter()
            .map(|(name, l)| Series { name, points: l.cdf_us.iter().map(|p| (p[0], p[1])).collect() })
            .collect();
        let title = format!(
            "rrddmma-perf cluster {} {}: latency CDF per flow under load ({}, repetition 0)",
            self.o.pattern.name(),
            self.o.workload.mix.name(),
            self.o.workload.rate.name()
        );
        plot::lines(
            Axes {
                title: &title,
                x: "latency, arrival to completion [us]",
                y: "fraction of requests",
                log_x: true,
                y_max: Some(1.0),
            },
            &series,
        )
    }

    /// Every flow's MiB/s per interval over the phase (first repetition):
    /// stragglers and stalls show as dips.
    pub fn timeline(&self) -> String {
        let series: Vec<Series> = self
            .first_loads()
            .into_iter()
            .map(|(name, l)| {
                let w = l.series_interval_s;
                let points = l
                    .series_bytes
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| ((i as f64 + 1.0) * w, b as f64 / w / 1048576.0))
                    .collect();
                Series { name, points }
            })
            .collect();
        let title = format!(
            "rrddmma-perf cluster {} {}: throughput over time per flow (repetition 0)",
            self.o.pattern.name(),
            self.o.workload.mix.name()
        );
        plot::lines(
            Axes {
                title: &title,
                x: "seconds from the phase start",
                y: "MiB/s per interval",
                log_x: false,
                y_max: None,
            },
            &series,
        )
    }

    /// The report as JSON (schema in docs/perf.md).
    pub fn json(&self) -> Res<String> {
        let o = self.o;
        let results = self
            .runs
            .iter()
            .map(|r| {
                let (aggregate_mib_s, jain_fairness) = r.aggregate_summary();
                SizeJson {
                    size: r.size,
                    flows: r
                        .cells()
                        .into_iter()
                        .map(|c| {
                            let cell = r.cell(c);
                            let bw: Vec<&FlowResult> = cell.iter().copied().filter(|f| f.ops > 0).collect();
                            CellJson {
                                src: c.0,
                                dst: c.1,
                                bw_mib_s: Summary::of(&bw.iter().map(|f| f.mib_s()).collect::<Vec<_>>()),
                                msg_rate_mpps: Summary::of(&bw.iter().map(|f| f.mpps()).collect::<Vec<_>>()),
                                window_s: summary(&cell.iter().map(|f| f.window()).collect::<Vec<_>>()),
                                lat_samples_per_rep: cell.first().map_or(0, |f| f.lat_n),
                                lat_us: LatSummaryJson {
                                    p50: Self::lat_summary(&cell, 0),
                                    p99: Self::lat_summary(&cell, 1),
                                    p999: Self::lat_summary(&cell, 2),
                                    avg: Self::lat_summary(&cell, 3),
                                },
                                load: self.cell_load(&cell),
                            }
                        })
                        .collect(),
                    rank_totals: r
                        .mean_totals(self.n)
                        .into_iter()
                        .enumerate()
                        .map(|(rank, (out_mib_s, in_mib_s))| TotalJson { rank, out_mib_s, in_mib_s })
                        .collect(),
                    aggregate_mib_s,
                    jain_fairness,
                    reps: r
                        .reps()
                        .into_iter()
                        .map(|rep| RepJson {
                            rep,
                            flows: r
                                .flows
                                .iter()
                                .filter(|f| f.rep == rep)
                                .map(|f| RepFlowJson {
                                    src: f.src,
                                    dst: f.dst,
                                    requests: f.ops,
                                    window_start_s: f.start,
                                    window_end_s: f.secs,
                                    seconds: f.window(),
                                    bw_mib_s: f.mib_s(),
                                    msg_rate_mpps: f.mpps(),
                                    bytes: f.bytes,
                                    lat_us: lat_json(f),
                                    load: if f.ops > 0 { self.load_of(f) } else { None },
                                })
                                .collect(),
                            aggregate_mib_s: r.aggregate(rep),
                            jain_fairness: r.fairness(rep),
                        })
                        .collect(),
                }
            })
            .collect();
        let doc = ReportJson {
            tool: "rrddmma-perf",
            schema_version: SCHEMA_VERSION,
            mode: "cluster",
            pattern: o.pattern.name(),
            op: o.verb.name(),
            ranks: self.n,
            qps_per_pair: o.qps,
            threads_per_rank: (o.threads > 0).then_some(o.threads),
            tx_depth: o.depth,
            iterations_per_qp: if o.duration.is_some() { None } else { Some(o.iters) },
            duration_s: o.duration,
            warmup_requests_per_qp: o.warmup,
            repetitions: o.reps,
            lat_samples: o.lat_samples,
            per_flow: true,
            shared_posting_thread: &self.shared,
            percentile_min_samples: PctRule {
                p50: stats::samples_for(0.5),
                p99: stats::samples_for(0.99),
                p999: stats::samples_for(0.999),
            },
            sizes: &o.sizes,
            workload: WorkloadJson {
                rate: o.workload.rate.name(),
                mix: o.workload.mix.name(),
                size_dist: match &o.workload.sizes {
                    crate::load::Sizes::Fixed(_) => "fixed".into(),
                    d => d.name(),
                },
                mean_size: match &o.workload.sizes {
                    crate::load::Sizes::Fixed(_) => None,
                    d => Some(d.mean()),
                },
                seed: o.seed,
                backlog_per_qp: crate::load::BACKLOG,
            },
            scenario: o.scenario.as_ref().map(|s| ScenarioJson { file: &s.file, phase: &s.phase, text: &s.text }),
            results,
            testbed: TestbedJson {
                date_utc: &self.date,
                command_line: &self.command_line,
                transport: "RC",
                rrddmma_perf_version: env!("CARGO_PKG_VERSION"),
                ranks: self
                    .envs
                    .iter()
                    .enumerate()
                    .map(|(rank, e)| RankTestbedJson { rank, facts: &e.testbed })
                    .collect(),
            },
            counters: self
                .envs
                .iter()
                .enumerate()
                .map(|(rank, e)| CountersJson { rank, deltas: &e.counters })
                .collect(),
        };
        let mut s = serde_json::to_string_pretty(&doc).map_err(|e| format!("writing the JSON: {e}"))?;
        s.push('\n');
        Ok(s)
    }

    /// One CSV row per flow, size and repetition, with the run's settings
    /// repeated.
    pub fn csv(&self) -> Res<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let threads = if self.o.threads == 0 { "per-qp".to_string() } else { self.o.threads.to_string() };
        for f in self.runs.iter().flat_map(|r| &r.flows) {
            let l = lat_json(f);
            w.serialize(FlowCsv {
                pattern: self.o.pattern.name(),
                op: self.o.verb.name(),
                size: f.size,
                qps_per_pair: self.o.qps,
                threads_per_rank: threads.clone(),
                rep: f.rep,
                src: f.src,
                dst: f.dst,
                requests: f.ops,
                window_start_s: f.start,
                window_end_s: f.secs,
                bw_mib_s: f.mib_s(),
                msg_rate_mpps: f.mpps(),
                lat_samples: f.lat_n,
                p50_us: l.p50,
                p99_us: l.p99,
                p999_us: l.p999,
                avg_us: l.avg,
            })
            .map_err(|e| format!("writing the CSV: {e}"))?;
        }
        let bytes = w.into_inner().map_err(|e| format!("writing the CSV: {e}"))?;
        String::from_utf8(bytes).map_err(|e| format!("writing the CSV: {e}"))
    }
    /// One SVG holding `panels` (each of `w` × `h`, drawn by `draw` at an
    /// offset), `PANEL_COLUMNS` to a row, under `title`.
    fn grid(&self, title: &str, w: usize, h: usize, draw: impl Fn(&mut String, &SizeRun, usize, usize)) -> String {
        let cols = self.runs.len().clamp(1, PANEL_COLUMNS);
        let rows = self.runs.len().div_ceil(cols).max(1);
        let (tw, th) = ((w * cols).max(440), 30 + h * rows);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{tw}\" height=\"{th}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{title}</text>\n",
            tw / 2
        );
        for (i, r) in self.runs.iter().enumerate() {
            draw(&mut s, r, w * (i % cols), 30 + h * (i / cols));
        }
        s.push_str("</svg>\n");
        s
    }

    /// The colour of `t` in [0, 1] on the heatmap's scale (white to blue).
    fn shade(t: f64) -> String {
        let t = t.clamp(0.0, 1.0);
        format!("rgb({},{},255)", (255.0 * (1.0 - t)) as u8, (255.0 - 120.0 * t) as u8)
    }

    /// The largest mean bandwidth of any flow of any size: every panel
    /// shares this scale.
    fn flow_scale(&self) -> f64 {
        self.runs.iter().flat_map(|r| r.cells().into_iter().filter_map(|c| r.mean_bw(c))).fold(0.0, f64::max).max(1e-9)
    }

    /// Per size, an N×N heatmap of mean bandwidth over repetitions (source
    /// rows, destination columns), every panel on one colour scale, with
    /// its legend and each cell's value as text.
    pub fn heatmap(&self) -> String {
        let n = self.n as usize;
        let cell = 60;
        let (x0, y0) = (60, 50);
        let (w, h) = (x0 + cell * n + 30, y0 + cell * n + 30);
        let max = self.flow_scale();
        let title = format!(
            "rrddmma-perf cluster {} {}: MiB/s per flow (mean of {} repetition(s))",
            self.o.pattern.name(),
            self.o.verb.name(),
            self.o.reps
        );
        let mut svg = self.grid(&title, w, h, |s, r, ox, oy| {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} B: destination rank</text>\n\
                 <text x=\"{}\" y=\"{}\" transform=\"rotate(-90 {} {})\" text-anchor=\"middle\">source rank</text>",
                ox + x0 + cell * n / 2,
                oy + 15,
                r.size,
                ox + 20,
                oy + y0 + cell * n / 2,
                ox + 20,
                oy + y0 + cell * n / 2
            );
            for i in 0..n {
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{i}</text>\n\
                     <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{i}</text>",
                    ox + x0 + cell * i + cell / 2,
                    oy + y0 - 4,
                    ox + x0 - 6,
                    oy + y0 + cell * i + cell / 2 + 4
                );
            }
            for src in 0..n {
                for dst in 0..n {
                    let (fill, label) = match r.mean_bw((src as u32, dst as u32)) {
                        Some(v) if v > 0.0 => (Self::shade(v / max), value_label(v)),
                        _ => ("#eeeeee".to_string(), String::new()),
                    };
                    let _ = writeln!(
                        s,
                        "<rect x=\"{}\" y=\"{}\" width=\"{cell}\" height=\"{cell}\" fill=\"{fill}\" stroke=\"white\"/>\
                         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                        ox + x0 + cell * dst,
                        oy + y0 + cell * src,
                        ox + x0 + cell * dst + cell / 2,
                        oy + y0 + cell * src + cell / 2 + 4
                    );
                }
            }
        });
        // The legend: one scale for every panel, below them.
        let cols = self.runs.len().clamp(1, PANEL_COLUMNS);
        let rows = self.runs.len().div_ceil(cols).max(1);
        let ly = 30 + h * rows + 10;
        let mut legend = format!("<g class=\"legend\"><text x=\"10\" y=\"{}\">MiB/s</text>\n", ly + 14);
        for k in 0..=10 {
            let t = k as f64 / 10.0;
            let _ = writeln!(
                legend,
                "<rect x=\"{}\" y=\"{ly}\" width=\"20\" height=\"20\" fill=\"{}\" stroke=\"#999999\"/>",
                60 + 20 * k,
                Self::shade(t)
            );
        }
        let _ = writeln!(
            legend,
            "<text x=\"60\" y=\"{}\">0</text><text x=\"280\" y=\"{}\" text-anchor=\"end\">{max:.1}</text>\n\
             <text x=\"290\" y=\"{}\">grey: no flow</text></g>",
            ly + 34,
            ly + 34,
            ly + 14
        );
        svg = Self::grow(svg, 50);
        svg.insert_str(svg.len() - "</svg>\n".len(), &legend);
        svg
    }

    /// Adds `dy` pixels to an SVG's height.
    fn grow(svg: String, dy: usize) -> String {
        let Some(i) = svg.find("height=\"") else { return svg };
        let rest = &svg[i + 8..];
        let Some(j) = rest.find('"') else { return svg };
        let Ok(h) = rest[..j].parse::<usize>() else { return svg };
        format!("{}height=\"{}\"{}", &svg[..i], h + dy, &rest[j + 1..])
    }

    /// Per size, per-rank out/in bandwidth bars (means over repetitions),
    /// on one axis scale across panels, each bar labelled with its value,
    /// with a colour legend.
    pub fn bars(&self) -> String {
        let n = self.n as usize;
        let (x0, y0, hgt, group) = (60, 40, 160, 70);
        let (w, h) = (x0 + group * n + 20, y0 + hgt + 40);
        let max =
            self.runs.iter().flat_map(|r| r.mean_totals(self.n)).map(|(o, i)| o.max(i)).fold(0.0, f64::max).max(1e-9);
        let title = format!("rrddmma-perf cluster: per-rank MiB/s (mean of {} repetition(s))", self.o.reps);
        let mut svg = self.grid(&title, w, h, |s, r, ox, oy| {
            let t = r.mean_totals(self.n);
            let (_, j) = r.aggregate_summary();
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} B, Jain {:.3}</text>",
                ox + w / 2,
                oy + 15,
                r.size,
                j.mean
            );
            // The axis: a line with ticks at 0, half and the shared maximum.
            let _ = writeln!(
                s,
                "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"black\"/>\
                 <line x1=\"{x}\" y1=\"{b}\" x2=\"{}\" y2=\"{b}\" stroke=\"black\"/>",
                oy + y0,
                oy + y0 + hgt,
                ox + x0 + group * n,
                x = ox + x0 - 2,
                b = oy + y0 + hgt
            );
            for k in 0..=2 {
                let v = max * k as f64 / 2.0;
                let y = oy + y0 + hgt - hgt * k / 2;
                let _ = writeln!(
                    s,
                    "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"black\"/>\
                     <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"10\">{v:.1}</text>",
                    ox + x0 - 6,
                    ox + x0 - 2,
                    ox + x0 - 8,
                    y + 4
                );
            }
            for (rank, (o, i)) in t.iter().enumerate() {
                for (k, (v, colour)) in [(o, "#4477aa"), (i, "#ee7733")].into_iter().enumerate() {
                    let bh = (v / max * hgt as f64) as usize;
                    let x = ox + x0 + group * rank + 28 * k;
                    let _ = writeln!(
                        s,
                        "<rect x=\"{x}\" y=\"{}\" width=\"25\" height=\"{bh}\" fill=\"{colour}\"><title>{v:.2}</title></rect>\
                         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{}</text>",
                        oy + y0 + hgt - bh,
                        x + 12,
                        oy + y0 + hgt - bh - 3,
                        value_label(*v)
                    );
                }
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">rank {rank}</text>",
                    ox + x0 + group * rank + 26,
                    oy + y0 + hgt + 16
                );
            }
        });
        let cols = self.runs.len().clamp(1, PANEL_COLUMNS);
        let ly = 30 + h * self.runs.len().div_ceil(cols).max(1) + 5;
        let legend = format!(
            "<g class=\"legend\"><rect x=\"10\" y=\"{ly}\" width=\"14\" height=\"14\" fill=\"#4477aa\"/>\
             <text x=\"30\" y=\"{}\">out (sent by the rank)</text>\
             <rect x=\"200\" y=\"{ly}\" width=\"14\" height=\"14\" fill=\"#ee7733\"/>\
             <text x=\"220\" y=\"{}\">in (received by the rank)</text></g>\n",
            ly + 12,
            ly + 12
        );
        svg = Self::grow(svg, 30);
        svg.insert_str(svg.len() - "</svg>\n".len(), &legend);
        svg
    }
}

/// Redraws every figure of a saved `--json` report (`rrddmma-perf plot
/// RESULTS.json [OUT.svg]`): the heatmap to `svg` and the others beside it,
/// as `--svg` would have.
pub fn redraw(json: &str, svg: &std::path::Path) -> Res<()> {
    let j: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not a JSON document: {e}"))?;
    if j["mode"] != "cluster" {
        return Err("not an rrddmma-perf cluster report (its \"mode\" is not \"cluster\")".into());
    }
    let text = |k: &str| j[k].as_str().map(str::to_string).ok_or_else(|| format!("the report has no {k:?}"));
    let num = |k: &str| j[k].as_u64().ok_or_else(|| format!("the report has no number {k:?}"));
    let wl = &j["workload"];
    let sizes: Vec<String> = j["sizes"]
        .as_array()
        .map_or(Vec::new(), |a| a.iter().filter_map(|v| v.as_u64().map(|x| x.to_string())).collect());
    let pattern = text("pattern")?;
    let mut args = vec!["--reps".to_string(), num("repetitions")?.to_string()];
    if pattern != "explicit" {
        args.extend(["--pattern".into(), pattern.clone()]);
    }
    args.extend(["--warmup".into(), num("warmup_requests_per_qp")?.to_string()]);
    let mix = wl["mix"].as_str().unwrap_or("");
    if mix.contains(',') {
        args.extend(["--mix".into(), mix.into()]);
    } else {
        args.extend(["--op".into(), text("op")?]);
    }
    match wl["size_dist"].as_str() {
        Some(d) if d != "fixed" => args.extend(["--size-dist".into(), d.into()]),
        _ => args.extend(["-s".into(), sizes.join(",")]),
    }
    if let Some(r) = wl["rate"].as_str() {
        args.extend(["--rate".into(), r.into()]);
    }
    let mut o =
        crate::cluster_opts::parse(&args).map_err(|e| format!("the report's settings ({}): {e}", args.join(" ")))?;
    if pattern == "explicit" {
        o.pattern = crate::cluster_opts::Pattern::Explicit;
    }
    let n = u32::try_from(num("ranks")?).map_err(|_| "too many ranks".to_string())?;
    let (mut flows, mut loads) = (Vec::new(), Vec::new());
    for r in j["results"].as_array().into_iter().flatten() {
        let size = r["size"].as_u64().unwrap_or(0) as usize;
        for rep in r["reps"].as_array().into_iter().flatten() {
            for f in rep["flows"].as_array().into_iter().flatten() {
                let u = |k: &str| f[k].as_u64().unwrap_or(0);
                let x = |k: &str| f[k].as_f64().unwrap_or(0.0);
                let l = |k: &str| f["lat_us"][k].as_f64().unwrap_or(0.0);
                flows.push(FlowResult {
                    src: u("src") as u32,
                    dst: u("dst") as u32,
                    rep: rep["rep"].as_u64().unwrap_or(0) as u32,
                    ops: u("requests"),
                    start: x("window_start_s"),
                    secs: x("window_end_s"),
                    size,
                    bytes: u("bytes"),
                    lat_n: f["lat_us"]["samples"].as_u64().unwrap_or(0),
                    lat: [l("p50"), l("p99"), l("p999"), l("avg")],
                });
                if !f["load"].is_null() {
                    loads.push(
                        serde_json::from_value::<LoadResult>(f["load"].clone())
                            .map_err(|e| format!("a flow's \"load\" in the report: {e}"))?,
                    );
                }
            }
        }
    }
    Report::new(&o, n, flows).loads(loads).write_figures(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_opts::parse;

    #[test]
    fn fairness_and_round_trip() {
        assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        let f = FlowResult {
            src: 2,
            dst: 0,
            rep: 1,
            ops: 99,
            start: 0.25,
            secs: 0.5,
            size: 4096,
            bytes: 99 * 4096,
            lat_n: 200,
            lat: [1.5, 2.5, 3.5, 1.75],
        };
        assert_eq!(FlowResult::decode(f.encode().trim()).unwrap(), f);
        assert!(FlowResult::decode("1 2 x").is_err());
    }

    fn flow(src: u32, dst: u32, size: usize, ops: u64) -> FlowResult {
        let bytes = ops.saturating_mul(size as u64);
        FlowResult { src, dst, rep: 0, ops, start: 0.0, secs: 1.0, size, bytes, lat_n: 30, lat: [1.0, 2.0, 3.0, 1.5] }
    }

    #[test]
    fn every_size_gets_its_matrix_in_every_format() {
        let o = parse(["--pattern", "incast", "-s", "1048576,2097152", "-q", "2", "--threads", "2"]).unwrap();
        // Out of order, as gathered from the ranks.
        let every =
            vec![flow(2, 0, 2097152, 10), flow(1, 0, 1048576, 10), flow(2, 0, 1048576, 30), flow(1, 0, 2097152, 10)];
        let r = Report::new(&o, 3, every);
        assert_eq!(r.runs.iter().map(|x| x.size).collect::<Vec<_>>(), vec![1048576, 2097152]);
        assert_eq!(r.runs[0].cells(), vec![(1, 0), (2, 0)]);
        // 10 and 30 MiB/s: Jain = 40² / (2 · 1000) = 0.8; rank 0 takes in 40.
        assert!((r.runs[0].fairness(0) - 0.8).abs() < 1e-12);
        assert_eq!(r.runs[0].mean_totals(3)[0], (0.0, 40.0));
        assert!((r.runs[1].fairness(0) - 1.0).abs() < 1e-12);
        let t = r.table();
        assert!(t.contains(" size 1048576 B\n") && t.contains(" size 2097152 B\n"));
        assert_eq!(t.matches("Jain's fairness index").count(), 2);
        assert!(t.contains("one run, no spread") && t.contains("16 warm-up request(s) per QP"), "{t}");
        assert!(!t.contains("flows share a posting thread"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!((j["qps_per_pair"].as_u64(), j["threads_per_rank"].as_u64()), (Some(2), Some(2)));
        assert_eq!(j["sizes"], serde_json::json!([1048576, 2097152]));
        assert_eq!(j["iterations_per_qp"].as_u64(), Some(o.iters));
        assert_eq!((j["repetitions"].as_u64(), j["warmup_requests_per_qp"].as_u64()), (Some(1), Some(16)));
        assert_eq!(j["per_flow"], true);
        assert!(j["duration_s"].is_null());
        let res = j["results"].as_array().unwrap();
        assert_eq!(res.len(), 2);
        assert!((res[0]["jain_fairness"]["mean"].as_f64().unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(res[0]["flows"][1]["src"].as_u64(), Some(2));
        assert_eq!(j["schema_version"].as_u64(), Some(u64::from(SCHEMA_VERSION)));
        assert!((res[0]["flows"][1]["bw_mib_s"]["mean"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        assert!(res[0]["flows"][1]["bw_mib_s"]["sd"].is_null(), "one repetition has no sd");
        assert_eq!(res[0]["rank_totals"][0]["in_mib_s"].as_f64(), Some(40.0));
        assert!((res[0]["reps"][0]["flows"][1]["bw_mib_s"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        let c = r.csv().unwrap();
        assert_eq!(c.lines().count(), 5);
        assert_eq!(
            c.lines().next().unwrap(),
            "pattern,op,size,qps_per_pair,threads_per_rank,rep,src,dst,requests,window_start_s,window_end_s,\
             bw_mib_s,msg_rate_mpps,lat_samples,p50_us,p99_us,p999_us,avg_us"
        );
        assert!(c.lines().nth(1).unwrap().starts_with("incast,write,1048576,2,2,0,1,0,10,"));
        let (h, b) = (r.heatmap(), r.bars());
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains("1048576 B: destination rank") && h.contains("2097152 B: destination rank"));
        assert!(b.contains("1048576 B, Jain 0.800") && b.contains("2097152 B, Jain 1.000"));
    }

    /// Three repetitions of two flows: 10, 20, 30 and 40, 40, 40 MiB/s.
    fn three_reps() -> Vec<FlowResult> {
        let mut v = Vec::new();
        for (rep, (a, b)) in [(10, 40), (20, 40), (30, 40)].into_iter().enumerate() {
            let at = |src, ops| FlowResult { rep: rep as u32, start: 0.5, secs: 1.5, ..flow(src, 0, 1048576, ops) };
            v.push(at(1, a));
            v.push(at(2, b));
        }
        v
    }

    #[test]
    fn regression_reps_give_mean_sd_student_t_interval_and_range_per_flow_and_aggregate() {
        let o = parse(["--pattern", "incast", "-s", "1048576", "--reps", "3"]).unwrap();
        let r = Report::new(&o, 3, three_reps());
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        let res = &j["results"][0];
        let f1 = &res["flows"][0]["bw_mib_s"];
        // 10, 20, 30: mean 20, sd 10, 95% CI 20 ± 4.303 · 10 / √3.
        assert_eq!((f1["n"].as_u64(), f1["mean"].as_f64(), f1["sd"].as_f64()), (Some(3), Some(20.0), Some(10.0)));
        let h = 4.303 * 10.0 / 3f64.sqrt();
        assert!((f1["ci95"][0].as_f64().unwrap() - (20.0 - h)).abs() < 1e-9);
        assert!((f1["ci95"][1].as_f64().unwrap() - (20.0 + h)).abs() < 1e-9);
        assert_eq!((f1["min"].as_f64(), f1["max"].as_f64()), (Some(10.0), Some(30.0)));
        assert_eq!(res["flows"][1]["bw_mib_s"]["sd"].as_f64(), Some(0.0));
        // The aggregate per repetition is 50, 60, 70.
        let a = &res["aggregate_mib_s"];
        assert_eq!((a["mean"].as_f64(), a["sd"].as_f64(), a["min"].as_f64()), (Some(60.0), Some(10.0), Some(50.0)));
        assert_eq!(res["reps"].as_array().unwrap().len(), 3);
        assert_eq!(res["reps"][2]["aggregate_mib_s"].as_f64(), Some(70.0));
        // The window is the second from 0.5 s to 1.5 s.
        assert_eq!(res["reps"][0]["flows"][0]["window_start_s"].as_f64(), Some(0.5));
        assert_eq!(res["flows"][0]["window_s"]["mean"].as_f64(), Some(1.0));
        let t = r.table();
        assert!(t.contains("20.00 ± 10.00 [-4.84, 44.84] (10.00–30.00)"), "{t}");
        assert!(t.contains("aggregate 60.00 ± 10.00"), "{t}");
        assert!(t.contains("over 3 repetition(s)") && t.contains("warm-up"), "{t}");
        assert_eq!(r.csv().unwrap().lines().count(), 7, "one row per flow and repetition");
    }

    #[test]
    fn regression_percentiles_shown_only_with_enough_samples_and_their_count() {
        let o = parse(["-s", "4096", "--lat-samples", "200"]).unwrap();
        let f = FlowResult { lat_n: 200, lat: [10.0, 20.0, 30.0, 12.0], ..flow(0, 1, 4096, 10) };
        let r = Report::new(&o, 2, vec![f.clone()]);
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        let l = &j["results"][0]["reps"][0]["flows"][0]["lat_us"];
        assert_eq!((l["samples"].as_u64(), l["p50"].as_f64(), l["p99"].as_f64()), (Some(200), Some(10.0), Some(20.0)));
        assert!(l["p999"].is_null(), "200 samples do not back a p99.9: {l}");
        assert!(j["results"][0]["flows"][0]["lat_us"]["p999"].is_null());
        assert_eq!(j["percentile_min_samples"]["p999"].as_u64(), Some(1000));
        let t = r.table();
        let row = t.lines().find(|l| l.contains("0 -> 1")).unwrap();
        assert!(row.contains(" 200 ") && row.contains("10.00") && row.contains("20.00"), "{row}");
        assert!(!row.contains("30.00") && row.contains(" - "), "{row}");
        assert!(t.contains("p99.9 1000"), "{t}");
        // 99 samples back neither p99 nor p99.9.
        let few = Report::new(&o, 2, vec![FlowResult { lat_n: 99, ..f.clone() }]);
        let c = few.csv().unwrap();
        assert!(c.lines().nth(1).unwrap().ends_with(",99,10.0,,,12.0"), "{c}");
        // 1,000 samples back all three.
        let many = Report::new(&o, 2, vec![FlowResult { lat_n: 1000, ..f }]);
        let j: serde_json::Value = serde_json::from_str(&many.json().unwrap()).unwrap();
        assert_eq!(j["results"][0]["reps"][0]["flows"][0]["lat_us"]["p999"].as_f64(), Some(30.0));
    }

    #[test]
    fn regression_windows_exclude_warm_up_from_the_rate() {
        // 100 requests of 1 MiB in a window from 1 s to 2 s: 100 MiB/s,
        // not 50 as over the whole 2 s since the phase start.
        let o = parse(["-s", "1048576"]).unwrap();
        let f = FlowResult { start: 1.0, secs: 2.0, ..flow(0, 1, 1048576, 100) };
        let r = Report::new(&o, 2, vec![f]);
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!(j["results"][0]["reps"][0]["flows"][0]["bw_mib_s"].as_f64(), Some(100.0));
        assert_eq!(j["results"][0]["reps"][0]["flows"][0]["seconds"].as_f64(), Some(1.0));
    }

    #[test]
    fn regression_counters_that_moved_are_printed_and_all_deltas_and_the_testbed_are_in_the_json() {
        let o = parse(["-s", "4096"]).unwrap();
        let env = |retries: u64| {
            let mut e = RankEnv::default();
            e.counters.insert("port1/hw_counters/completer_retry_err".into(), retries);
            e.counters.insert("port1/hw_counters/duplicate_request".into(), 0);
            e.testbed.insert("host".into(), format!("h{retries}"));
            e
        };
        let r = Report::new(&o, 2, vec![flow(0, 1, 4096, 10)]).environment(vec![env(0), env(37)]);
        let t = r.table();
        assert!(
            t.contains("port counters that moved") && t.contains("rank 1 port1/hw_counters/completer_retry_err +37"),
            "{t}"
        );
        assert!(!t.contains("duplicate_request") && !t.contains("rank 0 port1"), "only the moved ones: {t}");
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!(j["counters"][1]["deltas"]["port1/hw_counters/completer_retry_err"].as_u64(), Some(37));
        assert_eq!(j["counters"][0]["deltas"]["port1/hw_counters/duplicate_request"].as_u64(), Some(0));
        assert_eq!(
            (j["testbed"]["ranks"][1]["host"].as_str(), j["testbed"]["transport"].as_str()),
            (Some("h37"), Some("RC"))
        );
        assert!(j["testbed"]["date_utc"].as_str().is_some_and(|d| d.len() == 20 && d.ends_with('Z')));
        assert!(j["testbed"]["command_line"].as_array().is_some_and(|a| !a.is_empty()));
        let quiet = Report::new(&o, 2, vec![flow(0, 1, 4096, 10)]).environment(vec![env(0), env(0)]);
        assert!(quiet.table().contains("none of the devices' counters moved"));
        let blind = Report::new(&o, 2, vec![flow(0, 1, 4096, 10)]).environment(vec![RankEnv::default(), env(0)]);
        let t = blind.table();
        assert!(
            t.contains("rank(s) [0] see none in sysfs") && t.contains("none of the devices' counters moved"),
            "{t}"
        );
    }

    #[test]
    fn regression_flows_sharing_a_posting_thread_keep_their_own_figures_and_say_what_they_share() {
        let o = parse(["-s", "4096"]).unwrap();
        let r = Report::new(&o, 3, vec![flow(0, 1, 4096, 10), flow(0, 2, 4096, 30)]).shared_threads(vec![0]);
        let t = r.table();
        assert!(t.contains("flows share a posting thread: rank(s) [0] drove several flows from one thread"), "{t}");
        assert!(t.contains("a CPU-bound thread caps their sum") && t.contains("--threads per-qp"), "{t}");
        assert!(t.contains("over flows\n") || t.ends_with("over flows"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!((j["per_flow"].as_bool(), j["shared_posting_thread"].clone()), (Some(true), serde_json::json!([0])));
        // Each flow's own bandwidth, not the source's mean; Jain over the two flows.
        let bw: Vec<f64> = j["results"][0]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["bw_mib_s"]["mean"].as_f64().unwrap())
            .collect();
        assert_eq!(bw.len(), 2);
        assert!(bw[1] > 2.5 * bw[0], "{bw:?}");
        assert!((j["results"][0]["jain_fairness"]["mean"].as_f64().unwrap() - 0.8).abs() < 1e-12);
    }

    #[test]
    fn regression_svgs_have_legends_axes_one_scale_and_value_labels() {
        let o = parse(["--pattern", "incast", "-s", "4096,65536"]).unwrap();
        // 4096 B: 5 and 10 MiB/s; 65536 B: 20 MiB/s on both flows.
        let every =
            vec![flow(1, 0, 4096, 1280), flow(2, 0, 4096, 2560), flow(1, 0, 65536, 320), flow(2, 0, 65536, 320)];
        let r = Report::new(&o, 3, every);
        let h = r.heatmap();
        assert!(h.contains("class=\"legend\"") && h.contains(">MiB/s<") && h.contains(">20.0</text>"), "{h}");
        // One scale, up to 20: the 5 MiB/s cell is a quarter of the way,
        // and only the two 20 MiB/s cells (and the legend's end) are the
        // darkest (each panel to its own maximum would make 10 the darkest).
        assert!(h.contains(&Report::shade(0.25)), "{h}");
        assert_eq!(h.matches(&Report::shade(1.0)).count(), 3, "{h}");
        let b = r.bars();
        assert!(b.contains("class=\"legend\"") && b.contains("out (sent by the rank)"), "{b}");
        assert!(b.contains("<line") && b.contains(">40.0</text>"), "an axis up to the shared maximum: {b}");
        assert!(b.contains(">15.0</text>") && b.contains(">40.0</text>"), "bar values as text: {b}");
        assert_eq!(
            (value_label(0.02775), value_label(0.0049), value_label(0.1)),
            ("0.028".into(), "0.0049".into(), "0.1".into())
        );
        assert_eq!((value_label(0.0), value_label(2.345)), ("0.0".into(), "2.3".into()));
        // Heights grew to hold the legend, and the document is still whole.
        assert!(h.ends_with("</g></svg>\n") || h.ends_with("</g>\n</svg>\n"), "{h}");
    }

    #[test]
    fn regression_out_of_range_or_malformed_result_line_names_the_rank() {
        let sizes = [4096usize, 65536];
        let e = Expect { ranks: 3, sizes: &sizes, reps: 2, lat_samples: 30 };
        let line = |f: &FlowResult| format!("apart 1\n{}", f.encode());
        let ok = flow(2, 0, 4096, 10);
        assert_eq!(decode_rank(2, &line(&ok), e).unwrap(), (true, vec![ok.clone()]));
        assert!(!decode_rank(2, &format!("apart 0\n{}", ok.encode()), e).unwrap().0);
        let cases = [
            (line(&flow(2, 7, 4096, 10)), "destination rank 7"),
            (line(&flow(2, 4_000_000_000, 4096, 10)), "destination rank 4000000000"),
            (line(&flow(2, 2, 4096, 10)), "destination rank 2"),
            (line(&flow(0, 1, 4096, 10)), "source rank 0"),
            (line(&flow(2, 0, 512, 10)), "size 512"),
            (line(&flow(2, 0, 65536, u64::MAX / 2)), "in 9223372036854775807 requests of at most 65536 bytes"),
            (line(&FlowResult { bytes: 10 * 4096 + 1, ..ok.clone() }), "40961 bytes in 10 requests"),
            (line(&FlowResult { secs: f64::NAN, ..ok.clone() }), "time NaN"),
            (line(&FlowResult { lat: [1.0, -2.0, 3.0, 1.0], ..ok.clone() }), "time -2"),
            (line(&FlowResult { rep: 2, ..ok.clone() }), "repetition 2"),
            (line(&FlowResult { lat_n: 31, ..ok.clone() }), "31 latency samples"),
            (line(&FlowResult { start: 2.0, ..ok.clone() }), "ends before it starts"),
            ("apart 1\n2 0 0 ten 0e0 1e0 4096 40960 30 1 2 3 4".to_string(), "malformed flow result"),
            ("apart 1\n2 0".to_string(), "malformed flow result"),
            (format!("apart 1\n{}", ok.encode().repeat(9)), "more than 8 result lines"),
            (ok.encode(), "where its results start"),
        ];
        for (text, want) in cases {
            let err = decode_rank(2, &text, e).unwrap_err();
            assert!(err.starts_with("rank 2") && err.contains(want), "{text:?}: {err}");
        }
        // The report itself cannot index past its ranks, whatever it is given.
        let o = parse(["-s", "4096"]).unwrap();
        let r = Report::new(&o, 3, vec![flow(9, 12, 4096, 10), ok]);
        assert_eq!(r.runs[0].mean_totals(3).len(), 3);
        assert!(r.table().contains("aggregate"));
        assert!(r.bars().contains("rank 2"));
        assert!(r.heatmap().contains("</svg>"));
    }
}
