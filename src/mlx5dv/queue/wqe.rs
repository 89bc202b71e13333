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
//! | [`SqRing::send_inv`] | control (the invalidated key in the immediate) | a gather list or one inline segment |
//! | [`SqRing::masked_cas`], [`SqRing::masked_fa`] | control, remote address, masked atomic (opmod `0x09`) | data |
//! | [`SqRing::masked_cas_ext`], [`SqRing::masked_fa_ext`] | control, remote address, four or two 16- or 32-byte operands (opmod `0x0a`, `0x0b`) | data |
//! | [`SqRing::dc`]`(&target)` then [`Dc::send`], [`Dc::send_imm`], [`Dc::send_inv`], [`Dc::write`], [`Dc::write_imm`], [`Dc::read`], [`Dc::cas`], [`Dc::fetch_add`], [`Dc::masked_cas`], [`Dc::masked_fa`], [`Dc::masked_cas_ext`], [`Dc::masked_fa_ext`] | control (with the DCI stream of [`Dc::stream`]), the DC address, then as the connected builder of the same name | as there |
//!
//! The connected builders panic on a ring of a UD QP or DC initiator,
//! `send_ud` on any ring but a UD one, and `dc` on any ring but a DC
//! initiator's ([`SqTransport`]): the device would read their segments at
//! other offsets.
//!
//! # Extended atomics
//! The 16- and 32-byte masked atomics follow the layout of the 8-byte ones
//! (remote address, then swap, compare, swap mask, compare mask, or add and
//! field boundary), each operand as wide as the word, with the opmod
//! `0x08 | (log2 bytes - 2)`, as MLNX_OFED 4.x's `verbs_exp.h`
//! (`IBV_EXP_WR_EXT_MASKED_ATOMIC_*`, `log_arg_sz`) and UCX's mlx5 layer
//! describe them. libmlx5 of rdma-core has no path that writes them, so
//! the libmlx5 harness checks them against a reference its C half builds
//! from that documented layout, not against a driver, and they have not
//! run on hardware. Whether a device takes them is its
//! `atomic_size_qp` / `atomic_size_dc` HCA capability (and MLNX_OFED 4.x's
//! `masked_log_atomic_arg_sizes`), which rdma-core's verbs do not report
//! but DEVX reads ([`HcaCaps`](crate::mlx5dv::devx::HcaCaps)): the 16- and
//! 32-byte builders take an [`ExtAtomics`] proof, obtained once from the
//! capabilities ([`ExtAtomics::from_caps`], a typed
//! [`Error::Unsupported`](crate::prim::Error::Unsupported) where the size is
//! missing, and off mlx5 or without DEVX, where the capabilities cannot be
//! read), so a request the device would complete in error is refused at
//! set-up and nothing is checked per WQE.
//!
//! A payload beyond the QP's `max_inline_data` or `max_send_sge`, or a WQE
//! beyond its largest size, panics ([`SqLimits`](crate::mlx5dv::queue::sq::SqLimits)).
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

use crate::mlx5dv::queue::mmio::Mmio;
use crate::mlx5dv::queue::seg::{ext_atomic_opmod, CtrlFlags, DatagramSeg, WqeOpcode};
use crate::mlx5dv::queue::sq::{SqRing, SqTransport, WqeWriter};
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
    /// On a ring that is not [`SqTransport::DcInitiator`], and for a stream
    /// the DCI does not have ([`SqRing::set_dci_streams`]).
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

/// Where a typed WQE goes: a connected QP's peer (the builder's name, for
/// the family check), or a DC target with its stream (the family checked
/// when [`SqRing::dc`] made the [`Dc`]).
#[derive(Clone, Copy)]
enum To<'t> {
    Connected(&'static str),
    Dc(&'t DatagramSeg, u16),
}

impl SqRing {
    /// A typed WQE of family `want` (named `builder` in the panic) with a
    /// `header` of that many bytes (control segment included); the family
    /// is checked with the free space for the header, in one comparison.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn typed<const I: bool>(
        &mut self,
        want: SqTransport,
        builder: &'static str,
        header: usize,
        op: WqeOpcode,
        opmod: u8,
        flags: CtrlFlags,
        imm: u32,
    ) -> Wqe<'_, I> {
        // SAFETY: every caller below adds the segments `op` defines on a
        // QP of family `want`, in its order, and leaves the payload to
        // `Wqe`, whose only address writer is the unsafe `data`.
        Wqe { w: unsafe { self.typed_wqe(want, builder, header, op, opmod, flags, imm) } }
    }

    /// The control segment and, to a DC target, the DC address and stream;
    /// `rest` is the bytes of the opcode's segments the caller adds next.
    #[inline(always)]
    fn begin<const I: bool>(
        &mut self,
        to: To<'_>,
        op: WqeOpcode,
        opmod: u8,
        flags: CtrlFlags,
        imm: u32,
        rest: usize,
    ) -> Wqe<'_, I> {
        match to {
            To::Connected(name) => self.typed(SqTransport::Connected, name, CTRL + rest, op, opmod, flags, imm),
            To::Dc(av, stream) => {
                let header = CTRL + size_of::<DatagramSeg>() + rest;
                let w = self.typed::<I>(SqTransport::DcInitiator, "dc", header, op, opmod, flags, imm);
                Wqe { w: w.w.datagram(av).stream_unchecked(stream) }
            }
        }
    }

    #[inline(always)]
    fn send_to(&mut self, to: To<'_>, op: WqeOpcode, flags: CtrlFlags, imm: u32) -> Wqe<'_, true> {
        self.begin(to, op, 0, flags, imm, 0)
    }

    #[inline(always)]
    fn rdma_to<const I: bool>(
        &mut self,
        to: To<'_>,
        op: WqeOpcode,
        flags: CtrlFlags,
        r: RemoteAddr,
        imm: u32,
    ) -> Wqe<'_, I> {
        let w = self.begin::<I>(to, op, 0, flags, imm, RADDR);
        Wqe { w: w.w.raddr(r.addr, r.rkey) }
    }

    #[inline(always)]
    fn atomic_to(
        &mut self,
        to: To<'_>,
        op: WqeOpcode,
        flags: CtrlFlags,
        r: RemoteAddr,
        a: u64,
        b: u64,
    ) -> Wqe<'_, false> {
        let w = self.begin::<false>(to, op, 0, flags, 0, RADDR + 16);
        Wqe { w: w.w.raddr(r.addr, r.rkey).atomic(a, b) }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn masked_cas_to(
        &mut self,
        to: To<'_>,
        flags: CtrlFlags,
        r: RemoteAddr,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Wqe<'_, false> {
        let w = self.begin::<false>(to, WqeOpcode::ATOMIC_MASKED_CS, ext_atomic_opmod(3), flags, 0, RADDR + 32);
        Wqe { w: w.w.raddr(r.addr, r.rkey).masked_cas(swap, compare, swap_mask, compare_mask) }
    }

    #[inline(always)]
    fn masked_fa_to(&mut self, to: To<'_>, flags: CtrlFlags, r: RemoteAddr, add: u64, boundary: u64) -> Wqe<'_, false> {
        let w = self.begin::<false>(to, WqeOpcode::ATOMIC_MASKED_FA, ext_atomic_opmod(3), flags, 0, RADDR + 16);
        Wqe { w: w.w.raddr(r.addr, r.rkey).masked_fa(add, boundary) }
    }

    #[inline(always)]
    fn ext_to<const N: usize>(
        &mut self,
        to: To<'_>,
        op: WqeOpcode,
        flags: CtrlFlags,
        r: RemoteAddr,
        ops: &[&[u8; N]],
    ) -> Wqe<'_, false> {
        let w = self.begin::<false>(to, op, ext_atomic_opmod(ext_log::<N>()), flags, 0, RADDR + ops.len() * N);
        Wqe { w: w.w.raddr(r.addr, r.rkey).operands(ops) }
    }

    /// A NOP: the control segment alone (add nothing).
    #[inline(always)]
    pub fn nop(&mut self, flags: CtrlFlags) -> Wqe<'_, false> {
        // SAFETY: a NOP is the control segment alone, on any QP; `Wqe`'s
        // only address writer is the unsafe `data`.
        Wqe { w: unsafe { self.wqe(WqeOpcode::NOP, 0, flags, 0) } }
    }

    /// A SEND; add its payload.
    #[inline(always)]
    pub fn send(&mut self, flags: CtrlFlags) -> Wqe<'_, true> {
        self.send_to(To::Connected("send"), WqeOpcode::SEND, flags, 0)
    }

    /// A SEND with immediate data `imm`, given in host order (stored big
    /// endian, as [`SendWr::send_imm`](crate::prim::SendWr::send_imm) does).
    #[inline(always)]
    pub fn send_imm(&mut self, flags: CtrlFlags, imm: u32) -> Wqe<'_, true> {
        self.send_to(To::Connected("send_imm"), WqeOpcode::SEND_IMM, flags, imm.to_be())
    }

    /// A SEND that invalidates the remote key `rkey` at the receiver
    /// (`IBV_WR_SEND_WITH_INV`; the key stored big endian in the control
    /// segment's immediate, as libmlx5 stores `invalidate_rkey`).
    #[inline(always)]
    pub fn send_inv(&mut self, flags: CtrlFlags, rkey: u32) -> Wqe<'_, true> {
        self.send_to(To::Connected("send_inv"), WqeOpcode::SEND_INVAL, flags, rkey.to_be())
    }

    /// A SEND on a UD QP (or any QP whose WQEs start with an address
    /// vector) to the destination `av`.
    #[inline(always)]
    pub fn send_ud(&mut self, flags: CtrlFlags, av: &DatagramSeg) -> Wqe<'_, true> {
        let header = CTRL + size_of::<DatagramSeg>();
        let w = self.typed::<true>(SqTransport::Datagram, "send_ud", header, WqeOpcode::SEND, 0, flags, 0);
        Wqe { w: w.w.datagram(av) }
    }

    /// An RDMA WRITE to `remote`; add its payload.
    #[inline(always)]
    pub fn write(&mut self, flags: CtrlFlags, remote: RemoteAddr) -> Wqe<'_, true> {
        self.rdma_to(To::Connected("write"), WqeOpcode::RDMA_WRITE, flags, remote, 0)
    }

    /// An RDMA WRITE with immediate data `imm` (host order) to `remote`.
    #[inline(always)]
    pub fn write_imm(&mut self, flags: CtrlFlags, remote: RemoteAddr, imm: u32) -> Wqe<'_, true> {
        self.rdma_to(To::Connected("write_imm"), WqeOpcode::RDMA_WRITE_IMM, flags, remote, imm.to_be())
    }

    /// An RDMA READ from `remote`; add the local target with [`Wqe::data`].
    #[inline(always)]
    pub fn read(&mut self, flags: CtrlFlags, remote: RemoteAddr) -> Wqe<'_, false> {
        self.rdma_to(To::Connected("read"), WqeOpcode::RDMA_READ, flags, remote, 0)
    }

    /// An 8-byte compare-and-swap at `remote`: where it equals `compare`,
    /// it becomes `swap`. Add the 8-byte local target (the old value) with
    /// [`Wqe::data`].
    #[inline(always)]
    pub fn cas(&mut self, flags: CtrlFlags, remote: RemoteAddr, compare: u64, swap: u64) -> Wqe<'_, false> {
        self.atomic_to(To::Connected("cas"), WqeOpcode::ATOMIC_CS, flags, remote, swap, compare)
    }

    /// An 8-byte fetch-and-add of `add` at `remote`; add the local target.
    #[inline(always)]
    pub fn fetch_add(&mut self, flags: CtrlFlags, remote: RemoteAddr, add: u64) -> Wqe<'_, false> {
        self.atomic_to(To::Connected("fetch_add"), WqeOpcode::ATOMIC_FA, flags, remote, add, 0)
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
        self.masked_cas_to(To::Connected("masked_cas"), flags, remote, compare, compare_mask, swap, swap_mask)
    }

    /// A masked 8-byte fetch-and-add (extended atomics): `add`, with carries
    /// stopping at the bits of `field_boundary`. Add the local target.
    #[inline(always)]
    pub fn masked_fa(&mut self, flags: CtrlFlags, remote: RemoteAddr, add: u64, field_boundary: u64) -> Wqe<'_, false> {
        self.masked_fa_to(To::Connected("masked_fa"), flags, remote, add, field_boundary)
    }

    /// A masked compare-and-swap on an `N`-byte word (16 or 32; extended
    /// atomics, opmod `0x08 | (log2 N - 2)`): the operands are the word's
    /// bytes as the device reads them (big endian, most significant byte
    /// first), written swap, compare, swap mask, compare mask (the order of
    /// the 8-byte segment). Add the `N`-byte local target (the old word).
    /// See the module's notes on extended atomics: what checks this layout,
    /// and the capability that gates it.
    ///
    /// `N` other than 16 and 32 does not compile (8 bytes: [`SqRing::masked_cas`]):
    ///
    /// ```compile_fail,E0080
    /// use rrddmma::mlx5dv::{seg::CtrlFlags, sq::SqRing, wqe::ExtAtomics};
    /// use rrddmma::prim::RemoteAddr;
    /// fn f(sq: &mut SqRing) {
    ///     let r = RemoteAddr { addr: 0, rkey: 1 };
    ///     // SAFETY: (never compiled)
    ///     let p = unsafe { ExtAtomics::assume() };
    ///     sq.masked_cas_ext(p, CtrlFlags::empty(), r, &[0u8; 12], &[0; 12], &[0; 12], &[0; 12]).finish();
    /// }
    /// // The check runs when the builder is instantiated (here, for `f`).
    /// let _ = f as fn(&mut SqRing);
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn masked_cas_ext<const N: usize>(
        &mut self,
        proof: ExtAtomics<N, false>,
        flags: CtrlFlags,
        remote: RemoteAddr,
        compare: &[u8; N],
        compare_mask: &[u8; N],
        swap: &[u8; N],
        swap_mask: &[u8; N],
    ) -> Wqe<'_, false> {
        let _ = proof;
        let ops = [swap, compare, swap_mask, compare_mask];
        self.ext_to(To::Connected("masked_cas_ext"), WqeOpcode::ATOMIC_MASKED_CS, flags, remote, &ops)
    }

    /// A masked fetch-and-add on an `N`-byte word (16 or 32; extended
    /// atomics): `add`, carries stopping at the bits of `field_boundary`,
    /// both as the word's big-endian bytes, written add then boundary (the
    /// order of the 8-byte segment). Add the `N`-byte local target.
    #[inline(always)]
    pub fn masked_fa_ext<const N: usize>(
        &mut self,
        proof: ExtAtomics<N, false>,
        flags: CtrlFlags,
        remote: RemoteAddr,
        add: &[u8; N],
        field_boundary: &[u8; N],
    ) -> Wqe<'_, false> {
        let _ = proof;
        self.ext_to(To::Connected("masked_fa_ext"), WqeOpcode::ATOMIC_MASKED_FA, flags, remote, &[add, field_boundary])
    }

    /// The WQEs of a DC initiator to one DC target: `target` is the DC
    /// address ([`AddressVector::dc`](crate::mlx5dv::queue::av::AddressVector::dc): the
    /// target's DCT number and access key on the path to its port). The
    /// [`Dc`] has the builders of a connected ring, each writing the DC
    /// address after the control segment; [`Dc::stream`] picks the DCI
    /// stream.
    ///
    /// # Panics
    /// Its builders panic on a ring that is not [`SqTransport::DcInitiator`]
    /// (a programming error: take the view with
    /// [`Dci::sq_ring`](crate::mlx5dv::dc::Dci::sq_ring)), before writing
    /// anything: the family is checked with the ring's free space, in the
    /// same comparison.
    #[inline(always)]
    pub fn dc<'t>(&mut self, target: &'t DatagramSeg) -> Dc<'_, 't> {
        Dc { sq: self, target, stream: 0 }
    }
}

/// Proof that the device executes `N`-byte extended (masked) atomics on
/// RC QPs (`DC` false) or DCIs (`DC` true): its `atomic_size_qp` /
/// `atomic_size_dc` capability has `N`. The 16- and 32-byte masked builders
/// ([`SqRing::masked_cas_ext`], [`Dc::masked_fa_ext`], ...) take it, so the
/// device's sizes are checked once, when the proof is made, and a WQE pays
/// nothing (the value is zero-sized). `N` other than 16 and 32 does not
/// compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtAtomics<const N: usize, const DC: bool> {
    _checked: (),
}

impl<const N: usize, const DC: bool> ExtAtomics<N, DC> {
    /// The proof from the device's capabilities (the current ones,
    /// [`CapMode::CUR`](crate::mlx5dv::prm::CapMode::CUR), are what the
    /// device executes).
    ///
    /// # Errors
    /// [`Error::Unsupported`](crate::prim::Error::Unsupported) (the atomic
    /// size row, [`ATOMIC_SIZE`](crate::prim::unsupported::ATOMIC_SIZE))
    /// naming the device's sizes when they lack `N` bytes on the QP type
    /// ([`HcaCaps::check_atomic_size`](crate::mlx5dv::devx::HcaCaps::check_atomic_size)).
    /// Off mlx5 or without DEVX there are no capabilities to give: their
    /// query ([`HcaCaps::query`](crate::mlx5dv::devx::HcaCaps::query))
    /// returns the typed `Unsupported` there.
    #[cfg(not(rrddmma_mlnx_ofed4))]
    pub fn from_caps(caps: &crate::mlx5dv::devx::HcaCaps) -> crate::prim::Result<ExtAtomics<N, DC>> {
        let log = ext_log::<N>();
        caps.check_atomic_size(1u32 << log, DC)?;
        Ok(ExtAtomics { _checked: () })
    }

    /// The proof without a check.
    ///
    /// # Safety
    /// None for memory: a device without `N`-byte atomics completes the WQE
    /// in error. `unsafe` marks the claim (the device executes them, as
    /// MLNX_OFED 4.x's `masked_log_atomic_arg_sizes` or a recorded
    /// capability may say) so that it stands out where it is made.
    pub const unsafe fn assume() -> ExtAtomics<N, DC> {
        ExtAtomics { _checked: () }
    }
}

/// The control segment's bytes, and the remote address segment's.
const CTRL: usize = 16;
const RADDR: usize = 16;

/// `log2 N` for an extended-atomic operand of `N` bytes, 16 or 32; any
/// other `N` fails to compile.
const fn ext_log<const N: usize>() -> u8 {
    const { assert!(N == 16 || N == 32, "extended atomics take 16- or 32-byte operands (8 bytes: masked_cas / masked_fa)") };
    N.trailing_zeros() as u8
}

/// A stream id of one DCI, checked against the DCI's streams once, when it
/// is made ([`SqRing::stream_id`]), so that [`Dc::on`] writes it with no
/// check: the stream count is a property of the ring, not of a request.
/// Use it on the ring that made it (the stream ids of one DCI are not
/// another's; debug builds assert it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DciStream {
    id: u16,
    qpn: u32,
}

impl DciStream {
    /// The stream id (0 is the DCI's first stream).
    pub const fn id(self) -> u16 {
        self.id
    }
}

impl SqRing {
    /// Stream `id` of this DCI's ring, for [`Dc::on`]; the check
    /// [`Dc::stream`] makes per WQE, made once.
    ///
    /// # Panics
    /// If `id` is not one of the DCI's streams (`0` without streams,
    /// `0..2^log_num_concurrent` with: [`SqRing::set_dci_streams`]); the
    /// message names the range and the fix.
    pub fn stream_id(&self, id: u16) -> DciStream {
        self.check_stream(id);
        DciStream { id, qpn: self.qpn() }
    }
}

/// The typed builders of a DC initiator's ring towards one DC target
/// ([`SqRing::dc`]); each consumes it and starts one WQE: control
/// segment, the DC address, the opcode's segments, then the payload as on
/// a connected ring.
#[derive(Debug)]
#[must_use = "a Dc only starts WQEs: call one of its builders"]
pub struct Dc<'s, 't> {
    sq: &'s mut SqRing,
    target: &'t DatagramSeg,
    stream: u16,
}

impl<'s, 't> Dc<'s, 't> {
    /// The DCI stream the WQE goes on (`mlx5dv_wr_set_dc_addr_stream`'s
    /// `stream_id`; 0, the default, is the DCI's first stream). A DCI
    /// created with streams ([`DciStreams`](crate::mlx5dv::dc::DciStreams)) has
    /// `2^log_num_concurrent` of them; a stream the DCI does not have
    /// is a programming error here (libmlx5 passes it to the device).
    ///
    /// # Panics
    /// If `id` is not one of the DCI's streams (`0` without streams,
    /// `0..2^log_num_concurrent` with: [`SqRing::set_dci_streams`], which
    /// `Dci::sq_ring` calls); the message names the range and the fix.
    #[inline(always)]
    pub fn stream(mut self, id: u16) -> Self {
        self.sq.check_stream(id);
        self.stream = id;
        self
    }

    /// The DCI stream the WQE goes on, checked when `stream` was made
    /// ([`SqRing::stream_id`]): nothing is checked per WQE. Take the ids a
    /// program posts on once, at set-up, from the ring they are used on.
    #[inline(always)]
    pub fn on(mut self, stream: DciStream) -> Self {
        debug_assert_eq!(stream.qpn, self.sq.qpn(), "a DciStream of another DCI's ring");
        self.stream = stream.id;
        self
    }

    #[inline(always)]
    fn parts(self) -> (&'s mut SqRing, To<'t>) {
        (self.sq, To::Dc(self.target, self.stream))
    }

    /// A SEND to the target's SRQ; add its payload.
    #[inline(always)]
    pub fn send(self, flags: CtrlFlags) -> Wqe<'s, true> {
        let (sq, to) = self.parts();
        sq.send_to(to, WqeOpcode::SEND, flags, 0)
    }

    /// A SEND with immediate data `imm` (host order).
    #[inline(always)]
    pub fn send_imm(self, flags: CtrlFlags, imm: u32) -> Wqe<'s, true> {
        let (sq, to) = self.parts();
        sq.send_to(to, WqeOpcode::SEND_IMM, flags, imm.to_be())
    }

    /// A SEND that invalidates `rkey` at the target ([`SqRing::send_inv`]).
    #[inline(always)]
    pub fn send_inv(self, flags: CtrlFlags, rkey: u32) -> Wqe<'s, true> {
        let (sq, to) = self.parts();
        sq.send_to(to, WqeOpcode::SEND_INVAL, flags, rkey.to_be())
    }

    /// An RDMA WRITE to `remote`; add its payload.
    #[inline(always)]
    pub fn write(self, flags: CtrlFlags, remote: RemoteAddr) -> Wqe<'s, true> {
        let (sq, to) = self.parts();
        sq.rdma_to(to, WqeOpcode::RDMA_WRITE, flags, remote, 0)
    }

    /// An RDMA WRITE with immediate data `imm` (host order).
    #[inline(always)]
    pub fn write_imm(self, flags: CtrlFlags, remote: RemoteAddr, imm: u32) -> Wqe<'s, true> {
        let (sq, to) = self.parts();
        sq.rdma_to(to, WqeOpcode::RDMA_WRITE_IMM, flags, remote, imm.to_be())
    }

    /// An RDMA READ from `remote`; add the local target with [`Wqe::data`].
    #[inline(always)]
    pub fn read(self, flags: CtrlFlags, remote: RemoteAddr) -> Wqe<'s, false> {
        let (sq, to) = self.parts();
        sq.rdma_to(to, WqeOpcode::RDMA_READ, flags, remote, 0)
    }

    /// An 8-byte compare-and-swap ([`SqRing::cas`]).
    #[inline(always)]
    pub fn cas(self, flags: CtrlFlags, remote: RemoteAddr, compare: u64, swap: u64) -> Wqe<'s, false> {
        let (sq, to) = self.parts();
        sq.atomic_to(to, WqeOpcode::ATOMIC_CS, flags, remote, swap, compare)
    }

    /// An 8-byte fetch-and-add ([`SqRing::fetch_add`]).
    #[inline(always)]
    pub fn fetch_add(self, flags: CtrlFlags, remote: RemoteAddr, add: u64) -> Wqe<'s, false> {
        let (sq, to) = self.parts();
        sq.atomic_to(to, WqeOpcode::ATOMIC_FA, flags, remote, add, 0)
    }

    /// A masked 8-byte compare-and-swap ([`SqRing::masked_cas`]).
    #[inline(always)]
    pub fn masked_cas(
        self,
        flags: CtrlFlags,
        remote: RemoteAddr,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Wqe<'s, false> {
        let (sq, to) = self.parts();
        sq.masked_cas_to(to, flags, remote, compare, compare_mask, swap, swap_mask)
    }

    /// A masked 8-byte fetch-and-add ([`SqRing::masked_fa`]).
    #[inline(always)]
    pub fn masked_fa(self, flags: CtrlFlags, remote: RemoteAddr, add: u64, field_boundary: u64) -> Wqe<'s, false> {
        let (sq, to) = self.parts();
        sq.masked_fa_to(to, flags, remote, add, field_boundary)
    }

    /// A masked compare-and-swap on an `N`-byte word, 16 or 32
    /// ([`SqRing::masked_cas_ext`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn masked_cas_ext<const N: usize>(
        self,
        proof: ExtAtomics<N, true>,
        flags: CtrlFlags,
        remote: RemoteAddr,
        compare: &[u8; N],
        compare_mask: &[u8; N],
        swap: &[u8; N],
        swap_mask: &[u8; N],
    ) -> Wqe<'s, false> {
        let _ = proof;
        let (sq, to) = self.parts();
        let ops = [swap, compare, swap_mask, compare_mask];
        sq.ext_to(to, WqeOpcode::ATOMIC_MASKED_CS, flags, remote, &ops)
    }

    /// A masked fetch-and-add on an `N`-byte word, 16 or 32
    /// ([`SqRing::masked_fa_ext`]).
    #[inline(always)]
    pub fn masked_fa_ext<const N: usize>(
        self,
        proof: ExtAtomics<N, true>,
        flags: CtrlFlags,
        remote: RemoteAddr,
        add: &[u8; N],
        field_boundary: &[u8; N],
    ) -> Wqe<'s, false> {
        let _ = proof;
        let (sq, to) = self.parts();
        sq.ext_to(to, WqeOpcode::ATOMIC_MASKED_FA, flags, remote, &[add, field_boundary])
    }
}

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod tests {
    use super::*;
    use crate::mlx5dv::devx::{CapBlock, HcaCaps};
    use crate::mlx5dv::prm::{CapMode, QueryHcaCapOut};
    use crate::prim::Error;

    /// Capabilities whose atomic group has sizes `qp` (RC) and `dc` (DCIs).
    fn caps(qp: u32, dc: u32) -> HcaCaps {
        let block = |o: QueryHcaCapOut| CapBlock::from_bytes(&o.as_bytes()[16..]);
        let mut g = QueryHcaCapOut::new();
        g.cmd_hca_cap_mut().set_port_type(1).set_atomic(1);
        let mut a = QueryHcaCapOut::new();
        a.atomic_caps_mut().set_atomic_size_qp(qp).set_atomic_size_dc(dc);
        HcaCaps::from_blocks(CapMode::CUR, block(g), Some(block(a)), None, None, None)
    }

    /// The proof of the 16- and 32-byte builders is made from the device's
    /// atomic sizes, per QP type: refused with the typed `Unsupported`
    /// naming the size where they lack it, given where they have it.
    #[test]
    fn extended_atomics_are_proven_from_the_sizes_of_the_qp_type() {
        let c = caps(0x8 | 0x10, 0x8);
        assert!(ExtAtomics::<16, false>::from_caps(&c).is_ok(), "16-byte atomics on RC QPs");
        for e in [ExtAtomics::<32, false>::from_caps(&c).err(), ExtAtomics::<16, true>::from_caps(&c).err()] {
            match e {
                Some(e @ Error::Unsupported { .. }) => {
                    let s = e.to_string();
                    assert!(s.contains("-byte atomics on"), "{s}");
                }
                e => panic!("refused as unsupported: {e:?}"),
            }
        }
        let c = caps(0x8 | 0x10 | 0x20, 0x8 | 0x10 | 0x20);
        assert!(ExtAtomics::<32, true>::from_caps(&c).is_ok(), "32-byte atomics on DCIs");
        // Without the atomic group at all: refused too.
        let g = {
            let mut g = QueryHcaCapOut::new();
            g.cmd_hca_cap_mut().set_port_type(1);
            CapBlock::from_bytes(&g.as_bytes()[16..])
        };
        let none = HcaCaps::from_blocks(CapMode::CUR, g, None, None, None, None);
        assert!(matches!(ExtAtomics::<16, false>::from_caps(&none), Err(Error::Unsupported { .. })));
        // The proof is zero-sized: the builders pay nothing per WQE.
        assert_eq!(size_of::<ExtAtomics<16, false>>(), 0);
    }
}
