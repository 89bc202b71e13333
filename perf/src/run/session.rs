//! The session a test runs on: the device, the registered buffer, the CQs
//! and connected QPs, and the exchange with the peer.

use std::time::Duration;

use rrddmma::prim::{
    AccessFlags, Ah, AhAttr, CompChannel, ConnectOpts, Context, Cq, Endpoint, Gid, Mtu, Pd, Qp, QpAttr, QpCaps,
    QpState, QpType, RateLimit, RecvWr, SendWr, Sge, GRH_LEN,
};
use rrddmma::wrap::{HugePages, MemOpts, RegisteredMem};

use super::{err, Res};
use crate::args::{Conn, Opts, Test, Verb};
use crate::clock::Clock;
use crate::dc::{self, DcSide};
use crate::oob::{Dest, Limits, Oob};
use crate::pace::RateKind;
use crate::payload;
use crate::place;
use crate::srq::Shared;
use crate::ud::UdPeer;

/// perftest's Q_Key of UD QPs (`DEF_QKEY`).
pub(crate) const QKEY: u32 = 0x1111_1111;

/// Round `v` up to a multiple of `a` (perftest's `INC`: at least one `a`).
pub(crate) fn inc(v: usize, a: usize) -> usize {
    v.max(1).div_ceil(a) * a
}

/// Everything a test runs on. Field order is drop order: QPs, then the
/// registered buffer.
pub struct Session {
    pub qps: Vec<Qp>,
    /// `-c DC`: the initiators or targets (then `qps` is empty).
    pub(crate) dc: Option<DcSide>,
    /// `--use-srq`'s SRQ, or `-c XRC`'s domain and XRC SRQ (none otherwise).
    pub(crate) shared: Shared,
    /// `-c XRC`: every request names the peer's XRC SRQ (`Dest::srqn`).
    pub(crate) xrc: bool,
    /// UD: how each QP reaches its peer (empty otherwise, and on a `-R`
    /// server that only receives).
    pub(crate) ud: Vec<UdPeer>,
    /// With -R: the CM ids of the QPs (dropped after them: disconnects).
    _cm: Option<crate::cm::Conns>,
    pub cqs: Vec<Cq>,
    pub recv_cq: Cq,
    /// Every QP's source and target regions, registered (and the regions
    /// the data path uses: [`Memory::data`]).
    pub mem: crate::regions::Memory,
    /// `--write_with_imm` / `--send_with_imm`: requests carry immediate data.
    pub(crate) imm: bool,
    /// `-W`: the port counters, read before any QP exists.
    pub counters: Option<crate::regions::Counters>,
    pub oob: Oob,
    pub my: Vec<Dest>,
    pub rem: Vec<Dest>,
    /// Bytes per QP region (perftest's `BUFF_SIZE`, cache-line rounded;
    /// UD: one more cache line for the GRH).
    pub slot: usize,
    /// Where a received payload starts in a target region: 0, or on UD the
    /// first cache line boundary at least [`GRH_LEN`] in (the GRH lands
    /// just before it, as in perftest's receive buffers).
    pub(crate) rx_payload: usize,
    /// Bytes of each receive: the region, or on UD the GRH and the largest message.
    pub(crate) rx_len: usize,
    /// Receives posted per QP before the run (SEND tests; perftest's `size_per_qp`).
    pub(crate) rx_per_qp: usize,
    pub cycle: usize,
    pub line: usize,
    /// The clock of the latency samples.
    pub clock: Clock,
    /// What one read of it costs here, in nanoseconds.
    pub clock_read_ns: f64,
    pub ctx: Context,
}

/// Opens the device, talks to the peer and connects the QPs. Returns the
/// options the run goes by: `o`, or on UD with the sizes cut to the path MTU.
pub fn setup(o: &Opts) -> Res<(Session, Opts)> {
    // Every read of the exchange is bounded; a -D run's waits last at least its length.
    let mut limits = Limits::from_env()?;
    if let Some(d) = o.duration {
        let runs = crate::args::sizes(o).len().max(1) as f64;
        let run = Duration::try_from_secs_f64(d * runs).unwrap_or(limits.run);
        limits.run = limits.run.max(run.saturating_add(limits.step));
    }
    // With -R the exchange comes first: its route names the device.
    let wait = Duration::from_secs(30);
    let cm_oob = if o.rdma_cm { Some(Oob::open_cm(o.server.as_deref(), o.tcp_port, wait, limits)?) } else { None };
    let device = o.device.clone().or_else(|| cm_oob.as_ref().and_then(Oob::cm_device));
    let ctx = match &device {
        Some(d) => Context::open(d),
        None => Context::open_first(),
    }
    .map_err(err("opening the device"))?;
    // -c DC is ConnectX's: refused here, before any peer waits on this side.
    if o.conn == Conn::Dc {
        dc::require_mlx5(&ctx)?;
    }
    // So are --use_ooo, --use_data_direct, TPH and GPU memory where missing.
    let pre = preflight(&ctx, o)?;
    // -W: the counters' first values, before this side's QPs exist (perftest reads them at set-up).
    let counters = crate::regions::Counters::open(ctx.name(), o.ib_port, &o.knobs.counters)?;
    // Pin before anything is allocated or registered (see `place`).
    let placed = if let Some(c) = o.cpu {
        place::pin(&[c])?;
        format!("CPU {c}")
    } else if o.numa {
        match place::device_node(ctx.name()) {
            Some(node) => {
                place::pin(&place::node_cpus(node)?)?;
                format!("NUMA node {node} (CPUs {:?})", place::current())
            }
            None => format!("not pinned: {} reports no NUMA node", ctx.name()),
        }
    } else {
        String::new()
    };
    if !placed.is_empty() {
        println!(" placement: {placed}");
    }
    let port = ctx.query_port(o.ib_port).map_err(err("querying the port"))?;
    let dev = ctx.query_device().map_err(err("querying the device"))?;
    let with_gid = port.is_ethernet() || o.gid_index.is_some();
    let gid_index = match o.gid_index {
        Some(i) => i,
        None if port.is_ethernet() => ctx.roce_v2_gid_index(o.ib_port).map_err(err("reading the GID table"))?,
        None => 0,
    };
    let mut mtu = port.active_mtu().to_raw();
    if let Some(m) = o.mtu {
        // `args` accepts only the five MTUs.
        mtu = mtu.min(Mtu::from_bytes(m).unwrap_or(Mtu::MTU_4096).to_raw());
    }

    let mut oob = match cm_oob {
        Some(c) => c,
        None => Oob::open(o.server.as_deref(), o.tcp_port, wait, limits)?,
    };
    let page = 4096u32;
    let (cycle, line, mtu) = oob.preamble(o.dont_xchg_versions, page, 64, mtu)?;
    let (cycle, line) = (cycle as usize, line as usize);
    let mut fitted = o.clone();
    if let Some(note) = crate::args::fit_ud(&mut fitted, 128 << mtu.clamp(1, 5))? {
        eprintln!("{note}");
    }
    let o = &fitted;

    let max_size = crate::args::sizes(o).into_iter().max().unwrap_or(o.size);
    let ud = o.conn == Conn::Ud;
    let rx_payload = if ud { inc(GRH_LEN, line) } else { 0 };
    let slot = inc(max_size.max(cycle), line) + rx_payload;
    let rx_len = if ud { max_size + GRH_LEN } else { slot };
    let q = o.qps as usize;
    // Destinations (and regions) announced: 2q where each side of a -c DC
    // run has initiators and targets (crate::dc_dual), else one per QP.
    let regions = if crate::dc_dual::dual(o) { 2 * q } else { q };
    let pd = Pd::alloc(&ctx).map_err(err("allocating a PD"))?;
    let access =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    // A UC QP takes remote writes only (UC has no READ or atomics).
    let qp_access = if o.conn == Conn::Uc { AccessFlags::REMOTE_WRITE } else { access };
    // --odp: perftest's on-demand paging (`IBV_ACCESS_ON_DEMAND`).
    let mem_access = if o.odp { access | AccessFlags::ON_DEMAND } else { access };
    // Page-aligned and zeroed; `--use_hugepages`: 2 MiB huge pages (`MAP_HUGETLB`).
    let huge = if o.hugepages { HugePages::Explicit } else { HugePages::No };
    let mem = RegisteredMem::with(&pd, slot * 2 * regions, &MemOpts::default().huge(huge).access(mem_access)).map_err(
        |e| {
            if o.odp && matches!(&e, rrddmma::wrap::Error::Verbs(v) if v.is_unsupported()) {
                format!(
                    "--odp: {e} (on-demand paging: ConnectX (mlx5), and rxe from Linux 6.14 on; run without --odp \
                 here)"
                )
            } else if o.hugepages {
                format!(
                    "--use_hugepages: {e} (reserve 2 MiB huge pages first, e.g. `echo 64 > /proc/sys/vm/nr_hugepages`)"
                )
            } else {
                format!("allocating and registering memory: {e}")
            }
        },
    )?;
    let gpu = match (pre.gpu, o.knobs.gpu) {
        (Some(rt), Some(g)) => Some(crate::gpu::GpuMem::new(rt, &g, &pd, mem.len(), mem_access, o.knobs.data_direct)?),
        _ => None,
    };
    let mem = crate::regions::Memory::new(mem, &pd, q, o.knobs.mr_per_qp, pre.dmah, gpu)?;

    let threads = o.threads as usize;
    let per_thread = q.div_ceil(threads) as u32;
    let cqs =
        (0..threads).map(|_| new_cq(&ctx, (o.tx_depth * per_thread).max(2), o.events)).collect::<Res<Vec<_>>>()?;
    let recv = has_recv(o);
    let rx = if recv { o.rx_depth.max(2) } else { 1 };
    let recv_cq = new_cq(&ctx, rx * o.qps, o.events)?;
    let caps = QpCaps::default()
        .max_send_wr(o.tx_depth.max(o.post_list))
        .max_recv_wr(rx)
        .max_send_sge(1)
        .max_recv_sge(1)
        .max_inline_data(o.inline);
    // --use-srq: one SRQ of -r receives (perftest's `max_wr`); -c XRC: the
    // XRC domain and SRQ (the requester's QPs are XRC_SEND, the responder's
    // XRC_RECV).
    let shared = Shared::create(o, &ctx, &pd, &recv_cq, rx, oob.is_client())?;
    let qp_type = Shared::qp_type(o.conn, oob.is_client());
    let dc_place = dc::Place {
        pd: &pd,
        port: o.ib_port,
        gid_index: with_gid.then_some(gid_index),
        mtu: rrddmma::prim::Mtu::from_raw(mtu),
    };
    let mut dc_side = if o.conn == Conn::Dc {
        let send_cqs: Vec<&Cq> = (0..q).map(|i| &cqs[i % threads]).collect();
        let kinds = crate::dc_dual::kinds(o, oob.is_client());
        Some(DcSide::create(o, &dc_place, kinds, &send_cqs, &recv_cq, shared.srq(), caps, access)?)
    } else {
        None
    };
    let qps = (0..if dc_side.is_some() { 0 } else { q })
        .map(|i| {
            let b = Qp::builder(&pd, qp_type, &cqs[i % threads], &recv_cq);
            // --use_ooo: mlx5's out-of-order data placement.
            let b = if o.knobs.ooo { b.mlx5_create_flags(rrddmma::prim::Mlx5QpFlags::OOO_DP) } else { b };
            shared.attach(b, qp_type, caps).build()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}creating a QP: {e}", if o.knobs.ooo { "--use_ooo: " } else { "" }))?;
    let srqn = shared.srqn()?;

    let out_reads = u32::try_from(dev.max_qp_rd_atom).unwrap_or(1).clamp(1, 16);
    let gid = if with_gid {
        Some(ctx.query_gid(o.ib_port, u32::from(gid_index)).map_err(err("reading the GID"))?.0)
    } else {
        None
    };
    // -R: the CM connects the QPs now, between two exchange messages
    // (perftest's `create_rdma_cm_connection`); the CM picks the PSNs.
    let mut cm_conns = None;
    if oob.is_cm() {
        let listener = if oob.is_client() { None } else { Some(crate::cm::listen(o.tcp_port, qps.len(), ud)?) };
        oob.handshake(&Dest::default())?;
        let wait = Duration::from_secs(30);
        let rd = out_reads as u8;
        if let Some(r) = o.knobs.retry_count {
            crate::cm::set_retry_count(r);
        }
        // UD: the first target region holds the QP announcements meanwhile.
        let cm_ud = ud.then(|| crate::cm::Ud {
            pd: &pd,
            mr: mem.mr(),
            scratch: q * slot,
            send_cqs: (0..q).map(|i| &cqs[i % threads]).collect(),
            recv_cq: &recv_cq,
            announce: o.test == Test::Lat || o.bidir,
        });
        let conns = match (listener, oob.cm_peer()) {
            (Some(l), Some(peer)) => crate::cm::accept(l, ctx.name(), &qps, rd, wait, peer.ip(), cm_ud)?,
            (None, Some(peer)) => crate::cm::connect(peer, ctx.name(), &qps, rd, wait, cm_ud)?,
            (_, None) => return Err("rdma_cm: the exchange connection has no peer address".into()),
        };
        oob.handshake(&Dest::default())?;
        cm_conns = Some(conns);
    }
    let cm_psns = cm_conns.as_ref().map(crate::cm::Conns::sq_psns);
    let my: Vec<Dest> = (0..regions)
        .map(|i| Dest {
            lid: port.lid(),
            out_reads,
            // -c DC: the initiator's number, or the target's DCT number.
            qpn: dc_side.as_ref().map_or_else(|| qps[i].qpn(), |d| d.number(i)),
            // From the OS (getrandom), not the process id; with -R the CM's.
            psn: cm_psns.as_ref().map_or_else(rrddmma::prim::random_psn, |p| p[i]),
            rkey: mem.data(i).rkey(),
            vaddr: mem.data(i).addr() + ((regions + i) * slot) as u64,
            gid,
            srqn,
        })
        .collect();

    // perftest: one exchange before the per-QP ones in the latency tests
    // other than SEND.
    if o.test == Test::Lat && o.verb != Verb::Send {
        oob.handshake(&my[0])?;
    }
    let mut rem = Vec::with_capacity(regions);
    for d in &my {
        rem.push(oob.handshake(d)?);
    }
    if let Some(d) = dc_side.as_mut() {
        d.reach(&dc_place, &rem)?;
    }
    // -R: the CM's peers (cm.rs); otherwise made below from the exchange.
    let mut ud_peers = cm_conns.as_mut().map(|c| std::mem::take(&mut c.ud)).unwrap_or_default();
    for (i, qp) in qps.iter().enumerate().filter(|_| cm_conns.is_none()) {
        let r = &rem[i];
        let remote = Endpoint { qpn: r.qpn, psn: r.psn, lid: r.lid, gid: Gid(r.gid.unwrap_or([0; 16])) };
        if ud {
            // perftest's UD set-up: RTS with its Q_Key, and an address
            // handle to the peer (routed, hop limit 255, where GIDs are used).
            qp.bring_up_ud(o.ib_port, 0, QKEY, my[i].psn).map_err(err("bringing the UD QP to RTS"))?;
            let av = if remote.gid.is_zero() {
                AhAttr::lid(o.ib_port, r.lid)
            } else {
                AhAttr::global(o.ib_port, gid_index, remote.gid)
                    .dlid(r.lid)
                    .hop_limit(255)
                    .traffic_class(o.knobs.tclass)
                    .flow_label(flow_label(o, i))
            }
            .sl(o.knobs.sl);
            let ah = Ah::create(&pd, &av).map_err(err("creating the address handle"))?;
            ud_peers.push(UdPeer { ah, qpn: r.qpn, qkey: QKEY });
            continue;
        }
        let opts = ConnectOpts::default()
            .port(o.ib_port)
            .gid_index(Some(gid_index))
            .mtu(rrddmma::prim::Mtu::from_raw(mtu))
            .max_rd_atomic(r.out_reads.clamp(1, out_reads) as u8)
            .max_dest_rd_atomic(out_reads as u8)
            .access(qp_access)
            .sl(o.knobs.sl)
            .traffic_class(o.knobs.tclass)
            .timeout(o.knobs.qp_timeout);
        if !remote.gid.is_zero() && !o.knobs.flow_labels.is_empty() {
            // --flow_label: QP i's label in its path's GRH (ConnectOpts has none).
            let rd = (r.out_reads.clamp(1, out_reads) as u8, out_reads as u8);
            connect_labeled(qp, &remote, my[i].psn, o, (gid_index, mtu, rd, qp_access), flow_label(o, i))?;
        } else {
            qp.connect(&remote, my[i].psn, &opts).map_err(err("connecting the QP"))?;
        }
    }
    // --rate_limit_type HW: the device paces every QP this side sends on.
    let sends = oob.is_client() || o.bidir;
    let mut rate = o.rate;
    if let Some(r) = o.rate.filter(|r| r.kind == RateKind::Hw && sends) {
        let limit = RateLimit::kbps(r.kbps()?);
        for qp in &qps {
            match qp.set_rate_limit(&limit) {
                Ok(()) => {}
                // perftest: without --rate_limit_type, a QP that takes no HW
                // limit falls back to the SW limiter, saying so.
                Err(e) if e.is_unsupported() && !r.kind_given => {
                    eprintln!(
                        " --rate_limit: the QP takes no HW rate limit ({e}); pacing in software instead, as perftest \
                         does (--rate_limit_type HW makes this an error)"
                    );
                    rate = Some(crate::pace::Rate { kind: RateKind::Sw, ..r });
                    break;
                }
                Err(e) => {
                    return Err(format!(
                        "--rate_limit_type HW: {e}; use --rate_limit_type SW to pace the requests in software"
                    ))
                }
            }
        }
    }
    // perftest's SEND tests: one exchange right after connecting.
    if o.verb == Verb::Send {
        oob.handshake(&my[0])?;
    }
    // Receives go up before the peer may send; to a shared queue, -r of
    // them split between the QPs' regions (perftest's `size_per_qp`).
    let rx_per_qp = match recv {
        true if shared.has_srq() => (rx / q as u32).max(1) as usize,
        true => rx as usize,
        false => 0,
    };
    let mut s = Session {
        qps,
        dc: dc_side,
        shared,
        xrc: o.conn == Conn::Xrc,
        ud: ud_peers,
        _cm: cm_conns,
        cqs,
        recv_cq,
        mem,
        imm: o.knobs.imm,
        counters,
        oob,
        my,
        rem,
        slot,
        rx_payload,
        rx_len,
        rx_per_qp,
        cycle,
        line,
        clock: Clock::detect(),
        clock_read_ns: Clock::detect().read_cost_ns(),
        ctx,
    };
    // Payload checking: the bandwidth sources carry the positional pattern
    // (WRITE: this side's source regions; READ: the regions the peer reads).
    if o.check_payload && o.test == Test::Bw && matches!(o.verb, Verb::Write | Verb::Read) {
        for i in 0..q {
            let off = if o.verb == Verb::Write { s.local(i) } else { s.target(s.peer(i)) };
            // SAFETY: the region lies in the buffer; nothing is posted yet.
            unsafe { payload::fill(s.ptr(off), s.slot, 0, 0) };
        }
        if payload::corrupt_requested() {
            let off = if o.verb == Verb::Write { s.local(0) } else { s.target(s.peer(0)) };
            // SAFETY: as above.
            unsafe { payload::flip(s.ptr(off)) };
        }
    }
    if o.check_payload && o.test == Test::Lat && o.verb == Verb::Read {
        // SAFETY: as above.
        unsafe { payload::fill(s.ptr(s.target(s.peer(0))), s.slot, 0, 0) };
        if payload::corrupt_requested() {
            // SAFETY: as above.
            unsafe { payload::flip(s.ptr(s.target(s.peer(0)))) };
        }
    }
    for i in 0..q {
        for _ in 0..s.rx_per_qp {
            s.post_recv(i)?;
        }
    }
    let notes = [
        (o.use_srq, format!(" shared receive queue: {rx} receives (--use-srq)")),
        (o.conn == Conn::Xrc, format!(" XRC: XRC SRQ number {srqn:#x}, {qp_type:?} QPs")),
        (
            o.conn == Conn::Dc,
            if crate::dc_dual::dual(o) {
                format!(
                    " DC: {q} DC initiators and {q} DC targets on each side (one SRQ), {} stream(s) per \
                     initiator (key {:#x})",
                    1u32 << o.log_dci_streams,
                    dc::DC_KEY
                )
            } else if s.oob.is_client() {
                format!(
                    " DC: {q} DC initiators, {} stream(s) each, requests round-robin over {} (key {:#x})",
                    1u32 << o.log_dci_streams,
                    1u32 << o.log_active_dci_streams,
                    dc::DC_KEY
                )
            } else {
                format!(" DC: {q} DC targets receiving on one SRQ (key {:#x})", dc::DC_KEY)
            },
        ),
        (o.odp, " memory: registered with on-demand paging (--odp)".to_string()),
        (s.mem.describe().is_some(), s.mem.describe().unwrap_or_default()),
        (o.knobs.ooo, " QPs: out-of-order data placement (--use_ooo, MLX5DV_QP_CREATE_OOO_DP)".to_string()),
        (o.knobs.imm, format!(" requests carry immediate data ({:#x} + QP index)", IMM_BASE)),
        (sends && rate.is_some(), rate.map(|r| format!(" rate limit: {}", r.describe())).unwrap_or_default()),
    ];
    for (_, n) in notes.iter().filter(|(on, _)| *on) {
        println!("{n}");
    }
    let k = &o.knobs;
    if k.sl != 0 || k.tclass != 0 || !k.flow_labels.is_empty() || k.qp_timeout != 14 || k.retry_count.is_some() {
        for (i, qp) in s.qps.iter().enumerate() {
            println!(" QP {i} attributes: {}", crate::regions::qp_attrs(qp)?);
        }
    }
    for i in 0..s.my.len() {
        let d = s.oob.handshake(&s.my[i])?;
        s.rem[i] = d;
    }
    if let Some(d) = s.dc.as_mut() {
        d.renumber(&s.rem);
    }
    s.oob.handshake(&s.my[0])?;
    fitted.rate = rate;
    Ok((s, fitted))
}

/// The immediate data of `--write_with_imm` / `--send_with_imm` requests:
/// this plus the QP's index.
pub(crate) const IMM_BASE: u32 = 0x5eed_0000;

/// Whether the test posts receives: SEND, and WRITE with immediate data.
pub(crate) fn has_recv(o: &Opts) -> bool {
    o.verb == Verb::Send || (o.verb == Verb::Write && o.knobs.imm)
}

/// QP `i`'s `--flow_label` (perftest's round robin over the list), 0 without one.
fn flow_label(o: &Opts, i: usize) -> u32 {
    let l = &o.knobs.flow_labels;
    if l.is_empty() {
        0
    } else {
        l[i % l.len()]
    }
}

/// What [`preflight`] found and the run keeps.
struct Pre {
    dmah: Option<rrddmma::prim::DmaHandle>,
    gpu: Option<crate::gpu::Runtime>,
}

/// The device's refusals of `--use_ooo`, `--use_data_direct` and TPH, and
/// GPU memory's missing runtime or device, before the exchange starts (the
/// peer waits on no side that cannot run).
fn preflight(ctx: &Context, o: &Opts) -> Res<Pre> {
    let k = &o.knobs;
    if k.ooo {
        match rrddmma::prim::mlx5::ooo_recv_wrs_caps(ctx) {
            Err(e) => return Err(format!("--use_ooo: {e}")),
            Ok(None) => {
                return Err(format!(
                    "--use_ooo: {} reports no out-of-order receive capabilities (MLX5DV_CONTEXT_MASK_OOO_RECV_WRS                      absent: rdma-core 55 or later on a ConnectX that has it); run without --use_ooo",
                    ctx.name()
                ))
            }
            Ok(Some(_)) => {}
        }
    }
    if k.data_direct {
        match rrddmma::prim::mlx5::data_direct_sysfs_path(ctx) {
            Err(e) => return Err(format!("--use_data_direct: {e}")),
            Ok(None) => {
                return Err(format!(
                    "--use_data_direct: {} has no data-direct device bonded (mlx5dv_get_data_direct_sysfs_path:                      ENODEV); run without --use_data_direct",
                    ctx.name()
                ))
            }
            Ok(Some(_)) => {}
        }
    }
    let dmah = match k.ph {
        Some(ph) => Some(
            rrddmma::prim::DmaHandle::alloc(ctx, k.cpu_id, Some(ph), k.tph_mem)
                .map_err(|e| format!("--ph (TPH): {e}"))?,
        ),
        None => None,
    };
    let gpu = k.gpu.as_ref().map(crate::gpu::Runtime::load).transpose()?;
    Ok(Pre { dmah, gpu })
}

/// `Qp::connect`'s transitions (INIT, RTR, RTS) with `label` in the RTR
/// address vector's GRH; `path`: GID index, MTU (raw), READ/atomic depths
/// (initiator, responder), remote access.
fn connect_labeled(
    qp: &Qp,
    remote: &Endpoint,
    psn: u32,
    o: &Opts,
    path: (u8, u32, (u8, u8), AccessFlags),
    label: u32,
) -> Res<()> {
    let (gid_index, mtu, (rd_init, rd_dest), access) = path;
    let k = &o.knobs;
    let fail = |e: rrddmma::prim::Error| format!("--flow_label: connecting the QP: {e}");
    qp.modify(&QpAttr::new(QpState::INIT).pkey_index(0).port(o.ib_port).access(access)).map_err(fail)?;
    let av = AhAttr::global(o.ib_port, gid_index, remote.gid)
        .dlid(remote.lid)
        .hop_limit(64)
        .traffic_class(k.tclass)
        .flow_label(label)
        .sl(k.sl);
    let rc = qp.qp_type() == QpType::RC;
    let mut rtr = QpAttr::new(QpState::RTR)
        .av(&av)
        .path_mtu(rrddmma::prim::Mtu::from_raw(mtu))
        .dest_qpn(remote.qpn)
        .rq_psn(remote.psn & 0xff_ffff);
    if rc {
        rtr = rtr.max_dest_rd_atomic(rd_dest).min_rnr_timer(12);
    }
    qp.modify(&rtr).map_err(fail)?;
    let mut rts = QpAttr::new(QpState::RTS).sq_psn(psn & 0xff_ffff);
    if rc {
        rts = rts.timeout(k.qp_timeout).retry_cnt(6).rnr_retry(7).max_rd_atomic(rd_init);
    }
    qp.modify(&rts).map_err(fail)
}

/// A CQ of `cqe` entries; with `-e` on a completion channel of its own and
/// armed, as perftest arms its CQs before a test (perftest shares one
/// channel between its CQs; one each tells every wake-up's CQ apart).
pub(crate) fn new_cq(ctx: &Context, cqe: u32, events: bool) -> Res<Cq> {
    if !events {
        return Cq::create(ctx, cqe).map_err(err("creating a CQ"));
    }
    let ch = CompChannel::create(ctx).map_err(err("creating a completion channel"))?;
    let cq = Cq::builder(ctx, cqe).channel(&ch).build().map_err(err("creating a CQ"))?;
    cq.req_notify(false).map_err(err("ibv_req_notify_cq"))?;
    Ok(cq)
}

impl Session {
    /// The local (source) region of QP `i`.
    pub(crate) fn local(&self, i: usize) -> usize {
        i * self.slot
    }

    /// The target region of destination `i` (what the peer writes to).
    pub(crate) fn target(&self, i: usize) -> usize {
        (self.my.len() + i) * self.slot
    }

    /// How many QPs the run has (with `-c DC`, initiators, or on a one-way
    /// responder targets).
    pub(crate) fn n_qps(&self) -> usize {
        self.dc.as_ref().map_or(self.qps.len(), DcSide::streams)
    }

    /// The destination of stream `i`'s peer side: `i`, or with initiators
    /// and targets on each side (`crate::dc_dual`) the peer's target `i`,
    /// and the region where the peer's initiator `i` lands here.
    pub(crate) fn peer(&self, i: usize) -> usize {
        crate::dc_dual::peer_of(i, self.my.len(), self.n_qps())
    }

    /// Where the payload of a message QP `i` received starts.
    pub(crate) fn received(&self, i: usize) -> usize {
        self.target(i) + self.rx_payload
    }

    /// A SEND of `sge` on QP `i`; on UD addressed to the peer's QP.
    ///
    /// # Panics
    /// On a UD QP without a peer's address handle (a UD SEND without one
    /// would hand the provider a null handle): only sides that learnt their
    /// peer's address send.
    pub(crate) fn send_wr<'a>(&'a self, i: usize, sge: &'a [Sge]) -> SendWr<'a> {
        let send = || if self.imm { SendWr::send_imm(sge, IMM_BASE + i as u32) } else { SendWr::send(sge) };
        match self.ud.get(i) {
            Some(p) => send().ud(&p.ah, p.qpn, p.qkey),
            None => {
                assert!(
                    self.qps.get(i).is_none_or(|qp| qp.qp_type() != QpType::UD),
                    "UD QP {i} has no address handle to its peer to send to"
                );
                send()
            }
        }
    }

    /// Where a receive on QP `i` lands. UD (the only transport with
    /// `rx_payload`): the GRH first, the payload from `received(i)` on.
    pub(crate) fn recv_sge(&self, i: usize) -> Sge {
        let at = self.received(i) - if self.rx_payload == 0 { 0 } else { GRH_LEN };
        self.mem.data(i).sge_at(at, self.rx_len)
    }

    pub(crate) fn post_recv(&self, i: usize) -> Res<()> {
        let sges = [self.recv_sge(i)];
        // SAFETY: the entry lies in the session's MR, alive as long as the
        // QP and the SRQ (both held by the session).
        if unsafe { self.shared.post(&sges, i as u64) }? {
            return Ok(());
        }
        // SAFETY: as above.
        unsafe { self.qps[i].post_recv(&mut [RecvWr::new(&sges, i as u64)]) }.map_err(err("ibv_post_recv"))
    }

    /// The byte at `off` of the buffer.
    pub(crate) fn ptr(&self, off: usize) -> *mut u8 {
        self.mem.ptr_at(off)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Lines of `text` that allocate or register memory outside
    /// `wrap::RegisteredMem`.
    fn own_memory(text: &str) -> Vec<String> {
        const OWN: [&str; 6] =
            ["Mr::register", "ibv_reg_mr", "libc::mmap", "munmap", "std::alloc::alloc_zeroed", "std::alloc::dealloc"];
        text.lines().filter(|l| OWN.iter().any(|w| l.contains(w))).map(|l| l.trim().to_string()).collect()
    }

    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }

    /// Issue 22's "frees its buffer even when deregistration failed" held
    /// while the tool mapped its buffer itself and unmapped it after
    /// `Mr::register`'s region was dropped, whatever the deregistration
    /// said. Every buffer it registers is now a `wrap::RegisteredMem`,
    /// whose mapping is the registration's backing: `prim::Mr` forgets it
    /// (never unmaps it) when `ibv_dereg_mr` fails, and counts the failure
    /// in `prim::destroy_failures`. This keeps it that way: no source file
    /// maps, allocates or registers memory for the device by itself (the
    /// counting allocator forwards to the system one and registers nothing).
    #[test]
    fn regression_every_registered_buffer_is_a_registered_mem_kept_when_dereg_fails() {
        let mut files = Vec::new();
        sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        assert!(files.len() > 10, "the sources were found");
        for (name, text) in &files {
            // The two that register more (regions over the session buffer;
            // a GPU's buffer) keep the memory when a deregistration fails:
            // they compare `prim::destroy_failures` around dropping their
            // regions before they unmap or free anything.
            if name.ends_with("/regions.rs") || name.ends_with("/gpu.rs") {
                let guarded = text.contains("let failures = rrddmma::prim::destroy_failures();")
                    && text.matches("rrddmma::prim::destroy_failures()").count() >= 2;
                assert!(guarded, "{name} must keep its memory when a deregistration fails");
                continue;
            }
            let text = if name.ends_with("session.rs") {
                // This test's own list of patterns.
                text.split("#[cfg(test)]").next().unwrap_or(text)
            } else {
                text
            };
            assert_eq!(own_memory(text), Vec::<String>::new(), "{name} handles device memory outside RegisteredMem");
        }
        // The type says it too: the session's buffer and the rdma_cm
        // exchange's slots are `RegisteredMem`s.
        let _: fn(&super::Session) -> &rrddmma::wrap::RegisteredMem = |s| &s.mem;
        let _: fn(&crate::regions::Memory) -> &rrddmma::wrap::RegisteredMem = |m| m;
    }
}
