//! `rrddmma-perf cluster`: one process per rank (mpirun, srun or
//! `RRDDMMA_HOSTS`), joined through rrddmma's `ctrl` session; flows between
//! ranks follow a traffic pattern, and rank 0 prints the per-pair matrix,
//! per-rank totals, the aggregate and Jain's fairness index.
//!
//! Phases start after a barrier and every duration is measured locally by
//! the rank that drives the flow, so clocks need not be synchronised.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rrddmma::ctrl::{ClusterConfig, QpInfo, Session};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Endpoint, Pd, Qp, QpCaps, RecvWr, RemoteAddr, SendWr, Wc};
use rrddmma::wrap::{MeshOpts, RegisteredMem};

use crate::alloc;
use crate::args::Verb;
use crate::cluster_env::{self, RankEnv};
use crate::cluster_flow::{self, LoadResult, Tally};
use crate::cluster_opts::{ClusterOpts, Pattern, COUNT_BITS};
use crate::cluster_report::{decode_rank, Expect, FlowResult, Report};
use crate::cluster_res::landing;
use crate::load::{self, Rate, Rng, Sizes};
use crate::out;

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// One QP of one of this rank's flows: the `k`th QP to rank `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unit {
    dst: u32,
    k: u32,
}

/// This rank's units, QP index major, so that consecutive units (dealt to
/// threads round-robin) go to different destinations.
fn units_of(dsts: &[u32], qps: u32) -> Vec<Unit> {
    (0..qps).flat_map(|k| dsts.iter().map(move |&dst| Unit { dst, k })).collect()
}

/// The units thread `t` of `threads` drives.
fn share(units: &[Unit], t: usize, threads: usize) -> Vec<Unit> {
    units.iter().skip(t).step_by(threads).copied().collect()
}

/// Everything a rank needs during the phases.
struct Net {
    /// `qps[peer][k]`: the `k`th QP to `peer` (empty at this rank's index).
    qps: Vec<Vec<Qp>>,
    /// One send CQ per thread.
    cqs: Vec<Cq>,
    recv_cq: Cq,
    mem: RegisteredMem,
    /// Where this rank's requests land at each rank (checked against the
    /// rank's token by [`landing`]; unused at this rank's own index).
    remote: Vec<RemoteAddr>,
    slot: usize,
    n: usize,
    q: usize,
}

impl Net {
    fn qp(&self, u: Unit) -> Res<&Qp> {
        self.qps.get(u.dst as usize).and_then(|v| v.get(u.k as usize)).ok_or_else(|| format!("no QP {u:?}"))
    }

    fn request<'a>(&self, verb: Verb, sge: &'a [rrddmma::prim::Sge; 1], dst: u32) -> SendWr<'a> {
        let remote = self.remote[dst as usize];
        match verb {
            Verb::Write => SendWr::write(sge, remote),
            Verb::Read => SendWr::read(sge, remote),
            Verb::Send => SendWr::send(sge),
            Verb::Atomic => SendWr::fetch_add(sge, remote, 1),
        }
    }

    fn sge(&self, dst: u32, size: usize) -> [rrddmma::prim::Sge; 1] {
        let off = dst as usize * self.slot;
        [self.mem.sge(off..off + size)]
    }

    /// Posts one receive on QP `qi` (= peer × q + k) into the peer's slot.
    fn post_recv(&self, qi: usize) -> Res<()> {
        let from = qi / self.q;
        let off = (self.n + from) * self.slot;
        let sges = [self.mem.sge(off..off + self.slot)];
        let qp = self.qps[from].get(qi % self.q).ok_or("no QP to receive on")?;
        // SAFETY: the entry lies in `mem`, which outlives the QPs' use.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sges, qi as u64)]) }.map_err(err("ibv_post_recv"))
    }
}

/// Creates `q` RC QPs to every other rank, the send CQ of QP (peer, k) being
/// `send_cq(peer, k)`, exchanges their endpoints in one session round and
/// connects QP k of each pair to the peer's QP k.
fn connect_mesh<'c>(
    s: &mut Session,
    pd: &Pd,
    q: u32,
    send_cq: impl Fn(u32, u32) -> &'c Cq,
    recv_cq: &Cq,
    opts: &MeshOpts,
) -> Res<Vec<Vec<Qp>>> {
    let (me, n) = (s.rank(), s.size());
    let c = opts.get_connect();
    let gid_index = c.gid_index_on(pd.context()).map_err(err("choosing a GID"))?;
    let mut qps: Vec<Vec<Qp>> = (0..n).map(|_| Vec::new()).collect();
    let mut infos = Vec::with_capacity((n * q) as usize);
    for peer in 0..n {
        for k in 0..q {
            let psn = opts.get_psn().wrapping_add(peer * q + k) & 0xff_ffff;
            if peer == me {
                // Never read by a peer: keeps the list indexed by peer × q + k.
                infos.push(QpInfo::new(&Endpoint { qpn: 0, psn, lid: 0, gid: Default::default() }, 0, 0, c.get_mtu()));
                continue;
            }
            let qp = Qp::builder(pd, rrddmma::prim::QpType::RC, send_cq(peer, k), recv_cq)
                .caps(opts.get_caps())
                .build()
                .map_err(err("creating an RC QP"))?;
            let e = qp.endpoint(c.get_port(), gid_index, psn).map_err(err("querying the QP's endpoint"))?;
            infos.push(QpInfo::new(&e, gid_index, c.get_port(), c.get_mtu()));
            qps[peer as usize].push(qp);
        }
    }
    let all = s.exchange_endpoints(&infos).map_err(err("exchanging QP endpoints"))?;
    for (peer, list) in qps.iter().enumerate() {
        for (k, qp) in list.iter().enumerate() {
            let i = me as usize * q as usize + k;
            let theirs = all[peer]
                .get(i)
                .ok_or_else(|| format!("rank {peer} sent {} endpoints, expected {}", all[peer].len(), n * q))?;
            let mine = &infos[peer * q as usize + k];
            let mtu = c.get_mtu().min(theirs.mtu);
            qp.connect(&theirs.endpoint(), mine.psn, &c.mtu(mtu).gid_index(Some(gid_index)))
                .map_err(|e| format!("connecting QP {k} to rank {peer}: {e}"))?;
        }
    }
    Ok(qps)
}

fn check_wc(wc: &Wc, what: &str) -> Res<()> {
    if wc.is_success() {
        Ok(())
    } else {
        Err(format!("{what}: work request {:#x} completed with status {:?}", wc.wr_id(), wc.status()))
    }
}

/// One unit's bandwidth phase: requests completed inside its measurement
/// window, and the window's start and end in seconds from the phase start.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Window {
    ops: u64,
    start: f64,
    end: f64,
}

/// Streams `units` on `cq`; per unit, the first `o.warmup` completions are
/// warm-up: in closed loop its window opens at the last of them (at the
/// phase start without warm-up), in open loop at the arrival of the first
/// request after them; it closes at its last completion.
///
/// In closed loop each QP keeps `-t` requests in flight. In open loop
/// (`--rate`) requests arrive on each QP's own schedule (the flow's rate
/// split over its QPs) and wait in a backlog of at most [`load::BACKLOG`]
/// until the send queue has room; arrivals beyond it are dropped. Each
/// request's operation and size are drawn from the workload; its latency
/// runs from its arrival (closed loop: its post) to its completion.
fn stream(
    net: &Net,
    cq: &Cq,
    o: &ClusterOpts,
    (me, size, seed): (u32, usize, u64),
    units: &[Unit],
) -> Res<Vec<(Window, Tally)>> {
    let qps: Vec<&Qp> = units.iter().map(|&u| net.qp(u)).collect::<Res<_>>()?;
    let wls: Vec<&load::Workload> = units.iter().map(|u| o.workload_of(me, u.dst)).collect();
    let sizes: Vec<Sizes> = wls
        .iter()
        .map(|wl| match &wl.sizes {
            Sizes::Fixed(_) => Sizes::Fixed(size),
            d => d.clone(),
        })
        .collect();
    let rates: Vec<Rate> = wls.iter().map(|wl| wl.rate.split(o.qps)).collect();
    let open = rates.iter().any(|r| *r != Rate::Closed);
    let mut rngs: Vec<Rng> = units.iter().map(|u| Rng::new(seed ^ (u64::from(u.dst) << 16) ^ u64::from(u.k))).collect();
    let mut posted = vec![0u64; units.len()];
    let mut done = vec![0u64; units.len()];
    let mut win = vec![Window::default(); units.len()];
    let limit = if o.duration.is_some() { u64::MAX } else { o.iters + o.warmup };
    let depth = u64::from(o.depth);
    // In flight per QP, by request count mod depth: (arrival s, op, bytes).
    let mut inflight = vec![vec![(0.0f64, Verb::Write, 0usize); o.depth as usize]; units.len()];
    let mut backlog: Vec<VecDeque<f64>> =
        (0..units.len()).map(|_| VecDeque::with_capacity(if open { load::BACKLOG } else { 0 })).collect();
    let mut next_at: Vec<f64> = rngs.iter_mut().zip(&rates).map(|(r, rate)| rate.gap(r)).collect();
    let width = o.duration.map_or(1e-3, |d| (d / 100.0).max(1e-3));
    let lat_cap = if o.duration.is_some() { cluster_flow::LAT_CAP } else { o.iters as usize };
    let mut tally: Vec<Tally> = (0..units.len()).map(|_| Tally::new(width, lat_cap)).collect();
    let mut wcs = [Wc::default(); 16];
    let start = Instant::now();
    let deadline = o.duration.map(Duration::from_secs_f64);
    let mut stopping = false;
    alloc::measuring(true);
    let r = (|| -> Res<()> {
        loop {
            let now = start.elapsed().as_secs_f64();
            for (f, u) in units.iter().enumerate() {
                let t = &mut tally[f];
                let open = rates[f] != Rate::Closed;
                if open {
                    while !stopping && t.arrivals < limit && next_at[f] <= now {
                        t.arrivals += 1;
                        if backlog[f].len() < load::BACKLOG {
                            backlog[f].push_back(next_at[f]);
                            t.backlog_max = t.backlog_max.max(backlog[f].len() as u64);
                        } else {
                            t.dropped += 1;
                        }
                        next_at[f] += rates[f].gap(&mut rngs[f]);
                    }
                }
                while posted[f] - done[f] < depth {
                    let at = if open {
                        match backlog[f].pop_front() {
                            Some(a) => a,
                            None => break,
                        }
                    } else if !stopping && posted[f] < limit {
                        t.arrivals += 1;
                        now
                    } else {
                        break;
                    };
                    let verb = wls[f].mix.pick(&mut rngs[f]);
                    let bytes = sizes[f].for_op(verb, &mut rngs[f]);
                    let sge = net.sge(u.dst, bytes);
                    let id = ((f as u64) << COUNT_BITS) | (posted[f] + 1);
                    let wr = net.request(verb, &sge, u.dst).signaled().wr_id(id);
                    // SAFETY: the entry lies in `mem`; completions are awaited below.
                    unsafe { qps[f].post_send(&mut [wr]) }.map_err(err("ibv_post_send"))?;
                    inflight[f][(posted[f] % depth) as usize] = (at, verb, bytes);
                    posted[f] += 1;
                }
            }
            let drained = done.iter().zip(&posted).all(|(d, p)| d >= p) && backlog.iter().all(VecDeque::is_empty);
            let finished = if deadline.is_some() {
                stopping && drained
            } else {
                drained && tally.iter().all(|t| t.arrivals >= limit)
            };
            if finished {
                return Ok(());
            }
            let got = cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?;
            let now = start.elapsed().as_secs_f64();
            for wc in &wcs[..got] {
                check_wc(wc, "cluster stream")?;
                let f = (wc.wr_id() >> COUNT_BITS) as usize;
                let c = wc.wr_id() & ((1 << COUNT_BITS) - 1);
                let before = done[f];
                done[f] = done[f].max(c);
                if before < o.warmup && done[f] >= o.warmup {
                    win[f].start = now;
                }
                win[f].end = now;
                if c > o.warmup {
                    let (at, verb, bytes) = inflight[f][((c - 1) % depth) as usize];
                    if c == o.warmup + 1 && rates[f] != Rate::Closed {
                        // Open loop: the window opens at the first measured
                        // request's arrival. Opening it at the last warm-up
                        // completion would count the backlog that built up
                        // behind a slow warm-up as if it had arrived inside
                        // the window, and report more than the offered rate.
                        win[f].start = at;
                    }
                    tally[f].complete(verb, bytes, (now - at) * 1e9, now);
                }
            }
            if deadline.is_some_and(|dl| !stopping && start.elapsed() >= dl) {
                stopping = true;
            }
        }
    })();
    alloc::measuring(false);
    r?;
    for (w, &p) in win.iter_mut().zip(&posted) {
        w.ops = p.saturating_sub(o.warmup);
        if w.ops == 0 {
            w.end = w.start;
        }
    }
    Ok(win.into_iter().zip(tally).collect())
}

/// One request at a time on each unit; latency percentiles per unit (p50,
/// p99, p99.9, mean in µs, of `o.lat_samples` samples).
fn probe(net: &Net, cq: &Cq, o: &ClusterOpts, (me, size): (u32, usize), units: &[Unit]) -> Res<Vec<[f64; 4]>> {
    let mut wcs = [Wc::default(); 1];
    let mut out = Vec::with_capacity(units.len());
    let mut samples = vec![0f64; o.lat_samples as usize];
    for &u in units {
        let qp = net.qp(u)?;
        // The flow's first operation (a scenario's flows may differ).
        let verb = o.workload_of(me, u.dst).mix.verbs().next().unwrap_or(o.verb);
        let sge = net.sge(u.dst, if verb == Verb::Atomic { 8 } else { size });
        alloc::measuring(true);
        let r = (|| -> Res<()> {
            for s in samples.iter_mut() {
                let t = Instant::now();
                // SAFETY: the entry lies in `mem`; the completion is awaited.
                unsafe { qp.post_send(&mut [net.request(verb, &sge, u.dst).signaled()]) }
                    .map_err(err("ibv_post_send"))?;
                while cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))? == 0 {}
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

/// Receives `want[qi]` SEND messages on each QP (qi = peer × q + k),
/// re-posting after each completion only while more messages are still to
/// come; `posted` counts those posted before the call.
fn receive(net: &Net, mut want: Vec<u64>, mut posted: Vec<u64>, stop: &AtomicBool) -> Res<()> {
    let mut wcs = [Wc::default(); 16];
    let total = want.clone();
    let mut last = Instant::now();
    while want.iter().any(|&w| w > 0) {
        let got = net.recv_cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?;
        for wc in &wcs[..got] {
            check_wc(wc, "cluster receive")?;
            let qi = wc.wr_id() as usize;
            want[qi] = want[qi].saturating_sub(1);
            if posted[qi] < total[qi] {
                net.post_recv(qi)?;
                posted[qi] += 1;
            }
        }
        if got > 0 {
            last = Instant::now();
        } else if stop.load(Ordering::Relaxed) {
            return Err("stopped: this rank's sending half failed".into());
        } else if last.elapsed() > Duration::from_secs(300) {
            return Err(format!("no message for 300 s; still missing per QP (peer × q + k): {want:?}"));
        }
    }
    Ok(())
}

/// Runs every thread's share of `units` with `f` (one scoped thread each,
/// the thread's CQ passed along), and returns the per-unit results in the
/// order of `units`.
fn per_thread<T: Send>(
    net: &Net,
    units: &[Unit],
    threads: usize,
    f: impl Fn(&Cq, &[Unit]) -> Res<Vec<T>> + Sync,
) -> Res<Vec<(Unit, T)>> {
    let parts: Vec<(usize, Vec<Unit>)> =
        (0..threads).map(|t| (t, share(units, t, threads))).filter(|(_, u)| !u.is_empty()).collect();
    let outs = std::thread::scope(|scope| {
        let hs: Vec<_> = parts.iter().map(|(t, u)| scope.spawn(|| f(&net.cqs[*t], u))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a worker thread panicked".into()))).collect::<Vec<_>>()
    });
    let mut r = Vec::with_capacity(units.len());
    for ((_, u), out) in parts.iter().zip(outs) {
        r.extend(u.iter().copied().zip(out?));
    }
    Ok(r)
}

/// The threads a rank runs for its `units`: `--threads`, or one per unit.
fn thread_count(o: &ClusterOpts, units: usize) -> usize {
    if o.threads == 0 {
        units.max(1)
    } else {
        o.threads as usize
    }
}

/// Whether no thread of this rank posts to two destinations. Flows that
/// share a thread still have their own QPs, windows and posting schedules
/// (each kept full as its own completions come back), so their figures are
/// their own either way; what they share is the thread's CPU time.
fn flows_apart(units: &[Unit], threads: usize) -> bool {
    (0..threads).all(|t| {
        let mine = share(units, t, threads);
        mine.iter().all(|u| u.dst == mine[0].dst)
    })
}

/// One repetition of one size's two phases on this rank: its flows'
/// results.
fn measure(
    net: &Net,
    s: &mut Session,
    o: &ClusterOpts,
    (size, rep): (usize, u32),
    me: u32,
    units: &[Unit],
) -> Res<(Vec<FlowResult>, Vec<LoadResult>)> {
    let threads = thread_count(o, units.len());
    let seed = o.seed ^ (u64::from(me) << 32) ^ (u64::from(rep) << 48) ^ ((size as u64) << 8);
    let mut loads = Vec::new();
    let probes: Vec<Unit> = units.iter().filter(|u| u.k == 0).copied().collect();
    let mut res: Vec<FlowResult> = probes
        .iter()
        .map(|u| FlowResult { src: me, dst: u.dst, size, rep, start: f64::INFINITY, ..FlowResult::default() })
        .collect();
    let slot = |res: &[FlowResult], dst: u32| res.iter().position(|f| f.dst == dst);
    s.barrier().map_err(err("barrier before the bandwidth phase"))?;
    if o.pattern == Pattern::Loaded && me == 0 {
        // Rank 0 probes rank 1 while the others stream.
        let lat = probe(net, &net.cqs[0], o, (me, size), &probes)?;
        for (r, l) in res.iter_mut().zip(lat) {
            r.lat = l;
            r.lat_n = u64::from(o.lat_samples);
        }
    } else {
        let out = per_thread(net, units, threads, |cq, u| stream(net, cq, o, (me, size, seed), u))?;
        for (u, (w, t)) in &out {
            let i = slot(&res, u.dst).ok_or("a unit without its flow")?;
            res[i].ops += w.ops;
            res[i].bytes += t.bytes;
            res[i].start = res[i].start.min(w.start);
            res[i].secs = res[i].secs.max(w.end);
        }
        for r in &res {
            let tallies: Vec<&Tally> = out.iter().filter(|(u, _)| u.dst == r.dst).map(|(_, (_, t))| t).collect();
            let offered = o.workload_of(me, r.dst).rate.offered();
            loads.push(LoadResult::of(me, r.dst, size, rep, offered, &tallies));
        }
    }
    for r in &mut res {
        if !r.start.is_finite() {
            r.start = 0.0;
        }
    }
    // Phase 2, after a barrier: latency probes on the first QP of every flow
    // (loaded-latency mode probed already).
    s.barrier().map_err(err("barrier before the latency phase"))?;
    if o.pattern != Pattern::Loaded {
        for (u, l) in per_thread(net, &probes, threads, |cq, u| probe(net, cq, o, (me, size), u))? {
            let i = slot(&res, u.dst).ok_or("a probe without its flow")?;
            res[i].lat = l;
            res[i].lat_n = u64::from(o.lat_samples);
        }
    }
    Ok((res, loads))
}

/// Runs the cluster mode on this rank: each of `phases` in turn (one for a
/// command line, a scenario file's phases otherwise), in one session on one
/// device, each with QPs and memory of its own and a report of its own.
pub fn run(phases: &[ClusterOpts], ranks: Option<u32>) -> Res<()> {
    let cfg = ClusterConfig::from_env().map_err(err("cluster configuration"))?;
    let mut s = Session::join(&cfg).map_err(err("joining the cluster"))?;
    let n = s.size();
    if n < 2 {
        return Err("the cluster mode needs at least two ranks".into());
    }
    if let Some(r) = ranks.filter(|&r| r != n) {
        return Err(format!("the scenario says ranks = {r}, but {n} ranks joined (change `ranks` or the launch)"));
    }
    let ctx = match s.device() {
        Some(d) => Context::open(d),
        None => Context::open_first(),
    }
    .map_err(err("opening the device"))?;
    let pd = Pd::alloc(&ctx).map_err(err("allocating a PD"))?;
    for o in phases {
        if let Some(f) = o.flows.iter().find(|f| f.src >= n || f.dst >= n) {
            return Err(format!("flow {} -> {}: ranks are 0..{n}", f.src, f.dst));
        }
        phase(&mut s, &ctx, &pd, o)?;
    }
    Ok(())
}

/// One phase of the cluster mode on this rank, with its report on rank 0.
fn phase(s: &mut Session, ctx: &Context, pd: &Pd, o: &ClusterOpts) -> Res<()> {
    if o.transport == crate::cluster_opts::Transport::Dc {
        return crate::cluster_dc::phase(s, ctx, pd, o);
    }
    let (me, n) = (s.rank(), s.size());
    let port = ctx.query_port(1).map_err(err("querying port 1"))?;
    let flows = o.flow_list(n);
    let mine: Vec<u32> = if o.pattern == Pattern::Loaded && me == 0 {
        vec![1]
    } else {
        flows.iter().filter(|f| f.0 == me).map(|f| f.1).collect()
    };
    let units = units_of(&mine, o.qps);
    let threads = thread_count(o, units.len());
    let rx = 64u32;
    // Each thread's CQ holds a full window of each of its QPs.
    let cqs = (0..threads)
        .map(|t| Cq::create(ctx, (o.depth * share(&units, t, threads).len() as u32).max(16)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err("creating a CQ"))?;
    let recv_cq = Cq::create(ctx, rx * n * o.qps).map_err(err("creating a CQ"))?;
    let max_size = o.sizes.iter().copied().max().unwrap_or(8);
    let slot = max_size.max(64).div_ceil(64) * 64;
    let mem = RegisteredMem::new(pd, 2 * slot * n as usize).map_err(err("registering memory"))?;
    // This rank's QPs and memory (docs/perf.md, "QPs and memory per rank").
    let cq_sizes: Vec<u32> = (0..threads).map(|t| (o.depth * share(&units, t, threads).len() as u32).max(16)).collect();
    let resources = crate::cluster_res::Resources::rc_mesh(
        n,
        o.qps,
        (o.depth.max(1), rx),
        &cq_sizes,
        rx * n * o.qps,
        (2 * slot * n as usize) as u64,
    );
    let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let connect = ConnectOpts::default().access(access).mtu(port.active_mtu()).max_rd_atomic(4).max_dest_rd_atomic(4);
    let caps = QpCaps::default().max_send_wr(o.depth.max(1)).max_recv_wr(rx);
    let mesh = MeshOpts::default().caps(caps).connect(connect).psn(rrddmma::prim::random_psn());
    let cq_of = |peer: u32, k: u32| {
        let t = units.iter().position(|u| *u == Unit { dst: peer, k }).map_or(0, |i| i % threads);
        &cqs[t]
    };
    let qps = connect_mesh(s, pd, o.qps, cq_of, &recv_cq, &mesh)?;
    let tokens = s.exchange_mrs(&mem.remote()).map_err(err("exchanging memory tokens"))?;
    let remote = landing(&tokens, me, n, slot)?;
    let q = o.qps as usize;
    let net = Net { qps, cqs, recv_cq, mem, remote, slot, n: n as usize, q };
    // SEND: every size's messages on each incoming QP; the first receives go
    // up before the first barrier.
    let mut want = vec![0u64; n as usize * q];
    let mut posted = vec![0u64; n as usize * q];
    if o.verb == Verb::Send {
        for &(src, dst) in &flows {
            if dst == me {
                for k in 0..q {
                    let per_rep = o.iters + o.warmup + if k == 0 { u64::from(o.lat_samples) } else { 0 };
                    want[src as usize * q + k] = per_rep * u64::from(o.reps) * o.sizes.len() as u64;
                }
            }
        }
        for (qi, w) in want.iter().enumerate() {
            for _ in 0..(*w).min(u64::from(rx)) {
                net.post_recv(qi)?;
                posted[qi] += 1;
            }
        }
    }
    if me == 0 {
        println!(
            "rrddmma-perf cluster: {} ranks, pattern {}, op {}, sizes {:?} B, {} flows, {} QP(s) per pair, {} per rank, {} per QP after {} warm-up request(s), depth {}, {} repetition(s)",
            n,
            o.pattern.name(),
            o.verb.name(),
            o.sizes,
            flows.len(),
            o.qps,
            if o.threads == 0 { "one thread per QP".to_string() } else { format!("{} thread(s)", o.threads) },
            o.duration.map_or(format!("{} requests", o.iters), |d| format!("{d} s")),
            o.warmup,
            o.depth,
            o.reps
        );
    }
    let sysfs = std::path::Path::new("/sys");
    let gid_index = mesh.get_connect().gid_index_on(ctx).map_err(err("choosing a GID"))?;
    let gid_type = ctx
        .query_gid_entry(1, u32::from(gid_index))
        .map_or_else(|e| format!("unknown ({e})"), |g| g.gid_type.to_string());
    let facts = cluster_env::PortFacts { mtu: format!("{}", port.active_mtu()), gid_index, gid_type };
    let testbed = cluster_env::testbed(sysfs, ctx.name(), &facts);
    let counters_before = cluster_env::counters(sysfs, ctx.name());
    let stop = AtomicBool::new(false);
    let (results, loads) = std::thread::scope(|scope| -> Res<(Vec<FlowResult>, Vec<LoadResult>)> {
        let rx_thread =
            (o.verb == Verb::Send).then(|| scope.spawn(|| receive(&net, want.clone(), posted.clone(), &stop)));
        let r = (|| -> Res<(Vec<FlowResult>, Vec<LoadResult>)> {
            let (mut all, mut loads) = (Vec::new(), Vec::new());
            for &size in &o.sizes {
                for rep in 0..o.reps {
                    let (f, l) = measure(&net, s, o, (size, rep), me, &units)?;
                    all.extend(f);
                    loads.extend(l);
                }
            }
            Ok((all, loads))
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
    s.barrier().map_err(err("barrier after the last phase"))?;
    let counter_deltas = cluster_env::deltas(&counters_before, &cluster_env::counters(sysfs, ctx.name()));
    // Gather at every rank; rank 0 reports.
    // The first line says whether each of this rank's threads kept to one destination.
    let apart = flows_apart(&units, threads) || o.pattern == Pattern::Loaded && me == 0;
    let text: String = std::iter::once(format!("apart {}\n", u8::from(apart)))
        .chain(results.iter().map(FlowResult::encode))
        .chain(loads.iter().map(LoadResult::encode).collect::<Res<Vec<_>>>()?)
        .chain(std::iter::once(cluster_env::encode(&testbed, &counter_deltas)))
        .collect();
    let all = s.all_gather(text.as_bytes()).map_err(err("gathering results"))?;
    let mut every = Vec::new();
    let mut shared = Vec::new();
    let mut envs = Vec::new();
    let mut every_load = Vec::new();
    let expect = Expect { ranks: n, sizes: &o.sizes, reps: o.reps, lat_samples: o.lat_samples };
    for (r, bytes) in all.iter().enumerate() {
        let t = std::str::from_utf8(bytes).map_err(|_| format!("rank {r} sent results that are not UTF-8"))?;
        let mut env = RankEnv::default();
        let mut rest = String::new();
        for line in t.lines() {
            if let Some(l) = LoadResult::decode(r, line, n, &o.sizes, o.reps)? {
                if every_load.len() >= n as usize * n as usize * o.sizes.len() * o.reps as usize {
                    return Err(format!("rank {r} sent more load results than flows, sizes and repetitions"));
                }
                every_load.push(l);
            } else if !cluster_env::take(r, line, &mut env)? {
                rest.push_str(line);
                rest.push('\n');
            }
        }
        envs.push(env);
        let (own, flows) = decode_rank(r, &rest, expect)?;
        if !own {
            shared.push(r as u32);
        }
        every.extend(flows);
    }
    let allocs = alloc::in_loop_allocations();
    if me == 0 {
        let rep = Report::new(o, n, every).shared_threads(shared).environment(envs).loads(every_load);
        println!("{}", rep.table());
        println!("QPs and memory of rank 0 ({}): {}", crate::cluster_res::HOW, resources.line());
        if let Some(p) = &o.json {
            let json = crate::cluster_res::with_resources(&rep.json()?, &resources)?;
            std::fs::write(p, json).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        if let Some(p) = &o.csv {
            std::fs::write(p, rep.csv()?).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        if let Some(p) = &o.svg {
            rep.write_figures(p)?;
        }
    }
    println!(
        "rank {me}/{n}: {} flow(s) measured over {} size(s), heap allocations inside measured loops: {allocs}",
        results.len() / (o.sizes.len() * o.reps as usize),
        o.sizes.len()
    );
    // Nobody tears down QPs while a peer may still be using them.
    s.barrier().map_err(err("final barrier"))?;
    if allocs > 0 {
        return Err(format!("{allocs} heap allocation(s) happened inside measured loops"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_spread_over_destinations_then_threads() {
        let u = units_of(&[1, 2], 2);
        let d = |dst, k| Unit { dst, k };
        assert_eq!(u, vec![d(1, 0), d(2, 0), d(1, 1), d(2, 1)]);
        assert_eq!(share(&u, 0, 2), vec![d(1, 0), d(1, 1)]);
        assert_eq!(share(&u, 1, 2), vec![d(2, 0), d(2, 1)]);
        assert_eq!(share(&u, 0, 1), u);
        assert!(share(&u, 5, 8).is_empty());
        // Every unit goes to exactly one thread.
        let mut all: Vec<Unit> = (0..3).flat_map(|t| share(&u, t, 3)).collect();
        all.sort_by_key(|x| (x.dst, x.k));
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn flows_are_apart_only_when_no_thread_posts_to_two_destinations() {
        let u = units_of(&[1, 2], 2);
        assert!(!flows_apart(&u, 1), "one thread drives both flows");
        assert!(flows_apart(&u, 2), "QP-major dealing gives each destination its own thread");
        assert!(!flows_apart(&u, 3), "thread 0 gets (1, 0) and (2, 1)");
        assert!(flows_apart(&u, 4));
        let o = crate::cluster_opts::parse(["--threads", "per-qp"]).unwrap();
        assert_eq!(thread_count(&o, u.len()), 4);
        assert!(flows_apart(&u, thread_count(&o, u.len())));
        assert_eq!(thread_count(&crate::cluster_opts::parse(["--threads", "3"]).unwrap(), 4), 3);
    }
}
