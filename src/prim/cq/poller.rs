//! The extended CQ poller (`ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll`).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::Cq;
use crate::bindings as ffi;
use crate::prim::cvalue::c_type;
use crate::prim::error::{Error, Result};

/// An extended CQ whose provider set the pass entries (what
/// `ibv_start_poll`, `ibv_next_poll` and `ibv_end_poll` call): checked once
/// at creation, so that a pass makes the same loads and calls as C's inline
/// functions, without a null check per call.
#[derive(Clone, Copy)]
pub(super) struct ExCq(NonNull<ffi::ibv_cq_ex>);

impl ExCq {
    /// `ptr` if its provider set all three pass entries.
    ///
    /// # Safety
    /// `ptr` must be a live extended CQ.
    pub(super) unsafe fn new(ptr: NonNull<ffi::ibv_cq_ex>) -> Option<ExCq> {
        // SAFETY: per the contract, `ptr` is live.
        let c = unsafe { ptr.as_ref() };
        (c.start_poll.is_some() && c.next_poll.is_some() && c.end_poll.is_some()).then_some(ExCq(ptr))
    }

    /// The view of a classic CQ: [`CLASSIC`], whose `start_poll` reports
    /// [`NOT_EXTENDED`], so that [`Cq::start_poll`] makes no check of its
    /// own before the provider's call, as C's `ibv_start_poll` makes none,
    /// and panics on a classic CQ in its failure path.
    pub(super) fn classic() -> ExCq {
        ExCq(NonNull::from(&CLASSIC.0))
    }

    /// Whether this is a classic CQ's view ([`ExCq::classic`]).
    pub(super) fn is_classic(self) -> bool {
        std::ptr::eq(self.ptr(), &CLASSIC.0)
    }

    fn ptr(self) -> *mut ffi::ibv_cq_ex {
        self.0.as_ptr()
    }

    /// # Safety
    /// The CQ must be live, with no pass open from this thread.
    #[inline]
    unsafe fn start(self, attr: &mut ffi::ibv_poll_cq_attr) -> std::ffi::c_int {
        // SAFETY: live CQ; the entry was checked non-null in `new`, and a
        // provider sets a CQ's entries once, when it creates it.
        unsafe { (*self.ptr()).start_poll.unwrap_unchecked()(self.ptr(), attr) }
    }

    /// # Safety
    /// A pass must be open on this live CQ.
    #[inline]
    unsafe fn next(self) -> std::ffi::c_int {
        // SAFETY: as in `start`.
        unsafe { (*self.ptr()).next_poll.unwrap_unchecked()(self.ptr()) }
    }

    /// # Safety
    /// A pass must be open on this live CQ; it is ended once.
    #[inline]
    unsafe fn end(self) {
        // SAFETY: as in `start`.
        unsafe { (*self.ptr()).end_poll.unwrap_unchecked()(self.ptr()) }
    }
}

/// What [`CLASSIC`]'s `start_poll` returns: not 0, `ENOENT`, a positive
/// errno nor -1, which the providers return.
const NOT_EXTENDED: std::ffi::c_int = std::ffi::c_int::MIN;

/// The `start_poll` entry of [`CLASSIC`].
extern "C" fn classic_start(_: *mut ffi::ibv_cq_ex, _: *mut ffi::ibv_poll_cq_attr) -> std::ffi::c_int {
    NOT_EXTENDED
}

/// The `next_poll` entry of [`CLASSIC`] (never called: no pass starts).
extern "C" fn classic_next(_: *mut ffi::ibv_cq_ex) -> std::ffi::c_int {
    libc::ENOENT
}

/// The `end_poll` entry of [`CLASSIC`] (never called: no pass starts).
extern "C" fn classic_end(_: *mut ffi::ibv_cq_ex) {}

/// The extended view every classic CQ has ([`ExCq::classic`]): no CQ, only
/// pass entries that touch nothing (the structure is never written).
struct Classic(ffi::ibv_cq_ex);

// SAFETY: never written, and its entries read nothing.
unsafe impl Sync for Classic {}

static CLASSIC: Classic = Classic({
    // SAFETY: all-zero bytes are a valid `ibv_cq_ex` (null pointers, absent
    // entries, plain integers and C lock words).
    let mut c: ffi::ibv_cq_ex = unsafe { std::mem::zeroed() };
    c.start_poll = Some(classic_start);
    c.next_poll = Some(classic_next);
    c.end_poll = Some(classic_end);
    c
});

c_type! {
    /// Fields an extended CQ reports (`enum ibv_create_cq_wc_flags`,
    /// `IBV_WC_EX_WITH_*`; `wc_flags` is a `uint64_t`). The empty set asks
    /// for no field beyond status, opcode and `wr_id`.
    #[doc(alias = "ibv_create_cq_wc_flags")]
    pub flags WcFlagsEx: u64, from enum ffi::ibv_create_cq_wc_flags {
        BYTE_LEN = IBV_WC_EX_WITH_BYTE_LEN "IBV_WC_EX_WITH_BYTE_LEN",
        IMM = IBV_WC_EX_WITH_IMM "IBV_WC_EX_WITH_IMM",
        QP_NUM = IBV_WC_EX_WITH_QP_NUM "IBV_WC_EX_WITH_QP_NUM",
        SRC_QP = IBV_WC_EX_WITH_SRC_QP "IBV_WC_EX_WITH_SRC_QP",
        SLID = IBV_WC_EX_WITH_SLID "IBV_WC_EX_WITH_SLID",
        SL = IBV_WC_EX_WITH_SL "IBV_WC_EX_WITH_SL",
        DLID_PATH_BITS = IBV_WC_EX_WITH_DLID_PATH_BITS "IBV_WC_EX_WITH_DLID_PATH_BITS",
        COMPLETION_TIMESTAMP = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP",
        CVLAN = IBV_WC_EX_WITH_CVLAN "IBV_WC_EX_WITH_CVLAN",
        FLOW_TAG = IBV_WC_EX_WITH_FLOW_TAG "IBV_WC_EX_WITH_FLOW_TAG",
        COMPLETION_TIMESTAMP_WALLCLOCK = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK",
        TM_INFO = IBV_WC_EX_WITH_TM_INFO "IBV_WC_EX_WITH_TM_INFO",
    }
}

impl WcFlagsEx {
    /// What a classic `ibv_wc` carries: byte length, immediate, QP numbers,
    /// SLID, SL, path bits (`IBV_WC_STANDARD_FLAGS`).
    #[doc(alias = "IBV_WC_STANDARD_FLAGS")]
    pub const STANDARD: WcFlagsEx = WcFlagsEx::from_bits_retain(ffi::IBV_WC_STANDARD_FLAGS.0 as u64);
}

/// An open polling pass over an extended CQ, positioned on a completion.
/// Ends (`ibv_end_poll`) when dropped or when [`Poller::advance`] finds no more.
///
/// ```no_run
/// # fn f(cq: &rrddmma::prim::Cq) -> rrddmma::prim::Result<()> {
/// let mut pass = cq.start_poll()?;
/// while let Some(p) = pass {
///     let wc = p.wc();
///     println!("{} {:?}", wc.wr_id(), wc.status());
///     pass = p.advance()?;
/// }
/// # Ok(()) }
/// ```
///
/// A completion cannot outlive its poller:
///
/// ```compile_fail
/// # fn f(cq: &rrddmma::prim::Cq) -> rrddmma::prim::Result<()> {
/// let p = cq.start_poll()?.unwrap();
/// let wc = p.wc();
/// drop(p);
/// println!("{:?}", wc.status());
/// # Ok(()) }
/// ```
///
/// nor the step it was read at:
///
/// ```compile_fail
/// # fn f(cq: &rrddmma::prim::Cq) -> rrddmma::prim::Result<()> {
/// let p = cq.start_poll()?.unwrap();
/// let wc = p.wc();
/// let next = p.advance()?;
/// println!("{:?}", wc.status());
/// # Ok(()) }
/// ```
pub struct Poller<'cq> {
    cq: &'cq Cq,
    ex: ExCq,
}

impl fmt::Debug for Poller<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poller").field("wr_id", &self.wc().wr_id()).finish()
    }
}

impl Cq {
    /// Starts a polling pass: `Ok(None)` when the CQ is empty, else a
    /// [`Poller`] on the first completion. No allocation. The provider holds
    /// the CQ's lock for the pass: starting a second pass on the same CQ
    /// from the same thread before the first ends deadlocks.
    ///
    /// # Panics
    /// If the CQ was not created extended ([`super::CqBuilder::extended`]);
    /// a CQ that compresses its CQEs never is
    /// ([`super::CqBuilder::mlx5_compression`]: poll it through
    /// `mlx5dv::obj::cq_ring`).
    #[inline]
    pub fn start_poll(&self) -> Result<Option<Poller<'_>>> {
        let ex = self.inner.ex;
        let mut attr = ffi::ibv_poll_cq_attr::default();
        // SAFETY: live extended CQ and its own entry, or a classic CQ's
        // view, whose entry touches nothing; `attr` is valid for the call.
        match unsafe { ex.start(&mut attr) } {
            0 => Ok(Some(Poller { cq: self, ex })),
            libc::ENOENT => Ok(None),
            _ if ex.is_classic() => not_extended(self.compression()),
            rc if rc < 0 => Err(Error::poll_failed("ibv_start_poll")),
            rc => Err(Error::code("ibv_start_poll", rc)),
        }
    }

    /// The fields this CQ's completions carry.
    pub fn wc_flags(&self) -> WcFlagsEx {
        self.inner.wc_flags
    }
}

/// The panic of [`Cq::start_poll`] on a classic CQ.
#[cold]
#[inline(never)]
fn not_extended(compression: Option<super::CqeResFormat>) -> ! {
    if let Some(f) = compression {
        panic!(
            "start_poll on a CQ that compresses its CQEs in {}: libmlx5 does not expand compressed sessions; poll it \
             through mlx5dv::obj::cq_ring",
            f.name()
        );
    }
    panic!("start_poll on a classic CQ: create it with CqBuilder::extended")
}

impl<'cq> Poller<'cq> {
    /// The current completion.
    #[inline]
    pub fn wc(&self) -> ExWc<'_> {
        ExWc { ex: self.ex.0, flags: self.cq.inner.wc_flags, _poller: PhantomData }
    }

    /// Moves to the next completion; `Ok(None)` (and the pass ended) when
    /// there is none.
    #[inline]
    pub fn advance(self) -> Result<Option<Poller<'cq>>> {
        // SAFETY: a pass is open on this live CQ; its own entry.
        let rc = unsafe { self.ex.next() };
        match rc {
            0 => Ok(Some(self)),
            libc::ENOENT if self.cq.inner.next_poll_ends => {
                // rdma-core < 55 rxe already ended the pass (consumer index
                // stored, lock released); `end_poll` would advance twice.
                std::mem::forget(self);
                Ok(None)
            }
            libc::ENOENT => Ok(None),
            rc => {
                // The error is made after the pass ends (`drop`); `rc` waits
                // for it in memory, not in a register that the path that
                // polls would save and restore.
                let mut kept = rc;
                std::hint::black_box(&mut kept);
                drop(self);
                Err(if kept < 0 { Error::poll_failed("ibv_next_poll") } else { Error::code("ibv_next_poll", kept) })
            }
        }
    }
}

impl Drop for Poller<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a pass is open on this live CQ; it is ended once, through
        // the CQ's own entry.
        unsafe { self.ex.end() }
    }
}

/// The completion a [`Poller`] is on; borrows the poller, so it cannot be
/// used after the pass moves on.
#[derive(Clone, Copy)]
pub struct ExWc<'p> {
    ex: NonNull<ffi::ibv_cq_ex>,
    flags: WcFlagsEx,
    _poller: PhantomData<&'p Poller<'p>>,
}

impl fmt::Debug for ExWc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExWc").field("wr_id", &self.wr_id()).field("status", &self.status()).finish()
    }
}

macro_rules! read {
    ($($(#[$m:meta])* $name:ident($flag:ident) -> $t:ty = $f:ident;)*) => {$(
        $(#[$m])*
        ///
        /// # Panics
        #[doc = concat!("If the CQ was created without `WcFlagsEx::", stringify!($flag), "`.")]
        #[inline]
        pub fn $name(&self) -> $t {
            assert!(
                self.flags.contains(WcFlagsEx::$flag),
                concat!("this CQ does not report ", stringify!($name), ": create it with WcFlagsEx::", stringify!($flag))
            );
            // SAFETY: the pass is open (the borrow of the poller) and the CQ
            // was created with the field.
            unsafe { ffi::$f(self.ex.as_ptr()) }
        }
    )*};
}

impl ExWc<'_> {
    /// The caller's `wr_id`.
    #[inline]
    pub fn wr_id(&self) -> u64 {
        // SAFETY: set by start/next poll on the live CQ.
        unsafe { (*self.ex.as_ptr()).wr_id }
    }

    /// Completion status; any value is representable.
    #[inline]
    pub fn status(&self) -> crate::prim::WcStatus {
        // SAFETY: as above.
        unsafe { (*self.ex.as_ptr()).status }.into()
    }

    /// The operation that completed.
    #[inline]
    pub fn opcode(&self) -> crate::prim::WcOpcode {
        // SAFETY: the pass is open; every extended CQ reports the opcode.
        unsafe { ffi::ibv_wc_read_opcode(self.ex.as_ptr()) }.into()
    }

    /// Vendor error syndrome.
    #[inline]
    pub fn vendor_err(&self) -> u32 {
        // SAFETY: as above.
        unsafe { ffi::ibv_wc_read_vendor_err(self.ex.as_ptr()) }
    }

    /// `IBV_WC_*` flags.
    #[inline]
    pub fn wc_flags(&self) -> u32 {
        // SAFETY: as above.
        unsafe { ffi::ibv_wc_read_wc_flags(self.ex.as_ptr()) }
    }

    /// Immediate data in host order, if the completion carries it.
    ///
    /// # Panics
    /// If the CQ was created without `WcFlagsEx::IMM`.
    #[inline]
    pub fn imm(&self) -> Option<u32> {
        assert!(self.flags.contains(WcFlagsEx::IMM), "this CQ does not report imm: create it with WcFlagsEx::IMM");
        let with_imm = self.wc_flags() & ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
        // SAFETY: as above, with the field requested.
        with_imm.then(|| u32::from_be(unsafe { ffi::ibv_wc_read_imm_data(self.ex.as_ptr()) }))
    }

    read! {
        /// Bytes received.
        byte_len(BYTE_LEN) -> u32 = ibv_wc_read_byte_len;
        /// Local QP number.
        qp_num(QP_NUM) -> u32 = ibv_wc_read_qp_num;
        /// Remote QP number (UD).
        src_qp(SRC_QP) -> u32 = ibv_wc_read_src_qp;
        /// Source LID.
        slid(SLID) -> u32 = ibv_wc_read_slid;
        /// Service level.
        sl(SL) -> u8 = ibv_wc_read_sl;
        /// Raw hardware completion timestamp (device clock ticks).
        completion_ts(COMPLETION_TIMESTAMP) -> u64 = ibv_wc_read_completion_ts;
        /// Completion time in nanoseconds of the wall clock.
        completion_wallclock_ns(COMPLETION_TIMESTAMP_WALLCLOCK) -> u64 = ibv_wc_read_completion_wallclock_ns;
    }

    /// Tag-matching information of a receive on a tag-matching SRQ
    /// (`ibv_wc_read_tm_info` with the `IBV_WC_TM_*` flags): `None` unless
    /// the completion is one (`IBV_WC_TM_RECV`, `IBV_WC_TM_NO_TAG`, or a
    /// receive flagged `IBV_WC_TM_MATCH` / `IBV_WC_TM_DATA_VALID` /
    /// `IBV_WC_TM_SYNC_REQ`).
    ///
    /// # Panics
    /// If the CQ was created without `WcFlagsEx::TM_INFO`.
    #[inline]
    pub fn tm_info(&self) -> Option<TmInfo> {
        assert!(
            self.flags.contains(WcFlagsEx::TM_INFO),
            "this CQ does not report tm_info: create it with WcFlagsEx::TM_INFO"
        );
        let (op, flags) = (self.opcode(), self.wc_flags());
        if !TmInfo::reported(op, flags) {
            return None;
        }
        let mut info = ffi::ibv_wc_tm_info { tag: 0, priv_: 0 };
        // SAFETY: the pass is open and the CQ was created with the field;
        // `info` is valid for writes.
        unsafe { ffi::ibv_wc_read_tm_info(self.ex.as_ptr(), &mut info) };
        TmInfo::of(op, flags, info.tag, info.priv_)
    }
}

/// What [`ExWc::tm_info`] reads of a tag-matching receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TmInfo {
    /// The message's tag.
    pub tag: u64,
    /// The application context the sender's header carried (`priv`).
    pub app_ctx: u32,
    /// The message matched a tag in the device list (`IBV_WC_TM_MATCH`);
    /// false for an unexpected message, received into the SRQ's ordinary
    /// receives.
    pub matched: bool,
    /// The data landed in the matched buffer (`IBV_WC_TM_DATA_VALID`); a
    /// rendezvous match without it still has its data to be read.
    pub data_valid: bool,
    /// The device asks software for a sync (`IBV_WC_TM_SYNC_REQ`).
    pub sync_req: bool,
}

impl TmInfo {
    /// Whether a completion of `opcode` with the raw `wc_flags` carries
    /// tag-matching information: `IBV_WC_TM_RECV`, `IBV_WC_TM_NO_TAG`, or
    /// any completion flagged `IBV_WC_TM_MATCH` / `IBV_WC_TM_DATA_VALID` /
    /// `IBV_WC_TM_SYNC_REQ`.
    pub fn reported(opcode: crate::prim::WcOpcode, wc_flags: u32) -> bool {
        let tm_flags = ffi::ibv_wc_flags::IBV_WC_TM_SYNC_REQ.0
            | ffi::ibv_wc_flags::IBV_WC_TM_MATCH.0
            | ffi::ibv_wc_flags::IBV_WC_TM_DATA_VALID.0;
        wc_flags & tm_flags != 0
            || opcode == crate::prim::WcOpcode::TM_RECV
            || opcode == crate::prim::WcOpcode::TM_NO_TAG
    }

    /// What [`ExWc::tm_info`] reports for a completion of `opcode` with
    /// the raw `wc_flags` and the tag and application context
    /// `ibv_wc_read_tm_info` gave (`None` unless [`TmInfo::reported`]); the
    /// direct path's [`TmCompletion::tm_info`](crate::mlx5dv::tm_wqe::TmCompletion::tm_info)
    /// reports through it too.
    pub fn of(opcode: crate::prim::WcOpcode, wc_flags: u32, tag: u64, app_ctx: u32) -> Option<TmInfo> {
        TmInfo::reported(opcode, wc_flags).then_some(TmInfo {
            tag,
            app_ctx,
            matched: wc_flags & ffi::ibv_wc_flags::IBV_WC_TM_MATCH.0 != 0,
            data_valid: wc_flags & ffi::ibv_wc_flags::IBV_WC_TM_DATA_VALID.0 != 0,
            sync_req: wc_flags & ffi::ibv_wc_flags::IBV_WC_TM_SYNC_REQ.0 != 0,
        })
    }
}
