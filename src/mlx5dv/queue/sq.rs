//! The send queue as a ring of 64-byte basic blocks: a WQE writer that
//! accounts DS, pads inline data, wraps at the queue end and advances the
//! producer index, and the doorbell / BlueFlame sequence of libmlx5.
//!
//! Build WQEs with the typed builders of [`crate::mlx5dv::queue::wqe`] (`SqRing::write`,
//! `SqRing::send`, ...); the raw writer [`SqRing::wqe`] is `unsafe`.
//! [`SqRing::retire`] takes only completions polled from the bound
//! [`CqRing`]; WQEs are checked against the QP's [`SqLimits`].

use std::fmt;

use crate::mlx5dv::completion::cq::CqRing;
use crate::mlx5dv::completion::cqe::Completion;
use crate::mlx5dv::queue::be::{Be32, Be64};
use crate::mlx5dv::queue::mmio::Mmio;
use crate::mlx5dv::queue::seg::{
    AtomicSeg, CtrlFlags, DataSeg, DatagramSeg, EthSeg, MaskedCasSeg, MaskedFaSeg, RaddrSeg, TmSeg, WqeOpcode,
    DS_BYTES, INLINE_SEG, SEND_WQE_BB,
};

/// A send queue owned by this process: its buffer, doorbell record and
/// BlueFlame register, from [`crate::mlx5dv::queue::obj::sq_ring`] or, for tests, from raw
/// parts.
pub struct SqRing {
    buf: *mut u8,
    /// Basic blocks in the ring (a power of two).
    wqe_cnt: u32,
    /// `wqe_cnt - 1`, the slot table's index mask.
    slot_mask: u32,
    dbrec: *mut Be32,
    bf_reg: *mut u8,
    bf_size: u32,
    /// The BlueFlame size the queue has, for [`SqRing::set_blueflame`].
    pub(crate) bf_size_available: u32,
    /// Largest WQE (in DS) that fits the BlueFlame buffer; 0 without BlueFlame.
    bf_max_ds: u32,
    bf_offset: u32,
    qpn: u32,
    /// `qpn << 8`, the control segment's `qpn_ds` without the DS count
    /// (computed once, at creation).
    qpn_shl8: u32,
    /// Basic blocks posted (free-running).
    cur_post: u32,
    /// Basic blocks retired by completions (free-running).
    head: u32,
    /// WQEs written since the last doorbell.
    pending: u32,
    /// The first block (free-running) of the last WQE written; its DS
    /// count is in its control segment, its inline flag in its slot.
    last_start: u32,
    /// Byte mask of the ring (`wqe_cnt * 64 - 1`).
    ring_mask: usize,
    /// Largest WQE (DS) sent by BlueFlame without inline data: `bf_max_ds`
    /// when BlueFlame is preferred (libmlx5's default), else 0.
    bf_max_ds_plain: u32,
    /// Whether BlueFlame is preferred without inline data ([`SqRing::set_prefer_bf`]).
    prefer_bf: bool,
    /// Per basic block, one 8-byte entry written at `finish` ([`Slot`]):
    /// the free-running index of the WQE that covers it, and for a
    /// WQE's first block its size and DCI stream. Allocated once, at
    /// creation, with `wqe_cnt` entries.
    slots: Box<[Slot]>,
    /// The CQ ring whose completions `retire` takes (its number; 0: none yet).
    cq_uid: u64,
    /// Which typed builders fit the QP's WQE layout.
    transport: SqTransport,
    /// Per family ([`SqTransport`] as an index): `wqe_cnt` for the ring's
    /// own family, 0 for the others. A typed builder compares the
    /// outstanding blocks with its family's entry, so one comparison
    /// refuses both a full ring and a ring of another layout (the
    /// family is a property of the ring, checked when it is set, not per WQE).
    room: [u32; 5],
    /// The DCI stream ids WQEs may name: `0..dci_streams` (1 unless the
    /// DCI was created with streams, [`SqRing::set_dci_streams`]).
    dci_streams: u32,
    /// Completions of that ring at positions below this are stale: written
    /// before the binding or the last reset, or at or before the last one
    /// retired.
    floor: u64,
    limits: SqLimits,
    /// Per header size in 16-byte units `k` (below [`CAP_UNITS`]): how
    /// many data segments a WQE whose other units number `k` may hold,
    /// the smaller of `max_send_sge` and what `max_wqe_bytes` leaves
    /// (computed once, by [`SqRing::set_limits`]). A payload method
    /// compares its count with one entry, which checks both limits.
    data_cap: [u16; CAP_UNITS],
    /// Per header size in units `k`: the longest first inline segment's
    /// data, the smaller of `max_inline_data` and what `max_wqe_bytes`
    /// leaves after its 4-byte header (as `data_cap`).
    inline_cap: [u16; CAP_UNITS],
    /// Translation entries a UMR WQE may carry inline (`SqLimits::umr_entries`).
    umr_entries: u32,
    /// Fence bits the next WQE takes unless it asks for the strong fence:
    /// the small fence after a UMR WQE (libmlx5's `fm_cache`), so that
    /// nothing runs before the key it configured is ready.
    next_fence: u8,
}

/// The WQE layout family of a ring's QP, which decides the typed builders
/// of [`crate::mlx5dv::queue::wqe`] that fit it: a builder of another family panics, since
/// the device would read its segments at other offsets (for example a
/// UD QP reads the 48 bytes after the control segment as an address vector,
/// and the bytes after those as data segments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqTransport {
    /// RC and UC: the control segment, then the opcode's segments
    /// (`write`, `read`, `send`, atomics, `nop`).
    Connected,
    /// UD: the control segment, the address vector, the payload
    /// (`send_ud`, `nop`). A DCI's ring seen by a view that does not know
    /// it is one ([`crate::mlx5dv::queue::obj::sq_ring`] of a `DRIVER` QP) is one too: a
    /// SEND to a DCT has the same layout.
    Datagram,
    /// DC initiators (DCI), as [`Dci::sq_ring`](crate::mlx5dv::dc::Dci::sq_ring)
    /// makes their view: the control segment, the DC address (a datagram
    /// segment), then the opcode's segments; every opcode of a DCI through
    /// [`SqRing::dc`], and `nop`. Only here does the control segment carry
    /// a DCI stream.
    DcInitiator,
    /// Raw packet QPs: the control segment, the Ethernet segment with the
    /// packet's first bytes inline, then the rest of the packet
    /// ([`crate::mlx5dv::raw::eth`]'s `send_eth`, and `nop`).
    RawPacket,
    /// Any other layout (XRC): `nop` and the raw writer only.
    Other,
}

/// One basic block's entry in the ring's table (see `SqRing::slots`). A
/// block starts a WQE exactly when `start` equals its own free-running
/// index; continuation blocks hold their WQE's start, which differs from
/// theirs. `size` (blocks, and [`SLOT_INLINE`]) and `stream` (the DCI stream, 0 on other rings,
/// for [`SqRing::stream_of`]) are those of the WQE starting there.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
struct Slot {
    start: u32,
    size: u16,
    stream: u16,
}

/// Header sizes (in 16-byte units) the payload limits are tabled for;
/// longer headers (long TSO headers) compute them.
const CAP_UNITS: usize = 16;

/// The bit of `Slot::size` that says the WQE carries inline data (for the
/// BlueFlame choice of a later `ring`); the others are its blocks.
const SLOT_INLINE: u16 = 1 << 15;

/// The longest header (16-byte units, control segment included) whose first
/// data segment every ring's limits admit: 128 bytes (`SqLimits::MIN_WQE_BYTES`)
/// less the segment.
const FIRST_DATA_FREE: usize = (SqLimits::MIN_WQE_BYTES as usize - DS_BYTES) / DS_BYTES;

/// Free-running block indices older than this many blocks are swept from
/// the slot table (see `SqRing::sweep`), so that an entry never survives
/// the 2^32 blocks after which its index would come round again.
const SWEEP_SHIFT: u32 = 30;

impl SqLimits {
    /// Data segments a WQE whose other 16-byte units number `k` may hold
    /// (`k` may be "negative", wrapped: zero-length data segments count
    /// without taking a unit).
    fn data_cap(&self, k: usize) -> u32 {
        let units = (self.max_wqe_bytes as usize / DS_BYTES) as isize;
        let room = (units - k as isize).max(0) as u64;
        room.min(u64::from(self.max_send_sge)) as u32
    }

    /// Inline bytes a first inline segment may carry after `u` units.
    fn inline_cap(&self, u: usize) -> u32 {
        let units = self.max_wqe_bytes as usize / DS_BYTES;
        let room = (units.saturating_sub(u) * DS_BYTES).saturating_sub(4) as u64;
        room.min(u64::from(self.max_inline_data)) as u32
    }

    /// Translation entries a UMR WQE carries inline on the QP: those its
    /// `max_inline_data` takes (libmlx5's `(max_inline_data + 4) / 16`)
    /// and its largest WQE holds after the control segment, the UMR
    /// control segment and the key context (128 bytes), in groups of four
    /// units (the WQE pads its entries to a multiple of four).
    fn umr_entries(&self) -> u32 {
        let inline = (u64::from(self.max_inline_data) + 4) / 16;
        let size = ((self.max_wqe_bytes.saturating_sub(128) / DS_BYTES as u32) & !3) as u64;
        inline.min(size) as u32
    }

    fn tables(&self) -> ([u16; CAP_UNITS], [u16; CAP_UNITS]) {
        // Both stay below 4080 (255 units of 16 bytes).
        (
            std::array::from_fn(|k| self.data_cap(k).min(u32::from(u16::MAX)) as u16),
            std::array::from_fn(|k| self.inline_cap(k).min(u32::from(u16::MAX)) as u16),
        )
    }
}

impl SqTransport {
    const ALL: usize = 5;

    /// `room` for a ring of family `t` with `wqe_cnt` blocks.
    fn room(t: SqTransport, wqe_cnt: u32) -> [u32; SqTransport::ALL] {
        let mut r = [0; SqTransport::ALL];
        r[t as usize] = wqe_cnt;
        r
    }
}

/// What one WQE may hold: the QP's `max_inline_data` and `max_send_sge`,
/// and the largest WQE in bytes. [`WqeWriter`] panics when a WQE would go
/// beyond them (a programming error: the device would reject the WQE, or
/// read past what the queue was sized for).
///
/// [`obj::sq_ring`](crate::mlx5dv::queue::obj::sq_ring) takes them from the QP's granted
/// caps; a ring from [`SqRing::from_raw`] starts with [`SqLimits::NONE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqLimits {
    max_inline_data: u32,
    max_send_sge: u32,
    max_wqe_bytes: u32,
}

impl SqLimits {
    /// No limit but the WQE format's (255 DS of 16 bytes).
    pub const NONE: SqLimits = SqLimits { max_inline_data: u32::MAX, max_send_sge: u32::MAX, max_wqe_bytes: 255 * 16 };

    /// Inline bytes per WQE, data segments per WQE, bytes per WQE (at most
    /// the format's 255 DS of 16 bytes, at least [`SqLimits::MIN_WQE_BYTES`];
    /// at least one data segment: values outside are clamped).
    ///
    /// The floor is what libmlx5 gives every RC, UC, UD and DC queue (its
    /// WQE size holds the control segment, the longest header of the QP's
    /// type and a data segment, 192 bytes at least on RC and DC), and it
    /// makes a property of every ring what would otherwise be checked per
    /// WQE: a WQE within two basic blocks never needs the size check, and
    /// the first data segment after a typed header of at most 112 bytes
    /// ([`SqRing::write`], the atomics, the masked atomics up to 16 bytes,
    /// the DC builders up to 8 bytes) none either.
    pub const fn new(max_inline_data: u32, max_send_sge: u32, max_wqe_bytes: u32) -> SqLimits {
        let cap = 255 * DS_BYTES as u32;
        let bytes = if max_wqe_bytes < cap { max_wqe_bytes } else { cap };
        let bytes = if bytes > SqLimits::MIN_WQE_BYTES { bytes } else { SqLimits::MIN_WQE_BYTES };
        let sge = if max_send_sge > 0 { max_send_sge } else { 1 };
        SqLimits { max_inline_data, max_send_sge: sge, max_wqe_bytes: bytes }
    }

    /// The smallest largest-WQE a ring takes: two basic blocks, 128 bytes.
    pub const MIN_WQE_BYTES: u32 = 2 * SEND_WQE_BB as u32;

    /// Inline bytes per WQE.
    pub const fn max_inline_data(&self) -> u32 {
        self.max_inline_data
    }

    /// Data segments per WQE.
    pub const fn max_send_sge(&self) -> u32 {
        self.max_send_sge
    }

    /// Bytes per WQE.
    pub const fn max_wqe_bytes(&self) -> u32 {
        self.max_wqe_bytes
    }
}

// SAFETY: the ring is plain memory and registers owned by one QP; `&mut self`
// serialises every write.
unsafe impl Send for SqRing {}

impl fmt::Debug for SqRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqRing")
            .field("qpn", &self.qpn)
            .field("wqe_cnt", &self.wqe_cnt)
            .field("cur_post", &self.cur_post)
            .field("head", &self.head)
            .field("bf_size", &self.bf_size)
            .finish()
    }
}

impl SqRing {
    /// A ring over raw parts, for a connected QP ([`SqTransport::Connected`];
    /// [`SqRing::set_transport`] for another).
    ///
    /// # Safety
    /// `buf` must be `wqe_cnt * 64` writable bytes aligned to 64 (8 at
    /// least: control segments are stored as 8-byte words), `dbrec` a
    /// writable doorbell record aligned to 4, and `bf_reg` (when
    /// `bf_size > 0`, else any 8-byte register) a mapped MMIO area of
    /// `2 * bf_size` bytes (8 when `bf_size` is 0) aligned to 8, all alive
    /// and used by nothing else while the ring lives. Every WQE the device
    /// is then told about (through the doorbell) must meet the contract of
    /// [`Qp::post_send`](crate::prim::Qp::post_send), and a CQ ring later
    /// given to [`SqRing::bind_cq`] must be one the device writes this QP's
    /// completions to (a ring of made-up CQEs would free WQEs early).
    ///
    /// # Panics
    /// If `wqe_cnt` is not a power of two or above 65536, or if a pointer is
    /// misaligned (programming errors; the alignment checks are cheap and
    /// run in every build).
    pub unsafe fn from_raw(
        buf: *mut u8,
        wqe_cnt: u32,
        dbrec: *mut Be32,
        bf_reg: *mut u8,
        bf_size: u32,
        qpn: u32,
    ) -> SqRing {
        assert!(wqe_cnt.is_power_of_two(), "SQ size {wqe_cnt} is not a power of two");
        assert!(wqe_cnt <= 1 << 16, "SQ size {wqe_cnt} exceeds the 16-bit WQE counter");
        assert!(buf as usize % 8 == 0, "SQ buffer {buf:p} is not 8-byte aligned");
        assert!(dbrec as usize % 4 == 0, "doorbell record {dbrec:p} is not 4-byte aligned");
        assert!(bf_reg as usize % 8 == 0, "BlueFlame register {bf_reg:p} is not 8-byte aligned");
        let (data_cap, inline_cap) = SqLimits::NONE.tables();
        SqRing {
            buf,
            wqe_cnt,
            slot_mask: wqe_cnt - 1,
            dbrec,
            bf_reg,
            bf_size,
            bf_size_available: bf_size,
            bf_max_ds: bf_size / DS_BYTES as u32,
            bf_offset: 0,
            qpn,
            qpn_shl8: qpn << 8,
            cur_post: 0,
            head: 0,
            pending: 0,
            last_start: 0,
            ring_mask: wqe_cnt as usize * SEND_WQE_BB - 1,
            bf_max_ds_plain: bf_size / DS_BYTES as u32,
            prefer_bf: true,
            // No block starts a WQE yet: entry i != i (the ring is at index 0).
            slots: (0..wqe_cnt).map(|i| Slot { start: i.wrapping_sub(1), size: 0, stream: 0 }).collect(),
            cq_uid: 0,
            transport: SqTransport::Connected,
            room: SqTransport::room(SqTransport::Connected, wqe_cnt),
            dci_streams: 1,
            floor: 0,
            limits: SqLimits::NONE,
            data_cap,
            inline_cap,
            umr_entries: SqLimits::NONE.umr_entries(),
            next_fence: 0,
        }
    }

    /// The WQE layout family the typed builders check against
    /// ([`SqTransport::Connected`] for a ring from [`SqRing::from_raw`]).
    pub fn transport(&self) -> SqTransport {
        self.transport
    }

    /// Sets the WQE layout family.
    ///
    /// # Safety
    /// `t` is the family of the QP whose queue this ring is: a wrong one lets
    /// the typed builders write segments where the device reads data
    /// segments.
    pub unsafe fn set_transport(&mut self, t: SqTransport) {
        self.transport = t;
        self.set_room();
    }

    /// The DCI's streams: WQEs may name stream ids `0..2^log_num_concurrent`
    /// (`DciStreams::log_num_concurrent` of the creation; `Dci::sq_ring`
    /// sets it). Without it only stream 0 is taken. libmlx5 does not check
    /// the id (`mlx5dv_wr_set_dc_addr_stream` writes any 16-bit value), and a
    /// stream the DCI does not have reaches the device; here naming one is
    /// a panic that says what to fix.
    ///
    /// # Panics
    /// If `log_num_concurrent` is above 16 (stream ids are 16 bits).
    pub fn set_dci_streams(&mut self, log_num_concurrent: u8) {
        assert!(
            log_num_concurrent <= 16,
            "direct SQ of QP {:#x}: log_num_concurrent {log_num_concurrent} is above 16 (stream ids are 16 bits)",
            self.qpn
        );
        self.dci_streams = 1 << log_num_concurrent;
    }

    /// How many DCI stream ids WQEs may name (`0..n`; 1 unless
    /// [`SqRing::set_dci_streams`] said otherwise).
    pub fn dci_streams(&self) -> u32 {
        self.dci_streams
    }

    /// `room` for the ring's family.
    fn set_room(&mut self) {
        self.room = SqTransport::room(self.transport, self.wqe_cnt);
    }

    /// The next WQE takes the small fence unless it asks for the strong
    /// one (after a UMR WQE, libmlx5's `fm_cache`).
    // Used by `umr`, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn set_small_fence(&mut self) {
        self.next_fence = CtrlFlags::INITIATOR_SMALL_FENCE.bits();
    }

    /// Puts the pending fence on the WQE whose control segment is at
    /// `ctrl` (unless it has the strong one) and consumes it: byte 11 is
    /// `fm_ce_se`. Kept out of the common path, which only tests
    /// `next_fence`, so the flags of a WQE stay a constant there.
    // Inlined: a call here would keep the WQE's values in saved registers
    // on the common path too.
    #[inline(always)]
    fn take_fence(&mut self, ctrl: *mut u8) {
        // SAFETY: the control segment's 16 bytes at the WQE start, inside the ring.
        unsafe {
            let fm = ctrl.add(11);
            if *fm & CtrlFlags::FENCE.bits() == 0 {
                *fm |= self.next_fence;
            }
        }
        self.next_fence = 0;
    }

    /// Panics unless `id` is one of the DCI's stream ids.
    #[inline(always)]
    pub(crate) fn check_stream(&self, id: u16) {
        if u32::from(id) >= self.dci_streams {
            no_such_stream(self.qpn, id, self.dci_streams);
        }
    }

    /// Panics unless the ring's family is `want` (a typed builder's check).
    #[inline(always)]
    pub(crate) fn expect_transport(&self, want: SqTransport, builder: &'static str) {
        if self.transport != want {
            wrong_transport(self.qpn, builder, self.transport);
        }
    }

    /// Translation entries a UMR WQE may carry inline on this ring (see
    /// `SqLimits::umr_entries`; computed by `set_limits`).
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    #[inline(always)]
    pub(crate) fn umr_entries(&self) -> u32 {
        self.umr_entries
    }

    /// Data segments a WQE with `k` other 16-byte units may hold (the
    /// table's entry, or computed for long headers).
    #[inline(always)]
    fn data_cap_of(&self, k: usize) -> u32 {
        match self.data_cap.get(k) {
            Some(&c) => u32::from(c),
            None => self.limits.data_cap(k),
        }
    }

    /// Bytes a first inline segment after `u` units may carry.
    #[inline(always)]
    fn inline_cap_of(&self, u: usize) -> u32 {
        match self.inline_cap.get(u) {
            Some(&c) => u32::from(c),
            None => self.limits.inline_cap(u),
        }
    }

    /// Why a data segment was refused: the count, else the size.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn refuse_data(&self, segs: u32, off: usize) -> ! {
        if segs >= self.limits.max_send_sge {
            too_many_sges(self.qpn, self.limits.max_send_sge);
        }
        too_big(self.qpn, off + DS_BYTES, self.limits.max_wqe_bytes)
    }

    /// Why a first inline segment was refused: the inline limit, else the size.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn refuse_inline(&self, total: u64, off: usize, len: usize) -> ! {
        if total > u64::from(self.limits.max_inline_data) {
            too_much_inline(self.qpn, total, self.limits.max_inline_data);
        }
        too_big(self.qpn, off + (4 + len).next_multiple_of(DS_BYTES), self.limits.max_wqe_bytes)
    }

    /// Limits every later WQE to `limits` (see [`SqLimits`]).
    ///
    /// The limits are properties of the ring: they are turned here, once,
    /// into a table per header size, so that each payload method checks a
    /// WQE against all three with one comparison.
    pub fn set_limits(&mut self, limits: SqLimits) {
        self.limits = limits;
        (self.data_cap, self.inline_cap) = limits.tables();
        self.umr_entries = limits.umr_entries();
    }

    /// The limits WQEs are checked against.
    pub fn limits(&self) -> SqLimits {
        self.limits
    }

    /// Takes completions from `cq` from now on: [`SqRing::retire`] refuses
    /// completions of any other ring, and those of `cq` for CQEs already in
    /// it ([`CqRing::horizon`]). Bind before posting: completions of WQEs
    /// posted earlier that are in `cq` already are refused too (a later
    /// completion frees them).
    pub fn bind_cq(&mut self, cq: &CqRing) {
        self.cq_uid = cq.uid();
        self.floor = cq.horizon();
    }

    /// Restarts the ring after its QP was moved to RESET: the device then
    /// starts again at WQE `pi` (0 after libmlx5's reset, which zeroes the
    /// doorbell record), every outstanding WQE is forgotten, and every
    /// completion already in `cq` (which libmlx5 does not clean from a CQ
    /// under a direct view) is stale; `cq` becomes the bound ring.
    ///
    /// # Safety
    /// The QP was moved to RESET after the last doorbell and the device's
    /// producer index is `pi`: a ring told this of a QP that was not reset
    /// rings doorbells the device reads as thousands of new WQEs, and it
    /// re-executes stale ones. [`DirectSq::reset`](crate::mlx5dv::queue::obj::DirectSq::reset)
    /// does both steps safely.
    pub unsafe fn restart_after_reset(&mut self, pi: u32, cq: &CqRing) {
        self.start_at(pi);
        self.pending = 0;
        self.bind_cq(cq);
    }

    /// Whether single-WQE doorbells that fit go through BlueFlame even
    /// without inline data (libmlx5's `MLX5_POST_SEND_PREFER_BF`, default on).
    pub fn set_prefer_bf(&mut self, yes: bool) {
        self.prefer_bf = yes;
        self.bf_max_ds_plain = if yes { self.bf_max_ds } else { 0 };
    }

    /// Uses the queue's BlueFlame buffer (when it has one) for single-WQE
    /// doorbells, or stops using it. The [`SqRing::set_prefer_bf`] choice
    /// is kept.
    ///
    /// # Safety
    /// With `yes`, no copy into the BlueFlame register may run concurrently
    /// with this ring's: the register is this QP's alone, or shared only
    /// with QPs whose posting never overlaps this ring's (the QPs of one
    /// thread domain, used by one thread at a time). libmlx5 shares
    /// registers between QPs of a context unless asked otherwise, and two
    /// 64-byte copies into one register interleave.
    pub unsafe fn set_blueflame(&mut self, yes: bool) {
        self.bf_size = if yes { self.bf_size_available } else { 0 };
        self.bf_offset = 0;
        self.bf_max_ds = self.bf_size / DS_BYTES as u32;
        // The prefer-BF choice stays as set.
        self.bf_max_ds_plain = if self.prefer_bf { self.bf_max_ds } else { 0 };
    }

    /// The QP number the ring's control segments carry.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Basic blocks in the ring.
    pub fn wqe_cnt(&self) -> u32 {
        self.wqe_cnt
    }

    /// The producer index in basic blocks (free-running; the WQE index is its low 16 bits).
    pub fn cur_post(&self) -> u32 {
        self.cur_post
    }

    /// Basic blocks free for new WQEs.
    #[inline(always)]
    pub fn available(&self) -> u32 {
        self.wqe_cnt - self.cur_post.wrapping_sub(self.head)
    }

    /// Whether the next WQE takes the small fence unless it asks for the
    /// strong one: after a UMR WQE ([`crate::mlx5dv::keys::umr`]), as libmlx5 fences the
    /// request after a key is configured or invalidated.
    pub fn pending_small_fence(&self) -> bool {
        self.next_fence != 0
    }

    /// The BlueFlame offset the next doorbell uses (toggles between 0 and `bf_size`).
    pub fn bf_offset(&self) -> u32 {
        self.bf_offset
    }

    /// Frees the ring up to and including the WQE that a requester CQE of
    /// this QP reports (its WQE counter); completions of unsignalled WQEs
    /// before it are implied.
    ///
    /// Only a completion polled from the bound CQ ring ([`SqRing::bind_cq`])
    /// after the binding, and after the last completion this ring took, and
    /// that names an outstanding WQE's first block, is taken. Anything else
    /// changes nothing and returns `false`: a completion not polled
    /// (made up, or from [`Cqe64::decode`](crate::mlx5dv::completion::cqe::Cqe64::decode)), one
    /// of another ring or another QP (shared CQ), a receive CQE, a stale one
    /// (retired already, implied by a later one, or written before a reset:
    /// even when the 16-bit counter has wrapped onto a live WQE), one that
    /// points inside a multi-block WQE, or one expanded from a compressed
    /// session ([`Completion::expanded`]). Expanded requester completions
    /// take their WQE counter from the mini-CQE's `s_wqe_info`, a layout no
    /// test here has checked on a ConnectX; until it is, they free nothing.
    /// A later completion the device wrote whole frees their WQEs with its
    /// own, but nothing makes the device write one: give a send queue whose
    /// ring must keep moving a CQ without compression. The values it checks are the ones
    /// the poller recorded, not the public fields, so editing those changes
    /// nothing. The freed range therefore always ends at a WQE boundary at
    /// or before the producer index, so new WQEs never overwrite ones the
    /// device has not completed.
    #[inline]
    pub fn retire(&mut self, c: &Completion) -> bool {
        let t = c.ticket();
        if t.cq == 0 || t.cq != self.cq_uid || t.seq < self.floor || t.qpn != self.qpn || !t.requester {
            return false;
        }
        if t.expanded {
            return false;
        }
        if !self.retire_counter(t.counter) {
            return false;
        }
        self.floor = t.seq + 1;
        true
    }

    #[inline]
    pub(crate) fn retire_counter(&mut self, wqe_counter: u16) -> bool {
        let outstanding = self.cur_post.wrapping_sub(self.head);
        let ahead = u32::from(wqe_counter.wrapping_sub(self.head as u16));
        if ahead >= outstanding {
            return false;
        }
        let start = self.head.wrapping_add(ahead);
        let slot = (start & (self.wqe_cnt - 1)) as usize;
        let e = self.slots[slot];
        if e.start != start {
            return false;
        }
        let end = start.wrapping_add(u32::from(e.size & !SLOT_INLINE));
        debug_assert!(end.wrapping_sub(self.head) <= outstanding, "a recorded WQE ends past the producer index");
        // Once per 2^30 blocks (a boundary crossed): entries older than a lap
        // go, so none lives to see its index come round again.
        if (self.head ^ end) >> SWEEP_SHIFT != 0 {
            self.sweep();
        }
        self.head = end;
        true
    }

    /// Keeps in the slot table only the entries of WQEs that start in the
    /// last lap of the ring (`cur_post - wqe_cnt .. cur_post`); every other
    /// entry gets a value that no block of the same slot has as its index
    /// (its block's index minus 1: another slot's, for rings of 2 blocks and
    /// more; a ring of one block holds one-block WQEs only, each entry
    /// current).
    ///
    /// Only a WQE's first block gets an entry at `finish`, so a block inside
    /// a multi-block WQE keeps the entry of the WQE that last started
    /// there, laps ago. That entry holds the block's index of back then,
    /// which equals its index now only after 2^32 blocks; this sweep, at
    /// least once per 2^30 blocks retired, rules that out, so that a
    /// completion naming a block inside a WQE is still refused.
    #[cold]
    #[inline(never)]
    fn sweep(&mut self) {
        let lap = self.cur_post.wrapping_sub(self.wqe_cnt);
        let mask = self.slot_mask;
        for k in 0..self.wqe_cnt {
            let j = lap.wrapping_add(k);
            let s = &mut self.slots[(j & mask) as usize];
            if s.start != j {
                s.start = j.wrapping_sub(1);
            }
        }
    }

    /// The DCI stream of the WQE a requester completion of this ring
    /// reports (its WQE counter), for example an error completion, whose
    /// stream is then in error until [`Dci::reset_stream`](crate::mlx5dv::dc::Dci::reset_stream).
    /// Ask before the completion's WQE block is reused by new WQEs (before
    /// posting more after retiring it): the ring keeps one entry per basic
    /// block, written when a WQE starts there.
    ///
    /// `None` for a completion this ring would not take: not polled from
    /// the bound CQ ring, of another QP, a receive completion, or one whose
    /// counter names no WQE start. On rings that are not
    /// [`SqTransport::DcInitiator`] the stream is always 0.
    #[inline]
    pub fn stream_of(&self, c: &Completion) -> Option<u16> {
        let t = c.ticket();
        if t.cq == 0 || t.cq != self.cq_uid || t.qpn != self.qpn || !t.requester {
            return None;
        }
        // The block the counter names among the ring's last lap: `d`
        // blocks before the producer index, 1 ..= wqe_cnt.
        let d = match (self.cur_post as u16).wrapping_sub(t.counter) {
            0 => 1 << 16,
            d => u32::from(d),
        };
        if d > self.wqe_cnt {
            return None;
        }
        let j = self.cur_post.wrapping_sub(d);
        let e = self.slots[(j & self.slot_mask) as usize];
        (e.start == j).then_some(e.stream)
    }

    /// Starts the indices at `pi` (a queue that was used before the view).
    // Used by the `obj` views, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn start_at(&mut self, pi: u32) {
        self.next_fence = 0;
        self.cur_post = pi;
        self.head = pi;
        let mask = self.slot_mask;
        for k in 0..self.wqe_cnt {
            // No block starts a WQE: every entry differs from the index of
            // every block of its slot (see `sweep`).
            let j = pi.wrapping_sub(self.wqe_cnt).wrapping_add(k);
            self.slots[(j & mask) as usize].start = j.wrapping_sub(1);
        }
    }

    /// Starts a raw WQE: `opcode`, `opmod` (e.g. the masked-atomic argument
    /// size), `fm_ce_se` flags and `imm` (stored as given, network order for
    /// immediates). Add segments in any order, then [`WqeWriter::finish`].
    ///
    /// The typed builders of [`crate::mlx5dv::queue::wqe`] ([`SqRing::write`],
    /// [`SqRing::send`], [`SqRing::cas`], ...) are the safe way to build the
    /// usual WQEs: they write the segments each opcode defines, in its
    /// order. This raw writer puts any segment anywhere, so the bytes of a
    /// remote-address, atomic, inline or datagram segment can land where the
    /// device reads a data segment (a local address and key).
    ///
    /// Reaching it needs `unsafe`:
    ///
    /// ```compile_fail,E0133
    /// use rrddmma::mlx5dv::{seg::{CtrlFlags, WqeOpcode}, sq::SqRing};
    /// fn forge(sq: &mut SqRing) {
    ///     // A SEND whose first segment is read as a data segment: the atomic
    ///     // segment's words become byte count, lkey and address.
    ///     sq.wqe(WqeOpcode::SEND, 0, CtrlFlags::empty(), 0).atomic(0x40_0000_0007, 0xdead_0000).finish();
    /// }
    /// ```
    ///
    /// After a UMR WQE ([`crate::mlx5dv::keys::umr`]) the next WQE started here carries
    /// the small fence ([`CtrlFlags::INITIATOR_SMALL_FENCE`]) unless
    /// `fm_ce_se` has the strong one, as libmlx5 fences it.
    ///
    /// # Safety
    /// The segments added must follow the layout the device defines for
    /// `opcode` (control segment, then for example the remote address for
    /// RDMA, the atomic arguments, the datagram segment for UD/DC), so that
    /// every 16-byte unit the device reads as a data segment was written by
    /// [`WqeWriter::data`], whose own contract applies.
    ///
    /// # Panics
    /// If the ring is full (retire completions first).
    #[inline(always)]
    pub unsafe fn wqe(&mut self, opcode: WqeOpcode, opmod: u8, fm_ce_se: CtrlFlags, imm: u32) -> WqeWriter<'_> {
        let start = self.cur_post;
        let limit = self.available() as usize * SEND_WQE_BB;
        if limit == 0 {
            full(SEND_WQE_BB, 0);
        }
        // SAFETY: forwarded contract; `limit` is the free space, the first
        // block of it checked.
        unsafe { self.begin_at(start, limit, SEND_WQE_BB, opcode, opmod, fm_ce_se, imm) }
    }

    /// Starts a WQE of a typed builder of family `want` (named `builder`
    /// in the panic) whose header (control segment included) is `header`
    /// bytes: as [`SqRing::wqe`], with the family check folded into the
    /// full check (`room`), and the header's blocks found free at once, so
    /// that no segment of the header checks the free space again (C's
    /// `mlx5_wq_overflow` with the WQE's size).
    ///
    /// # Safety
    /// As [`SqRing::wqe`]: the caller adds the segments `opcode` defines
    /// on a QP of family `want`.
    ///
    /// # Panics
    /// If the ring is not of family `want`, or has fewer free blocks than
    /// the header takes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn typed_wqe(
        &mut self,
        want: SqTransport,
        builder: &'static str,
        header: usize,
        opcode: WqeOpcode,
        opmod: u8,
        fm_ce_se: CtrlFlags,
        imm: u32,
    ) -> WqeWriter<'_> {
        let start = self.cur_post;
        let outstanding = start.wrapping_sub(self.head);
        let room = self.room[want as usize];
        let blocks = header.div_ceil(SEND_WQE_BB).max(1);
        // `outstanding <= wqe_cnt <= 65536` always, so the sum does not
        // overflow; `room` is `wqe_cnt` for the ring's family and 0 for the
        // others.
        if outstanding as usize + blocks > room as usize {
            self.refuse(want, builder, blocks);
        }
        let limit = (room - outstanding) as usize * SEND_WQE_BB;
        // SAFETY: forwarded contract; `room == wqe_cnt` here (the ring is of
        // family `want`), so `limit` is the free space, at least `blocks`.
        unsafe { self.begin_at(start, limit, blocks * SEND_WQE_BB, opcode, opmod, fm_ce_se, imm) }
    }

    /// Why a typed builder's WQE was refused: the ring's family, else full.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn refuse(&self, want: SqTransport, builder: &'static str, blocks: usize) -> ! {
        if self.transport != want {
            wrong_transport(self.qpn, builder, self.transport);
        }
        full(blocks * SEND_WQE_BB, self.available() as usize * SEND_WQE_BB)
    }

    /// The writer of a WQE starting at block `start`, `limit` bytes free,
    /// the first `checked` of them (whole blocks, at most `limit`) known to
    /// be free without a check.
    ///
    /// # Safety
    /// As [`SqRing::wqe`]; `start` is `cur_post` and `checked <= limit`, at
    /// most the free space in bytes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn begin_at(
        &mut self,
        start: u32,
        limit: usize,
        checked: usize,
        opcode: WqeOpcode,
        opmod: u8,
        fm_ce_se: CtrlFlags,
        imm: u32,
    ) -> WqeWriter<'_> {
        let mask = self.ring_mask;
        let pos = (start as usize * SEND_WQE_BB) & mask;
        let buf = self.buf;
        WqeWriter {
            sq: self,
            buf,
            mask,
            pos,
            start,
            off: DS_BYTES,
            limit,
            checked,
            fits: false,
            opcode,
            opmod,
            fm_ce_se,
            imm,
            inline: false,
            data_segs: 0,
            inline_bytes: 0,
            stream: 0,
        }
    }

    /// Writes a WQE of one basic block at the producer index: the control
    /// segment (`opcode`, no flags, signature or immediate), then the
    /// 16-byte units `units` (each two 8-byte words in memory order) and,
    /// when given, the data segment `data`; with `mmio`, rings the doorbell
    /// for it (and the WQEs written before it without one) as
    /// [`WqeWriter::post`] does, else leaves it for [`SqRing::ring`] as
    /// [`WqeWriter::finish`] does. Returns the WQE's block index
    /// (free-running).
    ///
    /// The path of a ring whose WQEs are each one block, written through
    /// here and retired through the poster's own record of them
    /// ([`SqRing::retire_block`]): a tag-matching SRQ's command QP. So it
    /// keeps no slot entry (no completion of the ring goes through
    /// [`SqRing::retire`]: the poster owns the ring), and takes no pending
    /// fence (the ring carries no UMR WQE, the only kind that sets one).
    ///
    /// # Safety
    /// - The ring has a free block (`available() > 0`).
    /// - `units` then `data` is the layout the device defines for `opcode`
    ///   (as [`SqRing::wqe`]'s contract): the data segment, if any, where
    ///   the opcode has one, naming memory as [`WqeWriter::data`]'s
    ///   contract asks.
    #[inline(always)]
    pub(crate) unsafe fn put_block<const U: usize, M: Mmio>(
        &mut self,
        opcode: WqeOpcode,
        units: [[u64; 2]; U],
        data: Option<DataSeg>,
        mmio: Option<&mut M>,
    ) -> u32 {
        const { assert!(U + 2 <= SEND_WQE_BB / DS_BYTES, "a control segment, the units and a data segment") };
        debug_assert!(self.available() > 0, "put_block on a full ring");
        debug_assert!(self.next_fence == 0, "put_block on a ring with a UMR fence pending");
        let start = self.cur_post;
        let ds = (1 + U + usize::from(data.is_some())) as u8;
        let first = self.ctrl_word0(start as u16, opcode, 0, ds);
        // SAFETY: the block at the producer index is inside the ring (a
        // masked offset, a multiple of 64, so 8-byte aligned) and free (the
        // caller's contract); the control segment, the units and the data
        // segment end within its 64 bytes (asserted above).
        let base = unsafe {
            let base = self.buf.add((start as usize * SEND_WQE_BB) & self.ring_mask);
            let at = base.cast::<[u64; 2]>();
            at.write([first, 0]);
            for (k, u) in units.into_iter().enumerate() {
                at.add(1 + k).write(u);
            }
            if let Some(d) = data {
                at.add(1 + U).cast::<DataSeg>().write(d);
            }
            base
        };
        self.cur_post = start.wrapping_add(1);
        match mmio {
            Some(m) => self.doorbell(m, true, base, ds, false, first.to_ne_bytes()),
            None => {
                self.pending += 1;
                self.last_start = start;
            }
        }
        start
    }

    /// Retires the ring up to the one-block WQE `wqe` (the low 16 bits of
    /// an index [`SqRing::put_block`] returned) and every WQE before it,
    /// which its completion says the device is done with. False, changing
    /// nothing, when `wqe` is not outstanding.
    #[inline(always)]
    pub(crate) fn retire_block(&mut self, wqe: u16) -> bool {
        let outstanding = self.cur_post.wrapping_sub(self.head);
        let ahead = u32::from(wqe.wrapping_sub(self.head as u16));
        if ahead >= outstanding {
            return false;
        }
        self.head = self.head.wrapping_add(ahead + 1);
        true
    }

    /// The control segment's first 8 bytes in memory order: the big-endian
    /// `opmod << 24 | pi << 8 | opcode`, then `qpn << 8 | ds`.
    #[inline(always)]
    fn ctrl_word0(&self, pi: u16, opcode: WqeOpcode, opmod: u8, ds: u8) -> u64 {
        let a = Be32::new((u32::from(opmod) << 24) | (u32::from(pi) << 8) | u32::from(opcode.to_raw())).raw();
        let b = Be32::new(self.qpn_shl8 | u32::from(ds)).raw();
        if cfg!(target_endian = "little") {
            u64::from(a) | (u64::from(b) << 32)
        } else {
            (u64::from(a) << 32) | u64::from(b)
        }
    }

    /// Rings the doorbell for the WQEs written since the last one, in
    /// libmlx5's order: barrier; doorbell record = `cur_post & 0xffff`;
    /// `wc_start`; the whole WQE by BlueFlame (one WQE, more than one DS,
    /// fits the BlueFlame buffer) or else the first 8 control bytes; flush;
    /// toggle the BlueFlame offset.
    #[inline]
    pub fn ring<M: Mmio>(&mut self, mmio: &mut M) {
        if self.pending == 0 {
            return;
        }
        let start = self.last_start;
        // SAFETY: `last_start` is the first block of a WQE written by this
        // ring and not yet rung; its masked offset is inside the ring, a
        // multiple of 64, so 8-byte aligned with 16 bytes to read.
        let (src, first) = unsafe {
            let src = self.buf.add((start as usize * SEND_WQE_BB) & self.ring_mask);
            (src, src.cast::<[u8; 8]>().read())
        };
        // The DS count: the low byte of `qpn_ds`, byte 7 of the control
        // segment, as `finish` wrote it (all 8 bits: a UMR WQE with many
        // entries has more than 63 DS).
        let ds = first[7];
        let inline = self.slots[(start & self.slot_mask) as usize].size & SLOT_INLINE != 0;
        self.doorbell(mmio, false, src, ds, inline, first);
    }

    /// The doorbell for the pending WQEs (and, with `posting`, the one
    /// being posted, not counted in `pending`), the last at `src` with
    /// `ds` DS and `first` as its first 8 control bytes.
    #[inline(always)]
    fn doorbell<M: Mmio>(&mut self, mmio: &mut M, posting: bool, src: *const u8, ds: u8, inline: bool, first: [u8; 8]) {
        mmio.to_device_barrier();
        // SAFETY: the SQ's doorbell record (`from_raw` contract).
        unsafe { mmio.write_dbrec(self.dbrec, self.cur_post & 0xffff) };
        mmio.wc_start();
        let bytes = (usize::from(ds) * DS_BYTES).div_ceil(SEND_WQE_BB) * SEND_WQE_BB;
        // The limits are 0 without BlueFlame.
        let max = if inline { self.bf_max_ds } else { self.bf_max_ds_plain };
        // The ring's limit first: without BlueFlame it is 0 and `nreq` is not read.
        let bf = u32::from(ds) <= max && ds > 1 && {
            // Read only here (volatile keeps the load from being hoisted
            // onto the path without BlueFlame).
            // SAFETY: a field of `self`, aligned and initialised.
            let pending = unsafe { std::ptr::read_volatile(&self.pending) };
            pending == u32::from(!posting)
        };
        let base = self.bf_offset as usize;
        // SAFETY: offsets stay inside the BlueFlame buffer half in use
        // (`bytes <= bf_size`) or at its first 8 bytes (`from_raw` contract).
        unsafe {
            if bf {
                for i in 0..bytes / 8 {
                    mmio.write64(self.bf_reg, base + i * 8, self.read8_at(src, i * 8));
                }
            } else {
                mmio.write64(self.bf_reg, base, first);
            }
        }
        mmio.flush_writes();
        self.bf_offset ^= self.bf_size;
        self.pending = 0;
    }

    /// 8 bytes at `off` from the WQE starting at `base`, wrapping at the ring end.
    #[inline(always)]
    fn read8_at(&self, base: *const u8, off: usize) -> [u8; 8] {
        let pos = (base as usize - self.buf as usize + off) & self.ring_mask;
        let mut b = [0u8; 8];
        // SAFETY: `pos` is inside the ring and 8-aligned (WQEs start on basic
        // blocks), so the 8 bytes never straddle its end.
        unsafe { std::ptr::copy_nonoverlapping(self.buf.add(pos), b.as_mut_ptr(), 8) };
        b
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn full(end: usize, limit: usize) -> ! {
    panic!("send queue full: a {end}-byte WQE needs more than the {limit} bytes free; retire completions first")
}

#[cold]
#[inline(never)]
#[track_caller]
fn wrong_transport(qpn: u32, builder: &str, t: SqTransport) -> ! {
    panic!(
        "direct SQ of QP {qpn:#x}: the typed builder `{builder}` does not fit a QP whose WQEs are laid out as \
         {t:?}; use the builder of its family (send_ud on UD, sq.dc(&target).write(..) and the other DC builders on a \
         DC initiator's view from Dci::sq_ring, the connected ones on RC and UC) or the raw writer"
    )
}

#[cold]
#[inline(never)]
#[track_caller]
fn no_such_stream(qpn: u32, id: u16, streams: u32) -> ! {
    if streams == 1 {
        panic!(
            "direct SQ of DCI {qpn:#x}: stream {id} named, but the DCI has one stream, 0; create it with \
             Dci::create_with_streams (DciStreams::log_num_concurrent) to post on others"
        )
    }
    panic!(
        "direct SQ of DCI {qpn:#x}: stream {id} named, but the DCI has streams 0..{streams} \
         (log_num_concurrent {}); pick one of those, or create the DCI with a larger \
         DciStreams::log_num_concurrent",
        streams.trailing_zeros()
    )
}

#[cold]
#[inline(never)]
#[track_caller]
fn too_many_sges(qpn: u32, max: u32) -> ! {
    panic!(
        "direct SQ of QP {qpn:#x}: a WQE with more than {max} data segments (the QP's max_send_sge); \
         create the QP with a larger QpCaps::max_send_sge or split the request"
    )
}

#[cold]
#[inline(never)]
#[track_caller]
fn too_much_inline(qpn: u32, len: u64, max: u32) -> ! {
    panic!(
        "direct SQ of QP {qpn:#x}: {len} bytes of inline data in one WQE, above the QP's max_inline_data of {max}; \
         create the QP with a larger QpCaps::max_inline_data or send from registered memory (data)"
    )
}

#[cold]
#[inline(never)]
#[track_caller]
fn too_big(qpn: u32, len: usize, max: u32) -> ! {
    panic!(
        "direct SQ of QP {qpn:#x}: a {len}-byte WQE, above the largest WQE of {max} bytes the QP was sized for; \
         use fewer segments or a QP created with larger caps"
    )
}

/// Appends segments to one WQE; see [`SqRing::wqe`].
pub struct WqeWriter<'s> {
    sq: &'s mut SqRing,
    /// The ring's buffer and byte mask (`SqRing::buf`, `ring_mask`), kept
    /// here so that they stay in registers across the stores into the ring
    /// (which the compiler cannot tell apart from stores into the `SqRing`).
    buf: *mut u8,
    mask: usize,
    /// The WQE's first byte as an offset in the ring (a multiple of 64,
    /// below the ring's size).
    pos: usize,
    start: u32,
    off: usize,
    /// Bytes this WQE may take without overrunning unretired WQEs.
    limit: usize,
    /// The first bytes of those found free when the WQE was started (its
    /// first block, or a typed builder's header): stores below need no
    /// check.
    checked: usize,
    /// Whether the WQE as it stands was checked against the size limit by
    /// a payload method (`data`, `inline`); a segment added after clears
    /// it, and `finish` then checks the size itself.
    fits: bool,
    opcode: WqeOpcode,
    opmod: u8,
    fm_ce_se: CtrlFlags,
    imm: u32,
    inline: bool,
    /// Data segments and inline bytes added, checked against the limits.
    data_segs: u32,
    inline_bytes: u32,
    /// The DCI stream id of the control segment (bytes 9-10), 0 by default.
    stream: u16,
}

impl fmt::Debug for WqeWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WqeWriter").field("opcode", &self.opcode).field("bytes", &self.off).finish()
    }
}

impl<'s> WqeWriter<'s> {
    /// Writes `bytes` from the unmasked ring offset `pos` on, wrapping at
    /// the ring's end.
    ///
    /// # Safety
    /// `buf` is a ring of `ring` writable bytes (a power of two).
    #[inline(never)]
    unsafe fn put_wrapped(buf: *mut u8, ring: usize, pos: usize, bytes: &[u8]) {
        let mut done = 0;
        while done < bytes.len() {
            let at = (pos + done) & (ring - 1);
            let n = (ring - at).min(bytes.len() - done);
            // SAFETY: `at..at + n` is inside the ring buffer of `ring` bytes
            // at `buf` (the caller's ring).
            unsafe { std::ptr::copy_nonoverlapping(bytes[done..].as_ptr(), buf.add(at), n) };
            done += n;
        }
    }

    #[inline(always)]
    fn check(&self, end: usize) {
        if end > self.limit {
            full(end, self.limit);
        }
    }

    /// The 16-byte unit at byte `o` of the WQE (a multiple of 16), where
    /// it lies in the ring: the WQE's blocks wrap at the ring's end, a
    /// unit never straddles it (the ring is whole 64-byte blocks). The
    /// block's place is computed once per block where `o` is known
    /// (libmlx5 checks the ring's end once per block, too).
    #[inline(always)]
    fn unit(&self, o: usize) -> *mut [u64; 2] {
        debug_assert!(o % DS_BYTES == 0);
        let block = (self.pos + (o & !(SEND_WQE_BB - 1))) & self.mask;
        // SAFETY: `block` is a masked offset, so inside the ring, and a
        // multiple of 64 (`pos` is, and so is the ring's size); the unit's
        // 16 bytes at `o % 64` from it end at or before the block's end.
        unsafe { self.buf.add(block + (o & (SEND_WQE_BB - 1))).cast() }
    }

    /// Writes `n` 16-byte units from `src` at the current offset (a
    /// multiple of 16) in place, wrapping at the ring's end, after one check
    /// that the WQE's blocks up to their end are free (none within the
    /// first block, which `wqe` found free).
    ///
    /// # Safety
    /// `src` is readable for `n * 16` bytes, all initialised.
    ///
    /// # Panics
    /// If the WQE would overrun WQEs not yet retired (a programming error:
    /// check [`SqRing::available`], retire completions first).
    #[inline(always)]
    unsafe fn put_units(&mut self, src: *const [u64; 2], n: usize) {
        debug_assert!(self.off % DS_BYTES == 0, "segments start on 16-byte units");
        let end = self.off + n * DS_BYTES;
        if end > self.checked {
            self.check(end);
        }
        for i in 0..n {
            // SAFETY: the unit lies in the ring (`unit`) and in blocks this
            // WQE may take (`check`, or the blocks found free at its start);
            // `src` as the caller says.
            unsafe { self.unit(self.off + i * DS_BYTES).write_unaligned(src.add(i).read_unaligned()) };
        }
        self.off = end;
        self.fits = false;
    }

    /// Appends a segment of whole 16-byte units in place (`put_units`).
    #[inline(always)]
    fn put_seg<T: sealed::Sealed>(mut self, seg: &T) -> Self {
        const { assert!(size_of::<T>() % DS_BYTES == 0, "segments are whole 16-byte units") };
        // SAFETY: `Sealed` is implemented only for the crate's `#[repr(C)]`
        // segment types, whose fields fill them without padding (sizes
        // asserted in `seg`), whole 16-byte units (asserted above).
        unsafe { self.put_units((seg as *const T).cast(), size_of::<T>() / DS_BYTES) };
        self
    }

    /// Remote address segment.
    #[inline(always)]
    pub fn raddr(self, raddr: u64, rkey: u32) -> Self {
        let mut s = RaddrSeg::default();
        s.set(raddr, rkey);
        self.put_seg(&s)
    }

    /// Data segment: `len` bytes at `addr` of a region with `lkey`.
    ///
    /// # Safety
    /// The device reads (or, for a READ's target, writes) `addr..addr+len`
    /// once the doorbell is rung: the range must lie in memory of this
    /// process registered with `lkey` (with local write for targets), alive
    /// and untouched until the WQE's completion, as [`Qp::post_send`]
    /// requires of its entries.
    ///
    /// [`Qp::post_send`]: crate::prim::Qp::post_send
    ///
    /// A zero `len` writes no segment (it still counts towards
    /// `max_send_sge`), as libmlx5 leaves zero-length entries out: in a data
    /// segment a byte count of 0 means 2 GiB (`mlx5_wqe_data_seg`), so the
    /// device would read or write 2 GiB at `addr`.
    ///
    /// # Panics
    /// If the WQE already holds the QP's `max_send_sge` data segments
    /// ([`SqLimits`]; a programming error).
    #[inline(always)]
    pub unsafe fn data(mut self, len: u32, lkey: u32, addr: u64) -> Self {
        // One comparison for both limits: the data segments a WQE with
        // this many other units may hold (`SqRing::data_cap`), the count
        // and the size at once. `k` is known where the builder's segments
        // are, and the entry's place with it.
        let k = (self.off / DS_BYTES).wrapping_sub(self.data_segs as usize);
        // The first data segment after a header of at most `FIRST_DATA_FREE`
        // units fits every ring's limits (`SqLimits::new`'s floors: one
        // data segment, 128 bytes): no check, where that is known.
        let free = self.data_segs == 0 && k <= FIRST_DATA_FREE;
        if !free && self.data_segs >= self.sq.data_cap_of(k) {
            self.sq.refuse_data(self.data_segs, self.off);
        }
        self.data_segs += 1;
        if len != 0 {
            let mut s = DataSeg::default();
            s.set(len, lkey, addr);
            self = self.put_seg(&s);
        }
        // The WQE with this segment is within both limits.
        self.fits = true;
        self
    }

    /// Any other segment of [`crate::mlx5dv::queue::seg`] (atomic, masked atomic,
    /// datagram, Ethernet, ...); [`Segment`] is implemented for those types
    /// only, so no padding byte is ever copied into the ring.
    ///
    /// # Panics
    /// If the segment's size is not a multiple of 16 bytes (a programming error).
    #[inline(always)]
    pub fn seg<T: Segment>(self, seg: &T) -> Self {
        assert!(size_of::<T>() % DS_BYTES == 0, "segments are whole 16-byte units");
        self.put_seg(seg)
    }

    /// Masked 8-byte compare-and-swap arguments (after [`WqeWriter::raddr`];
    /// start the WQE with [`WqeOpcode::ATOMIC_MASKED_CS`] and
    /// `ext_atomic_opmod(3)`).
    #[inline(always)]
    pub fn masked_cas(self, swap: u64, compare: u64, swap_mask: u64, compare_mask: u64) -> Self {
        self.put_seg(&MaskedCasSeg {
            swap: Be64::new(swap),
            compare: Be64::new(compare),
            swap_mask: Be64::new(swap_mask),
            compare_mask: Be64::new(compare_mask),
        })
    }

    /// Masked 8-byte fetch-and-add arguments: the addend and the bits where
    /// carries stop (start the WQE with [`WqeOpcode::ATOMIC_MASKED_FA`] and
    /// `ext_atomic_opmod(3)`).
    #[inline(always)]
    pub fn masked_fa(self, add: u64, field_boundary: u64) -> Self {
        self.put_seg(&MaskedFaSeg { add: Be64::new(add), field_boundary: Be64::new(field_boundary) })
    }

    /// Plain atomic arguments: swap (or addend) and compare.
    #[inline(always)]
    pub fn atomic(self, swap_add: u64, compare: u64) -> Self {
        self.put_seg(&AtomicSeg { swap_add: Be64::new(swap_add), compare: Be64::new(compare) })
    }

    /// `n` 16-byte units, unit `i` given by `unit(i)` as two words in
    /// memory order, written in place at the current offset (a multiple of
    /// 16; the UMR builders' segments): one check that the blocks up to
    /// their end are free, then the stores, wrapping at the ring's end.
    ///
    /// # Panics
    /// If the WQE would overrun WQEs not yet retired (a programming error:
    /// check [`SqRing::available`], retire completions first).
    // Used by `umr`, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    #[inline(always)]
    pub(crate) fn units_with(mut self, n: usize, mut unit: impl FnMut(usize) -> [u64; 2]) -> Self {
        debug_assert!(self.off % DS_BYTES == 0, "segments start on 16-byte units");
        let end = self.off + n * DS_BYTES;
        if end > self.checked {
            self.check(end);
        }
        for i in 0..n {
            // SAFETY: the unit lies in the ring (`unit`) and in blocks this
            // WQE may take (`check`, or the blocks found free at its start).
            unsafe { self.unit(self.off + i * DS_BYTES).write_unaligned(unit(i)) };
        }
        self.off = end;
        self.fits = false;
        self
    }

    /// Stores the 8-byte word `w` (memory order) at byte `o` of the WQE,
    /// a multiple of 8 in a unit already written (the UMR builder's key
    /// length, known after its entries).
    ///
    /// # Safety
    /// `16 <= o` and `o + 8 <= ` the bytes written so far, so the word lies
    /// in blocks already checked.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    #[inline(always)]
    pub(crate) unsafe fn store_word_at(&mut self, o: usize, w: u64) {
        debug_assert!(o >= DS_BYTES && o % 8 == 0 && o + 8 <= self.off);
        // SAFETY: the unit holding the word lies in the ring (`unit`), in
        // blocks this WQE was found to take (the caller's contract); the
        // word is its first or second half.
        unsafe { self.unit(o & !(DS_BYTES - 1)).cast::<u64>().add((o % DS_BYTES) / 8).write_unaligned(w) };
    }

    /// Marks the WQE as checked against the size limit by its builder (the
    /// UMR builders count their entries against `SqRing::umr_entries`), so
    /// that `finish` does not check it again.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    #[inline(always)]
    pub(crate) fn size_checked(mut self) -> Self {
        self.fits = true;
        self
    }

    /// Counts the WQE as inline for the BlueFlame choice (UMR WQEs carry
    /// their translation entries inline).
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    #[inline(always)]
    pub(crate) fn inline_wqe(mut self) -> Self {
        self.inline = true;
        self
    }

    /// The DCI stream this WQE goes on (`mlx5dv_wr_set_dc_addr_stream`'s
    /// `stream_id`): the control segment's `dci_stream_channel_id`, bytes
    /// 9-10, big endian. 0 (the default) is the DCI's first stream; only
    /// a DCI created with streams (`mlx5dv_dci_streams`) has others.
    ///
    /// # Panics
    /// On a ring that is not [`SqTransport::DcInitiator`] (a programming
    /// error: the bytes are reserved in other QPs' WQEs).
    ///
    /// Also when `id` is not one of the DCI's streams (`0` without streams,
    /// `0..2^log_num_concurrent` with: [`SqRing::set_dci_streams`]).
    #[inline(always)]
    pub fn dci_stream(mut self, id: u16) -> Self {
        self.sq.expect_transport(SqTransport::DcInitiator, "dci_stream");
        self.sq.check_stream(id);
        self.stream = id;
        self
    }

    /// The stream, on a ring already checked to be a DCI's.
    #[inline(always)]
    pub(crate) fn stream_unchecked(mut self, id: u16) -> Self {
        self.stream = id;
        self
    }

    /// Extended-atomic operands of `N` bytes each, in the given order, as
    /// big-endian bytes (`N` of 16 or 32: four operands fill 64 or 128
    /// bytes, two fill 32 or 64; whole 16-byte units either way).
    #[inline(always)]
    pub(crate) fn operands<const N: usize>(mut self, ops: &[&[u8; N]]) -> Self {
        const { assert!(N % DS_BYTES == 0, "operands are whole 16-byte units") };
        for op in ops {
            // SAFETY: `op` is `N` initialised bytes, whole units.
            unsafe { self.put_units(op.as_ptr().cast(), N / DS_BYTES) };
        }
        self
    }

    /// Datagram (address vector) segment for UD and DC.
    #[inline(always)]
    pub fn datagram(self, av: &DatagramSeg) -> Self {
        self.put_seg(av)
    }

    /// Inline data: a 4-byte header `len | MLX5_INLINE_SEG` and the bytes,
    /// padded so that the WQE grows by `align(len + 4, 16)`. Empty `data`
    /// writes no segment, as libmlx5 (`set_data_inl_seg`) does (the WQE
    /// still counts as inline for the BlueFlame choice, as there).
    ///
    /// # Panics
    /// If the WQE's inline bytes would exceed the QP's `max_inline_data`
    /// ([`SqLimits`]; a programming error: send larger payloads from
    /// registered memory with [`WqeWriter::data`]).
    #[inline(always)]
    pub fn inline(mut self, data: &[u8]) -> Self {
        let total = u64::from(self.inline_bytes) + data.len() as u64;
        let first = self.inline_bytes == 0 && !data.is_empty();
        if first {
            // The WQE's first inline bytes: one comparison for the inline
            // limit and the size (`SqRing::inline_cap`).
            if data.len() as u64 > u64::from(self.sq.inline_cap_of(self.off / DS_BYTES)) {
                self.sq.refuse_inline(total, self.off, data.len());
            }
        } else if total > u64::from(self.sq.limits.max_inline_data) {
            too_much_inline(self.sq.qpn, total, self.sq.limits.max_inline_data);
        }
        self.inline_bytes = total as u32;
        self.inline = true;
        if data.is_empty() {
            return self;
        }
        let hdr = Be32::new(data.len() as u32 | INLINE_SEG);
        // Header, data, padding: `seg` bytes (at least 16), 16-aligned
        // (every segment before is whole 16-byte units).
        debug_assert!(self.off % DS_BYTES == 0, "segments start on 16-byte units");
        let seg = (4 + data.len()).next_multiple_of(DS_BYTES);
        let end = self.off + seg;
        if end > self.checked {
            self.check(end);
        }
        let pos = self.pos + self.off;
        let ring = self.mask + 1;
        if pos + seg <= ring {
            // Contiguous (the usual case): zero the last unit, then the
            // header and the data over it.
            // SAFETY: `pos..pos + seg` is inside the ring buffer, in blocks
            // this WQE may take (`check`, or the first block); the last
            // unit starts 16 bytes before its end, at or after `pos`.
            unsafe {
                let dst = self.buf.add(pos);
                std::ptr::write_unaligned(dst.add(seg - DS_BYTES).cast::<[u8; DS_BYTES]>(), [0; DS_BYTES]);
                std::ptr::write_unaligned(dst.cast::<u32>(), hdr.raw());
                std::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(4), data.len());
            }
        } else {
            // SAFETY: the ring's buffer and size; `pos..pos + seg` (taken
            // modulo the ring) are blocks this WQE may take (`check`).
            unsafe { Self::inline_wrapped(self.buf, ring, pos, hdr, data, seg) };
        }
        self.off = end;
        // A first inline segment was checked with the size; a later one
        // leaves the size to `finish`.
        self.fits = first;
        self
    }

    /// The inline segment of `inline` where it crosses the ring's end (or
    /// starts past it): header, data and zero padding, `seg` bytes from the
    /// unmasked ring offset `pos`. Out of line, so that the common path
    /// keeps its registers.
    ///
    /// # Safety
    /// `buf` is a ring of `ring` writable bytes (a power of two), and
    /// `seg` is at most `ring`.
    #[cold]
    #[inline(never)]
    unsafe fn inline_wrapped(buf: *mut u8, ring: usize, pos: usize, hdr: Be32, data: &[u8], seg: usize) {
        // SAFETY: forwarded; each piece stays within `seg` bytes from `pos`.
        unsafe {
            Self::put_wrapped(buf, ring, pos, &hdr.raw().to_ne_bytes());
            Self::put_wrapped(buf, ring, pos + 4, data);
            Self::put_wrapped(buf, ring, pos + 4 + data.len(), &[0u8; DS_BYTES][..seg - 4 - data.len()]);
        }
    }

    /// Writes the control segment (DS counted from the segments added),
    /// advances the producer index by the WQE's basic blocks, and returns
    /// the WQE index. The doorbell is rung separately ([`SqRing::ring`]).
    #[inline(always)]
    pub fn finish(self) -> u16 {
        let start = self.start;
        let (pi, sq, ..) = self.finish_inner();
        sq.pending += 1;
        sq.last_start = start;
        pi
    }

    /// Finishes the WQE and rings the doorbell at once (for it and any WQEs
    /// finished before without a doorbell): [`WqeWriter::finish`] then
    /// [`SqRing::ring`], with what is known of this WQE folded in.
    #[inline(always)]
    pub fn post<M: Mmio>(self, mmio: &mut M) -> u16 {
        let (pi, sq, base, ds, inline, first) = self.finish_inner();
        sq.doorbell(mmio, true, base, ds, inline, first.to_ne_bytes());
        pi
    }

    #[inline(always)]
    fn finish_inner(self) -> (u16, &'s mut SqRing, *mut u8, u8, bool, u64) {
        // `max_wqe_bytes >= 128` (`SqLimits::new`): a WQE within two basic
        // blocks fits, and the comparison folds away where its size is known.
        // A WQE whose payload method checked the size needs no check here
        // (the typed builders' WQEs with a payload).
        if !self.fits && self.off > SqLimits::MIN_WQE_BYTES as usize && self.off > self.sq.limits.max_wqe_bytes as usize
        {
            too_big(self.sq.qpn, self.off, self.sq.limits.max_wqe_bytes);
        }
        let ds = (self.off / DS_BYTES) as u8;
        let bbs = self.off.div_ceil(SEND_WQE_BB) as u32;
        // Every byte past the blocks found free at the start was checked
        // when it was stored, against a limit of whole blocks: the WQE's
        // blocks are free.
        debug_assert!(bbs as usize * SEND_WQE_BB <= self.limit, "a WQE's blocks past the free space");
        let pi = self.start as u16;
        // The same 16 bytes as `CtrlSeg::set` writes, as two 8-byte stores
        // in memory order: the two big-endian words, then signature, the
        // DCI stream id (bytes 9-10, big endian), fm_ce_se and imm.
        let w0 = self.sq.ctrl_word0(pi, self.opcode, self.opmod, ds);
        let (fm, imm) = (u64::from(self.fm_ce_se.bits()), u64::from(self.imm));
        let stream = u64::from(self.stream.to_be());
        let words: [u64; 2] = if cfg!(target_endian = "little") {
            [w0, (stream << 8) | (fm << 24) | (imm << 32)]
        } else {
            [w0, (stream << 40) | (fm << 32) | imm]
        };
        // SAFETY: `pos` is a masked offset, a multiple of 64 (`begin_at`),
        // so inside the ring.
        let base = unsafe { self.buf.add(self.pos) };
        // SAFETY: the control segment's 16 bytes sit at the WQE start, inside
        // the ring; WQEs start on 64-byte basic blocks, so 8-byte aligned.
        unsafe { std::ptr::write(base.cast::<[u64; 2]>(), words) };
        let sq = self.sq;
        // After a UMR WQE the next one waits for it (small fence), unless it
        // asks for the strong fence itself: libmlx5's `fm_cache`.
        if sq.next_fence != 0 {
            sq.take_fence(base);
        }
        let first = self.pos / SEND_WQE_BB;
        debug_assert!(first == (self.start & sq.slot_mask) as usize && sq.slots.len() == sq.wqe_cnt as usize);
        // The WQE's first block only: a block inside it keeps an entry
        // that differs from its index (`sweep`), so a completion naming it
        // is refused all the same.
        // SAFETY: `first` is a masked offset in the ring (`ring_mask` is
        // `wqe_cnt * 64 - 1`) over 64, so below `wqe_cnt`, the table's
        // length (allocated so in `from_raw`, never resized).
        unsafe {
            let size = bbs as u16 | if self.inline { SLOT_INLINE } else { 0 };
            *sq.slots.as_mut_ptr().add(first) = Slot { start: self.start, size, stream: self.stream };
        }
        sq.cur_post = sq.cur_post.wrapping_add(bbs);
        (pi, sq, base, ds, self.inline, words[0])
    }
}

mod sealed {
    /// The crate's segment types: `#[repr(C)]`, no padding. Private, so
    /// that `put_seg` can take the data segment too, which [`super::Segment`]
    /// (the public bound of `seg`) leaves out.
    pub trait Sealed: Copy {}
}

/// A WQE segment type of [`crate::mlx5dv::queue::seg`] that the raw writer's
/// [`WqeWriter::seg`] takes: `#[repr(C)]`, a multiple of 16 bytes, no
/// padding, so no uninitialised byte is ever copied into the ring. Sealed:
/// implemented by this crate only, for the segments that name no local
/// memory; the data segment ([`DataSeg`]) is not one of them. (Where a
/// segment lands is the raw writer's contract, [`SqRing::wqe`]: its bytes
/// are read as a data segment if it is put where the opcode has one.)
///
/// A type of the caller's, which may have padding bytes, is refused:
///
/// ```compile_fail,E0277
/// use rrddmma::mlx5dv::sq::WqeWriter;
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Padded { a: u8, b: u64 }
/// fn add(w: WqeWriter<'_>) -> WqeWriter<'_> {
///     w.seg(&Padded { a: 1, b: 2 })
/// }
/// ```
///
/// and so is a data segment, whose address only the `unsafe`
/// [`WqeWriter::data`] may put in a WQE:
///
/// ```compile_fail,E0277
/// use rrddmma::mlx5dv::{seg::DataSeg, sq::WqeWriter};
/// fn add(w: WqeWriter<'_>) -> WqeWriter<'_> {
///     let mut d = DataSeg::default();
///     d.set(64, 1, 0xdead_0000);
///     w.seg(&d)
/// }
/// ```
pub trait Segment: sealed::Sealed {}

impl sealed::Sealed for DataSeg {}

macro_rules! segments {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Segment for $t {}
    )*};
}
segments!(RaddrSeg, AtomicSeg, MaskedCasSeg, MaskedFaSeg, DatagramSeg, EthSeg, TmSeg);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5dv::queue::mmio::{Op, Recorder};

    /// Stores between `wc_start` and the flush of one doorbell.
    fn stores(ring: &mut SqRing) -> usize {
        // SAFETY: a SEND with one data segment; the ring is test memory no
        // device reads, so the segment's address is never dereferenced.
        unsafe { ring.wqe(WqeOpcode::SEND, 0, CtrlFlags::empty(), 0).data(8, 1, 0x1000) }.finish();
        let mut rec = Recorder::default();
        ring.ring(&mut rec);
        rec.ops.iter().filter(|o| matches!(o, Op::Write64(..))).count()
    }

    /// A one-block WQE of `put_block` is the raw writer's WQE of the same
    /// segments, rung the same way; `retire_block` frees through an
    /// outstanding WQE only.
    #[test]
    fn a_block_wqe_is_the_raw_writers_and_retires_through_itself_only() {
        use crate::mlx5dv::queue::seg::{TmOpcode, TmSeg};
        use crate::mlx5dv::queue::test_ring::host_ring;
        let (mut a, mut b) = (host_ring(), host_ring());
        let mut seg = TmSeg::with_op(TmOpcode::APPEND);
        seg.index = crate::mlx5dv::queue::be::Be16::new(3);
        seg.append_tag = Be64::new(0x1122_3344_5566_7788);
        let mut d = DataSeg::default();
        d.set(64, 7, 0x1000);
        let (mut ma, mut mb) = (Recorder::default(), Recorder::default());
        for k in 0..3u32 {
            // SAFETY: test memory no device reads; a TAG_MATCHING add's
            // segments, the data segment last.
            let i = unsafe {
                a.sq.wqe(WqeOpcode::TAG_MATCHING, 0, CtrlFlags::empty(), 0).seg(&seg).data(64, 7, 0x1000).post(&mut ma);
                b.sq.put_block(WqeOpcode::TAG_MATCHING, seg.units(), Some(d), Some(&mut mb))
            };
            assert_eq!(i, k);
        }
        // SAFETY: as above; a remove's segments, no data segment, rung later.
        unsafe {
            a.sq.wqe(WqeOpcode::TAG_MATCHING, 0, CtrlFlags::empty(), 0).seg(&seg).finish();
            b.sq.put_block(WqeOpcode::TAG_MATCHING, seg.units(), None, None::<&mut Recorder>);
        }
        a.sq.ring(&mut ma);
        b.sq.ring(&mut mb);
        assert_eq!(a.buf[..32], b.buf[..32]);
        assert_eq!(ma.ops, mb.ops);
        assert_eq!(b.sq.available(), 12);
        // Not outstanding: past the producer index, or before the ring's head.
        assert!(!b.sq.retire_block(4) && !b.sq.retire_block(0xffff));
        assert_eq!(b.sq.available(), 12);
        assert!(b.sq.retire_block(1));
        assert_eq!(b.sq.available(), 14);
        assert!(!b.sq.retire_block(1) && !b.sq.retire_block(0));
        assert!(b.sq.retire_block(3));
        assert_eq!(b.sq.available(), 16);
    }

    /// The small fence after a UMR WQE lands in the next WQE's `fm_ce_se`
    /// (byte 11), typed or raw, unless it asked for the strong fence, and
    /// only in that one.
    #[test]
    fn the_pending_small_fence_goes_to_the_next_wqe_only() {
        let mut buf = vec![0u64; 8 * 8];
        let mut dbrec = [Be32::default(); 2];
        let mut bf = vec![0u64; 8];
        // SAFETY: test memory of the sizes and alignments `from_raw` asks for.
        let mut ring = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42)
        };
        let small = CtrlFlags::INITIATOR_SMALL_FENCE.bits();
        let fm = |ring: &SqRing, pi: u16| {
            // SAFETY: byte 11 of a WQE's control segment, inside the ring.
            unsafe { *ring.buf.add(usize::from(pi) * SEND_WQE_BB + 11) }
        };
        ring.set_small_fence();
        let a = ring.nop(CtrlFlags::CQ_UPDATE).finish();
        assert_eq!(fm(&ring, a), CtrlFlags::CQ_UPDATE.bits() | small, "typed WQE after a UMR");
        let b = ring.nop(CtrlFlags::CQ_UPDATE).finish();
        assert_eq!(fm(&ring, b), CtrlFlags::CQ_UPDATE.bits(), "one WQE only");
        ring.set_small_fence();
        let c = ring.send(CtrlFlags::FENCE).inline(&[1; 4]).finish();
        assert_eq!(fm(&ring, c), CtrlFlags::FENCE.bits(), "the strong fence is kept as asked");
        assert!(!ring.pending_small_fence());
    }

    /// The checks of segments past a WQE's first block (written in place,
    /// the ring's end by a mask): on a ring with one free block, a
    /// two-block WQE panics before its second block, which wraps onto an
    /// unretired WQE, is written; typed segments and inline data alike.
    #[test]
    fn blocks_past_the_first_are_checked_before_they_are_written() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        let rdma = crate::prim::RemoteAddr { addr: 0x1000, rkey: 7 };
        type Post = fn(&mut SqRing, crate::prim::RemoteAddr);
        let cases: [(&str, Post); 3] = [
            ("masked CAS and its data segment", |sq, r| {
                // SAFETY: test memory no device reads.
                unsafe { sq.masked_cas(CtrlFlags::empty(), r, 1, 2, 3, 4).data(8, 1, 0x2000) }.finish();
            }),
            ("16-byte masked CAS operands", |sq, r| {
                // SAFETY: test memory no device reads.
                let proof = unsafe { crate::mlx5dv::wqe::ExtAtomics::assume() };
                sq.masked_cas_ext(proof, CtrlFlags::empty(), r, &[1; 16], &[2; 16], &[3; 16], &[4; 16]).finish();
            }),
            ("inline data", |sq, r| {
                sq.write(CtrlFlags::empty(), r).inline(&[9; 40]).finish();
            }),
        ];
        for (what, post) in cases {
            let mut buf = vec![0u64; 8 * 8];
            let mut dbrec = [Be32::default(); 2];
            let mut bf = vec![0u64; 8];
            // SAFETY: test memory of the sizes and alignments `from_raw` asks for.
            let mut ring = unsafe {
                SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42)
            };
            for _ in 0..7 {
                ring.nop(CtrlFlags::CQ_UPDATE).finish();
            }
            // SAFETY: block 0 of the ring, 64 bytes.
            let block0 = |ring: &SqRing| unsafe { std::slice::from_raw_parts(ring.buf, 64).to_vec() };
            let before = block0(&ring);
            let r = catch_unwind(AssertUnwindSafe(|| post(&mut ring, rdma)));
            let msg = r.expect_err(what).downcast::<String>().map(|s| *s).unwrap_or_default();
            assert!(msg.contains("send queue full"), "{what}: {msg}");
            assert_eq!(block0(&ring), before, "{what}: the unretired WQE in block 0 is untouched");
            assert_eq!(ring.cur_post(), 7, "{what}: nothing posted");
        }
    }

    /// Only a WQE's first block gets a slot entry; a block inside a
    /// multi-block WQE keeps an old one. The sweep, once per 2^30 blocks
    /// retired, clears entries older than a lap, so that none lives the
    /// 2^32 blocks after which it would name a block inside a WQE as a
    /// start. Here a block's entry is made to hold the index it will have
    /// a lap after the sweep (as a 2^32-block-old entry would): without
    /// the sweep a completion naming it (inside a WQE) would be taken.
    #[test]
    fn entries_older_than_a_lap_are_swept_once_per_2_30_blocks() {
        let mut buf = vec![0u64; 8 * 8];
        let mut dbrec = [Be32::default(); 2];
        let mut bf = vec![0u64; 8];
        // SAFETY: test memory of the sizes and alignments `from_raw` asks for.
        let mut ring = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42)
        };
        let base = (1u32 << SWEEP_SHIFT) - 4;
        ring.start_at(base);
        // 32 bytes of header and 48 of inline payload: two blocks.
        let two = |ring: &mut SqRing| {
            ring.write(CtrlFlags::empty(), crate::prim::RemoteAddr { addr: 0, rkey: 1 }).inline(&[0; 40]).finish()
        };
        // Two 2-block WQEs at base and base + 2; retire both, crossing no
        // boundary yet (the head stops at base + 4 = 2^30).
        let a = two(&mut ring);
        two(&mut ring);
        // Block base + 9 (slot 1) is inside the WQE that starts at
        // base + 8, a lap on; forge the stale entry it would have.
        let inside = base.wrapping_add(9);
        ring.slots[(inside & 7) as usize] = Slot { start: inside, size: 2, stream: 0 };
        assert!(ring.retire_counter(a.wrapping_add(2)), "the second WQE completes; the head reaches 2^30");
        assert_eq!(ring.head, 1 << SWEEP_SHIFT, "the boundary is crossed: swept");
        // A lap on: WQEs at base + 4 .. base + 12, two blocks each.
        for _ in 0..4 {
            two(&mut ring);
        }
        assert!(!ring.retire_counter(inside as u16), "block {inside:#x} is inside the WQE at {:#x}", inside - 1);
        assert!(ring.retire_counter(base.wrapping_add(8) as u16), "the WQE that starts there is taken");
    }

    /// A DC WQE's header (control, DC address, remote address: 80 bytes)
    /// is found free at its start: on a ring with one free block it is
    /// refused before any byte is written, and a stream id checked once
    /// (`stream_id`) lands in bytes 9-10 of the control segment.
    #[test]
    fn dc_headers_are_checked_at_the_start_and_streams_at_set_up() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        let mut buf = vec![0u64; 8 * 8];
        let mut dbrec = [Be32::default(); 2];
        let mut bf = vec![0u64; 8];
        // SAFETY: test memory of the sizes and alignments `from_raw` asks for.
        let mut ring = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42)
        };
        // SAFETY: a model ring, a DCI's from here on.
        unsafe { ring.set_transport(SqTransport::DcInitiator) };
        ring.set_dci_streams(2);
        let s3 = ring.stream_id(3);
        let r = catch_unwind(AssertUnwindSafe(|| ring.stream_id(4)));
        let msg = r.expect_err("stream 4 of 4").downcast::<String>().map(|s| *s).unwrap_or_default();
        assert!(msg.contains("streams 0..4"), "{msg}");
        let av = DatagramSeg::default();
        let raddr = crate::prim::RemoteAddr { addr: 0x1000, rkey: 7 };
        let pi = ring.dc(&av).on(s3).write(CtrlFlags::empty(), raddr).inline(&[1; 8]).finish();
        // SAFETY: bytes 9-10 of the WQE's control segment, inside the ring.
        let id = unsafe { [*ring.buf.add(usize::from(pi) * 64 + 9), *ring.buf.add(usize::from(pi) * 64 + 10)] };
        assert_eq!(u16::from_be_bytes(id), 3);
        for _ in 0..5 {
            ring.nop(CtrlFlags::empty()).finish();
        }
        assert_eq!(ring.available(), 1);
        // SAFETY: block 0 of the ring, 64 bytes.
        let block0 = |ring: &SqRing| unsafe { std::slice::from_raw_parts(ring.buf, 64).to_vec() };
        let before = block0(&ring);
        let r = catch_unwind(AssertUnwindSafe(|| {
            ring.dc(&av).on(s3).write(CtrlFlags::empty(), raddr).inline(&[1; 8]).finish();
        }));
        let msg = r.expect_err("a 2-block header").downcast::<String>().map(|s| *s).unwrap_or_default();
        assert!(msg.contains("send queue full") && msg.contains("128-byte"), "{msg}");
        assert_eq!(block0(&ring), before, "the unretired WQE in block 0 is untouched");
        assert_eq!(ring.cur_post(), 7, "nothing posted");
    }

    /// Regression (libmlx5 harness, UMR with 66 DS): `ring` reads the last
    /// WQE's DS count back from its control segment, all 8 bits of it: a
    /// count above 63 read as 6 bits (66 as 2) would send a 1056-byte WQE
    /// by BlueFlame where libmlx5 rings an 8-byte doorbell.
    #[test]
    fn ring_reads_the_whole_ds_count_of_the_last_wqe() {
        let mut buf = vec![0u64; 32 * 8];
        let mut dbrec = [Be32::default(); 2];
        let mut bf = vec![0u64; 64];
        // SAFETY: test memory of the sizes and alignments `from_raw` asks for.
        let mut ring = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 32, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42)
        };
        ring.bf_size_available = 256;
        // SAFETY: the "register" is test memory of this ring alone.
        unsafe { ring.set_blueflame(true) };
        // Control and remote address (32 bytes), 4 + 1020 inline bytes: 66 DS.
        let pi =
            ring.write(CtrlFlags::empty(), crate::prim::RemoteAddr { addr: 0, rkey: 1 }).inline(&[5; 1020]).finish();
        // SAFETY: byte 7 of the WQE's control segment.
        assert_eq!(unsafe { *ring.buf.add(usize::from(pi) * 64 + 7) }, 66);
        let mut rec = Recorder::default();
        ring.ring(&mut rec);
        let writes = rec.ops.iter().filter(|o| matches!(o, Op::Write64(..))).count();
        assert_eq!(writes, 1, "a WQE larger than the BlueFlame buffer: the 8-byte doorbell");
    }

    /// Regression (libmlx5 harness, views): turning BlueFlame on kept
    /// nothing of an earlier `set_prefer_bf(false)`, so a view set up in that
    /// order copied WQEs without inline data where libmlx5 rings an 8-byte
    /// doorbell.
    #[test]
    fn set_blueflame_keeps_the_prefer_bf_choice() {
        let mut buf = vec![0u64; 8 * 8];
        let mut dbrec = [Be32::default(); 2];
        let mut bf = vec![0u64; 64];
        // SAFETY: test memory of the sizes and alignments `from_raw` asks for.
        let mut ring = unsafe {
            SqRing::from_raw(buf.as_mut_ptr().cast(), 8, dbrec.as_mut_ptr(), bf.as_mut_ptr().cast(), 0, 0x42)
        };
        ring.bf_size_available = 256;
        ring.set_prefer_bf(false);
        // SAFETY: the "register" is test memory of this ring alone.
        unsafe { ring.set_blueflame(true) };
        assert_eq!(stores(&mut ring), 1, "no inline data, prefer-BF off: an 8-byte doorbell");
        ring.set_prefer_bf(true);
        // SAFETY: as above.
        unsafe { ring.set_blueflame(true) };
        assert_eq!(stores(&mut ring), 8, "prefer-BF on: the 64-byte block through BlueFlame");
    }
}
