//! Striding receive WQs against libmlx5: `MprqRing` (rrddmma's striding
//! WQEs, doorbell record and consumed-stride tracker) and
//! `StrideCompletion` (with `CqRing` under it, expanding `CSUM_STRIDX`
//! sessions), against libmlx5's `mlx5_post_wq_recv` and extended poller on
//! a striding WQ the harness's library build fabricates in ordinary memory
//! (tests/provider/mprq.c).
//!
//! Each case is one WQ: 1 to 64 WQEs asked for (libmlx5's geometry for a
//! striding WQ: next segment plus 1 to 5 data segments, rounded up), strides
//! of 2^6 to 2^11 bytes, 2^3 to 2^9 per WQE, the two-byte shift on or off,
//! and a 64-byte-CQE CQ of 16 to 256 entries. Steps alternate between
//! - a random receive list posted through `ibv_post_wq_recv` (one buffer of
//!   the WQE's size per request, now and then after a zero-length entry,
//!   which libmlx5 skips) and through `MprqRing::post` then
//!   `MprqRing::ring_doorbell`: compared are the data segments (libmlx5
//!   writes them from the WQE's first byte, where a striding WQE has its
//!   next segment; ours are 16 bytes further, as `struct mlx5_mprq_wqe`
//!   lays them out: bytes 16.. of ours against bytes 0.. of libmlx5's, the
//!   list's end included; our next segment must be zero), and the doorbell
//!   record;
//! - random striding CQEs (packets of 1 to the remaining strides, fillers
//!   taking a WQE's last strides, now and then SEND with immediate), each
//!   in the WQE and at the stride a device would use, written plain into
//!   libmlx5's CQ and read through `ibv_start_poll` / `ibv_next_poll`; on
//!   our side written plain or, now and then, as a compressed session
//!   (`CSUM_STRIDX` mini-CQEs) that `CqRing` expands. Compared with what
//!   libmlx5 reports: status, opcode, flags, the byte count (libmlx5 gives
//!   `byte_cnt` whole: ours recombined from filler flag, strides and
//!   length), `wr_id` (libmlx5 indexes its ids by `wqe_counter`, the
//!   stride index: ours must name the same slot), QP number, source QP,
//!   SLID, SL, path bits, immediate. The WQE index, stride index, stride
//!   count and filler flag, which libmlx5 does not read, are compared with
//!   the generator's; and the tracker must hand each WQE back exactly at
//!   its last stride (the generator's count), the packet address must be
//!   the stride's (plus 2 with the shift).
//!
//! Our CQ is shared with a second WQ: now and then a CQE of that WQ lies
//! between ours (on our side only). Our completions are polled with
//! `CqRing::poll_strides`, which stamps them, and the ring must refuse,
//! changing nothing: the other WQ's (`OtherWq`, then taken by that WQ's
//! ring), each of ours decoded from its bytes (`NotPolled`), each of ours
//! again after it was taken (`Taken`), and the one before it after it
//! (out of order, `Taken`); `payload` answers `None` for all of them.

use std::ffi::c_int;
use std::sync::OnceLock;

use rrddmma::mlx5dv::be::{Be16, Be32};
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::{Cqe64, CqeOpcode};
use rrddmma::mlx5dv::mini::{self, CqeResFormat, MiniCqe};
use rrddmma::mlx5dv::mprq::{MprqRing, StrideCompletion, StrideRefusal, StridingParams};

use super::build::{library_fn, Aligned, Rng, WcBaseC};
use super::{Mismatch, Mutation};

#[repr(C)]
struct HMprq {
    _opaque: [u8; 0],
}

/// `struct h_mprq_wr` of mprq.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct MprqWrC {
    wr_id: u64,
    num_sge: u32,
    pad: u32,
    sge: [SgeC; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SgeC {
    addr: u64,
    length: u32,
    lkey: u32,
}

/// `struct h_mprq_wc` of mprq.c.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct MprqWcC {
    base: WcBaseC,
    src_qp: u32,
    imm: u32,
    slid: u16,
    sl: u8,
    dlid_path_bits: u8,
}

const TAG: u64 = 0x5400 << 48;
const WC_RECV: u32 = 128;
const WC_WITH_IMM: u32 = 2;

struct Lib {
    make: unsafe extern "C" fn(u32, u32, u32, u32, u32) -> *mut HMprq,
    geometry: unsafe extern "C" fn(*mut HMprq, *mut u32),
    buf: unsafe extern "C" fn(*mut HMprq) -> *mut u8,
    dbrec: unsafe extern "C" fn(*mut HMprq) -> u32,
    post: unsafe extern "C" fn(*mut HMprq, *const MprqWrC, u32, *mut c_int) -> c_int,
    poll: unsafe extern "C" fn(*mut HMprq, *const u8, u32, *mut MprqWcC) -> c_int,
}

fn lib() -> &'static Lib {
    static LIB: OnceLock<Lib> = OnceLock::new();
    // SAFETY: each entry is the mprq.c function of the signature its field
    // gives.
    LIB.get_or_init(|| unsafe {
        Lib {
            make: library_fn("h_mprq_make"),
            geometry: library_fn("h_mprq_geometry"),
            buf: library_fn("h_mprq_buf"),
            dbrec: library_fn("h_mprq_dbrec"),
            post: library_fn("h_mprq_post"),
            poll: library_fn("h_mprq_poll"),
        }
    })
}

/// What the check covered.
#[derive(Debug, Default)]
pub struct Stats {
    pub wqs: usize,
    pub lists: usize,
    pub wqes: usize,
    /// Requests with a zero-length entry before the buffer.
    pub skipped_sge: usize,
    pub cqes: usize,
    pub fillers: usize,
    pub with_imm: usize,
    /// CQEs that reached our ring inside compressed sessions, and the sessions.
    pub compressed: usize,
    pub sessions: usize,
    /// WQEs the tracker handed back (each at its last stride).
    pub handed_back: usize,
    /// WQE sizes seen (bytes).
    pub wqe_sizes: std::collections::BTreeSet<u32>,
    pub two_byte_shift: usize,
    pub cq_wraps: usize,
    /// Refused as they must be: CQEs decoded from bytes, completions
    /// offered again, offered after a later one, and the other WQ's.
    pub refused_decoded: usize,
    pub refused_replays: usize,
    pub refused_out_of_order: usize,
    pub refused_other_wq: usize,
}

impl Stats {
    pub fn cases(&self) -> usize {
        self.wqes + self.cqes
    }

    pub fn summary(&self) -> String {
        let sizes: Vec<String> = self.wqe_sizes.iter().map(|s| s.to_string()).collect();
        format!(
            "{} WQs (WQE sizes {} B, {} with the two-byte shift): {} WQEs in {} lists through mlx5_post_wq_recv ({} \
             after a zero-length entry) with their doorbell records; {} CQEs through the extended poller ({} fillers, \
             {} with immediate; {} of them reached our ring in {} CSUM_STRIDX compressed sessions), {} CQ wraps; {} \
             WQEs handed back by the tracker, each at its last stride; refused: {} decoded from bytes, {} replays, \
             {} out of order, {} of the other WQ on the shared CQ",
            self.wqs,
            sizes.join("/"),
            self.two_byte_shift,
            self.wqes,
            self.lists,
            self.skipped_sge,
            self.cqes,
            self.fillers,
            self.with_imm,
            self.compressed,
            self.sessions,
            self.cq_wraps,
            self.handed_back,
            self.refused_decoded,
            self.refused_replays,
            self.refused_out_of_order,
            self.refused_other_wq,
        )
    }
}

fn mismatch(kind: &str, at: &str, field: &str, byte: Option<usize>, theirs: String, ours: String) -> Box<Mismatch> {
    Box::new(Mismatch { kind: kind.into(), at: at.into(), field: field.into(), byte, theirs, ours })
}

/// One packet (or filler) the generator lets the device write.
#[derive(Clone, Copy, Debug)]
struct Pkt {
    slot: u16,
    stride: u16,
    strides: u16,
    len: u32,
    filler: bool,
    /// The WQE is done after this one.
    last: bool,
}

/// One WQ on both sides.
struct Case {
    h: *mut HMprq,
    wqn: u32,
    ring: MprqRing,
    buf: Aligned,
    dbrec: Aligned,
    wqe_cnt: u32,
    wqe_size: u32,
    max_gs: u32,
    params: StridingParams,
    cq: CqRing,
    cq_buf: Aligned,
    _cq_db: Aligned,
    _uar: Aligned,
    cqe_cnt: u32,
    /// CQEs written for libmlx5 (its CQ positions), and into ours.
    produced: u32,
    ours_at: u32,
    /// The ring of the other WQ sharing our CQ (nothing posted), and its memory.
    other: MprqRing,
    _other_mem: (Aligned, Aligned),
    /// Free-running index of the WQE the device fills, and its next stride.
    dev_wqe: u32,
    dev_stride: u32,
    /// WQEs posted (free-running), and each slot's address.
    posted: u32,
    addrs: Vec<u64>,
}

impl Case {
    fn new(rng: &mut Rng, n: usize) -> Case {
        let l = lib();
        let wqn = 0x7a_0000 + n as u32;
        let max_wr = 1 + rng.below(64) as u32;
        let max_sge = 1 + rng.below(5) as u32;
        let cqe_cnt = 16u32 << rng.below(5);
        // SAFETY: the harness library's constructor.
        let h = unsafe { (l.make)(wqn, max_wr, max_sge, 0x7b_0000 + n as u32, cqe_cnt) };
        let mut g = [0u32; 3];
        // SAFETY: a live WQ; three words out.
        unsafe { (l.geometry)(h, g.as_mut_ptr()) };
        let (wqe_cnt, wqe_size, max_gs) = (g[0], 1u32 << g[1], g[2]);
        let params = StridingParams {
            log_stride_bytes: 6 + rng.below(6) as u8,
            log_num_strides: 3 + rng.below(7) as u8,
            two_byte_shift: rng.chance(50),
        };
        let mut cq_buf = Aligned::new((cqe_cnt * 64) as usize);
        for i in 0..cqe_cnt as usize {
            cq_buf.bytes_mut()[i * 64 + 63] = 0xf1;
        }
        let mut cq_db = Aligned::new(64);
        let mut uar = Aligned::new(64);
        // SAFETY: as above; the CQ buffer is writable and ours alone.
        let mut cq = unsafe {
            CqRing::from_raw(cq_buf.as_mut_ptr(), cqe_cnt, 64, cq_db.as_mut_ptr().cast::<Be32>(), uar.as_mut_ptr(), 1)
        };
        // SAFETY: the buffer comes from a mutable pointer; nothing else writes it
        // but this case's producer, between polls.
        unsafe { cq.set_compression(Some(CqeResFormat::CsumStridx)) };
        let mut buf = Aligned::new((wqe_cnt * wqe_size) as usize);
        let mut dbrec = Aligned::new(64);
        // SAFETY: buffers of the sizes asked for, alive as long as the ring
        // (fields of the same `Case`); only this ring posts to them.
        let ring = unsafe {
            MprqRing::from_raw(buf.as_mut_ptr(), wqe_cnt, wqe_size, dbrec.as_mut_ptr().cast::<Be32>(), params, wqn, &cq)
        };
        let (mut obuf, mut odb) = (Aligned::new(4 * 32), Aligned::new(64));
        // SAFETY: as above, for the other WQ's ring.
        let other = unsafe {
            MprqRing::from_raw(obuf.as_mut_ptr(), 4, 32, odb.as_mut_ptr().cast::<Be32>(), params, other_wqn(wqn), &cq)
        };
        Case {
            h,
            wqn,
            ring,
            buf,
            dbrec,
            wqe_cnt,
            wqe_size,
            max_gs,
            params,
            cq,
            cq_buf,
            _cq_db: cq_db,
            _uar: uar,
            cqe_cnt,
            produced: 0,
            ours_at: 0,
            other,
            _other_mem: (obuf, odb),
            dev_wqe: 0,
            dev_stride: 0,
            posted: 0,
            addrs: vec![0; wqe_cnt as usize],
        }
    }

    fn post(&mut self, rng: &mut Rng, li: usize, mutate: &mut bool, stats: &mut Stats) -> Result<(), Box<Mismatch>> {
        let free = self.ring.free();
        if free == 0 {
            return Ok(());
        }
        let n = 1 + rng.below(u64::from(free.min(16))) as u32;
        let bytes = self.params.wqe_bytes();
        let mut wrs = [MprqWrC::default(); 16];
        for w in wrs.iter_mut().take(n as usize) {
            let addr = (rng.next() & 0x0000_7fff_ffff_f000) | (rng.below(64) << 6);
            let lkey = rng.next() as u32;
            let mut k = 0;
            if self.max_gs >= 2 && rng.chance(15) {
                w.sge[0] = SgeC { addr: rng.next(), length: 0, lkey: rng.next() as u32 };
                k = 1;
                stats.skipped_sge += 1;
            }
            w.sge[k] = SgeC { addr, length: bytes, lkey };
            w.num_sge = k as u32 + 1;
        }
        let l = lib();
        let mut bad = -1;
        for (i, w) in wrs.iter_mut().take(n as usize).enumerate() {
            w.wr_id = TAG | u64::from((self.posted + i as u32) & (self.wqe_cnt - 1));
        }
        // SAFETY: a live WQ; `n` requests.
        let rc = unsafe { (l.post)(self.h, wrs.as_ptr(), n, &mut bad) };
        let kind = "striding RQ post";
        let at = format!("list {li}");
        if rc != 0 || bad != -1 {
            return Err(mismatch(kind, &at, "return", None, format!("{rc} (bad {bad})"), "0".into()));
        }
        for w in wrs.iter().take(n as usize) {
            let s = w.sge[w.num_sge as usize - 1];
            let lkey = if std::mem::take(mutate) { s.lkey ^ 1 } else { s.lkey };
            // SAFETY: test addresses the device model never writes.
            let slot = unsafe { self.ring.post(lkey, s.addr) }
                .ok_or_else(|| mismatch(kind, &at, "room", None, "posted".into(), "full".into()))?;
            self.addrs[usize::from(slot)] = s.addr;
            let (theirs, ours) = self.wqe_bytes(u32::from(slot));
            // The next segment, which libmlx5 does not write: zero, as
            // mlx5dv.h's `struct mlx5_mprq_wqe` of a cyclic queue has it.
            if let Some(b) = ours[..16].iter().position(|&x| x != 0) {
                return Err(Mismatch::at_byte(
                    kind.into(),
                    format!("{at}, WQE {slot}"),
                    "next segment (zero by the layout; libmlx5 writes none)".into(),
                    b,
                    0,
                    ours[b],
                ));
            }
            let segs = self.max_gs.min(2) as usize * 16;
            for b in 0..segs {
                if theirs[b] != ours[16 + b] {
                    let field = match b % 16 {
                        0..=3 => "data segment byte_count",
                        4..=7 => "data segment lkey",
                        _ => "data segment addr",
                    };
                    let f = if b >= 16 { format!("{field} (the list's end)") } else { field.to_string() };
                    return Err(Mismatch::at_byte(
                        kind.into(),
                        format!("{at}, WQE {slot}"),
                        f,
                        16 + b,
                        theirs[b],
                        ours[16 + b],
                    ));
                }
            }
            stats.wqes += 1;
        }
        self.ring.ring_doorbell();
        self.posted = self.posted.wrapping_add(n);
        // SAFETY: a live WQ.
        let theirs = unsafe { (l.dbrec)(self.h) };
        let ours = u32::from_be_bytes(self.dbrec.bytes()[..4].try_into().unwrap());
        if theirs != ours {
            return Err(mismatch(kind, &at, "doorbell record", None, format!("{theirs:#x}"), format!("{ours:#x}")));
        }
        stats.lists += 1;
        stats.wqe_sizes.insert(self.wqe_size);
        Ok(())
    }

    /// libmlx5's WQE at `slot` and ours.
    fn wqe_bytes(&self, slot: u32) -> (Vec<u8>, Vec<u8>) {
        let at = (slot * self.wqe_size) as usize;
        let len = self.wqe_size as usize;
        // SAFETY: the harness's WQ buffer holds wqe_cnt WQEs of wqe_size bytes.
        let theirs = unsafe { std::slice::from_raw_parts((lib().buf)(self.h).add(at), len) }.to_vec();
        let ours = self.buf.bytes()[at..at + len].to_vec();
        (theirs, ours)
    }

    /// The next packets the device could write: up to `max` of them, in
    /// the WQE being filled and the ones after it, never past the WQEs posted.
    fn gen_pkts(&mut self, rng: &mut Rng, max: u32) -> Vec<Pkt> {
        let mut v = Vec::new();
        let strides = self.params.num_strides();
        let sb = self.params.stride_bytes();
        while (v.len() as u32) < max && self.dev_wqe != self.posted {
            let left = strides - self.dev_stride;
            let slot = (self.dev_wqe & (self.wqe_cnt - 1)) as u16;
            let filler = left < strides && rng.chance(12);
            let used = if filler {
                left
            } else if rng.chance(60) {
                1
            } else {
                1 + rng.below(u64::from(left.min(8))) as u32
            };
            let room = (used * sb - if self.params.two_byte_shift { 2 } else { 0 }).min(0xffff);
            let lo = if used > 1 { (used - 1) * sb } else { 1 };
            let len = if filler { 0 } else { lo.min(room) + rng.below(u64::from(room - lo.min(room) + 1)) as u32 };
            let last = self.dev_stride + used == strides;
            v.push(Pkt { slot, stride: self.dev_stride as u16, strides: used as u16, len, filler, last });
            self.dev_stride += used;
            if last {
                self.dev_stride = 0;
                self.dev_wqe = self.dev_wqe.wrapping_add(1);
            }
        }
        v
    }

    fn cqe_of(&self, p: &Pkt, rng: &mut Rng, imm: bool) -> Cqe64 {
        let op = if imm { CqeOpcode::RESP_SEND_IMM } else { CqeOpcode::RESP_SEND };
        let mut c = Cqe64 { op_own: op.to_raw() << 4, ..Cqe64::default() };
        c.rsvd0[2..4].copy_from_slice(&p.slot.to_be_bytes());
        c.rsvd0[17] = rng.next() as u8;
        c.rsvd0[20..22].copy_from_slice(&(rng.next() as u16).to_be_bytes());
        c.rsvd0[22..24].copy_from_slice(&(rng.next() as u16).to_be_bytes());
        let flags_rqpn = (rng.next() as u32) & 0x0fff_ffff;
        c.rsvd0[24..28].copy_from_slice(&flags_rqpn.to_be_bytes());
        c.imm_inval_pkey = Be32::new(rng.next() as u32);
        c.byte_cnt = Be32::new((u32::from(p.filler) << 31) | (u32::from(p.strides) << 16) | p.len);
        c.sop_drop_qpn = Be32::new(self.wqn);
        c.wqe_counter = Be16::new(p.stride);
        c
    }

    fn owner(&self, pos: u32) -> u8 {
        u8::from(pos & self.cqe_cnt != 0)
    }

    fn cq_entry(&mut self, pos: u32) -> &mut [u8] {
        let at = ((pos & (self.cqe_cnt - 1)) * 64) as usize;
        &mut self.cq_buf.bytes_mut()[at..at + 64]
    }

    fn poll(&mut self, rng: &mut Rng, step: usize, mutate: &mut bool, stats: &mut Stats) -> Result<(), Box<Mismatch>> {
        // Room for up to 8 CQEs of the other WQ in our CQ.
        let max = 1 + rng.below(u64::from(self.cqe_cnt.min(48) - 8)) as u32;
        let pkts = self.gen_pkts(rng, max);
        if pkts.is_empty() {
            return Ok(());
        }
        // Plain CQEs for libmlx5; for ours the same, some runs within one WQE
        // written as a compressed session.
        let mut plain = Vec::with_capacity(pkts.len());
        let mut foreign = 0;
        let mut i = 0;
        while i < pkts.len() {
            if foreign < 8 && rng.chance(10) {
                // A CQE of the other WQ on the shared CQ, in ours only.
                let p = Pkt { slot: 0, stride: 0, strides: 1, len: 60, filler: false, last: false };
                let mut c = self.cqe_of(&p, rng, false);
                c.sop_drop_qpn = Be32::new(other_wqn(self.wqn));
                c.op_own = (c.op_own & 0xf0) | self.owner(self.ours_at);
                let at = self.ours_at;
                self.cq_entry(at).copy_from_slice(&bytes(&c));
                self.ours_at += 1;
                foreign += 1;
            }
            // A run in one WQE, sharing every field but those the mini-CQEs carry.
            let mut run = 1;
            while i + run < pkts.len() && pkts[i + run].slot == pkts[i].slot && run < 24 {
                run += 1;
            }
            let zip = run >= 2 && rng.chance(45);
            let n = if zip { 2 + rng.below(run as u64 - 1) as usize } else { 1 };
            let imm = rng.chance(15);
            let mut title = self.cqe_of(&pkts[i], rng, imm);
            if zip {
                // Past the first CQE the hash bytes are not in the session.
                title.rsvd0[12..17].fill(0);
            }
            let base = self.produced + plain.len() as u32;
            let mut minis = Vec::new();
            for (k, p) in pkts[i..i + n].iter().enumerate() {
                let mut c = title;
                c.byte_cnt = Be32::new((u32::from(p.filler) << 31) | (u32::from(p.strides) << 16) | p.len);
                c.wqe_counter = Be16::new(p.stride);
                if k > 0 {
                    c.rsvd0[20..22].copy_from_slice(&(rng.next() as u16).to_be_bytes());
                }
                if zip {
                    let mut m = MiniCqe { byte_cnt: c.byte_cnt, ..MiniCqe::default() };
                    m.info[..2].copy_from_slice(&c.rsvd0[20..22]);
                    m.info[2..].copy_from_slice(&p.stride.to_be_bytes());
                    minis.push(m);
                }
                c.op_own = (c.op_own & 0xf0) | self.owner(base + k as u32);
                plain.push(c);
            }
            // Ours: the plain CQEs, or title and mini arrays.
            let ob = self.ours_at;
            if zip {
                let mut t = plain[plain.len() - n];
                t.byte_cnt = Be32::new(n as u32);
                t.op_own = (t.op_own & 0xf0) | (mini::CqeFormat::COMPRESSED.to_raw() << 2) | self.owner(ob);
                let tb = bytes(&t);
                self.cq_entry(ob).copy_from_slice(&tb);
                for (k, m) in minis.iter().enumerate() {
                    let (entry, at) = mini::position(k as u32);
                    let e = self.cq_entry(ob + entry);
                    let o = at as usize * 8;
                    e[o..o + 4].copy_from_slice(&m.info);
                    e[o + 4..o + 8].copy_from_slice(&m.byte_cnt.get().to_be_bytes());
                }
                stats.compressed += n;
                stats.sessions += 1;
            } else {
                let mut c = plain[plain.len() - 1];
                c.op_own = (c.op_own & 0xf0) | self.owner(ob);
                self.cq_entry(ob).copy_from_slice(&bytes(&c));
            }
            self.ours_at += n as u32;
            i += n;
        }
        let k = plain.len();
        let raw: Vec<u8> = plain.iter().flat_map(bytes).collect();
        let mut wcs = vec![MprqWcC::default(); k];
        // SAFETY: a live WQ; k CQEs in, room for k completions.
        let got = unsafe { (lib().poll)(self.h, raw.as_ptr(), k as u32, wcs.as_mut_ptr()) } as usize;
        if (self.produced & (self.cqe_cnt - 1)) + k as u32 > self.cqe_cnt {
            stats.cq_wraps += 1;
        }
        self.produced += k as u32;
        let mut ours = vec![StrideCompletion::default(); k + foreign];
        let n = self.cq.poll_strides(&mut ours);
        let kind = "striding RQ CQE";
        if got != k || n != k + foreign {
            return Err(mismatch(
                kind,
                &format!("step {step}"),
                "completions (libmlx5's, and ours with the other WQ's)",
                None,
                format!("{got} + {foreign}"),
                n.to_string(),
            ));
        }
        let mut mine = Vec::with_capacity(k);
        for (q, c) in ours.iter().enumerate() {
            if c.cqe.qpn() == self.wqn {
                mine.push(*c);
                continue;
            }
            // The other WQ's: refused, unchanged, then taken by its ring.
            let at = format!("step {step}, our CQE {q} (the other WQ's)");
            let (free, consumed) = (self.ring.free(), self.ring.consumed(0));
            let refused = self.ring.complete(c);
            let want = Err(StrideRefusal::OtherWq { wqn: other_wqn(self.wqn) });
            if refused != want
                || self.ring.payload(c).is_some()
                || (self.ring.free(), self.ring.consumed(0)) != (free, consumed)
            {
                return Err(mismatch(kind, &at, "refusal (B-2)", None, format!("{want:?}"), format!("{refused:?}")));
            }
            let taken = self.other.complete(c);
            if taken != Ok(None) {
                return Err(mismatch(
                    kind,
                    &at,
                    "taken by its WQ's ring",
                    None,
                    "Ok(None)".into(),
                    format!("{taken:?}"),
                ));
            }
            stats.refused_other_wq += 1;
        }
        let mut prev: Option<StrideCompletion> = None;
        for (j, ((w, polled), p)) in wcs.iter().zip(&mine).zip(&pkts).enumerate() {
            let at = format!("step {step}, CQE {j}");
            // The same CQE decoded from its bytes frees nothing.
            let decoded = StrideCompletion::decode(&plain[j]);
            let refused = self.ring.complete(&decoded);
            if refused != Err(StrideRefusal::NotPolled) || self.ring.payload(&decoded).is_some() {
                return Err(mismatch(
                    kind,
                    &at,
                    "refusal of the CQE decoded from bytes (B-2)",
                    None,
                    "Err(NotPolled)".into(),
                    format!("{refused:?}"),
                ));
            }
            stats.refused_decoded += 1;
            let mut c = *polled;
            if *mutate && !c.filler {
                c.strides ^= 1;
                *mutate = false;
            }
            let opcode = if c.cqe.opcode() == CqeOpcode::RESP_SEND || c.cqe.opcode() == CqeOpcode::RESP_SEND_IMM {
                WC_RECV
            } else {
                u32::MAX
            };
            let flags = if c.cqe.opcode() == CqeOpcode::RESP_SEND_IMM { WC_WITH_IMM } else { 0 };
            let checks: [(&str, u64, u64); 11] = [
                ("status", w.base.status.into(), c.cqe.status().to_raw().into()),
                ("opcode", w.base.opcode.into(), opcode.into()),
                ("wc_flags", w.base.wc_flags.into(), flags.into()),
                ("byte_len (byte_cnt: filler, strides, length)", w.base.byte_len.into(), c.raw_byte_cnt().into()),
                (
                    "wr_id (the slot of wqe_counter, the stride index)",
                    w.base.wr_id,
                    TAG | u64::from(u32::from(c.stride_index) & (self.wqe_cnt - 1)),
                ),
                ("qp_num", w.base.qp_num.into(), c.cqe.qpn().into()),
                ("src_qp", w.src_qp.into(), c.cqe.src_qp().into()),
                ("slid", w.slid.into(), c.cqe.slid().into()),
                ("sl", w.sl.into(), c.cqe.sl().into()),
                ("dlid_path_bits", w.dlid_path_bits.into(), c.cqe.dlid_path_bits().into()),
                ("imm", if flags != 0 { w.imm.into() } else { 0 }, if flags != 0 { c.cqe.imm().into() } else { 0 }),
            ];
            for (f, t, u) in checks {
                if t != u {
                    return Err(mismatch(kind, &at, f, None, format!("{t:#x}"), format!("{u:#x}")));
                }
            }
            // What libmlx5 does not read, against the generator.
            let gen = [
                ("wqe_index", u64::from(p.slot), u64::from(c.wqe_index)),
                ("stride_index", u64::from(p.stride), u64::from(c.stride_index)),
                ("strides", u64::from(p.strides), u64::from(c.strides)),
                ("filler", u64::from(p.filler), u64::from(c.filler)),
                ("byte_len", u64::from(p.len), u64::from(c.byte_len)),
            ];
            for (f, t, u) in gen {
                if t != u {
                    return Err(mismatch(
                        kind,
                        &at,
                        &format!("{f} (the generator's)"),
                        None,
                        t.to_string(),
                        u.to_string(),
                    ));
                }
            }
            let payload = self.ring.payload(&c);
            let want = (!p.filler).then(|| {
                let shift = if self.params.two_byte_shift { 2 } else { 0 };
                (
                    self.addrs[usize::from(p.slot)]
                        + u64::from(p.stride) * u64::from(self.params.stride_bytes())
                        + shift,
                    p.len,
                )
            });
            if payload != want {
                return Err(mismatch(
                    kind,
                    &at,
                    "payload (the generator's)",
                    None,
                    format!("{want:x?}"),
                    format!("{payload:x?}"),
                ));
            }
            let back = self.ring.complete(&c);
            let want = Ok(p.last.then_some(p.slot));
            if back != want {
                return Err(mismatch(
                    kind,
                    &at,
                    "WQE handed back (the generator's last stride)",
                    None,
                    format!("{want:?}"),
                    format!("{back:?}"),
                ));
            }
            // Offered again, and the one before it after it: refused.
            for (what, again) in [("replay", Some(c)), ("out of order", prev)] {
                let Some(again) = again else { continue };
                let (free, out) = (self.ring.free(), self.ring.outstanding());
                let refused = self.ring.complete(&again);
                let ok = matches!(refused, Err(StrideRefusal::Taken { .. }))
                    && self.ring.payload(&again).is_none()
                    && (self.ring.free(), self.ring.outstanding()) == (free, out);
                if !ok {
                    return Err(mismatch(
                        kind,
                        &at,
                        &format!("refusal of a {what} (B-2)"),
                        None,
                        "Err(Taken)".into(),
                        format!("{refused:?}"),
                    ));
                }
                if what == "replay" {
                    stats.refused_replays += 1;
                } else {
                    stats.refused_out_of_order += 1;
                }
            }
            prev = Some(c);
            stats.handed_back += usize::from(matches!(back, Ok(Some(_))));
            stats.fillers += usize::from(c.filler);
            stats.with_imm += usize::from(flags != 0);
            stats.cqes += 1;
        }
        assert_eq!(self.ring.stray(), 0, "no completion names a WQE not posted");
        Ok(())
    }
}

/// The WQ number of the other WQ sharing `wqn`'s CQ.
fn other_wqn(wqn: u32) -> u32 {
    wqn ^ 0x40_0000
}

fn bytes(c: &Cqe64) -> [u8; 64] {
    // SAFETY: `Cqe64` is 64 plain bytes without padding.
    unsafe { std::mem::transmute(*c) }
}

/// Runs `cases` WQs; `Mutation::MprqStrides` flips bit 0 of the first
/// non-filler completion's stride count as we decode it,
/// `Mutation::MprqLkey` bit 0 of the first WQE's key as we post it.
pub fn check(cases: usize, seed: u64, mutation: Mutation) -> Result<Stats, Box<Mismatch>> {
    let _g = super::batch::exclusive();
    let mut rng = Rng(seed);
    let mut stats = Stats::default();
    let mut mutate = mutation == Mutation::MprqStrides;
    let mut mutate_wqe = mutation == Mutation::MprqLkey;
    let mut li = 0;
    for n in 0..cases {
        let mut case = Case::new(&mut rng, n);
        stats.two_byte_shift += usize::from(case.params.two_byte_shift);
        let steps = 8 + rng.below(24) as usize;
        for s in 0..steps {
            if rng.chance(40) {
                case.post(&mut rng, li, &mut mutate_wqe, &mut stats)?;
                li += 1;
            } else {
                case.poll(&mut rng, s, &mut mutate, &mut stats)?;
            }
        }
        stats.wqs += 1;
    }
    Ok(stats)
}
