//! Direct CQ polling: the CQE ring, owner-bit validity, the consumer record, arming.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use super::be::Be32;
use super::cqe::{Completion, Cqe64, CqeOpcode, Ticket};
use super::mmio::Mmio;

/// `MLX5_CQ_DOORBELL`: offset of the CQ doorbell in the UAR page.
pub const CQ_DOORBELL: usize = 0x20;
/// `MLX5_CQ_DB_REQ_NOT`: arm for any completion.
pub const DB_REQ_NOT: u32 = 0;
/// `MLX5_CQ_DB_REQ_NOT_SOL`: arm for solicited completions.
pub const DB_REQ_NOT_SOL: u32 = 1 << 24;

/// A completion queue owned by this process: CQE buffer, doorbell records
/// (`[0]` consumer index, `[1]` arm) and UAR, from [`super::obj::cq_ring`]
/// or, for tests, from raw parts.
pub struct CqRing {
    buf: *const u8,
    cqe_cnt: u32,
    cqe_size: u32,
    dbrec: *mut Be32,
    uar: *mut u8,
    cqn: u32,
    /// Consumer index (free-running).
    ci: u32,
    /// Arm sequence number.
    arm_sn: u32,
    /// This ring's process-unique number (never 0), stamped on its completions.
    uid: u64,
    /// CQEs taken by this ring (free-running from 0): the position stamped
    /// on the next completion.
    polled: u64,
}

/// The next ring number; 0 is never handed out (it marks "not polled").
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

// SAFETY: plain memory and registers of one CQ; `&mut self` serialises access.
unsafe impl Send for CqRing {}

impl fmt::Debug for CqRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CqRing")
            .field("cqn", &self.cqn)
            .field("cqe_cnt", &self.cqe_cnt)
            .field("ci", &self.ci)
            .field("uid", &self.uid)
            .finish()
    }
}

impl CqRing {
    /// A ring over raw parts.
    ///
    /// # Safety
    /// `buf` must be `cqe_cnt * cqe_size` readable bytes written by the
    /// device (or a test's producer), aligned to 8 (CQEs hold 8-byte
    /// fields); `dbrec` two writable records aligned to 4; `uar` a mapped UAR
    /// page (any writable 0x28 bytes for tests) aligned to 8; all alive while
    /// the ring lives, and nothing else may consume this CQ.
    ///
    /// # Panics
    /// If `cqe_cnt` is not a power of two, `cqe_size` is not 64 or 128, or a
    /// pointer is misaligned (programming errors).
    pub unsafe fn from_raw(
        buf: *const u8,
        cqe_cnt: u32,
        cqe_size: u32,
        dbrec: *mut Be32,
        uar: *mut u8,
        cqn: u32,
    ) -> CqRing {
        assert!(cqe_cnt.is_power_of_two(), "CQ size {cqe_cnt} is not a power of two");
        assert!(cqe_size == 64 || cqe_size == 128, "CQE size {cqe_size} is neither 64 nor 128");
        assert!(buf as usize % 8 == 0, "CQ buffer {buf:p} is not 8-byte aligned");
        assert!(dbrec as usize % 4 == 0, "CQ doorbell records {dbrec:p} are not 4-byte aligned");
        assert!(uar as usize % 8 == 0, "UAR {uar:p} is not 8-byte aligned");
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        CqRing { buf, cqe_cnt, cqe_size, dbrec, uar, cqn, ci: 0, arm_sn: 0, uid, polled: 0 }
    }

    /// Starts the consumer index at `ci` (a CQ that was polled before the view).
    // Used by the `obj` views, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn start_at(&mut self, ci: u32) {
        self.ci = ci;
    }

    /// The CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// The consumer index (free-running).
    pub fn consumer_index(&self) -> u32 {
        self.ci
    }

    /// This ring's process-unique number, stamped on the completions it polls.
    pub(crate) fn uid(&self) -> u64 {
        self.uid
    }

    /// The position (in this ring's count of polled CQEs) that the first CQE
    /// the device has not written yet will have: every CQE already in the
    /// ring, polled or not, is below it. Reads the owner bits of the entries
    /// ahead of the consumer index, at most one lap.
    pub fn horizon(&self) -> u64 {
        let mut n = 0u32;
        while n < self.cqe_cnt {
            let ci = self.ci.wrapping_add(n);
            // SAFETY: the entry is inside the buffer; `op_own` is read
            // volatile because the device writes it.
            let op_own = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*self.cqe(ci)).op_own)) };
            if !Cqe64::is_valid_for(op_own, ci, self.cqe_cnt) {
                break;
            }
            n += 1;
        }
        self.polled + u64::from(n)
    }

    /// The 64-byte CQE at consumer index `ci` (the second half of a 128-byte entry).
    #[inline(always)]
    fn cqe(&self, ci: u32) -> *const Cqe64 {
        let idx = (ci & (self.cqe_cnt - 1)) as usize;
        let extra = if self.cqe_size == 128 { 64 } else { 0 };
        // SAFETY: `idx` is below `cqe_cnt`, so the entry is inside the buffer.
        unsafe { self.buf.add(idx * self.cqe_size as usize + extra).cast() }
    }

    /// Polls up to `out.len()` completions, decoding them into `out`; then
    /// updates the consumer record (`dbrec[0] = ci & 0xffffff`) if any were
    /// taken. No allocation, no system call.
    #[inline]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some((c, _)) = self.take() else { break };
            out[n] = c;
            n += 1;
        }
        if n > 0 {
            self.publish();
        }
        n
    }

    /// Polls one completion and, when the device scattered its payload into
    /// the CQE (scatter-to-CQE: receives of up to 32 bytes in a 64-byte CQE,
    /// up to 64 bytes in a 128-byte one; [`Completion::inline_scatter`]),
    /// copies that payload into `payload` before the entry is handed back to
    /// the device. Returns the completion and the bytes copied (0 without
    /// scatter): `byte_len`, at most the scatter size (32 or 64).
    ///
    /// A 64-byte-scatter CQE in a ring of 64-byte CQEs (which the device
    /// does not write) copies nothing: its payload would be the previous
    /// entry.
    #[inline]
    pub fn poll_scattered(&mut self, payload: &mut [u8; 64]) -> Option<(Completion, usize)> {
        let (c, cqe) = self.take()?;
        let n = (c.byte_len as usize).min(usize::from(c.inline_scatter));
        let src: *const u8 = match c.inline_scatter {
            // The payload fills the 64-byte CQE from its start.
            32 => cqe.cast(),
            // The first half of a 128-byte entry.
            64 if self.cqe_size == 128 => cqe.cast::<u8>().wrapping_sub(64),
            _ => std::ptr::null(),
        };
        let n = if src.is_null() { 0 } else { n };
        if n > 0 {
            // SAFETY: `src..src + n` lies in the entry the device handed over
            // (n <= 32 inside the 64-byte CQE, n <= 64 in the first half of
            // a 128-byte entry); the consumer record is written only below,
            // so the device does not reuse the entry while it is read.
            unsafe { std::ptr::copy_nonoverlapping(src, payload.as_mut_ptr(), n) };
        }
        self.publish();
        Some((c, n))
    }

    /// Takes the CQE at the consumer index if the device has written it:
    /// decoded and stamped, with its address; the consumer record is left
    /// for [`CqRing::publish`].
    #[inline(always)]
    fn take(&mut self) -> Option<(Completion, *const Cqe64)> {
        let cqe = self.cqe(self.ci);
        // SAFETY: the entry is inside the buffer; `op_own` is read
        // volatile because the device writes it.
        let op_own = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*cqe).op_own)) };
        if !Cqe64::is_valid_for(op_own, self.ci, self.cqe_cnt) {
            return None;
        }
        // Read the rest only after seeing ownership (udma_from_device_barrier).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: the device handed this entry over (owner bit).
        let mut c = unsafe { std::ptr::read_volatile(cqe) }.decode();
        c.ticket = Ticket {
            cq: self.uid,
            seq: self.polled,
            qpn: c.qpn,
            counter: c.wqe_counter,
            requester: c.opcode == CqeOpcode::REQ || c.opcode == CqeOpcode::REQ_ERR,
        };
        self.polled += 1;
        self.ci = self.ci.wrapping_add(1);
        Some((c, cqe))
    }

    /// Writes the consumer record: the device may reuse the entries taken.
    #[inline(always)]
    fn publish(&mut self) {
        // SAFETY: `dbrec` is the CQ's consumer record (ring contract).
        unsafe { std::ptr::write_volatile(self.dbrec, Be32::new(self.ci & 0xff_ffff)) };
    }

    /// Arms the CQ for the next (or next solicited) completion, in libmlx5's
    /// order: arm record `sn << 28 | cmd | ci`; `wc_start`; the 64-bit
    /// doorbell `(sn << 28 | cmd | ci) << 32 | cqn` at UAR + 0x20; flush.
    /// Call [`CqRing::event_received`] when the event comes.
    pub fn arm<M: Mmio>(&mut self, mmio: &mut M, solicited: bool) {
        let sn = self.arm_sn & 3;
        let ci = self.ci & 0xff_ffff;
        let cmd = if solicited { DB_REQ_NOT_SOL } else { DB_REQ_NOT };
        let word = (sn << 28) | cmd | ci;
        // SAFETY: `dbrec + 1` is the CQ's arm record (ring contract).
        unsafe { mmio.write_dbrec(self.dbrec.add(1), word) };
        mmio.wc_start();
        let db = (u64::from(word) << 32) | u64::from(self.cqn);
        // SAFETY: the CQ doorbell inside the mapped UAR page (ring contract).
        unsafe { mmio.write64(self.uar, CQ_DOORBELL, db.to_be_bytes()) };
        mmio.flush_writes();
    }

    /// Advances the arm sequence number after a completion event.
    pub fn event_received(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }
}
