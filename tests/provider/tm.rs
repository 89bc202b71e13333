//! Tag matching against libmlx5: `TmRing` (rrddmma's direct tag add /
//! remove / sync WQEs and its tag list) and its TM CQE handling, against
//! libmlx5's `mlx5_post_srq_ops` and extended poller on a tag-matching SRQ
//! the harness's library build fabricates in ordinary memory
//! (tests/provider/tm.c).
//!
//! Each case is one SRQ: its command QP (ring filled with `fill(seed)`,
//! as ours), a tag list of 1 to 64 entries, a command queue of 2 to 32
//! WQEs, a 64-byte-CQE CQ. Steps alternate between
//! - a random operation list posted through `mlx5_post_srq_ops` and, one by
//!   one, through `TmRing::add` / `add_buf` / `remove` / `sync` then
//!   `TmRing::ring` on our second ring: compared are each operation's
//!   outcome (which one is refused, and why), every add's handle, the WQE
//!   bytes (masked where libmlx5 writes nothing, reason beside each mask),
//!   the producer index, the doorbell record and the doorbell or BlueFlame
//!   write with its offset;
//! - random tag-matching CQEs written into the CQ and read through
//!   `ibv_start_poll` / `ibv_next_poll` (status, `wr_id`, opcode, flags,
//!   byte count, QP number, `ibv_wc_read_tm_info`), against
//!   `TmRing::complete` (with `TmCqe` under it) and `Cqe64::decode`.
//!
//! The CQEs are what a device could write for the list's state: list
//! operation CQEs for posted signaled operations, in order; matches on
//! entries in the device (and, now and then, on one that is not: libmlx5's
//! "wasn't added" error); unexpected and untagged messages on SRQ receives.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_int;
use std::sync::OnceLock;

use rrddmma::mlx5dv::be::Be32;
use rrddmma::mlx5dv::cqe::Cqe64;
use rrddmma::mlx5dv::mmio::{Op, Recorder};
use rrddmma::mlx5dv::tm::TmCqeOp;
use rrddmma::mlx5dv::tm_wqe::{TmError, TmOpts, TmRing};
use rrddmma::prim::{Sge, TmInfo, WcOpcode};

use super::batch::{bf_written, BF_PAGE};
use super::build::{library_fn, Aligned, Rng, WcBaseC};
use super::send::OurRing;
use super::{Mismatch, Mutation};

#[repr(C)]
struct HTm {
    _opaque: [u8; 0],
}

/// `struct h_tm_op` of tm.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct TmOpC {
    kind: u32,
    flags: u32,
    wr_id: u64,
    unexpected_cnt: u32,
    handle: u32,
    recv_wr_id: u64,
    tag: u64,
    mask: u64,
    addr: u64,
    length: u32,
    lkey: u32,
    num_sge: u32,
    pad: u32,
}

/// `struct h_tm_wc` of tm.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct TmWcC {
    base: WcBaseC,
    tag: u64,
    priv_: u32,
}

const ADD: u32 = 0;
const REMOVE: u32 = 1;
const SYNC: u32 = 2;
const OPS_SIGNALED: u32 = 1;
const OPS_TM_SYNC: u32 = 2;
const ENOMEM: c_int = 12;
const SRQ_WQES: u32 = 64;
/// CQE opcodes (`MLX5_CQE_*`).
const RESP: [u8; 4] = [0x1, 0x2, 0x3, 0x4]; // RESP_WR_IMM, RESP_SEND, RESP_SEND_IMM, RESP_SEND_INV
const RESP_SEND: u8 = 0x2;
const NO_PACKET: u8 = 0x6;

struct Lib {
    make: unsafe extern "C" fn(u32, u32, u32, u32, u32, u32, u32, u64, u32, u32) -> *mut HTm,
    sq_buf: unsafe extern "C" fn(*mut HTm) -> *mut u8,
    bf_page: unsafe extern "C" fn(*mut HTm) -> *mut u8,
    expect: unsafe extern "C" fn(*mut HTm, u32) -> c_int,
    post: unsafe extern "C" fn(*mut HTm, *const TmOpC, u32, *mut c_int, *mut u32, *mut u32) -> c_int,
    state: unsafe extern "C" fn(*mut HTm, *mut u32),
    poll: unsafe extern "C" fn(*mut HTm, *const u8, u32, *mut TmWcC) -> c_int,
    set_prefer_bf: unsafe extern "C" fn(c_int),
}

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    // SAFETY: each entry is the tm.c (or mlx5_provider.c) function of the
    // signature its field gives.
    LIB.get_or_init(|| unsafe {
        Lib {
            make: library_fn("h_tm_make"),
            sq_buf: library_fn("h_tm_sq_buf"),
            bf_page: library_fn("h_tm_bf_page"),
            expect: library_fn("h_tm_expect"),
            post: library_fn("h_tm_post"),
            state: library_fn("h_tm_state"),
            poll: library_fn("h_tm_poll"),
            set_prefer_bf: library_fn("h_set_prefer_bf"),
        }
    })
}

/// What was compared.
#[derive(Debug, Default)]
pub struct Stats {
    pub cases: usize,
    pub lists: usize,
    /// WQEs compared, by operation.
    pub wqes: BTreeMap<String, usize>,
    /// Lists libmlx5 cut short, by reason, and ours at the same operation.
    pub refused: BTreeMap<String, usize>,
    pub blueflame: usize,
    pub doorbells: usize,
    /// Lists cut short by a full tag list after some operations were
    /// written: libmlx5 rings with the refused slot's stale control word
    /// (finding), ours with the last WQE's.
    pub stale_doorbells: usize,
    /// CQEs compared, by `app_op`.
    pub cqes: BTreeMap<String, usize>,
    /// CQEs by status.
    pub statuses: BTreeMap<String, usize>,
    pub sync_req: usize,
    /// Completions with tag-matching information (`ExWc::tm_info`'s mapping).
    pub tm_infos: usize,
    /// Removes our ring refused (bad handle, entry not in the device) with nothing written.
    pub our_refusals: usize,
}

impl Stats {
    pub fn wqe_total(&self) -> usize {
        self.wqes.values().sum()
    }

    pub fn cqe_total(&self) -> usize {
        self.cqes.values().sum()
    }

    pub fn summary(&self) -> String {
        let j = |m: &BTreeMap<String, usize>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
        format!(
            "{} SRQs, {} op lists, {} WQEs ({}) through mlx5_post_srq_ops, {} lists cut short by a refusal ({}), {} BlueFlame, \
             {} doorbells, {} stale doorbells of libmlx5 after a full tag list (finding); {} TM CQEs through \
             ibv_start_poll/ibv_next_poll + ibv_wc_read_tm_info ({}; statuses {}; {} sync requests; \
             {} with tm_info, ExWc's mapping); \
             {} removes refused by ours alone",
            self.cases,
            self.lists,
            self.wqe_total(),
            j(&self.wqes),
            self.refused.values().sum::<usize>(),
            j(&self.refused),
            self.blueflame,
            self.doorbells,
            self.stale_doorbells,
            self.cqe_total(),
            j(&self.cqes),
            j(&self.statuses),
            self.sync_req,
            self.tm_infos,
            self.our_refusals,
        )
    }
}

/// The generator's picture of the list (what a device could report next).
#[derive(Default)]
struct Model {
    /// Entries in the device that may match, with their buffer size.
    matchable: BTreeMap<u32, u32>,
    /// Entries that may be removed (added, not removed, not fully matched).
    removable: Vec<u32>,
    /// Signaled operations awaiting their CQE: kind and entry.
    pending: VecDeque<(u32, u32)>,
}

/// One SRQ on both sides.
struct Case {
    t: *mut HTm,
    ring: Aligned,
    dbrec: Aligned,
    _bf: Aligned,
    tm: TmRing,
    wqe_cnt: u32,
    max_num_tags: u32,
    db_only: bool,
    srqn: u32,
    cqe_cnt: u32,
    produced: u32,
    model: Model,
    /// Every CQE an unexpected message (the long run past the last sync).
    only_unexpected: bool,
}

fn mismatch(kind: &str, at: &str, field: &str, byte: Option<usize>, theirs: String, ours: String) -> Box<Mismatch> {
    Box::new(Mismatch { kind: kind.into(), at: at.into(), field: field.into(), byte, theirs, ours })
}

/// Bytes of a TM WQE (offsets in its basic block) libmlx5 does not write,
/// with the reason. Ours writes 0 there (checked).
fn masked(kind: u32, flags: u32, byte: usize) -> Option<&'static str> {
    match byte {
        // MASK: `mlx5_wqe_tm_seg::rsvd0` and `rsvd1`: reserved; libmlx5's
        // set_tm_seg never writes them (the ring's old bytes stay).
        20..=21 | 24..=31 => Some("reserved"),
        // MASK: sw_cnt is read only with MLX5_SRQ_FLAG_TM_SW_CNT; without
        // IBV_OPS_TM_SYNC libmlx5 leaves it.
        22..=23 if flags & OPS_TM_SYNC == 0 => Some("sw_cnt without a sync"),
        // MASK: a NOP's index, a NOP's and a remove's tag and mask are not
        // read; set_tm_seg returns before writing them.
        18..=19 if kind == SYNC => Some("index of a NOP"),
        32..=47 if kind != ADD => Some("tag and mask of a remove or NOP"),
        _ => None,
    }
}

fn field_of(byte: usize) -> &'static str {
    match byte {
        0..=3 => "ctrl.opmod_idx_opcode",
        4..=7 => "ctrl.qpn_ds",
        8..=15 => "ctrl.signature_fm_ce_se_imm",
        16 => "tm.opcode",
        17 => "tm.flags",
        18..=19 => "tm.index",
        20..=31 => "tm.sw_cnt",
        32..=39 => "tm.append_tag",
        40..=47 => "tm.append_mask",
        _ => "data",
    }
}

fn op_name(o: &TmOpC) -> &'static str {
    match o.kind {
        ADD if o.num_sge == 0 || o.length == 0 => "add (no buffer)",
        ADD => "add",
        REMOVE => "remove",
        _ => "sync",
    }
}

impl Case {
    fn new(rng: &mut Rng, n: usize) -> Case {
        let l = lib();
        let max_num_tags = [1, 2, 3, 4, 7, 16, 33, 64][rng.below(8) as usize];
        let wqe_cnt = [2u32, 4, 8, 16, 32][rng.below(5) as usize];
        let bf_size = [256u32, 512][rng.below(2) as usize];
        let uuarn = if rng.chance(25) { 0 } else { 1 + rng.below(8) as u32 };
        let prefer_bf = rng.chance(75);
        let seed = rng.next();
        let srqn = 0x100 + n as u32;
        let qpn = 0x70_0000 + n as u32;
        let cqe_cnt = [16u32, 64, 128][rng.below(3) as usize];
        // SAFETY: the library's constructor.
        let t = unsafe {
            (l.make)(srqn, qpn, max_num_tags, wqe_cnt, SRQ_WQES, bf_size, uuarn, seed, 0x900 + n as u32, cqe_cnt)
        };
        // SAFETY: a context-wide setting, under the harness lock.
        unsafe { (l.set_prefer_bf)(c_int::from(prefer_bf)) };
        let OurRing { mut sq, ring, dbrec, bf } = OurRing::new(qpn, wqe_cnt, bf_size, uuarn, seed);
        sq.set_prefer_bf(prefer_bf);
        // SAFETY: a fresh ring (nothing posted) over buffers the case keeps
        // beside it, MMIO to a `Recorder`, standing for the C SRQ's command
        // QP with its list of `max_num_tags`; every TM CQE the case makes
        // goes to `TmRing::complete`, in order.
        let tm = unsafe { TmRing::from_raw(sq, max_num_tags) };
        Case {
            t,
            ring,
            dbrec,
            _bf: bf,
            tm,
            wqe_cnt,
            max_num_tags,
            db_only: uuarn == 0,
            srqn,
            cqe_cnt,
            produced: 0,
            model: Model::default(),
            only_unexpected: false,
        }
    }

    fn their_bb(&self, pos: u32) -> [u8; 64] {
        let mut b = [0u8; 64];
        // SAFETY: the C ring holds wqe_cnt basic blocks; `pos` is masked.
        unsafe {
            let p = (lib().sq_buf)(self.t).add((pos & (self.wqe_cnt - 1)) as usize * 64);
            std::ptr::copy_nonoverlapping(p, b.as_mut_ptr(), 64);
        }
        b
    }

    fn our_bb(&self, pos: u32) -> [u8; 64] {
        let i = (pos & (self.wqe_cnt - 1)) as usize * 64;
        self.ring.bytes()[i..i + 64].try_into().unwrap()
    }

    /// A random op list; the removes name distinct removable entries.
    fn gen_ops(&mut self, rng: &mut Rng, arena: &mut [u8]) -> Vec<TmOpC> {
        // Mostly what the command queue has room for (and one more now and then).
        let room = u64::from(self.tm.sq().available()) + 1;
        let most = if rng.chance(15) { 10 } else { room.min(6) };
        let n = 1 + rng.below(most) as usize;
        let mut removable = self.model.removable.clone();
        let base = arena.as_mut_ptr() as u64;
        let mut ops = Vec::with_capacity(n);
        for i in 0..n {
            let mut o = TmOpC::default();
            let r = rng.below(100);
            o.kind = if r < 30 && !removable.is_empty() {
                REMOVE
            } else if r < 80 {
                ADD
            } else {
                SYNC
            };
            // Unsignaled operations are retired only by a later signaled
            // one's completion: a user signals before the queue fills.
            // Removes are signaled: libmlx5 posts an unsignaled remove
            // without a completion and frees its entry at once; `TmRing`
            // asks for the completion anyway and frees the entry with it
            // (B-5), so the WQE, the CQEs and every later handle differ by
            // design; src/mlx5dv/tags/tm_wqe.rs's `b5_*` tests cover that.
            if o.kind == REMOVE || rng.chance(60) || (i + 2) as u32 >= self.tm.sq().available() {
                o.flags |= OPS_SIGNALED;
                o.wr_id = rng.next();
            }
            if rng.chance(30) {
                o.flags |= OPS_TM_SYNC;
                o.unexpected_cnt = rng.below(4) as u32;
            }
            match o.kind {
                REMOVE => {
                    let i = rng.below(removable.len() as u64) as usize;
                    o.handle = removable.swap_remove(i);
                }
                ADD => {
                    o.tag = rng.next();
                    o.mask = if rng.chance(50) { !0 } else { rng.next() };
                    o.recv_wr_id = rng.next();
                    o.lkey = rng.next() as u32;
                    let r = rng.below(10);
                    if r < 7 {
                        o.num_sge = 1;
                        o.length = 1 + rng.below(64) as u32;
                        o.addr = base + rng.below(arena.len() as u64 - 64);
                    } else if r < 9 {
                        o.num_sge = 0;
                        o.addr = rng.next();
                        o.length = rng.next() as u32;
                    } else {
                        o.num_sge = 1;
                        o.addr = base;
                        o.length = 0;
                    }
                }
                _ => {}
            }
            ops.push(o);
        }
        ops
    }

    /// One list on both sides.
    fn post_list(&mut self, ops: &[TmOpC], li: usize, mutate: bool, stats: &mut Stats) -> Result<(), Box<Mismatch>> {
        let l = lib();
        let kind = "tag matching op list";
        let at = |i: usize| format!("list {li} op {i}");
        let mut bad: c_int = -1;
        let mut handles = vec![0u32; ops.len()];
        let mut before = [0u32; 3];
        // SAFETY: arrays of `ops.len()` entries; a case of the library.
        let rc = unsafe {
            (l.post)(self.t, ops.as_ptr(), ops.len() as u32, &mut bad, handles.as_mut_ptr(), before.as_mut_ptr())
        };
        let mut after = [0u32; 3];
        // SAFETY: as above.
        unsafe { (l.state)(self.t, after.as_mut_ptr()) };
        let pi0 = self.tm.sq().cur_post();
        if pi0 != before[0] {
            return Err(mismatch(
                kind,
                &at(0),
                "producer index before the list",
                None,
                before[0].to_string(),
                pi0.to_string(),
            ));
        }
        let mut rec = Recorder::default();
        let mut ours_bad: Option<(usize, TmError)> = None;
        let mut ours_handles = vec![None; ops.len()];
        let mut mutated = false;
        for (i, o) in ops.iter().enumerate() {
            let opts = TmOpts {
                signaled: (o.flags & OPS_SIGNALED != 0).then_some(o.wr_id),
                sync: (o.flags & OPS_TM_SYNC != 0).then_some(o.unexpected_cnt),
            };
            let r = match o.kind {
                ADD => {
                    let mut tag = o.tag;
                    if mutate && !mutated {
                        tag ^= 1;
                        mutated = true;
                    }
                    if o.num_sge == 0 {
                        self.tm.add(tag, o.mask, o.recv_wr_id, opts)
                    } else {
                        // SAFETY: the WQE goes to a ring no device reads;
                        // libmlx5 copies scattered matches into the arena.
                        unsafe {
                            self.tm.add_buf(tag, o.mask, Sge::from_raw(o.addr, o.length, o.lkey), o.recv_wr_id, opts)
                        }
                    }
                    .map(Some)
                }
                REMOVE => self.tm.remove(o.handle, opts).map(|_| None),
                _ => self.tm.sync(opts).map(|_| None),
            };
            match r {
                Ok(h) => ours_handles[i] = h,
                Err(e) => {
                    ours_bad = Some((i, e));
                    break;
                }
            }
        }
        self.tm.ring(&mut rec);
        stats.lists += 1;
        // Outcome: which operation is refused, and why.
        match (bad, ours_bad) {
            (-1, None) if rc == 0 => {}
            (b, Some((i, e))) if b >= 0 && b as usize == i && rc == ENOMEM => {
                let why = match e {
                    TmError::ListFull { .. } => "tag list full",
                    TmError::QueueFull { .. } => "command queue full",
                    _ => return Err(mismatch(kind, &at(i), "refusal", None, "ENOMEM".into(), format!("{e:?}"))),
                };
                *stats.refused.entry(why.to_string()).or_default() += 1;
            }
            _ => {
                return Err(mismatch(
                    kind,
                    &at(bad.max(0) as usize),
                    "outcome",
                    None,
                    format!("rc {rc}, refused op {bad}"),
                    format!("{ours_bad:?}"),
                ))
            }
        }
        let posted = ours_bad.map_or(ops.len(), |(i, _)| i);
        for i in 0..posted {
            if let Some(h) = ours_handles[i] {
                if h != handles[i] {
                    return Err(mismatch(kind, &at(i), "handle", None, handles[i].to_string(), h.to_string()));
                }
            }
        }
        let pi = self.tm.sq().cur_post();
        if pi != after[0] {
            return Err(mismatch(kind, &at(posted), "producer index", None, after[0].to_string(), pi.to_string()));
        }
        // SAFETY: our doorbell record, written by the ring.
        let dbrec = unsafe { self.dbrec.as_mut_ptr().add(4).cast::<Be32>().read() }.get();
        if dbrec != after[1] {
            return Err(mismatch(kind, &at(posted), "doorbell record", None, after[1].to_string(), dbrec.to_string()));
        }
        // WQE bytes, one basic block per operation.
        for (i, o) in ops.iter().enumerate().take(posted) {
            let pos = pi0.wrapping_add(i as u32);
            let (t, u) = (self.their_bb(pos), self.our_bb(pos));
            let len = if o.kind == ADD { 64 } else { 48 };
            for b in 0..len {
                if let Some(_why) = masked(o.kind, o.flags, b) {
                    if u[b] != 0 {
                        return Err(mismatch(
                            kind,
                            &at(i),
                            "ours writes 0 where libmlx5 writes nothing",
                            Some(b),
                            "-".into(),
                            format!("{:#04x}", u[b]),
                        ));
                    }
                    continue;
                }
                if t[b] != u[b] {
                    return Err(mismatch(
                        &format!("{kind} {}", op_name(o)),
                        &at(i),
                        field_of(b),
                        Some(b),
                        format!("{:#04x}", t[b]),
                        format!("{:#04x}", u[b]),
                    ));
                }
            }
            *stats.wqes.entry(op_name(o).to_string()).or_default() += 1;
        }
        // The model follows the posted operations.
        for (i, o) in ops.iter().enumerate().take(posted) {
            match o.kind {
                ADD => {
                    let size = if o.num_sge == 0 { 0 } else { o.length };
                    self.model.matchable.insert(handles[i], size);
                    self.model.removable.push(handles[i]);
                    if o.flags & OPS_SIGNALED != 0 {
                        self.model.pending.push_back((ADD, handles[i]));
                    }
                }
                REMOVE => {
                    self.model.removable.retain(|&h| h != o.handle);
                    if o.flags & OPS_SIGNALED != 0 {
                        self.model.pending.push_back((REMOVE, o.handle));
                    } else {
                        self.model.matchable.remove(&o.handle);
                    }
                }
                _ => {
                    if o.flags & OPS_SIGNALED != 0 {
                        self.model.pending.push_back((SYNC, u32::MAX));
                    }
                }
            }
        }
        // The doorbell or BlueFlame write.
        // SAFETY: the C BlueFlame page, BF_PAGE bytes.
        let page = unsafe { std::slice::from_raw_parts((l.bf_page)(self.t), BF_PAGE) };
        let off = before[2] as usize;
        let ours: Vec<(usize, [u8; 8])> =
            rec.ops.iter().filter_map(|op| if let Op::Write64(o, b) = *op { Some((o, b)) } else { None }).collect();
        if posted == 0 {
            if !bf_written(page, 0).is_empty() || !ours.is_empty() {
                return Err(mismatch(
                    kind,
                    &at(0),
                    "doorbell without an operation",
                    None,
                    "none".into(),
                    format!("{ours:?}"),
                ));
            }
            return Ok(());
        }
        let theirs = bf_written(page, off);
        let their_len = theirs.len();
        let ours_bytes: Vec<u8> = ours.iter().flat_map(|(_, b)| *b).collect();
        let last = pi0.wrapping_add(posted as u32 - 1);
        if matches!(ours_bad, Some((_, TmError::ListFull { .. }))) {
            // libmlx5's finding: after a refused add its doorbell carries the
            // first 8 bytes of the refused slot (cur_post, not written) and
            // the DS count 1, not the last WQE: checked as that, and ours as
            // the last WQE's doorbell.
            let slot = self.their_bb(pi);
            if their_len != 8 || theirs != &slot[..8] {
                return Err(mismatch(
                    kind,
                    &at(posted),
                    "libmlx5's doorbell after a full tag list",
                    Some(0),
                    format!("{theirs:02x?}"),
                    format!("expected the refused slot's {:02x?}", &slot[..8]),
                ));
            }
            let mine = self.our_bb(last);
            if ours_bytes.len() < 8 || ours_bytes[..8] != mine[..8] {
                return Err(mismatch(
                    kind,
                    &at(posted),
                    "our doorbell names the last WQE",
                    Some(0),
                    format!("{:02x?}", &mine[..8]),
                    format!("{ours_bytes:02x?}"),
                ));
            }
            stats.stale_doorbells += 1;
            return Ok(());
        }
        // A BlueFlame copy is the list's one WQE: masked as its bytes are.
        let lo = &ops[posted - 1];
        let differs =
            |b: usize| theirs[b] != ours_bytes[b] && (their_len == 8 || masked(lo.kind, lo.flags, b).is_none());
        if theirs.len() != ours_bytes.len() || (0..theirs.len()).any(differs) {
            let b = (0..theirs.len().min(ours_bytes.len())).find(|&b| differs(b));
            return Err(mismatch(
                kind,
                &at(posted - 1),
                "doorbell write",
                b,
                format!("{theirs:02x?}"),
                format!("{ours_bytes:02x?}"),
            ));
        }
        // MASK (doorbell-only registers, uuarn 0): libmlx5 alternates the
        // halves even without BlueFlame, ours (bf_size 0) stays at the first.
        if !self.db_only && ours[0].0 != off {
            return Err(mismatch(
                kind,
                &at(posted - 1),
                "BlueFlame offset",
                None,
                off.to_string(),
                ours[0].0.to_string(),
            ));
        }
        if their_len == 8 {
            stats.doorbells += 1;
        } else {
            stats.blueflame += 1;
        }
        Ok(())
    }

    /// One random CQE a device could write now, at CQ position `pos`.
    fn gen_cqe(&mut self, rng: &mut Rng, pos: u32) -> Cqe64 {
        let mut raw = [0u8; 64];
        for c in raw.chunks_mut(8) {
            c.copy_from_slice(&rng.next().to_le_bytes());
        }
        // SAFETY: `Cqe64` is 64 bytes of plain integers; any bytes are one.
        let mut c: Cqe64 = unsafe { std::mem::transmute(raw) };
        c.app[0] = 1;
        c.srqn_uidx = Be32::new(self.srqn);
        c.sop_drop_qpn = Be32::new(rng.next() as u32);
        let resp = RESP;
        let mut fmt = 0u8;
        let mut r = rng.below(100);
        // What the state allows; else an unexpected or untagged message.
        let blocked =
            (r < 45 && self.model.pending.is_empty()) || ((45..80).contains(&r) && self.model.matchable.is_empty());
        if self.only_unexpected || blocked {
            r = 84;
        }
        let (opcode, app_op, index) = if r < 45 {
            let (k, h) = self.model.pending.pop_front().unwrap();
            let app_op = match k {
                ADD => 0x5,
                REMOVE => 0x6,
                _ => 0x7,
            };
            // A remove fails when its entry was consumed meanwhile (and
            // only then, or the entry would be freed twice).
            let success = k != REMOVE || self.model.matchable.contains_key(&h) && rng.chance(80);
            let word = if success { 0x8000_0000u32 } else { 0 } | (rng.next() as u32 & 0x7fff_ffff);
            c.rsvd0[0..4].copy_from_slice(&word.to_be_bytes());
            c.rsvd0[4..6].copy_from_slice(&(rng.below(4) as u16).to_be_bytes());
            if k == REMOVE && success {
                self.model.matchable.remove(&h);
            }
            (NO_PACKET, app_op, rng.next() as u16)
        } else if r < 80 {
            let i = rng.below(self.model.matchable.len() as u64) as usize;
            let (&h, &size) = self.model.matchable.iter().nth(i).unwrap();
            let app_op = [0x2u8, 0x2, 0xA, 0xB, 0xC, 0x1, 0x9][rng.below(7) as usize];
            let complete = app_op != 0x1 && app_op != 0x9;
            if complete {
                self.model.matchable.remove(&h);
                self.model.removable.retain(|&x| x != h);
            }
            let opcode = if app_op == 0x1 && rng.chance(50) { NO_PACKET } else { resp[rng.below(4) as usize] };
            if rng.chance(30) {
                // Scatter bits: 64 (libmlx5 copies from the previous entry
                // into the entry's buffer, or refuses a longer one) only
                // past the CQ's first entry and on entries with a buffer;
                // 32 (ignored for matches) anywhere.
                if size > 0 && pos % self.cqe_cnt != 0 {
                    fmt = 2;
                    c.byte_cnt = Be32::new(rng.below(u64::from(size) * 2) as u32);
                } else {
                    fmt = 1;
                }
            }
            (opcode, app_op, h as u16)
        } else if r < 84 {
            // A match on an entry not in the device (libmlx5: "got idx which wasn't added").
            let idx = rng.below(u64::from(self.max_num_tags) + 1) as u32;
            // SAFETY: idx is inside the list.
            if unsafe { (lib().expect)(self.t, idx) } == 0 {
                (resp[rng.below(4) as usize], 0x2, idx as u16)
            } else {
                (RESP_SEND, 0x3, rng.next() as u16)
            }
        } else if r < 97 || self.only_unexpected {
            let app_op = if self.only_unexpected || rng.chance(70) { 0x3 } else { 0x4 };
            (resp[1 + rng.below(2) as usize], app_op, rng.next() as u16)
        } else {
            // app_op values libmlx5 does not know.
            (
                if rng.chance(50) { NO_PACKET } else { RESP_SEND },
                [0x0u8, 0x8, 0xd, 0xf][rng.below(4) as usize],
                rng.next() as u16,
            )
        };
        c.app[1] = app_op;
        c.app[2..4].copy_from_slice(&index.to_be_bytes());
        if app_op == 0x3 || app_op == 0x4 {
            c.wqe_counter = rrddmma::mlx5dv::be::Be16::new(rng.below(u64::from(SRQ_WQES)) as u16);
        }
        let owner = ((pos / self.cqe_cnt) & 1) as u8;
        c.op_own = opcode << 4 | fmt << 2 | (rng.below(2) as u8) << 1 | owner;
        c
    }

    fn poll(&mut self, rng: &mut Rng, ci: usize, mutate: &mut bool, stats: &mut Stats) -> Result<(), Box<Mismatch>> {
        let k = 1 + rng.below(u64::from(self.cqe_cnt.min(6))) as u32;
        let cqes: Vec<Cqe64> = (0..k).map(|i| self.gen_cqe(rng, self.produced + i)).collect();
        self.produced += k;
        let mut out = vec![TmWcC::default(); k as usize];
        // SAFETY: `k` CQEs of 64 bytes and `k` outputs.
        let n = unsafe { (lib().poll)(self.t, cqes.as_ptr().cast(), k, out.as_mut_ptr()) };
        let kind = "TM CQE";
        if n != k as c_int {
            return Err(mismatch(
                kind,
                &format!("CQ step {ci}"),
                "completions polled",
                None,
                n.to_string(),
                k.to_string(),
            ));
        }
        for (i, (cqe, w)) in cqes.iter().zip(&out).enumerate() {
            let at = format!("CQ step {ci} CQE {i}");
            let Some(mut c) = self.tm.complete(cqe) else {
                return Err(mismatch(kind, &at, "taken", None, "a TM completion".into(), "none".into()));
            };
            if *mutate && c.cqe.op.is_match() && c.status.to_raw() == 0 {
                c.cqe.app_ctx ^= 1;
                *mutate = false;
            }
            let d = cqe.decode();
            let op = format!("{:?}", c.cqe.op);
            let kind = format!("TM CQE {op}");
            let cmp = |field: &str, byte: Option<usize>, t: u64, o: u64| -> Result<(), Box<Mismatch>> {
                if t != o {
                    return Err(mismatch(&kind, &at, field, byte, format!("{t:#x}"), format!("{o:#x}")));
                }
                Ok(())
            };
            cmp("status", Some(40), u64::from(w.base.status), u64::from(c.status.to_raw()))?;
            cmp("opcode", Some(63), u64::from(w.base.opcode), u64::from(c.opcode.to_raw()))?;
            cmp("wc_flags", Some(41), u64::from(w.base.wc_flags), u64::from(c.flags.bits()))?;
            cmp("byte_len", Some(44), u64::from(w.base.byte_len), u64::from(d.byte_len()))?;
            cmp("qp_num", Some(56), u64::from(w.base.qp_num), u64::from(d.qpn()))?;
            cmp("tm_info.tag", Some(8), w.tag, c.cqe.tag)?;
            cmp("tm_info.priv (app_ctx)", Some(4), u64::from(w.priv_), u64::from(c.cqe.app_ctx))?;
            // ExWc::tm_info's mapping, on libmlx5's values, against ours.
            let theirs_info = TmInfo::of(WcOpcode::from_raw(w.base.opcode), w.base.wc_flags, w.tag, w.priv_);
            if theirs_info != c.tm_info() {
                return Err(mismatch(
                    &kind,
                    &at,
                    "tm_info",
                    Some(41),
                    format!("{theirs_info:?}"),
                    format!("{:?}", c.tm_info()),
                ));
            }
            stats.tm_infos += usize::from(theirs_info.is_some());
            match (c.wr_id, c.srq_wqe) {
                (Some(id), _) => cmp("wr_id", Some(42), w.base.wr_id, id)?,
                (None, Some(idx)) => cmp("wr_id (SRQ receive)", Some(60), w.base.wr_id, 0x5300 << 48 | u64::from(idx))?,
                // An error or an unknown app_op: libmlx5 leaves wr_id as it was.
                (None, None) => {}
            }
            if c.cqe.op == TmCqeOp::Unexpected || c.cqe.op == TmCqeOp::NoTag {
                assert_eq!(c.srq_wqe, Some(cqe.wqe_counter.get()));
            }
            if c.flags.contains(rrddmma::prim::WcFlags::TM_SYNC_REQ) {
                stats.sync_req += 1;
            }
            *stats.cqes.entry(op).or_default() += 1;
            *stats.statuses.entry(format!("{:?}", c.status)).or_default() += 1;
        }
        Ok(())
    }

    /// Removes libmlx5 cannot refuse (it reads any index): ours refuses a
    /// handle past the list and one not in the device, writing nothing.
    fn our_refusals(&mut self, rng: &mut Rng, stats: &mut Stats) -> Result<(), Box<Mismatch>> {
        if self.tm.sq().available() == 0 {
            return Ok(());
        }
        let pi = self.tm.sq().cur_post();
        let before = self.ring.bytes().to_vec();
        let entries = self.max_num_tags + 1;
        let past = entries + rng.below(1000) as u32;
        let free = (0..entries).find(|&h| !self.tm.is_posted(h));
        let at = "after the case";
        match self.tm.remove(past, TmOpts::new()) {
            Err(TmError::BadHandle { handle, entries: e }) if handle == past && e == entries => {}
            r => {
                return Err(mismatch(
                    "our remove",
                    at,
                    "refusal of a handle past the list",
                    None,
                    "BadHandle".into(),
                    format!("{r:?}"),
                ))
            }
        }
        if let Some(h) = free {
            match self.tm.remove(h, TmOpts::new()) {
                Err(TmError::NotPosted { handle }) if handle == h => {}
                r => {
                    return Err(mismatch(
                        "our remove",
                        at,
                        "refusal of a free entry",
                        None,
                        "NotPosted".into(),
                        format!("{r:?}"),
                    ))
                }
            }
            stats.our_refusals += 1;
        }
        if self.tm.sq().cur_post() != pi || self.ring.bytes() != &before[..] {
            return Err(mismatch(
                "our remove",
                at,
                "nothing written on a refusal",
                None,
                "unchanged".into(),
                "written".into(),
            ));
        }
        stats.our_refusals += 1;
        Ok(())
    }
}

/// One SRQ given `n` unexpected messages and no sync: libmlx5 asks for a
/// sync (`IBV_WC_TM_SYNC_REQ`) once more than `MLX5_TM_MAX_SYNC_DIFF`
/// (0x3fff) are past the last one. Returns the CQEs compared and how many
/// carried the request.
pub fn check_unexpected_run(n: u32, seed: u64) -> Result<(usize, usize), Box<Mismatch>> {
    let _g = super::batch::exclusive();
    let mut rng = Rng(seed);
    let mut stats = Stats::default();
    let mut case = Case::new(&mut rng, 5000);
    case.only_unexpected = true;
    let mut step = 0;
    while stats.cqe_total() < n as usize {
        case.poll(&mut rng, step, &mut false, &mut stats)?;
        step += 1;
    }
    Ok((stats.cqe_total(), stats.sync_req))
}

/// Runs `cases` SRQs; `Mutation::TmTag` flips bit 0 of the first add's
/// tag on our side, `Mutation::TmAppCtx` bit 0 of the first matched
/// CQE's application context as we decode it.
pub fn check(cases: usize, seed: u64, mutation: Mutation) -> Result<Stats, Box<Mismatch>> {
    let _g = super::batch::exclusive();
    let mut rng = Rng(seed);
    let mut stats = Stats::default();
    let mut arena = vec![0u8; 1 << 16];
    let mut mutate_wqe = mutation == Mutation::TmTag;
    let mut mutate_cqe = mutation == Mutation::TmAppCtx;
    let mut li = 0;
    for n in 0..cases {
        let mut case = Case::new(&mut rng, n);
        let steps = 10 + rng.below(30) as usize;
        for s in 0..steps {
            if rng.chance(60) {
                let ops = case.gen_ops(&mut rng, &mut arena);
                let has_add = ops.iter().any(|o| o.kind == ADD);
                let m = mutate_wqe && has_add;
                case.post_list(&ops, li, m, &mut stats)?;
                if m {
                    mutate_wqe = false;
                }
                li += 1;
            } else {
                case.poll(&mut rng, s, &mut mutate_cqe, &mut stats)?;
            }
        }
        case.our_refusals(&mut rng, &mut stats)?;
        stats.cases += 1;
    }
    Ok(stats)
}
