//! Queue pairs: creation checked against device limits, state transitions
//! checked against the specification's table, posting.

mod attr;
pub(crate) mod direct;
mod ex;
pub(crate) mod state;

use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

mod connect;

pub use attr::{AttrMask, QpAttr};
pub use connect::{random_psn, ConnectOpts};
pub use ex::{BatchQp, SendOps, WrBatch};
pub use state::{Refusal, Rule};

use super::cq::Cq;
use super::device::Context;
use super::dm::Xrcd;
use super::error::{Error, Result};
use super::gid::Gid;
use super::handle::{Destroy, Owned};
use super::mlx5::{self, Mlx5QpFlags, Mlx5SendOps};
use super::pd::Pd;
use super::quirks::{siw_post_send, Quirks};
use super::srq::Srq;
use super::wr::{link_in_place, RecvList, RecvWr, SendList, SendWr};
use crate::bindings as ffi;

pub use super::values::{QpState, QpType};

/// Queue sizes of a QP: what [`QpBuilder::caps`] asks for, and what
/// [`Qp::caps`] says the provider granted.
///
/// Start from [`QpCaps::default`] (64 send and 64 receive requests, one
/// scatter/gather entry each, no inline data) and chain the setters; each
/// value can be read back (`get_max_send_wr`, ...). [`QpBuilder::build`]
/// checks every value against the device's limits and names the one above it.
///
/// ```
/// use rrddmma::prim::QpCaps;
/// let caps = QpCaps::default().max_send_wr(256).max_inline_data(64);
/// assert_eq!((caps.get_max_send_wr(), caps.get_max_recv_wr()), (256, 64));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCaps {
    setters! {
        /// Outstanding send work requests (`ibv_qp_cap::max_send_wr`). Default 64.
        const max_send_wr: u32, get_max_send_wr;
        /// Outstanding receive work requests (`ibv_qp_cap::max_recv_wr`);
        /// ignored with an SRQ. Default 64.
        const max_recv_wr: u32, get_max_recv_wr;
        /// Scatter/gather entries per send work request
        /// (`ibv_qp_cap::max_send_sge`). Default 1.
        const max_send_sge: u32, get_max_send_sge;
        /// Scatter/gather entries per receive work request
        /// (`ibv_qp_cap::max_recv_sge`). Default 1.
        const max_recv_sge: u32, get_max_recv_sge;
        /// Bytes of inline data per send work request
        /// (`ibv_qp_cap::max_inline_data`). Default 0.
        const max_inline_data: u32, get_max_inline_data;
    }

    /// The raw capacities; without `recv` the receive side is zero (a QP
    /// taking receives from an SRQ, or one that never receives, such as a DC
    /// initiator).
    pub fn to_raw(&self, recv: bool) -> ffi::ibv_qp_cap {
        ffi::ibv_qp_cap {
            max_send_wr: self.max_send_wr,
            max_recv_wr: if recv { self.max_recv_wr } else { 0 },
            max_send_sge: self.max_send_sge,
            max_recv_sge: if recv { self.max_recv_sge } else { 0 },
            max_inline_data: self.max_inline_data,
        }
    }
}

impl Default for QpCaps {
    fn default() -> QpCaps {
        QpCaps { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
    }
}

/// What a peer needs to connect to a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// First packet sequence number the QP sends (24 bits).
    pub psn: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Port GID (RoCE; routes InfiniBand across subnets).
    pub gid: Gid,
}

/// Creates a QP: [`Qp::builder`] with what is required, then setters, then [`QpBuilder::build`].
#[derive(Debug)]
pub struct QpBuilder<'a> {
    pd: &'a Pd,
    qp_type: QpType,
    send_cq: &'a Cq,
    recv_cq: &'a Cq,
    srq: Option<&'a Srq>,
    caps: QpCaps,
    sig_all: bool,
    send_ops: Option<SendOps>,
    xrcd: Option<&'a Xrcd>,
    mlx5_flags: Option<Mlx5QpFlags>,
    mlx5_send_ops: Option<Mlx5SendOps>,
}

impl<'a> QpBuilder<'a> {
    fn start(pd: &'a Pd, qp_type: QpType, send_cq: &'a Cq, recv_cq: &'a Cq) -> QpBuilder<'a> {
        QpBuilder {
            pd,
            qp_type,
            send_cq,
            recv_cq,
            srq: None,
            caps: QpCaps::default(),
            sig_all: false,
            send_ops: None,
            xrcd: None,
            mlx5_flags: None,
            mlx5_send_ops: None,
        }
    }

    /// Queue sizes (default: [`QpCaps::default`]).
    pub fn caps(mut self, caps: QpCaps) -> QpBuilder<'a> {
        self.caps = caps;
        self
    }

    /// Takes receives from `srq` instead of a receive queue of its own.
    pub fn srq(mut self, srq: &'a Srq) -> QpBuilder<'a> {
        self.srq = Some(srq);
        self
    }

    /// Signals every send (`sq_sig_all`); default: only requests that ask.
    pub fn sig_all(mut self, yes: bool) -> QpBuilder<'a> {
        self.sig_all = yes;
        self
    }

    /// Creates the QP through `ibv_create_qp_ex` with the extended post API
    /// enabled for `ops`, for [`Qp::wr_batch`]. On a device without atomics
    /// (iWARP: [`Context::atomics`](super::Context::atomics)), `ops` with
    /// an atomic make [`build`](Self::build) an [`Error::Unsupported`]
    /// naming them and `atomic_cap` ([`SendOps::BASIC`] holds both atomics).
    pub fn send_ops(mut self, ops: SendOps) -> QpBuilder<'a> {
        self.send_ops = Some(ops);
        self
    }

    /// The XRC domain of an `IBV_QPT_XRC_RECV` QP.
    pub fn xrcd(mut self, xrcd: &'a Xrcd) -> QpBuilder<'a> {
        self.xrcd = Some(xrcd);
        self
    }

    /// mlx5: creates the QP through `mlx5dv_create_qp` with `flags`
    /// (`MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`): scatter-to-CQE allowed
    /// ([`Mlx5QpFlags::ALLOW_SCATTER_TO_CQE`]) or disabled
    /// ([`Mlx5QpFlags::DISABLE_SCATTER_TO_CQE`]), and the other create
    /// flags. [`QpBuilder::build`] says [`Error::Unsupported`] naming the
    /// option off mlx5 (decided before any libmlx5 call); flags the device or
    /// the QP type cannot take are libmlx5's `EINVAL`/`EOPNOTSUPP`.
    #[doc(alias = "mlx5dv_create_qp")]
    #[doc(alias = "MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS")]
    pub fn mlx5_create_flags(mut self, flags: Mlx5QpFlags) -> QpBuilder<'a> {
        self.mlx5_flags = Some(flags);
        self
    }

    /// mlx5: creates the QP through `mlx5dv_create_qp` with the mlx5 send
    /// operations `ops` (`MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`): the
    /// memory-key entries (`mlx5dv_wr_mr_list`, `mlx5dv_wr_mr_interleaved`,
    /// `mlx5dv_wr_mkey_configure` and its setters) that
    /// [`MkeyWr`](crate::mlx5dv::mkey_wr::MkeyWr) calls. libmlx5 installs
    /// them on RC QPs only. [`QpBuilder::build`] says [`Error::Unsupported`]
    /// naming the option off mlx5, decided before any libmlx5 call.
    ///
    /// # Panics
    /// In [`QpBuilder::build`], unless [`QpBuilder::send_ops`] was given
    /// too (the mlx5 entries belong to the extended QP those make).
    #[doc(alias = "MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS")]
    pub fn mlx5_send_ops(mut self, ops: Mlx5SendOps) -> QpBuilder<'a> {
        self.mlx5_send_ops = Some(ops);
        self
    }

    /// Checks the capacities against the device's limits, then creates the QP.
    ///
    /// # Panics
    /// If the CQs, the SRQ or the XRC domain belong to another device
    /// context than the PD (a programming error: their handles would name
    /// unrelated kernel objects of that other context). Open the device once
    /// and create every object from that [`Context`](super::Context).
    /// If the SRQ is a tag-matching one and the receive CQ was not built
    /// with [`CqBuilder::tag_matching`](super::CqBuilder::tag_matching) (a
    /// programming error: its classic poller would misread the receives).
    pub fn build(self) -> Result<Qp> {
        let ctx = self.pd.context().as_ptr();
        let foreign = |what: &str| {
            panic!(
                "QpBuilder::build: the {what} belongs to another device context than the PD \
                 (open the device once and create the PD, CQs, SRQ and XRCD from that Context)"
            )
        };
        if self.send_cq.context().as_ptr() != ctx {
            foreign("send CQ");
        }
        if self.recv_cq.context().as_ptr() != ctx {
            foreign("receive CQ");
        }
        if self.srq.is_some_and(|q| q.pd().context().as_ptr() != ctx) {
            foreign("SRQ");
        }
        if self.xrcd.is_some_and(|x| x.context().as_ptr() != ctx) {
            foreign("XRC domain");
        }
        Srq::check_tm_recv_cq("QpBuilder::build", self.srq, self.recv_cq);
        if self.mlx5_send_ops.is_some() {
            assert!(
                self.send_ops.is_some(),
                "QpBuilder::mlx5_send_ops needs QpBuilder::send_ops too (the mlx5 entries belong to an extended QP)"
            );
            mlx5::require(
                self.pd.context(),
                "mlx5dv_create_qp",
                &crate::prim::unsupported::MKEY_SEND_OPS,
                "QpBuilder::mlx5_send_ops",
            )?;
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        if self.mlx5_flags.is_some_and(|f| f.contains(Mlx5QpFlags::OOO_DP)) {
            // Refused from the device's caps before libmlx5's bare EOPNOTSUPP.
            let ctx = self.pd.context();
            mlx5::require(ctx, mlx5::OOO_OP, &super::unsupported::MLX5_OPTION, "Mlx5QpFlags::OOO_DP")?;
            let caps = mlx5::ooo_recv_wrs_caps(ctx)?;
            let recv = if self.srq.is_some() { 0 } else { self.caps.max_recv_wr };
            mlx5::check_ooo(ctx.name(), caps.as_ref(), self.qp_type, recv)?;
        }
        if self.mlx5_flags.is_some() {
            mlx5::require(
                self.pd.context(),
                "mlx5dv_create_qp",
                &crate::prim::unsupported::MLX5_OPTION,
                "QpBuilder::mlx5_create_flags",
            )?;
        }
        let dev = self.pd.context().limits();
        let limit = |v: i32| u32::try_from(v).unwrap_or(0);
        let c = &self.caps;
        // The receive side only without an SRQ (which holds the receives).
        let checks = [
            ("max_send_wr", c.max_send_wr, limit(dev.max_qp_wr)),
            ("max_send_sge", c.max_send_sge, limit(dev.max_sge)),
            ("max_recv_wr", c.max_recv_wr, limit(dev.max_qp_wr)),
            ("max_recv_sge", c.max_recv_sge, limit(dev.max_sge)),
        ];
        let own_receives = if self.srq.is_none() { 4 } else { 2 };
        for &(what, asked, limit) in &checks[..own_receives] {
            if asked > limit {
                return Err(Error::CapExceeded { what, asked: u64::from(asked), limit: u64::from(limit) });
            }
        }
        let cap = c.to_raw(self.srq.is_none());
        let mut attr = ffi::ibv_qp_init_attr_ex {
            send_cq: self.send_cq.as_ptr(),
            recv_cq: self.recv_cq.as_ptr(),
            srq: self.srq.map_or(ptr::null_mut(), Srq::as_ptr),
            cap,
            qp_type: self.qp_type.into(),
            sq_sig_all: i32::from(self.sig_all),
            comp_mask: ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0,
            pd: self.pd.as_ptr(),
            ..Default::default()
        };
        if let Some(x) = self.xrcd {
            attr.comp_mask |= ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_XRCD.0;
            attr.xrcd = x.as_ptr();
        }
        #[cfg(rrddmma_mlnx_ofed4)]
        if self.send_ops.is_some() {
            return Err(Error::unsupported(
                "ibv_create_qp_ex",
                &crate::prim::unsupported::OFED4,
                self.pd.context().name(),
                "rrddmma_mlnx_ofed4 (no ibv_wr_*)",
            ));
        }
        if let Some(ops) = self.send_ops {
            if ops.intersects(SendOps::ATOMIC_FETCH_AND_ADD | SendOps::ATOMIC_CMP_AND_SWP)
                && !self.pd.context().atomics()
            {
                return Err(Error::unsupported(
                    "ibv_create_qp_ex",
                    &crate::prim::unsupported::ATOMICS,
                    self.pd.context().name(),
                    "IBV_ATOMIC_NONE",
                ));
            }
            if ops.contains(SendOps::ATOMIC_WRITE)
                && self.pd.context().query_device_ex()?.device_cap_flags_ex & ex::DEVICE_ATOMIC_WRITE == 0
            {
                return Err(Error::unsupported(
                    "ibv_create_qp_ex",
                    &crate::prim::unsupported::ATOMIC_WRITE,
                    self.pd.context().name(),
                    "absent",
                ));
            }
            crate::prim::flush::check_device(self.pd.context(), ops)?;
            attr.comp_mask |= ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.0;
            attr.send_ops_flags = ops.bits();
        }
        let ctx = self.pd.context();
        if self.qp_type == QpType::RAW_PACKET && ctx.query_device_ex()?.raw_packet_caps == 0 {
            // rxe and siw have no raw packet QP and report no raw packet
            // capability; ConnectX Ethernet ports report their offloads.
            return Err(Error::unsupported("ibv_create_qp", &crate::prim::unsupported::RAW_QP, ctx.name(), 0));
        }
        let (qp, op) = if self.mlx5_flags.is_some() || self.mlx5_send_ops.is_some() {
            (create_mlx5(ctx, &mut attr, self.mlx5_flags, self.mlx5_send_ops)?, "mlx5dv_create_qp")
        } else {
            // SAFETY: live PD, CQs and SRQ of the same context (checked above); `attr` is valid.
            (unsafe { ffi::ibv_create_qp_ex(ctx.as_ptr(), &mut attr) }, "ibv_create_qp_ex")
        };
        let extended =
            self.send_ops.is_some() || self.xrcd.is_some() || self.mlx5_flags.is_some() || self.mlx5_send_ops.is_some();
        let op = if extended { op } else { "ibv_create_qp" };
        let qp =
            NonNull::new(qp).ok_or_else(|| crate::prim::flush::refused(Error::last(op), self.send_ops, ctx.name()))?;
        // SAFETY: made by the create verb above, owned by nothing else.
        let (post_send_fn, post_recv_fn, ex) = unsafe { adopt(qp, self.send_ops, ctx, op) }?;
        Ok(Qp {
            // SAFETY: made by the create verb above, owned by nothing else.
            qp: unsafe { Owned::new(qp, QpHandle::default()) },
            post_send_fn,
            post_recv_fn,
            batch: ex::BatchQp {
                ex,
                flush: self.send_ops.is_some_and(|o| o.contains(SendOps::FLUSH)),
                quirks: ctx.quirks(),
                qp_type: self.qp_type,
                caps: QpCaps { max_inline_data: attr.cap.max_inline_data, ..self.caps },
            },
            state: AtomicU32::new(QpState::RESET.to_raw()),
            direct: direct::DirectClaim::default(),
            pd: self.pd.clone(),
            _send_cq: self.send_cq.clone(),
            _recv_cq: self.recv_cq.clone(),
            _srq: self.srq.cloned(),
            _xrcd: self.xrcd.cloned(),
        })
    }
}

/// `mlx5dv_create_qp` with `flags` and `send_ops`, on an mlx5 context
/// (checked by `build`).
#[cfg(not(rrddmma_mlnx_ofed4))]
fn create_mlx5(
    ctx: &Context,
    attr: &mut ffi::ibv_qp_init_attr_ex,
    flags: Option<Mlx5QpFlags>,
    send_ops: Option<Mlx5SendOps>,
) -> Result<*mut ffi::ibv_qp> {
    let mut dv = ffi::mlx5dv_qp_init_attr::default();
    if let Some(flags) = flags {
        dv.comp_mask |= u64::from(ffi::mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS.0);
        dv.create_flags = flags.bits();
    }
    if let Some(ops) = send_ops {
        dv.comp_mask |= u64::from(ffi::mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS.0);
        dv.send_ops_flags = ops.bits();
    }
    // SAFETY: an mlx5 context (checked by `build`) with the live PD, CQs and
    // SRQ `attr` names; `attr` and `dv` are valid for the call.
    Ok(unsafe { ffi::mlx5dv_create_qp(ctx.as_ptr(), attr, &mut dv) })
}

/// MLNX_OFED 4.x has no `mlx5dv_create_qp` (`build` refused already).
#[cfg(rrddmma_mlnx_ofed4)]
fn create_mlx5(
    ctx: &Context,
    _: &mut ffi::ibv_qp_init_attr_ex,
    _: Option<Mlx5QpFlags>,
    _: Option<Mlx5SendOps>,
) -> Result<*mut ffi::ibv_qp> {
    Err(Error::unsupported(
        "mlx5dv_create_qp",
        &crate::prim::unsupported::OFED4,
        ctx.name(),
        "rrddmma_mlnx_ofed4 (no mlx5dv_create_qp)",
    ))
}

type PostSendFn = unsafe extern "C" fn(*mut ffi::ibv_qp, *mut ffi::ibv_send_wr, *mut *mut ffi::ibv_send_wr) -> i32;
type PostRecvFn = unsafe extern "C" fn(*mut ffi::ibv_qp, *mut ffi::ibv_recv_wr, *mut *mut ffi::ibv_recv_wr) -> i32;

/// Takes a QP just created: its provider's post entries, and with
/// `send_ops` its extended view, whose batch entries and the entries of the
/// asked send ops must be set. On a missing entry the QP is destroyed and
/// the error is a typed `Unsupported` naming `op` (the create verb).
///
/// # Safety
/// `qp` is live, owned by the caller and shared with nobody; with
/// `send_ops` it was created with those send-op flags.
unsafe fn adopt(
    qp: NonNull<ffi::ibv_qp>,
    send_ops: Option<SendOps>,
    ctx: &Context,
    op: &'static str,
) -> Result<(PostSendFn, PostRecvFn, NonNull<ffi::ibv_qp_ex>)> {
    let refuse = |missing: &'static crate::prim::Missing| {
        // SAFETY: the caller's contract (owned, not shared).
        unsafe { ffi::ibv_destroy_qp(qp.as_ptr()) };
        Err(Error::unsupported(op, missing, ctx.name(), "unset"))
    };
    let Some((post_send_fn, post_recv_fn)) = post_ops(qp, ctx.quirks(), ctx.atomics()) else {
        return refuse(&crate::prim::unsupported::QP_POST_ENTRIES);
    };
    #[cfg(not(rrddmma_mlnx_ofed4))]
    let ex = match send_ops {
        Some(ops) => {
            // SAFETY: a QP created with send_ops_flags has an extended view.
            let ex = NonNull::new(unsafe { ffi::ibv_qp_to_qp_ex(qp.as_ptr()) });
            let Some(ex) = ex.filter(|&ex| ex::batch_entries_set(ex) && ex::op_entries_set(ex, ops)) else {
                return refuse(&crate::prim::unsupported::QP_EX_ENTRIES);
            };
            ex
        }
        None => ex::classic(),
    };
    // MLNX_OFED 4.x libibverbs has no `ibv_qp_to_qp_ex` (nor `ibv_qp_ex`).
    #[cfg(rrddmma_mlnx_ofed4)]
    let ex = {
        let _ = send_ops;
        ex::classic()
    };
    Ok((post_send_fn, post_recv_fn, ex))
}

/// The provider's post entries of a live QP, if both are set; the send
/// one wrapped, when the QP is made, on a device whose provider hides
/// refusals ([`siw_post_send`]) or that has no atomics
/// ([`no_atomics_post_send`]), so the post itself keeps nothing across the
/// provider's call to name a refusal.
fn post_ops(qp: NonNull<ffi::ibv_qp>, quirks: Quirks, atomics: bool) -> Option<(PostSendFn, PostRecvFn)> {
    // SAFETY: a live QP points to its live context; the function table is
    // fixed when the context is opened.
    let ops = unsafe { &(*(*qp.as_ptr()).context).ops };
    let send = ops.post_send?;
    let send: PostSendFn = match (quirks.siw_post_send_hides_refusal, atomics) {
        (false, true) => send,
        (true, true) => siw_post_send,
        (false, false) => no_atomics_post_send::<false>,
        (true, false) => no_atomics_post_send::<true>,
    };
    Some((send, ops.post_recv?))
}

/// What [`no_atomics_post_send`] returns for a refused fetch-and-add:
/// outside every errno, positive or negative.
const REFUSED_FETCH_ADD: i32 = i32::MIN + 1;
/// As [`REFUSED_FETCH_ADD`], for a refused compare-and-swap.
const REFUSED_COMPARE_SWAP: i32 = i32::MIN + 2;

thread_local! {
    /// The QP whose request [`no_atomics_post_send`] last answered with
    /// [`REFUSED_FETCH_ADD`] or [`REFUSED_COMPARE_SWAP`] on this thread,
    /// for the device [`post_refused`] names; it takes it on the same
    /// thread right after that answer. Kept here rather than by the
    /// poster, so that a post keeps nothing across the provider's call
    /// (no register saved on the path that posts).
    static REFUSING_QP: std::cell::Cell<*mut ffi::ibv_qp> = const { std::cell::Cell::new(ptr::null_mut()) };
}

/// The post entry of a QP on a device without atomics
/// ([`Context::atomics`]): the provider's own (through [`siw_post_send`]
/// with `SIW`), except that a refusal whose `bad` names an atomic request
/// returns [`REFUSED_FETCH_ADD`] or [`REFUSED_COMPARE_SWAP`], which
/// [`post_refused`] reads as the refusal of the operation the device lacks.
/// Chosen when the QP is made, so the post on other devices reads nothing
/// but the provider's answer.
///
/// # Safety
/// As the provider's `post_send`: `qp` a live QP whose context has that
/// entry, `wr` a valid list, `bad` valid for writes.
unsafe extern "C" fn no_atomics_post_send<const SIW: bool>(
    qp: *mut ffi::ibv_qp,
    wr: *mut ffi::ibv_send_wr,
    bad: *mut *mut ffi::ibv_send_wr,
) -> i32 {
    let rc = if SIW {
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { siw_post_send(qp, wr, bad) }
    } else {
        // SAFETY: a live QP points to its live context; its function table
        // is fixed when the context is opened.
        let Some(post) = (unsafe { (*(*qp).context).ops.post_send }) else { return libc::ENOSYS };
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { post(qp, wr, bad) }
    };
    if rc == 0 {
        return 0;
    }
    // SAFETY: `bad` is valid (the caller's contract); the provider set it,
    // null or the refused request of the caller's list, alive for the call.
    let refused = unsafe { *bad };
    if refused.is_null() {
        return rc;
    }
    // SAFETY: as above, a request of the caller's list.
    let answer = match unsafe { (*refused).opcode } {
        ffi::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD => REFUSED_FETCH_ADD,
        ffi::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP => REFUSED_COMPARE_SWAP,
        _ => return rc,
    };
    REFUSING_QP.set(qp);
    answer
}

/// A refused post's error: `err` as the provider's errno made it, or, for
/// the answers of [`no_atomics_post_send`], the refusal of the atomic the
/// device lacks (`EOPNOTSUPP`, naming the operation and `atomic_cap`).
#[cold]
#[inline(never)]
fn post_refused(err: Error, rc: i32) -> Error {
    let missing = match rc {
        REFUSED_FETCH_ADD => &crate::prim::unsupported::ATOMIC_POST_FETCH_ADD,
        REFUSED_COMPARE_SWAP => &crate::prim::unsupported::ATOMIC_POST_CMP_SWAP,
        _ => return err,
    };
    // The QP `no_atomics_post_send` refused on this thread, in the post
    // that returned `rc` (null if none did).
    let qp = REFUSING_QP.replace(ptr::null_mut());
    // SAFETY: null, or a live QP (the poster's, whose call has just
    // returned) that points to its live context.
    let device = unsafe { crate::prim::unsupported::device_name(qp.as_ref().map_or(ptr::null_mut(), |q| q.context)) };
    err.unsupported_post(missing, &device, "IBV_ATOMIC_NONE")
}

/// [`post_refused`] of a [`SendList`]'s post (the list keeps the index).
#[cold]
#[inline(never)]
fn list_refused(rc: i32) -> Error {
    post_refused(Error::post_list("ibv_post_send", rc), rc)
}

/// A queue pair. Destroyed on drop; keeps its PD, CQs and SRQ alive.
///
/// # References
/// `ibv_create_qp(3)`, `ibv_modify_qp(3)`, `ibv_post_send(3)`, `ibv_post_recv(3)`
#[repr(C)]
pub struct Qp {
    /// What a batch reads: the extended view, the type, the quirks, the
    /// caps. First (`repr(C)`), so that a batch's pointer to it is the
    /// QP's own, as before it was split out; nothing in it has drop glue.
    batch: ex::BatchQp,
    /// The QP itself, destroyed first: the fields after it (PD, CQs, SRQ,
    /// XRCD) drop after it.
    qp: Owned<QpHandle>,
    /// The provider's post entries (what `ibv_post_send` / `ibv_post_recv`
    /// call), checked non-null at creation and kept here so that posting
    /// loads no more than C's inline `ibv_post_send` does.
    post_send_fn: PostSendFn,
    post_recv_fn: PostRecvFn,
    /// The state of the last successful modify: input to the transition check
    /// only. [`Qp::query_state`] asks the device.
    state: AtomicU32,
    /// Held by a direct send-queue view (mlx5dv): no RESET under it.
    pub(crate) direct: direct::DirectClaim,
    pd: Pd,
    _send_cq: Cq,
    _recv_cq: Cq,
    _srq: Option<Srq>,
    _xrcd: Option<Xrcd>,
}

// `Qp::batch` is declared before the QP handle: it must drop as nothing.
const _: () = assert!(!std::mem::needs_drop::<ex::BatchQp>());

// SAFETY: posting and modifying are thread-safe in libibverbs providers;
// destroy happens once.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl fmt::Debug for Qp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qp").field("qpn", &self.qpn()).field("type", &self.batch.qp_type).finish()
    }
}

impl Qp {
    /// A QP created elsewhere in the crate (mlx5dv DC, MLNX_OFED 4.x),
    /// checked as [`QpBuilder::build`] checks its own (the provider's post
    /// entries, and with `send_ops` its extended view's entries); destroyed
    /// when a check fails.
    ///
    /// # Safety
    /// `qp` must be a live QP created on `pd` with these CQs and SRQ (and,
    /// with `send_ops`, created with those send-op flags), owned by the
    /// result (destroyed on its drop, or here on an error). `op` names the
    /// create verb in the error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn from_parts(
        op: &'static str,
        qp: NonNull<ffi::ibv_qp>,
        send_ops: Option<SendOps>,
        qp_type: QpType,
        caps: QpCaps,
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        srq: Option<&Srq>,
    ) -> Result<Qp> {
        // SAFETY: the caller's contract.
        let (post_send_fn, post_recv_fn, ex) = unsafe { adopt(qp, send_ops, pd.context(), op) }?;
        Ok(Qp {
            // SAFETY: the caller's contract.
            qp: unsafe { Owned::new(qp, QpHandle::default()) },
            post_send_fn,
            post_recv_fn,
            batch: ex::BatchQp {
                ex,
                flush: send_ops.is_some_and(|o| o.contains(SendOps::FLUSH)),
                quirks: pd.context().quirks(),
                qp_type,
                caps,
            },
            state: AtomicU32::new(QpState::RESET.to_raw()),
            direct: direct::DirectClaim::default(),
            pd: pd.clone(),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
            _srq: srq.cloned(),
            _xrcd: None,
        })
    }

    /// The extended view (`ibv_qp_ex`), for QPs created with send ops; its
    /// batch entries and those of its send ops are set.
    #[cfg(not(rrddmma_mlnx_ofed4))]
    pub(crate) fn ex_view(&self) -> Option<NonNull<ffi::ibv_qp_ex>> {
        (!ex::is_classic(self.batch.ex)).then_some(self.batch.ex)
    }

    /// A QP of `qp_type` on `pd` completing on `send_cq` / `recv_cq`:
    /// set what differs from the defaults, then [`QpBuilder::build`].
    ///
    /// ```no_run
    /// # fn f(pd: &rrddmma::prim::Pd, cq: &rrddmma::prim::Cq) -> rrddmma::prim::Result<()> {
    /// use rrddmma::prim::{Qp, QpCaps, QpType};
    /// let qp = Qp::builder(pd, QpType::RC, cq, cq).caps(QpCaps::default().max_send_wr(256)).build()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # References
    /// `ibv_create_qp(3)`, `ibv_create_qp_ex(3)`
    #[doc(alias = "ibv_create_qp")]
    #[doc(alias = "ibv_create_qp_ex")]
    pub fn builder<'a>(pd: &'a Pd, qp_type: QpType, send_cq: &'a Cq, recv_cq: &'a Cq) -> QpBuilder<'a> {
        QpBuilder::start(pd, qp_type, send_cq, recv_cq)
    }

    /// The raw QP.
    pub fn as_ptr(&self) -> *mut ffi::ibv_qp {
        self.qp.as_ptr()
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: live QP.
        unsafe { self.qp.raw().as_ref() }.qp_num
    }

    /// The transport type.
    pub fn qp_type(&self) -> QpType {
        self.batch.qp_type
    }

    /// Capacities as created (`max_inline_data` as the provider granted it).
    pub fn caps(&self) -> QpCaps {
        self.batch.caps
    }

    /// The protection domain.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// This QP's endpoint on `port` with the GID at `gid_index`, sending from `psn`.
    pub fn endpoint(&self, port: u8, gid_index: u8, psn: u32) -> Result<Endpoint> {
        let ctx = self.pd.context();
        let attr = ctx.query_port(port)?;
        let gid = ctx.query_gid(port, u32::from(gid_index))?;
        Ok(Endpoint { qpn: self.qpn(), psn: psn & 0xff_ffff, lid: attr.lid(), gid })
    }

    /// Modifies the QP. The transition and the attribute set are checked
    /// against the specification's table first (from the state this QP was
    /// last moved to, or `cur_state` when given), so that a refusal names the
    /// missing and the forbidden attributes. `REMOTE_ATOMIC` access is
    /// passed on as given, also on a device without atomics (iWARP:
    /// [`Context::atomics`](super::Context::atomics)), which accepts it as C
    /// programs grant it; the atomics themselves are refused there.
    ///
    /// # Panics
    /// If `attr` moves the QP to RESET while an mlx5 direct send-queue view
    /// of it lives (`mlx5dv::obj::DirectSq`): the device would restart at
    /// WQE 0 and re-execute the stale WQEs the view left in the ring. Reset
    /// through `DirectSq::reset`, or drop the view first.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        let _reset = if attr.mask().contains(AttrMask::STATE) && attr.state() == QpState::RESET {
            let guard = self.direct.enter_reset();
            assert!(
                guard.is_some(),
                "Qp::modify to RESET on QP {:#x} while an mlx5dv DirectSq view of it lives: the device would \
                 re-execute stale WQEs; reset through DirectSq::reset, or drop the view first",
                self.qpn()
            );
            guard
        } else {
            None
        };
        self.modify_claimed(attr)
    }

    /// [`Qp::modify`] without the direct-view check: for the view itself.
    pub(crate) fn modify_claimed(&self, attr: &QpAttr) -> Result<()> {
        let from = if attr.mask().contains(AttrMask::CUR_STATE) {
            attr.as_raw().cur_qp_state.into()
        } else {
            QpState::from_raw(self.state.load(Ordering::Acquire))
        };
        let to = attr.state();
        state::check(self.fabric(), self.batch.qp_type, from, to, attr.mask())
            .map_err(|refusal| Error::QpTransition { qp_type: self.batch.qp_type, from, to, refusal })?;
        let mask = i32::try_from(attr.mask().bits()).expect("QP attribute masks fit in 31 bits");
        let mut raw = *attr.as_raw();
        // SAFETY: live QP; `raw` is valid for the call.
        let rc = unsafe { ffi::ibv_modify_qp(self.as_ptr(), &mut raw, mask) };
        if rc != 0 {
            return Err(Error::code("ibv_modify_qp", rc));
        }
        self.state.store(to.to_raw(), Ordering::Release);
        Ok(())
    }

    /// The link of the QP's device, for the transition check.
    fn fabric(&self) -> state::Fabric {
        // SAFETY: a live QP points to its live context, whose device outlives it.
        let transport = unsafe { (*(*(*self.as_ptr()).context).device).transport_type };
        if transport == ffi::ibv_transport_type::IBV_TRANSPORT_IWARP {
            state::Fabric::Iwarp
        } else {
            state::Fabric::Ib
        }
    }

    /// The attributes of `mask`, queried from the device (`ibv_query_qp`).
    fn query_attr(&self, mask: ffi::ibv_qp_attr_mask) -> Result<ffi::ibv_qp_attr> {
        let mut attr = MaybeUninit::<ffi::ibv_qp_attr>::zeroed();
        let mut init = MaybeUninit::<ffi::ibv_qp_init_attr>::zeroed();
        let mask = i32::try_from(mask.0).unwrap_or(i32::MAX);
        // SAFETY: live QP; both outputs are valid for writes.
        let rc = unsafe { ffi::ibv_query_qp(self.as_ptr(), attr.as_mut_ptr(), mask, init.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::code("ibv_query_qp", rc));
        }
        // SAFETY: zero-initialised, then filled by the provider; zero is valid.
        Ok(unsafe { attr.assume_init() })
    }

    /// The QP's current state, queried from the device.
    pub fn query_state(&self) -> Result<QpState> {
        Ok(self.query_attr(ffi::ibv_qp_attr_mask::IBV_QP_STATE)?.qp_state.into())
    }

    /// The QP's READ and atomic depths, queried from the device:
    /// (`max_rd_atomic`, outstanding as initiator; `max_dest_rd_atomic`,
    /// as responder).
    pub fn query_rd_atomic(&self) -> Result<(u8, u8)> {
        let m = ffi::ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC | ffi::ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC;
        let a = self.query_attr(m)?;
        Ok((a.max_rd_atomic, a.max_dest_rd_atomic))
    }

    /// The remote access the QP grants its peer's requests (`qp_access_flags`),
    /// queried from the device.
    pub fn query_access(&self) -> Result<super::AccessFlags> {
        let a = self.query_attr(ffi::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS)?;
        Ok(super::AccessFlags::from_bits_retain(a.qp_access_flags))
    }

    /// Attaches this UD QP to the multicast group `gid` (LID `lid`; 0 on
    /// RoCE) so that datagrams sent to the group arrive on its receive queue
    /// (`ibv_attach_mcast`). Through the RDMA CM, the group's GID and LID
    /// are those of the `MULTICAST_JOIN` event's address vector
    /// ([`AhAttr::dgid`](super::AhAttr::dgid), [`AhAttr::as_raw`](super::AhAttr::as_raw)`().dlid`).
    ///
    /// The QP remembers its groups and detaches from those still attached
    /// when it is dropped: the kernel refuses to destroy an attached QP.
    pub fn attach_mcast(&self, gid: Gid, lid: u16) -> Result<()> {
        let raw = gid.to_raw();
        let mut groups = self.qp.groups();
        // SAFETY: live QP; the GID is read during the call.
        let rc = unsafe { ffi::ibv_attach_mcast(self.as_ptr(), &raw, lid) };
        if rc != 0 {
            return Err(Error::code("ibv_attach_mcast", rc));
        }
        if !groups.contains(&(gid, lid)) {
            groups.push((gid, lid));
        }
        Ok(())
    }

    /// Detaches this QP from a group [`attach_mcast`](Self::attach_mcast) joined (`ibv_detach_mcast`).
    pub fn detach_mcast(&self, gid: Gid, lid: u16) -> Result<()> {
        let raw = gid.to_raw();
        let mut groups = self.qp.groups();
        // SAFETY: live QP; the GID is read during the call.
        let rc = unsafe { ffi::ibv_detach_mcast(self.as_ptr(), &raw, lid) };
        if rc != 0 {
            return Err(Error::code("ibv_detach_mcast", rc));
        }
        groups.retain(|g| *g != (gid, lid));
        Ok(())
    }

    /// Brings a UD QP from RESET to RTS on `port` with Q_Key `qkey`, sending from `psn`.
    pub fn bring_up_ud(&self, port: u8, pkey_index: u16, qkey: u32, psn: u32) -> Result<()> {
        self.modify(&QpAttr::new(QpState::INIT).pkey_index(pkey_index).port(port).qkey(qkey))?;
        self.modify(&QpAttr::new(QpState::RTR))?;
        self.modify(&QpAttr::new(QpState::RTS).sq_psn(psn & 0xff_ffff))
    }

    /// Brings a raw packet QP from RESET to RTS on `port` (no address, no
    /// connection: INIT names the port, RTR and RTS nothing).
    pub fn bring_up_raw(&self, port: u8) -> Result<()> {
        self.modify(&QpAttr::new(QpState::INIT).port(port))?;
        self.modify(&QpAttr::new(QpState::RTR))?;
        self.modify(&QpAttr::new(QpState::RTS))
    }

    /// Posts send work requests, linked in place and handed to the provider
    /// with one call (one doorbell on hardware). No allocation.
    ///
    /// On failure, [`Error::Post`] says which request the provider refused;
    /// the ones before it were posted. For a refused atomic on a device
    /// without atomics (iWARP: [`Context::atomics`](super::Context::atomics))
    /// it also names the operation and `atomic_cap` (its `unsupported`, with
    /// `EOPNOTSUPP`; [`Error::is_unsupported`] is true). siw's provider
    /// reports success when it refuses a request after queueing earlier
    /// ones of the list; on siw the library reads the request it names and
    /// reports the refusal (`EINVAL`, siw's errno, unless the operation is
    /// known missing).
    ///
    /// A batch cannot outlive the entry lists it references:
    ///
    /// ```compile_fail
    /// # fn f(qp: &rrddmma::prim::Qp, mr: &rrddmma::prim::Mr) {
    /// let mut batch = Vec::new();
    /// for i in 0..4 {
    ///     let sges = [mr.sge_at(i * 64, 64)];
    ///     batch.push(rrddmma::prim::SendWr::write(&sges, mr.remote().addr_at(0)));
    /// }
    /// unsafe { qp.post_send(&mut batch) }.unwrap();
    /// # }
    /// ```
    ///
    /// # Safety
    /// Every entry of every request must lie in memory registered on this
    /// QP's PD with the access the operation needs, and stay alive and
    /// untouched until the request's completion (inline payloads are copied
    /// at the call and are exempt). UD requests' address handles must stay
    /// alive until completion too. A request still in flight when the QP
    /// is handed to `wrap::aio::LocalEndpoint::new` must have bit 63 of its
    /// `wr_id` clear (the endpoint's own requests have it set, and it
    /// passes over the completions of the others, which nobody then sees:
    /// their memory stays the device's until the QP is destroyed).
    #[inline]
    pub unsafe fn post_send(&self, wrs: &mut [SendWr<'_>]) -> Result<()> {
        let Some(head) = link_in_place!(&mut *wrs) else { return Ok(()) };
        // SAFETY: the list is linked above; the rest is the caller's contract.
        unsafe { self.post_send_raw(head) }
    }

    /// Posts a [`SendList`], linked when it was built: no linking at post
    /// time, one provider call. No allocation. On failure the error carries
    /// no index; [`SendList::refused`] says which request was refused (a
    /// refused atomic on a device without atomics: as [`Qp::post_send`]).
    ///
    /// # Safety
    /// As [`Qp::post_send`], for every request of the list.
    #[inline]
    pub unsafe fn post_send_list(&self, list: &mut SendList<'_>) -> Result<()> {
        let (head, bad) = list.parts();
        // SAFETY: live QP and its provider's entry (what `ibv_post_send`
        // calls); a `SendList` is never empty and always linked; the
        // memory is the caller's contract.
        let rc = unsafe { (self.post_send_fn)(self.as_ptr(), head, bad) };
        if rc != 0 {
            return Err(list_refused(rc));
        }
        Ok(())
    }

    /// # Safety
    /// `head` starts a valid, null-terminated list; as [`Qp::post_send`].
    #[inline(always)]
    unsafe fn post_send_raw(&self, head: *mut ffi::ibv_send_wr) -> Result<()> {
        let mut bad = ptr::null_mut();
        // SAFETY: live QP and its provider's entry (what `ibv_post_send`
        // calls); the list and its memory are the caller's contract.
        let rc = unsafe { (self.post_send_fn)(self.as_ptr(), head, &mut bad) };
        if rc != 0 {
            return Err(post_refused(Error::post("ibv_post_send", rc, head, bad), rc));
        }
        Ok(())
    }

    /// Posts receive work requests, linked in place, with one call.
    ///
    /// # Safety
    /// Every entry must lie in memory registered on this QP's PD with local
    /// write access, alive and untouched until its completion. A receive
    /// still in flight when the QP is handed to
    /// `wrap::aio::LocalEndpoint::new` must have bit 63 of its `wr_id`
    /// clear, as with [`Qp::post_send`].
    #[inline]
    pub unsafe fn post_recv(&self, wrs: &mut [RecvWr<'_>]) -> Result<()> {
        let Some(head) = link_in_place!(&mut *wrs) else { return Ok(()) };
        let mut bad = ptr::null_mut();
        // SAFETY: live QP and its provider's entry (what `ibv_post_recv`
        // calls); the list is linked above; memory is the caller's contract.
        let rc = unsafe { (self.post_recv_fn)(self.as_ptr(), head, &mut bad) };
        if rc != 0 {
            return Err(Error::post("ibv_post_recv", rc, head, bad));
        }
        Ok(())
    }

    /// Posts a [`RecvList`], linked when it was built: no linking at post
    /// time, one provider call. No allocation. On failure the error carries
    /// no index; [`RecvList::refused`] says which request was refused.
    ///
    /// # Safety
    /// As [`Qp::post_recv`], for every request of the list.
    #[inline]
    pub unsafe fn post_recv_list(&self, list: &mut RecvList<'_>) -> Result<()> {
        let (head, bad) = list.parts();
        // SAFETY: live QP and its provider's entry (what `ibv_post_recv`
        // calls); a `RecvList` is never empty and always linked; the memory
        // is the caller's contract.
        let rc = unsafe { (self.post_recv_fn)(self.as_ptr(), head, bad) };
        if rc != 0 {
            return Err(Error::post_list("ibv_post_recv", rc));
        }
        Ok(())
    }

    /// The CQs its send and receive queues complete to.
    #[cfg(feature = "tokio")]
    pub(crate) fn cqs(&self) -> (&Cq, &Cq) {
        (&self._send_cq, &self._recv_cq)
    }

    /// Whether it receives through an SRQ.
    #[cfg(feature = "tokio")]
    pub(crate) fn has_srq(&self) -> bool {
        self._srq.is_some()
    }
}

/// What [`Owned`] needs to destroy a QP; its parents are fields of [`Qp`]
/// after the handle.
#[derive(Default)]
pub(crate) struct QpHandle {
    /// Multicast groups attached with [`Qp::attach_mcast`] and not yet
    /// detached: the kernel refuses (`EBUSY`) to destroy an attached QP.
    groups: Mutex<Vec<(Gid, u16)>>,
}

impl QpHandle {
    /// The attached groups, locked (a poisoned lock still holds a valid list).
    fn groups(&self) -> MutexGuard<'_, Vec<(Gid, u16)>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

// SAFETY: `ibv_destroy_qp` releases what `ibv_create_qp(_ex)` (or the
// mlx5dv / experimental create verbs) made; posting and modifying go through
// the provider, which locks the QP.
unsafe impl Destroy for QpHandle {
    type Raw = ffi::ibv_qp;
    const VERB: &'static str = "ibv_destroy_qp";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_qp>) -> i32 {
        let groups = std::mem::take(self.groups.get_mut().unwrap_or_else(PoisonError::into_inner));
        for (gid, lid) in groups {
            let g = gid.to_raw();
            // SAFETY: the caller's contract: a live QP, attached to this group.
            // A failure shows as the destroy's EBUSY below.
            let _ = unsafe { ffi::ibv_detach_mcast(raw.as_ptr(), &g, lid) };
        }
        // SAFETY: the caller's contract.
        let rc = unsafe { ffi::ibv_destroy_qp(raw.as_ptr()) };
        if rc != 0 {
            // The QP lives on: move it to ERR, which flushes its posted
            // requests, so that the device no longer writes into the
            // buffers they named (the caller frees them after this drop).
            let mut attr = ffi::ibv_qp_attr { qp_state: ffi::ibv_qp_state::IBV_QPS_ERR, ..Default::default() };
            // SAFETY: the live QP; `attr` is valid for the call.
            let _ =
                unsafe { ffi::ibv_modify_qp(raw.as_ptr(), &mut attr, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) };
        }
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider entry that refuses the second request of the list.
    ///
    /// # Safety
    /// `wr` a valid list of at least one request, `bad` valid for writes.
    unsafe extern "C" fn refuse_second(
        _qp: *mut ffi::ibv_qp,
        wr: *mut ffi::ibv_send_wr,
        bad: *mut *mut ffi::ibv_send_wr,
    ) -> i32 {
        // SAFETY: the test's list of two requests and its slot.
        unsafe { *bad = (*wr).next };
        libc::EINVAL
    }

    /// siw's way: the second request refused, and 0 returned.
    ///
    /// # Safety
    /// As [`refuse_second`].
    unsafe extern "C" fn hide_second(
        qp: *mut ffi::ibv_qp,
        wr: *mut ffi::ibv_send_wr,
        bad: *mut *mut ffi::ibv_send_wr,
    ) -> i32 {
        // SAFETY: as `refuse_second`.
        unsafe { refuse_second(qp, wr, bad) };
        0
    }

    /// Posts a WRITE then `second` through [`no_atomics_post_send`] on a
    /// stand-in QP whose provider entry is `entry`: the error as the posts
    /// make it.
    fn post_two(entry: PostSendFn, siw: bool, second: ffi::ibv_wr_opcode) -> Error {
        // SAFETY: plain C structs; null pointers and `None` entries are valid.
        let mut dev: ffi::ibv_device = unsafe { std::mem::zeroed() };
        for (d, &b) in dev.name.iter_mut().zip(b"stand0") {
            *d = b as std::ffi::c_char;
        }
        // SAFETY: as above.
        let mut ctx: ffi::ibv_context = unsafe { std::mem::zeroed() };
        ctx.device = &mut dev;
        ctx.ops.post_send = Some(entry);
        // SAFETY: as above.
        let mut qp: ffi::ibv_qp = unsafe { std::mem::zeroed() };
        qp.context = &mut ctx;
        // SAFETY: as above.
        let mut wrs: [ffi::ibv_send_wr; 2] = unsafe { std::mem::zeroed() };
        wrs[0].opcode = ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        wrs[1].opcode = second;
        let head = wrs.as_mut_ptr();
        // SAFETY: both in `wrs`, written through the pointer the post takes.
        unsafe { (*head).next = head.add(1) };
        let mut bad = ptr::null_mut();
        let post = if siw { no_atomics_post_send::<true> } else { no_atomics_post_send::<false> };
        // SAFETY: the stand-in QP's context has the entry; the list and the slot are valid.
        let rc = unsafe { post(&mut qp, head, &mut bad) };
        assert_ne!(rc, 0, "the stand-in refuses the second request");
        post_refused(Error::post("ibv_post_send", rc, head, bad), rc)
    }

    #[test]
    fn a_refused_atomic_on_a_device_without_atomics_names_the_operation_others_keep_the_errno() {
        for siw in [false, true] {
            let entry: PostSendFn = if siw { hide_second } else { refuse_second };
            for (opcode, name) in [
                (ffi::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD, "IBV_WR_ATOMIC_FETCH_AND_ADD"),
                (ffi::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP, "IBV_WR_ATOMIC_CMP_AND_SWP"),
            ] {
                match post_two(entry, siw, opcode) {
                    Error::Post { errno, index: Some(1), unsupported: Some(what), .. } => {
                        assert_eq!(errno, libc::EOPNOTSUPP, "{name}, siw {siw}");
                        assert!(what.missing.feature == name && what.value == "atomic_cap = IBV_ATOMIC_NONE", "{what}");
                        // The QP the entry refused names the device (`REFUSING_QP`).
                        assert_eq!(what.device, "stand0", "the stand-in's device");
                    }
                    e => panic!("{name}, siw {siw}: {e:?}"),
                }
            }
            match post_two(entry, siw, ffi::ibv_wr_opcode::IBV_WR_RDMA_READ) {
                Error::Post { errno: libc::EINVAL, index: Some(1), unsupported: None, .. } => {}
                e => panic!("READ, siw {siw}: {e:?}"),
            }
        }
        // A list's error (the list keeps the index) is read the same way.
        let e = list_refused(REFUSED_COMPARE_SWAP);
        assert!(
            matches!(&e, Error::Post { errno: libc::EOPNOTSUPP, unsupported: Some(w), .. } if w.missing.feature == "IBV_WR_ATOMIC_CMP_AND_SWP"),
            "{e:?}"
        );
        let e = list_refused(libc::ENOMEM);
        assert!(matches!(e, Error::Post { errno: libc::ENOMEM, unsupported: None, .. }), "{e:?}");
    }
}
