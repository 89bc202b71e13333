//! The extended post API (`ibv_wr_start` / `ibv_wr_*` / `ibv_wr_complete`).
//!
//! A [`WrBatch`] takes the same [`SendWr`] values as the classic path and
//! writes each with the `ibv_wr_*` calls; [`WrBatch::complete`] rings one
//! doorbell for all of them. On rxe of rdma-core < 64, whose list setters
//! compute wrong lengths, lists are rewritten into forms it gets right:
//! inline buffers are gathered into one (on the stack), and entries of unequal
//! length are cut into equal pieces.

use std::fmt;
use std::ptr::NonNull;

use super::Qp;
use crate::bindings as ffi;
use crate::prim::cvalue::c_type;
use crate::prim::error::{Error, Result};
use crate::prim::quirks::Quirks;
use crate::prim::wr::{RemoteAddr, SendWr, Sge};
use crate::prim::Mw;
use crate::prim::{AccessFlags, Mr, MwType, QpCaps, QpType, RemoteMr, SendFlags};

c_type! {
    /// Operations an extended QP may post (`enum ibv_qp_create_send_ops_flags`,
    /// `IBV_QP_EX_WITH_*`; `send_ops_flags` is a `uint64_t`).
    #[doc(alias = "ibv_qp_create_send_ops_flags")]
    pub flags SendOps: u64, from enum ffi::ibv_qp_create_send_ops_flags {
        RDMA_WRITE = IBV_QP_EX_WITH_RDMA_WRITE "IBV_QP_EX_WITH_RDMA_WRITE",
        RDMA_WRITE_WITH_IMM = IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM "IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM",
        SEND = IBV_QP_EX_WITH_SEND "IBV_QP_EX_WITH_SEND",
        SEND_WITH_IMM = IBV_QP_EX_WITH_SEND_WITH_IMM "IBV_QP_EX_WITH_SEND_WITH_IMM",
        RDMA_READ = IBV_QP_EX_WITH_RDMA_READ "IBV_QP_EX_WITH_RDMA_READ",
        ATOMIC_CMP_AND_SWP = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP "IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP",
        ATOMIC_FETCH_AND_ADD = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD "IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD",
        LOCAL_INV = IBV_QP_EX_WITH_LOCAL_INV "IBV_QP_EX_WITH_LOCAL_INV",
        BIND_MW = IBV_QP_EX_WITH_BIND_MW "IBV_QP_EX_WITH_BIND_MW",
        SEND_WITH_INV = IBV_QP_EX_WITH_SEND_WITH_INV "IBV_QP_EX_WITH_SEND_WITH_INV",
        TSO = IBV_QP_EX_WITH_TSO "IBV_QP_EX_WITH_TSO",
        FLUSH = IBV_QP_EX_WITH_FLUSH "IBV_QP_EX_WITH_FLUSH",
        ATOMIC_WRITE = IBV_QP_EX_WITH_ATOMIC_WRITE "IBV_QP_EX_WITH_ATOMIC_WRITE",
    }
}

impl SendOps {
    /// SEND, WRITE and READ with and without immediate, and both atomics.
    pub const BASIC: SendOps = SendOps::RDMA_WRITE
        .union(SendOps::RDMA_WRITE_WITH_IMM)
        .union(SendOps::SEND)
        .union(SendOps::SEND_WITH_IMM)
        .union(SendOps::RDMA_READ)
        .union(SendOps::ATOMIC_CMP_AND_SWP)
        .union(SendOps::ATOMIC_FETCH_AND_ADD);
}

/// `IB_UVERBS_DEVICE_ATOMIC_WRITE` (the kernel's `ib_user_verbs.h`): the
/// bit of `ibv_device_attr_ex::device_cap_flags_ex` by which a device says
/// it executes ATOMIC WRITE (rxe since Linux 6.2). rdma-core passes the
/// kernel's flags through without naming this one.
pub(crate) const DEVICE_ATOMIC_WRITE: u64 = 1 << 40;

/// Most entries a rewritten list may have (rxe's own limit is 32).
const MAX_PIECES: usize = 32;
/// Largest inline payload gathered on the stack for the rxe workaround.
const MAX_GATHER: usize = 4096;

/// An open extended-API batch on a QP. Dropped without
/// [`WrBatch::complete`], it is aborted (`ibv_wr_abort`): nothing is posted.
pub struct WrBatch<'q> {
    qp: &'q BatchQp,
    ex: NonNull<ffi::ibv_qp_ex>,
}

impl fmt::Debug for WrBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: a live extended QP, or the stand-in (zeroed); a plain read.
        let qpn = unsafe { self.ex.as_ref() }.qp_base.qp_num;
        let qpn = (!is_classic(self.ex)).then_some(qpn);
        f.debug_struct("WrBatch").field("qpn", &qpn).finish()
    }
}

/// What a [`WrBatch`] reads of its QP: the extended view (`ibv_qp_ex`) and
/// the type, quirks and capacities its checks use. Every [`Qp`] holds one.
/// Made alone ([`BatchQp::from_raw`]) only to drive a provider's
/// `ibv_qp_ex` that no [`Qp`] owns (the libmlx5 differential harness).
#[doc(hidden)]
#[derive(Debug)]
pub struct BatchQp {
    /// The extended view, for QPs created with send ops; else [`classic`].
    pub(super) ex: NonNull<ffi::ibv_qp_ex>,
    /// Created with [`SendOps::FLUSH`]: the provider's `ibv_qp_ex` has
    /// `wr_flush` (an older one refuses the flag).
    pub(super) flush: bool,
    pub(super) quirks: Quirks,
    pub(super) qp_type: QpType,
    pub(super) caps: QpCaps,
}

impl BatchQp {
    /// The batch target of a provider QP made outside this crate: its
    /// extended view `ex`, its type, and the capacities it was made with
    /// (`max_inline_data` and `max_send_sge` bound what a batch accepts).
    /// No quirks; no FLUSH.
    ///
    /// # Safety
    /// `ex` is the provider's live `ibv_qp_ex` of a QP of `qp_type` whose
    /// entries `wr_start`, `wr_complete`, `wr_abort` and `wr_set_sge` are
    /// set, as are those of every operation a batch on it is given; it
    /// outlives the value and every batch opened on it, and nothing else
    /// posts to it while a batch is open.
    #[doc(hidden)]
    pub unsafe fn from_raw(ex: NonNull<ffi::ibv_qp_ex>, qp_type: QpType, caps: QpCaps) -> BatchQp {
        BatchQp { ex, flush: false, quirks: Quirks::default(), qp_type, caps }
    }
}

/// What [`CLASSIC`]'s `wr_complete` returns: not 0 nor an errno, which the
/// providers return.
const NOT_EXTENDED: std::ffi::c_int = std::ffi::c_int::MIN;

/// The `wr_start` and `wr_abort` entries of [`CLASSIC`].
extern "C" fn classic_nothing(_: *mut ffi::ibv_qp_ex) {}

/// The `wr_complete` entry of [`CLASSIC`].
extern "C" fn classic_complete(_: *mut ffi::ibv_qp_ex) -> std::ffi::c_int {
    NOT_EXTENDED
}

/// The `wr_set_sge` entry of [`CLASSIC`].
extern "C" fn classic_set_sge(_: *mut ffi::ibv_qp_ex, _: u32, _: u64, _: u32) {}

/// The extended view of every QP made without send ops ([`classic`]): no
/// QP, only the entries every batch calls, which touch nothing, and
/// `wr_complete` reporting [`NOT_EXTENDED`]. So [`Qp::wr_batch`] calls
/// `wr_start` without a check of its own, as C's `ibv_wr_start` does, and
/// a batch on such a QP panics when it is posted ([`WrBatch::complete`],
/// [`WrBatch::post`] and the other checked methods). The structure is never
/// written: those methods check for it first, and the one-entry methods'
/// contract excludes such a QP (debug builds check it first).
struct Classic(ffi::ibv_qp_ex);

// SAFETY: never written, and its entries read nothing.
unsafe impl Sync for Classic {}

static CLASSIC: Classic = Classic({
    // SAFETY: all-zero bytes are a valid `ibv_qp_ex` (null pointers, absent
    // entries, plain integers and C lock words).
    let mut q: ffi::ibv_qp_ex = unsafe { std::mem::zeroed() };
    q.wr_start = Some(classic_nothing);
    q.wr_complete = Some(classic_complete);
    q.wr_abort = Some(classic_nothing);
    q.wr_set_sge = Some(classic_set_sge);
    q
});

/// The extended view of a QP made without send ops.
pub(super) fn classic() -> NonNull<ffi::ibv_qp_ex> {
    NonNull::from(&CLASSIC.0)
}

/// Whether `ex` is [`classic`]'s.
pub(super) fn is_classic(ex: NonNull<ffi::ibv_qp_ex>) -> bool {
    std::ptr::eq(ex.as_ptr(), &CLASSIC.0)
}

/// The panic of a batch on a QP made without send ops.
#[cold]
#[inline(never)]
fn not_extended() -> ! {
    panic!("wr_batch on a QP without send_ops: create it with QpBuilder::send_ops")
}

/// Whether the provider set the entries every batch calls (`wr_start`,
/// `wr_complete`, `wr_abort`) and the data setters every request ends
/// with (`wr_set_sge`, and `wr_set_sge_list`, which also ends a request
/// without entries):
/// checked once when the QP is made, so that the batch calls them as C's
/// inline `ibv_wr_*` functions do, without a null check per call.
#[cfg(not(rrddmma_mlnx_ofed4))]
pub(super) fn batch_entries_set(ex: NonNull<ffi::ibv_qp_ex>) -> bool {
    // SAFETY: a live extended QP's function table (plain reads).
    let q = unsafe { ex.as_ref() };
    q.wr_start.is_some()
        && q.wr_complete.is_some()
        && q.wr_abort.is_some()
        && q.wr_set_sge.is_some()
        && q.wr_set_sge_list.is_some()
}

/// Whether the provider set the entry of each operation in `ops` that a
/// one-entry method of [`WrBatch`] calls without a check (and `wr_flush`,
/// for [`SendOps::FLUSH`]): checked once when the QP is made with those
/// send ops.
#[cfg(not(rrddmma_mlnx_ofed4))]
pub(super) fn op_entries_set(ex: NonNull<ffi::ibv_qp_ex>, ops: SendOps) -> bool {
    // SAFETY: a live extended QP's function table (plain reads).
    let q = unsafe { ex.as_ref() };
    [
        (SendOps::RDMA_WRITE, q.wr_rdma_write.is_some()),
        (SendOps::RDMA_READ, q.wr_rdma_read.is_some()),
        (SendOps::SEND, q.wr_send.is_some()),
        (SendOps::ATOMIC_FETCH_AND_ADD, q.wr_atomic_fetch_add.is_some()),
        (SendOps::ATOMIC_CMP_AND_SWP, q.wr_atomic_cmp_swp.is_some()),
    ]
    .iter()
    .all(|&(op, set)| set || !ops.contains(op))
        && (!ops.contains(SendOps::FLUSH) || {
            // SAFETY: the provider created this QP with
            // `IBV_QP_EX_WITH_FLUSH`, so its structure has `wr_flush` (an
            // older provider refuses the flag); a plain read.
            unsafe { ex.cast::<ffi::ibv_qp_ex_flush>().as_ref() }.wr_flush.is_some()
        })
}

/// Calls entry `$field` of the extended QP `$q`, set by the provider
/// (checked by [`batch_entries_set`] when the QP was made).
macro_rules! entry {
    ($q:expr, $field:ident ( $($arg:expr),* )) => {{
        let q: *mut ffi::ibv_qp_ex = $q;
        // SAFETY: `Qp` keeps an extended view only when
        // `batch_entries_set` held; the table does not change afterwards.
        let f = unsafe { (*q).$field.unwrap_unchecked() };
        // SAFETY: the caller's (an open batch on a live extended QP).
        unsafe { f(q $(, $arg)*) }
    }};
}

/// Calls the operation entry `$field` of the extended QP `$q`, which the
/// caller promises was created with `SendOps::$op` (whose entry
/// [`op_entries_set`] checked); debug builds check the entry.
macro_rules! op_entry {
    ($q:expr, $op:ident, $field:ident ( $($arg:expr),* )) => {{
        let q: *mut ffi::ibv_qp_ex = $q;
        // SAFETY: a live extended QP; a plain function-pointer field.
        let f = unsafe { (*q).$field };
        debug_assert!(
            f.is_some(),
            concat!(
                "the provider left `", stringify!($field), "` unset: create the QP with SendOps::",
                stringify!($op), " to use this method"
            )
        );
        // SAFETY: the caller's contract: the QP was made with the
        // operation, whose entry `QpBuilder::build` found set.
        let f = unsafe { f.unwrap_unchecked() };
        // SAFETY: the caller's (an open batch on a live extended QP).
        unsafe { f(q $(, $arg)*) }
    }};
}

impl Qp {
    /// Opens a batch of the extended post API (`ibv_wr_start`).
    ///
    /// # Panics
    /// On a QP not created with [`super::QpBuilder::send_ops`] (a
    /// programming error): when the batch is posted ([`WrBatch::complete`])
    /// or a request is added with [`WrBatch::post`], [`WrBatch::bind_mw_at`],
    /// [`WrBatch::local_inv`], [`WrBatch::send_inv`],
    /// [`WrBatch::atomic_write`] or [`WrBatch::flush`]. The one-entry methods
    /// ([`WrBatch::rdma_write`] and the others) require the operation's send
    /// op, which such a QP lacks.
    ///
    /// # Safety
    /// As [`Qp::post_send`], for every request added to the batch: their
    /// memory must stay registered, alive and untouched until completion.
    #[inline]
    pub unsafe fn wr_batch(&self) -> WrBatch<'_> {
        let ex = self.batch.ex;
        // (a live extended QP, or the view of one without send ops, whose
        // entry touches nothing)
        entry!(ex.as_ptr(), wr_start());
        WrBatch { qp: &self.batch, ex }
    }
}

impl<'q> WrBatch<'q> {
    /// The name of the QP's device, for a refusal.
    #[cold]
    fn device(&self) -> String {
        // SAFETY: a live extended QP points to its live context.
        unsafe { crate::prim::unsupported::device_name((*self.ex.as_ptr()).qp_base.context) }
    }

    /// Opens a batch (`ibv_wr_start`) on a provider QP that no [`Qp`]
    /// owns: the libmlx5 differential harness drives libmlx5's entries on
    /// ordinary memory with it.
    ///
    /// # Safety
    /// As [`BatchQp::from_raw`], and as [`Qp::wr_batch`] for every request
    /// added.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn from_raw(qp: &'q BatchQp) -> WrBatch<'q> {
        // (the caller's: a live extended QP with its batch entries set)
        entry!(qp.ex.as_ptr(), wr_start());
        WrBatch { qp, ex: qp.ex }
    }
}

impl WrBatch<'_> {
    /// Adds a request: its opcode, `wr_id`, flags, remote address or UD
    /// destination, and entries (inline when the request says so).
    ///
    /// A request this QP cannot take is refused here, leaving the batch as it
    /// was; errors the provider records surface at [`WrBatch::complete`].
    /// On mlx5 an open batch holds the send queue's lock: do not post to the
    /// same QP by other means on this thread until it is completed or dropped.
    ///
    /// # Panics
    /// If a request on a UD QP has no destination ([`SendWr::ud`]).
    ///
    /// # Safety
    /// As [`Qp::post_send`], for `wr`: its entries name memory of this
    /// process, registered with their keys, alive and untouched until the
    /// request's completion. Inline entries are also read by the CPU here
    /// (the whole list, on providers whose inline-list entry point this
    /// crate works around), so they must be readable now. An [`Sge`] from
    /// [`Mr::sge`](crate::prim::Mr::sge) names registered memory; one from
    /// [`Sge::from_raw`](crate::prim::Sge::from_raw) is only what the caller
    /// says it is.
    ///
    /// [`Sge`]: crate::prim::Sge
    #[inline]
    pub unsafe fn post(&mut self, wr: &SendWr<'_>) -> Result<()> {
        let ud = self.qp.qp_type == QpType::UD;
        let xrc = self.qp.qp_type == QpType::XRC_SEND;
        self.post_with(wr, |q| {
            if xrc {
                // SAFETY: an open batch with an operation just started; the
                // SRQ number is the one `SendWr::xrc_srqn` set (plain data).
                unsafe { ffi::ibv_wr_set_xrc_srqn(q, wr.as_raw().qp_type.xrc.remote_srqn) };
            }
            if ud {
                // SAFETY: an open batch with an operation just started; the
                // UD members are the ones `SendWr::ud` set (plain data).
                unsafe {
                    let ud = wr.as_raw().wr.ud;
                    ffi::ibv_wr_set_ud_addr(q, ud.ah, ud.remote_qpn, ud.remote_qkey);
                }
            }
        })
    }

    /// As [`WrBatch::post`], with `address` called between the operation and
    /// its data (where `ibv_wr_set_ud_addr` / `mlx5dv_wr_set_dc_addr` go).
    #[inline]
    pub(crate) fn post_with(&mut self, wr: &SendWr<'_>, address: impl FnOnce(*mut ffi::ibv_qp_ex)) -> Result<()> {
        use ffi::ibv_wr_opcode as O;
        self.require_extended();
        let raw = wr.as_raw();
        let q = self.ex.as_ptr();
        let inline = SendFlags::from_bits_retain(raw.send_flags).contains(SendFlags::INLINE);
        let n = usize::try_from(raw.num_sge).unwrap_or(0);
        let sges: &[Sge] = if n == 0 {
            &[]
        } else {
            // SAFETY: `SendWr` points at `num_sge` borrowed `Sge`s (same layout as `ibv_sge`).
            unsafe { std::slice::from_raw_parts(raw.sg_list.cast::<Sge>(), n) }
        };
        // Everything that can refuse the request is checked before the
        // operation starts, so that a refusal leaves the batch as it was.
        self.validate(raw, inline, sges)?;
        // SAFETY: an open batch on a live extended QP; the union members read
        // are the ones the opcode uses; the provider copies everything now.
        unsafe {
            (*q).wr_id = raw.wr_id;
            // IBV_SEND_INLINE stays set: rxe's kernel side reads the payload
            // from the WQE only when it sees the flag; mlx5 ignores it here.
            (*q).wr_flags = raw.send_flags;
            let imm = raw.__bindgen_anon_1.imm_data;
            let rdma = raw.wr.rdma;
            let atomic = raw.wr.atomic;
            match raw.opcode {
                O::IBV_WR_RDMA_WRITE => ffi::ibv_wr_rdma_write(q, rdma.rkey, rdma.remote_addr),
                O::IBV_WR_RDMA_WRITE_WITH_IMM => ffi::ibv_wr_rdma_write_imm(q, rdma.rkey, rdma.remote_addr, imm),
                O::IBV_WR_SEND => ffi::ibv_wr_send(q),
                O::IBV_WR_SEND_WITH_IMM => ffi::ibv_wr_send_imm(q, imm),
                O::IBV_WR_SEND_WITH_INV => ffi::ibv_wr_send_inv(q, raw.__bindgen_anon_1.invalidate_rkey),
                O::IBV_WR_RDMA_READ => ffi::ibv_wr_rdma_read(q, rdma.rkey, rdma.remote_addr),
                O::IBV_WR_ATOMIC_CMP_AND_SWP => {
                    ffi::ibv_wr_atomic_cmp_swp(q, atomic.rkey, atomic.remote_addr, atomic.compare_add, atomic.swap)
                }
                O::IBV_WR_ATOMIC_FETCH_AND_ADD => {
                    ffi::ibv_wr_atomic_fetch_add(q, atomic.rkey, atomic.remote_addr, atomic.compare_add)
                }
                other => panic!("opcode {} has no SendWr constructor", other.0),
            }
        }
        address(q);
        if inline {
            self.set_inline(sges)
        } else {
            self.set_sges(sges)
        }
    }

    /// The checks of [`WrBatch::post`], before anything is written.
    fn validate(&self, raw: &ffi::ibv_send_wr, inline: bool, sges: &[Sge]) -> Result<()> {
        use ffi::ibv_wr_opcode as O;
        if self.qp.qp_type == QpType::UD {
            if !matches!(raw.opcode, O::IBV_WR_SEND | O::IBV_WR_SEND_WITH_IMM) {
                return Err(Error::Verbs { op: "ibv_wr_start", errno: libc::EINVAL });
            }
            // SAFETY: plain data; zero unless `SendWr::ud` set it.
            let ah = unsafe { raw.wr.ud.ah };
            assert!(
                !ah.is_null(),
                "a request on a UD QP needs its destination: SendWr::ud(ah, remote_qpn, remote_qkey)"
            );
        }
        let total: usize = sges.iter().map(|s| s.len() as usize).sum();
        let list = sges.len() > 1;
        let quirk = self.qp.quirks.rxe_list_lengths;
        let nospc = |op| Err(Error::Verbs { op, errno: libc::ENOSPC });
        if inline {
            if total > self.qp.caps.max_inline_data as usize || (quirk && list && total > MAX_GATHER) {
                return nospc("ibv_wr_set_inline_data");
            }
            if !quirk && sges.len() > MAX_PIECES {
                return nospc("ibv_wr_set_inline_data_list");
            }
        } else if quirk && list && sges.iter().any(|s| s.len() != sges[0].len()) {
            let g = sges.iter().fold(0u32, |g, s| gcd(g, s.len()));
            let pieces = if g == 0 { usize::MAX } else { total / g as usize };
            if pieces > MAX_PIECES || pieces > self.qp.caps.max_send_sge as usize {
                return Err(Error::unsupported(
                    "ibv_wr_set_sge_list",
                    &crate::prim::unsupported::SGE_UNEQUAL,
                    &self.device(),
                    "before 64",
                ));
            }
        }
        Ok(())
    }

    fn set_inline(&mut self, sges: &[Sge]) -> Result<()> {
        let q = self.ex.as_ptr();
        match sges {
            // No entries: not inline, as for `ibv_post_send` (mlx5 chooses
            // BlueFlame by it).
            [] => self.set_sges(sges),
            [one] => {
                // SAFETY: open batch; the payload is copied now.
                unsafe { ffi::ibv_wr_set_inline_data(q, one.addr() as *mut _, one.len() as usize) };
                Ok(())
            }
            many if self.qp.quirks.rxe_list_lengths => {
                // Gather into one buffer: the provider's list setter posts length 0.
                let mut buf = [0u8; MAX_GATHER];
                let mut at = 0;
                for s in many {
                    let len = s.len() as usize;
                    let dst = buf
                        .get_mut(at..at + len)
                        .ok_or(Error::Verbs { op: "ibv_wr_set_inline_data", errno: libc::ENOSPC })?;
                    // SAFETY: the caller's inline source: `len` readable bytes at `addr`.
                    dst.copy_from_slice(unsafe { std::slice::from_raw_parts(s.addr() as *const u8, len) });
                    at += len;
                }
                // SAFETY: open batch; the payload is copied now.
                unsafe { ffi::ibv_wr_set_inline_data(q, buf.as_mut_ptr().cast(), at) };
                Ok(())
            }
            many => {
                let mut bufs = [ffi::ibv_data_buf { addr: std::ptr::null_mut(), length: 0 }; MAX_PIECES];
                let bufs = bufs
                    .get_mut(..many.len())
                    .ok_or(Error::Verbs { op: "ibv_wr_set_inline_data_list", errno: libc::EINVAL })?;
                for (b, s) in bufs.iter_mut().zip(many) {
                    *b = ffi::ibv_data_buf { addr: s.addr() as *mut _, length: s.len() as usize };
                }
                // SAFETY: open batch; the payload is copied now.
                unsafe { ffi::ibv_wr_set_inline_data_list(q, bufs.len(), bufs.as_ptr()) };
                Ok(())
            }
        }
    }

    fn set_sges(&mut self, sges: &[Sge]) -> Result<()> {
        let q = self.ex.as_ptr();
        match sges {
            [] => {
                // A data setter ends every request: mlx5 finishes the WQE
                // there (without one, the next request overwrote it).
                // SAFETY: open batch; an empty list (never read).
                unsafe { ffi::ibv_wr_set_sge_list(q, 0, std::ptr::NonNull::dangling().as_ptr()) };
                Ok(())
            }
            [one] => {
                // (open batch; the entry is copied now)
                entry!(q, wr_set_sge(one.lkey(), one.addr(), one.len()));
                Ok(())
            }
            many if self.qp.quirks.rxe_list_lengths && many.iter().any(|s| s.len() != many[0].len()) => {
                // The provider takes the length as count × first length: cut
                // the entries into equal pieces of their greatest common divisor.
                let g = many.iter().fold(0u32, |g, s| gcd(g, s.len()));
                let total: u64 = many.iter().map(|s| u64::from(s.len())).sum();
                let pieces = usize::try_from(total / u64::from(g.max(1))).unwrap_or(usize::MAX);
                if g == 0 || pieces > MAX_PIECES || pieces > self.qp.caps.max_send_sge as usize {
                    return Err(Error::unsupported(
                        "ibv_wr_set_sge_list",
                        &crate::prim::unsupported::SGE_UNEQUAL,
                        &self.device(),
                        "before 64",
                    ));
                }
                let mut out = [ffi::ibv_sge::default(); MAX_PIECES];
                let mut k = 0;
                for s in many {
                    for j in 0..s.len() / g {
                        out[k] = ffi::ibv_sge { addr: s.addr() + u64::from(j * g), length: g, lkey: s.lkey() };
                        k += 1;
                    }
                }
                // SAFETY: open batch; the list is copied now.
                unsafe { ffi::ibv_wr_set_sge_list(q, k, out.as_ptr()) };
                Ok(())
            }
            many => {
                // SAFETY: open batch; `Sge` has the layout of `ibv_sge`; copied now.
                unsafe { ffi::ibv_wr_set_sge_list(q, many.len(), many.as_ptr().cast()) };
                Ok(())
            }
        }
    }

    /// Starts a one-entry request of the direct methods below: `wr_id` and
    /// the flags (without `INLINE`: these take a registered entry).
    ///
    /// Only [`WrBatch::send`] checks the QP type: a UD QP takes no RDMA,
    /// atomic, bind or invalidate operation (the providers refuse those
    /// send ops on UD when the QP is created, so a UD QP never has them).
    /// Panics on a QP made without send ops (its stand-in view, which is
    /// never written): the first step of every method whose contract does
    /// not already exclude such a QP.
    #[inline]
    fn require_extended(&self) {
        if is_classic(self.ex) {
            not_extended();
        }
    }

    #[inline(always)]
    fn begin(&mut self, wr_id: u64, flags: SendFlags) -> *mut ffi::ibv_qp_ex {
        debug_assert!(
            !is_classic(self.ex),
            "a one-entry WrBatch method on a QP without send_ops: create it with QpBuilder::send_ops"
        );
        let q = self.ex.as_ptr();
        // SAFETY: an open batch on a live extended QP; plain fields the
        // next `ibv_wr_*` call reads.
        unsafe {
            (*q).wr_id = wr_id;
            (*q).wr_flags = (flags - SendFlags::INLINE).bits();
        }
        q
    }

    /// RDMA WRITE of one registered entry to `remote`
    /// (`ibv_wr_rdma_write`, `ibv_wr_set_sge`): the shortest path, with none
    /// of [`WrBatch::post`]'s decoding of a [`SendWr`]. Like C's inline
    /// `ibv_wr_*` functions, the one-entry methods call the provider's entry
    /// without a check per call: the QP must have been made with the
    /// operation's send op, which [`QpBuilder::build`](super::QpBuilder::build)
    /// checks the provider supports.
    ///
    /// # Safety
    /// As [`WrBatch::post`], for `sge`; and the QP was created with
    /// [`SendOps::RDMA_WRITE`] (debug builds check, and panic without it).
    #[inline]
    pub unsafe fn rdma_write(&mut self, wr_id: u64, flags: SendFlags, sge: &Sge, remote: RemoteAddr) {
        let q = self.begin(wr_id, flags);
        // (open batch; the provider copies the operation now)
        op_entry!(q, RDMA_WRITE, wr_rdma_write(remote.rkey, remote.addr));
        entry!(q, wr_set_sge(sge.lkey(), sge.addr(), sge.len()));
    }

    /// RDMA READ from `remote` into one registered entry (`ibv_wr_rdma_read`).
    ///
    /// # Safety
    /// As [`WrBatch::post`], for `sge`; and the QP was created with
    /// [`SendOps::RDMA_READ`] (debug builds check, and panic without it).
    #[inline]
    pub unsafe fn rdma_read(&mut self, wr_id: u64, flags: SendFlags, sge: &Sge, remote: RemoteAddr) {
        let q = self.begin(wr_id, flags);
        // (open batch; the provider copies the operation now)
        op_entry!(q, RDMA_READ, wr_rdma_read(remote.rkey, remote.addr));
        entry!(q, wr_set_sge(sge.lkey(), sge.addr(), sge.len()));
    }

    /// SEND of one registered entry (`ibv_wr_send`).
    ///
    /// # Panics
    /// On a UD QP: a UD request needs its destination, use
    /// [`WrBatch::post`] with [`SendWr::ud`].
    ///
    /// # Safety
    /// As [`WrBatch::post`], for `sge`; and the QP was created with
    /// [`SendOps::SEND`] (debug builds check, and panic without it).
    #[inline]
    pub unsafe fn send(&mut self, wr_id: u64, flags: SendFlags, sge: &Sge) {
        assert!(
            self.qp.qp_type != QpType::UD,
            "WrBatch::send is for connected QPs: on a UD QP use WrBatch::post with SendWr::ud"
        );
        let q = self.begin(wr_id, flags);
        // (open batch; the provider copies the operation now)
        op_entry!(q, SEND, wr_send());
        entry!(q, wr_set_sge(sge.lkey(), sge.addr(), sge.len()));
    }

    /// 8-byte fetch-and-add at `remote`; the old value lands in `sge`
    /// (`ibv_wr_atomic_fetch_add`).
    ///
    /// # Safety
    /// As [`WrBatch::post`], for `sge` (8 bytes); and the QP was created
    /// with [`SendOps::ATOMIC_FETCH_AND_ADD`] (debug builds check, and panic
    /// without it).
    #[inline]
    pub unsafe fn fetch_add(&mut self, wr_id: u64, flags: SendFlags, sge: &Sge, remote: RemoteAddr, add: u64) {
        let q = self.begin(wr_id, flags);
        // (open batch; the provider copies the operation now)
        op_entry!(q, ATOMIC_FETCH_AND_ADD, wr_atomic_fetch_add(remote.rkey, remote.addr, add));
        entry!(q, wr_set_sge(sge.lkey(), sge.addr(), sge.len()));
    }

    /// 8-byte compare-and-swap at `remote`; the old value lands in `sge`
    /// (`ibv_wr_atomic_cmp_swp`).
    ///
    /// # Safety
    /// As [`WrBatch::post`], for `sge` (8 bytes); and the QP was created
    /// with [`SendOps::ATOMIC_CMP_AND_SWP`] (debug builds check, and panic
    /// without it).
    #[inline]
    pub unsafe fn compare_swap(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        sge: &Sge,
        remote: RemoteAddr,
        compare: u64,
        swap: u64,
    ) {
        let q = self.begin(wr_id, flags);
        // (open batch; the provider copies the operation now)
        op_entry!(q, ATOMIC_CMP_AND_SWP, wr_atomic_cmp_swp(remote.rkey, remote.addr, compare, swap));
        entry!(q, wr_set_sge(sge.lkey(), sge.addr(), sge.len()));
    }

    /// Binds the type-2 window `mw` to `len` bytes at `offset` of `mr` with
    /// remote `access` (`ibv_wr_bind_mw`), under the window's next key
    /// (`ibv_inc_rkey` of [`Mw::rkey`](crate::prim::Mw::rkey)), which the
    /// window answers to from now on. Returns the window's token: valid,
    /// for requests arriving on this QP only (type 2B), once the bind
    /// completes; a peer's request with the earlier key is refused. The
    /// window keeps `mr` registered as [`Qp::bind_mw_at`] does. `len == 0`
    /// unbinds. The QP needs [`SendOps::BIND_MW`], `mr` the access
    /// [`AccessFlags::MW_BIND`](crate::prim::AccessFlags::MW_BIND). A
    /// provider without the entry point gives [`Error::Unsupported`],
    /// leaving the batch as it was.
    ///
    /// # Panics
    /// If `mw` is not of type 2 (type 1 binds through
    /// [`Qp::bind_mw_at`]); if the range is outside `mr`, or the window, the
    /// region and the QP do not share one PD and device context.
    #[inline]
    #[track_caller]
    #[doc(alias = "ibv_wr_bind_mw")]
    pub fn bind_mw_at(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        mw: &mut Mw,
        mr: &Mr,
        (offset, len): (usize, usize),
        access: AccessFlags,
    ) -> Result<RemoteMr> {
        self.require_extended();
        assert!(
            mw.mw_type() == MwType::TYPE_2,
            "WrBatch::bind_mw_at binds type 2 windows; this one is {:?} (type 1: Qp::bind_mw_at)",
            mw.mw_type()
        );
        // SAFETY: a live extended QP (checked above); plain reads of its base.
        let base = unsafe { &self.ex.as_ref().qp_base };
        mw.check_bind((base.qp_num, base.context), mr, offset, len);
        let (offset, len) = (offset as u64, len as u64);
        // SAFETY: live extended QP; a plain function-pointer field.
        let Some(entry) = (unsafe { (*self.ex.as_ptr()).wr_bind_mw }) else {
            return Err(Error::unsupported(
                "ibv_wr_bind_mw",
                &crate::prim::unsupported::MW_BIND,
                &self.device(),
                "unset",
            ));
        };
        let rkey = ffi::ibv_inc_rkey(mw.rkey());
        let info = ffi::ibv_mw_bind_info {
            mr: if len == 0 { std::ptr::null_mut() } else { mr.as_ptr() },
            addr: if len == 0 { 0 } else { mr.addr() + offset },
            length: len,
            mw_access_flags: access.bits(),
        };
        let q = self.begin(wr_id, flags);
        // SAFETY: open batch; live window and region of this QP's PD
        // (checked); the provider copies the bind now.
        unsafe { entry(q, mw.as_ptr(), rkey, &info) };
        mw.bound_type2(rkey, (len != 0).then_some(mr));
        Ok(RemoteMr { addr: mr.addr() + offset, len, rkey })
    }

    /// Old form of [`WrBatch::bind_mw_at`], with `u64` offset and length.
    #[deprecated(
        note = "offsets and lengths are usize across the memory APIs: use `batch.bind_mw_at(wr_id, flags, mw, mr, \
                (offset, len), access)`; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    #[track_caller]
    pub fn bind_mw(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        mw: &mut Mw,
        mr: &Mr,
        (offset, len): (u64, u64),
        access: AccessFlags,
    ) -> Result<RemoteMr> {
        let fit = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        self.bind_mw_at(wr_id, flags, mw, mr, (fit(offset), fit(len)), access)
    }

    /// Invalidates the local key `rkey` (a type-2 window's, or a region's
    /// that allows it) through the send queue (`ibv_wr_local_inv`): once the
    /// request completes, peers' requests with that key are refused. The QP
    /// needs [`SendOps::LOCAL_INV`].
    ///
    /// # Panics
    /// If the provider left the entry unset: a QP made without [`SendOps::LOCAL_INV`], or UD.
    #[inline]
    pub fn local_inv(&mut self, wr_id: u64, flags: SendFlags, rkey: u32) {
        self.require_extended();
        let q = self.begin(wr_id, flags);
        // SAFETY: open batch; plain values, copied now.
        unsafe { ffi::ibv_wr_local_inv(q, rkey) };
    }

    /// SEND of one registered entry that also invalidates the peer's key
    /// `rkey` (`ibv_wr_send_inv`): the peer's receive completion carries
    /// [`WcFlags::WITH_INV`](crate::prim::WcFlags::WITH_INV) and the key
    /// ([`Wc::invalidated_rkey`](crate::prim::Wc::invalidated_rkey)). The QP
    /// needs [`SendOps::SEND_WITH_INV`].
    ///
    /// # Panics
    /// If the provider left the entry unset: a QP made without [`SendOps::SEND_WITH_INV`], or UD.
    ///
    /// # Safety
    /// As [`WrBatch::post`], for `sge`.
    #[inline]
    pub unsafe fn send_inv(&mut self, wr_id: u64, flags: SendFlags, sge: &Sge, rkey: u32) {
        self.require_extended();
        let q = self.begin(wr_id, flags);
        // SAFETY: open batch; the provider copies the operation and entry now.
        unsafe {
            ffi::ibv_wr_send_inv(q, rkey);
            ffi::ibv_wr_set_sge(q, sge.lkey(), sge.addr(), sge.len());
        }
    }

    /// 8-byte ATOMIC WRITE (IBTA 1.5) of `value` at `remote`
    /// (`ibv_wr_atomic_write`): the responder places the eight bytes as one
    /// unit, in this host's byte order, so that a `u64` read there on a host
    /// of the same order sees `value`. No local memory is involved. `remote`
    /// must be 8-byte aligned in a region with remote write access.
    ///
    /// The QP must have been created with [`SendOps::ATOMIC_WRITE`]
    /// ([`QpBuilder::build`](super::QpBuilder::build) refuses that with
    /// [`Error::Unsupported`] on a device that does not report the
    /// capability); a provider without the entry point gives
    /// [`Error::Unsupported`] here, leaving the batch as it was (as on a UD
    /// QP, which takes no ATOMIC WRITE).
    #[inline]
    pub fn atomic_write(&mut self, wr_id: u64, flags: SendFlags, remote: RemoteAddr, value: u64) -> Result<()> {
        self.require_extended();
        // SAFETY: live extended QP; a plain function-pointer field.
        let Some(entry) = (unsafe { (*self.ex.as_ptr()).wr_atomic_write }) else {
            return Err(Error::unsupported(
                "ibv_wr_atomic_write",
                &crate::prim::unsupported::ATOMIC_WRITE_PROVIDER,
                &self.device(),
                "unset",
            ));
        };
        let q = self.begin(wr_id, flags);
        let bytes = value.to_ne_bytes();
        // SAFETY: open batch; the provider copies the operation and the
        // eight bytes now.
        unsafe { entry(q, remote.rkey, remote.addr, bytes.as_ptr().cast()) };
        Ok(())
    }

    /// FLUSH of `len` bytes at `remote` (`ibv_wr_flush`): the responder
    /// makes the earlier writes there reach `placement` before it
    /// acknowledges; with [`FlushLevel::Region`](crate::prim::FlushLevel::Region)
    /// the whole region of `remote.rkey`, address and length ignored. The
    /// region needs the matching access flag
    /// ([`AccessFlags::FLUSH_GLOBAL`] / [`AccessFlags::FLUSH_PERSISTENT`]);
    /// the completion is [`WcOpcode::FLUSH`](crate::prim::WcOpcode::FLUSH).
    /// No local memory is involved.
    ///
    /// A provider that accepted [`SendOps::FLUSH`] but left the entry unset
    /// gives [`Error::Unsupported`], leaving the batch as it was.
    ///
    /// # Panics
    /// If the QP was not created with [`SendOps::FLUSH`] (a programming
    /// error: an older provider's QP has no `wr_flush` to call), or on a UD QP.
    #[inline]
    pub fn flush(
        &mut self,
        wr_id: u64,
        flags: SendFlags,
        remote: RemoteAddr,
        len: usize,
        placement: crate::prim::FlushPlacement,
        level: crate::prim::FlushLevel,
    ) -> Result<()> {
        assert!(self.qp.flush, "WrBatch::flush on a QP built without SendOps::FLUSH: add it to QpBuilder::send_ops");
        // SAFETY: a live extended QP that its provider created with
        // IBV_QP_EX_WITH_FLUSH, so its structure has `wr_flush`.
        if unsafe { (*self.ex.as_ptr().cast::<ffi::ibv_qp_ex_flush>()).wr_flush }.is_none() {
            return Err(Error::unsupported(
                "ibv_wr_flush",
                &crate::prim::unsupported::FLUSH_PROVIDER,
                &self.device(),
                "unset",
            ));
        }
        let q = self.begin(wr_id, flags);
        // SAFETY: open batch on such a QP; the provider copies the request now.
        unsafe { ffi::ibv_wr_flush(q, remote.rkey, remote.addr, len, placement.to_raw(), level.to_raw()) };
        Ok(())
    }

    /// Posts the batch with one doorbell (`ibv_wr_complete`).
    #[inline]
    pub fn complete(self) -> Result<()> {
        // Closed here, so not aborted on drop: no drop runs.
        let this = std::mem::ManuallyDrop::new(self);
        // (open batch on a live extended QP; closed once)
        let rc = entry!(this.ex.as_ptr(), wr_complete());
        if rc != 0 {
            if is_classic(this.ex) {
                not_extended();
            }
            return Err(Error::code("ibv_wr_complete", rc));
        }
        Ok(())
    }
}

impl Drop for WrBatch<'_> {
    fn drop(&mut self) {
        // Only an open batch drops: `complete` closes it without dropping.
        // (open batch on a live extended QP; closed once)
        entry!(self.ex.as_ptr(), wr_abort());
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn gcd_of_lengths() {
        assert_eq!(super::gcd(0, 12), 12);
        assert_eq!([4096u32, 8192, 2048].iter().fold(0, |g, &x| super::gcd(g, x)), 2048);
        assert_eq!([10u32, 5, 7].iter().fold(0, |g, &x| super::gcd(g, x)), 1);
    }
}
