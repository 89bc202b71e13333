//! `rrddmma-perf cluster`: one process per rank (mpirun, srun or
//! `RRDDMMA_HOSTS`), joined through rrddmma's `ctrl` session; flows between
//! ranks follow a traffic pattern, and rank 0 prints the per-pair matrix,
//! per-rank totals, the aggregate and Jain's fairness index.
//!
//! Phases start after a barrier and every duration is measured locally by
//! the rank that drives the flow, so clocks need not be synchronised.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rrddmma::ctrl::{ClusterConfig, Session};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, RecvWr, RemoteMr, SendWr, Wc};
use rrddmma::wrap::{connect_rc_mesh, MeshOpts, RegisteredMem};

use crate::alloc;
use crate::args::{num, text, Verb};
use crate::out;

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

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
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::Incast => "incast",
            Pattern::Outcast => "outcast",
            Pattern::Ring => "ring",
            Pattern::Loaded => "loaded-latency",
        }
    }

    /// The bandwidth flows (src, dst) of `n` ranks.
    fn flows(self, n: u32) -> Vec<(u32, u32)> {
        let all = (0..n).flat_map(|s| (0..n).map(move |d| (s, d))).filter(|(s, d)| s != d);
        match self {
            Pattern::AllToAll => all.collect(),
            Pattern::Incast => (1..n).map(|s| (s, 0)).collect(),
            Pattern::Outcast => (1..n).map(|d| (0, d)).collect(),
            Pattern::Ring => (0..n).map(|s| (s, (s + 1) % n)).collect(),
            Pattern::Loaded => all.filter(|(s, _)| *s != 0).collect(),
        }
    }
}

/// The cluster mode's flags.
#[derive(Clone, Debug)]
pub struct ClusterOpts {
    pub pattern: Pattern,
    pub verb: Verb,
    pub size: usize,
    pub iters: u64,
    pub duration: Option<f64>,
    pub depth: u32,
    pub lat_samples: u32,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub svg: Option<PathBuf>,
}

pub const USAGE: &str = "\
usage: rrddmma-perf cluster [FLAGS]     (on every rank: mpirun, srun, or RRDDMMA_HOSTS)
  --pattern P          all-to-all (default), incast, outcast, ring, loaded-latency
  --op OP              write (default), read, send, atomic
  -s, --size BYTES     message size (4096; atomic 8)
  -n, --iters N        requests per flow (1000)
  -D, --duration SECS  stream for SECS seconds instead (not with --op send)
  -t, --tx-depth N     requests in flight per flow (16)
      --lat-samples N  latency samples per flow after the bandwidth phase (200)
      --json FILE      results as JSON (rank 0)
      --csv FILE       per-flow results as CSV (rank 0)
      --svg FILE       heatmap of the matrix; FILE with -bars.svg: per-rank bar chart (rank 0)
Rendezvous as rrddmma's ctrl session: RRDDMMA_COORDINATOR, RRDDMMA_HOSTS,
RRDDMMA_DEVICES (see docs/perf.md).";

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
        size: 0,
        iters: 1000,
        duration: None,
        depth: 16,
        lat_samples: 200,
        json: None,
        csv: None,
        svg: None,
    };
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
            Short('s') | Long("size") => o.size = num(&mut p, "-s")?,
            Short('n') | Long("iters") => o.iters = num(&mut p, "-n")?,
            Short('D') | Long("duration") => o.duration = Some(num(&mut p, "-D")?),
            Short('t') | Long("tx-depth") => o.depth = num(&mut p, "-t")?,
            Long("lat-samples") => o.lat_samples = num(&mut p, "--lat-samples")?,
            Long("json") => o.json = Some(p.value().map_err(|e| format!("--json: {e}"))?.into()),
            Long("csv") => o.csv = Some(p.value().map_err(|e| format!("--csv: {e}"))?.into()),
            Long("svg") => o.svg = Some(p.value().map_err(|e| format!("--svg: {e}"))?.into()),
            Value(v) => return Err(format!("unexpected argument {v:?}")),
            Short(c) => return Err(format!("unknown flag -{c}")),
            Long(f) => return Err(format!("unknown flag --{f}")),
        }
    }
    o.size = crate::args::message_size(o.verb, o.size, 4096)?;
    if o.iters == 0 || o.depth == 0 || o.lat_samples == 0 {
        return Err("-n, -t and --lat-samples must be at least 1".into());
    }
    if o.duration.is_some_and(|d| d.is_nan() || d <= 0.0) {
        return Err("-D must be a positive number of seconds".into());
    }
    if o.verb == Verb::Send && o.pattern == Pattern::Loaded {
        return Err("--pattern loaded-latency runs write, read or atomic probes".into());
    }
    if o.verb == Verb::Send && o.duration.is_some() {
        return Err("--op send counts -n messages per flow at the receiver; -D is for write, read and atomic".into());
    }
    Ok(o)
}

/// One flow's outcome, measured by its source rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    pub ops: u64,
    pub secs: f64,
    pub size: usize,
    /// Latency percentiles in µs: p50, p99, p99.9, mean (0 without samples).
    pub lat: [f64; 4],
}

impl FlowResult {
    fn mib_s(&self) -> f64 {
        if self.secs > 0.0 {
            (self.ops * self.size as u64) as f64 / self.secs / 1048576.0
        } else {
            0.0
        }
    }

    fn mpps(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops as f64 / self.secs / 1e6
        } else {
            0.0
        }
    }

    fn encode(&self) -> String {
        format!(
            "{} {} {} {:e} {} {:e} {:e} {:e} {:e}\n",
            self.src, self.dst, self.ops, self.secs, self.size, self.lat[0], self.lat[1], self.lat[2], self.lat[3]
        )
    }

    fn decode(line: &str) -> Res<FlowResult> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("malformed flow result {line:?}");
        if w.len() != 9 {
            return Err(bad());
        }
        let f = |i: usize| w[i].parse::<f64>().map_err(|_| bad());
        Ok(FlowResult {
            src: w[0].parse().map_err(|_| bad())?,
            dst: w[1].parse().map_err(|_| bad())?,
            ops: w[2].parse().map_err(|_| bad())?,
            secs: f(3)?,
            size: w[4].parse().map_err(|_| bad())?,
            lat: [f(5)?, f(6)?, f(7)?, f(8)?],
        })
    }
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

/// Everything a rank needs during the phases.
struct Net {
    qps: Vec<Option<Qp>>,
    cq: Cq,
    recv_cq: Cq,
    mem: RegisteredMem,
    tokens: Vec<RemoteMr>,
    slot: usize,
    n: usize,
}

impl Net {
    fn request<'a>(&self, verb: Verb, sge: &'a [rrddmma::prim::Sge; 1], me: u32, dst: u32) -> SendWr<'a> {
        let remote = self.tokens[dst as usize].at(((self.n + me as usize) * self.slot) as u64);
        match verb {
            Verb::Write => SendWr::write(sge, remote),
            Verb::Read => SendWr::read(sge, remote),
            Verb::Send => SendWr::send(sge),
            Verb::Atomic => SendWr::fetch_add(sge, remote, 1),
        }
    }

    fn post_recv(&self, from: usize) -> Res<()> {
        let off = (self.n + from) * self.slot;
        let sges = [self.mem.sge(off..off + self.slot)];
        let qp = self.qps[from].as_ref().ok_or("no QP to receive on")?;
        // SAFETY: the entry lies in `mem`, which outlives the QPs' use.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sges, from as u64)]) }.map_err(err("ibv_post_recv"))
    }
}

fn check_wc(wc: &Wc, what: &str) -> Res<()> {
    if wc.is_success() {
        Ok(())
    } else {
        Err(format!("{what}: work request {:#x} completed with status {:?}", wc.wr_id(), wc.status()))
    }
}

/// Bits of a `wr_id` that count requests; the flow index sits above them.
const COUNT_BITS: u32 = 40;

/// Streams this rank's flows; returns (ops, seconds) per flow.
fn stream(net: &Net, o: &ClusterOpts, me: u32, dsts: &[u32]) -> Res<Vec<(u64, f64)>> {
    let sges: Vec<[rrddmma::prim::Sge; 1]> =
        dsts.iter().map(|&d| [net.mem.sge(d as usize * net.slot..d as usize * net.slot + o.size)]).collect();
    let mut posted = vec![0u64; dsts.len()];
    let mut done = vec![0u64; dsts.len()];
    let mut end = vec![0f64; dsts.len()];
    let limit = if o.duration.is_some() { u64::MAX } else { o.iters };
    let depth = u64::from(o.depth);
    let mut wcs = [Wc::default(); 16];
    let start = Instant::now();
    let deadline = o.duration.map(Duration::from_secs_f64);
    let mut stopping = false;
    alloc::measuring(true);
    let r = (|| -> Res<()> {
        loop {
            if !stopping {
                for (f, &d) in dsts.iter().enumerate() {
                    let qp = net.qps[d as usize].as_ref().ok_or("no QP to the peer")?;
                    while posted[f] < limit && posted[f] - done[f] < depth {
                        let id = ((f as u64) << COUNT_BITS) | (posted[f] + 1);
                        let wr = net.request(o.verb, &sges[f], me, d).signaled().wr_id(id);
                        // SAFETY: the entry lies in `mem`; completions are awaited below.
                        unsafe { qp.post_send(&mut [wr]) }.map_err(err("ibv_post_send"))?;
                        posted[f] += 1;
                    }
                }
            }
            let finished = if deadline.is_some() {
                stopping && done.iter().zip(&posted).all(|(d, p)| d >= p)
            } else {
                done.iter().all(|&c| c >= limit)
            };
            if finished {
                return Ok(());
            }
            let n = net.cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?;
            for wc in &wcs[..n] {
                check_wc(wc, "cluster stream")?;
                let f = (wc.wr_id() >> COUNT_BITS) as usize;
                done[f] = done[f].max(wc.wr_id() & ((1 << COUNT_BITS) - 1));
                end[f] = start.elapsed().as_secs_f64();
            }
            if deadline.is_some_and(|dl| !stopping && start.elapsed() >= dl) {
                stopping = true;
            }
        }
    })();
    alloc::measuring(false);
    r?;
    Ok(posted.iter().zip(&end).map(|(&p, &e)| (p, e)).collect())
}

/// One request at a time on each flow; latency percentiles per flow.
fn probe(net: &Net, o: &ClusterOpts, me: u32, dsts: &[u32]) -> Res<Vec<[f64; 4]>> {
    let mut wcs = [Wc::default(); 1];
    let mut out = Vec::with_capacity(dsts.len());
    let mut samples = vec![0f64; o.lat_samples as usize];
    for &d in dsts {
        let qp = net.qps[d as usize].as_ref().ok_or("no QP to the peer")?;
        let sge = [net.mem.sge(d as usize * net.slot..d as usize * net.slot + o.size)];
        alloc::measuring(true);
        let r = (|| -> Res<()> {
            for s in samples.iter_mut() {
                let t = Instant::now();
                // SAFETY: the entry lies in `mem`; the completion is awaited.
                unsafe { qp.post_send(&mut [net.request(o.verb, &sge, me, d).signaled()]) }
                    .map_err(err("ibv_post_send"))?;
                while net.cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))? == 0 {}
                check_wc(&wcs[0], "cluster latency probe")?;
                *s = t.elapsed().as_nanos() as f64;
            }
            Ok(())
        })();
        alloc::measuring(false);
        r?;
        samples.sort_by(f64::total_cmp);
        let l = out::lat_stats(&samples).unwrap_or_default();
        out.push([l.p50, l.p99, l.p999, l.avg]);
    }
    Ok(out)
}

/// Receives `want[from]` SEND messages from each peer, re-posting.
fn receive(net: &Net, mut want: Vec<u64>, stop: &AtomicBool) -> Res<()> {
    let mut wcs = [Wc::default(); 16];
    let deadline = Instant::now() + Duration::from_secs(300);
    while want.iter().any(|&w| w > 0) {
        let n = net.recv_cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?;
        for wc in &wcs[..n] {
            check_wc(wc, "cluster receive")?;
            let from = wc.wr_id() as usize;
            want[from] = want[from].saturating_sub(1);
            net.post_recv(from)?;
        }
        if n == 0 && stop.load(Ordering::Relaxed) {
            return Err("stopped: this rank's sending half failed".into());
        }
        if n == 0 && Instant::now() > deadline {
            return Err(format!("receives still missing after 300 s: {want:?} by source rank"));
        }
    }
    Ok(())
}

/// Runs the cluster mode on this rank.
pub fn run(o: &ClusterOpts) -> Res<()> {
    let cfg = ClusterConfig::from_env().map_err(err("cluster configuration"))?;
    let mut s = Session::join(&cfg).map_err(err("joining the cluster"))?;
    let (me, n) = (s.rank(), s.size());
    if n < 2 {
        return Err("the cluster mode needs at least two ranks".into());
    }
    let ctx = match s.device() {
        Some(d) => Context::open(d),
        None => Context::open_first(),
    }
    .map_err(err("opening the device"))?;
    let port = ctx.query_port(1).map_err(err("querying port 1"))?;
    let pd = Pd::new(&ctx).map_err(err("allocating a PD"))?;
    let flows = o.pattern.flows(n);
    let probe_flow = (o.pattern == Pattern::Loaded).then_some((0u32, 1u32));
    let mine: Vec<u32> = flows.iter().filter(|f| f.0 == me).map(|f| f.1).collect();
    let rx = 64u32;
    let cq_len = (o.depth * n).max(16);
    let cq = Cq::new(&ctx, cq_len).map_err(err("creating a CQ"))?;
    let recv_cq = Cq::new(&ctx, rx * n).map_err(err("creating a CQ"))?;
    let slot = o.size.max(64).div_ceil(64) * 64;
    let mem = RegisteredMem::new(&pd, 2 * slot * n as usize).map_err(err("registering memory"))?;
    let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let connect = ConnectOpts {
        access,
        mtu: port.active_mtu(),
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        ..ConnectOpts::default()
    };
    let caps = QpCaps { max_send_wr: o.depth.max(1), max_recv_wr: rx, ..QpCaps::default() };
    let psn = rrddmma::prim::random_psn();
    let qps = connect_rc_mesh(&mut s, &pd, &cq, &recv_cq, &MeshOpts { caps, connect, psn })
        .map_err(err("connecting the QP mesh"))?;
    let tokens = s.exchange_mrs(&mem.remote()).map_err(err("exchanging memory tokens"))?;
    let net = Net { qps, cq, recv_cq, mem, tokens, slot, n: n as usize };
    // SEND: receives for every incoming flow go up before the first barrier.
    let mut want = vec![0u64; n as usize];
    if o.verb == Verb::Send {
        for &(src, dst) in &flows {
            if dst == me {
                want[src as usize] += o.iters + u64::from(o.lat_samples);
            }
        }
        for (from, w) in want.iter().enumerate() {
            for _ in 0..(*w).min(u64::from(rx)) {
                net.post_recv(from)?;
            }
        }
    }
    if me == 0 {
        println!(
            "rrddmma-perf cluster: {} ranks, pattern {}, op {}, {} B, {} flows, {} per flow, depth {}",
            n,
            o.pattern.name(),
            o.verb.name(),
            o.size,
            flows.len(),
            o.duration.map_or(format!("{} requests", o.iters), |d| format!("{d} s")),
            o.depth
        );
    }
    s.barrier().map_err(err("barrier before the bandwidth phase"))?;
    let stop = AtomicBool::new(false);
    let results = std::thread::scope(|scope| -> Res<Vec<FlowResult>> {
        let rx_thread = (o.verb == Verb::Send).then(|| scope.spawn(|| receive(&net, want.clone(), &stop)));
        let r = (|| -> Res<Vec<FlowResult>> {
            // Phase 1: bandwidth (rank 0 probes instead in loaded-latency mode).
            let mut res = Vec::new();
            if probe_flow.is_some_and(|p| p.0 == me) {
                let lat = probe(&net, o, me, &[1])?;
                res.push(FlowResult { src: me, dst: 1, ops: 0, secs: 0.0, size: o.size, lat: lat[0] });
            } else {
                let bw = stream(&net, o, me, &mine)?;
                for (&d, (ops, secs)) in mine.iter().zip(bw) {
                    res.push(FlowResult { src: me, dst: d, ops, secs, size: o.size, lat: [0.0; 4] });
                }
            }
            // Phase 2, after a barrier: latency probes on every flow of this
            // rank, one request at a time (loaded-latency mode probed already).
            s.barrier().map_err(err("barrier before the latency phase"))?;
            if probe_flow.is_none() {
                for (r, l) in res.iter_mut().zip(probe(&net, o, me, &mine)?) {
                    r.lat = l;
                }
            }
            Ok(res)
        })();
        if r.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        if let Some(h) = rx_thread {
            let got = h.join().unwrap_or_else(|_| Err("the receiving thread panicked".into()));
            if r.is_ok() {
                got?;
            }
        }
        r
    })?;
    s.barrier().map_err(err("barrier after the latency phase"))?;
    // Gather at every rank; rank 0 reports.
    let text: String = results.iter().map(FlowResult::encode).collect();
    let all = s.all_gather(text.as_bytes()).map_err(err("gathering results"))?;
    let mut every = Vec::new();
    for (r, bytes) in all.iter().enumerate() {
        let t = std::str::from_utf8(bytes).map_err(|_| format!("rank {r} sent results that are not UTF-8"))?;
        for l in t.lines() {
            every.push(FlowResult::decode(l)?);
        }
    }
    every.sort_by_key(|f| (f.src, f.dst));
    let allocs = alloc::in_loop_allocations();
    if me == 0 {
        let rep = Report { o, n, flows: &every };
        println!("{}", rep.table());
        if let Some(p) = &o.json {
            std::fs::write(p, rep.json()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        if let Some(p) = &o.csv {
            std::fs::write(p, rep.csv()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        if let Some(p) = &o.svg {
            std::fs::write(p, rep.heatmap()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            let bars = bars_path(p);
            std::fs::write(&bars, rep.bars()).map_err(|e| format!("cannot write {}: {e}", bars.display()))?;
        }
    }
    println!("rank {me}/{n}: {} flow(s) measured, heap allocations inside measured loops: {allocs}", results.len());
    // Nobody tears down QPs while a peer may still be using them.
    s.barrier().map_err(err("final barrier"))?;
    if allocs > 0 {
        return Err(format!("{allocs} heap allocation(s) happened inside measured loops"));
    }
    Ok(())
}

fn bars_path(p: &std::path::Path) -> PathBuf {
    let stem = p.file_stem().map_or("cluster".into(), |s| s.to_string_lossy().into_owned());
    p.with_file_name(format!("{stem}-bars.svg"))
}

/// Rank 0's view of every flow.
struct Report<'a> {
    o: &'a ClusterOpts,
    n: u32,
    flows: &'a [FlowResult],
}

impl Report<'_> {
    fn bw_flows(&self) -> Vec<&FlowResult> {
        self.flows.iter().filter(|f| f.ops > 0).collect()
    }

    /// (out MiB/s, in MiB/s) per rank.
    fn totals(&self) -> Vec<(f64, f64)> {
        let mut t = vec![(0.0, 0.0); self.n as usize];
        for f in self.bw_flows() {
            t[f.src as usize].0 += f.mib_s();
            t[f.dst as usize].1 += f.mib_s();
        }
        t
    }

    fn aggregate(&self) -> f64 {
        self.bw_flows().iter().map(|f| f.mib_s()).sum()
    }

    fn fairness(&self) -> f64 {
        jain(&self.bw_flows().iter().map(|f| f.mib_s()).collect::<Vec<_>>())
    }

    fn table(&self) -> String {
        let mut s =
            String::from(" src -> dst   requests   MiB/s        Mpps       p50[us]    p99[us]    p99.9[us]  avg[us]\n");
        for f in self.flows {
            let _ = writeln!(
                s,
                " {:>3} -> {:<3}  {:<10} {:<12.2} {:<10.6} {:<10.2} {:<10.2} {:<10.2} {:.2}",
                f.src,
                f.dst,
                f.ops,
                f.mib_s(),
                f.mpps(),
                f.lat[0],
                f.lat[1],
                f.lat[2],
                f.lat[3]
            );
        }
        s.push_str(" rank   out MiB/s    in MiB/s\n");
        for (r, (o, i)) in self.totals().iter().enumerate() {
            let _ = writeln!(s, " {r:<6} {o:<12.2} {i:.2}");
        }
        let _ = write!(s, " aggregate {:.2} MiB/s, Jain's fairness index {:.4}", self.aggregate(), self.fairness());
        s
    }

    fn json(&self) -> String {
        let mut s = format!(
            "{{\n  \"tool\": \"rrddmma-perf\",\n  \"mode\": \"cluster\",\n  \"pattern\": \"{}\",\n  \"op\": \"{}\",\n  \
             \"size\": {},\n  \"ranks\": {},\n  \"flows\": [",
            self.o.pattern.name(),
            self.o.verb.name(),
            self.o.size,
            self.n
        );
        for (i, f) in self.flows.iter().enumerate() {
            let _ = write!(
                s,
                "{}\n    {{\"src\": {}, \"dst\": {}, \"requests\": {}, \"seconds\": {:.6}, \"bw_mib_s\": {:.3}, \
                 \"msg_rate_mpps\": {:.6}, \"lat_us\": {{\"p50\": {:.3}, \"p99\": {:.3}, \"p999\": {:.3}, \"avg\": {:.3}}}}}",
                if i == 0 { "" } else { "," },
                f.src,
                f.dst,
                f.ops,
                f.secs,
                f.mib_s(),
                f.mpps(),
                f.lat[0],
                f.lat[1],
                f.lat[2],
                f.lat[3]
            );
        }
        s.push_str("\n  ],\n  \"rank_totals\": [");
        for (r, (o, i)) in self.totals().iter().enumerate() {
            let _ = write!(
                s,
                "{}\n    {{\"rank\": {r}, \"out_mib_s\": {o:.3}, \"in_mib_s\": {i:.3}}}",
                if r == 0 { "" } else { "," }
            );
        }
        let _ = write!(
            s,
            "\n  ],\n  \"aggregate_mib_s\": {:.3},\n  \"jain_fairness\": {:.6}\n}}\n",
            self.aggregate(),
            self.fairness()
        );
        s
    }

    fn csv(&self) -> String {
        let mut s = String::from(
            "pattern,op,size,src,dst,requests,seconds,bw_mib_s,msg_rate_mpps,p50_us,p99_us,p999_us,avg_us\n",
        );
        for f in self.flows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{:.6},{:.3},{:.6},{:.3},{:.3},{:.3},{:.3}",
                self.o.pattern.name(),
                self.o.verb.name(),
                f.size,
                f.src,
                f.dst,
                f.ops,
                f.secs,
                f.mib_s(),
                f.mpps(),
                f.lat[0],
                f.lat[1],
                f.lat[2],
                f.lat[3]
            );
        }
        s
    }

    /// An N×N heatmap of bandwidth (source rows, destination columns).
    fn heatmap(&self) -> String {
        let n = self.n as usize;
        let cell = 60;
        let (x0, y0) = (80, 60);
        let max = self.bw_flows().iter().map(|f| f.mib_s()).fold(0.0, f64::max).max(1e-9);
        let w = x0 + cell * n + 40;
        let h = y0 + cell * n + 40;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">rrddmma-perf cluster {} {}: MiB/s per flow</text>\n\
             <text x=\"{}\" y=\"45\" text-anchor=\"middle\">destination rank</text>\n\
             <text x=\"20\" y=\"{}\" transform=\"rotate(-90 20 {})\" text-anchor=\"middle\">source rank</text>\n",
            w / 2,
            self.o.pattern.name(),
            self.o.verb.name(),
            x0 + cell * n / 2,
            y0 + cell * n / 2,
            y0 + cell * n / 2
        );
        for i in 0..n {
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{i}</text>",
                x0 + cell * i + cell / 2,
                y0 - 4
            );
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{i}</text>",
                x0 - 6,
                y0 + cell * i + cell / 2 + 4
            );
        }
        for src in 0..n {
            for dst in 0..n {
                let v = self.flows.iter().find(|f| f.src as usize == src && f.dst as usize == dst).map(|f| f.mib_s());
                let (fill, label) = match v {
                    Some(v) if v > 0.0 => {
                        let t = v / max;
                        let r = (255.0 * (1.0 - t)) as u8;
                        let g = (255.0 - 120.0 * t) as u8;
                        (format!("rgb({r},{g},255)"), format!("{v:.1}"))
                    }
                    _ => ("#eeeeee".to_string(), String::new()),
                };
                let _ = writeln!(
                    s,
                    "<rect x=\"{}\" y=\"{}\" width=\"{cell}\" height=\"{cell}\" fill=\"{fill}\" stroke=\"white\"/>\
                     <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                    x0 + cell * dst,
                    y0 + cell * src,
                    x0 + cell * dst + cell / 2,
                    y0 + cell * src + cell / 2 + 4
                );
            }
        }
        s.push_str("</svg>\n");
        s
    }

    /// Per-rank out/in bandwidth bars.
    fn bars(&self) -> String {
        let t = self.totals();
        let max = t.iter().map(|(o, i)| o.max(*i)).fold(0.0, f64::max).max(1e-9);
        let (x0, y0, hgt, group) = (60, 40, 200, 70);
        let w = x0 + group * t.len() + 40;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">per-rank MiB/s (blue: out, orange: in); \
             Jain {:.3}</text>\n",
            y0 + hgt + 40,
            w / 2,
            self.fairness()
        );
        for (r, (o, i)) in t.iter().enumerate() {
            for (k, (v, colour)) in [(o, "#4477aa"), (i, "#ee7733")].into_iter().enumerate() {
                let bh = (v / max * hgt as f64) as usize;
                let _ = writeln!(
                    s,
                    "<rect x=\"{}\" y=\"{}\" width=\"25\" height=\"{bh}\" fill=\"{colour}\"><title>{v:.2}</title></rect>",
                    x0 + group * r + 28 * k,
                    y0 + hgt - bh
                );
            }
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">rank {r}</text>",
                x0 + group * r + 26,
                y0 + hgt + 16
            );
        }
        s.push_str("</svg>\n");
        s
    }
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
    fn fairness_and_round_trip() {
        assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        let f = FlowResult { src: 2, dst: 0, ops: 99, secs: 0.5, size: 4096, lat: [1.5, 2.5, 3.5, 1.75] };
        assert_eq!(FlowResult::decode(f.encode().trim()).unwrap(), f);
        assert!(FlowResult::decode("1 2 x").is_err());
    }

    #[test]
    fn flags_parse_with_getopt_forms() {
        let o = parse(["--pattern=incast", "--op", "read", "-s64", "-n", "10"]).unwrap();
        assert_eq!((o.pattern, o.verb, o.size, o.iters), (Pattern::Incast, Verb::Read, 64, 10));
        assert!(parse(["--pattern", "star"]).unwrap_err().contains("expected all-to-all"));
        assert!(parse(["--op", "send", "-D", "1"]).is_err());
    }
}
