//! Direct views of a QP's send queue and a CQ (`mlx5dv_init_obj`).

use std::ops::Deref;

use crate::bindings as ffi;
use crate::mlx5dv::completion::cq::CqRing;
use crate::mlx5dv::completion::cqe::Completion;
use crate::mlx5dv::keys::mkey::UmrKey;
use crate::mlx5dv::keys::umr::MkeyConf;
use crate::mlx5dv::queue::be::Be32;
use crate::mlx5dv::queue::mmio::Mmio;
use crate::mlx5dv::queue::seg::{CtrlFlags, DatagramSeg, WqeOpcode};
use crate::mlx5dv::queue::sq::{SqLimits, SqRing, SqTransport, WqeWriter};
use crate::mlx5dv::queue::wqe::{Dc, ExtAtomics, Wqe};
use crate::mlx5dv::require;
use crate::prim::{Cq, Error, Qp, QpAttr, QpCaps, QpState, QpType, RemoteAddr, Result};

/// A QP's send queue for direct WQE posting; borrows the QP.
///
/// Reads go through `Deref` to [`SqRing`]; writes through the view's own
/// methods: the typed builders ([`DirectSq::write`], [`DirectSq::send`],
/// ... as [`crate::mlx5dv::queue::wqe`] describes), the `unsafe` raw writer
/// [`DirectSq::wqe`], [`DirectSq::ring`], [`DirectSq::retire`]. The view
/// never hands out `&mut SqRing`, so one QP's ring cannot be swapped into
/// another QP's view:
///
/// ```compile_fail
/// fn swap(a: &mut rrddmma::mlx5dv::obj::DirectSq<'_>, b: &mut rrddmma::mlx5dv::obj::DirectSq<'_>) {
///     std::mem::swap(&mut **a, &mut **b);
/// }
/// ```
///
/// While the view lives it holds a claim on the QP: [`Qp::modify`] to RESET
/// panics (the device would restart at WQE 0 under the view's producer
/// index and re-execute stale WQEs), and a second view cannot be made.
/// [`DirectSq::reset`] resets the QP and the ring together. Dropping the
/// view gives the claim back (a view leaked with `mem::forget` keeps it).
#[derive(Debug)]
pub struct DirectSq<'q> {
    ring: SqRing,
    qp: &'q Qp,
    /// The SQ's doorbell record (libmlx5 zeroes it on RESET).
    dbrec: *const Be32,
}

// SAFETY: the ring is `Send`; the QP is `Sync`; the doorbell record belongs
// to the QP and is only read, with `&mut self`.
unsafe impl Send for DirectSq<'_> {}

impl Deref for DirectSq<'_> {
    type Target = SqRing;
    fn deref(&self) -> &SqRing {
        &self.ring
    }
}

impl Drop for DirectSq<'_> {
    fn drop(&mut self) {
        self.qp.direct.release();
    }
}

macro_rules! typed {
    ($($(#[$m:meta])* $name:ident($($a:ident: $t:ty),*) -> $inl:literal;)*) => {$(
        $(#[$m])*
        #[inline(always)]
        pub fn $name(&mut self, flags: CtrlFlags $(, $a: $t)*) -> Wqe<'_, $inl> {
            self.ring.$name(flags $(, $a)*)
        }
    )*};
}

impl DirectSq<'_> {
    typed! {
        /// [`SqRing::nop`].
        nop() -> false;
        /// [`SqRing::send`].
        send() -> true;
        /// [`SqRing::send_imm`].
        send_imm(imm: u32) -> true;
        /// [`SqRing::send_inv`].
        send_inv(rkey: u32) -> true;
        /// [`SqRing::send_ud`].
        send_ud(av: &DatagramSeg) -> true;
        /// [`SqRing::write`].
        write(remote: RemoteAddr) -> true;
        /// [`SqRing::write_imm`].
        write_imm(remote: RemoteAddr, imm: u32) -> true;
        /// [`SqRing::read`].
        read(remote: RemoteAddr) -> false;
        /// [`SqRing::cas`].
        cas(remote: RemoteAddr, compare: u64, swap: u64) -> false;
        /// [`SqRing::fetch_add`].
        fetch_add(remote: RemoteAddr, add: u64) -> false;
        /// [`SqRing::masked_fa`].
        masked_fa(remote: RemoteAddr, add: u64, field_boundary: u64) -> false;
    }

    /// [`SqRing::mkey_configure`]: configures `mkey` (access, layout over
    /// registered regions, which the key then holds).
    pub fn mkey_configure<K: UmrKey + ?Sized>(
        &mut self,
        flags: CtrlFlags,
        mkey: &mut K,
        conf: MkeyConf<'_>,
    ) -> Result<u16> {
        self.ring.mkey_configure(flags, mkey, conf)
    }

    /// [`SqRing::local_inv`].
    pub fn local_inv(&mut self, flags: CtrlFlags, rkey: u32) -> u16 {
        self.ring.local_inv(flags, rkey)
    }

    /// [`SqRing::masked_cas`].
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
        self.ring.masked_cas(flags, remote, compare, compare_mask, swap, swap_mask)
    }

    /// [`SqRing::masked_cas_ext`].
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
        self.ring.masked_cas_ext(proof, flags, remote, compare, compare_mask, swap, swap_mask)
    }

    /// [`SqRing::masked_fa_ext`].
    #[inline(always)]
    pub fn masked_fa_ext<const N: usize>(
        &mut self,
        proof: ExtAtomics<N, false>,
        flags: CtrlFlags,
        remote: RemoteAddr,
        add: &[u8; N],
        field_boundary: &[u8; N],
    ) -> Wqe<'_, false> {
        self.ring.masked_fa_ext(proof, flags, remote, add, field_boundary)
    }

    /// The DC builders towards `target` ([`SqRing::dc`]), on the view of a
    /// DCI ([`Dci::sq_ring`](crate::mlx5dv::dc::Dci::sq_ring)).
    #[inline(always)]
    pub fn dc<'t>(&mut self, target: &'t DatagramSeg) -> Dc<'_, 't> {
        self.ring.dc(target)
    }

    /// Marks the view as a DCI's ([`SqTransport::DcInitiator`]) with
    /// `2^log_num_concurrent` streams (`None`: stream 0 alone).
    ///
    /// # Safety
    /// The QP is a DC initiator.
    // Used by `Dci::sq_ring`, which MLNX_OFED 4.x builds leave out.
    pub(crate) unsafe fn set_dc_initiator(&mut self, log_num_concurrent: Option<u8>) {
        // SAFETY: forwarded contract.
        unsafe { self.ring.set_transport(SqTransport::DcInitiator) };
        if let Some(log) = log_num_concurrent {
            self.ring.set_dci_streams(log);
        }
    }

    /// Starts a raw WQE ([`SqRing::wqe`]).
    ///
    /// # Safety
    /// As [`SqRing::wqe`]: the segments follow the layout the device
    /// defines for `opcode`, so that the device reads as data segments only
    /// those written by [`WqeWriter::data`].
    #[inline(always)]
    pub unsafe fn wqe(&mut self, opcode: WqeOpcode, opmod: u8, fm_ce_se: CtrlFlags, imm: u32) -> WqeWriter<'_> {
        // SAFETY: forwarded contract.
        unsafe { self.ring.wqe(opcode, opmod, fm_ce_se, imm) }
    }

    /// Rings the doorbell for the WQEs finished since the last one ([`SqRing::ring`]).
    #[inline]
    pub fn ring<M: Mmio>(&mut self, mmio: &mut M) {
        self.ring.ring(mmio)
    }

    /// Frees WQEs up to the one a completion reports ([`SqRing::retire`]):
    /// only completions polled from the bound [`DirectCq`] (the one given
    /// to [`sq_ring`], [`DirectSq::bind_cq`] or [`DirectSq::reset`]) after
    /// the binding are taken.
    #[inline]
    pub fn retire(&mut self, c: &Completion) -> bool {
        self.ring.retire(c)
    }

    /// Takes completions from `cq`, a new view of the QP's send CQ, from now
    /// on ([`SqRing::bind_cq`]): completions already in the CQ are refused.
    ///
    /// # Panics
    /// If `cq` is not a view of this QP's send CQ (a programming error).
    pub fn bind_cq(&mut self, cq: &DirectCq<'_>) {
        check_send_cq(self.qp, cq);
        self.ring.bind_cq(&cq.ring);
    }

    /// Moves the QP to RESET (`ibv_modify_qp`, which zeroes the doorbell
    /// record) and restarts the ring with it: outstanding WQEs are
    /// forgotten, the producer index starts again where the device does,
    /// and every completion already in `cq` (the QP's send CQ; libmlx5 does
    /// not clean a CQ under a direct view) is stale: [`DirectSq::retire`]
    /// refuses it, even if its counter names a new WQE. Bring the QP up
    /// again with [`Qp::modify`] or [`Qp::connect`](crate::prim::Qp::connect).
    ///
    /// On an error the ring is unchanged.
    ///
    /// # Panics
    /// If `cq` is not a view of this QP's send CQ (a programming error).
    pub fn reset(&mut self, cq: &DirectCq<'_>) -> Result<()> {
        check_send_cq(self.qp, cq);
        self.qp.modify_claimed(&QpAttr::new(QpState::RESET))?;
        // SAFETY: the QP's doorbell record, alive while the QP is.
        let pi = unsafe { std::ptr::read_volatile(self.dbrec) }.get() & 0xffff;
        // SAFETY: the QP was moved to RESET just now, under this view's claim
        // (no doorbell since), and `pi` is what libmlx5 left in the record.
        unsafe { self.ring.restart_after_reset(pi, &cq.ring) };
        Ok(())
    }

    /// [`SqRing::set_prefer_bf`].
    pub fn set_prefer_bf(&mut self, yes: bool) {
        self.ring.set_prefer_bf(yes)
    }

    /// [`SqRing::set_blueflame`].
    ///
    /// # Safety
    /// As [`SqRing::set_blueflame`]: with `yes`, the QP's BlueFlame register
    /// must be its own. [`DirectSq::enable_blueflame`] is the safe way where
    /// it is ([`DirectSq::blueflame_dedicated`]).
    pub unsafe fn set_blueflame(&mut self, yes: bool) {
        // SAFETY: forwarded contract.
        unsafe { self.ring.set_blueflame(yes) }
    }

    /// Whether the QP's BlueFlame register is not shared with QPs that other
    /// threads may post to: the QP was created on a parent domain with a
    /// thread domain ([`TdParentDomain`](crate::prim::TdParentDomain)), to
    /// which libmlx5 gives a register of its own when the thread domain is
    /// allocated (`mlx5_alloc_td` takes it off the context's free list; every
    /// QP of that thread domain writes to it, and nothing else does), and
    /// every object under a thread domain is used by one thread at a time.
    /// A QP made any other way gets a register libmlx5 may share with other
    /// QPs of the context.
    pub fn blueflame_dedicated(&self) -> bool {
        self.qp.pd().has_thread_domain()
    }

    /// Turns BlueFlame on for single-WQE doorbells, safely: where the QP's
    /// register is its thread domain's own ([`DirectSq::blueflame_dedicated`])
    /// and has a BlueFlame buffer (`mlx5dv_qp.bf.size` not 0). Else
    /// [`Error::Unsupported`] naming what is missing, and the view keeps
    /// plain doorbells.
    pub fn enable_blueflame(&mut self) -> Result<()> {
        if let Some((missing, value)) = blueflame_refusal(self.blueflame_dedicated(), self.ring.bf_size_available) {
            let device = self.qp.pd().context().name();
            return Err(Error::unsupported("DirectSq::enable_blueflame", missing, device, value));
        }
        // SAFETY: the register is the thread domain's alone (libmlx5 gives
        // each thread domain one of its own), and the thread-domain contract
        // (`LocalQp` is not `Send`; `LocalQp::as_qp` and
        // `TdParentDomain::as_parent_domain` are `unsafe` with that promise)
        // keeps every write to it on one thread at a time: no two copies
        // into it interleave.
        unsafe { self.ring.set_blueflame(true) };
        Ok(())
    }
}

/// Why [`DirectSq::enable_blueflame`] refuses: `None` when the QP's
/// register is its thread domain's own (`dedicated`) and has a BlueFlame
/// buffer of `bf_size` bytes.
fn blueflame_refusal(dedicated: bool, bf_size: u32) -> Option<(&'static crate::prim::Missing, &'static str)> {
    if !dedicated {
        Some((&crate::prim::unsupported::BLUEFLAME_SHARED, "false"))
    } else if bf_size == 0 {
        Some((&crate::prim::unsupported::BLUEFLAME_SIZE, "0"))
    } else {
        None
    }
}

/// Panics unless `cq` views `qp`'s send CQ.
#[track_caller]
fn check_send_cq(qp: &Qp, cq: &DirectCq<'_>) {
    // SAFETY: a live QP; `send_cq` is set at creation and never changes.
    let send = unsafe { (*qp.as_ptr()).send_cq };
    assert!(
        send == cq.cq.as_ptr(),
        "the DirectCq given for QP {:#x} views CQ {:#x}, not the QP's send CQ: pass a view of the CQ its requester \
         completions go to",
        qp.qpn(),
        cq.ring.cqn()
    );
}

/// The WQE layout family of a QP type.
pub(crate) fn transport_for(ty: QpType) -> SqTransport {
    match ty {
        QpType::RC | QpType::UC => SqTransport::Connected,
        QpType::UD | QpType::DRIVER => SqTransport::Datagram,
        QpType::RAW_PACKET => SqTransport::RawPacket,
        _ => SqTransport::Other,
    }
}

/// The largest WQE the typed builders can write on a QP of `ty` with
/// `caps`: the longest header its opcodes define (control, address vector
/// for UD and DC, XRC segment, remote address and a 32-byte masked atomic)
/// and the larger of its gather list and its inline payload; or, if longer,
/// a 32-byte extended masked CAS (remote address, 128 bytes of operands)
/// with its one data segment.
pub(crate) fn limits_for(ty: QpType, caps: &QpCaps) -> SqLimits {
    let transport = match ty {
        QpType::UD => 48,
        QpType::DRIVER => 48 + 48,
        QpType::XRC_SEND => 16 + 48,
        _ => 48,
    };
    let inline = (4 + caps.get_max_inline_data()).next_multiple_of(16);
    let gather = 16 * caps.get_max_send_sge();
    // UD has no atomics; the others: what precedes the remote address.
    let ext_cas = if ty == QpType::UD { 0 } else { 16 + (transport - 48) + 16 + 128 + 16 };
    let bytes = (16 + transport + inline.max(gather)).max(ext_cas).next_multiple_of(64);
    SqLimits::new(caps.get_max_inline_data(), caps.get_max_send_sge(), bytes)
}

/// A CQ for direct polling; borrows the CQ. Poll through this view only.
///
/// As with [`DirectSq`], the ring is reachable for writes only through the
/// view's methods, never as `&mut CqRing`:
///
/// ```compile_fail
/// fn swap(a: &mut rrddmma::mlx5dv::obj::DirectCq<'_>, b: &mut rrddmma::mlx5dv::obj::DirectCq<'_>) {
///     std::mem::swap(&mut **a, &mut **b);
/// }
/// ```
#[derive(Debug)]
pub struct DirectCq<'c> {
    ring: CqRing,
    cq: &'c Cq,
}

impl Deref for DirectCq<'_> {
    type Target = CqRing;
    fn deref(&self) -> &CqRing {
        &self.ring
    }
}

impl DirectCq<'_> {
    /// Polls completions into `out` ([`CqRing::poll`]).
    #[inline]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.ring.poll(out)
    }

    /// Arms the CQ ([`CqRing::arm`]).
    pub fn arm<M: Mmio>(&mut self, mmio: &mut M, solicited: bool) {
        self.ring.arm(mmio, solicited)
    }

    /// [`CqRing::event_received`].
    pub fn event_received(&mut self) {
        self.ring.event_received()
    }

    /// Polls CQEs as 64-byte entries ([`CqRing::poll_cqes`]).
    pub fn poll_cqes(&mut self, out: &mut [crate::mlx5dv::completion::cqe::Cqe64]) -> usize {
        self.ring.poll_cqes(out)
    }

    /// Polls one completion and its scattered payload ([`CqRing::poll_scattered`]).
    pub fn poll_scattered(&mut self, payload: &mut [u8; 64]) -> Option<(Completion, usize)> {
        self.ring.poll_scattered(payload)
    }

    /// Polls completions of striding WQs into `out` ([`CqRing::poll_strides`]).
    #[inline]
    pub fn poll_strides(&mut self, out: &mut [crate::mlx5dv::raw::mprq::StrideCompletion]) -> usize {
        self.ring.poll_strides(out)
    }

    /// The CQ viewed.
    pub(crate) fn cq(&self) -> &Cq {
        self.cq
    }
}

/// The send queue of `qp`, its indices taken from the doorbell record,
/// taking completions from `cq`, a view of the QP's send CQ
/// ([`SqRing::bind_cq`]: completions already in the CQ are refused).
/// [`Error::Unsupported`] on a device that is not mlx5.
///
/// The view rings plain doorbells; BlueFlame is off, because the register
/// libmlx5 gave the QP may be shared with other QPs of the context
/// ([`DirectSq::enable_blueflame`] turns it on where the register is the
/// QP's thread domain's own). WQEs are
/// checked against the QP's granted `max_inline_data` and `max_send_sge`
/// and the largest WQE they allow ([`SqLimits`]).
///
/// # Safety
/// - The send queue must be idle when the view is made: every request
///   posted through libibverbs has completed, its CQE written (the view
///   starts retiring from the producer index it reads, and knows nothing of
///   earlier WQEs).
/// - While the view lives, the QP's send queue is posted to through it only
///   (no `Qp::post_send`, `Qp::wr_batch`, on any thread).
/// - After the view is dropped, the QP must not be posted to through
///   libibverbs again (`Qp::post_send`, `Qp::wr_batch`): libmlx5's own
///   producer index and bookkeeping are stale, and it would overwrite WQEs
///   or ring a doorbell with a wrong index. A new view is fine.
/// - Every WQE written through it must meet the contract of
///   [`Qp::post_send`]: its memory registered, alive and untouched until
///   completion (see [`crate::mlx5dv::queue::wqe::Wqe::data`]).
///
/// # Panics
/// If `cq` is not a view of the QP's send CQ, if another view of the QP's
/// send queue lives, or if a reset of the QP is under way on another thread
/// (programming errors).
pub unsafe fn sq_ring<'q>(qp: &'q Qp, cq: &DirectCq<'_>) -> Result<DirectSq<'q>> {
    require(qp.pd().context(), "mlx5dv_init_obj")?;
    check_send_cq(qp, cq);
    let mut out = ffi::mlx5dv_qp::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.qp.in_ = qp.as_ptr();
    obj.qp.out = &mut out;
    // SAFETY: an mlx5 QP (checked above); `obj` and `out` are valid for the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_QP.0)) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_init_obj", rc));
    }
    // SAFETY: libmlx5 reports the live QP's SQ buffer, its doorbell records
    // and BlueFlame register; the view borrows the QP, and the caller gives
    // it the queue alone.
    let mut ring = unsafe { sq_ring_of(&out, qp.qpn()) }?;
    // SAFETY: as above; `[1]` is the SQ's record.
    let dbrec = unsafe { out.dbrec.add(1) }.cast::<Be32>().cast_const();
    ring.set_limits(limits_for(qp.qp_type(), &qp.caps()));
    // SAFETY: the family of this QP's type.
    unsafe { ring.set_transport(transport_for(qp.qp_type())) };
    ring.bind_cq(&cq.ring);
    // Last, so that nothing after it can fail and leave the claim taken.
    assert!(
        qp.direct.take(),
        "a second DirectSq of QP {:#x}, or one made while the QP is being reset on another thread: one view at a time",
        qp.qpn()
    );
    Ok(DirectSq { ring, qp, dbrec })
}

/// `cq` for direct polling, its consumer index taken from the doorbell
/// record. [`Error::Unsupported`] on a device that is not mlx5.
///
/// A CQ that compresses its CQEs
/// ([`CqBuilder::mlx5_compression`](crate::prim::CqBuilder::mlx5_compression))
/// gets a view that expands its sessions in the CQ's format
/// ([`CqRing::set_compression`]); no call is needed, and none can turn it off.
///
/// # Safety
/// - While the view lives, the CQ is polled and armed through it only (no
///   `Cq::poll`, `Cq::start_poll`, `Cq::wait` or second view, on any thread).
/// - After the view is dropped, the CQ must not be polled or armed through
///   libibverbs again: libmlx5's consumer index is stale. A new view is fine.
pub unsafe fn cq_ring(cq: &Cq) -> Result<DirectCq<'_>> {
    require(cq.context(), "mlx5dv_init_obj")?;
    let mut out = ffi::mlx5dv_cq::default();
    let mut obj = ffi::mlx5dv_obj::default();
    obj.cq.in_ = cq.as_ptr();
    obj.cq.out = &mut out;
    // SAFETY: an mlx5 CQ (checked above); `obj` and `out` are valid for the call.
    let rc = unsafe { ffi::mlx5dv_init_obj(&mut obj, u64::from(ffi::mlx5dv_obj_type::MLX5DV_OBJ_CQ.0)) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_init_obj", rc));
    }
    // SAFETY: libmlx5 reports the live CQ's buffer (which it allocated
    // writable), records and UAR; the view borrows the CQ, and the caller
    // gives it the CQ alone.
    let ring = unsafe { view_ring(&out, cq.compression()) };
    Ok(DirectCq { ring, cq })
}

/// The ring of a CQ's view: [`cq_ring_of`], expanding sessions when the CQ
/// compresses in `compression`.
///
/// # Safety
/// As [`cq_ring_of`], and the buffer writable (as
/// [`CqRing::set_compression`] asks) when `compression` is set.
unsafe fn view_ring(
    out: &ffi::mlx5dv_cq,
    compression: Option<crate::mlx5dv::completion::mini::CqeResFormat>,
) -> CqRing {
    // SAFETY: forwarded contract.
    let mut ring = unsafe { cq_ring_of(out) };
    if compression.is_some() {
        // SAFETY: forwarded contract (a writable buffer).
        unsafe { ring.set_compression(compression) };
    }
    ring
}

/// A send-queue ring over what `mlx5dv_init_obj` reported for a QP
/// (`MLX5DV_OBJ_QP`): its buffer and `wqe_cnt`, the send doorbell record
/// (`dbrec[1]`), whose low 16 bits are the producer index the ring starts
/// at, and the BlueFlame register and size (BlueFlame left off, as
/// [`sq_ring`] leaves it). [`sq_ring`] is this for a [`Qp`]; this is for
/// QPs made elsewhere. [`Error::Unsupported`] for a stride other than 64.
///
/// # Safety
/// `out` must be what `mlx5dv_init_obj` wrote for a live QP numbered `qpn`,
/// with the contract of [`SqRing::from_raw`] for its buffer, record and
/// register, and the queue idle and the ring's alone as [`sq_ring`] says.
pub unsafe fn sq_ring_of(out: &ffi::mlx5dv_qp, qpn: u32) -> Result<SqRing> {
    if out.sq.stride != 64 {
        return Err(Error::unsupported(
            "mlx5dv_init_obj",
            &crate::prim::unsupported::SQ_STRIDE,
            &format!("the device of QP {qpn:#x}"),
            out.sq.stride,
        ));
    }
    // SAFETY: the QP's doorbell records: `[0]` receive, `[1]` send.
    let dbrec = unsafe { out.dbrec.add(1) }.cast::<Be32>();
    // SAFETY: forwarded contract.
    let mut ring = unsafe { SqRing::from_raw(out.sq.buf.cast(), out.sq.wqe_cnt, dbrec, out.bf.reg.cast(), 0, qpn) };
    // SAFETY: as above; the record holds the producer index's low 16 bits.
    let pi = unsafe { std::ptr::read_volatile(dbrec) }.get() & 0xffff;
    ring.start_at(pi);
    ring.bf_size_available = out.bf.size;
    Ok(ring)
}

/// A CQ ring over what `mlx5dv_init_obj` reported for a CQ
/// (`MLX5DV_OBJ_CQ`): buffer, `cqe_cnt`, `cqe_size`, CQN, the UAR and the
/// doorbell records, whose consumer record (`dbrec[0]`, low 24 bits) is the
/// consumer index the ring starts at. [`cq_ring`] is this for a [`Cq`];
/// this is for CQs made elsewhere. A CQ made elsewhere that compresses its
/// CQEs needs [`CqRing::set_compression`] on the ring (`mlx5dv_init_obj`
/// does not say whether a CQ compresses).
///
/// # Safety
/// `out` must be what `mlx5dv_init_obj` wrote for a live CQ, with the
/// contract of [`CqRing::from_raw`], and the CQ the ring's alone as
/// [`cq_ring`] says.
pub unsafe fn cq_ring_of(out: &ffi::mlx5dv_cq) -> CqRing {
    // SAFETY: forwarded contract.
    let mut ring = unsafe {
        CqRing::from_raw(out.buf.cast(), out.cqe_cnt, out.cqe_size, out.dbrec.cast(), out.cq_uar.cast(), out.cqn)
    };
    // SAFETY: as above; record 0 holds the consumer index's low 24 bits.
    let ci = unsafe { std::ptr::read_volatile(out.dbrec.cast::<Be32>()) }.get() & 0xff_ffff;
    ring.start_at(ci);
    ring
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BlueFlame is turned on safely only on a register of the QP's thread
    /// domain that has a BlueFlame buffer; each refusal names what is missing.
    #[test]
    fn blueflame_is_enabled_only_on_a_dedicated_register_with_a_buffer() {
        assert_eq!(blueflame_refusal(true, 256), None);
        assert!(blueflame_refusal(false, 256).is_some_and(|(m, _)| m.instead.contains("TdParentDomain")));
        assert!(blueflame_refusal(true, 0).is_some_and(|(m, v)| m.cap.contains("bf.size") && v == "0"));
        assert!(blueflame_refusal(false, 0).is_some_and(|(m, _)| m.instead.contains("TdParentDomain")));
    }

    /// The hole's second shape: a view of a compressing CQ that does not
    /// expand reads the title as one CQE and the mini-CQE array after it as
    /// another, whose WQE counter is a mini-CQE's byte count, and
    /// `SqRing::retire` then frees send WQEs the device never ran. The view
    /// `cq_ring` makes for a compressing CQ expands by itself: the eight
    /// expanded completions free nothing (B-3: `retire` refuses expanded
    /// requester completions), the whole CQE after them frees eight WQEs,
    /// and the ten later ones stay outstanding.
    #[test]
    fn compressed_cq_view_expands_by_itself_and_retires_only_what_ran() {
        use crate::mlx5dv::completion::cqe::{Cqe64, CqeOpcode};
        use crate::mlx5dv::completion::mini::{CqeResFormat, MiniCqe};
        use crate::mlx5dv::queue::be::{Be16, Be32};
        const QPN: u32 = 0x42;
        let retired_with = |compression: Option<CqeResFormat>| {
            // A CQ of 16 entries, all still the device's (owner bit 1 on lap 0).
            let mut cq_buf = vec![[0u64; 8]; 16];
            for e in cq_buf.iter_mut() {
                e[7] = 0xf1u64 << 56;
            }
            let mut cq_db = [Be32::default(); 2];
            let mut uar = [0u64; 8];
            let out = ffi::mlx5dv_cq {
                buf: cq_buf.as_mut_ptr().cast(),
                dbrec: cq_db.as_mut_ptr().cast(),
                cqe_cnt: 16,
                cqe_size: 64,
                cq_uar: uar.as_mut_ptr().cast(),
                cqn: 7,
                comp_mask: 0,
            };
            // SAFETY: host buffers that outlive the ring, written only here
            // (as the device would) between polls; the buffer is writable.
            let mut cq = unsafe { view_ring(&out, compression) };
            let mut sq_buf = vec![[0u64; 8]; 32];
            let mut sq_db = [Be32::default(); 2];
            let mut bf = [0u64; 8];
            // SAFETY: host buffers that outlive the ring; no device reads them.
            let mut sq = unsafe {
                SqRing::from_raw(
                    sq_buf.as_mut_ptr().cast(),
                    32,
                    sq_db.as_mut_ptr().add(1),
                    bf.as_mut_ptr().cast(),
                    0,
                    QPN,
                )
            };
            sq.bind_cq(&cq);
            for _ in 0..18 {
                sq.nop(CtrlFlags::CQ_UPDATE).finish();
            }
            // The device ran WQEs 0-7 and wrote one session of eight
            // requester CQEs: the title, then the mini-CQE array. The last
            // mini-CQE's byte count 0x0011_0000 and hash `QPN` read, at the
            // entry's end, as WQE counter 17, op_own REQ with owner 0, QP `QPN`.
            let title = Cqe64 {
                byte_cnt: Be32::new(8),
                sop_drop_qpn: Be32::new(QPN),
                wqe_counter: Be16::new(0),
                op_own: (CqeOpcode::REQ.to_raw() << 4)
                    | (crate::mlx5dv::completion::mini::CqeFormat::COMPRESSED.to_raw() << 2),
                ..Cqe64::default()
            };
            let mut minis = [MiniCqe::default(); 8];
            for (i, m) in minis.iter_mut().enumerate() {
                // `s_wqe_info`: WQE counter i, opcode NOP.
                m.info = [0, i as u8, 0, 0];
            }
            // As `s_wqe_info`: WQE counter 0 (refused anyway, see below).
            minis[7] = MiniCqe { info: QPN.to_be_bytes(), byte_cnt: Be32::new(0x0011_0000) };
            // Then WQE 7's completion again, written whole, at entry 8
            // (unexpanded, entries 2-7 stay invalid and it is not reached).
            let whole = Cqe64 {
                sop_drop_qpn: Be32::new(QPN),
                wqe_counter: Be16::new(7),
                op_own: CqeOpcode::REQ.to_raw() << 4,
                ..Cqe64::default()
            };
            // SAFETY: all are 64 plain bytes.
            unsafe {
                cq_buf[0] = std::mem::transmute::<Cqe64, [u64; 8]>(title);
                cq_buf[1] = std::mem::transmute::<[MiniCqe; 8], [u64; 8]>(minis);
                cq_buf[8] = std::mem::transmute::<Cqe64, [u64; 8]>(whole);
            }
            let mut got = [Completion::default(); 16];
            let n = cq.poll(&mut got);
            let mut taken = 0;
            for c in &got[..n] {
                taken += usize::from(sq.retire(c));
            }
            (n, taken, 32 - sq.available())
        };
        // What `cq_ring` gives a CQ made with `CqBuilder::mlx5_compression`.
        assert_eq!(
            retired_with(Some(CqeResFormat::Hash)),
            (9, 1, 10),
            "nine completions, the whole one taken, ten WQEs outstanding"
        );
        // The hole, as a view of that CQ without expansion saw it.
        assert_eq!(retired_with(None), (2, 2, 0), "unexpanded: WQEs 8-17 freed though the device never ran them");
    }

    /// B-3: with selective signalling a requester session's mini-CQEs name
    /// non-consecutive WQEs; each expanded completion carries its own
    /// mini-CQE's counter and opcode and says it was expanded, and
    /// `SqRing::retire` (and `DirectSq::retire`, which forwards to it)
    /// refuses it while a whole CQE is taken.
    #[test]
    fn b3_expanded_requester_completions_name_their_wqe_and_are_refused_by_retire() {
        use crate::mlx5dv::completion::cqe::{Cqe64, CqeOpcode};
        use crate::mlx5dv::completion::mini::{CqeFormat, CqeResFormat, MiniCqe};
        use crate::mlx5dv::queue::be::{Be16, Be32};
        use crate::mlx5dv::queue::seg::WqeOpcode;
        const QPN: u32 = 0x42;
        let mut cq_buf = vec![[0u64; 8]; 16];
        for e in cq_buf.iter_mut() {
            e[7] = 0xf1u64 << 56;
        }
        let mut cq_db = [Be32::default(); 2];
        let mut uar = [0u64; 8];
        // SAFETY: host buffers that outlive the ring, written only here (as
        // the device would) between polls; the buffer comes from a mutable pointer.
        let mut cq =
            unsafe { CqRing::from_raw(cq_buf.as_ptr().cast(), 16, 64, cq_db.as_mut_ptr(), uar.as_mut_ptr().cast(), 7) };
        // SAFETY: as above.
        unsafe { cq.set_compression(Some(CqeResFormat::Hash)) };
        let mut sq_buf = vec![[0u64; 8]; 32];
        let mut sq_db = [Be32::default(); 2];
        let mut bf = [0u64; 8];
        // SAFETY: host buffers that outlive the ring; no device reads them.
        let mut sq = unsafe {
            SqRing::from_raw(sq_buf.as_mut_ptr().cast(), 32, sq_db.as_mut_ptr().add(1), bf.as_mut_ptr().cast(), 0, QPN)
        };
        sq.bind_cq(&cq);
        // Ten NOPs; the device signals WQEs 1, 4 and 9 only.
        for i in 0..10 {
            let f = if [1, 4, 9].contains(&i) { CtrlFlags::CQ_UPDATE } else { CtrlFlags::empty() };
            sq.nop(f).finish();
        }
        let title = Cqe64 {
            byte_cnt: Be32::new(3),
            sop_drop_qpn: Be32::new(QPN),
            wqe_counter: Be16::new(1),
            op_own: (CqeOpcode::REQ.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2),
            ..Cqe64::default()
        };
        let mut minis = [MiniCqe::default(); 8];
        for (m, w) in minis.iter_mut().zip([1u8, 4, 9]) {
            m.info = [0, w, WqeOpcode::NOP.to_raw(), 0];
        }
        // SAFETY: both are 64 plain bytes.
        unsafe {
            cq_buf[0] = std::mem::transmute::<Cqe64, [u64; 8]>(title);
            cq_buf[1] = std::mem::transmute::<[MiniCqe; 8], [u64; 8]>(minis);
        }
        let mut got = [Completion::default(); 8];
        assert_eq!(cq.poll(&mut got), 3);
        let counters: Vec<u16> = got[..3].iter().map(|c| c.wqe_counter()).collect();
        assert_eq!(counters, [1, 4, 9], "each expanded completion names its own mini-CQE's WQE");
        for c in &got[..3] {
            assert!(c.expanded(), "{c:?}");
            assert_eq!(c.wqe_opcode(), WqeOpcode::NOP);
            assert!(!sq.retire(c), "an expanded requester completion is refused: {c:?}");
        }
        assert_eq!(sq.available(), 22, "nothing freed");
        // WQE 9's completion written whole: taken, all ten freed.
        let whole =
            Cqe64 { byte_cnt: Be32::new(0), wqe_counter: Be16::new(9), op_own: CqeOpcode::REQ.to_raw() << 4, ..title };
        // SAFETY: 64 plain bytes, entry 3 (owner 0 on lap 0).
        unsafe { cq_buf[3] = std::mem::transmute::<Cqe64, [u64; 8]>(whole) };
        assert_eq!(cq.poll(&mut got), 1);
        assert!(!got[0].expanded());
        assert!(sq.retire(&got[0]));
        assert_eq!(sq.available(), 32);
    }

    /// The limits a view gets from the QP's granted caps: the caps
    /// themselves, and a largest WQE that holds the longest typed WQE of the
    /// QP's type with a full payload.
    #[test]
    fn view_limits_follow_the_granted_caps() {
        let rc = limits_for(QpType::RC, &QpCaps::default().max_inline_data(60).max_send_sge(1));
        assert_eq!((rc.max_inline_data(), rc.max_send_sge()), (60, 1));
        // control 16 + remote address 16 + masked CAS 32 + inline 4+60 is
        // 128; a 32-byte extended masked CAS, 16 + 16 + 128 + data 16, is longer.
        assert_eq!(rc.max_wqe_bytes(), 192);
        let ud = limits_for(QpType::UD, &QpCaps::default().max_inline_data(0).max_send_sge(4));
        // control 16 + address vector 48 + four data segments 64 = 128.
        assert_eq!((ud.max_inline_data(), ud.max_send_sge(), ud.max_wqe_bytes()), (0, 4, 128));
        let dci = limits_for(QpType::DRIVER, &QpCaps::default().max_inline_data(28).max_send_sge(2));
        // 16 + address vector 48 + remote address and masked CAS 48 + 32 is
        // 144; the extended masked CAS with its DC address, 16 + 48 + 16 + 128 + 16, to 64s.
        assert_eq!(dci.max_wqe_bytes(), 256);
    }

    #[test]
    fn view_transport_follows_the_qp_type() {
        assert_eq!(transport_for(QpType::RC), SqTransport::Connected);
        assert_eq!(transport_for(QpType::UC), SqTransport::Connected);
        assert_eq!(transport_for(QpType::UD), SqTransport::Datagram);
        assert_eq!(transport_for(QpType::DRIVER), SqTransport::Datagram);
        assert_eq!(transport_for(QpType::XRC_SEND), SqTransport::Other);
        assert_eq!(transport_for(QpType::RAW_PACKET), SqTransport::RawPacket);
    }
}
