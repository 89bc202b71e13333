//! `rrddmma-perf cluster -c DC`: the scalability experiment. Every rank
//! reaches every other through rrddmma's `DcMesh` (one DC target and a
//! pool of `--dci` DC initiators under `--dc-policy`, whatever the rank
//! count) and streams the pattern's flows over it, closed loop; rank 0
//! reports each flow's throughput beside every rank's QPs and memory, and
//! those an RC mesh of the same ranks and depths would ask for.
//!
//! Where a rank's device lacks DC (rxe) the mesh is an RC mesh: without
//! `--dc-fallback rc` every rank ends with the refusal; with it the run
//! measures the RC mesh and the report says so (transport `rc-fallback`).

use std::time::Instant;

use rrddmma::ctrl::Session;
use rrddmma::mlx5dv::dc::{DciOpts, DctOpts};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Pd, QpCaps, RemoteAddr, SendWr, Sge, Srq};
use rrddmma::wrap::dc::{DcCompletion, DcMesh, DcMeshOpts, DciPoolOpts, Outcome, PostError};
use rrddmma::wrap::{MeshOpts, RegisteredMem};
use serde::Serialize;

use crate::args::Verb;
use crate::cluster_opts::{ClusterOpts, COUNT_BITS};
use crate::cluster_res::{landing, Resources, HOW};

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// Receive entries of the DC target's SRQ (nothing is sent to it: WRITE
/// and READ only).
const RX: u32 = 64;

/// The DC access key of every rank's target.
const KEY: u64 = 0x7272_6464;

/// One flow's measurement at one size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DcFlow {
    pub src: u32,
    pub dst: u32,
    pub size: usize,
    /// Requests completed inside the window.
    pub ops: u64,
    /// The window, seconds.
    pub secs: f64,
    pub mib_s: f64,
}

impl DcFlow {
    fn encode(&self) -> String {
        format!("dcflow {} {} {} {} {}\n", self.src, self.dst, self.size, self.ops, self.secs)
    }
}

/// One rank's QPs and memory, as gathered.
fn encode_res(r: &Resources) -> String {
    format!(
        "dcres {} {} {} {} {} {} {} {}\n",
        r.qps, r.send_wqes, r.send_queue_bytes, r.recv_entries, r.recv_queue_bytes, r.cqes, r.cq_bytes, r.mr_bytes
    )
}

/// Parses one rank's gathered lines: its flows and its resources.
pub(crate) fn decode(rank: usize, text: &str) -> Res<(Vec<DcFlow>, Resources)> {
    let bad = |l: &str| format!("rank {rank} sent a line the DC report cannot read: {l:?}");
    let (mut flows, mut res) = (Vec::new(), None);
    for l in text.lines() {
        let w: Vec<&str> = l.split(' ').collect();
        match w.first() {
            Some(&"dcflow") if w.len() == 6 => {
                let n = |i: usize| w[i].parse::<u64>().map_err(|_| bad(l));
                let secs: f64 = w[5].parse().map_err(|_| bad(l))?;
                let (size, ops) = (n(3)? as usize, n(4)?);
                let mib_s = if secs > 0.0 { ops as f64 * size as f64 / secs / f64::from(1 << 20) } else { 0.0 };
                flows.push(DcFlow { src: n(1)? as u32, dst: n(2)? as u32, size, ops, secs, mib_s });
            }
            Some(&"dcres") if w.len() == 9 => {
                let v: Vec<u64> = w[1..].iter().map(|x| x.parse().map_err(|_| bad(l))).collect::<Res<_>>()?;
                res = Some(Resources {
                    qps: v[0],
                    send_wqes: v[1],
                    send_queue_bytes: v[2],
                    recv_entries: v[3],
                    recv_queue_bytes: v[4],
                    cqes: v[5],
                    cq_bytes: v[6],
                    mr_bytes: v[7],
                });
            }
            _ => return Err(bad(l)),
        }
    }
    Ok((flows, res.ok_or_else(|| format!("rank {rank} sent no resources line"))?))
}

/// The JSON report of `-c DC`.
#[derive(Debug, Serialize)]
pub(crate) struct DcReport {
    pub mode: &'static str,
    /// `dc`, or `rc-fallback` where a device lacked DC.
    pub transport: &'static str,
    /// Why DC was not used (with `rc-fallback`).
    pub refusal: Option<String>,
    pub ranks: u32,
    pub pattern: &'static str,
    pub op: &'static str,
    pub dcis: u16,
    pub dc_policy: &'static str,
    pub depth: u32,
    pub iters: u64,
    pub warmup: u64,
    pub flows: Vec<DcFlow>,
    /// Every rank's QPs and memory, in rank order.
    pub resources: Vec<Resources>,
    /// What `-c RC` with the same ranks, depths and sizes asks for per rank
    /// (computed, not run).
    pub rc_mesh_resources: Resources,
    /// How the resources are counted.
    pub resources_counted: &'static str,
}

impl DcReport {
    /// The text report.
    pub(crate) fn table(&self, sizes: &[usize]) -> String {
        let mut t = String::new();
        match &self.refusal {
            None => {
                t += &format!(
                    "transport: DC, one DC target and {} DCI(s) per rank, policy {}\n",
                    self.dcis, self.dc_policy
                )
            }
            Some(r) => t += &format!("transport: RC mesh (--dc-fallback rc), not DC: {r}\n"),
        }
        for &size in sizes {
            t += &format!("size {size} B:\n");
            let mut total = 0.0;
            for f in self.flows.iter().filter(|f| f.size == size) {
                t += &format!(
                    "  {} -> {}: {:.1} MiB/s ({} requests in {:.6} s)\n",
                    f.src, f.dst, f.mib_s, f.ops, f.secs
                );
                total += f.mib_s;
            }
            t += &format!("  aggregate: {total:.1} MiB/s\n");
        }
        t += &format!("QPs and memory per rank ({HOW}):\n");
        for (r, res) in self.resources.iter().enumerate() {
            t += &format!("  rank {r} ({}): {}\n", self.transport, res.line());
        }
        t += &format!(
            "  an RC mesh of {} ranks (-c RC, same depths, computed): {}",
            self.ranks,
            self.rc_mesh_resources.line()
        );
        t
    }
}

/// Streams `iters + warmup` requests to each of `dsts` over `mesh`, `depth`
/// in flight per target; the window of a flow opens when its warm-up
/// requests have completed (at the start without warm-up) and closes at its
/// last completion.
fn stream(
    mesh: &mut DcMesh,
    o: &ClusterOpts,
    mem: &RegisteredMem,
    remote: &[RemoteAddr],
    (me, size, slot): (u32, usize, usize),
    dsts: &[u32],
) -> Res<Vec<DcFlow>> {
    let limit = o.iters + o.warmup;
    let depth = u64::from(o.depth);
    let (mut posted, mut done) = (vec![0u64; dsts.len()], vec![0u64; dsts.len()]);
    let (mut open, mut close) = (vec![0f64; dsts.len()], vec![0f64; dsts.len()]);
    let sges: Vec<[Sge; 1]> = dsts.iter().map(|&d| [mem.sge(d as usize * slot..d as usize * slot + size)]).collect();
    let mut out = [None::<DcCompletion>; 16];
    let start = Instant::now();
    while done.iter().any(|&d| d < limit) {
        for (f, &dst) in dsts.iter().enumerate() {
            while posted[f] < limit && posted[f] - done[f] < depth {
                let r = remote[dst as usize];
                let wr = match o.verb {
                    Verb::Read => SendWr::read(&sges[f], r),
                    _ => SendWr::write(&sges[f], r),
                };
                let id = ((f as u64) << COUNT_BITS) | (posted[f] + 1);
                // SAFETY: the entry lies in `mem`, which outlives the mesh's
                // use; every request's completion is awaited below.
                match unsafe { mesh.post(dst, &wr, id) } {
                    Ok(()) => posted[f] += 1,
                    Err(PostError::Busy(_)) => break,
                    Err(e) => return Err(format!("rank {me}: posting to rank {dst}: {e}")),
                }
            }
        }
        let got = mesh.poll(&mut out).map_err(err("polling the DC mesh's completions"))?;
        let now = start.elapsed().as_secs_f64();
        for c in out[..got].iter().flatten() {
            if c.outcome != Outcome::Ok {
                return Err(format!(
                    "rank {me}: a request to rank {} completed with status {:?} ({:?})",
                    c.target, c.status, c.outcome
                ));
            }
            let f = (c.wr_id >> COUNT_BITS) as usize;
            let n = c.wr_id & ((1 << COUNT_BITS) - 1);
            let Some(d) = done.get_mut(f) else {
                return Err(format!("rank {me}: a completion of no flow (wr_id {:#x})", c.wr_id));
            };
            *d = (*d).max(n);
            if n == o.warmup {
                open[f] = now;
            }
            close[f] = now;
        }
    }
    Ok(dsts
        .iter()
        .enumerate()
        .map(|(f, &dst)| DcFlow { src: me, dst, size, ops: o.iters, secs: close[f] - open[f], mib_s: 0.0 })
        .collect())
}

/// One phase of `cluster -c DC` on this rank, with its report on rank 0.
pub(crate) fn phase(s: &mut Session, ctx: &Context, pd: &Pd, o: &ClusterOpts) -> Res<()> {
    let (me, n) = (s.rank(), s.size());
    let port = ctx.query_port(1).map_err(err("querying port 1"))?;
    let dsts: Vec<u32> = o.flow_list(n).iter().filter(|f| f.0 == me).map(|f| f.1).collect();
    let depth = o.depth;
    // The send CQ holds a full window of every target.
    let send_cqe = (depth * (n - 1)).max(16);
    let send_cq = Cq::create(ctx, send_cqe).map_err(err("creating a CQ"))?;
    let recv_cq = Cq::create(ctx, RX).map_err(err("creating a CQ"))?;
    let srq = Srq::builder(pd).max_wr(RX).max_sge(1).build().map_err(err("creating the DC target's SRQ"))?;
    let max_size = o.sizes.iter().copied().max().unwrap_or(8);
    let slot = max_size.max(64).div_ceil(64) * 64;
    let mr = 2 * slot * n as usize;
    let mem = RegisteredMem::new(pd, mr).map_err(err("registering memory"))?;
    let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mtu = port.active_mtu();
    let caps = QpCaps::default().max_send_wr(depth).max_recv_wr(RX);
    let dci = DciOpts::default().mtu(mtu).max_rd_atomic(4);
    let pool = DciPoolOpts::default().dcis(o.dc.dcis).policy(o.dc.policy).caps(caps).connect(dci);
    let connect = ConnectOpts::default().mtu(mtu).max_rd_atomic(4).max_dest_rd_atomic(4);
    let rc = MeshOpts::default().caps(caps).connect(connect).psn(rrddmma::prim::random_psn());
    let opts = DcMeshOpts::default().pool(pool).dct(DctOpts::default().mtu(mtu)).key(KEY).rc(rc).access(access);
    let mut mesh =
        DcMesh::connect(s, pd, &send_cq, &recv_cq, &srq, &opts).map_err(err("-c DC: connecting the DC mesh"))?;
    if let Some(why) = mesh.refusal().filter(|_| !o.dc.fallback_rc) {
        return Err(format!(
            "-c DC: {why}; pass --dc-fallback rc to measure the RC mesh instead (the report then says so), or run -c RC"
        ));
    }
    let mine = if mesh.is_dc() {
        Resources::dc(o.dc.dcis, depth, RX, (send_cqe, RX), mr as u64)
    } else {
        Resources::rc_mesh(n, 1, (depth, 0), &[send_cqe], RX, mr as u64).with_srq(RX)
    };
    if mine.qps != mesh.qps() as u64 {
        return Err(format!("rank {me}: the mesh holds {} QPs, the accounting counted {}", mesh.qps(), mine.qps));
    }
    let tokens = s.exchange_mrs(&mem.remote()).map_err(err("exchanging memory tokens"))?;
    let remote = landing(&tokens, me, n, slot)?;
    let mut flows = Vec::new();
    for &size in &o.sizes {
        s.barrier().map_err(err("barrier before the bandwidth phase"))?;
        flows.extend(stream(&mut mesh, o, &mem, &remote, (me, size, slot), &dsts)?);
    }
    s.barrier().map_err(err("barrier after the last phase"))?;
    let text: String = flows.iter().map(DcFlow::encode).chain(std::iter::once(encode_res(&mine))).collect();
    let all = s.all_gather(text.as_bytes()).map_err(err("gathering results"))?;
    if me == 0 {
        let (mut every, mut resources) = (Vec::new(), Vec::new());
        for (r, bytes) in all.iter().enumerate() {
            let t = std::str::from_utf8(bytes).map_err(|_| format!("rank {r} sent results that are not UTF-8"))?;
            let (f, res) = decode(r, t)?;
            every.extend(f);
            resources.push(res);
        }
        let rx = 64u32;
        let rc_mesh = Resources::rc_mesh(n, 1, (depth, rx), &[(depth * (n - 1)).max(16)], rx * n, mr as u64);
        let rep = DcReport {
            mode: "cluster -c DC",
            transport: if mesh.is_dc() { "dc" } else { "rc-fallback" },
            refusal: mesh.refusal().map(str::to_string),
            ranks: n,
            pattern: o.pattern.name(),
            op: o.verb.name(),
            dcis: o.dc.dcis,
            dc_policy: o.dc.policy.name(),
            depth,
            iters: o.iters,
            warmup: o.warmup,
            flows: every,
            resources,
            rc_mesh_resources: rc_mesh,
            resources_counted: HOW,
        };
        println!(
            "rrddmma-perf cluster -c DC: {n} ranks, pattern {}, op {}, sizes {:?} B, {} DCI(s) per rank, policy {}, depth {} per target, {} requests per flow after {} warm-up",
            rep.pattern, rep.op, o.sizes, o.dc.dcis, rep.dc_policy, depth, o.iters, o.warmup
        );
        println!("{}", rep.table(&o.sizes));
        if let Some(p) = &o.json {
            let j = serde_json::to_string_pretty(&rep).map_err(err("encoding the JSON report"))?;
            std::fs::write(p, j).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
    }
    println!(
        "rank {me}/{n}: {} flow(s) over {} ({} QPs)",
        dsts.len(),
        if mesh.is_dc() { "DC" } else { "the RC fallback" },
        mesh.qps()
    );
    // Nobody tears down the mesh while a peer may still be using it.
    s.barrier().map_err(err("final barrier"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_lines_round_trip_and_bad_ones_are_named() {
        let f = DcFlow { src: 1, dst: 0, size: 4096, ops: 256, secs: 0.5, mib_s: 0.0 };
        let r = Resources::dc(4, 16, 64, (32, 64), 8192);
        let (flows, res) = decode(1, &(f.encode() + &encode_res(&r))).unwrap();
        assert_eq!(res, r);
        assert_eq!(flows.len(), 1);
        assert_eq!((flows[0].src, flows[0].dst, flows[0].ops), (1, 0, 256));
        assert!((flows[0].mib_s - 2.0).abs() < 1e-9, "256 x 4 KiB in 0.5 s: {}", flows[0].mib_s);
        assert!(decode(2, "dcflow 1 0 x 1 1\n").unwrap_err().contains("rank 2 sent a line"));
        assert!(decode(2, &f.encode()).unwrap_err().contains("rank 2 sent no resources line"));
    }

    #[test]
    fn the_report_says_which_transport_ran_and_compares_with_the_rc_mesh() {
        let rep = |refusal: Option<String>| DcReport {
            mode: "cluster -c DC",
            transport: if refusal.is_none() { "dc" } else { "rc-fallback" },
            refusal,
            ranks: 3,
            pattern: "incast",
            op: "write",
            dcis: 2,
            dc_policy: "dcs",
            depth: 16,
            iters: 10,
            warmup: 0,
            flows: vec![
                DcFlow { src: 1, dst: 0, size: 64, ops: 10, secs: 1.0, mib_s: 1.5 },
                DcFlow { src: 2, dst: 0, size: 64, ops: 10, secs: 1.0, mib_s: 2.5 },
            ],
            resources: vec![Resources::dc(2, 16, 64, (32, 64), 0); 3],
            rc_mesh_resources: Resources::rc_mesh(3, 1, (16, 64), &[32], 192, 0),
            resources_counted: HOW,
        };
        let t = rep(None).table(&[64]);
        assert!(t.starts_with("transport: DC, one DC target and 2 DCI(s) per rank, policy dcs\n"), "{t}");
        assert!(t.contains("  1 -> 0: 1.5 MiB/s") && t.contains("  aggregate: 4.0 MiB/s"), "{t}");
        assert!(t.contains("  rank 2 (dc): 3 QP(s);"), "{t}");
        assert!(t.contains("an RC mesh of 3 ranks (-c RC, same depths, computed): 2 QP(s);"), "{t}");
        let t = rep(Some("no DC here".into())).table(&[64]);
        assert!(t.starts_with("transport: RC mesh (--dc-fallback rc), not DC: no DC here\n"), "{t}");
        let j = serde_json::to_value(rep(None)).unwrap();
        assert_eq!(j["resources"][0]["qps"], 3);
        assert_eq!(j["rc_mesh_resources"]["qps"], 2);
        assert_eq!(j["transport"], "dc");
        assert!(j["resources_counted"].as_str().unwrap().contains("64-byte blocks"));
    }
}
