//! The Rust side of `cargo xtask bench-wqe`: `wqe_cost ROW N` builds N
//! direct WQEs of one kind (ROW) with the typed builders of
//! `rrddmma::mlx5dv` and rings the plain (non-BlueFlame) doorbell, over
//! memory of its own (no device). The C side, benches/wqe_cost/wqe_cost.c,
//! does the same work with the `mlx5dv.h` helpers; callgrind counts both
//! (the difference between runs of N and 0).
//!
//! The work around each WQE is the same on both sides: a CQ of plain memory
//! where this program writes the CQE the device would, for the last WQE,
//! whenever half the ring is outstanding, polled and the ring freed through
//! it (`SqRing::retire`).
//!
//! `wqe_cost --rows` lists the rows.

use rrddmma::mlx5dv::be::{Be16, Be32, Be64};
use rrddmma::mlx5dv::cq::CqRing;
use rrddmma::mlx5dv::cqe::{Completion, Cqe64, CqeOpcode};
use rrddmma::mlx5dv::eth::CsumFlags;
use rrddmma::mlx5dv::mini::{CqeFormat, CqeResFormat, MiniCqe};
use rrddmma::mlx5dv::mmio::HwMmio;
use rrddmma::mlx5dv::mprq::{MprqRing, StrideCompletion, StridingParams};
use rrddmma::mlx5dv::seg::{CtrlFlags, DatagramSeg};
use rrddmma::mlx5dv::sq::{SqLimits, SqRing, SqTransport};
use rrddmma::mlx5dv::tm_wqe::{TmOpts, TmRing};
use rrddmma::mlx5dv::umr::{KlmEntry, RawLayout};
use rrddmma::mlx5dv::wqe::{DciStream, ExtAtomics};
use rrddmma::prim::{AccessFlags, RemoteAddr, Sge};

/// Send queue blocks.
const BBS: u32 = 64;
/// CQ entries.
const CQES: u32 = 4;
/// WQEs per doorbell in the batch row.
const BATCH: u64 = 32;

/// The rows: name and what one iteration posts.
const ROWS: &[&str] = &[
    "write",
    "write_inline32",
    "send",
    "read",
    "cas",
    "fetch_add",
    "masked_cas8",
    "masked_cas16",
    "dc_write",
    "batch32",
    "umr_klm4",
    "tag_add",
    "eth42",
    "tso",
    "mprq",
    "poll",
    "zip",
];

#[repr(C, align(64))]
struct Ring([u8; BBS as usize * 64]);

/// A send queue and its CQ over plain memory, and the stand-in device that
/// writes a requester CQE into the CQ.
struct Bench {
    ring: *const u8,
    sq: SqRing,
    cq: CqRing,
    cqes: *mut Cqe64,
    produced: u32,
    out: [Completion; 1],
    mmio: HwMmio,
}

impl Bench {
    fn new() -> Bench {
        let ring = Box::leak(Box::new(Ring([0; BBS as usize * 64])));
        let dbrec = Box::leak(Box::new([Be32::default(); 2]));
        let reg = Box::leak(Box::new([0u64; 8]));
        // SAFETY: plain memory standing in for the queue, record and
        // register, leaked (alive until the process ends).
        let sq = unsafe {
            SqRing::from_raw(ring.0.as_mut_ptr(), BBS, dbrec.as_mut_ptr().add(1), reg.as_mut_ptr().cast(), 0, 0x1234)
        };
        // Invalid, owner 0: a fresh CQ.
        let cqes = Box::leak(vec![Cqe64 { op_own: 0xf0, ..Cqe64::default() }; CQES as usize].into_boxed_slice());
        let cq_db = Box::leak(Box::new([Be32::default(); 2]));
        let uar = Box::leak(Box::new([0u64; 8]));
        let base = cqes.as_mut_ptr();
        // SAFETY: plain memory standing in for the CQ, leaked; this program
        // is its only producer.
        let cq = unsafe {
            CqRing::from_raw(base.cast_const().cast(), CQES, 64, cq_db.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x77)
        };
        let mut b = Bench {
            ring: ring.0.as_ptr(),
            sq,
            cq,
            cqes: base,
            produced: 0,
            out: [Completion::default()],
            mmio: HwMmio,
        };
        b.sq.bind_cq(&b.cq);
        b
    }

    /// The device's side: a requester CQE for the WQE at `pi`.
    #[inline(always)]
    fn device_cqe(&mut self, pi: u16) {
        let op = CqeOpcode::REQ.to_raw();
        let owner = u8::from(self.produced & CQES != 0);
        // Bytes 56-63: `sop_drop_qpn`, `wqe_counter`, `signature`, `op_own`;
        // the rest 0 (as the C side's zeroed struct).
        let sop = Be32::new((u32::from(op) << 24) | self.sq.qpn()).raw();
        let last = if cfg!(target_endian = "little") {
            u64::from(sop) | (u64::from(Be16::new(pi).raw()) << 32) | (u64::from((op << 4) | owner) << 56)
        } else {
            let ([s0, s1, s2, s3], [c0, c1]) = (sop.to_ne_bytes(), pi.to_be_bytes());
            u64::from_ne_bytes([s0, s1, s2, s3, c0, c1, 0, (op << 4) | owner])
        };
        let slot = self.cqes.wrapping_add((self.produced % CQES) as usize).cast::<u64>();
        for (k, w) in [0, 0, 0, 0, 0, 0, 0, last].into_iter().enumerate() {
            // SAFETY: word `k` of a CQE slot of the leaked buffer (64 bytes
            // aligned to 8), written through the pointer the ring reads it
            // by, word by word (as the C side's volatile struct store).
            unsafe { std::ptr::write_volatile(slot.add(k), w) };
        }
        self.produced += 1;
    }

    /// After a post: at half a ring outstanding, the device completes the
    /// last WQE; its completion is polled and frees the ring.
    #[inline(always)]
    fn account(&mut self, pi: u16) {
        if self.sq.available() <= BBS / 2 {
            self.device_cqe(pi);
            if self.cq.poll(&mut self.out) == 1 {
                self.sq.retire(&self.out[0]);
            }
        }
    }
}

fn at(i: u64) -> RemoteAddr {
    RemoteAddr { addr: 0x10000 + i * 64, rkey: 0x55 }
}

const F: CtrlFlags = CtrlFlags::CQ_UPDATE;

// One function per row, never inlined, so that a profile names it.

#[inline(never)]
fn write(b: &mut Bench, i: u64) -> u16 {
    // SAFETY: no device reads this ring (plain memory).
    unsafe { b.sq.write(F, at(i)).data(64, 0x66, 0x20000 + i * 64) }.post(&mut b.mmio)
}

#[inline(never)]
fn write_inline32(b: &mut Bench, i: u64, payload: &[u8; 32]) -> u16 {
    b.sq.write(F, at(i)).inline(payload).post(&mut b.mmio)
}

#[inline(never)]
fn send(b: &mut Bench, i: u64) -> u16 {
    // SAFETY: as in `write`.
    unsafe { b.sq.send(F).data(64, 0x66, 0x20000 + i * 64) }.post(&mut b.mmio)
}

#[inline(never)]
fn read(b: &mut Bench, i: u64) -> u16 {
    // SAFETY: as in `write`.
    unsafe { b.sq.read(F, at(i)).data(64, 0x66, 0x20000 + i * 64) }.post(&mut b.mmio)
}

#[inline(never)]
fn cas(b: &mut Bench, i: u64) -> u16 {
    // SAFETY: as in `write`.
    unsafe { b.sq.cas(F, at(i), i, i + 1).data(8, 0x66, 0x20000 + i * 8) }.post(&mut b.mmio)
}

#[inline(never)]
fn fetch_add(b: &mut Bench, i: u64) -> u16 {
    // SAFETY: as in `write`.
    unsafe { b.sq.fetch_add(F, at(i), 1).data(8, 0x66, 0x20000 + i * 8) }.post(&mut b.mmio)
}

#[inline(never)]
fn masked_cas8(b: &mut Bench, i: u64) -> u16 {
    // SAFETY: as in `write`.
    unsafe { b.sq.masked_cas(F, at(i), i, 0xff, i + 1, 0xff).data(8, 0x66, 0x20000 + i * 8) }.post(&mut b.mmio)
}

#[inline(never)]
fn masked_cas16(b: &mut Bench, i: u64, ops: &[[u8; 16]; 4], ext: &ExtAtomics<16, false>) -> u16 {
    let w = b.sq.masked_cas_ext(*ext, F, at(i), &ops[0], &ops[1], &ops[2], &ops[3]);
    // SAFETY: as in `write`.
    unsafe { w.data(16, 0x66, 0x20000 + i * 16) }.post(&mut b.mmio)
}

/// The stream ids are checked once, when the ring is set up
/// (`SqRing::stream_id`); each WQE names one of them.
#[inline(never)]
fn dc_write(b: &mut Bench, i: u64, target: &DatagramSeg, streams: &[DciStream; 64]) -> u16 {
    let w = b.sq.dc(target).on(streams[(i & 63) as usize]).write(F, at(i));
    // SAFETY: as in `write`.
    unsafe { w.data(64, 0x66, 0x20000 + i * 64) }.post(&mut b.mmio)
}

/// 32 WRITEs, only the last signalled, one doorbell.
#[inline(never)]
fn batch32(b: &mut Bench, i: u64) -> u16 {
    for k in 0..BATCH - 1 {
        // SAFETY: as in `write`.
        unsafe { b.sq.write(CtrlFlags::empty(), at(i + k)).data(64, 0x66, 0x20000 + (i + k) * 64) }.finish();
    }
    // SAFETY: as in `write`.
    unsafe { b.sq.write(F, at(i + BATCH - 1)).data(64, 0x66, 0x20000 + (i + BATCH - 1) * 64) }.post(&mut b.mmio)
}

/// UMR: an indirect key configured over four ranges (a KLM list, inline),
/// with access rights, and the doorbell with it (`mlx5dv_wr_mkey_configure`
/// with the access and list setters, `ibv_wr_complete`).
#[inline(never)]
fn umr_klm4(b: &mut Bench, klm: &[KlmEntry; 4]) -> u16 {
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    // SAFETY: no device reads this ring, and the ranges are never used.
    let r =
        unsafe { b.sq.mkey_configure_raw_post(&mut b.mmio, F, 0x4200, 4, Some(access), Some(RawLayout::List(klm))) };
    // A refusal ends the program, as the C sides' `abort()`.
    r.unwrap_or_else(|_| std::process::abort())
}

/// A 42-byte packet (Ethernet, IPv4, UDP headers) all inline: 18 bytes in
/// the Ethernet segment, the other 24 in an inline segment.
#[inline(never)]
fn eth42(b: &mut Bench, pkt: &[u8; 42]) -> u16 {
    b.sq.send_eth(F, CsumFlags::L3.union(CsumFlags::L4), &pkt[..18]).inline(&pkt[18..]).post(&mut b.mmio)
}

/// A TSO of 64 KiB: 54 bytes of headers (Ethernet, IPv4, TCP) inline, MSS
/// 1448, the payload by one data segment.
#[inline(never)]
fn tso(b: &mut Bench, i: u64, hdr: &[u8; 54]) -> u16 {
    let w = b.sq.send_tso(F, CsumFlags::L3.union(CsumFlags::L4), 1448, hdr);
    // SAFETY: as in `write`.
    unsafe { w.data(65536 - 54, 0x66, 0x20000 + i * 64) }.post(&mut b.mmio)
}

/// One requester completion written by the device and polled.
#[inline(never)]
/// One requester completion written by the device and polled into the
/// caller's array (`b.out`, as the C side's `wcs`).
fn poll(b: &mut Bench, i: u64) -> usize {
    b.device_cqe(i as u16);
    b.cq.poll(&mut b.out)
}

/// CQ entries of the compressed-session row, and CQEs per session.
const ZIP_CQES: u32 = 16;
const SESSION: u32 = 8;

/// A CQ of [`ZIP_CQES`] plain-memory entries expanding sessions (hash
/// format), and the stand-in device writing them.
struct Zip {
    cq: CqRing,
    cqes: *mut Cqe64,
    produced: u32,
    out: [Completion; SESSION as usize],
}

impl Zip {
    fn new() -> Zip {
        let cqes = Box::leak(vec![Cqe64 { op_own: 0xf0, ..Cqe64::default() }; ZIP_CQES as usize].into_boxed_slice());
        let cq_db = Box::leak(Box::new([Be32::default(); 2]));
        let uar = Box::leak(Box::new([0u64; 8]));
        let base = cqes.as_mut_ptr();
        // SAFETY: plain memory standing in for the CQ, leaked; this program
        // is its only producer, and the buffer is writable (`set_compression`).
        let mut cq = unsafe {
            CqRing::from_raw(base.cast_const().cast(), ZIP_CQES, 64, cq_db.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x78)
        };
        // SAFETY: as above.
        unsafe { cq.set_compression(Some(CqeResFormat::Hash)) };
        Zip { cq, cqes: base, produced: 0, out: [Completion::default(); SESSION as usize] }
    }
}

/// One compressed session of eight receive CQEs (title and one mini-CQE
/// array), written by the device, then polled and expanded. The device's
/// side is the C side's `device_session`: the title copied, its count and
/// owner bit set, the array stored, then the title.
#[inline(never)]
fn zip(z: &mut Zip, title: &[u64; 8], minis: &[u64; SESSION as usize]) -> usize {
    let idx = (z.produced % ZIP_CQES) as usize;
    let owner = u64::from(z.produced & ZIP_CQES != 0);
    let mut t = *title;
    // `byte_cnt` (bytes 44-47) and the owner bit (bit 0 of byte 63), in
    // the words' native byte order.
    let (cnt_at, owner_at) = if cfg!(target_endian = "little") { (32, 56) } else { (0, 0) };
    t[5] = (t[5] & !(0xffff_ffff << cnt_at)) | (u64::from(Be32::new(SESSION).raw()) << cnt_at);
    t[7] |= owner << owner_at;
    let slot = z.cqes.cast::<[u64; 8]>();
    // SAFETY: entries `idx` and `idx + 1` of the leaked buffer (sessions
    // start at multiples of 8 in a ring of 16), the array first, the title
    // last, as the device hands them over.
    unsafe {
        std::ptr::write_volatile(slot.add(idx + 1), *minis);
        std::ptr::write_volatile(slot.add(idx), t);
    }
    z.produced += SESSION;
    z.cq.poll(&mut z.out)
}

/// Tags in the tag-matching row's list: more than a run adds (an entry
/// comes back only with a match, which this row does not make: it counts
/// the add and its command completions).
const TM_TAGS: u32 = 65535;
/// The tag-matching SRQ's number, which its CQEs carry (`srqn_uidx`).
const SRQN: u32 = 0x99;
/// Tag adds per signaled one (and per command completion).
const TM_SIGNAL_EVERY: u64 = 32;

/// A tag-matching SRQ's command QP over plain memory ([`BBS`] blocks), its
/// tag list, and the SRQ's CQ, where the stand-in device writes the
/// completion of each signaled add.
struct Tm {
    ring: *const u8,
    tm: TmRing,
    cq: CqRing,
    cqes: *mut Cqe64,
    produced: u32,
    out: [Cqe64; 1],
    mmio: HwMmio,
}

impl Tm {
    fn new() -> Tm {
        let ring = Box::leak(Box::new(Ring([0; BBS as usize * 64])));
        let dbrec = Box::leak(Box::new([Be32::default(); 2]));
        let reg = Box::leak(Box::new([0u64; 8]));
        // SAFETY: plain memory standing in for the command QP's queue,
        // record and register, leaked (alive until the process ends); a
        // fresh ring that only this `TmRing` posts on, its list of TM_TAGS
        // entries none added, and every tag-matching CQE of the CQ below
        // (written by this program for this SRQ) given to `complete` once.
        let tm = unsafe {
            let sq = SqRing::from_raw(
                ring.0.as_mut_ptr(),
                BBS,
                dbrec.as_mut_ptr().add(1),
                reg.as_mut_ptr().cast(),
                0,
                0x1234,
            );
            TmRing::from_raw(sq, TM_TAGS)
        };
        let cqes = Box::leak(vec![Cqe64 { op_own: 0xf0, ..Cqe64::default() }; CQES as usize].into_boxed_slice());
        let cq_db = Box::leak(Box::new([Be32::default(); 2]));
        let uar = Box::leak(Box::new([0u64; 8]));
        let base = cqes.as_mut_ptr();
        // SAFETY: plain memory standing in for the CQ, leaked; this program
        // is its only producer.
        let cq = unsafe {
            CqRing::from_raw(base.cast_const().cast(), CQES, 64, cq_db.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x79)
        };
        Tm { ring: ring.0.as_ptr(), tm, cq, cqes: base, produced: 0, out: [Cqe64::default()], mmio: HwMmio }
    }

    /// The device's side: the completion of a signaled add (no packet, tag
    /// matching, APPEND, success), as the C side's `device_tm_cqe`.
    #[inline(always)]
    fn device_cqe(&mut self, pi: u16) {
        let owner = u8::from(self.produced & CQES != 0);
        let srqn = Be32::new(SRQN).raw().to_ne_bytes();
        let qpn = Be32::new(self.tm.sq().qpn()).raw().to_ne_bytes();
        let pi = pi.to_be_bytes();
        // Bytes 0-3 `tm_cqe.success` (bit 31), 32-35 `srqn_uidx`, 40-43
        // `app`, `app_op` (APPEND), `app_info`; 56-63 `sop_drop_qpn`,
        // `wqe_counter`, `signature`, `op_own`; the rest 0.
        let w0 = u64::from_ne_bytes([0x80, 0, 0, 0, 0, 0, 0, 0]);
        let w4 = u64::from_ne_bytes([srqn[0], srqn[1], srqn[2], srqn[3], 0, 0, 0, 0]);
        let w5 = u64::from_ne_bytes([1, 0x5, 0, 0, 0, 0, 0, 0]);
        let op_own = (CqeOpcode::NO_PACKET.to_raw() << 4) | owner;
        let w7 = u64::from_ne_bytes([qpn[0], qpn[1], qpn[2], qpn[3], pi[0], pi[1], 0, op_own]);
        let slot = self.cqes.wrapping_add((self.produced % CQES) as usize).cast::<u64>();
        for (k, w) in [w0, 0, 0, 0, w4, w5, 0, w7].into_iter().enumerate() {
            // SAFETY: word `k` of a CQE slot of the leaked buffer (64 bytes
            // aligned to 8), written through the pointer the ring reads it
            // by, word by word (as the C side's volatile struct store).
            unsafe { std::ptr::write_volatile(slot.add(k), w) };
        }
        self.produced += 1;
    }
}

/// A tag add with its buffer and its doorbell (`TmRing::add_buf_post`:
/// `ibv_post_srq_ops` of one `IBV_WR_TAG_ADD`), signaled every [`TM_SIGNAL_EVERY`]th; the
/// signaled one's completion is written by the device, polled and taken
/// (`TmRing::complete`: the command ring retired through it).
#[inline(never)]
fn tag_add(t: &mut Tm, i: u64) -> u16 {
    let opts = if i % TM_SIGNAL_EVERY == TM_SIGNAL_EVERY - 1 { TmOpts::new().signaled(i) } else { TmOpts::new() };
    let buf = Sge::from_raw(0x20000 + i * 64, 64, 0x66);
    // SAFETY: no device reads this ring or writes the buffer (plain memory).
    let r = unsafe { t.tm.add_buf_post(i, !0, buf, i, opts, &mut t.mmio) };
    // A refusal ends the program, as the C sides' `abort()`.
    if r.is_err() {
        std::process::abort();
    }
    t.tm.sq().cur_post() as u16
}

/// Striding WQEs of the `mprq` row: 8 strides of 64 bytes.
const MPRQ: StridingParams = StridingParams { log_stride_bytes: 6, log_num_strides: 3, two_byte_shift: false };
/// The striding WQ's number, which its CQEs carry.
const WQN: u32 = 0x1234;
/// Receive completions polled at once in the `mprq` row (half the WQ).
const MPRQ_BATCH: usize = BBS as usize / 2;

/// A striding WQ of [`BBS`] WQEs of 32 bytes (next segment and one data
/// segment) in the C side's ring's place, and its CQ, where the stand-in
/// device writes one packet per WQE taking all its strides.
struct Mprq {
    ring: *const u8,
    rq: MprqRing,
    cq: CqRing,
    cqes: *mut Cqe64,
    produced: u32,
    out: [StrideCompletion; MPRQ_BATCH],
}

/// CQ entries of the `mprq` row.
const MPRQ_CQES: u32 = 64;

impl Mprq {
    fn new() -> Mprq {
        let ring = Box::leak(Box::new(Ring([0; BBS as usize * 64])));
        let dbrec = Box::leak(Box::new([Be32::default(); 2]));
        let cqes = Box::leak(vec![Cqe64 { op_own: 0xf0, ..Cqe64::default() }; MPRQ_CQES as usize].into_boxed_slice());
        let cq_db = Box::leak(Box::new([Be32::default(); 2]));
        let uar = Box::leak(Box::new([0u64; 8]));
        let base = cqes.as_mut_ptr();
        // SAFETY: plain memory standing in for the CQ, leaked; this program
        // is its only producer.
        let cq = unsafe {
            CqRing::from_raw(base.cast_const().cast(), MPRQ_CQES, 64, cq_db.as_mut_ptr(), uar.as_mut_ptr().cast(), 0x7a)
        };
        // SAFETY: BBS WQEs of 32 bytes inside the leaked ring (4 KiB), and
        // a leaked record; only this ring posts to them, and WQN is the
        // number this program's CQEs carry.
        let rq = unsafe { MprqRing::from_raw(ring.0.as_mut_ptr(), BBS, 32, dbrec.as_mut_ptr(), MPRQ, WQN, &cq) };
        Mprq { ring: ring.0.as_ptr(), rq, cq, cqes: base, produced: 0, out: [StrideCompletion::default(); MPRQ_BATCH] }
    }

    /// The device's side: a packet filling WQE `wqe` (all its strides from
    /// stride 0), as the C side's `device_mprq_cqe`.
    #[inline(always)]
    fn device_cqe(&mut self, wqe: u16) {
        let op = CqeOpcode::RESP_SEND.to_raw();
        let owner = u8::from(self.produced & MPRQ_CQES != 0);
        let id = wqe.to_be_bytes();
        let bc = Be32::new((MPRQ.num_strides() << 16) | MPRQ.wqe_bytes()).raw().to_ne_bytes();
        let sop = Be32::new((u32::from(op) << 24) | WQN).raw().to_ne_bytes();
        // Bytes 2-3 `wqe_id`, 44-47 `byte_cnt`, 56-63 `sop_drop_qpn`,
        // `wqe_counter` (stride 0), `signature`, `op_own`; the rest 0.
        let w0 = u64::from_ne_bytes([0, 0, id[0], id[1], 0, 0, 0, 0]);
        let w5 = u64::from_ne_bytes([0, 0, 0, 0, bc[0], bc[1], bc[2], bc[3]]);
        let w7 = u64::from_ne_bytes([sop[0], sop[1], sop[2], sop[3], 0, 0, 0, (op << 4) | owner]);
        let slot = self.cqes.wrapping_add((self.produced % MPRQ_CQES) as usize).cast::<u64>();
        for (k, w) in [w0, 0, 0, 0, 0, w5, 0, w7].into_iter().enumerate() {
            // SAFETY: word `k` of a CQE slot of the leaked buffer (64 bytes
            // aligned to 8), written through the pointer the ring reads it
            // by, word by word (as the C side's volatile struct store).
            unsafe { std::ptr::write_volatile(slot.add(k), w) };
        }
        self.produced += 1;
    }

    /// After a post: at half the WQ outstanding, the device fills every
    /// outstanding WQE (one packet each); the completions are polled and
    /// each WQE handed back.
    #[inline(always)]
    fn account(&mut self) {
        if self.rq.outstanding() >= BBS / 2 {
            let first = self.rq.head().wrapping_sub(self.rq.outstanding());
            for k in 0..self.rq.outstanding() {
                self.device_cqe(first.wrapping_add(k) as u16);
            }
            let n = self.cq.poll_strides(&mut self.out);
            for c in &self.out[..n] {
                if self.rq.complete(c).is_err() {
                    std::process::abort();
                }
            }
        }
    }
}

/// One striding WQE posted, with its doorbell record (`ibv_post_wq_recv`
/// of one request).
#[inline(never)]
fn mprq(m: &mut Mprq, i: u64) -> u16 {
    // SAFETY: no device writes the buffer (plain memory, never read).
    let Some(slot) = (unsafe { m.rq.post(0x66, 0x20000 + i * 512) }) else { std::process::abort() };
    m.rq.ring_doorbell();
    slot
}

fn usage(msg: &str) -> ! {
    eprintln!("wqe_cost: {msg}\nusage: wqe_cost ROW [ITERATIONS] | wqe_cost --rows\nrows: {}", ROWS.join(" "));
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--rows") {
        println!("{}", ROWS.join("\n"));
        return;
    }
    let Some(row) = args.first() else { usage("no row") };
    let n: u64 = match args.get(1).map(|s| s.parse()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(e)) => usage(&format!("ITERATIONS: {e}")),
    };
    let mut b = Bench::new();
    let payload = [0x41u8; 32];
    let ops = [[0x11u8; 16], [0x22; 16], [0x33; 16], [0x44; 16]];
    let target =
        DatagramSeg { key: Be64::new(0x1234_5678), dqp_dct: Be32::new(0x8000_0000 | 0x4242), ..Default::default() };
    let mut sum = 0u64;
    // The ring the dump prints: the send queue's, or the row's own.
    let mut dump = b.ring;
    // The producer index printed: the send queue's, or the row's own.
    let mut cur_post = None;
    match row.as_str() {
        "write" => (0..n).for_each(|i| {
            let pi = write(&mut b, i);
            b.account(pi);
        }),
        "write_inline32" => (0..n).for_each(|i| {
            let pi = write_inline32(&mut b, i, &payload);
            b.account(pi);
        }),
        "send" => (0..n).for_each(|i| {
            let pi = send(&mut b, i);
            b.account(pi);
        }),
        "read" => (0..n).for_each(|i| {
            let pi = read(&mut b, i);
            b.account(pi);
        }),
        "cas" => (0..n).for_each(|i| {
            let pi = cas(&mut b, i);
            b.account(pi);
        }),
        "fetch_add" => (0..n).for_each(|i| {
            let pi = fetch_add(&mut b, i);
            b.account(pi);
        }),
        "masked_cas8" => (0..n).for_each(|i| {
            let pi = masked_cas8(&mut b, i);
            b.account(pi);
        }),
        "masked_cas16" => {
            // The device's atomic sizes are checked once, at set-up
            // (`ExtAtomics::from_caps`); here there is no device.
            // SAFETY: no device reads this ring.
            let ext = unsafe { ExtAtomics::assume() };
            (0..n).for_each(|i| {
                let pi = masked_cas16(&mut b, i, &ops, &ext);
                b.account(pi);
            })
        }
        "dc_write" => {
            // SAFETY: the ring's WQEs are DC initiator WQEs from here on
            // (no device reads them).
            unsafe { b.sq.set_transport(SqTransport::DcInitiator) };
            b.sq.set_dci_streams(6);
            let streams: [DciStream; 64] = std::array::from_fn(|k| b.sq.stream_id(k as u16));
            (0..n).for_each(|i| {
                let pi = dc_write(&mut b, i, &target, &streams);
                b.account(pi);
            })
        }
        // N counts WQEs: N / 32 batches.
        "batch32" => (0..n / BATCH).for_each(|j| {
            let pi = batch32(&mut b, j * BATCH);
            b.account(pi);
        }),
        "umr_klm4" => {
            b.sq.set_limits(SqLimits::new(128, 4, 1024));
            let klm: [KlmEntry; 4] =
                std::array::from_fn(|k| KlmEntry { lkey: 0x66 + k as u32, addr: 0x20000 + k as u64 * 4096, len: 4096 });
            (0..n).for_each(|_| {
                let pi = umr_klm4(&mut b, &klm);
                b.account(pi);
            })
        }
        "eth42" | "tso" => {
            // SAFETY: the ring's WQEs are raw packet WQEs from here on.
            unsafe { b.sq.set_transport(SqTransport::RawPacket) };
            let hdr: [u8; 54] = std::array::from_fn(|k| k as u8);
            if row == "eth42" {
                let pkt: &[u8; 42] = hdr[..42].try_into().expect("42 bytes");
                (0..n).for_each(|_| {
                    let pi = eth42(&mut b, pkt);
                    b.account(pi);
                })
            } else {
                (0..n).for_each(|i| {
                    let pi = tso(&mut b, i, &hdr);
                    b.account(pi);
                })
            }
        }
        "tag_add" => {
            let mut t = Tm::new();
            dump = t.ring;
            (0..n).for_each(|i| {
                let pi = tag_add(&mut t, i);
                if i % TM_SIGNAL_EVERY == TM_SIGNAL_EVERY - 1 {
                    t.device_cqe(pi.wrapping_sub(1));
                    if t.cq.poll_cqes(&mut t.out) == 1 && t.tm.complete(&t.out[0]).is_none() {
                        std::process::abort();
                    }
                }
            });
            sum = u64::from(t.tm.sq().cur_post());
            cur_post = Some(t.tm.sq().cur_post());
        }
        "mprq" => {
            let mut m = Mprq::new();
            dump = m.ring;
            (0..n).for_each(|i| {
                sum += u64::from(mprq(&mut m, i));
                m.account();
            });
        }
        "poll" => (0..n).for_each(|i| sum += poll(&mut b, i) as u64),
        // N counts CQEs: N / 8 sessions.
        "zip" => {
            let mut z = Zip::new();
            let title = Cqe64 {
                sop_drop_qpn: Be32::new(0x1234),
                wqe_counter: Be16::new(0x10),
                op_own: (CqeOpcode::RESP_SEND.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2),
                ..Cqe64::default()
            };
            let minis: [MiniCqe; SESSION as usize] =
                std::array::from_fn(|k| MiniCqe { info: [k as u8, 1, 2, 3], byte_cnt: Be32::new(64 + k as u32) });
            // SAFETY: `Cqe64` and `[MiniCqe; 8]` are 64 bytes of plain
            // integers, as are eight words.
            let (title, minis) = unsafe {
                (
                    std::mem::transmute::<Cqe64, [u64; 8]>(title),
                    std::mem::transmute::<[MiniCqe; SESSION as usize], [u64; SESSION as usize]>(minis),
                )
            };
            (0..n / u64::from(SESSION)).for_each(|_| {
                let k = zip(&mut z, &title, &minis);
                for c in &z.out[..k] {
                    sum += u64::from(c.byte_len());
                }
            })
        }
        other => usage(&format!("unknown row {other:?}")),
    }
    println!("{row} {} {sum}", cur_post.unwrap_or_else(|| b.sq.cur_post()));
    // WQE_COST_DUMP=1: the ring's bytes, to compare with the C side's.
    if std::env::var_os("WQE_COST_DUMP").is_some() {
        // SAFETY: a leaked ring of BBS blocks of 64 bytes (`Bench::new`,
        // `Tm::new`, `Mprq::new`).
        let bytes = unsafe { std::slice::from_raw_parts(dump, BBS as usize * 64) };
        for block in bytes.chunks(64) {
            println!("{}", block.iter().map(|x| format!("{x:02x}")).collect::<String>());
        }
    }
}
