//! `rrddmma-perf cluster`'s flags: the traffic pattern, the operation,
//! sizes, QPs and threads, and the output files.

use std::path::PathBuf;

use rrddmma::wrap::dc::DcPolicy;

use crate::args::{num, text, Verb};
use crate::load::{self, Mix, Rate, Sizes, Workload};

type Res<T> = Result<T, String>;

/// Bits of a `wr_id` that count requests; the unit index sits above them.
pub(crate) const COUNT_BITS: u32 = 40;

/// Which ranks send to which.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Every rank to every other rank.
    AllToAll,
    /// Every rank to rank 0 (N→1).
    Incast,
    /// Rank 0 to every rank (1→N).
    Outcast,
    /// Rank i to rank i+1 (mod N): a permutation.
    Ring,
    /// Rank 0 probes rank 1 one request at a time while every other rank
    /// streams to every rank.
    Loaded,
    /// The flows a scenario file lists ([`ClusterOpts::flows`]).
    Explicit,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::Incast => "incast",
            Pattern::Outcast => "outcast",
            Pattern::Ring => "ring",
            Pattern::Loaded => "loaded-latency",
            Pattern::Explicit => "explicit",
        }
    }

    /// The bandwidth flows (src, dst) of `n` ranks.
    pub(crate) fn flows(self, n: u32) -> Vec<(u32, u32)> {
        let all = (0..n).flat_map(|s| (0..n).map(move |d| (s, d))).filter(|(s, d)| s != d);
        match self {
            Pattern::AllToAll => all.collect(),
            Pattern::Incast => (1..n).map(|s| (s, 0)).collect(),
            Pattern::Outcast => (1..n).map(|d| (0, d)).collect(),
            Pattern::Ring => (0..n).map(|s| (s, (s + 1) % n)).collect(),
            Pattern::Loaded => all.filter(|(s, _)| *s != 0).collect(),
            Pattern::Explicit => Vec::new(),
        }
    }
}

/// How the ranks reach each other (`-c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// An RC mesh: `-q` QPs to every other rank.
    Rc,
    /// DC (`-c DC`): one DC target and a pool of `--dci` initiators per rank
    /// ([`rrddmma::wrap::dc::DcMesh`]).
    Dc,
}

/// The DC settings of `-c DC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcSettings {
    /// DCIs in each rank's pool (`--dci`).
    pub dcis: u16,
    /// The pool's policy (`--dc-policy`).
    pub policy: DcPolicy,
    /// Run the RC mesh where a device lacks DC (`--dc-fallback rc`) instead
    /// of ending with the refusal.
    pub fallback_rc: bool,
}

impl Default for DcSettings {
    fn default() -> DcSettings {
        DcSettings { dcis: 4, policy: DcPolicy::Dcs, fallback_rc: false }
    }
}

/// A `--dc-policy` value: UCX's names, `dcs_quota` with an optional
/// `:QUOTA` (8), `rand` with an optional `:SEED` (1).
pub fn dc_policy(v: &str) -> Res<DcPolicy> {
    let (name, arg) = match v.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (v, None),
    };
    let n = |what: &str, d: u64| -> Res<u64> {
        arg.map_or(Ok(d), |a| a.parse().map_err(|_| format!("--dc-policy {v:?}: {a:?} is not a valid {what}")))
    };
    match (name, arg) {
        ("dcs", None) => Ok(DcPolicy::Dcs),
        ("hw_dcs", None) => Ok(DcPolicy::HwDcs),
        ("dcs_quota", _) => {
            let quota = n("quota", 8)?;
            if quota == 0 || quota > u64::from(u32::MAX) {
                return Err(format!("--dc-policy {v:?}: the quota is 1 to 2^32 - 1 posts"));
            }
            Ok(DcPolicy::DcsQuota { quota: quota as u32 })
        }
        ("rand", _) => Ok(DcPolicy::Rand { seed: n("seed", 1)? }),
        _ => Err(format!("--dc-policy {v:?}: expected dcs, dcs_quota[:QUOTA], hw_dcs or rand[:SEED]")),
    }
}

/// One flow of a scenario's explicit list, with its own load.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub workload: Workload,
}

/// Where a run's settings came from when a scenario file gave them.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioInfo {
    pub file: String,
    pub phase: String,
    /// The file's text, kept in the JSON so the run can be repeated.
    pub text: String,
}

/// The cluster mode's flags.
#[derive(Clone, Debug)]
pub struct ClusterOpts {
    pub pattern: Pattern,
    pub verb: Verb,
    /// Message sizes, run one after the other, each with its own phases.
    pub sizes: Vec<usize>,
    /// RC QPs per pair of ranks (each flow is spread over them).
    pub qps: u32,
    /// Threads per rank, each driving its share of the rank's QPs; 0 means
    /// one thread per QP (`--threads per-qp`), so that no flows share a
    /// thread's CPU time (each flow is timed on its own either way).
    pub threads: u32,
    /// Repetitions of every size's phases.
    pub reps: u32,
    /// Requests per QP completed before a flow's measurement window opens
    /// (left out of its figures).
    pub warmup: u64,
    pub iters: u64,
    pub duration: Option<f64>,
    pub depth: u32,
    pub lat_samples: u32,
    /// Every flow's offered load: arrivals, operations and sizes
    /// (`--rate`, `--mix`, `--size-dist`; closed loop of `--op` at each
    /// `-s` size without them).
    pub workload: Workload,
    /// Seed of the arrival, operation and size draws (each QP of each rank
    /// draws its own sequence from it).
    pub seed: u64,
    /// `Pattern::Explicit`'s flows, each with its own load.
    pub flows: Vec<FlowSpec>,
    /// The scenario file and phase, when one gave these settings.
    pub scenario: Option<ScenarioInfo>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    /// `-c`: RC mesh (default) or DC.
    pub transport: Transport,
    /// `-c DC`'s pool, policy and fallback.
    pub dc: DcSettings,
}

pub const USAGE: &str = "\
usage: rrddmma-perf cluster [FLAGS]     (on every rank: mpirun, srun, or RRDDMMA_HOSTS)
  --pattern P          all-to-all (default), incast, outcast, ring, loaded-latency
  --op OP              write (default), read, send, atomic
  -s, --size BYTES     message size (4096; atomic 8), or a list: -s 64,4096,65536
  -a, --all            sweep sizes 2 .. 2^23 (see --max-size)
      --max-size BYTES largest size of a -a sweep (2^23)
  -c, --connection T   RC (default): an RC mesh, -q QPs to every other rank; DC: one DC target and a
                       pool of --dci DC initiators per rank, whatever the rank count (mlx5 only; all-to-all
                       or incast, write or read, closed loop: the scalability experiment of docs/perf.md)
      --dci K          -c DC: DC initiators in each rank's pool (4)
      --dc-policy P    -c DC: dcs (default), dcs_quota[:QUOTA] (8), hw_dcs, rand[:SEED]: UCX's DCI policies
      --dc-fallback rc -c DC where a rank's device lacks DC (rxe): run the RC mesh and say so in the report
                       (without it the run ends with the device's refusal)
  -q, --qp N           RC QPs per pair of ranks; -n and -t count per QP (1)
      --threads N      threads per rank, each driving its share of the QPs (1); per-qp: one per QP,
                       so flows share no thread's CPU time (figures are per flow either way)
      --reps N         repeat every size's phases N times: mean, sd, 95% CI, min-max per flow (1)
      --warmup N       requests per QP completed before the measurement window opens (16)
  -n, --iters N        requests per QP of a flow (1000)
  -D, --duration SECS  stream for SECS seconds per size instead (not with --op send)
  -t, --tx-depth N     requests in flight per QP (16)
      --lat-samples N  latency samples per flow (on its first QP) after the bandwidth phase (200)
      --rate R         open loop: R requests/s offered per flow (k/m/g suffixes), evenly spaced, or
                       poisson:R for exponential gaps; -n then counts arrivals per QP (closed loop)
      --mix OPS        operation mix per request, e.g. write:70,read:20,atomic:10 (weights)
      --size-dist D    message sizes drawn per request: N, uniform:LO-HI, SIZE:WEIGHT,..., file:PATH
      --seed N         seed of the arrival, operation and size draws (1)
      --scenario FILE  the settings from a TOML scenario file instead (phases, explicit flows with their own
                       op, mix, rate and sizes; see docs/perf.md); only --json, --csv and --svg go with it
      --json FILE      results as JSON (rank 0)
      --csv FILE       per-flow results as CSV (rank 0)
      --svg FILE       heatmap of the matrix; FILE with -bars.svg: per-rank bar chart (rank 0)
Rendezvous as rrddmma's ctrl session: RRDDMMA_COORDINATOR, RRDDMMA_HOSTS,
RRDDMMA_DEVICES (see docs/perf.md).";

impl ClusterOpts {
    /// The bandwidth flows (src, dst) of `n` ranks.
    pub fn flow_list(&self, n: u32) -> Vec<(u32, u32)> {
        if self.pattern == Pattern::Explicit {
            self.flows.iter().map(|f| (f.src, f.dst)).collect()
        } else {
            self.pattern.flows(n)
        }
    }

    /// The load of flow `src` -> `dst`.
    pub fn workload_of(&self, src: u32, dst: u32) -> &Workload {
        self.flows.iter().find(|f| (f.src, f.dst) == (src, dst)).map_or(&self.workload, |f| &f.workload)
    }
}

/// A `-s` value: one size or a comma-separated list.
fn size_list(v: &str) -> Res<Vec<usize>> {
    v.split(',')
        .map(|s| s.trim().parse().map_err(|_| format!("-s: {s:?} is not a valid size (a number, or a list: 64,4096)")))
        .collect()
}

/// Parses the arguments after `cluster`.
pub fn parse<I>(args: I) -> Res<ClusterOpts>
where
    I: IntoIterator,
    I::Item: Into<std::ffi::OsString>,
{
    use lexopt::Arg::{Long, Short, Value};
    let mut p = lexopt::Parser::from_args(args);
    let mut o = ClusterOpts {
        pattern: Pattern::AllToAll,
        verb: Verb::Write,
        sizes: Vec::new(),
        qps: 1,
        threads: 1,
        reps: 1,
        warmup: 16,
        iters: 1000,
        duration: None,
        depth: 16,
        lat_samples: 200,
        workload: Workload { rate: Rate::Closed, mix: Mix::only(Verb::Write), sizes: Sizes::Fixed(0) },
        seed: 1,
        flows: Vec::new(),
        scenario: None,
        json: None,
        csv: None,
        svg: None,
        transport: Transport::Rc,
        dc: DcSettings::default(),
    };
    let mut dc_flag: Option<&'static str> = None;
    let (mut all, mut max_size) = (false, 1usize << 23);
    let (mut mix, mut dist): (Option<Mix>, Option<Sizes>) = (None, None);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("pattern") => {
                o.pattern = match text(&mut p, "--pattern")?.as_str() {
                    "all-to-all" | "alltoall" => Pattern::AllToAll,
                    "incast" => Pattern::Incast,
                    "outcast" => Pattern::Outcast,
                    "ring" | "permutation" => Pattern::Ring,
                    "loaded-latency" | "loaded" => Pattern::Loaded,
                    v => {
                        return Err(format!(
                            "--pattern {v:?}: expected all-to-all, incast, outcast, ring or loaded-latency"
                        ))
                    }
                }
            }
            Long("op") => {
                o.verb = match text(&mut p, "--op")?.as_str() {
                    "write" => Verb::Write,
                    "read" => Verb::Read,
                    "send" => Verb::Send,
                    "atomic" => Verb::Atomic,
                    v => return Err(format!("--op {v:?}: expected write, read, send or atomic")),
                }
            }
            Short('s') | Long("size") => o.sizes.extend(size_list(&text(&mut p, "-s")?)?),
            Short('a') | Long("all") => all = true,
            Long("max-size") => max_size = num(&mut p, "--max-size")?,
            Short('c') | Long("connection") => {
                o.transport = match text(&mut p, "-c")?.as_str() {
                    "RC" => Transport::Rc,
                    "DC" => Transport::Dc,
                    v => return Err(format!("-c {v:?}: the cluster mode runs RC (a mesh) or DC")),
                }
            }
            Long("dci") => {
                o.dc.dcis = num(&mut p, "--dci")?;
                dc_flag = Some("--dci");
            }
            Long("dc-policy") => {
                o.dc.policy = dc_policy(&text(&mut p, "--dc-policy")?)?;
                dc_flag = Some("--dc-policy");
            }
            Long("dc-fallback") => {
                let v = text(&mut p, "--dc-fallback")?;
                if v != "rc" {
                    return Err(format!("--dc-fallback {v:?}: the one fallback is rc (the RC mesh)"));
                }
                o.dc.fallback_rc = true;
                dc_flag = Some("--dc-fallback");
            }
            Short('q') | Long("qp") => o.qps = num(&mut p, "-q")?,
            Long("threads") => {
                let v = text(&mut p, "--threads")?;
                o.threads = if v == "per-qp" {
                    0
                } else {
                    v.parse().map_err(|_| format!("--threads {v:?}: expected a number or per-qp"))?
                };
                if o.threads == 0 && v != "per-qp" {
                    return Err("--threads 0: at least 1 (or per-qp)".into());
                }
            }
            Long("reps") => o.reps = num(&mut p, "--reps")?,
            Long("warmup") => o.warmup = num(&mut p, "--warmup")?,
            Short('n') | Long("iters") => o.iters = num(&mut p, "-n")?,
            Short('D') | Long("duration") => o.duration = Some(num(&mut p, "-D")?),
            Short('t') | Long("tx-depth") => o.depth = num(&mut p, "-t")?,
            Long("lat-samples") => o.lat_samples = num(&mut p, "--lat-samples")?,
            Long("rate") => o.workload.rate = load::parse_rate(&text(&mut p, "--rate")?)?,
            Long("mix") => mix = Some(load::parse_mix(&text(&mut p, "--mix")?)?),
            Long("size-dist") => dist = Some(load::parse_sizes(&text(&mut p, "--size-dist")?)?),
            Long("seed") => o.seed = num(&mut p, "--seed")?,
            Long("json") => o.json = Some(p.value().map_err(|e| format!("--json: {e}"))?.into()),
            Long("csv") => o.csv = Some(p.value().map_err(|e| format!("--csv: {e}"))?.into()),
            Long("svg") => o.svg = Some(p.value().map_err(|e| format!("--svg: {e}"))?.into()),
            Value(v) => return Err(format!("unexpected argument {v:?}")),
            Short(c) => return Err(format!("unknown flag -{c}")),
            Long(f) => return Err(format!("unknown flag --{f}")),
        }
    }
    if let Some(m) = &mix {
        if o.verb != Verb::Write {
            return Err("--mix names the operations itself: give --op or --mix, not both".into());
        }
        // Probes and the report's operation are the mix's first.
        o.verb = m.verbs().next().unwrap_or(Verb::Write);
    }
    if let Some(d) = &dist {
        if all || !o.sizes.is_empty() {
            return Err("--size-dist draws the sizes itself: give -s, -a or --size-dist, one of them".into());
        }
        if o.verb == Verb::Atomic && mix.is_none() {
            return Err("atomic operations are 8 bytes: --size-dist has nothing to draw".into());
        }
        // One phase, its slots as large as the largest size drawn.
        o.sizes.push(d.max());
    }
    if all {
        if !o.sizes.is_empty() {
            return Err("-a sweeps sizes itself: give -s or -a, not both".into());
        }
        if o.verb == Verb::Atomic {
            return Err("atomic operations are 8 bytes: -a has nothing to sweep".into());
        }
        o.sizes = (1..24).map(|i| 1usize << i).take_while(|s| *s <= max_size).collect();
        if o.sizes.is_empty() {
            return Err(format!("--max-size {max_size}: a -a sweep starts at 2 bytes"));
        }
    } else if o.sizes.is_empty() {
        o.sizes.push(0);
    }
    let mixed_atomic = mix.as_ref().is_some_and(|m| m.verbs().any(|v| v == Verb::Atomic));
    for s in &mut o.sizes {
        *s = if mixed_atomic && o.verb == Verb::Atomic {
            // The mix's other operations take -s; 8 bytes fit any slot.
            if *s == 0 {
                4096
            } else {
                *s
            }
        } else {
            crate::args::message_size(o.verb, *s, 4096)?
        };
    }
    if o.sizes.len() > 64 {
        return Err(format!("{} sizes: at most 64 per run", o.sizes.len()));
    }
    if o.iters == 0 || o.depth == 0 || o.lat_samples == 0 || o.qps == 0 || o.reps == 0 {
        return Err("-n, -t, -q, --reps and --lat-samples must be at least 1".into());
    }
    if o.qps > 64 || o.threads > 64 {
        return Err(format!("-q {} --threads {}: at most 64 each", o.qps, o.threads));
    }
    if o.reps > 1000 {
        return Err(format!("--reps {}: at most 1000", o.reps));
    }
    if o.iters.checked_add(o.warmup).is_none_or(|t| t >= 1 << COUNT_BITS) {
        return Err(format!("-n {} plus --warmup {}: at most 2^{COUNT_BITS} - 1 requests per QP", o.iters, o.warmup));
    }
    crate::args::check_duration(o.duration)?;
    if o.verb == Verb::Send && o.pattern == Pattern::Loaded {
        return Err("--pattern loaded-latency runs write, read or atomic probes".into());
    }
    if o.verb == Verb::Send && o.workload.rate != Rate::Closed {
        return Err("--op send counts -n messages per QP at the receiver; --rate is for write, read and atomic".into());
    }
    let drawn = (mix.is_some(), dist.is_some());
    o.workload.mix = mix.unwrap_or(Mix::only(o.verb));
    if let Some(d) = dist {
        o.workload.sizes = d;
    }
    if o.verb == Verb::Send && o.duration.is_some() {
        return Err("--op send counts -n messages per QP at the receiver; -D is for write, read and atomic".into());
    }
    dc_checks(&o, dc_flag, drawn)?;
    Ok(o)
}

/// What `-c DC` runs (and what its flags need).
fn dc_checks(o: &ClusterOpts, dc_flag: Option<&str>, (mix, dist): (bool, bool)) -> Res<()> {
    if o.transport == Transport::Rc {
        return match dc_flag {
            Some(f) => Err(format!("{f} is for -c DC (the RC mesh has no DCIs)")),
            None => Ok(()),
        };
    }
    let refuse = |what: &str| {
        Err(format!(
            "-c DC: {what} (the DC experiment runs all-to-all or incast, write or read, closed loop, -q 1, one thread)"
        ))
    };
    if !matches!(o.pattern, Pattern::AllToAll | Pattern::Incast) {
        return refuse(&format!("--pattern {} is not built for DC yet", o.pattern.name()));
    }
    if !matches!(o.verb, Verb::Write | Verb::Read) || mix {
        return refuse(&format!("--op {} / --mix is not built for DC yet", o.verb.name()));
    }
    if o.workload.rate != Rate::Closed || dist || o.duration.is_some() {
        return refuse("--rate, --size-dist and -D are not built for DC yet");
    }
    if o.qps != 1 || o.threads != 1 {
        return refuse("-q and --threads are the RC mesh's (DC's QPs are the pool's: --dci)");
    }
    if o.dc.dcis == 0 || o.dc.dcis > 256 {
        return Err(format!("--dci {}: 1 to 256 DCIs per rank", o.dc.dcis));
    }
    if o.reps != 1 {
        return refuse("--reps is not built for DC yet");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_have_their_flows() {
        assert_eq!(Pattern::AllToAll.flows(3).len(), 6);
        assert_eq!(Pattern::Incast.flows(3), vec![(1, 0), (2, 0)]);
        assert_eq!(Pattern::Outcast.flows(3), vec![(0, 1), (0, 2)]);
        assert_eq!(Pattern::Ring.flows(3), vec![(0, 1), (1, 2), (2, 0)]);
        assert!(!Pattern::Loaded.flows(3).iter().any(|f| f.0 == 0));
    }

    #[test]
    fn flags_parse_with_getopt_forms() {
        let o = parse(["--pattern=incast", "--op", "read", "-s64", "-n", "10"]).unwrap();
        assert_eq!((o.pattern, o.verb, o.sizes.clone(), o.iters), (Pattern::Incast, Verb::Read, vec![64], 10));
        assert_eq!((o.qps, o.threads), (1, 1));
        assert!(parse(["--pattern", "star"]).unwrap_err().contains("expected all-to-all"));
        assert!(parse(["--op", "send", "-D", "1"]).is_err());
    }

    #[test]
    fn sizes_qps_and_threads() {
        assert_eq!(parse::<[&str; 0]>([]).unwrap().sizes, vec![4096]);
        let o = parse(["-s", "64,4096", "-s1024", "-q", "2", "--threads=3"]).unwrap();
        assert_eq!((o.sizes, o.qps, o.threads), (vec![64, 4096, 1024], 2, 3));
        assert_eq!(parse(["-a", "--max-size", "16"]).unwrap().sizes, vec![2, 4, 8, 16]);
        assert_eq!(parse(["-a"]).unwrap().sizes.last(), Some(&(1 << 23)));
        assert_eq!(parse(["--op", "atomic"]).unwrap().sizes, vec![8]);
        assert!(parse(["--op", "atomic", "-a"]).unwrap_err().contains("8 bytes"));
        assert!(parse(["--op", "atomic", "-s", "8,16"]).unwrap_err().contains("8 bytes"));
        assert!(parse(["-a", "-s", "64"]).unwrap_err().contains("not both"));
        assert!(parse(["-s", "64,x"]).unwrap_err().contains("\"x\" is not a valid size"));
        assert!(parse(["-q", "0"]).unwrap_err().contains("at least 1"));
        assert!(parse(["--threads", "65"]).unwrap_err().contains("at most 64"));
        assert!(parse(["--threads", "0"]).unwrap_err().contains("per-qp"));
        assert!(parse(["--threads", "x"]).unwrap_err().contains("per-qp"));
        let o = parse(["--threads", "per-qp", "--reps", "3", "--warmup", "0"]).unwrap();
        assert_eq!((o.threads, o.reps, o.warmup), (0, 3, 0));
        assert_eq!((parse::<[&str; 0]>([]).unwrap().reps, parse::<[&str; 0]>([]).unwrap().warmup), (1, 16));
        assert!(parse(["--reps", "0"]).unwrap_err().contains("at least 1"));
        assert!(parse(["--reps", "1001"]).unwrap_err().contains("at most 1000"));
        assert!(parse(["-n", "1099511627775", "--warmup", "1"]).unwrap_err().contains("plus --warmup"));
    }

    #[test]
    fn dc_flags_parse_and_refuse_what_dc_does_not_run() {
        let o = parse::<[&str; 0]>([]).unwrap();
        assert_eq!((o.transport, o.dc), (Transport::Rc, DcSettings::default()));
        let o = parse(["-c", "DC", "--dci", "2", "--dc-policy", "dcs_quota:4", "--dc-fallback", "rc"]).unwrap();
        assert_eq!(o.transport, Transport::Dc);
        assert_eq!(o.dc, DcSettings { dcis: 2, policy: DcPolicy::DcsQuota { quota: 4 }, fallback_rc: true });
        let o = parse(["--connection=DC", "--pattern", "incast", "--op", "read"]).unwrap();
        assert_eq!((o.transport, o.dc.dcis, o.dc.policy, o.dc.fallback_rc), (Transport::Dc, 4, DcPolicy::Dcs, false));
        assert_eq!(dc_policy("dcs_quota").unwrap(), DcPolicy::DcsQuota { quota: 8 });
        assert_eq!(dc_policy("hw_dcs").unwrap(), DcPolicy::HwDcs);
        assert_eq!(dc_policy("rand:7").unwrap(), DcPolicy::Rand { seed: 7 });
        assert_eq!(dc_policy("rand").unwrap(), DcPolicy::Rand { seed: 1 });
        assert!(dc_policy("dcs_quota:0").unwrap_err().contains("1 to 2^32 - 1"));
        assert!(dc_policy("hw_dcs:3").unwrap_err().contains("expected dcs, dcs_quota[:QUOTA], hw_dcs or rand[:SEED]"));
        assert!(dc_policy("lru").unwrap_err().contains("expected dcs"));
        assert!(parse(["-c", "UD"]).unwrap_err().contains("RC (a mesh) or DC"));
        // The DC flags without -c DC.
        assert_eq!(parse(["--dci", "2"]).unwrap_err(), "--dci is for -c DC (the RC mesh has no DCIs)");
        assert!(parse(["--dc-fallback", "rc"]).unwrap_err().contains("is for -c DC"));
        assert!(parse(["-c", "DC", "--dc-fallback", "ud"]).unwrap_err().contains("the one fallback is rc"));
        // What the DC experiment does not run.
        for bad in [
            &["--pattern", "ring"][..],
            &["--op", "send"],
            &["--op", "atomic"],
            &["--rate", "1k"],
            &["-D", "1"],
            &["-q", "2"],
            &["--threads", "2"],
            &["--reps", "2"],
        ] {
            let mut a = vec!["-c", "DC"];
            a.extend_from_slice(bad);
            assert!(parse(a.clone()).unwrap_err().starts_with("-c DC: "), "{a:?}");
        }
        assert!(parse(["-c", "DC", "--dci", "0"]).unwrap_err().contains("1 to 256 DCIs"));
        assert!(USAGE.contains("-c, --connection T") && USAGE.contains("DC: one DC target"));
        for f in ["--dci K", "--dc-policy P", "--dc-fallback rc"] {
            assert!(USAGE.contains(f), "{f}");
        }
    }
}
