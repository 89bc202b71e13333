//! Striding (multi-packet) receive queues: the WQE of a striding WQ, its
//! CQEs decoded into stride completions, and the ring that posts WQEs and
//! hands a WQE back only once the device is done with all its strides.
//!
//! A striding WQ ([`Wq`](crate::prim::Wq) built with
//! [`WqBuilder::striding`](crate::prim::WqBuilder::striding):
//! `mlx5dv_create_wq` with `MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ`, checked
//! against [`striding_rq_caps`]; its ring from
//! [`mprq_wq::ring`](super::mprq_wq::ring)) receives
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
//! [`MprqRing::complete`] adds each completion's strides to its WQE and
//! returns the WQE when they reach the WQE's stride count: only then may it
//! be posted again.
//!
//! libmlx5 itself knows none of this: its `ibv_post_wq_recv` writes the data
//! segment at the WQE's first byte (no next segment) and its poller reports
//! `byte_cnt` whole as the byte length and takes `wqe_counter` (the stride
//! index) as the WQE index. A striding WQ is therefore posted and polled
//! through this module (and [`CqRing`](super::cq::CqRing) for the CQ), as
//! DPDK's and the kernel's mlx5 drivers do with their own code.
//!
//! # Compressed CQEs
//! A CQ compressing in [`CqeResFormat::CsumStridx`](super::mini::CqeResFormat::CsumStridx)
//! writes sessions whose mini-CQEs carry the byte count (filler flag and
//! stride count included) and the stride index; `CqRing` expands them with
//! the title's other fields, `wqe_id` included. The device compresses only
//! CQEs that share those fields, so a session's packets are in one WQE; a
//! session that a device closed only at a WQE change is what this
//! expansion assumes (the Linux mlx5e driver assumes the same).

use std::sync::atomic::{fence, Ordering};

use super::be::{Be16, Be32};
use super::cqe::{Completion, Cqe64};
use super::seg::{DataSeg, INVALID_LKEY};
#[cfg(not(rrddmma_mlnx_ofed4))]
use super::{not_mlx5, query_device};
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::bindings as ffi;
use crate::prim::{Error, Result};

/// The operation named by the refusals of a striding WQ's creation.
pub const STRIDING_OP: &str = "mlx5dv_create_wq (striding RQ, MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ)";

/// `MLX5_MPWRQ_FILLER_CQE` as a bit of `byte_cnt`: a filler CQE.
pub const FILLER: u32 = 1 << 31;
/// Bits 16-30 of `byte_cnt`: the strides a packet (or filler) consumed.
pub const STRIDES_SHIFT: u32 = 16;
/// The mask of the stride count after the shift.
pub const STRIDES_MASK: u32 = 0x7fff;
/// Bits 0-15 of `byte_cnt`: the packet's length.
pub const LEN_MASK: u32 = 0xffff;

/// The shape of a striding WQ's WQEs (`struct mlx5dv_striding_rq_init_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridingParams {
    /// `single_stride_log_num_of_bytes`: each stride is `2^this` bytes.
    pub log_stride_bytes: u8,
    /// `single_wqe_log_num_of_strides`: each WQE is `2^this` strides.
    pub log_num_strides: u8,
    /// `two_byte_shift_en`: the device writes two zero bytes before each
    /// packet (IP header alignment); the packet starts at offset 2 of its
    /// first stride.
    pub two_byte_shift: bool,
}

impl StridingParams {
    /// Bytes in one stride.
    pub const fn stride_bytes(&self) -> u32 {
        1 << self.log_stride_bytes
    }

    /// Strides in one WQE.
    pub const fn num_strides(&self) -> u32 {
        1 << self.log_num_strides
    }

    /// Bytes of one WQE's buffer: the data segment's byte count.
    pub const fn wqe_bytes(&self) -> u32 {
        self.stride_bytes() << self.log_num_strides
    }
}

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

/// What the device offers for striding WQs (`struct mlx5dv_striding_rq_caps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridingRqCaps {
    /// Smallest `log_stride_bytes`.
    pub min_log_stride_bytes: u32,
    /// Largest `log_stride_bytes`.
    pub max_log_stride_bytes: u32,
    /// Smallest `log_num_strides`.
    pub min_log_num_strides: u32,
    /// Largest `log_num_strides`.
    pub max_log_num_strides: u32,
    /// QP types that may use them (`IBV_QPT_*` bits).
    pub supported_qpts: u32,
}

impl StridingRqCaps {
    /// Whether the device has striding WQs at all.
    pub fn available(&self) -> bool {
        self.max_log_num_strides > 0 && self.max_log_stride_bytes > 0
    }

    /// `Ok` when the device offers striding WQs for raw packet QPs and
    /// WQEs of shape `p` fit these capabilities; else
    /// [`Error::Unsupported`] (no striding WQs, or none for raw packet QPs
    /// in `supported_qpts`) or [`Error::CapExceeded`] naming the field
    /// (where libmlx5 fails with a bare `EINVAL`).
    pub fn check(&self, p: &StridingParams) -> Result<()> {
        let raw_packet = 1 << crate::bindings::ibv_qp_type::IBV_QPT_RAW_PACKET.0;
        if !self.available() || self.supported_qpts & raw_packet == 0 {
            return Err(Error::Unsupported {
                op: STRIDING_OP,
                feature: "striding receive queues (the device's striding_rq_caps offer none for raw packet QPs)",
            });
        }
        let (b, s) = (u32::from(p.log_stride_bytes), u32::from(p.log_num_strides));
        if b < self.min_log_stride_bytes || b > self.max_log_stride_bytes {
            let limit =
                if b < self.min_log_stride_bytes { self.min_log_stride_bytes } else { self.max_log_stride_bytes };
            return Err(Error::CapExceeded {
                what: "striding_rq_caps: single_stride_log_num_of_bytes outside min..=max",
                asked: b.into(),
                limit: limit.into(),
            });
        }
        if s < self.min_log_num_strides || s > self.max_log_num_strides {
            let limit = if s < self.min_log_num_strides { self.min_log_num_strides } else { self.max_log_num_strides };
            return Err(Error::CapExceeded {
                what: "striding_rq_caps: single_wqe_log_num_of_strides outside min..=max",
                asked: s.into(),
                limit: limit.into(),
            });
        }
        Ok(())
    }
}

/// The device's striding-WQ capabilities (`mlx5dv_query_device`,
/// `MLX5DV_CONTEXT_MASK_STRIDING_RQ`); all zero when it reports none.
/// [`Error::Unsupported`] on a device that is not mlx5.
pub fn striding_rq_caps(ctx: &crate::prim::Context) -> Result<StridingRqCaps> {
    #[cfg(rrddmma_mlnx_ofed4)]
    {
        let _ = ctx;
        Err(Error::Unsupported {
            op: STRIDING_OP,
            feature: "striding receive queues (a build for MLNX_OFED 4.x, whose libmlx5 has no mlx5dv_create_wq)",
        })
    }
    #[cfg(not(rrddmma_mlnx_ofed4))]
    {
        if !super::is_supported(ctx) {
            return Err(Error::Unsupported { op: STRIDING_OP, feature: not_mlx5(ctx.name()) });
        }
        let attr = query_device(ctx)?;
        let mask = ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_STRIDING_RQ.0;
        if attr.comp_mask & u64::from(mask) == 0 {
            return Ok(StridingRqCaps::default());
        }
        let c = attr.striding_rq_caps;
        Ok(StridingRqCaps {
            min_log_stride_bytes: c.min_single_stride_log_num_of_bytes,
            max_log_stride_bytes: c.max_single_stride_log_num_of_bytes,
            min_log_num_strides: c.min_single_wqe_log_num_of_strides,
            max_log_num_strides: c.max_single_wqe_log_num_of_strides,
            supported_qpts: c.supported_qpts,
        })
    }
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
    /// `byte_cnt` whole and its `wqe_counter` the stride index.
    pub cqe: Completion,
}

impl StrideCompletion {
    /// Decodes a CQE of a striding WQ.
    #[inline]
    pub fn decode(cqe: &Cqe64) -> StrideCompletion {
        let bc = cqe.byte_cnt.get();
        StrideCompletion {
            wqe_index: u16::from_be_bytes([cqe.rsvd0[2], cqe.rsvd0[3]]),
            stride_index: cqe.wqe_counter.get(),
            strides: ((bc >> STRIDES_SHIFT) & STRIDES_MASK) as u16,
            byte_len: bc & LEN_MASK,
            filler: bc & FILLER != 0,
            cqe: cqe.decode(),
        }
    }

    /// `byte_cnt` as the CQE held it (filler flag, strides, length).
    pub fn raw_byte_cnt(&self) -> u32 {
        (u32::from(self.filler) << 31) | (u32::from(self.strides) << STRIDES_SHIFT) | (self.byte_len & LEN_MASK)
    }
}

/// The receive ring of a striding WQ: posts WQEs, writes the doorbell
/// record, and tracks the strides the device has consumed in each WQE.
///
/// Made by [`mprq_wq::ring`](super::mprq_wq::ring) or, for a
/// queue made elsewhere, [`MprqRing::from_raw`].
#[derive(Debug)]
pub struct MprqRing {
    buf: *mut u8,
    wqe_cnt: u32,
    wqe_shift: u32,
    dbrec: *mut Be32,
    params: StridingParams,
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
    /// receive doorbell record `dbrec`, whose WQEs have the shape `params`.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `wqe_cnt * wqe_size` bytes and
    /// `dbrec` for a 4-byte write, both alive while the ring lives, and
    /// nothing else may post to this queue.
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
    ) -> MprqRing {
        assert!(wqe_cnt.is_power_of_two(), "striding WQ size {wqe_cnt} is not a power of two");
        assert!(
            wqe_size.is_power_of_two() && wqe_size >= 32,
            "striding WQE size {wqe_size} is not a power of two of at least 32 (next segment and data segment)"
        );
        assert!(buf as usize % 16 == 0, "striding WQ buffer {buf:p} is not 16-byte aligned");
        assert!(dbrec as usize % 4 == 0, "doorbell record {dbrec:p} is not 4-byte aligned");
        MprqRing {
            buf,
            wqe_cnt,
            wqe_shift: wqe_size.trailing_zeros(),
            dbrec,
            params,
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

    /// Completions that named a WQE that was not outstanding (ignored).
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
        let wqe = self.wqe_ptr(slot);
        let mut w = MprqWqe::default();
        w.dseg.set(self.params.wqe_bytes(), lkey, addr);
        // SAFETY: the slot lies inside the buffer (`from_raw`'s contract),
        // 16-byte aligned, and is not outstanding: the device is not reading it.
        unsafe { std::ptr::write_volatile(wqe.cast::<MprqWqe>(), w) };
        if self.wqe_shift > 5 {
            let mut end = DataSeg::default();
            end.set(0, INVALID_LKEY, 0);
            // SAFETY: `wqe_shift > 5`: the slot is at least 64 bytes, so
            // bytes 32..48 lie inside it (and 16-byte aligned); the slot is
            // not outstanding, as above, so the device is not reading it.
            unsafe { std::ptr::write_volatile(wqe.add(32).cast::<DataSeg>(), end) };
        }
        self.consumed[slot as usize] = 0;
        self.addrs[slot as usize] = addr;
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
    /// slot; it may be posted again). A completion naming a WQE that is not
    /// outstanding is counted in [`MprqRing::stray`] and ignored (a device
    /// value: no panic).
    #[inline]
    pub fn complete(&mut self, c: &StrideCompletion) -> Option<u16> {
        let mask = self.wqe_cnt - 1;
        let slot = u32::from(c.wqe_index) & mask;
        let age = slot.wrapping_sub(self.tail) & mask;
        if age >= self.outstanding() {
            self.stray += 1;
            return None;
        }
        let n = &mut self.consumed[slot as usize];
        *n = n.saturating_add(u32::from(c.strides));
        if *n < self.params.num_strides() {
            return None;
        }
        // The device fills WQEs in order: the one done is the oldest, and
        // any older still outstanding (none, from a well-behaved device)
        // goes back with it.
        self.tail = self.tail.wrapping_add(age + 1);
        Some(slot as u16)
    }

    /// Where a completion's packet lies: its address (past the two-byte
    /// shift when enabled) and length; `None` for a filler or a WQE not
    /// outstanding.
    pub fn payload(&self, c: &StrideCompletion) -> Option<(u64, u32)> {
        if c.filler {
            return None;
        }
        let mask = self.wqe_cnt - 1;
        let slot = u32::from(c.wqe_index) & mask;
        if (slot.wrapping_sub(self.tail) & mask) >= self.outstanding() {
            return None;
        }
        let stride = u64::from(c.stride_index) & (u64::from(self.params.num_strides()) - 1);
        let shift = if self.params.two_byte_shift { 2 } else { 0 };
        Some((self.addrs[slot as usize] + stride * u64::from(self.params.stride_bytes()) + shift, c.byte_len))
    }

    fn wqe_ptr(&self, slot: u32) -> *mut u8 {
        // SAFETY: `slot` is below `wqe_cnt`, so the WQE is inside the buffer.
        unsafe { self.buf.add((slot as usize) << self.wqe_shift) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5dv::cqe::CqeOpcode;

    fn cqe(wqe: u16, stride: u16, strides: u16, len: u32, filler: bool) -> Cqe64 {
        let mut c = Cqe64 { op_own: CqeOpcode::RESP_SEND.to_raw() << 4, ..Cqe64::default() };
        c.rsvd0[2..4].copy_from_slice(&wqe.to_be_bytes());
        c.wqe_counter = Be16::new(stride);
        c.byte_cnt = Be32::new((u32::from(filler) << 31) | (u32::from(strides) << 16) | len);
        c
    }

    /// A WQE comes back only when all its strides are consumed, fillers
    /// included, in order; completions for WQEs not posted are ignored.
    #[test]
    fn a_wqe_comes_back_after_its_last_stride() {
        let mut buf = vec![0u128; 4 * 4];
        let mut db = Be32::default();
        let p = StridingParams { log_stride_bytes: 6, log_num_strides: 3, two_byte_shift: true };
        // SAFETY: 4 WQEs of 64 bytes, aligned; the record is a local.
        let mut r = unsafe { MprqRing::from_raw(buf.as_mut_ptr().cast(), 4, 64, &mut db, p) };
        for i in 0..4u64 {
            // SAFETY: test addresses, never written by a device.
            assert_eq!(unsafe { r.post(7, 0x1000 * (i + 1)) }, Some(i as u16));
        }
        // SAFETY: as above.
        assert_eq!(unsafe { r.post(7, 0) }, None, "all outstanding");
        r.ring_doorbell();
        assert_eq!(db.get(), 4);
        let bytes: &[u8] = bytemuck_free(&buf);
        assert_eq!(&bytes[16..20], &(64u32 * 8).to_be_bytes(), "the data segment covers the WQE");
        assert_eq!(&bytes[36..40], &INVALID_LKEY.to_be_bytes(), "the list ends after one segment");
        let a = StrideCompletion::decode(&cqe(0, 0, 3, 150, false));
        assert_eq!((a.strides, a.byte_len, a.filler), (3, 150, false));
        assert_eq!(r.payload(&a), Some((0x1000 + 2, 150)));
        assert_eq!(r.complete(&a), None);
        let b = StrideCompletion::decode(&cqe(0, 3, 4, 200, false));
        assert_eq!(r.payload(&b), Some((0x1000 + 3 * 64 + 2, 200)));
        assert_eq!(r.complete(&b), None);
        assert_eq!(r.consumed(0), 7);
        let f = StrideCompletion::decode(&cqe(0, 7, 1, 0, true));
        assert!(f.filler && r.payload(&f).is_none());
        assert_eq!(r.complete(&f), Some(0), "the filler takes the last stride");
        assert_eq!(r.free(), 1);
        let stray = StrideCompletion::decode(&cqe(0, 0, 8, 64, false));
        assert_eq!(r.complete(&stray), None);
        assert_eq!(r.stray(), 1);
        assert_eq!(f.raw_byte_cnt(), (1 << 31) | (1 << 16));
    }

    fn bytemuck_free(v: &[u128]) -> &[u8] {
        // SAFETY: u128 has no padding; the slice covers the same bytes.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 16) }
    }
}
