//! Typed WQE builders: one constructor per opcode that writes the control
//! segment and the segments the opcode defines, in the device's order, then
//! takes only the payload. The safe way to build a WQE: no safe call can put
//! bytes of its choosing where the device reads a data segment, so a local
//! address reaches a WQE only through the `unsafe` [`Wqe::data`].
//!
//! | builder | segments written | payload |
//! |---|---|---|
//! | [`SqRing::nop`] | control | none |
//! | [`SqRing::send`], [`SqRing::send_imm`] | control | a gather list or one inline segment |
//! | [`SqRing::send_ud`] | control, datagram | a gather list or one inline segment |
//! | [`SqRing::write`], [`SqRing::write_imm`] | control, remote address | a gather list or one inline segment |
//! | [`SqRing::read`] | control, remote address | data (the local target) |
//! | [`SqRing::cas`], [`SqRing::fetch_add`] | control, remote address, atomic | data (the 8-byte local target) |
//! | [`SqRing::masked_cas`], [`SqRing::masked_fa`] | control, remote address, masked atomic (opmod `0x09`) | data |
//!
//! The connected builders panic on a ring of a UD QP or DC initiator, and
//! `send_ud` on a connected one ([`SqTransport`]):
//! the device would read their segments at other offsets.
//!
//! A payload beyond the QP's `max_inline_data` or `max_send_sge`, or a WQE
//! beyond its largest size, panics ([`SqLimits`](super::sq::SqLimits)).
//!
//! Only payload methods exist on a typed WQE; no segment writer does:
//!
//! ```compile_fail,E0599
//! use rrddmma::mlx5dv::{seg::CtrlFlags, sq::SqRing};
//! fn forge(sq: &mut SqRing) {
//!     sq.send(CtrlFlags::empty()).atomic(0x40_0000_0007, 0xdead_0000).finish();
//! }
//! ```
//!
//! nor anything after an inline payload:
//!
//! ```compile_fail,E0599
//! use rrddmma::mlx5dv::{seg::CtrlFlags, sq::SqRing};
//! fn f(sq: &mut SqRing) {
//!     sq.send(CtrlFlags::empty()).inline(&[1; 8]).inline(&[2; 8]).finish();
//! }
//! ```
//!
//! and a READ or an atomic takes no inline payload (its data segment is
//! where the device writes):
//!
//! ```compile_fail,E0599
//! use rrddmma::mlx5dv::{seg::CtrlFlags, sq::SqRing};
//! use rrddmma::prim::RemoteAddr;
//! fn f(sq: &mut SqRing) {
//!     sq.read(CtrlFlags::empty(), RemoteAddr { addr: 0, rkey: 1 }).inline(&[0; 8]).finish();
//! }
//! ```
//!
//! nor does a WQE after a data segment:
//!
//! ```compile_fail,E0599
//! use rrddmma::mlx5dv::{seg::CtrlFlags, sq::SqRing};
//! fn f(sq: &mut SqRing) {
//!     // SAFETY: (never compiled)
//!     unsafe { sq.send(CtrlFlags::empty()).data(8, 1, 0x1000) }.inline(&[0; 8]).finish();
//! }
//! ```

use super::mmio::Mmio;
use super::seg::{ext_atomic_opmod, CtrlFlags, DatagramSeg, WqeOpcode};
use super::sq::{SqRing, SqTransport, WqeWriter};
use crate::prim::RemoteAddr;

/// A WQE whose header segments are written; add its payload, then
/// [`Wqe::finish`] or [`Wqe::post`]. `INLINE` says whether an inline
/// payload may still come: true for a fresh SEND or WRITE, false for a READ
/// or an atomic and once a data segment was added. A payload is one inline
/// segment or a gather list, never both (as libmlx5 builds them), so the
/// device finds no bytes of the caller's where it could read a data segment,
/// whatever it does after an inline segment.
#[derive(Debug)]
#[must_use = "a WQE is published only by finish or post"]
pub struct Wqe<'s, const INLINE: bool> {
    w: WqeWriter<'s>,
}

impl<'s, const INLINE: bool> Wqe<'s, INLINE> {
    /// Data segment: `len` bytes at `addr` of a region with `lkey` (for a
    /// READ or an atomic, where the device writes the result).
    ///
    /// # Safety
    /// As [`WqeWriter::data`]: the range lies in memory of this process
    /// registered with `lkey` (with local write where the device writes),
    /// alive and untouched until the WQE's completion.
    ///
    /// # Panics
    /// Past the QP's `max_send_sge` data segments.
    #[inline(always)]
    pub unsafe fn data(self, len: u32, lkey: u32, addr: u64) -> Wqe<'s, false> {
        // SAFETY: forwarded contract; a data segment is what the opcode
        // expects at this point of the WQE.
        Wqe { w: unsafe { self.w.data(len, lkey, addr) } }
    }

    /// Puts the WQE on DCI stream `id` ([`WqeWriter::dci_stream`], as
    /// `mlx5dv_wr_set_dc_addr_stream` does); streams other than 0 need a
    /// DCI created with streams.
    ///
    /// # Panics
    /// On a ring that is not [`SqTransport::Datagram`].
    #[inline(always)]
    pub fn dci_stream(self, id: u16) -> Self {
        Wqe { w: self.w.dci_stream(id) }
    }

    /// Writes the control segment and advances the producer index
    /// ([`WqeWriter::finish`]); returns the WQE index.
    #[inline(always)]
    pub fn finish(self) -> u16 {
        self.w.finish()
    }

    /// Finishes the WQE and rings the doorbell ([`WqeWriter::post`]).
    #[inline(always)]
    pub fn post<M: Mmio>(self, mmio: &mut M) -> u16 {
        self.w.post(mmio)
    }
}

impl<'s> Wqe<'s, true> {
    /// The whole payload inline, copied into the WQE now
    /// ([`WqeWriter::inline`]); the WQE is then complete.
    ///
    /// # Panics
    /// If `data` is longer than the QP's `max_inline_data`.
    #[inline(always)]
    pub fn inline(self, data: &[u8]) -> Complete<'s> {
        Complete { w: self.w.inline(data) }
    }
}

/// A WQE with its inline payload: [`Complete::finish`] or [`Complete::post`].
#[derive(Debug)]
#[must_use = "a WQE is published only by finish or post"]
pub struct Complete<'s> {
    w: WqeWriter<'s>,
}

impl Complete<'_> {
    /// As [`Wqe::finish`].
    #[inline(always)]
    pub fn finish(self) -> u16 {
        self.w.finish()
    }

    /// As [`Wqe::post`].
    #[inline(always)]
    pub fn post<M: Mmio>(self, mmio: &mut M) -> u16 {
        self.w.post(mmio)
    }
}

impl SqRing {
    #[inline(always)]
    fn typed<const I: bool>(&mut self, op: WqeOpcode, opmod: u8, flags: CtrlFlags, imm: u32) -> Wqe<'_, I> {
        // SAFETY: every caller below adds the segments `op` defines, in its
        // order, and leaves the payload to `Wqe`, whose only address writer
        // is the unsafe `data`.
        Wqe { w: unsafe { self.wqe(op, opmod, flags, imm) } }
    }

    /// A NOP: the control segment alone (add nothing).
    #[inline(always)]
    pub fn nop(&mut self, flags: CtrlFlags) -> Wqe<'_, false> {
        self.typed(WqeOpcode::NOP, 0, flags, 0)
    }

    /// A SEND; add its payload.
    #[inline(always)]
    pub fn send(&mut self, flags: CtrlFlags) -> Wqe<'_, true> {
        self.expect_transport(SqTransport::Connected, "send");
        self.typed(WqeOpcode::SEND, 0, flags, 0)
    }

    /// A SEND with immediate data `imm`, given in host order (stored big
    /// endian, as [`SendWr::send_imm`](crate::prim::SendWr::send_imm) does).
    #[inline(always)]
    pub fn send_imm(&mut self, flags: CtrlFlags, imm: u32) -> Wqe<'_, true> {
        self.expect_transport(SqTransport::Connected, "send_imm");
        self.typed(WqeOpcode::SEND_IMM, 0, flags, imm.to_be())
    }

    /// A SEND on a UD QP (or any QP whose WQEs start with an address
    /// vector) to the destination `av`.
    #[inline(always)]
    pub fn send_ud(&mut self, flags: CtrlFlags, av: &DatagramSeg) -> Wqe<'_, true> {
        self.expect_transport(SqTransport::Datagram, "send_ud");
        let w = self.typed::<true>(WqeOpcode::SEND, 0, flags, 0);
        Wqe { w: w.w.datagram(av) }
    }

    /// An RDMA WRITE to `remote`; add its payload.
    #[inline(always)]
    pub fn write(&mut self, flags: CtrlFlags, remote: RemoteAddr) -> Wqe<'_, true> {
        self.expect_transport(SqTransport::Connected, "write");
        let w = self.typed::<true>(WqeOpcode::RDMA_WRITE, 0, flags, 0);
        Wqe { w: w.w.raddr(remote.addr, remote.rkey) }
    }

    /// An RDMA WRITE with immediate data `imm` (host order) to `remote`.
    #[inline(always)]
    pub fn write_imm(&mut self, flags: CtrlFlags, remote: RemoteAddr, imm: u32) -> Wqe<'_, true> {
        self.expect_transport(SqTransport::Connected, "write_imm");
        let w = self.typed::<true>(WqeOpcode::RDMA_WRITE_IMM, 0, flags, imm.to_be());
        Wqe { w: w.w.raddr(remote.addr, remote.rkey) }
    }

    /// An RDMA READ from `remote`; add the local target with [`Wqe::data`].
    #[inline(always)]
    pub fn read(&mut self, flags: CtrlFlags, remote: RemoteAddr) -> Wqe<'_, false> {
        self.expect_transport(SqTransport::Connected, "read");
        let w = self.typed::<false>(WqeOpcode::RDMA_READ, 0, flags, 0);
        Wqe { w: w.w.raddr(remote.addr, remote.rkey) }
    }

    /// An 8-byte compare-and-swap at `remote`: where it equals `compare`,
    /// it becomes `swap`. Add the 8-byte local target (the old value) with
    /// [`Wqe::data`].
    #[inline(always)]
    pub fn cas(&mut self, flags: CtrlFlags, remote: RemoteAddr, compare: u64, swap: u64) -> Wqe<'_, false> {
        self.expect_transport(SqTransport::Connected, "cas");
        let w = self.typed::<false>(WqeOpcode::ATOMIC_CS, 0, flags, 0);
        Wqe { w: w.w.raddr(remote.addr, remote.rkey).atomic(swap, compare) }
    }

    /// An 8-byte fetch-and-add of `add` at `remote`; add the local target.
    #[inline(always)]
    pub fn fetch_add(&mut self, flags: CtrlFlags, remote: RemoteAddr, add: u64) -> Wqe<'_, false> {
        self.expect_transport(SqTransport::Connected, "fetch_add");
        let w = self.typed::<false>(WqeOpcode::ATOMIC_FA, 0, flags, 0);
        Wqe { w: w.w.raddr(remote.addr, remote.rkey).atomic(add, 0) }
    }

    /// A masked 8-byte compare-and-swap (extended atomics): the bits of
    /// `compare_mask` are compared with `compare`; on a match the bits of
    /// `swap_mask` take `swap`'s. Add the local target.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn masked_cas(
        &mut self,
        flags: CtrlFlags,
        remote: RemoteAddr,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Wqe<'_, false> {
        self.expect_transport(SqTransport::Connected, "masked_cas");
        let w = self.typed::<false>(WqeOpcode::ATOMIC_MASKED_CS, ext_atomic_opmod(3), flags, 0);
        Wqe { w: w.w.raddr(remote.addr, remote.rkey).masked_cas(swap, compare, swap_mask, compare_mask) }
    }

    /// A masked 8-byte fetch-and-add (extended atomics): `add`, with carries
    /// stopping at the bits of `field_boundary`. Add the local target.
    #[inline(always)]
    pub fn masked_fa(&mut self, flags: CtrlFlags, remote: RemoteAddr, add: u64, field_boundary: u64) -> Wqe<'_, false> {
        self.expect_transport(SqTransport::Connected, "masked_fa");
        let w = self.typed::<false>(WqeOpcode::ATOMIC_MASKED_FA, ext_atomic_opmod(3), flags, 0);
        Wqe { w: w.w.raddr(remote.addr, remote.rkey).masked_fa(add, field_boundary) }
    }
}
