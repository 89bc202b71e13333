//! Striding (multi-packet) receive queues: the WQE of a striding WQ, its
//! CQEs decoded into stride completions, and the ring that posts WQEs and
//! hands a WQE back only once the device is done with all its strides.
//!
//! A striding WQ ([`Wq`](crate::prim::Wq) built with
//! [`WqBuilder::striding`](crate::prim::WqBuilder::striding):
//! `mlx5dv_create_wq` with `MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ`, checked
//! against [`striding_rq_caps`]; its ring from
//! [`mprq_wq::ring`](crate::mlx5dv::raw::mprq_wq::ring)) receives
//! many packets into one WQE: the WQE's buffer is `2^log_num_strides`
//! strides of `2^log_stride_bytes` bytes, and each packet takes one or more
//! strides from the next free one. The WQE (`struct mlx5_mprq_wqe` of
//! `mlx5dv.h`) is a 16-byte `mlx5_wqe_srq_next_seg` (zero: the queue is
//! cyclic) and then the data segment of the whole buffer; a larger WQE
//! (`max_sge` above 1) ends its list with a segment of key
//! `MLX5_INVALID_LKEY`.
//!
//! Each packet's CQE carries, besides the fields of an ordinary receive:
//! - `wqe_id` (bytes 2-3): the WQE the packet landed in;
//! - `wqe_counter`: the index of its first stride;
//! - `byte_cnt`: bit 31 the filler flag (`MLX5_MPWRQ_FILLER_CQE`: no packet,
//!   the device skipped the strides to the WQE's end), bits 16-30 the
//!   strides consumed, bits 0-15 the packet's length.
//!
//! [`CqRing::poll_strides`] polls them, stamping each with the CQ ring and
//! its position there; [`MprqRing::complete`] takes each stamped completion
//! of its own WQ once, in order, adds its strides to its WQE and returns
//! the WQE when they reach the WQE's stride count: only then may it be
//! posted again. A completion decoded from bytes
//! ([`StrideCompletion::decode`]), one of another WQ on a shared CQ, or one
//! offered twice or out of order frees nothing ([`StrideRefusal`]).
//!
//! libmlx5 itself knows none of this: its `ibv_post_wq_recv` writes the data
//! segment at the WQE's first byte (no next segment) and its poller reports
//! `byte_cnt` whole as the byte length and takes `wqe_counter` (the stride
//! index) as the WQE index. A striding WQ is therefore posted and polled
//! through this module (and [`CqRing`] for the CQ), as DPDK's and the
//! kernel's mlx5 drivers do with their own code; [`Wq::post_recv`](crate::prim::Wq::post_recv)
//! refuses a striding WQ.
//!
//! # Compressed CQEs
//! A CQ compressing in [`CqeResFormat::CsumStridx`](crate::mlx5dv::completion::mini::CqeResFormat::CsumStridx)
//! writes sessions whose mini-CQEs carry the byte count (filler flag and
//! stride count included) and the stride index; `CqRing` expands them with
//! the title's other fields, `wqe_id` included. The device compresses only
//! CQEs that share those fields, so a session's packets are in one WQE; a
//! session that a device closed only at a WQE change is what this
//! expansion assumes (the Linux mlx5e driver assumes the same).

use std::fmt;
use std::sync::atomic::{fence, Ordering};

use crate::mlx5dv::completion::cq::CqRing;
use crate::mlx5dv::completion::cqe::{Completion, Cqe64};
use crate::mlx5dv::queue::be::{Be16, Be32, Be64};
use crate::mlx5dv::queue::seg::{DataSeg, INVALID_LKEY};
#[cfg(test)]
use crate::prim::Error;

pub use crate::prim::mlx5::{striding_rq_caps, StridingParams, StridingRqCaps, STRIDING_OP};

/// `MLX5_MPWRQ_FILLER_CQE` as a bit of `byte_cnt`: a filler CQE.
pub const FILLER: u32 = 1 << 31;
/// Bits 16-30 of `byte_cnt`: the strides a packet (or filler) consumed.
pub const STRIDES_SHIFT: u32 = 16;
/// The mask of the stride count after the shift.
pub const STRIDES_MASK: u32 = 0x7fff;
/// Bits 0-15 of `byte_cnt`: the packet's length.
pub const LEN_MASK: u32 = 0xffff;

/// `struct mlx5_wqe_srq_next_seg`: the first 16 bytes of a striding WQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NextSeg {
    /// Reserved.
    pub rsvd0: [u8; 2],
    /// The next WQE of a linked-list queue (0 on a cyclic one).
    pub next_wqe_index: Be16,
    /// WQE signature (0: signatures off).
    pub signature: u8,
    /// Reserved.
    pub rsvd1: [u8; 11],
}

/// A striding WQE (`struct mlx5_mprq_wqe`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MprqWqe {
    /// Next segment.
    pub nseg: NextSeg,
    /// The WQE's buffer.
    pub dseg: DataSeg,
}

const _: () = {
    assert!(std::mem::size_of::<NextSeg>() == 16);
    assert!(std::mem::size_of::<MprqWqe>() == 32);
    assert!(std::mem::offset_of!(MprqWqe, dseg) == 16);
};

/// One CQE of a striding WQ, decoded.
///
/// The public fields are for reading. [`MprqRing::complete`] and
/// [`MprqRing::payload`] do not use them: they use what
/// [`CqRing::poll_strides`] recorded privately when it took the CQE (the CQ
/// ring, the CQE's position in it, its WQ number, WQE index, stride index
/// and byte count). A completion from [`StrideCompletion::decode`] or
/// `Default` carries no such record, editing the fields changes nothing it
/// frees, and a struct literal cannot be written outside the crate:
///
/// ```compile_fail,E0451
/// use rrddmma::mlx5dv::mprq::StrideCompletion;
/// let forged = StrideCompletion { wqe_index: 3, strides: 512, ..StrideCompletion::default() };
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StrideCompletion {
    /// The WQE the packet landed in (`wqe_id`, bytes 2-3), as the device
    /// wrote it; [`MprqRing::complete`] takes it modulo the ring's size.
    pub wqe_index: u16,
    /// The packet's first stride (`wqe_counter`).
    pub stride_index: u16,
    /// Strides the packet (or the filler) consumed (`byte_cnt` bits 16-30).
    pub strides: u16,
    /// The packet's length (`byte_cnt` bits 0-15); 0 meaningless on a filler.
    pub byte_len: u32,
    /// A filler CQE (`byte_cnt` bit 31): no packet; the strides to the
    /// WQE's end are skipped.
    pub filler: bool,
    /// The CQE's other fields (opcode, status, QPN, checksum-free fields
    /// of a receive), as [`Cqe64::decode`] reads them; its `byte_len` is
    /// `byte_cnt` whole and its `wqe_counter` the stride index. It cannot
    /// be retired by a send ring.
    pub cqe: Completion,
    /// What the poller saw, for the ring; `cq` 0 for completions not polled.
    stamp: Stamp,
}

/// Where a striding completion came from, recorded by
/// [`CqRing::poll_strides`]: the CQ ring (`cq`, its process-unique number,
/// 0 for none) and the CQE's position in it (`seq`), and the CQE's fields
/// that say which bytes of which WQE it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stamp {
    cq: u64,
    seq: u64,
    wqn: u32,
    wqe: u16,
    stride: u16,
    byte_cnt: u32,
}

impl Stamp {
    fn strides(&self) -> u32 {
        (self.byte_cnt >> STRIDES_SHIFT) & STRIDES_MASK
    }

    fn filler(&self) -> bool {
        self.byte_cnt & FILLER != 0
    }
}

/// Why [`MprqRing::complete`] refused a completion; the ring is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrideRefusal {
    /// Not polled by a CQ ring: made up, `Default`, or from
    /// [`StrideCompletion::decode`]. Poll with [`CqRing::poll_strides`].
    NotPolled,
    /// Polled by a CQ ring other than the one the ring is bound to
    /// ([`MprqRing::bind_cq`]): another CQ, or another view of it.
    OtherCq,
    /// Of another WQ on the CQ (a shared CQ, as the WQs of one RSS
    /// indirection table often are): give it to that WQ's ring.
    OtherWq {
        /// The WQ number the CQE names.
        wqn: u32,
    },
    /// At or before the last completion this ring took: offered twice, or
    /// out of the order it was polled in.
    Taken {
        /// Its position in the CQ ring.
        seq: u64,
        /// The first position the ring takes next.
        next: u64,
    },
}

impl fmt::Display for StrideRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StrideRefusal::NotPolled => write!(
                f,
                "striding completion not polled by a CQ ring (made up, or from StrideCompletion::decode): poll \
                 with CqRing::poll_strides"
            ),
            StrideRefusal::OtherCq => write!(
                f,
                "striding completion polled by another CQ ring than the ring's: bind the ring to the view that \
                 polls its CQ (MprqRing::bind_cq)"
            ),
            StrideRefusal::OtherWq { wqn } => {
                write!(f, "striding completion of WQ {wqn:#x}, not this ring's: give it to that WQ's ring")
            }
            StrideRefusal::Taken { seq, next } => write!(
                f,
                "striding completion at position {seq} of its CQ ring, but the ring has taken completions up to \
                 {next}: offer each completion once, in the order polled"
            ),
        }
    }
}

impl std::error::Error for StrideRefusal {}

impl StrideCompletion {
    /// Decodes a CQE of a striding WQ, for reading: only a completion
    /// from [`CqRing::poll_strides`] is taken by [`MprqRing::complete`].
    #[inline]
    pub fn decode(cqe: &Cqe64) -> StrideCompletion {
        let mut c = StrideCompletion::default();
        c.fill(cqe, 0, 0);
        c
    }

    /// Decodes `cqe` into `self`, stamped with CQ ring `cq` (0: none) and
    /// position `seq`.
    #[inline(always)]
    fn fill(&mut self, cqe: &Cqe64, cq: u64, seq: u64) {
        let bc = cqe.byte_cnt.get();
        let wqe = u16::from_be_bytes([cqe.rsvd0[2], cqe.rsvd0[3]]);
        let stride = cqe.wqe_counter.get();
        self.cqe = cqe.decode();
        self.wqe_index = wqe;
        self.stride_index = stride;
        self.strides = ((bc >> STRIDES_SHIFT) & STRIDES_MASK) as u16;
        self.byte_len = bc & LEN_MASK;
        self.filler = bc & FILLER != 0;
        self.stamp = Stamp { cq, seq, wqn: self.cqe.qpn(), wqe, stride, byte_cnt: bc };
    }

    /// `byte_cnt` as the CQE held it (filler flag, strides, length).
    pub fn raw_byte_cnt(&self) -> u32 {
        (u32::from(self.filler) << 31) | (u32::from(self.strides) << STRIDES_SHIFT) | (self.byte_len & LEN_MASK)
    }
}

impl CqRing {
    /// Polls up to `out.len()` CQEs of striding WQs (compressed sessions
    /// expanded when [`CqRing::set_compression`] was called), decoding them
    /// into `out` ([`StrideCompletion::decode`]) and stamping each with
    /// this ring and its position, which [`MprqRing::complete`] checks;
    /// then updates the consumer record if any were taken. No allocation,
    /// no system call.
    #[inline]
    pub fn poll_strides(&mut self, out: &mut [StrideCompletion]) -> usize {
        let uid = self.uid();
        let mut n = 0;
        while let Some(o) = out.get_mut(n) {
            // Decoded in place: from the ring's entry into the caller's slot.
            if self.take_stamped_with(|raw, seq| o.fill(raw, uid, seq)).is_none() {
                break;
            }
            n += 1;
        }
        if n > 0 {
            self.publish_taken();
        }
        n
    }
}

/// The receive ring of a striding WQ: posts WQEs, writes the doorbell
/// record, and tracks the strides the device has consumed in each WQE.
///
/// It takes completions polled from one CQ ring ([`MprqRing::bind_cq`];
/// given at creation) by [`CqRing::poll_strides`], for its own WQ number,
/// each once and in the order polled.
///
/// Made by [`mprq_wq::ring`](crate::mlx5dv::raw::mprq_wq::ring) or, for a
/// queue made elsewhere, [`MprqRing::from_raw`].
#[derive(Debug)]
pub struct MprqRing {
    buf: *mut u8,
    wqe_cnt: u32,
    wqe_shift: u32,
    dbrec: *mut Be32,
    params: StridingParams,
    /// `params.wqe_bytes()`, big endian: every WQE's data segment byte count.
    wqe_bytes_be: Be32,
    /// `params.num_strides()`: the strides that hand a WQE back.
    num_strides: u32,
    /// The WQ number its CQEs carry.
    wqn: u32,
    /// The CQ ring completions are taken from.
    cq_uid: u64,
    /// Positions below this were in the CQ when the ring was bound: stale.
    bound_at: u64,
    /// The first position taken next (one past the last one taken).
    next_seq: u64,
    /// WQEs posted (free-running).
    head: u32,
    /// WQEs handed back (free-running); the device fills them in order.
    tail: u32,
    /// Strides consumed so far, per WQE slot.
    consumed: Box<[u32]>,
    /// Each slot's buffer address.
    addrs: Box<[u64]>,
    /// Completions that named a WQE not posted (device values, ignored).
    stray: u64,
}

// SAFETY: the ring owns its position in the queue; the raw pointers are the
// queue's memory, which `from_raw`'s contract keeps alive and the ring's alone.
unsafe impl Send for MprqRing {}

impl MprqRing {
    /// A ring over `wqe_cnt` WQEs of `wqe_size` bytes at `buf`, with the
    /// receive doorbell record `dbrec`, whose WQEs have the shape `params`,
    /// of the WQ numbered `wqn`, taking completions polled from `cq` (the
    /// WQ's CQ; [`MprqRing::bind_cq`]).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `wqe_cnt * wqe_size` bytes and
    /// `dbrec` for a 4-byte write, both alive while the ring lives, and
    /// nothing else may post to this queue; `wqn` is the number the
    /// device writes in the queue's CQEs (the WQ's `wq_num`), which no other
    /// queue completing to `cq` has.
    ///
    /// # Panics
    /// If `wqe_cnt` is not a power of two, `wqe_size` is not a power of two
    /// of at least 32, or a pointer is misaligned (programming errors).
    pub unsafe fn from_raw(
        buf: *mut u8,
        wqe_cnt: u32,
        wqe_size: u32,
        dbrec: *mut Be32,
        params: StridingParams,
        wqn: u32,
        cq: &CqRing,
    ) -> MprqRing {
        assert!(wqe_cnt.is_power_of_two(), "striding WQ size {wqe_cnt} is not a power of two");
        assert!(
            wqe_size.is_power_of_two() && wqe_size >= 32,
            "striding WQE size {wqe_size} is not a power of two of at least 32 (next segment and data segment)"
        );
        assert!(buf as usize % 16 == 0, "striding WQ buffer {buf:p} is not 16-byte aligned");
        assert!(dbrec as usize % 4 == 0, "doorbell record {dbrec:p} is not 4-byte aligned");
        let horizon = cq.horizon();
        MprqRing {
            buf,
            wqe_cnt,
            wqe_shift: wqe_size.trailing_zeros(),
            dbrec,
            params,
            wqe_bytes_be: Be32::new(params.wqe_bytes()),
            num_strides: params.num_strides(),
            wqn,
            cq_uid: cq.uid(),
            bound_at: horizon,
            next_seq: horizon,
            head: 0,
            tail: 0,
            consumed: vec![0; wqe_cnt as usize].into_boxed_slice(),
            addrs: vec![0; wqe_cnt as usize].into_boxed_slice(),
            stray: 0,
        }
    }

    /// Starts the producer index at `pi` (a WQ posted before the ring):
    /// the WQEs before it count as handed back.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn start_at(&mut self, pi: u32) {
        self.head = pi;
        self.tail = pi;
    }

    /// Takes completions from `cq` from now on (a new view of the WQ's
    /// CQ): [`MprqRing::complete`] refuses those of any other CQ ring, and
    /// counts those of `cq` for CQEs already in it ([`CqRing::horizon`]) as
    /// [`stray`](MprqRing::stray). Their strides are lost; a WQE they would
    /// have handed back comes back with the next one the device completes.
    pub fn bind_cq(&mut self, cq: &CqRing) {
        self.cq_uid = cq.uid();
        self.bound_at = cq.horizon();
        self.next_seq = self.bound_at;
    }

    /// The WQ number the ring takes completions of.
    pub fn wqn(&self) -> u32 {
        self.wqn
    }

    /// The WQEs' shape.
    pub fn params(&self) -> StridingParams {
        self.params
    }

    /// WQEs in the ring.
    pub fn wqe_cnt(&self) -> u32 {
        self.wqe_cnt
    }

    /// WQEs posted so far (free-running; the doorbell record holds its low 16 bits).
    pub fn head(&self) -> u32 {
        self.head
    }

    /// WQEs posted and not handed back: the device may still write them.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// WQEs that can be posted now.
    pub fn free(&self) -> u32 {
        self.wqe_cnt - self.outstanding()
    }

    /// Strides the device has consumed in WQE slot `slot` (below
    /// [`MprqRing::wqe_cnt`]).
    pub fn consumed(&self, slot: u16) -> u32 {
        self.consumed[usize::from(slot) & (self.wqe_cnt as usize - 1)]
    }

    /// Completions of this WQ that named a WQE that was not outstanding,
    /// or were in the CQ before the ring was bound to it (ignored).
    pub fn stray(&self) -> u64 {
        self.stray
    }

    /// Writes the next WQE: its buffer of [`StridingParams::wqe_bytes`]
    /// bytes at `addr` under `lkey`. Returns its slot, or `None` when all
    /// WQEs are outstanding. The device sees it after
    /// [`MprqRing::ring_doorbell`].
    ///
    /// # Safety
    /// `addr .. addr + wqe_bytes` must be memory registered under `lkey`
    /// for local writes, left to the device until this WQE comes back from
    /// [`MprqRing::complete`] (or the WQ is destroyed).
    #[inline]
    pub unsafe fn post(&mut self, lkey: u32, addr: u64) -> Option<u16> {
        if self.outstanding() >= self.wqe_cnt {
            return None;
        }
        let slot = self.head & (self.wqe_cnt - 1);
        let wqe = self.wqe_ptr(slot).cast::<u64>();
        // The WQE as four 8-byte words in memory order: the next segment
        // (zero: a cyclic queue), then the data segment (`byte_count`, `lkey`,
        // `addr`, big endian), the byte count set up at creation.
        let (bc, lk) = (self.wqe_bytes_be.raw().to_ne_bytes(), Be32::new(lkey).raw().to_ne_bytes());
        let dseg0 = u64::from_ne_bytes([bc[0], bc[1], bc[2], bc[3], lk[0], lk[1], lk[2], lk[3]]);
        // SAFETY: the slot lies inside the buffer (`from_raw`'s contract:
        // `slot < wqe_cnt`), 16-byte aligned, at least 32 bytes, and is not
        // outstanding: the device is not reading it.
        unsafe {
            std::ptr::write_volatile(wqe, 0);
            std::ptr::write_volatile(wqe.add(1), 0);
            std::ptr::write_volatile(wqe.add(2), dseg0);
            std::ptr::write_volatile(wqe.add(3), Be64::new(addr).raw());
        }
        if self.wqe_shift > 5 {
            // The list's end: byte count 0, `MLX5_INVALID_LKEY`, address 0.
            let k = Be32::new(INVALID_LKEY).raw().to_ne_bytes();
            let end = u64::from_ne_bytes([0, 0, 0, 0, k[0], k[1], k[2], k[3]]);
            // SAFETY: `wqe_shift > 5`: the slot is at least 64 bytes, so
            // bytes 32..48 lie inside it (and 16-byte aligned); the slot is
            // not outstanding, as above, so the device is not reading it.
            unsafe {
                std::ptr::write_volatile(wqe.add(4), end);
                std::ptr::write_volatile(wqe.add(5), 0);
            }
        }
        // SAFETY: `slot < wqe_cnt`, the length of both tables (`from_raw`).
        unsafe {
            *self.consumed.get_unchecked_mut(slot as usize) = 0;
            *self.addrs.get_unchecked_mut(slot as usize) = addr;
        }
        self.head = self.head.wrapping_add(1);
        Some(slot as u16)
    }

    /// Hands the WQEs posted so far to the device: a release fence, then
    /// the doorbell record (`head & 0xffff`), as libmlx5's post does.
    #[inline]
    pub fn ring_doorbell(&mut self) {
        fence(Ordering::Release);
        // SAFETY: the WQ's receive doorbell record (`from_raw`'s contract).
        unsafe { std::ptr::write_volatile(self.dbrec, Be32::new(self.head & 0xffff)) };
    }

    /// Accounts for one completion: adds its strides to its WQE and, when
    /// they reach the WQE's stride count, hands the WQE back (returns its
    /// slot; it may be posted again).
    ///
    /// Only a completion polled by the bound CQ ring
    /// ([`CqRing::poll_strides`], [`MprqRing::bind_cq`]), of this ring's
    /// WQ, after the last one this ring took, is taken; anything else is
    /// refused and changes nothing ([`StrideRefusal`]): a completion made
    /// up or decoded from bytes, one of another CQ ring, one of another WQ
    /// on a shared CQ (give it to that WQ's ring), one offered twice or out
    /// of order. The values it reads are the ones the poller recorded, not
    /// the public fields. A taken completion naming a WQE that is not
    /// outstanding, or one that was in the CQ before the binding, is
    /// counted in [`MprqRing::stray`] and ignored (`Ok(None)`; a device
    /// value: no panic).
    #[inline]
    pub fn complete(&mut self, c: &StrideCompletion) -> std::result::Result<Option<u16>, StrideRefusal> {
        let t = &c.stamp;
        if let Err(e) = self.check(t) {
            return self.refused(t, e);
        }
        self.next_seq = t.seq + 1;
        let Some(slot) = self.outstanding_slot(t) else {
            self.stray += 1;
            return Ok(None);
        };
        let age = slot.wrapping_sub(self.tail) & (self.wqe_cnt - 1);
        // SAFETY: `slot` is masked below `wqe_cnt`, the table's length
        // (`from_raw`).
        let n = unsafe { self.consumed.get_unchecked_mut(slot as usize) };
        *n = n.saturating_add(t.strides());
        if *n < self.num_strides {
            return Ok(None);
        }
        // The device fills WQEs in order: the one done is the oldest, and
        // any older still outstanding (none, from a well-behaved device)
        // goes back with it.
        self.tail = self.tail.wrapping_add(age + 1);
        Ok(Some(slot as u16))
    }

    /// The refusal of a completion `complete` would not take, if any.
    #[inline(always)]
    fn check(&self, t: &Stamp) -> std::result::Result<(), StrideRefusal> {
        if t.cq != self.cq_uid || t.wqn != self.wqn || t.seq < self.next_seq {
            return Err(self.refusal(t));
        }
        Ok(())
    }

    /// A completion `check` refused: one of this WQ in the CQ before the
    /// binding is stray, anything else refused.
    #[cold]
    fn refused(&mut self, t: &Stamp, e: StrideRefusal) -> std::result::Result<Option<u16>, StrideRefusal> {
        if matches!(e, StrideRefusal::Taken { .. }) && t.seq < self.bound_at {
            self.stray += 1;
            return Ok(None);
        }
        Err(e)
    }

    #[cold]
    fn refusal(&self, t: &Stamp) -> StrideRefusal {
        if t.cq == 0 {
            StrideRefusal::NotPolled
        } else if t.cq != self.cq_uid {
            StrideRefusal::OtherCq
        } else if t.wqn != self.wqn {
            StrideRefusal::OtherWq { wqn: t.wqn }
        } else {
            StrideRefusal::Taken { seq: t.seq, next: self.next_seq }
        }
    }

    /// The slot of the WQE a stamp names when it is outstanding.
    #[inline(always)]
    fn outstanding_slot(&self, t: &Stamp) -> Option<u32> {
        let mask = self.wqe_cnt - 1;
        let slot = u32::from(t.wqe) & mask;
        ((slot.wrapping_sub(self.tail) & mask) < self.outstanding()).then_some(slot)
    }

    /// Where a completion's packet lies: its address (past the two-byte
    /// shift when enabled) and length, the length cut to the strides the
    /// packet consumed (and to the WQE's end): whatever the CQE says, the
    /// range lies inside the buffer posted for the WQE. Ask before
    /// [`MprqRing::complete`] takes the completion. `None` for a filler,
    /// a completion `complete` would refuse or has taken, one that was in
    /// the CQ before the binding, or one naming a WQE not outstanding. The
    /// values it reads are the ones the poller recorded, as `complete`'s.
    pub fn payload(&self, c: &StrideCompletion) -> Option<(u64, u32)> {
        let t = &c.stamp;
        if t.filler() || self.check(t).is_err() {
            return None;
        }
        let slot = self.outstanding_slot(t)?;
        let num = self.params.num_strides();
        let sb = u64::from(self.params.stride_bytes());
        let first = u32::from(t.stride) & (num - 1);
        let end = first.saturating_add(t.strides()).min(num);
        let shift: u64 = if self.params.two_byte_shift { 2 } else { 0 };
        let start = u64::from(first) * sb + shift;
        let room = (u64::from(end) * sb).saturating_sub(start);
        let len = u64::from(t.byte_cnt & LEN_MASK).min(room) as u32;
        Some((self.addrs[slot as usize] + start, len))
    }

    fn wqe_ptr(&self, slot: u32) -> *mut u8 {
        // SAFETY: `slot` is below `wqe_cnt`, so the WQE is inside the buffer.
        unsafe { self.buf.add((slot as usize) << self.wqe_shift) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5dv::completion::cqe::CqeOpcode;

    const WQN: u32 = 0x7a;

    fn cqe(wqn: u32, wqe: u16, stride: u16, strides: u16, len: u32, filler: bool) -> Cqe64 {
        let mut c = Cqe64 { op_own: CqeOpcode::RESP_SEND.to_raw() << 4, ..Cqe64::default() };
        c.rsvd0[2..4].copy_from_slice(&wqe.to_be_bytes());
        c.wqe_counter = Be16::new(stride);
        c.byte_cnt = Be32::new((u32::from(filler) << 31) | (u32::from(strides) << 16) | len);
        c.sop_drop_qpn = Be32::new(wqn);
        c
    }

    /// A CQ of 64-byte CQEs in ordinary memory, written as a device would
    /// (owner bit of each lap), polled by a `CqRing`.
    struct HostCq {
        buf: Vec<u64>,
        _db: Box<[Be32; 2]>,
        _uar: Box<[u64; 8]>,
        cnt: u32,
        produced: u32,
        ring: CqRing,
    }

    impl HostCq {
        fn new(cnt: u32) -> HostCq {
            let mut buf = vec![0u64; cnt as usize * 8];
            for i in 0..cnt as usize {
                buf[i * 8 + 7] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 0xf1]);
            }
            let mut db = Box::new([Be32::default(); 2]);
            let mut uar = Box::new([0u64; 8]);
            // SAFETY: memory of the sizes `from_raw` asks for, moved into the
            // same `HostCq` (heap blocks do not move); only this ring consumes it.
            let ring =
                unsafe { CqRing::from_raw(buf.as_ptr().cast(), cnt, 64, db.as_mut_ptr(), uar.as_mut_ptr().cast(), 1) };
            HostCq { buf, _db: db, _uar: uar, cnt, produced: 0, ring }
        }

        fn push(&mut self, mut c: Cqe64) {
            c.op_own = (c.op_own & 0xf0) | u8::from(self.produced & self.cnt != 0);
            let at = (self.produced & (self.cnt - 1)) as usize * 8;
            // SAFETY: `Cqe64` is 64 plain bytes; entry `at` of the buffer.
            unsafe { std::ptr::write_volatile(self.buf.as_mut_ptr().add(at).cast::<Cqe64>(), c) };
            self.produced += 1;
        }

        fn poll(&mut self) -> Vec<StrideCompletion> {
            let mut out = [StrideCompletion::default(); 16];
            let n = self.ring.poll_strides(&mut out);
            out[..n].to_vec()
        }
    }

    /// A ring of 4 WQEs of 64 bytes (8 strides of 64 bytes each, the
    /// two-byte shift on) for WQ `wqn`, every WQE posted (buffers at
    /// 0x1000 * (slot + 1)).
    struct Rq {
        _buf: Vec<u128>,
        _db: Box<Be32>,
        ring: MprqRing,
    }

    const P: StridingParams = StridingParams { log_stride_bytes: 6, log_num_strides: 3, two_byte_shift: true };

    fn rq(wqn: u32, cq: &CqRing) -> Rq {
        let mut buf = vec![0u128; 4 * 4];
        let mut db = Box::new(Be32::default());
        // SAFETY: 4 WQEs of 64 bytes, aligned, and a record, in the same `Rq`.
        let mut ring = unsafe { MprqRing::from_raw(buf.as_mut_ptr().cast(), 4, 64, &mut *db, P, wqn, cq) };
        for i in 0..4u64 {
            // SAFETY: test addresses, never written by a device.
            assert_eq!(unsafe { ring.post(7, 0x1000 * (i + 1)) }, Some(i as u16));
        }
        Rq { _buf: buf, _db: db, ring }
    }

    /// A WQE comes back only when all its strides are consumed, fillers
    /// included, in order; completions for WQEs not posted are ignored.
    #[test]
    fn a_wqe_comes_back_after_its_last_stride() {
        let mut buf = vec![0u128; 4 * 4];
        let mut db = Be32::default();
        let mut cq = HostCq::new(16);
        // SAFETY: 4 WQEs of 64 bytes, aligned; the record is a local.
        let mut r = unsafe { MprqRing::from_raw(buf.as_mut_ptr().cast(), 4, 64, &mut db, P, WQN, &cq.ring) };
        for i in 0..4u64 {
            // SAFETY: test addresses, never written by a device.
            assert_eq!(unsafe { r.post(7, 0x1000 * (i + 1)) }, Some(i as u16));
        }
        // SAFETY: as above.
        assert_eq!(unsafe { r.post(7, 0) }, None, "all outstanding");
        r.ring_doorbell();
        assert_eq!(db.get(), 4);
        let bytes: &[u8] = bytemuck_free(&buf);
        assert_eq!(&bytes[..16], &[0; 16], "the next segment: zero (a cyclic queue)");
        assert_eq!(&bytes[16..20], &(64u32 * 8).to_be_bytes(), "the data segment covers the WQE");
        assert_eq!(&bytes[20..32], &[0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x10, 0], "its lkey and address");
        assert_eq!(&bytes[32..36], &[0; 4], "the list's end: byte count 0");
        assert_eq!(&bytes[40..48], &[0; 8], "the list's end: address 0");
        assert_eq!(&bytes[64 + 20..64 + 32], &[0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x20, 0], "the next WQE's");
        assert_eq!(&bytes[36..40], &INVALID_LKEY.to_be_bytes(), "the list ends after one segment");
        cq.push(cqe(WQN, 0, 0, 3, 150, false));
        cq.push(cqe(WQN, 0, 3, 4, 200, false));
        cq.push(cqe(WQN, 0, 7, 1, 0, true));
        cq.push(cqe(WQN, 0, 0, 8, 64, false));
        let c = cq.poll();
        assert_eq!(c.len(), 4);
        let (a, b, f, stray) = (c[0], c[1], c[2], c[3]);
        assert_eq!((a.strides, a.byte_len, a.filler), (3, 150, false));
        assert_eq!(r.payload(&a), Some((0x1000 + 2, 150)));
        assert_eq!(r.complete(&a), Ok(None));
        assert_eq!(r.payload(&b), Some((0x1000 + 3 * 64 + 2, 200)));
        assert_eq!(r.complete(&b), Ok(None));
        assert_eq!(r.consumed(0), 7);
        assert!(f.filler && r.payload(&f).is_none());
        assert_eq!(r.complete(&f), Ok(Some(0)), "the filler takes the last stride");
        assert_eq!(r.free(), 1);
        assert_eq!(r.payload(&stray), None);
        assert_eq!(r.complete(&stray), Ok(None));
        assert_eq!(r.stray(), 1);
        assert_eq!(f.raw_byte_cnt(), (1 << 31) | (1 << 16));
    }

    /// B-2: a completion not polled by a CQ ring (decoded from bytes,
    /// `Default`) frees nothing, however many strides it claims; editing a
    /// polled one's public fields changes nothing the ring reads.
    #[test]
    fn b2_made_up_and_decoded_completions_free_nothing() {
        let mut cq = HostCq::new(16);
        let mut r = rq(WQN, &cq.ring);
        let forged = StrideCompletion::decode(&cqe(WQN, 0, 0, 8, 64, false));
        assert_eq!(r.ring.complete(&forged), Err(StrideRefusal::NotPolled));
        assert_eq!(r.ring.payload(&forged), None);
        assert_eq!(r.ring.complete(&StrideCompletion::default()), Err(StrideRefusal::NotPolled));
        assert_eq!((r.ring.consumed(0), r.ring.outstanding()), (0, 4), "nothing changed");

        cq.push(cqe(WQN, 0, 0, 1, 40, false));
        let mut c = cq.poll()[0];
        c.strides = 8;
        c.wqe_index = 1;
        c.byte_len = 0xffff;
        c.stride_index = 5;
        assert_eq!(r.ring.payload(&c), Some((0x1000 + 2, 40)), "the polled values, not the edited ones");
        assert_eq!(r.ring.complete(&c), Ok(None), "one stride of WQE 0, not eight of WQE 1");
        assert_eq!((r.ring.consumed(0), r.ring.consumed(1), r.ring.outstanding()), (1, 0, 4));
        let e = StrideRefusal::NotPolled.to_string();
        assert!(e.contains("CqRing::poll_strides"), "{e}");
    }

    /// B-2: on a CQ shared by two WQs (an RSS table's), each ring refuses
    /// the other's completions without taking them (`OtherWq` naming the
    /// WQ), and the right ring then takes them; a completion polled by
    /// another CQ ring is refused as `OtherCq`.
    #[test]
    fn b2_foreign_wq_and_other_cq_completions_are_refused_not_consumed() {
        const OTHER: u32 = 0x7b;
        let mut cq = HostCq::new(16);
        let mut a = rq(WQN, &cq.ring);
        let mut b = rq(OTHER, &cq.ring);
        assert_eq!((a.ring.wqn(), b.ring.wqn()), (WQN, OTHER), "each ring names its own WQ");
        cq.push(cqe(OTHER, 0, 0, 8, 100, false));
        cq.push(cqe(WQN, 0, 0, 4, 100, false));
        cq.push(cqe(OTHER, 1, 0, 8, 100, false));
        cq.push(cqe(WQN, 0, 4, 4, 100, false));
        let c = cq.poll();
        assert_eq!(c.len(), 4);
        for (i, x) in c.iter().enumerate() {
            let (mine, theirs, wqn) = if x.cqe.qpn() == WQN { (&mut a, &mut b, WQN) } else { (&mut b, &mut a, OTHER) };
            assert_eq!(theirs.ring.complete(x), Err(StrideRefusal::OtherWq { wqn }), "completion {i}");
            assert_eq!(theirs.ring.payload(x), None, "completion {i}");
            let back = mine.ring.complete(x).unwrap_or_else(|e| panic!("completion {i}: {e}"));
            assert_eq!(back, [Some(0), None, Some(1), Some(0)][i], "completion {i}");
        }
        assert_eq!((a.ring.outstanding(), b.ring.outstanding()), (3, 2));
        assert_eq!((a.ring.stray(), b.ring.stray()), (0, 0));
        let e = StrideRefusal::OtherWq { wqn: OTHER }.to_string();
        assert!(e.contains("0x7b") && e.contains("that WQ's ring"), "{e}");

        let mut other = HostCq::new(16);
        other.push(cqe(WQN, 1, 0, 8, 100, false));
        let x = other.poll()[0];
        assert_eq!(a.ring.complete(&x), Err(StrideRefusal::OtherCq));
        assert_eq!(a.ring.payload(&x), None);
        assert_eq!(a.ring.outstanding(), 3);
    }

    /// B-2: each completion is taken once, in the order polled: a replay
    /// (a copy of a taken one) and one offered after a later one are
    /// refused as `Taken`, and free nothing.
    #[test]
    fn b2_duplicate_and_out_of_order_completions_are_refused() {
        let mut cq = HostCq::new(16);
        let mut r = rq(WQN, &cq.ring);
        for stride in 0..4 {
            cq.push(cqe(WQN, 0, stride * 2, 2, 100, false));
        }
        let c = cq.poll();
        assert_eq!(r.ring.complete(&c[0]), Ok(None));
        assert_eq!(r.ring.complete(&c[0]), Err(StrideRefusal::Taken { seq: 0, next: 1 }), "a replay");
        assert_eq!(r.ring.payload(&c[0]), None, "taken already");
        assert_eq!(r.ring.complete(&c[2]), Ok(None), "skipping one is allowed");
        assert_eq!(r.ring.complete(&c[1]), Err(StrideRefusal::Taken { seq: 1, next: 3 }), "out of order");
        assert_eq!(r.ring.consumed(0), 4, "the replayed and late strides are not counted");
        for _ in 0..3 {
            assert_eq!(r.ring.complete(&c[2]), Err(StrideRefusal::Taken { seq: 2, next: 3 }));
        }
        assert_eq!(r.ring.complete(&c[3]), Ok(None));
        assert_eq!((r.ring.consumed(0), r.ring.outstanding()), (6, 4), "WQE 0 is still the device's");
        let e = StrideRefusal::Taken { seq: 1, next: 3 }.to_string();
        assert!(e.contains("once, in the order polled"), "{e}");
    }

    /// B-2: CQEs in the CQ before the ring was bound (a new view, or CQEs
    /// of WQEs posted before the ring) are counted as stray and free
    /// nothing, even when their WQE index names a WQE posted since.
    #[test]
    fn b2_cqes_before_the_binding_free_nothing() {
        let mut cq = HostCq::new(16);
        cq.push(cqe(WQN, 0, 0, 8, 100, false));
        let mut r = rq(WQN, &cq.ring);
        cq.push(cqe(WQN, 0, 0, 1, 100, false));
        let c = cq.poll();
        assert_eq!(r.ring.payload(&c[0]), None);
        assert_eq!(r.ring.complete(&c[0]), Ok(None));
        assert_eq!((r.ring.stray(), r.ring.outstanding(), r.ring.consumed(0)), (1, 4, 0));
        assert_eq!(r.ring.complete(&c[1]), Ok(None));
        assert_eq!(r.ring.consumed(0), 1);
        // A second view of the CQ: bound to it, the first view's are refused.
        let mut view = HostCq::new(16);
        r.ring.bind_cq(&view.ring);
        view.push(cqe(WQN, 0, 1, 7, 100, false));
        assert_eq!(r.ring.complete(&c[1]), Err(StrideRefusal::OtherCq));
        assert_eq!(r.ring.complete(&view.poll()[0]), Ok(Some(0)));
    }

    /// D-2′: the payload's length never reaches past the strides the
    /// packet consumed, nor past the WQE's end, whatever the CQE's byte
    /// count, stride count or stride index.
    #[test]
    fn d2_payload_length_is_cut_to_the_packets_strides() {
        let mut cq = HostCq::new(16);
        let r = rq(WQN, &cq.ring);
        // stride, strides, len -> (offset, len)
        let cases: [(u16, u16, u32, u64, u32); 6] = [
            (0, 1, 0xffff, 2, 62),
            (0, 2, 100, 2, 100),
            (5, 8, 0xffff, 5 * 64 + 2, 3 * 64 - 2),
            (7, 0x7fff, 0xffff, 7 * 64 + 2, 62),
            (3, 0, 500, 3 * 64 + 2, 0),
            (8 + 6, 1, 0xffff, 6 * 64 + 2, 62),
        ];
        for &(stride, strides, len, ..) in &cases {
            cq.push(cqe(WQN, 1, stride, strides, len, false));
        }
        let c = cq.poll();
        for (x, &(stride, strides, len, off, want)) in c.iter().zip(&cases) {
            let (addr, got) = r.ring.payload(x).expect("a packet of an outstanding WQE");
            assert_eq!((addr, got), (0x2000 + off, want), "stride {stride}, {strides} strides, length {len}");
            assert!(addr - 0x2000 + u64::from(got) <= u64::from(P.wqe_bytes()), "inside the WQE");
        }
    }

    fn bytemuck_free(v: &[u128]) -> &[u8] {
        // SAFETY: u128 has no padding; the slice covers the same bytes.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 16) }
    }
    /// `check` takes each bound of the device's ranges and refuses one
    /// past it, naming the field and the bound; no raw packet QP type or
    /// no striding at all is `Unsupported`.
    #[test]
    fn caps_check_takes_each_bound_and_refuses_one_past_it() {
        let raw_packet = 1 << crate::bindings::ibv_qp_type::IBV_QPT_RAW_PACKET.0;
        let caps = StridingRqCaps {
            min_log_stride_bytes: 6,
            max_log_stride_bytes: 13,
            min_log_num_strides: 3,
            max_log_num_strides: 16,
            supported_qpts: raw_packet,
        };
        let p = |b: u8, s: u8| StridingParams { log_stride_bytes: b, log_num_strides: s, two_byte_shift: false };
        for (b, s) in [(6, 3), (13, 16), (6, 16), (13, 3)] {
            assert!(caps.check(&p(b, s)).is_ok(), "bounds {b}, {s} are inside the ranges");
        }
        let refused = |b: u8, s: u8| match caps.check(&p(b, s)) {
            Err(Error::CapExceeded { what, asked, limit }) => (what, asked, limit),
            other => panic!("{b}, {s}: expected CapExceeded, got {other:?}"),
        };
        let (what, asked, limit) = refused(5, 3);
        assert!(what.contains("single_stride_log_num_of_bytes") && (asked, limit) == (5, 6), "{what} {asked} {limit}");
        let (what, asked, limit) = refused(14, 3);
        assert!(
            what.contains("single_stride_log_num_of_bytes") && (asked, limit) == (14, 13),
            "{what} {asked} {limit}"
        );
        let (what, asked, limit) = refused(6, 2);
        assert!(what.contains("single_wqe_log_num_of_strides") && (asked, limit) == (2, 3), "{what} {asked} {limit}");
        let (what, asked, limit) = refused(6, 17);
        assert!(what.contains("single_wqe_log_num_of_strides") && (asked, limit) == (17, 16), "{what} {asked} {limit}");
        let unsupported = |c: StridingRqCaps| matches!(c.check(&p(6, 3)), Err(Error::Unsupported { .. }));
        assert!(unsupported(StridingRqCaps { supported_qpts: 0, ..caps }), "no raw packet QPs");
        assert!(unsupported(StridingRqCaps { max_log_num_strides: 0, ..caps }), "no strides");
        assert!(unsupported(StridingRqCaps { max_log_stride_bytes: 0, ..caps }), "no stride sizes");
    }
}
