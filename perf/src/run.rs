//! Resources, connection set-up, and the measured loops.

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rrddmma::prim::{
    AccessFlags, Ah, AhAttr, CompChannel, ConnectOpts, Context, Cq, CqBuilder, Endpoint, Gid, Mr, Pd, Qp, QpBuilder,
    QpCaps, QpType, RecvWr, RemoteAddr, SendList, SendWr, Sge, Wc, GRH_LEN,
};

use crate::alloc;
use crate::args::{Conn, Opts, Test, Verb};
use crate::clock::Clock;
use crate::oob::{BwReport, Dest, Oob};
use crate::payload;
use crate::place;

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// Completion events taken by every thread (`-e`), reported at the end so
/// that a run shows it slept on events.
static EVENTS: AtomicU64 = AtomicU64::new(0);

/// Completion events taken so far (`-e`).
pub fn completion_events() -> u64 {
    EVENTS.load(Ordering::Relaxed)
}

/// Completions polled at once.
const POLL_BATCH: usize = 16;
/// Bits of a `wr_id` that count requests; the QP index sits above them.
const COUNT_BITS: u32 = 40;
/// perftest's Q_Key of UD QPs (`DEF_QKEY`).
const QKEY: u32 = 0x1111_1111;

/// One measured size.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Message size.
    pub size: usize,
    /// Operations completed (bandwidth) or samples taken (latency).
    pub iters: u64,
    /// Bytes per second (bandwidth tests).
    pub bytes_per_sec: f64,
    /// Operations per second (bandwidth tests).
    pub ops_per_sec: f64,
    /// Latency samples in nanoseconds, sorted (latency tests).
    pub lat_ns: Vec<f64>,
    /// The same samples in the order taken (with `-U` only).
    pub unsorted_ns: Vec<f64>,
    /// Heap allocations inside the measured loop.
    pub allocs: u64,
}

/// A page-aligned zeroed buffer: from the allocator, or mapped from 2 MiB
/// huge pages (`--use_hugepages`).
struct Buf {
    ptr: *mut u8,
    layout: Layout,
    huge: bool,
}

/// The huge page size `--use_hugepages` maps (the x86-64 default).
const HUGE_PAGE: usize = 2 << 20;

impl Buf {
    fn new(len: usize, huge: bool) -> Res<Buf> {
        if huge {
            let size = len.div_ceil(HUGE_PAGE) * HUGE_PAGE;
            let layout = Layout::from_size_align(size, HUGE_PAGE).map_err(err("buffer layout"))?;
            // SAFETY: an anonymous private mapping at an address of the
            // kernel's choice touches no existing memory.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(format!(
                    "--use_hugepages: cannot map {size} bytes of 2 MiB huge pages: {} (reserve some first, e.g. \
                     `echo 64 > /proc/sys/vm/nr_hugepages`)",
                    std::io::Error::last_os_error()
                ));
            }
            return Ok(Buf { ptr: p.cast(), layout, huge: true });
        }
        let layout = Layout::from_size_align(len, 4096).map_err(err("buffer layout"))?;
        // SAFETY: `len` is non-zero (at least one cycle buffer).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("cannot allocate a {len}-byte buffer"));
        }
        Ok(Buf { ptr, layout, huge: false })
    }
}

// SAFETY: the buffer is plain memory owned by the session; threads only
// reach it through the device (posted requests) or volatile byte accesses.
unsafe impl Send for Buf {}
// SAFETY: as above.
unsafe impl Sync for Buf {}

impl Drop for Buf {
    fn drop(&mut self) {
        if self.huge {
            // SAFETY: mapped in `new` with this size; nothing uses it any more
            // (the MR is dropped first).
            unsafe { libc::munmap(self.ptr.cast(), self.layout.size()) };
        } else {
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) }
        }
    }
}

/// Round `v` up to a multiple of `a` (perftest's `INC`: at least one `a`).
fn inc(v: usize, a: usize) -> usize {
    v.max(1).div_ceil(a) * a
}

/// How a UD QP reaches its peer: the address handle, the peer's QPN and the
/// Q_Key to send with.
pub struct UdPeer {
    pub ah: Ah,
    pub qpn: u32,
    pub qkey: u32,
}

/// Everything a test runs on. Field order is drop order: QPs, then the MR,
/// then the buffer.
pub struct Session {
    pub qps: Vec<Qp>,
    /// UD: how each QP reaches its peer (empty otherwise, and on a `-R`
    /// server that only receives).
    ud: Vec<UdPeer>,
    /// With -R: the CM ids of the QPs (dropped after them: disconnects).
    _cm: Option<crate::cm::Conns>,
    pub cqs: Vec<Cq>,
    pub recv_cq: Cq,
    pub mr: Mr,
    _buf: Buf,
    pub oob: Oob,
    pub my: Vec<Dest>,
    pub rem: Vec<Dest>,
    /// Bytes per QP region (perftest's `BUFF_SIZE`, cache-line rounded;
    /// UD: one more cache line for the GRH).
    pub slot: usize,
    /// Where a received payload starts in a target region: 0, or on UD the
    /// first cache line boundary at least [`GRH_LEN`] in (the GRH lands
    /// just before it, as in perftest's receive buffers).
    rx_payload: usize,
    /// Bytes of each receive: the region, or on UD the GRH and the largest message.
    rx_len: u32,
    pub cycle: usize,
    pub line: usize,
    /// The clock of the latency samples.
    pub clock: Clock,
    pub ctx: Context,
}

fn mtu_enum(bytes: u32) -> u32 {
    match bytes {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    }
}

/// Opens the device, talks to the peer and connects the QPs. Returns the
/// options the run goes by: `o`, or on UD with the sizes cut to the path MTU.
pub fn setup(o: &Opts) -> Res<(Session, Opts)> {
    // With -R the exchange comes first: its route names the device.
    let cm_oob =
        if o.rdma_cm { Some(Oob::open_cm(o.server.as_deref(), o.tcp_port, Duration::from_secs(30))?) } else { None };
    let device = o.device.clone().or_else(|| cm_oob.as_ref().and_then(Oob::cm_device));
    let ctx = match &device {
        Some(d) => Context::open(d),
        None => Context::open_first(),
    }
    .map_err(err("opening the device"))?;
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
        mtu = mtu.min(mtu_enum(m));
    }

    let mut oob = match cm_oob {
        Some(c) => c,
        None => Oob::open(o.server.as_deref(), o.tcp_port, Duration::from_secs(30))?,
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
    let rx_len = if ud { max_size + GRH_LEN } else { slot } as u32;
    let q = o.qps as usize;
    let buf = Buf::new(slot * 2 * q, o.hugepages)?;
    let pd = Pd::new(&ctx).map_err(err("allocating a PD"))?;
    let access =
        AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    // A UC QP takes remote writes only (UC has no READ or atomics).
    let qp_access = if o.conn == Conn::Uc { AccessFlags::REMOTE_WRITE } else { access };
    // SAFETY: the buffer outlives the MR (field order of `Session`) and is
    // only touched by the device and by volatile accesses in the loops.
    let mr = unsafe { Mr::register(&pd, buf.ptr, buf.layout.size(), access) }.map_err(err("registering memory"))?;

    let threads = o.threads as usize;
    let per_thread = q.div_ceil(threads) as u32;
    let cqs =
        (0..threads).map(|_| new_cq(&ctx, (o.tx_depth * per_thread).max(2), o.events)).collect::<Res<Vec<_>>>()?;
    let rx = if o.verb == Verb::Send { o.rx_depth.max(2) } else { 1 };
    let recv_cq = new_cq(&ctx, rx * o.qps, o.events)?;
    let caps = QpCaps::default()
        .max_send_wr(o.tx_depth.max(o.post_list))
        .max_recv_wr(rx)
        .max_send_sge(1)
        .max_recv_sge(1)
        .max_inline_data(o.inline);
    let qp_type = match o.conn {
        Conn::Rc => QpType::RC,
        Conn::Uc => QpType::UC,
        Conn::Ud => QpType::UD,
    };
    let qps = (0..q)
        .map(|i| QpBuilder::new(&pd, qp_type, &cqs[i % threads], &recv_cq).caps(caps).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(err("creating a QP"))?;

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
        // UD: the first target region holds the QP announcements meanwhile.
        let cm_ud = ud.then(|| crate::cm::Ud {
            pd: &pd,
            mr: &mr,
            scratch: q * slot,
            send_cqs: (0..q).map(|i| &cqs[i % threads]).collect(),
            recv_cq: &recv_cq,
            announce: o.test == Test::Lat || o.bidir,
        });
        let conns = match (listener, oob.cm_peer()) {
            (Some(l), _) => crate::cm::accept(l, ctx.name(), &qps, rd, wait, cm_ud)?,
            (None, Some(peer)) => crate::cm::connect(peer, ctx.name(), &qps, rd, wait, cm_ud)?,
            (None, None) => return Err("rdma_cm: the exchange connection has no peer address".into()),
        };
        oob.handshake(&Dest::default())?;
        cm_conns = Some(conns);
    }
    let cm_psns = cm_conns.as_ref().map(crate::cm::Conns::sq_psns);
    let my: Vec<Dest> = qps
        .iter()
        .enumerate()
        .map(|(i, qp)| Dest {
            lid: port.lid(),
            out_reads,
            qpn: qp.qpn(),
            // From the OS (getrandom), not the process id; with -R the CM's.
            psn: cm_psns.as_ref().map_or_else(rrddmma::prim::random_psn, |p| p[i]),
            rkey: mr.rkey(),
            vaddr: mr.addr() + ((q + i) * slot) as u64,
            gid,
            srqn: 0,
        })
        .collect();

    // perftest: one exchange before the per-QP ones in the latency tests
    // other than SEND.
    if o.test == Test::Lat && o.verb != Verb::Send {
        oob.handshake(&my[0])?;
    }
    let mut rem = Vec::with_capacity(q);
    for d in &my {
        rem.push(oob.handshake(d)?);
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
                AhAttr::global(o.ib_port, gid_index, remote.gid).dlid(r.lid).hop_limit(255)
            };
            let ah = Ah::new(&pd, &av).map_err(err("creating the address handle"))?;
            ud_peers.push(UdPeer { ah, qpn: r.qpn, qkey: QKEY });
            continue;
        }
        let opts = ConnectOpts::default()
            .port(o.ib_port)
            .gid_index(Some(gid_index))
            .mtu(rrddmma::prim::Mtu::from_raw(mtu))
            .max_rd_atomic(r.out_reads.clamp(1, out_reads) as u8)
            .max_dest_rd_atomic(out_reads as u8)
            .access(qp_access);
        qp.connect(&remote, my[i].psn, &opts).map_err(err("connecting the QP"))?;
    }
    // perftest's SEND tests: one exchange right after connecting.
    if o.verb == Verb::Send {
        oob.handshake(&my[0])?;
    }
    let mut s = Session {
        qps,
        ud: ud_peers,
        _cm: cm_conns,
        cqs,
        recv_cq,
        mr,
        _buf: buf,
        oob,
        my,
        rem,
        slot,
        rx_payload,
        rx_len,
        cycle,
        line,
        clock: Clock::detect(),
        ctx,
    };
    // Payload checking: the bandwidth sources carry the positional pattern
    // (WRITE: this side's source regions; READ: the regions the peer reads).
    if o.check_payload && o.test == Test::Bw && matches!(o.verb, Verb::Write | Verb::Read) {
        for i in 0..q {
            let off = if o.verb == Verb::Write { s.local(i) } else { s.target(i) };
            // SAFETY: the region lies in the buffer; nothing is posted yet.
            unsafe { payload::fill(s.ptr(off), s.slot, 0, 0) };
        }
        if payload::corrupt_requested() {
            let off = if o.verb == Verb::Write { s.local(0) } else { s.target(0) };
            // SAFETY: as above.
            unsafe { payload::flip(s.ptr(off)) };
        }
    }
    if o.check_payload && o.test == Test::Lat && o.verb == Verb::Read {
        // SAFETY: as above.
        unsafe { payload::fill(s.ptr(s.target(0)), s.slot, 0, 0) };
        if payload::corrupt_requested() {
            // SAFETY: as above.
            unsafe { payload::flip(s.ptr(s.target(0))) };
        }
    }
    // Receives go up before the peer may send.
    if o.verb == Verb::Send {
        for i in 0..q {
            for _ in 0..rx {
                s.post_recv(i)?;
            }
        }
    }
    for i in 0..q {
        let d = s.oob.handshake(&s.my[i])?;
        s.rem[i] = d;
    }
    s.oob.handshake(&s.my[0])?;
    Ok((s, fitted))
}

/// A CQ of `cqe` entries; with `-e` on a completion channel of its own and
/// armed, as perftest arms its CQs before a test (perftest shares one
/// channel between its CQs; one each tells every wake-up's CQ apart).
fn new_cq(ctx: &Context, cqe: u32, events: bool) -> Res<Cq> {
    if !events {
        return Cq::new(ctx, cqe).map_err(err("creating a CQ"));
    }
    let ch = CompChannel::new(ctx).map_err(err("creating a completion channel"))?;
    let cq = CqBuilder::new(ctx, cqe).channel(&ch).build().map_err(err("creating a CQ"))?;
    cq.req_notify(false).map_err(err("ibv_req_notify_cq"))?;
    Ok(cq)
}

/// perftest's `-e` wait: sleeps until the CQ's channel has an event (read
/// with `ibv_get_cq_event`; acknowledged in batches by `Cq::wait`), re-arms
/// the CQ, then polls once into `wcs`. The CQ is armed again before the poll,
/// so a completion the poll misses raises the next event. `timeout`: `Ok(0)`
/// once it passes.
#[inline]
fn event_poll(cq: &Cq, wcs: &mut [Wc], timeout: Option<Duration>) -> Res<usize> {
    if !cq.wait(timeout).map_err(err("ibv_get_cq_event"))? {
        return Ok(0);
    }
    EVENTS.fetch_add(1, Ordering::Relaxed);
    cq.req_notify(false).map_err(err("ibv_req_notify_cq"))?;
    cq.poll(wcs).map_err(err("ibv_poll_cq"))
}

impl Session {
    /// The local (source) region of QP `i`.
    fn local(&self, i: usize) -> usize {
        i * self.slot
    }

    /// The target region of QP `i` (what the peer writes to).
    fn target(&self, i: usize) -> usize {
        (self.qps.len() + i) * self.slot
    }

    /// Where the payload of a message QP `i` received starts.
    fn received(&self, i: usize) -> usize {
        self.target(i) + self.rx_payload
    }

    /// A SEND of `sge` on QP `i`; on UD addressed to the peer's QP.
    ///
    /// # Panics
    /// On a UD QP without a peer's address handle (a UD SEND without one
    /// would hand the provider a null handle): only sides that learnt their
    /// peer's address send.
    fn send_wr<'a>(&'a self, i: usize, sge: &'a [Sge]) -> SendWr<'a> {
        match self.ud.get(i) {
            Some(p) => SendWr::send(sge).ud(&p.ah, p.qpn, p.qkey),
            None => {
                assert!(self.qps[i].qp_type() != QpType::UD, "UD QP {i} has no address handle to its peer to send to");
                SendWr::send(sge)
            }
        }
    }

    fn post_recv(&self, i: usize) -> Res<()> {
        // UD (the only transport with `rx_payload`): the GRH first, the
        // payload from `received(i)` on.
        let at = self.received(i) - if self.rx_payload == 0 { 0 } else { GRH_LEN };
        let sges = [self.mr.sge(at, self.rx_len)];
        // SAFETY: the entry lies in the session's MR, alive as long as the QP.
        unsafe { self.qps[i].post_recv(&mut [RecvWr::new(&sges, i as u64)]) }.map_err(err("ibv_post_recv"))
    }

    fn ptr(&self, off: usize) -> *mut u8 {
        (self.mr.addr() as usize + off) as *mut u8
    }
}

fn check(wc: &Wc) -> Res<()> {
    if wc.is_success() {
        Ok(())
    } else {
        Err(format!(
            "work request {:#x} completed with status {:?} (vendor error {:#x})",
            wc.wr_id(),
            wc.status(),
            wc.vendor_err()
        ))
    }
}

/// perftest's address cycling: sizes up to half a cycle buffer walk through
/// it in cache-line steps; larger ones use one place.
fn offsets(size: usize, cycle: usize, line: usize) -> Vec<usize> {
    if size <= cycle / 2 {
        let step = inc(size, line);
        (0..cycle / step).map(|k| k * step).collect()
    } else {
        vec![0]
    }
}

/// Per-QP posting state of a bandwidth run.
struct Stream {
    qp: usize,
    sges: Vec<[Sge; 1]>,
    remotes: Vec<RemoteAddr>,
}

/// Requests posted and completed on one stream.
#[derive(Clone, Copy, Default)]
struct Counts {
    posted: u64,
    done: u64,
}

/// The request of a bandwidth test on QP `qp` for one slot (unsignaled).
fn request<'a>(
    o: &Opts,
    s: &'a Session,
    qp: usize,
    sge: &'a [Sge; 1],
    r: RemoteAddr,
    g: u64,
    inline: bool,
) -> SendWr<'a> {
    let wr = match o.verb {
        Verb::Write => SendWr::write(sge, r),
        Verb::Read => SendWr::read(sge, r),
        Verb::Send => s.send_wr(qp, sge),
        Verb::Atomic if o.cas => SendWr::compare_swap(sge, r, 0, g),
        Verb::Atomic => SendWr::fetch_add(sge, r, 1),
    };
    if inline {
        wr.inline()
    } else {
        wr
    }
}

/// A bandwidth run of one thread over its QPs; returns (ops, start, end).
fn bw_thread(s: &Session, o: &Opts, cq: &Cq, mine: &[usize], size: usize) -> Res<(u64, Instant, Instant)> {
    let len = size as u32;
    let offs = offsets(size, s.cycle, s.line);
    let streams: Vec<Stream> = mine
        .iter()
        .map(|&qp| Stream {
            qp,
            sges: offs.iter().map(|&k| [s.mr.sge(s.local(qp) + k, len)]).collect(),
            remotes: offs
                .iter()
                .map(|&k| RemoteAddr { addr: s.rem[qp].vaddr + k as u64, rkey: s.rem[qp].rkey })
                .collect(),
        })
        .collect();
    let mut counts = vec![Counts::default(); streams.len()];
    let inline = size <= o.inline as usize && matches!(o.verb, Verb::Write | Verb::Send);
    let mut lists: Vec<Vec<SendList<'_>>> = streams
        .iter()
        .map(|st| {
            (0..st.sges.len())
                .map(|k| SendList::new(vec![request(o, s, st.qp, &st.sges[k], st.remotes[k], 0, inline)]))
                .collect()
        })
        .collect();
    let pl = o.post_list as u64;
    let depth = u64::from(o.tx_depth);
    let cq_mod = u64::from(o.cq_mod);
    let mut limit = if o.duration.is_some() { u64::MAX } else { o.iters };
    let deadline = o.duration.map(Duration::from_secs_f64);
    let mut wrs: Vec<SendWr<'_>> = Vec::with_capacity(o.post_list as usize);
    let mut wcs = [Wc::default(); POLL_BATCH];
    let mask = (1u64 << COUNT_BITS) - 1;
    // -e: a full batch may have left completions behind that raise no
    // event (they came before the re-arm): poll again before sleeping.
    let mut full = false;

    alloc::measuring(true);
    let start = Instant::now();
    let result = (|| -> Res<()> {
        let mut polls = 0u32;
        loop {
            let mut all_done = true;
            for (si, (st, c)) in streams.iter().zip(counts.iter_mut()).enumerate() {
                while c.posted < limit && c.posted - c.done + pl <= depth {
                    let n = pl.min(limit - c.posted);
                    let make = |g: u64| {
                        let k = (g as usize) % st.sges.len();
                        let mut wr = request(o, s, st.qp, &st.sges[k], st.remotes[k], g, inline);
                        if (g + 1) % cq_mod == 0 || g + 1 == limit {
                            wr = wr.signaled().wr_id(((si as u64) << COUNT_BITS) | (g + 1));
                        }
                        wr
                    };
                    let g = c.posted;
                    let unsignaled = (g + 1) % cq_mod != 0 && g + 1 != limit;
                    if n == 1 && unsignaled && !o.cas {
                        // The prebuilt request of this slot (perftest's
                        // prebuilt WRs); signaled ones carry their count.
                        let k = (g as usize) % st.sges.len();
                        // SAFETY: every entry lies in the session's MR, which
                        // outlives the run; the run waits for all completions.
                        unsafe { s.qps[st.qp].post_send_list(&mut lists[si][k]) }.map_err(err("ibv_post_send"))?;
                    } else {
                        wrs.clear();
                        wrs.extend((0..n).map(|j| make(g + j)));
                        // SAFETY: as above.
                        unsafe { s.qps[st.qp].post_send(&mut wrs) }.map_err(err("ibv_post_send"))?;
                    }
                    c.posted += n;
                }
                all_done &= c.done >= limit;
            }
            if all_done {
                return Ok(());
            }
            // Nothing more can be posted until something completes: with
            // -e, sleep on the CQ's channel (perftest's `run_iter_bw`).
            let n = if o.events && !full {
                event_poll(cq, &mut wcs, None)?
            } else {
                cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?
            };
            full = n == POLL_BATCH;
            for wc in &wcs[..n] {
                check(wc)?;
                let c = &mut counts[(wc.wr_id() >> COUNT_BITS) as usize];
                c.done = c.done.max(wc.wr_id() & mask);
            }
            if let Some(d) = deadline {
                polls = polls.wrapping_add(1);
                if limit == u64::MAX && polls % 64 == 0 && start.elapsed() >= d {
                    // One more request each, signaled, so that all complete.
                    let most = counts.iter().map(|c| c.posted).max().unwrap_or(0);
                    limit = most + 1;
                }
            }
        }
    })();
    let end = Instant::now();
    alloc::measuring(false);
    result?;
    let ops = counts.iter().map(|c| c.posted).sum();
    Ok((ops, start, end))
}

/// The client side of a bandwidth test for one size.
pub fn bw_client(s: &Session, o: &Opts, size: usize) -> Res<Outcome> {
    let threads = o.threads as usize;
    let before = alloc::in_loop_allocations();
    let barrier = std::sync::Barrier::new(threads);
    let results: Vec<Res<(u64, Instant, Instant)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<usize> = (0..s.qps.len()).filter(|i| i % threads == t).collect();
                let barrier = &barrier;
                scope.spawn(move || {
                    // Warm-up (as perftest's): one queue's worth of requests,
                    // so first-touch costs stay out of the measurement. Not
                    // for SEND, whose receiver counts every message.
                    if o.verb != Verb::Send {
                        let warm = Opts { iters: u64::from(o.tx_depth), duration: None, ..o.clone() };
                        let warmed = bw_thread(s, &warm, &s.cqs[t], &mine, size);
                        barrier.wait();
                        warmed?;
                    }
                    bw_thread(s, o, &s.cqs[t], &mine, size)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a benchmark thread panicked".into()))).collect()
    });
    let mut ops = 0;
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for r in results {
        let (n, a, b) = r?;
        ops += n;
        first = Some(first.map_or(a, |f| f.min(a)));
        last = Some(last.map_or(b, |l| l.max(b)));
    }
    let secs = match (first, last) {
        (Some(a), Some(b)) => (b - a).as_secs_f64().max(1e-9),
        _ => 1e-9,
    };
    Ok(Outcome {
        size,
        // Per QP, as perftest reports it; the rates cover all QPs.
        iters: ops / u64::from(o.qps),
        bytes_per_sec: (ops * size as u64) as f64 / secs,
        ops_per_sec: ops as f64 / secs,
        allocs: alloc::in_loop_allocations() - before,
        ..Outcome::default()
    })
}

/// Checks the regions a WRITE (`incoming`: what the peer wrote here) or
/// READ (this side's own local regions) bandwidth run of `iters` requests
/// per QP of `size` bytes left, against the positional pattern.
pub fn verify_bw(s: &Session, verb: Verb, size: usize, iters: u64) -> Res<()> {
    let offs = offsets(size, s.cycle, s.line);
    let used = offs.len().min(iters.max(1) as usize);
    for i in 0..s.qps.len() {
        let base = if verb == Verb::Write { s.target(i) } else { s.local(i) };
        for &k in &offs[..used] {
            let what = format!("{} bw, QP {i}, {size}-byte message at offset {k}", verb.name());
            // SAFETY: the region lies in the buffer and the run is over.
            unsafe { payload::verify(s.ptr(base + k), size, 0, k, &what) }?;
        }
    }
    Ok(())
}

/// One side of a bidirectional (`-b`) bandwidth run for one size: this side
/// streams as a client does and, for SEND, receives the peer's stream at the
/// same time on a second thread. Returns what this side sent.
pub fn bw_bidir(s: &Session, o: &Opts, size: usize) -> Res<Outcome> {
    if o.verb != Verb::Send {
        return bw_client(s, o, size);
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let rx = scope.spawn(|| send_bw_receiver(s, o, size, Some(&stop)));
        let tx = bw_client(s, o, size);
        if tx.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let rx = rx.join().unwrap_or_else(|_| Err("the receiving thread panicked".into()));
        let tx = tx?;
        let rx = rx.map_err(|e| format!("receiving: {e}"))?;
        // Both counts are of every thread's measured loops over overlapping
        // windows: the larger covers both.
        Ok(Outcome { allocs: tx.allocs.max(rx.allocs), ..tx })
    })
}

/// How long a SEND bandwidth receiver waits for the next message before it
/// gives up (perftest's server checks every 60 s that messages still come):
/// UC and UD drop what finds no receive, and a lost message must end the
/// run rather than leave it waiting. `RRDDMMA_PERF_STALL_SECS` overrides it.
fn stall_limit() -> Duration {
    let secs = std::env::var("RRDDMMA_PERF_STALL_SECS").ok().and_then(|v| v.parse::<u64>().ok());
    Duration::from_secs(secs.unwrap_or(60).max(1))
}

/// The receiving side of a SEND bandwidth test for one size: receives and
/// re-posts `-n` messages per QP (as perftest's server counts them), or with
/// `-D` until the sender's next exchange message arrives. `stop`, when given,
/// ends the wait early (set by a bidirectional run whose sending half failed).
/// With `-n`, no message for [`stall_limit`] is an error.
pub fn send_bw_receiver(s: &Session, o: &Opts, size: usize, stop: Option<&AtomicBool>) -> Res<Outcome> {
    let stall = stall_limit();
    let mut wcs = [Wc::default(); POLL_BATCH];
    let want = if o.duration.is_some() { u64::MAX } else { o.iters * s.qps.len() as u64 };
    let mut got = 0u64;
    let mut idle = 0u32;
    let mut first = None;
    let mut last = Instant::now();
    // -e: sleep on the channel once a poll comes back empty (perftest's
    // server drains the CQ after each event); a bidirectional run wakes every
    // 100 ms to see whether its sending half failed, a run of -n iterations
    // when the stall limit is up (perftest's server: its 60 s alarm).
    let wake = |last: Instant| match stop {
        Some(_) => Some(Duration::from_millis(100)),
        None if want != u64::MAX => Some(stall.saturating_sub(last.elapsed()).max(Duration::from_millis(1))),
        None => None,
    };
    let mut drained = true;
    let before = alloc::in_loop_allocations();
    alloc::measuring(true);
    let result = (|| -> Res<()> {
        while got < want {
            let n = if o.events && drained {
                event_poll(&s.recv_cq, &mut wcs, wake(last))?
            } else {
                s.recv_cq.poll(&mut wcs).map_err(err("ibv_poll_cq"))?
            };
            drained = n == 0;
            for wc in &wcs[..n] {
                check(wc)?;
                s.post_recv(wc.wr_id() as usize)?;
            }
            if n == 0 {
                idle = idle.wrapping_add(1);
                if o.events || idle % 1024 == 0 {
                    if stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
                        return Err("the sending half of the run failed".into());
                    }
                    if want == u64::MAX && s.oob.peer_spoke() {
                        break;
                    }
                    if want != u64::MAX && last.elapsed() >= stall {
                        return Err(stalled(got, want, stall, o.conn));
                    }
                }
                continue;
            }
            idle = 0;
            last = Instant::now();
            first.get_or_insert(last);
            got += n as u64;
        }
        Ok(())
    })();
    alloc::measuring(false);
    result?;
    let secs = first.map_or(1e-9, |f| (last - f).as_secs_f64().max(1e-9));
    Ok(Outcome {
        size,
        iters: got / s.qps.len() as u64,
        bytes_per_sec: (got * size as u64) as f64 / secs,
        ops_per_sec: got as f64 / secs,
        allocs: alloc::in_loop_allocations() - before,
        ..Outcome::default()
    })
}

#[cold]
fn stalled(got: u64, want: u64, stall: Duration, conn: Conn) -> String {
    format!(
        "no message for {} s: received {got} of {want} ({}; do both sides run the same -n? \
         RRDDMMA_PERF_STALL_SECS=N waits longer)",
        stall.as_secs(),
        stall_cause(conn)
    )
}

/// Why a run that expects a message can wait in vain.
fn stall_cause(conn: Conn) -> &'static str {
    if conn == Conn::Rc {
        "the peer stopped"
    } else {
        "the peer stopped, or a message was lost: UC and UD do not retransmit, and drop what arrives without a \
         posted receive"
    }
}

/// Busy-wait bookkeeping of a latency test: every 4096 empty polls, whether
/// the wait has lasted [`stall_limit`] (checked from the first such poll).
struct Spin {
    spins: u32,
    since: Option<Instant>,
}

impl Spin {
    fn new() -> Spin {
        Spin { spins: 0, since: None }
    }

    /// One more empty poll; an error once the wait has stalled.
    #[inline]
    fn spun(&mut self, stall: Duration, conn: Conn, what: &str) -> Res<()> {
        self.spins = self.spins.wrapping_add(1);
        if self.spins % 4096 == 0 && self.since.get_or_insert_with(Instant::now).elapsed() >= stall {
            return Err(lat_stalled(stall, conn, what));
        }
        Ok(())
    }
}

#[cold]
fn lat_stalled(stall: Duration, conn: Conn, what: &str) -> String {
    format!(
        "no {what} for {} s ({}; do both sides run the same -n? RRDDMMA_PERF_STALL_SECS=N waits longer)",
        stall.as_secs(),
        stall_cause(conn)
    )
}

/// Sorted latency samples from post timestamps (perftest: intervals between
/// consecutive posts, halved for ping-pong tests).
fn samples(stamps: &[u64], halve: bool) -> Vec<f64> {
    let div = if halve { 2.0 } else { 1.0 };
    stamps.windows(2).map(|w| w[1].wrapping_sub(w[0]) as f64 / div).collect()
}

/// Samples a `-D` latency run keeps (preallocated: the loop must not
/// allocate): the first ones of its sampling phase; the run goes on to its
/// deadline without recording more.
const DURATION_SAMPLES: usize = 1 << 21;

/// The phases of a `-D` latency run, as perftest's alarm moves them
/// (`catch_alarm`): warm-up, sampling, cool-down, end.
const WARM_UP: u8 = 0;
const SAMPLING: u8 = 1;
const COOL_DOWN: u8 = 2;
const ENDED: u8 = 3;

/// The warm-up and the cool-down of a `-D` latency run, in seconds:
/// perftest's default margin, a quarter of the duration in whole seconds
/// (`-D 2`: none; `-D 8`: 2 s each).
fn margin(duration: f64) -> f64 {
    (duration / 4.0).floor()
}

/// Moves `phase` through a `-D` run of `duration` seconds from now: sampling
/// after the margin, cool-down at `duration - margin`, the end at `duration`.
/// Returns early when `stop`'s sender goes (the run ended first).
fn duration_timer(phase: &AtomicU8, duration: f64, stop: &mpsc::Receiver<()>) {
    let m = margin(duration);
    let t0 = Instant::now();
    for (at, next) in [(m, SAMPLING), (duration - m, COOL_DOWN), (duration, ENDED)] {
        let left = (t0 + Duration::from_secs_f64(at)).saturating_duration_since(Instant::now());
        if let Err(mpsc::RecvTimeoutError::Disconnected) = stop.recv_timeout(left) {
            return;
        }
        phase.store(next, Ordering::Release);
    }
}

/// A latency test for one size, on either side. With `-D` both sides of a
/// ping-pong run until their own deadline (perftest's duration mode): a side
/// waiting for a message or a completion that will not come stops there,
/// and a request posted last is not waited for.
pub fn lat(s: &Session, o: &Opts, size: usize) -> Res<Outcome> {
    let timed = o.duration.is_some();
    let n = if timed { DURATION_SAMPLES } else { o.iters as usize };
    let mut stamps = vec![0u64; n];
    // Samples taken (iterations: every post; -D: posts while sampling).
    let mut taken = 0usize;
    let phase = Arc::new(AtomicU8::new(if timed { WARM_UP } else { SAMPLING }));
    let (stop, stopped) = mpsc::channel::<()>();
    let len = size as u32;
    let server = !s.oob.is_client();
    let qp = &s.qps[0];
    let cq = &s.cqs[0];
    let sge = [s.mr.sge(s.local(0), len)];
    let remote = RemoteAddr { addr: s.rem[0].vaddr, rkey: s.rem[0].rkey };
    let inline = size <= o.inline as usize && matches!(o.verb, Verb::Write | Verb::Send);
    let mut wcs = [Wc::default(); 1];
    let before = alloc::in_loop_allocations();
    let poll_byte = s.ptr(s.target(0) + size - 1);
    let post_byte = s.ptr(s.local(0) + size - 1);
    let (send_at, recv_at) = (s.ptr(s.local(0)), s.ptr(s.received(0)).cast_const());
    let checking = o.check_payload;
    let corrupt = checking && payload::corrupt_requested();

    // The one request, built before the loop (perftest's prebuilt WR).
    let wr = match o.verb {
        Verb::Write => SendWr::write(&sge, remote),
        Verb::Send => s.send_wr(0, &sge),
        Verb::Read => SendWr::read(&sge, remote),
        Verb::Atomic if o.cas => SendWr::compare_swap(&sge, remote, 0, 0),
        Verb::Atomic => SendWr::fetch_add(&sge, remote, 1),
    }
    .signaled();
    let mut list = SendList::new(vec![if inline { wr.inline() } else { wr }]);
    let post = |list: &mut SendList<'_>| -> Res<()> {
        // SAFETY: the entry lies in the session's MR; each request is
        // completed before the next is posted (or, at a -D deadline, left
        // in flight until the QP goes).
        unsafe { qp.post_send_list(list) }.map_err(err("ibv_post_send"))
    };
    let ended = || timed && phase.load(Ordering::Relaxed) == ENDED;
    // One completion. With -e (perftest's `run_iter_lat`/`run_iter_lat_send`):
    // sleep on the CQ's channel, re-arm, poll; otherwise busy-poll, and with
    // -D give up at the deadline (`Ok(false)`).
    // Without -D, a busy wait that sees nothing for `stall_limit` fails
    // (a lost UC/UD message, a vanished peer) instead of spinning forever.
    let events = o.events;
    let (stall, conn) = (stall_limit(), o.conn);
    let wait = |cq: &Cq, wcs: &mut [Wc; 1]| -> Res<bool> {
        let mut spin = Spin::new();
        loop {
            let got = if events { event_poll(cq, wcs, None)? } else { cq.poll(wcs).map_err(err("ibv_poll_cq"))? };
            if got > 0 {
                check(&wcs[0])?;
                return Ok(true);
            }
            if ended() {
                return Ok(false);
            }
            if !timed {
                spin.spun(stall, conn, "completion")?;
            }
        }
    };

    let clock = s.clock;
    let t0 = Instant::now();
    let c0 = clock.ticks(t0);
    // -D: a timer thread moves the phase, as perftest's alarm does.
    let timer = o.duration.map(|d| {
        let phase = Arc::clone(&phase);
        std::thread::spawn(move || duration_timer(&phase, d, &stopped))
    });
    // A post's time stamp, when it is a sample.
    let mut stamp = |taken: &mut usize| {
        if !timed || phase.load(Ordering::Relaxed) == SAMPLING {
            if let Some(st) = stamps.get_mut(*taken) {
                *st = clock.ticks(t0);
                *taken += 1;
            }
        }
    };
    alloc::measuring(true);
    let result = (|| -> Res<()> {
        match o.verb {
            Verb::Write => {
                let (mut sc, mut rc, mut cc) = (0usize, 0usize, 0usize);
                'run: while if timed { !ended() } else { sc < n || cc < n || rc < n } {
                    if (timed || rc < n) && !(sc == 0 && server) {
                        rc += 1;
                        let mut spin = Spin::new();
                        // SAFETY: the byte lies in the registered buffer; the
                        // peer's RDMA WRITE changes it, hence volatile.
                        while unsafe { poll_byte.read_volatile() } != rc as u8 {
                            if ended() {
                                break 'run;
                            }
                            if !timed {
                                spin.spun(stall, conn, "RDMA WRITE from the peer")?;
                            }
                        }
                        if checking {
                            // SAFETY: the message lies in the buffer; the peer
                            // writes again only after this side's next post.
                            unsafe { payload::verify(recv_at, size - 1, rc as u64, 0, "write lat") }?;
                        }
                    }
                    if timed || sc < n {
                        stamp(&mut taken);
                        sc += 1;
                        if checking {
                            // SAFETY: nothing is in flight from this region.
                            unsafe { payload::fill(send_at, size - 1, sc as u64, 0) };
                            if corrupt && sc == 3 {
                                // SAFETY: as above.
                                unsafe { payload::flip(send_at) };
                            }
                        }
                        // SAFETY: as above; the device reads it at post time
                        // or later, and nothing is in flight here.
                        unsafe { post_byte.write_volatile(sc as u8) };
                        post(&mut list)?;
                    }
                    if timed || cc < n {
                        if !wait(cq, &mut wcs)? {
                            break;
                        }
                        cc += 1;
                    }
                }
            }
            Verb::Send => {
                let (mut sc, mut rc) = (0usize, 0usize);
                while if timed { !ended() } else { sc < n || rc < n } {
                    if (timed || rc < n) && (server || sc != 0) {
                        if !wait(&s.recv_cq, &mut wcs)? {
                            break;
                        }
                        rc += 1;
                        if checking {
                            // SAFETY: the message arrived (completion seen) and
                            // its receive is not re-posted yet.
                            unsafe { payload::verify(recv_at, size, rc as u64, 0, "send lat") }?;
                        }
                        s.post_recv(0)?;
                    }
                    if timed || sc < n {
                        stamp(&mut taken);
                        sc += 1;
                        if checking {
                            // SAFETY: the previous send has completed.
                            unsafe { payload::fill(send_at, size, sc as u64, 0) };
                            if corrupt && sc == 3 {
                                // SAFETY: as above.
                                unsafe { payload::flip(send_at) };
                            }
                        }
                        post(&mut list)?;
                        if !wait(cq, &mut wcs)? {
                            break;
                        }
                    }
                }
            }
            Verb::Read | Verb::Atomic => {
                let mut i = 0usize;
                while if timed { !ended() } else { i < n } {
                    if o.cas {
                        list.set(0, SendWr::compare_swap(&sge, remote, 0, i as u64).signaled());
                    }
                    stamp(&mut taken);
                    post(&mut list)?;
                    if !wait(cq, &mut wcs)? {
                        break;
                    }
                    if checking && o.verb == Verb::Read {
                        // SAFETY: the READ has completed into this region.
                        unsafe { payload::verify(send_at, size, 0, 0, "read lat") }?;
                    } else if checking {
                        // SAFETY: the fetch-and-add has completed; its old
                        // value (8 bytes) is in this region.
                        let old = unsafe { send_at.cast::<u64>().read_volatile() };
                        if old != i as u64 {
                            return Err(format!(
                                "payload check failed: atomic lat, iteration {i}: fetch-and-add returned {old}, \
                                 expected {i} (each iteration adds 1 to a counter that starts at 0)"
                            ));
                        }
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    })();
    let (t1, c1) = (Instant::now(), clock.ticks(t0));
    alloc::measuring(false);
    // The timer thread, if any, ends with the channel.
    drop(stop);
    if let Some(t) = timer {
        let _ = t.join();
    }
    result?;
    // TSC ticks to nanoseconds, calibrated over the run itself.
    let ns_per_tick = match clock {
        Clock::Tsc => (t1 - t0).as_nanos() as f64 / c1.wrapping_sub(c0).max(1) as f64,
        Clock::Monotonic => 1.0,
    };
    let halve = matches!(o.verb, Verb::Write | Verb::Send);
    let mut lat_ns = samples(&stamps[..taken], halve);
    lat_ns.iter_mut().for_each(|v| *v *= ns_per_tick);
    let unsorted_ns = if o.unsorted { lat_ns.clone() } else { Vec::new() };
    lat_ns.sort_unstable_by(f64::total_cmp);
    Ok(Outcome {
        size,
        iters: taken as u64,
        lat_ns,
        unsorted_ns,
        allocs: alloc::in_loop_allocations() - before,
        ..Outcome::default()
    })
}

/// The bandwidth report this side sends at the end.
pub fn report_of(o: &Opts, r: &Outcome) -> BwReport {
    let unit = if o.gbits { 1.25e8 } else { 1048576.0 };
    BwReport {
        size: r.size as u64,
        iters: r.iters,
        bw_peak: r.bytes_per_sec / unit,
        bw_avg: r.bytes_per_sec / unit,
        msg_rate: r.ops_per_sec / 1e6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_cycling_follows_perftest() {
        assert_eq!(offsets(2, 4096, 64).len(), 64);
        assert_eq!(offsets(100, 4096, 64)[1], 128);
        assert_eq!(offsets(4096, 4096, 64), vec![0]);
        assert_eq!(inc(65536, 64), 65536);
    }

    /// Runs `duration_timer` for `secs` on a thread; `early`: the run ends
    /// at once (the channel goes). Returns the last phase and the time taken.
    fn timer_run(secs: f64, early: bool) -> (u8, Duration) {
        let phase = AtomicU8::new(WARM_UP);
        let (stop, stopped) = mpsc::channel::<()>();
        let mut stop = Some(stop);
        let t = Instant::now();
        std::thread::scope(|s| {
            let phase = &phase;
            s.spawn(move || duration_timer(phase, secs, &stopped));
            if early {
                stop.take();
            }
        });
        drop(stop);
        (phase.load(Ordering::Acquire), t.elapsed())
    }

    #[test]
    fn duration_phases_follow_perftest() {
        assert_eq!((margin(2.0), margin(5.0), margin(8.0)), (0.0, 1.0, 2.0));
        // Without a margin: sampling at once, then the end at the deadline.
        let (last, took) = timer_run(0.05, false);
        assert_eq!(last, ENDED);
        assert!(took >= Duration::from_millis(50));
        // A run that ends first stops the timer: no waiting for the deadline.
        let (last, took) = timer_run(60.0, true);
        assert!(last != ENDED && took < Duration::from_secs(10));
    }

    #[test]
    fn duration_margins_bound_the_sampling_phase() {
        // -D 4: a 1 s warm-up, sampling from 1 s to 3 s, a 1 s cool-down.
        let phase = AtomicU8::new(WARM_UP);
        let (_keep, stopped) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let phase = &phase;
            s.spawn(move || duration_timer(phase, 4.0, &stopped));
            let t0 = Instant::now();
            let at = |secs: f64| {
                std::thread::sleep((t0 + Duration::from_secs_f64(secs)).saturating_duration_since(Instant::now()));
                phase.load(Ordering::Acquire)
            };
            assert_eq!(at(0.5), WARM_UP, "warm-up until 1 s");
            assert_eq!(at(2.0), SAMPLING, "sampling from 1 s to 3 s");
            assert_eq!(at(3.5), COOL_DOWN, "cool-down from 3 s to 4 s");
            assert_eq!(at(4.5), ENDED, "the end at 4 s");
        });
    }

    #[test]
    fn latency_samples_are_intervals() {
        assert_eq!(samples(&[0, 10, 30, 33], true), vec![5.0, 10.0, 1.5]);
        assert_eq!(samples(&[0, 10, 30], false), vec![10.0, 20.0]);
    }
}
