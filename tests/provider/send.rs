//! Send side: request lists posted through libmlx5's `mlx5_post_send` (the C
//! half) and through rrddmma's WQE writer (`SqRing`), compared WQE by WQE.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rrddmma::mlx5dv::av::AddressVector;
use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::mmio::{Op, Recorder};
use rrddmma::mlx5dv::seg::{CtrlFlags, WqeOpcode};
use rrddmma::mlx5dv::sq::{SqRing, SqTransport};

use super::build::{fill, unhex, Aligned};
use super::{Mismatch, Mutation};

/// `enum ibv_wr_opcode` values the C half posts.
pub(super) const WRITE: u32 = 0;
pub(super) const WRITE_IMM: u32 = 1;
pub(super) const SEND: u32 = 2;
pub(super) const SEND_IMM: u32 = 3;
pub(super) const READ: u32 = 4;
pub(super) const CAS: u32 = 5;
pub(super) const FAA: u32 = 6;
pub(super) const SEND_INV: u32 = 9;
/// `enum ibv_send_flags`.
pub(super) const F_FENCE: u32 = 1;
pub(super) const F_SIGNALED: u32 = 2;
pub(super) const F_SOLICITED: u32 = 4;
pub(super) const F_INLINE: u32 = 8;

pub(super) fn op_name(op: u32) -> &'static str {
    match op {
        WRITE => "WRITE",
        WRITE_IMM => "WRITE_WITH_IMM",
        READ => "READ",
        SEND => "SEND",
        SEND_IMM => "SEND_WITH_IMM",
        SEND_INV => "SEND_WITH_INV",
        CAS => "CAS",
        FAA => "FAA",
        _ => panic!("the harness posted opcode {op}, which this side does not know"),
    }
}

fn ud_name(op: u32) -> &'static str {
    match op {
        SEND => "UD SEND",
        SEND_IMM => "UD SEND_WITH_IMM",
        _ => panic!("the harness posted UD opcode {op}"),
    }
}

fn dc_name(op: u32) -> &'static str {
    match op {
        WRITE => "DC WRITE",
        WRITE_IMM => "DC WRITE_WITH_IMM",
        READ => "DC READ",
        SEND => "DC SEND",
        SEND_IMM => "DC SEND_WITH_IMM",
        SEND_INV => "DC SEND_WITH_INV",
        CAS => "DC CAS",
        FAA => "DC FAA",
        _ => panic!("the harness posted DC opcode {op}"),
    }
}

/// One request of a list, as the C half printed it.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) op: u32,
    pub(super) flags: u32,
    pub(super) imm: u32,
    pub(super) raddr: u64,
    pub(super) rkey: u32,
    pub(super) swap: u64,
    pub(super) compare_add: u64,
    pub(super) sges: Vec<(u32, u32, u64)>,
    pub(super) inline: Vec<u8>,
    /// UD: remote QPN, Q_Key and the AH's 48-byte address vector.
    pub(super) ud: Option<(u32, u32, Vec<u8>)>,
    /// DC: DCT number, DC access key, DCI stream and the AH's address vector.
    pub(super) dc: Option<(u32, u64, u16, Vec<u8>)>,
}

impl Request {
    pub(super) fn parse(f: &[&str]) -> Request {
        let n: usize = f[7].parse().unwrap();
        let sges = (0..n)
            .map(|i| (f[8 + 3 * i].parse().unwrap(), f[9 + 3 * i].parse().unwrap(), f[10 + 3 * i].parse().unwrap()))
            .collect();
        Request {
            op: f[0].parse().unwrap(),
            flags: f[1].parse().unwrap(),
            imm: f[2].parse().unwrap(),
            raddr: f[3].parse().unwrap(),
            rkey: f[4].parse().unwrap(),
            swap: f[5].parse().unwrap(),
            compare_add: f[6].parse().unwrap(),
            sges,
            inline: unhex(f[8 + 3 * n]),
            ud: None,
            dc: None,
        }
    }

    /// Whether the WQE has an inline segment (inline bytes to send).
    pub(super) fn is_inline(&self) -> bool {
        self.flags & F_INLINE != 0 && !self.inline.is_empty()
    }
}

/// The fields of a WQE (byte ranges from its start) and whether each is
/// compared. Derived from the request alone, from the segment layouts of
/// `mlx5dv.h`, independently of both writers. `wr_path`: one side posts
/// through libmlx5's `ibv_wr_*` builders.
pub(super) fn layout(r: &Request, wr_path: bool) -> Vec<(String, usize, usize, bool)> {
    let mut v: Vec<(String, usize, usize, bool)> = Vec::new();
    let mut f = |name: &str, len: usize, compared: bool| {
        let at = v.last().map_or(0, |l| l.2);
        v.push((name.to_string(), at, at + len, compared));
    };
    f("ctrl.opmod_idx_opcode", 4, true);
    f("ctrl.qpn_ds", 4, true);
    f("ctrl.signature", 1, true);
    f("ctrl.dci_stream_channel_id", 2, true);
    f("ctrl.fm_ce_se", 1, true);
    // MASK (one side posted through libmlx5's ibv_wr_* entries: DC, and
    // rrddmma's WrBatch / DciBatch): the builders of opcodes without
    // immediate data (`_common_wqe_init_op`) leave ctrl.imm as the ring held
    // it; `mlx5_post_send` and rrddmma's writer write 0. The device reads it
    // only for the immediate and invalidate opcodes.
    let has_imm = matches!(r.op, WRITE_IMM | SEND_IMM | SEND_INV);
    f("ctrl.imm", 4, !wr_path || has_imm);
    if r.ud.is_some() || r.dc.is_some() {
        for (name, len) in [
            ("key", 8),
            ("dqp_dct", 4),
            ("stat_rate_sl", 1),
            ("fl_mlid", 1),
            ("rlid", 2),
            ("reserved0", 4),
            ("rmac", 6),
            ("tclass", 1),
            ("hop_limit", 1),
            ("grh_gid_fl", 4),
            ("rgid", 16),
        ] {
            f(&format!("datagram.{name}"), len, true);
        }
    }
    match r.op {
        WRITE | WRITE_IMM | READ | CAS | FAA => {
            f("raddr.raddr", 8, true);
            f("raddr.rkey", 4, true);
            f("raddr.reserved", 4, true);
        }
        _ => {}
    }
    if r.op == CAS || r.op == FAA {
        f("atomic.swap_add", 8, true);
        // MASK: for FETCH_AND_ADD libmlx5 (`_set_atomic_seg`) writes only
        // swap_add and leaves `compare` as the ring held it; the device
        // ignores it for FA. rrddmma writes it.
        f("atomic.compare", 8, r.op == CAS);
    }
    if r.is_inline() {
        let len = r.inline.len();
        f("inline.byte_count", 4, true);
        f("inline.data", len, true);
        // MASK: libmlx5 (`set_data_inl_seg`) does not pad inline data: the
        // bytes up to the next 16-byte boundary keep what the ring held; the
        // device reads byte_count bytes only. rrddmma writes zeros.
        let pad = (4 + len).next_multiple_of(16) - (4 + len);
        f("inline.padding", pad, false);
    } else {
        let mut i = 0;
        for &(len, _, _) in &r.sges {
            if len == 0 {
                continue;
            }
            f(&format!("data[{i}].byte_count"), 4, true);
            f(&format!("data[{i}].lkey"), 4, true);
            f(&format!("data[{i}].addr"), 8, true);
            i += 1;
        }
    }
    v
}

fn field_at(lay: &[(String, usize, usize, bool)], byte: usize) -> (String, bool) {
    for (name, a, b, c) in lay {
        if (*a..*b).contains(&byte) {
            return (name.clone(), *c);
        }
    }
    // MASK: bytes past the WQE's last DS up to its basic block's end are
    // written by neither side (both copy them in the BlueFlame write as the
    // ring holds them); not part of the WQE.
    ("(past the WQE's DS count)".into(), false)
}

/// The first compared byte that differs, named by field.
pub(super) fn first_diff(
    lay: &[(String, usize, usize, bool)],
    theirs: &[u8],
    ours: &[u8],
) -> Option<(String, usize, u8, u8)> {
    for i in 0..theirs.len().max(ours.len()) {
        let (t, o) = (theirs.get(i).copied(), ours.get(i).copied());
        if t == o {
            continue;
        }
        let (field, compared) = field_at(lay, i);
        if compared || t.is_none() || o.is_none() {
            return Some((field, i, t.unwrap_or(0), o.unwrap_or(0)));
        }
    }
    None
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct SendStats {
    pub queues: usize,
    pub lists: usize,
    pub wqes: BTreeMap<&'static str, usize>,
    pub inline_wqes: usize,
    pub wrapped_lists: usize,
    pub blueflame: usize,
    pub doorbells: usize,
    pub masked_bytes: usize,
    /// Lists whose producer index passed a multiple of 65536 (the 16-bit WQE index wraps).
    pub index_wraps: usize,
    /// Views made from `mlx5dv_init_obj` mid-queue, posted through after.
    pub views: usize,
}

impl SendStats {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} request lists on {} queues, {} WQEs (",
            self.lists,
            self.queues,
            self.wqes.values().sum::<usize>()
        );
        for (i, (k, n)) in self.wqes.iter().enumerate() {
            let _ = write!(s, "{}{k} {n}", if i > 0 { ", " } else { "" });
        }
        let _ = write!(
            s,
            "); {} inline, {} lists across the ring's end, {} across the 16-bit WQE index, {} BlueFlame copies, \
             {} 8-byte doorbells, {} bytes masked; {} views from mlx5dv_init_obj posted through",
            self.inline_wqes,
            self.wrapped_lists,
            self.index_wraps,
            self.blueflame,
            self.doorbells,
            self.masked_bytes,
            self.views
        );
        s
    }
}

/// One send queue on the rrddmma side: a ring of the same size and initial
/// contents as the provider's, its doorbell record and a BlueFlame stand-in.
struct Queue {
    sq: SqRing,
    /// The CQ the ring retires from: completions are produced and polled there.
    cq: crate::mlx5_support::SoftCq,
    ring: Aligned,
    dbrec: Aligned,
    _bf: Aligned,
    wqe_cnt: u32,
    sig_all: bool,
    /// `rc` or `ud`.
    transport: &'static str,
    /// Whether the provider's register is doorbell-only (`uuarn` 0).
    db_only: bool,
    prefer_bf: bool,
    /// The ring was just remade from the view: the BlueFlame half of its
    /// first doorbell sets `bf_phase` (below).
    fresh_view: bool,
    /// XOR between libmlx5's BlueFlame offset and ours (0, or the register's
    /// half after a view).
    bf_phase: usize,
}

impl Queue {
    fn new(f: &[&str]) -> Queue {
        let qpn: u32 = f[0].parse().unwrap();
        let wqe_cnt: u32 = f[1].parse().unwrap();
        let bf_size: u32 = f[4].parse().unwrap();
        let uuarn: u32 = f[5].parse().unwrap();
        let prefer_bf = f[6] == "1";
        let sig_all = f[7] == "1";
        let seed: u64 = f[8].parse().unwrap();
        let OurRing { mut sq, ring, dbrec, bf } = OurRing::new(qpn, wqe_cnt, bf_size, uuarn, seed);
        sq.set_prefer_bf(prefer_bf);
        let cq = crate::mlx5_support::SoftCq::new(16);
        sq.bind_cq(&cq.ring);
        let transport = transport(f);
        // SAFETY: the family of the C half's queue.
        unsafe { sq.set_transport(family(transport)) };
        if transport == "DC streams" {
            sq.set_dci_streams(crate::build::LOG_DCI_STREAMS);
        }
        Queue {
            sq,
            cq,
            ring,
            dbrec,
            _bf: bf,
            wqe_cnt,
            sig_all,
            transport,
            db_only: uuarn == 0,
            prefer_bf,
            fresh_view: false,
            bf_phase: 0,
        }
    }

    /// The WQE of `bbs` basic blocks at free-running block `start`.
    fn wqe_bytes(&self, start: u32, bbs: usize) -> Vec<u8> {
        let ring = self.ring.bytes();
        (0..bbs)
            .flat_map(|b| {
                let slot = (start as usize + b) & (self.wqe_cnt as usize - 1);
                ring[slot * 64..slot * 64 + 64].iter().copied()
            })
            .collect()
    }
}

/// A ring of ours beside a provider queue: the same size and initial
/// contents (`fill(seed)`), its doorbell records and a BlueFlame stand-in
/// (MMIO goes to a `Recorder`, never to `bf`). The buffers must outlive
/// `sq`: keep them beside it.
pub(super) struct OurRing {
    pub(super) sq: SqRing,
    pub(super) ring: Aligned,
    pub(super) dbrec: Aligned,
    pub(super) bf: Aligned,
}

impl OurRing {
    pub(super) fn new(qpn: u32, wqe_cnt: u32, bf_size: u32, uuarn: u32, seed: u64) -> OurRing {
        let mut ring = Aligned::new(wqe_cnt as usize * 64);
        fill(ring.bytes_mut(), seed);
        // libmlx5's records: [0] receive, [1] send (`MLX5_SND_DBR`).
        let mut dbrec = Aligned::new(64);
        let mut bf = Aligned::new(4096);
        // libmlx5 copies into BlueFlame only with a BlueFlame register (uuarn != 0).
        let ours_bf = if uuarn != 0 { bf_size } else { 0 };
        // SAFETY: the buffers are aligned, sized as `from_raw` asks, and are
        // kept beside the ring by every caller (the contract above).
        let sq = unsafe {
            SqRing::from_raw(
                ring.as_mut_ptr(),
                wqe_cnt,
                dbrec.as_mut_ptr().add(4).cast::<Be32>(),
                bf.as_mut_ptr(),
                ours_bf,
                qpn,
            )
        };
        OurRing { sq, ring, dbrec, bf }
    }
}

/// Writes one request with rrddmma's writer, as a direct-verbs user maps a
/// verbs request onto segments (the provider's mapping: zero-length SGEs
/// are left out, as `mlx5_post_send` and the `ibv_wr_*` setters leave them
/// out; atomics carry one 8-byte local target).
fn write_request(q: &mut Queue, r: &Request, mutate: Mutate, post: Option<&mut Recorder>) -> u16 {
    let mutate_flags = mutate == Mutate::Flags;
    let mut flags = CtrlFlags::empty();
    if r.flags & F_SIGNALED != 0 || q.sig_all {
        flags = flags.union(CtrlFlags::CQ_UPDATE);
    }
    if r.flags & F_SOLICITED != 0 {
        flags = flags.union(CtrlFlags::SOLICITED);
    }
    if r.flags & F_FENCE != 0 {
        flags = flags.union(CtrlFlags::FENCE);
    }
    if mutate_flags {
        // The mutation check: one flag flipped in what our writer is given.
        flags = if flags.contains(CtrlFlags::SOLICITED) {
            flags.difference(CtrlFlags::SOLICITED)
        } else {
            flags.union(CtrlFlags::SOLICITED)
        };
    }
    if let Mutate::Typed(flip) = mutate {
        let streams = q.transport == "DC streams";
        return super::dc_typed::write_typed(&mut q.sq, r, flags, streams, flip, post);
    }
    let (opcode, imm) = match r.op {
        WRITE => (WqeOpcode::RDMA_WRITE, 0),
        WRITE_IMM => (WqeOpcode::RDMA_WRITE_IMM, r.imm),
        READ => (WqeOpcode::RDMA_READ, 0),
        SEND => (WqeOpcode::SEND, 0),
        SEND_IMM => (WqeOpcode::SEND_IMM, r.imm),
        // The invalidated rkey, big-endian like an immediate.
        SEND_INV => (WqeOpcode::SEND_INVAL, r.imm.to_be()),
        CAS => (WqeOpcode::ATOMIC_CS, 0),
        FAA => (WqeOpcode::ATOMIC_FA, 0),
        op => panic!("unknown opcode {op}"),
    };
    // SAFETY: the segments below follow each opcode's layout (remote
    // address for RDMA, atomic arguments for atomics, the datagram segment
    // for UD, then data or inline), and the ring is ordinary memory that no
    // device reads: the bytes are only compared with libmlx5's.
    let mut w = unsafe { q.sq.wqe(opcode, 0, flags, imm) };
    if let Some((qpn, qkey, av)) = &r.ud {
        // The AH's address vector through the library's accessor (a device
        // AH goes through `AddressVector::of`; here the provider's bytes).
        let av = AddressVector::from_bytes(av[..48].try_into().unwrap());
        w = w.datagram(&av.ud(*qpn, *qkey));
    }
    if let Some((dctn, key, stream, av)) = &r.dc {
        // The DC address as `mlx5dv_wr_set_dc_addr(_stream)` stores it.
        let av = AddressVector::from_bytes(av[..48].try_into().unwrap());
        w = w.datagram(&av.dc(*dctn, *key));
        if q.transport == "DC streams" {
            w = w.dci_stream(*stream);
        }
    }
    match r.op {
        WRITE | WRITE_IMM | READ => w = w.raddr(r.raddr, r.rkey),
        CAS => w = w.raddr(r.raddr, r.rkey).atomic(r.swap, r.compare_add),
        FAA => w = w.raddr(r.raddr, r.rkey).atomic(r.compare_add, 0),
        _ => {}
    }
    if r.flags & F_INLINE != 0 && !r.sges.is_empty() {
        // Zero inline bytes (zero-length entries only) write no segment.
        w = w.inline(&r.inline);
    } else {
        for &(len, lkey, addr) in &r.sges {
            // Zero-length entries go in too: the writer leaves them out.
            // `mlx5_post_send` writes 8 for an atomic's target whatever the
            // SGE says; the generator's atomic SGEs are 8 bytes long.
            let len = if r.op == CAS || r.op == FAA { 8 } else { len };
            // SAFETY: the ring is never handed to a device: the segment's
            // address is only compared, never dereferenced.
            w = unsafe { w.data(len, lkey, addr) };
        }
    }
    match post {
        Some(rec) => w.post(rec),
        None => w.finish(),
    }
}

/// How one request is written: the raw writer (with SOLICITED flipped for
/// the mutation check) or the typed builders (with the stream XORed by the
/// given value: 0, or 1 for the mutation check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutate {
    None,
    Flags,
    Typed(u16),
}

/// A step of the C half's send output.
pub(super) enum Event<'a> {
    /// A Q line's fields: a new queue.
    Queue(Vec<&'a str>),
    /// An I line's fields: a view of the current queue.
    View(Vec<&'a str>),
    /// A posted list: its requests (with their UD / DC addresses), the P
    /// line's and the W line's fields.
    List(Vec<Request>, Vec<&'a str>, Vec<&'a str>),
}

/// The send lines of `out` as events, in order.
pub(super) fn events(out: &str) -> impl Iterator<Item = Event<'_>> {
    let mut reqs: Vec<Request> = Vec::new();
    let mut ud: Option<(u32, u32, Vec<u8>)> = None;
    let mut dc: Option<(u32, u64, u16, Vec<u8>)> = None;
    let mut posted: Option<Vec<&str>> = None;
    out.lines().filter_map(move |line| {
        let mut it = line.split(' ');
        let tag = it.next().unwrap_or("");
        let f: Vec<&str> = it.collect();
        match tag {
            "Q" => return Some(Event::Queue(f)),
            "I" => return Some(Event::View(f)),
            "U" => ud = Some((f[0].parse().unwrap(), f[1].parse().unwrap(), unhex(f[2]))),
            "D" => dc = Some((f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap(), unhex(f[3]))),
            "R" => {
                let mut r = Request::parse(&f);
                r.ud = ud.take();
                r.dc = dc.take();
                reqs.push(r);
            }
            "P" => posted = Some(f),
            "W" => {
                let p = posted.take().expect("a W line without its P line");
                return Some(Event::List(std::mem::take(&mut reqs), p, f));
            }
            _ => {}
        }
        None
    })
}

/// The WQE layout family of a transport: a UD QP's ring is `Datagram`, a
/// DCI's `DcInitiator` (the datagram segment, then the opcode's segments).
fn family(transport: &str) -> SqTransport {
    match transport {
        "RC" => SqTransport::Connected,
        "UD" => SqTransport::Datagram,
        _ => SqTransport::DcInitiator,
    }
}

/// The transport a Q line names: `RC`, `UD`, `DC` or `DC streams`.
pub(super) fn transport(q: &[&str]) -> &'static str {
    match q[9] {
        "ud" => "UD",
        "dc" => "DC",
        "dcs" => "DC streams",
        _ => "RC",
    }
}

/// Replays the C half's send lines of the queues whose transport is in
/// `only` (`RC`, `UD`, `DC`, `DC streams`) through rrddmma's writer; the
/// first mismatch ends the check.
pub fn check(out: &str, only: &[&str], mutation: Mutation) -> Result<SendStats, Box<Mismatch>> {
    check_with(out, only, mutation, false)
}

/// [`check`] with the typed builders (`typed`: `SqRing::dc(&target)` on
/// DCIs, the connected builders on RC) in place of the raw writer.
/// `Mutation::TypedStream` XORs 1 into the first request's stream.
pub fn check_with(out: &str, only: &[&str], mutation: Mutation, typed: bool) -> Result<SendStats, Box<Mismatch>> {
    let mut stats = SendStats::default();
    let mut q: Option<Queue> = None;
    for event in events(out) {
        match event {
            Event::Queue(f) => {
                // A queue of another transport: its lists are skipped.
                q = only.contains(&transport(&f)).then(|| Queue::new(&f));
                stats.queues += usize::from(q.is_some());
            }
            Event::View(f) => {
                if let Some(q) = q.as_mut() {
                    view(q, &f, stats.lists)?;
                    stats.views += 1;
                }
            }
            Event::List(reqs, p, w) => {
                if let Some(q) = q.as_mut() {
                    let list = stats.lists;
                    check_list(q, &reqs, &p, &w, list, mutation, typed, &mut stats)?;
                    stats.lists += 1;
                }
            }
        }
    }
    Ok(stats)
}

#[allow(clippy::too_many_arguments)]
fn check_list(
    q: &mut Queue,
    reqs: &[Request],
    p: &[&str],
    w: &[&str],
    list: usize,
    mutation: Mutation,
    typed: bool,
    stats: &mut SendStats,
) -> Result<(), Box<Mismatch>> {
    let rc: i32 = p[0].parse().unwrap();
    assert_eq!(rc, 0, "libmlx5 refused list {list} ({reqs:?}): the generator must post valid lists");
    let their_pi: u32 = p[1].parse().unwrap();
    let their_dbrec: u32 = p[2].parse().unwrap();
    let their_off_after: u32 = p[4].parse().unwrap();
    let their_db_off: usize = p[5].parse().unwrap();
    let their_db = unhex(p[7]);
    let first: u32 = q.sq.cur_post();
    let their_blocks = unhex(w[2]);
    let transport = q.transport;
    let how = if typed { "typed " } else { "" };
    let kind = |r: &Request| format!("{how}{transport} send {}", op_name(r.op));
    let at = |i: usize| format!("list {list} request {i}");

    // Post through rrddmma: alternate `finish` + `ring` and `post` (the last WQE).
    let mut rec = Recorder::default();
    let by_post = list % 2 == 1;
    let mut starts = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        starts.push(q.sq.cur_post());
        let first = list == 0 && i == 0;
        let mutate = match (typed, mutation) {
            (true, Mutation::TypedStream) if first => Mutate::Typed(1),
            (true, _) => Mutate::Typed(0),
            (false, Mutation::WriterFlag) if first => Mutate::Flags,
            _ => Mutate::None,
        };
        let last = i + 1 == reqs.len();
        write_request(q, r, mutate, if last && by_post { Some(&mut rec) } else { None });
        let name = if r.ud.is_some() {
            ud_name(r.op)
        } else if r.dc.is_some() {
            dc_name(r.op)
        } else {
            op_name(r.op)
        };
        *stats.wqes.entry(name).or_default() += 1;
        stats.inline_wqes += usize::from(r.is_inline());
    }
    if !by_post {
        q.sq.ring(&mut rec);
    }
    let ours_pi = q.sq.cur_post();
    let wqe_cnt = q.wqe_cnt;
    if (first & (wqe_cnt - 1)) + (ours_pi - first) > wqe_cnt {
        stats.wrapped_lists += 1;
    }
    if ours_pi >> 16 != first >> 16 {
        stats.index_wraps += 1;
    }

    // Each WQE, byte for byte (masked fields aside).
    for (i, r) in reqs.iter().enumerate() {
        let lay = layout(r, r.dc.is_some());
        let ds_bytes = lay.last().map_or(0, |l| l.2);
        let bbs = ds_bytes.div_ceil(64);
        let from = (starts[i] - first) as usize * 64;
        let theirs = their_blocks.get(from..from + bbs * 64).unwrap_or(&[]);
        let ours = q.wqe_bytes(starts[i], bbs);
        stats.masked_bytes += lay.iter().filter(|l| !l.3).map(|l| l.2 - l.1).sum::<usize>();
        if let Some((field, byte, t, o)) = first_diff(&lay, theirs, &ours) {
            return Err(Mismatch::at_byte(kind(r), at(i), field, byte, t, o));
        }
    }
    let last = reqs.last().expect("lists hold at least one request");
    let last_kind = kind(last);
    if their_pi != ours_pi {
        return Err(Mismatch::value(
            &last_kind,
            &at(reqs.len() - 1),
            "producer index (sq.cur_post)",
            their_pi,
            ours_pi,
        )
        .into());
    }
    // The doorbell record, in memory and in the recorded sequence.
    // SAFETY: the record is 4 aligned bytes of `dbrec`.
    let ours_dbrec = unsafe { q.dbrec.as_mut_ptr().add(4).cast::<Be32>().read() }.get();
    if their_dbrec != ours_dbrec {
        return Err(Mismatch::value(&last_kind, &at(reqs.len() - 1), "doorbell record", their_dbrec, ours_dbrec).into());
    }
    let (ours_off, ours_db) = doorbell_writes(&rec.ops, their_dbrec).map_err(|(theirs, ours)| Mismatch {
        kind: last_kind.clone(),
        at: at(reqs.len() - 1),
        field: "doorbell sequence".into(),
        byte: None,
        theirs: theirs.into(),
        ours,
    })?;
    // MASK (doorbell-only registers, uuarn 0): libmlx5 alternates the two
    // halves (`offset ^= buf_size`) even without BlueFlame; the view of such
    // a QP gets bf.size 0 from `mlx5dv_init_obj` and rrddmma always stores
    // at the first half. libmlx5 itself rings at both, so each is a doorbell.
    // MASK (after a view is made): `mlx5dv_qp` does not say which BlueFlame
    // half libmlx5 wrote last, so a view starts at the first; the halves
    // only keep consecutive copies apart. From the view's first doorbell
    // on, the offsets must alternate as libmlx5's do, one half apart at most.
    if std::mem::take(&mut q.fresh_view) {
        q.bf_phase = their_db_off ^ ours_off;
    }
    if !q.db_only && their_db_off ^ q.bf_phase != ours_off {
        return Err(Mismatch::value(
            &last_kind,
            &at(reqs.len() - 1),
            "BlueFlame offset written",
            their_db_off,
            ours_off,
        )
        .into());
    }
    if their_db.len() != ours_db.len() {
        let what = |n: usize| if n == 8 { "8-byte doorbell".to_string() } else { format!("{n}-byte BlueFlame copy") };
        return Err(Mismatch {
            kind: last_kind,
            at: at(reqs.len() - 1),
            field: "doorbell kind".into(),
            byte: None,
            theirs: what(their_db.len()),
            ours: what(ours_db.len()),
        }
        .into());
    }
    if their_db.len() == 8 {
        stats.doorbells += 1;
    } else {
        stats.blueflame += 1;
    }
    // The bytes written to the register: the last WQE's first 8 bytes, or
    // the whole (single) WQE; masked as the WQE is.
    let lay = layout(last, last.dc.is_some());
    if let Some((field, byte, t, o)) = first_diff(&lay, &their_db, &ours_db) {
        return Err(Mismatch::at_byte(
            last_kind,
            at(reqs.len() - 1),
            format!("BlueFlame/doorbell write: {field}"),
            byte,
            t,
            o,
        ));
    }
    if !q.db_only && their_off_after ^ q.bf_phase as u32 != q.sq.bf_offset() {
        return Err(Mismatch::value(
            &last_kind,
            &at(reqs.len() - 1),
            "BlueFlame offset after the doorbell",
            their_off_after,
            q.sq.bf_offset(),
        )
        .into());
    }
    // Everything completes: retire up to the list's last WQE (the provider's tail = head).
    let done = q.cq.req(q.sq.qpn(), *starts.last().unwrap() as u16);
    assert!(q.sq.retire(&done), "the list's last WQE retires");
    assert_eq!(q.sq.available(), q.wqe_cnt, "the ring is empty again");
    Ok(())
}

/// Our doorbell, as recorded: barrier, the record (`dbrec`), wc_start,
/// contiguous 8-byte stores, flush. Returns the stores' offset and bytes,
/// or what was expected and what was recorded.
pub(super) fn doorbell_writes(ops: &[Op], dbrec: u32) -> Result<(usize, Vec<u8>), (&'static str, String)> {
    let shape = ops.len() >= 5
        && ops[0] == Op::Barrier
        && ops[1] == Op::DbRec(dbrec)
        && ops[2] == Op::WcStart
        && ops[ops.len() - 1] == Op::Flush;
    if !shape {
        return Err(("barrier, record, wc_start, stores, flush", format!("{ops:?}")));
    }
    let mut bytes = Vec::new();
    let mut first = None;
    for op in &ops[3..ops.len() - 1] {
        let Op::Write64(off, b) = *op else {
            return Err(("8-byte stores only between wc_start and flush", format!("{op:?}")));
        };
        let start = *first.get_or_insert(off);
        assert_eq!(off, start + bytes.len(), "our BlueFlame stores are contiguous");
        bytes.extend_from_slice(&b);
    }
    Ok((first.unwrap_or(0), bytes))
}

/// A pointer `mlx5dv_init_obj` gave, as an offset into one of the queue's
/// regions, mapped into ours: `None` when it points outside (`len` bytes
/// must fit).
fn map(base: *mut u8, size: usize, off: i64, len: usize) -> Option<*mut u8> {
    let off = usize::try_from(off).ok()?;
    (off.checked_add(len)? <= size).then(|| base.wrapping_add(off))
}

/// `mlx5dv_init_obj`'s report on the provider's queue, mapped onto ours,
/// made into a ring by `obj::sq_ring_of` (the view code of `obj::sq_ring`):
/// the ring must start where libmlx5 stands, and the lists after this one
/// are posted through it and compared as before.
fn view(q: &mut Queue, f: &[&str], list: usize) -> Result<(), Box<Mismatch>> {
    let rc: i32 = f[0].parse().unwrap();
    let sq_off: i64 = f[1].parse().unwrap();
    let wqe_cnt: u32 = f[2].parse().unwrap();
    let stride: u32 = f[3].parse().unwrap();
    let db_off: i64 = f[4].parse().unwrap();
    let bf_off: i64 = f[5].parse().unwrap();
    let bf_size: u32 = f[6].parse().unwrap();
    let their_pi: u32 = f[7].parse().unwrap();
    let kind = format!("{} view (mlx5dv_init_obj)", q.transport);
    let at = format!("after list {list}");
    let bad = |field: &str, theirs: String, ours: String| -> Box<Mismatch> {
        Mismatch::value(&kind, &at, field, theirs, ours).into()
    };
    if rc != 0 {
        return Err(bad("mlx5dv_init_obj return", rc.to_string(), "0".into()));
    }
    let ring_len = q.ring.bytes().len();
    let sq_buf = map(q.ring.as_mut_ptr(), ring_len, sq_off, wqe_cnt as usize * 64)
        .ok_or_else(|| bad("sq.buf", format!("offset {sq_off}, {wqe_cnt} WQEs"), "outside the queue".into()))?;
    let dbrec = map(q.dbrec.as_mut_ptr(), 64, db_off, 8)
        .ok_or_else(|| bad("dbrec", format!("offset {db_off}"), "outside the records".into()))?;
    let bf = map(q._bf.as_mut_ptr(), 4096, bf_off, 8)
        .ok_or_else(|| bad("bf.reg", format!("offset {bf_off}"), "outside the BlueFlame page".into()))?;
    let dv = rrddmma::bindings::mlx5dv_qp {
        dbrec: dbrec.cast(),
        sq: rrddmma::bindings::mlx5dv_qp__bindgen_ty_1 { buf: sq_buf.cast(), wqe_cnt, stride },
        bf: rrddmma::bindings::mlx5dv_qp__bindgen_ty_3 { reg: bf.cast(), size: bf_size },
        ..Default::default()
    };
    // SAFETY: `dv` points into this queue's buffers (mapped as libmlx5
    // reported them), alive as long as the queue; the old ring is dropped
    // below and no other ring writes them.
    let mut sq = unsafe { rrddmma::mlx5dv::obj::sq_ring_of(&dv, q.sq.qpn()) }
        .map_err(|e| bad("sq_ring_of", "a ring".into(), e.to_string()))?;
    let ours_pi = sq.cur_post();
    if ours_pi != their_pi & 0xffff {
        return Err(bad(
            "start producer index (from the send doorbell record)",
            their_pi.to_string(),
            ours_pi.to_string(),
        ));
    }
    if sq.wqe_cnt() != q.wqe_cnt {
        return Err(bad("wqe_cnt", q.wqe_cnt.to_string(), sq.wqe_cnt().to_string()));
    }
    sq.set_prefer_bf(q.prefer_bf);
    // SAFETY: the "register" is test memory; the view's BlueFlame size is
    // what libmlx5 reported for it. (Found by this check: `set_blueflame`
    // turned prefer-BF back on; it now keeps the choice, set before it here.)
    unsafe { sq.set_blueflame(true) };
    // SAFETY: the family of the C half's queue.
    unsafe { sq.set_transport(family(q.transport)) };
    if q.transport == "DC streams" {
        sq.set_dci_streams(crate::build::LOG_DCI_STREAMS);
    }
    sq.bind_cq(&q.cq.ring);
    q.sq = sq;
    q.fresh_view = true;
    Ok(())
}
