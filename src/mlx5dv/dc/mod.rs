//! DC transport: DC targets ([`Dct`]), DC initiators ([`Dci`]) and requests
//! addressed to a target ([`DctAddr`]), with one API whatever the linkage.
//!
//! A DC program through libibverbs ([`Dci::post`], [`DciBatch`]) compiles,
//! and means the same, with rdma-core (`mlx5dv_*`) and with MLNX_OFED 4.x
//! (cfg `rrddmma_mlnx_ofed4`, the experimental verbs `ibv_exp_*`): the
//! types, constructors and methods below are the same in both builds; only
//! what is behind them differs, and the DCI streams are
//! [`Error::Unsupported`](crate::prim::Error::Unsupported) with 4.x. The
//! direct view, `Dci::sq_ring`, and with it the typed DC builders, exist
//! with rdma-core only (4.x builds have no direct views). The example below
//! is the direct path: from [`Dct::create`] to a posted WRITE, with no
//! `unsafe` beyond the views' contract (the queues are theirs alone) and
//! the memory one (the WQE's buffer registered and alive).
//!
//! ```no_run
//! use rrddmma::mlx5dv::av::AddressVector;
//! use rrddmma::mlx5dv::dc::{Dci, DciOpts, Dct, DctOpts};
//! use rrddmma::mlx5dv::{cqe::Completion, mmio::HwMmio, obj, seg::CtrlFlags};
//! use rrddmma::prim::{AccessFlags, Ah, AhAttr, Context, Cq, Pd, QpCaps, RemoteAddr, Srq};
//! # fn main() -> rrddmma::prim::Result<()> {
//! let ctx = Context::open_first()?;
//! let (pd, cq) = (Pd::alloc(&ctx)?, Cq::create(&ctx, 64)?);
//! let srq = Srq::builder(&pd).max_wr(16).build()?;
//! // A ready target: created and brought up in one call.
//! let dct = Dct::create(&pd, &cq, &srq, 0x1234, &DctOpts::default().access(AccessFlags::REMOTE_WRITE))?;
//! let dci = Dci::create(&pd, &cq, &cq, QpCaps::default())?;
//! dci.connect(&DciOpts::default())?;
//! let ah = Ah::create(&pd, &AhAttr::lid(1, ctx.query_port(1)?.lid()))?;
//! // The DC address of the target: the AH's path, the DCT number and key.
//! let target = AddressVector::of(&ah)?.dc(dct.dctn(), dct.key());
//! # let (lkey, addr, remote) = (0, 0, RemoteAddr { addr: 0, rkey: 0 });
//! // SAFETY: the CQ and the DCI's send queue are used through these views alone.
//! let mut dcq = unsafe { obj::cq_ring(&cq)? };
//! // SAFETY: as above; the DCI's queue is idle.
//! let mut sq = unsafe { dci.sq_ring(&dcq)? };
//! // A typed DC WRITE on stream 0: control segment, DC address, remote address.
//! let w = sq.dc(&target).write(CtrlFlags::CQ_UPDATE, remote);
//! // SAFETY: `addr..addr + 64` is registered with `lkey` and outlives the completion.
//! unsafe { w.data(64, lkey, addr) }.post(&mut HwMmio);
//! let mut out = [Completion::default()];
//! while dcq.poll(&mut out) == 0 {}
//! assert!(sq.retire(&out[0]));
//! # Ok(()) }
//! ```
//!
//! Without the direct view (and with MLNX_OFED 4.x, which has none), the
//! same WRITE goes through libibverbs' extended post:
//! `dci.post(&SendWr::write(&sges, remote), &DctAddr::new(&ah, dct.dctn(), dct.key()))`.
//!
//! | | rdma-core | MLNX_OFED 4.x |
//! |---|---|---|
//! | [`Dct::create`] | `mlx5dv_create_qp` (`MLX5DV_DCTYPE_DCT`), then `ibv_modify_qp` RESET → INIT → RTR | `ibv_exp_create_dct`, which takes every option at creation |
//! | [`Dci::create`] | `mlx5dv_create_qp` (`MLX5DV_DCTYPE_DCI`) with the send operations of [`SendOps::BASIC`](crate::prim::SendOps::BASIC) | `ibv_exp_create_qp` (`IBV_EXP_QPT_DC_INI`) |
//! | [`Dci::connect`], [`Dci::modify`] | `ibv_modify_qp` | `ibv_exp_modify_qp`; [`DciOpts::key`] is also given at INIT (`IBV_EXP_QP_DC_KEY`) |
//! | [`DciBatch::post`] | `ibv_wr_*` + `mlx5dv_wr_set_dc_addr`; [`DciBatch::complete`] rings one doorbell | `ibv_exp_post_send` of one `ibv_exp_send_wr` per request, each with its own doorbell; `complete` has nothing left to do |
//! | completions | [`Cq::poll`] into [`Wc`](crate::prim::Wc) | the same (`ibv_poll_cq`); `exp4::ExpCq` adds timestamps |
//! | [`DctOpts::sl`] | honoured (address vector at RTR) | `ibv_exp_dct_init_attr` has no service level: a value other than 0 is [`Error::Unsupported`](crate::prim::Error::Unsupported) |
//! | [`DctOpts::pkey_index`] | any `u16` | at most 255 (a `u8` in `ibv_exp_dct_init_attr`), else [`Error::Unsupported`](crate::prim::Error::Unsupported) |
//! | DCI streams | [`Dci::create_with_streams`], [`dci_stream_caps`], [`DciBatch::post_stream`] (`mlx5dv_wr_set_dc_addr_stream`), [`Dci::reset_stream`] (`mlx5dv_dci_stream_id_reset`) | [`Error::Unsupported`](crate::prim::Error::Unsupported) (stream 0 of `post_stream` posts as `post`) |
//! | direct view | `Dci::sq_ring`: the typed DC builders ([`SqRing::dc`](crate::mlx5dv::queue::sq::SqRing::dc)) | none |
//! | masked atomics | the typed DC builders (`Dc::masked_cas`, `masked_fa`, the 16- and 32-byte `masked_cas_ext`, `masked_fa_ext`) on the direct view | also `Dci::post_masked` (4.x builds only) |
//!
//! On a device that is not mlx5 (rdma-core), or a context without the
//! experimental verbs (4.x), [`Dct::create`] and [`Dci::create`] return
//! [`Error::Unsupported`](crate::prim::Error::Unsupported) before the provider is asked anything else.
//!
//! # References
//! `mlx5dv_create_qp(3)`, `mlx5dv_wr_set_dc_addr(3)`, `mlx5dv_dci_stream_id_reset(3)`; MLNX_OFED 4.x
//! `ibv_exp_create_dct(3)`, `ibv_exp_create_qp(3)`, `ibv_exp_post_send(3)`.

use std::fmt;

#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::prim::WrBatch;
use crate::prim::{AccessFlags, AhAttr, Context, Cq, Gid, Mtu, Pd, Qp, QpAttr, QpCaps, QpState, Result};
use crate::prim::{Ah, SendWr, Srq};

/// How a DC target is set up; every field applies in both builds (see
/// the module's table for the two limits of MLNX_OFED 4.x).
///
/// | field | default | |
/// |---|---|---|
/// | `port` | 1 | |
/// | `gid_index` | `None` | on an Ethernet port, the port's RoCE v2 GID ([`Context::roce_v2_gid_index`]); on InfiniBand no GRH unless set |
/// | `pkey_index` | 0 | |
/// | `mtu` | `MTU_1024` | every RoCE and InfiniBand port carries it; raise it to the port's active MTU for bandwidth |
/// | `access` | empty | as [`ConnectOpts`](crate::prim::ConnectOpts): grant `REMOTE_WRITE`, `REMOTE_READ`, `REMOTE_ATOMIC` as initiators need |
/// | `min_rnr_timer` | 12 | 0.64 ms |
/// | `hop_limit` | 64 | |
/// | `traffic_class` | 0 | |
/// | `flow_label` | 0 | |
/// | `sl` | 0 | |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DctOpts {
    /// Local port number.
    pub(crate) port: u8,
    /// Local GID index; `None` chooses as described on the type.
    pub(crate) gid_index: Option<u8>,
    /// P_Key index.
    pub(crate) pkey_index: u16,
    /// Path MTU.
    pub(crate) mtu: Mtu,
    /// Remote access the target grants (`IBV_ACCESS_REMOTE_*`).
    pub(crate) access: AccessFlags,
    /// Minimum RNR NAK timer code.
    pub(crate) min_rnr_timer: u8,
    /// Hop limit of the GRH.
    pub(crate) hop_limit: u8,
    /// Traffic class (RoCE: DSCP/ECN byte).
    pub(crate) traffic_class: u8,
    /// Flow label of the GRH (20 bits).
    pub(crate) flow_label: u32,
    /// Service level (rdma-core only: MLNX_OFED 4.x refuses a value other than 0).
    pub(crate) sl: u8,
}

impl Default for DctOpts {
    fn default() -> DctOpts {
        DctOpts {
            port: 1,
            gid_index: None,
            pkey_index: 0,
            mtu: Mtu::MTU_1024,
            access: AccessFlags::empty(),
            min_rnr_timer: 12,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            sl: 0,
        }
    }
}

impl DctOpts {
    setters! {
        /// Local port number.
        const port: u8;
        /// Local GID index; `None` chooses as described on the type.
        const gid_index: Option<u8>;
        /// P_Key index.
        const pkey_index: u16;
        /// Path MTU.
        const mtu: Mtu;
        /// Remote access the target grants (`IBV_ACCESS_REMOTE_*`).
        const access: AccessFlags;
        /// Minimum RNR NAK timer code.
        const min_rnr_timer: u8;
        /// Hop limit of the GRH.
        const hop_limit: u8;
        /// Traffic class (RoCE: DSCP/ECN byte).
        const traffic_class: u8;
        /// Flow label of the GRH (20 bits).
        const flow_label: u32;
        /// Service level (rdma-core only: MLNX_OFED 4.x refuses a value other than 0).
        const sl: u8;
    }
}

/// How [`Dci::connect`] brings a DC initiator to RTS; every field applies
/// in both builds.
///
/// | field | default | |
/// |---|---|---|
/// | `port` | 1 | |
/// | `gid_index` | `None` | as [`DctOpts`] |
/// | `pkey_index` | 0 | |
/// | `mtu` | `MTU_1024` | |
/// | `timeout` | 14 | 4.096 µs × 2^14 ≈ 67 ms per try |
/// | `retry_cnt` | 7 | |
/// | `rnr_retry` | 7 | retry forever while the target's SRQ is empty |
/// | `max_rd_atomic` | 1 | READs/atomics in flight |
/// | `hop_limit` | 64 | |
/// | `traffic_class` | 0 | |
/// | `sl` | 0 | |
/// | `key` | 0 | MLNX_OFED 4.x sets it at INIT (`IBV_EXP_QP_DC_KEY`); rdma-core has no such attribute. In both builds each request carries its target's key ([`DctAddr`]) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DciOpts {
    /// Local port number.
    pub(crate) port: u8,
    /// Local GID index; `None` chooses as for [`DctOpts`].
    pub(crate) gid_index: Option<u8>,
    /// P_Key index.
    pub(crate) pkey_index: u16,
    /// Path MTU.
    pub(crate) mtu: Mtu,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout.
    pub(crate) timeout: u8,
    /// Transport retries (0..=7).
    pub(crate) retry_cnt: u8,
    /// RNR retries (7: infinite).
    pub(crate) rnr_retry: u8,
    /// Outstanding RDMA READ / atomic operations.
    pub(crate) max_rd_atomic: u8,
    /// Hop limit of the GRH.
    pub(crate) hop_limit: u8,
    /// Traffic class (RoCE: DSCP/ECN byte).
    pub(crate) traffic_class: u8,
    /// Service level.
    pub(crate) sl: u8,
    /// DC access key given at INIT under MLNX_OFED 4.x (ignored with rdma-core).
    pub(crate) key: u64,
}

impl Default for DciOpts {
    fn default() -> DciOpts {
        DciOpts {
            port: 1,
            gid_index: None,
            pkey_index: 0,
            mtu: Mtu::MTU_1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
            hop_limit: 64,
            traffic_class: 0,
            sl: 0,
            key: 0,
        }
    }
}

impl DciOpts {
    setters! {
        /// Local port number.
        const port: u8;
        /// Local GID index; `None` chooses as for [`DctOpts`].
        const gid_index: Option<u8>;
        /// P_Key index.
        const pkey_index: u16;
        /// Path MTU.
        const mtu: Mtu;
        /// Local ACK timeout exponent: 4.096 µs × 2^timeout.
        const timeout: u8;
        /// Transport retries (0..=7).
        const retry_cnt: u8;
        /// RNR retries (7: infinite).
        const rnr_retry: u8;
        /// Outstanding RDMA READ / atomic operations.
        const max_rd_atomic: u8;
        /// Hop limit of the GRH.
        const hop_limit: u8;
        /// Traffic class (RoCE: DSCP/ECN byte).
        const traffic_class: u8;
        /// Service level.
        const sl: u8;
        /// DC access key given at INIT under MLNX_OFED 4.x (ignored with rdma-core).
        const key: u64;
    }
}

/// The address vector both DC objects take at RTR: the port, and a GRH from
/// the chosen GID index on Ethernet (or when a GID index is given).
fn path(ctx: &Context, port: u8, gid_index: Option<u8>, hop_limit: u8, tclass: u8, sl: u8) -> Result<AhAttr> {
    let ethernet = ctx.query_port(port)?.is_ethernet();
    let index = match gid_index {
        Some(i) => Some(i),
        None if ethernet => Some(ctx.roce_v2_gid_index(port)?),
        None => None,
    };
    let av = match index {
        Some(i) => AhAttr::global(port, i, Gid::default()).hop_limit(hop_limit).traffic_class(tclass),
        None => AhAttr::lid(port, 0),
    };
    Ok(av.sl(sl))
}

/// Where a DCI request goes: an address handle to the target's port, its
/// DCT number and access key.
#[derive(Debug, Clone, Copy)]
pub struct DctAddr<'a> {
    /// Address handle for the target's port.
    pub ah: &'a Ah,
    /// DCT number ([`Dct::dctn`] at the target).
    pub dctn: u32,
    /// DC access key ([`Dct::key`] at the target).
    pub key: u64,
}

impl<'a> DctAddr<'a> {
    /// The target `dctn` with access key `key`, reached through `ah`.
    pub fn new(ah: &'a Ah, dctn: u32, key: u64) -> DctAddr<'a> {
        DctAddr { ah, dctn, key }
    }
}

/// A DC target, ready from [`Dct::create`] on: receives on its SRQ and
/// completes on its CQ; any DCI holding its number and key can reach it.
pub struct Dct {
    #[cfg(not(rrddmma_mlnx_ofed4))]
    qp: Qp,
    #[cfg(rrddmma_mlnx_ofed4)]
    raw: std::ptr::NonNull<crate::bindings::exp4::ibv_exp_dct>,
    #[cfg(rrddmma_mlnx_ofed4)]
    _parents: (Pd, Cq, Srq),
    key: u64,
}

// SAFETY: the DCT is only read (its number) and destroyed, which
// libibverbs serialises under the context's mutex (4.x); with rdma-core it
// is a QP, `Send` and `Sync` as any.
unsafe impl Send for Dct {}
// SAFETY: as above.
unsafe impl Sync for Dct {}

#[cfg(rrddmma_mlnx_ofed4)]
#[cfg_attr(docsrs, doc(cfg(rrddmma_mlnx_ofed4)))]
impl Drop for Dct {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_exp_create_dct`, destroyed once.
        let rc = unsafe { crate::bindings::exp4::ibv_exp_destroy_dct(self.raw.as_ptr()) };
        if rc != 0 {
            crate::prim::count_destroy_failure("ibv_exp_destroy_dct", rc);
        }
    }
}

impl fmt::Debug for Dct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dct").field("dctn", &self.dctn()).field("key", &self.key).finish()
    }
}

impl Dct {
    /// Creates a DC target with access key `key` on `srq`, completing on
    /// `cq`, and brings it up with `opts`: the result is ready for requests.
    ///
    /// [`Error::Unsupported`](crate::prim::Error::Unsupported) on a device that is not mlx5 (rdma-core) or a
    /// context without the experimental verbs (MLNX_OFED 4.x), or for an
    /// option the build cannot honour (the module's table).
    ///
    /// # References
    /// rdma-core: `mlx5dv_create_qp(3)` with `MLX5DV_DCTYPE_DCT`, then
    /// `ibv_modify_qp(3)` to INIT (P_Key index, port, access) and RTR (path
    /// MTU, address vector, minimum RNR timer). MLNX_OFED 4.x:
    /// `ibv_exp_create_dct(3)`.
    ///
    /// # Panics
    /// If `srq` is a tag-matching SRQ and `cq` was not built with
    /// [`CqBuilder::tag_matching`](crate::prim::CqBuilder::tag_matching) (a
    /// programming error: its classic poller would misread the receives).
    pub fn create(pd: &Pd, cq: &Cq, srq: &Srq, key: u64, opts: &DctOpts) -> Result<Dct> {
        Srq::check_tm_recv_cq("Dct::create", Some(srq), cq);
        imp::create_dct(pd, cq, srq, key, opts)
    }

    /// The DCT number initiators address ([`DctAddr::dctn`]).
    pub fn dctn(&self) -> u32 {
        #[cfg(not(rrddmma_mlnx_ofed4))]
        return self.qp.qpn();
        #[cfg(rrddmma_mlnx_ofed4)]
        // SAFETY: live while `self` is.
        return unsafe { self.raw.as_ref() }.dct_num;
    }

    /// The access key initiators present ([`DctAddr::key`]).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The raw target: the DCT's `ibv_qp` with rdma-core, its
    /// `ibv_exp_dct` with MLNX_OFED 4.x (the one item whose type differs).
    #[cfg(not(rrddmma_mlnx_ofed4))]
    #[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
    pub fn as_ptr(&self) -> *mut crate::bindings::ibv_qp {
        self.qp.as_ptr()
    }

    /// The raw target: the DCT's `ibv_qp` with rdma-core, its
    /// `ibv_exp_dct` with MLNX_OFED 4.x (the one item whose type differs).
    #[cfg(rrddmma_mlnx_ofed4)]
    #[cfg_attr(docsrs, doc(cfg(rrddmma_mlnx_ofed4)))]
    pub fn as_ptr(&self) -> *mut crate::bindings::exp4::ibv_exp_dct {
        self.raw.as_ptr()
    }
}

/// A DC initiator: sends to any DC target, each request addressed with a
/// [`DctAddr`].
pub struct Dci {
    qp: Qp,
    #[cfg(not(rrddmma_mlnx_ofed4))]
    mqp: std::ptr::NonNull<crate::bindings::mlx5dv_qp_ex>,
    /// The streams it was created with ([`Dci::create_with_streams`]).
    streams: Option<DciStreams>,
}

/// The streams of a DC initiator (`struct mlx5dv_dci_streams`): up to
/// `2^log_num_concurrent` streams run at once, each with its own ordering
/// and its own error state, and up to `2^log_num_errored` of them may be in
/// error at once before the DCI itself goes to error. A WQE names its
/// stream ([`DciBatch::post_stream`], [`Dc::stream`](crate::mlx5dv::queue::wqe::Dc::stream)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DciStreams {
    /// log2 of the streams that run at once (`log_num_concurent`).
    pub log_num_concurrent: u8,
    /// log2 of the streams that may be in error at once (`log_num_errored`).
    pub log_num_errored: u8,
}

/// What a device offers for DCI streams (`mlx5dv_query_device`'s
/// `dci_streams_caps`): the largest [`DciStreams`] it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DciStreamCaps {
    /// Largest [`DciStreams::log_num_concurrent`] (`max_log_num_concurent`).
    pub max_log_num_concurrent: u8,
    /// Largest [`DciStreams::log_num_errored`] (`max_log_num_errored`).
    pub max_log_num_errored: u8,
}

/// The device's DCI stream capabilities (`mlx5dv_query_device`,
/// `MLX5DV_CONTEXT_MASK_DCI_STREAMS`).
///
/// [`Error::Unsupported`](crate::prim::Error::Unsupported) on a device that
/// is not mlx5, when the library reports no stream caps (a libmlx5 or
/// kernel without DCI streams), and with MLNX_OFED 4.x (no DCI streams).
pub fn dci_stream_caps(ctx: &Context) -> Result<DciStreamCaps> {
    imp::dci_stream_caps(ctx)
}

// SAFETY: posting is serialised by the provider's lock, as for any QP; the
// mlx5 view is only used under it.
unsafe impl Send for Dci {}
// SAFETY: as above.
unsafe impl Sync for Dci {}

impl fmt::Debug for Dci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dci").field("qpn", &self.qp.qpn()).finish()
    }
}

impl Dci {
    /// Creates a DC initiator with room for `caps` (its receive side is
    /// unused); bring it up with [`Dci::connect`].
    ///
    /// [`Error::Unsupported`](crate::prim::Error::Unsupported) on a device that is not mlx5 (rdma-core) or a
    /// context without the experimental verbs (MLNX_OFED 4.x).
    ///
    /// # References
    /// rdma-core: `mlx5dv_create_qp(3)` with `MLX5DV_DCTYPE_DCI` and the
    /// send operations of [`SendOps::BASIC`](crate::prim::SendOps::BASIC).
    /// MLNX_OFED 4.x: `ibv_exp_create_qp(3)` with `IBV_EXP_QPT_DC_INI`.
    pub fn create(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Dci> {
        imp::create_dci(pd, send_cq, recv_cq, caps, None)
    }

    /// Creates a DC initiator with `streams` (`MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`,
    /// `dc_init_attr.dci_streams`); otherwise as [`Dci::create`].
    ///
    /// [`Error::CapExceeded`](crate::prim::Error::CapExceeded) naming the
    /// capability when `streams` asks beyond the device's
    /// [`dci_stream_caps`] (checked here, before libmlx5, which would fail
    /// with a bare `EINVAL`); [`Error::Unsupported`](crate::prim::Error::Unsupported)
    /// as [`dci_stream_caps`] (a device that is not mlx5, no stream caps,
    /// MLNX_OFED 4.x).
    ///
    /// # References
    /// `mlx5dv_create_qp(3)` (`dci_streams`), `mlx5dv_query_device(3)`
    /// (`dci_streams_caps`).
    pub fn create_with_streams(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps, streams: DciStreams) -> Result<Dci> {
        let have = dci_stream_caps(pd.context())?;
        let over = |what, asked: u8, limit: u8| {
            (asked > limit).then_some(crate::prim::Error::CapExceeded {
                what,
                asked: u64::from(asked),
                limit: u64::from(limit),
            })
        };
        let c = over(
            "DciStreams::log_num_concurrent (dci_streams_caps.max_log_num_concurent)",
            streams.log_num_concurrent,
            have.max_log_num_concurrent,
        );
        let e = over(
            "DciStreams::log_num_errored (dci_streams_caps.max_log_num_errored)",
            streams.log_num_errored,
            have.max_log_num_errored,
        );
        if let Some(err) = c.or(e) {
            return Err(err);
        }
        imp::create_dci(pd, send_cq, recv_cq, caps, Some(streams))
    }

    /// The streams the DCI was created with (`None`: one stream, 0).
    pub fn streams(&self) -> Option<DciStreams> {
        self.streams
    }

    /// Brings stream `id`, in error after an error completion of one of its
    /// WQEs ([`SqRing::stream_of`](crate::mlx5dv::queue::sq::SqRing::stream_of) names it),
    /// back to work while the DCI's other streams go on
    /// (`mlx5dv_dci_stream_id_reset`, a firmware command).
    ///
    /// [`Error::Unsupported`](crate::prim::Error::Unsupported) with MLNX_OFED
    /// 4.x, or when libmlx5 lacks the entry; the device's refusal (a DCI
    /// without streams, a stream not in error) as [`Error::Verbs`](crate::prim::Error::Verbs).
    ///
    /// # References
    /// `mlx5dv_dci_stream_id_reset(3)`.
    pub fn reset_stream(&self, id: u16) -> Result<()> {
        imp::reset_stream(self, id)
    }

    /// A direct view of the DCI's send queue whose typed builders are the
    /// DC ones ([`SqRing::dc`](crate::mlx5dv::queue::sq::SqRing::dc), forwarded by
    /// [`DirectSq::dc`](crate::mlx5dv::queue::obj::DirectSq::dc)): from here a DC WRITE,
    /// READ, atomic or SEND is built and posted without the raw writer,
    /// `cq` being a view of the DCI's send CQ ([`cq_ring`](crate::mlx5dv::queue::obj::cq_ring)).
    ///
    /// [`Error::Unsupported`] as [`obj::sq_ring`](crate::mlx5dv::queue::obj::sq_ring).
    ///
    /// # Safety
    /// As [`obj::sq_ring`](crate::mlx5dv::queue::obj::sq_ring): the queue idle when the
    /// view is made, posted through the view alone while it lives (no
    /// [`Dci::post`], [`Dci::batch`]) and never through libibverbs after
    /// it; every WQE's memory registered, alive and untouched until its
    /// completion ([`Wqe::data`](crate::mlx5dv::queue::wqe::Wqe::data)).
    ///
    /// # Panics
    /// As [`obj::sq_ring`](crate::mlx5dv::queue::obj::sq_ring) (`cq` not the DCI's send
    /// CQ, a second view).
    ///
    /// [`Error::Unsupported`]: crate::prim::Error::Unsupported
    #[cfg(not(rrddmma_mlnx_ofed4))]
    #[cfg_attr(docsrs, doc(cfg(not(rrddmma_mlnx_ofed4))))]
    pub unsafe fn sq_ring(
        &self,
        cq: &crate::mlx5dv::queue::obj::DirectCq<'_>,
    ) -> Result<crate::mlx5dv::queue::obj::DirectSq<'_>> {
        // SAFETY: forwarded contract.
        let mut sq = unsafe { crate::mlx5dv::queue::obj::sq_ring(&self.qp, cq) }?;
        // SAFETY: this QP is a DC initiator.
        unsafe { sq.set_dc_initiator(self.streams.map(|st| st.log_num_concurrent)) };
        Ok(sq)
    }

    /// Brings the DCI from RESET through INIT (P_Key index, port; with
    /// MLNX_OFED 4.x also the DC key) and RTR (path MTU, address vector) to
    /// RTS (timeout, retries, PSN 0, outstanding READs/atomics).
    pub fn connect(&self, o: &DciOpts) -> Result<()> {
        let ctx = self.qp.pd().context();
        let av = path(ctx, o.port, o.gid_index, o.hop_limit, o.traffic_class, o.sl)?;
        imp::dci_init(self, o)?;
        self.modify(&QpAttr::new(QpState::RTR).path_mtu(o.mtu).av(&av))?;
        self.modify(
            &QpAttr::new(QpState::RTS)
                .timeout(o.timeout)
                .retry_cnt(o.retry_cnt)
                .rnr_retry(o.rnr_retry)
                .sq_psn(0)
                .max_rd_atomic(o.max_rd_atomic),
        )
    }

    /// Moves the DCI with `attr` (any transition, for what
    /// [`Dci::connect`] does not cover). With MLNX_OFED 4.x the attributes
    /// go through `ibv_exp_modify_qp`.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        imp::dci_modify(self, attr)
    }

    /// The DCI's QP number.
    pub fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    /// The DCI's state, queried from the device ([`Qp::query_state`]).
    pub fn query_state(&self) -> Result<QpState> {
        self.qp.query_state()
    }

    /// The raw QP, for verbs this crate does not wrap.
    pub fn as_ptr(&self) -> *mut crate::bindings::ibv_qp {
        self.qp.as_ptr()
    }

    /// The underlying QP.
    ///
    /// # Safety
    /// Nothing may be posted through the returned QP (`post_send`,
    /// `post_send_list`, `wr_batch`): a DCI request needs a DC address,
    /// which only [`Dci::post`], [`DciBatch::post`] / [`DciBatch::post_stream`]
    /// and the DC builders of the direct view (`Dci::sq_ring`) set; and a
    /// direct view of it made with [`obj::sq_ring`](crate::mlx5dv::queue::obj::sq_ring)
    /// is a `Datagram` ring, without the DC builders (`Dci::sq_ring` makes
    /// the DCI's).
    pub unsafe fn qp(&self) -> &Qp {
        &self.qp
    }

    /// Opens a batch of requests, each to its own DC target.
    ///
    /// # Safety
    /// As [`Qp::wr_batch`]: every request added names registered memory,
    /// alive and untouched until its completion.
    #[inline]
    pub unsafe fn batch(&self) -> DciBatch<'_> {
        #[cfg(not(rrddmma_mlnx_ofed4))]
        return DciBatch {
            // SAFETY: forwarded contract; a DCI always has send ops.
            inner: unsafe { self.qp.wr_batch() },
            mqp: self.mqp,
            streams: self.streams.map_or(1, |st| 1 << st.log_num_concurrent),
        };
        #[cfg(rrddmma_mlnx_ofed4)]
        return DciBatch { qp: &self.qp };
    }

    /// Posts one request to `to` (a batch of one: [`Dci::batch`],
    /// [`DciBatch::post`], [`DciBatch::complete`]).
    ///
    /// # Safety
    /// As [`DciBatch::post`].
    #[inline]
    pub unsafe fn post(&self, wr: &SendWr<'_>, to: &DctAddr<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        let mut b = unsafe { self.batch() };
        // SAFETY: forwarded contract.
        unsafe { b.post(wr, to) }?;
        b.complete()
    }
}

/// An open batch of a [`Dci`]. Dropped without [`DciBatch::complete`], the
/// requests not yet handed to the device are dropped (rdma-core: all of
/// them; MLNX_OFED 4.x posts each at once, so none).
#[derive(Debug)]
pub struct DciBatch<'q> {
    #[cfg(not(rrddmma_mlnx_ofed4))]
    inner: WrBatch<'q>,
    #[cfg(not(rrddmma_mlnx_ofed4))]
    mqp: std::ptr::NonNull<crate::bindings::mlx5dv_qp_ex>,
    /// The stream ids requests may name: `0..streams`.
    #[cfg(not(rrddmma_mlnx_ofed4))]
    streams: u32,
    #[cfg(rrddmma_mlnx_ofed4)]
    qp: &'q Qp,
}

impl<'q> DciBatch<'q> {
    /// Adds `wr` (any [`SendWr`] but UD), addressed to `to`
    /// (`mlx5dv_wr_set_dc_addr`: the DCI's first stream, 0;
    /// [`DciBatch::post_stream`] for another).
    ///
    /// # Safety
    /// As [`WrBatch::post`](crate::prim::WrBatch::post): the entries of `wr`
    /// name registered memory, alive and untouched until completion.
    #[inline]
    pub unsafe fn post(&mut self, wr: &SendWr<'_>, to: &DctAddr<'_>) -> Result<()> {
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            // SAFETY: `Ah` holds a live, non-null handle; the caller's contract.
            unsafe { self.post_raw(wr, std::ptr::NonNull::new_unchecked(to.ah.as_ptr()), to.dctn, to.key, 0) }
        }
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            let mut raw = imp::exp_send_wr(wr, to.ah.as_ptr(), to.dctn, to.key);
            // SAFETY: a live DCI of a 4.x context; one request whose memory
            // the caller keeps valid.
            unsafe { super::exp4::post_raw(self.qp, &mut raw) }
        }
    }

    /// Adds `wr` addressed to `to` on DCI stream `stream`
    /// (`mlx5dv_wr_set_dc_addr_stream`; stream 0 through
    /// `mlx5dv_wr_set_dc_addr`, which writes the same WQE). A DCI has
    /// `2^log_num_concurrent` streams when created with
    /// [`Dci::create_with_streams`], else stream 0 alone.
    ///
    /// [`Error::Unsupported`](crate::prim::Error::Unsupported) with
    /// MLNX_OFED 4.x for a stream other than 0 (no DCI streams there).
    ///
    /// # Panics
    /// For a stream the DCI does not have (libmlx5 would hand it to the
    /// device); the message names the range and the fix.
    ///
    /// # Safety
    /// As [`DciBatch::post`].
    #[inline]
    pub unsafe fn post_stream(&mut self, wr: &SendWr<'_>, to: &DctAddr<'_>, stream: u16) -> Result<()> {
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            // SAFETY: `Ah` holds a live, non-null handle; the caller's contract.
            unsafe { self.post_raw(wr, std::ptr::NonNull::new_unchecked(to.ah.as_ptr()), to.dctn, to.key, stream) }
        }
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            if stream != 0 {
                return Err(crate::prim::Error::unsupported(
                    "DciBatch::post_stream",
                    &crate::prim::unsupported::DC_STREAMS_OFED4,
                    self.qp.pd().context().name(),
                    "rrddmma_mlnx_ofed4 (no DCI streams)",
                ));
            }
            // SAFETY: forwarded contract.
            unsafe { self.post(wr, to) }
        }
    }

    /// The body of [`DciBatch::post`] and [`DciBatch::post_stream`] for a
    /// raw address handle that no [`Ah`] owns (the libmlx5 differential
    /// harness posts to the provider's own DCIs, which have no `Ah`):
    /// stream 0 through `mlx5dv_wr_set_dc_addr`, others through
    /// `mlx5dv_wr_set_dc_addr_stream` (libmlx5 installs both entries on
    /// every DCI).
    ///
    /// # Safety
    /// As [`DciBatch::post`]; `ah` is a live `ibv_ah` of the DCI's provider.
    #[doc(hidden)]
    #[cfg(not(rrddmma_mlnx_ofed4))]
    #[inline]
    pub unsafe fn post_raw(
        &mut self,
        wr: &SendWr<'_>,
        ah: std::ptr::NonNull<crate::bindings::ibv_ah>,
        dctn: u32,
        key: u64,
        stream: u16,
    ) -> Result<()> {
        if u32::from(stream) >= self.streams {
            no_such_stream(stream, self.streams);
        }
        let mqp = self.mqp.as_ptr();
        self.inner.post_with(wr, |_| {
            // SAFETY: an open batch on a live DCI with an operation started;
            // libmlx5 installs both address entries on every DCI.
            unsafe {
                if stream == 0 {
                    crate::bindings::mlx5dv_wr_set_dc_addr(mqp, ah.as_ptr(), dctn, key)
                } else {
                    crate::bindings::mlx5dv_wr_set_dc_addr_stream(mqp, ah.as_ptr(), dctn, key, stream)
                }
            }
        })
    }

    /// A batch of a DCI that no [`Dci`] owns: `inner` opened on its
    /// extended view ([`WrBatch::from_raw`]), `mqp` its mlx5 view (the
    /// libmlx5 differential harness).
    ///
    /// # Safety
    /// `mqp` is the live `mlx5dv_qp_ex` of the DCI whose `ibv_qp_ex`
    /// `inner` was opened on, with its DC address entries set; it has
    /// `2^log_num_concurrent` streams (`None`: one).
    #[doc(hidden)]
    #[cfg(not(rrddmma_mlnx_ofed4))]
    pub unsafe fn from_raw(
        inner: WrBatch<'q>,
        mqp: std::ptr::NonNull<crate::bindings::mlx5dv_qp_ex>,
        log_num_concurrent: Option<u8>,
    ) -> DciBatch<'q> {
        DciBatch { inner, mqp, streams: log_num_concurrent.map_or(1, |l| 1 << l) }
    }

    /// Hands the batch to the device (rdma-core: one doorbell for all of
    /// it; MLNX_OFED 4.x: already posted, nothing to do).
    #[inline]
    pub fn complete(self) -> Result<()> {
        #[cfg(not(rrddmma_mlnx_ofed4))]
        return self.inner.complete();
        #[cfg(rrddmma_mlnx_ofed4)]
        return Ok(());
    }
}

#[cfg(rrddmma_mlnx_ofed4)]
#[cfg_attr(docsrs, doc(cfg(rrddmma_mlnx_ofed4)))]
impl Dci {
    /// Posts a masked atomic (or any other experimental request) to `to`
    /// (MLNX_OFED 4.x builds only: with rdma-core, masked atomics are
    /// hand-built WQE segments, [`seg`](crate::mlx5dv::queue::seg)).
    ///
    /// # Safety
    /// As [`DciBatch::post`].
    pub unsafe fn post_masked(&self, wr: &super::exp4::ExpSendWr<'_>, to: &DctAddr<'_>) -> Result<()> {
        let mut raw = wr.raw_to_dct(to.ah.as_ptr(), to.dctn, to.key);
        // SAFETY: forwarded contract.
        unsafe { super::exp4::post_raw(&self.qp, &mut raw) }
    }
}

/// Old way to make a DC target (a `Qp` brought up with `modify`).
#[deprecated(note = "use `Dct::create(pd, cq, srq, key, &DctOpts::default())`: a ready target (INIT and RTR done), \
            `dctn()` for `qpn()`; see docs/upgrading.md")]
#[doc(hidden)]
pub fn create_dct(pd: &Pd, cq: &Cq, srq: &Srq, key: u64) -> Result<Dct> {
    Dct::create(pd, cq, srq, key, &DctOpts::default())
}

#[cfg(not(rrddmma_mlnx_ofed4))]
mod imp {
    //! rdma-core: `mlx5dv_create_qp`, brought up with `ibv_modify_qp`.

    use std::ptr::{self, NonNull};

    use super::{path, Dci, DciOpts, DciStreamCaps, DciStreams, Dct, DctOpts};
    use crate::bindings as ffi;
    use crate::prim::unsupported::{DC_NOT_MLX5, DC_NO_MLX5_QP, DC_STREAMS};
    use crate::prim::{Context, Cq, Error, Pd, Qp, QpAttr, QpCaps, QpState, QpType, Result, SendOps, Srq};

    /// `Err(Unsupported)` with DC's way out (an RC mesh) off mlx5.
    fn require(ctx: &Context, op: &'static str) -> Result<()> {
        crate::mlx5dv::require_as(ctx, op, &DC_NOT_MLX5)
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        srq: Option<&Srq>,
        caps: QpCaps,
        ops: Option<SendOps>,
        dc: ffi::mlx5dv_dc_init_attr,
        streams: bool,
    ) -> Result<NonNull<ffi::ibv_qp>> {
        let ctx = pd.context();
        require(ctx, "mlx5dv_create_qp")?;
        let mut attr = ffi::ibv_qp_init_attr_ex {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            srq: srq.map_or(ptr::null_mut(), Srq::as_ptr),
            cap: caps.to_raw(false),
            qp_type: QpType::DRIVER.into(),
            comp_mask: ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0,
            pd: pd.as_ptr(),
            ..Default::default()
        };
        if let Some(ops) = ops {
            attr.comp_mask |= ffi::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.0;
            attr.send_ops_flags = ops.bits();
        }
        let mut dv = ffi::mlx5dv_qp_init_attr {
            comp_mask: u64::from(ffi::mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_DC.0),
            dc_init_attr: dc,
            ..Default::default()
        };
        if streams {
            dv.comp_mask |= u64::from(ffi::mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS.0);
        }
        // SAFETY: an mlx5 context (checked above); both attribute structs are valid.
        let qp = unsafe { ffi::mlx5dv_create_qp(ctx.as_ptr(), &mut attr, &mut dv) };
        NonNull::new(qp).ok_or_else(|| Error::last("mlx5dv_create_qp"))
    }

    pub(super) fn create_dct(pd: &Pd, cq: &Cq, srq: &Srq, key: u64, o: &DctOpts) -> Result<Dct> {
        let mut dc = ffi::mlx5dv_dc_init_attr { dc_type: ffi::mlx5dv_dc_type::MLX5DV_DCTYPE_DCT, ..Default::default() };
        dc.__bindgen_anon_1.dct_access_key = key;
        let raw = create(pd, cq, cq, Some(srq), QpCaps::default(), None, dc, false)?;
        // SAFETY: created just now on `pd` with this CQ and SRQ.
        let qp = unsafe {
            Qp::from_parts("mlx5dv_create_qp", raw, None, QpType::DRIVER, QpCaps::default(), pd, cq, cq, Some(srq))
        }?;
        let av = path(pd.context(), o.port, o.gid_index, o.hop_limit, o.traffic_class, o.sl)?.flow_label(o.flow_label);
        qp.modify(&QpAttr::new(QpState::INIT).pkey_index(o.pkey_index).port(o.port).access(o.access))?;
        qp.modify(&QpAttr::new(QpState::RTR).path_mtu(o.mtu).av(&av).min_rnr_timer(o.min_rnr_timer))?;
        Ok(Dct { qp, key })
    }

    pub(super) fn dci_stream_caps(ctx: &Context) -> Result<DciStreamCaps> {
        // Named for the option before `query_device` would name only itself.
        require(ctx, "mlx5dv_query_device (DCI streams)")?;
        let attr = crate::mlx5dv::query_device(ctx)?;
        let bit = u64::from(ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_DCI_STREAMS.0);
        if attr.comp_mask & bit == 0 {
            return Err(Error::unsupported("mlx5dv_query_device", &DC_STREAMS, ctx.name(), "not reported"));
        }
        let c = attr.dci_streams_caps;
        Ok(DciStreamCaps {
            max_log_num_concurrent: c.max_log_num_concurent,
            max_log_num_errored: c.max_log_num_errored,
        })
    }

    pub(super) fn reset_stream(dci: &Dci, id: u16) -> Result<()> {
        // SAFETY: a live DCI (an mlx5 QP: `Dci::create*` checked the device).
        let rc = unsafe { ffi::mlx5dv_dci_stream_id_reset(dci.qp.as_ptr(), id) };
        if rc != 0 {
            return Err(Error::code("mlx5dv_dci_stream_id_reset", rc));
        }
        Ok(())
    }

    pub(super) fn create_dci(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        streams: Option<DciStreams>,
    ) -> Result<Dci> {
        let mut dc = ffi::mlx5dv_dc_init_attr { dc_type: ffi::mlx5dv_dc_type::MLX5DV_DCTYPE_DCI, ..Default::default() };
        if let Some(s) = streams {
            dc.__bindgen_anon_1.dci_streams =
                ffi::mlx5dv_dci_streams { log_num_concurent: s.log_num_concurrent, log_num_errored: s.log_num_errored };
        }
        let raw = create(pd, send_cq, recv_cq, None, caps, Some(SendOps::BASIC), dc, streams.is_some())?;
        // SAFETY: created just now on `pd` with these CQs and the basic send ops.
        let qp = unsafe {
            Qp::from_parts(
                "mlx5dv_create_qp",
                raw,
                Some(SendOps::BASIC),
                QpType::DRIVER,
                caps,
                pd,
                send_cq,
                recv_cq,
                None,
            )
        }?;
        // SAFETY: the QP's live extended view (checked by `from_parts`).
        let mqp = qp.ex_view().and_then(|e| NonNull::new(unsafe { ffi::mlx5dv_qp_ex_from_ibv_qp_ex(e.as_ptr()) }));
        let mqp = mqp.ok_or_else(|| {
            Error::unsupported("mlx5dv_qp_ex_from_ibv_qp_ex", &DC_NO_MLX5_QP, pd.context().name(), "null")
        })?;
        Ok(Dci { qp, mqp, streams })
    }

    /// RESET → INIT: P_Key index and port (the DC key goes with each request).
    pub(super) fn dci_init(dci: &Dci, o: &DciOpts) -> Result<()> {
        dci.qp.modify(&QpAttr::new(QpState::INIT).pkey_index(o.pkey_index).port(o.port))
    }

    pub(super) fn dci_modify(dci: &Dci, attr: &QpAttr) -> Result<()> {
        dci.qp.modify(attr)
    }
}

#[cfg(rrddmma_mlnx_ofed4)]
mod imp {
    //! MLNX_OFED 4.x: `ibv_exp_create_dct`, `ibv_exp_create_qp`,
    //! `ibv_exp_modify_qp`, `ibv_exp_post_send`.

    use std::ptr::{self, NonNull};

    use super::{path, Dci, DciOpts, DciStreamCaps, DciStreams, Dct, DctOpts};
    use crate::bindings as ffi;
    use crate::bindings::exp4 as x;
    use crate::mlx5dv::exp4::{last, rc};
    use crate::prim::unsupported::{DC_NOT_MLX5, DC_PKEY_OFED4, DC_SL_OFED4, DC_STREAMS_OFED4};
    use crate::prim::{Cq, Error, Pd, Qp, QpAttr, QpCaps, QpState, QpType, Result, SendFlags, SendWr, Srq};

    /// `Err(Unsupported)` with DC's way out (an RC mesh) off an MLNX_OFED 4.x mlx5 device.
    fn require(ctx: &crate::prim::Context, op: &'static str) -> Result<()> {
        if crate::mlx5dv::exp4::is_supported(ctx) {
            Ok(())
        } else {
            Err(Error::unsupported(op, &DC_NOT_MLX5, ctx.name(), "false"))
        }
    }

    pub(super) fn create_dct(pd: &Pd, cq: &Cq, srq: &Srq, key: u64, o: &DctOpts) -> Result<Dct> {
        let ctx = pd.context();
        require(ctx, "ibv_exp_create_dct")?;
        if o.sl != 0 {
            return Err(Error::unsupported("ibv_exp_create_dct", &DC_SL_OFED4, ctx.name(), o.sl));
        }
        let pkey_index = u8::try_from(o.pkey_index)
            .map_err(|_| Error::unsupported("ibv_exp_create_dct", &DC_PKEY_OFED4, ctx.name(), o.pkey_index))?;
        let av = path(ctx, o.port, o.gid_index, o.hop_limit, o.traffic_class, 0)?;
        let mut attr = dct_init_attr(pd, cq, srq, key, o, pkey_index, av.as_raw());
        // SAFETY: a live 4.x context; PD, CQ and SRQ of it; `attr` valid.
        let raw = unsafe { x::ibv_exp_create_dct(ctx.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| last("ibv_exp_create_dct"))?;
        Ok(Dct { raw, _parents: (pd.clone(), cq.clone(), srq.clone()), key })
    }

    /// `ibv_exp_dct_init_attr` from the options and the address vector
    /// [`path`] chose (its GID index when it has a GRH).
    pub(super) fn dct_init_attr(
        pd: &Pd,
        cq: &Cq,
        srq: &Srq,
        key: u64,
        o: &DctOpts,
        pkey_index: u8,
        av: &ffi::ibv_ah_attr,
    ) -> x::ibv_exp_dct_init_attr {
        x::ibv_exp_dct_init_attr {
            pd: pd.as_ptr(),
            cq: cq.as_ptr(),
            srq: srq.as_ptr(),
            dc_key: key,
            port: o.port,
            access_flags: o.access.bits(),
            min_rnr_timer: o.min_rnr_timer,
            tclass: o.traffic_class,
            flow_label: o.flow_label,
            mtu: o.mtu.to_raw(),
            pkey_index,
            gid_index: if av.is_global != 0 { av.grh.sgid_index } else { 0 },
            hop_limit: o.hop_limit,
            inline_size: 0,
            create_flags: 0,
            comp_mask: 0,
        }
    }

    /// MLNX_OFED 4.x has no DCI streams.
    fn no_streams(ctx: &crate::prim::Context) -> Error {
        Error::unsupported("mlx5dv DCI streams", &DC_STREAMS_OFED4, ctx.name(), "rrddmma_mlnx_ofed4 (no DCI streams)")
    }

    pub(super) fn dci_stream_caps(ctx: &crate::prim::Context) -> Result<DciStreamCaps> {
        Err(no_streams(ctx))
    }

    pub(super) fn reset_stream(dci: &Dci, _id: u16) -> Result<()> {
        Err(no_streams(dci.qp.pd().context()))
    }

    pub(super) fn create_dci(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        streams: Option<DciStreams>,
    ) -> Result<Dci> {
        if streams.is_some() {
            return Err(no_streams(pd.context()));
        }
        let ctx = pd.context();
        require(ctx, "ibv_exp_create_qp")?;
        let mut attr = x::ibv_exp_qp_init_attr {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap: caps.to_raw(false),
            qp_type: x::IBV_EXP_QPT_DC_INI,
            comp_mask: x::ibv_exp_qp_init_attr_comp_mask::IBV_EXP_QP_INIT_ATTR_PD,
            pd: pd.as_ptr(),
            ..Default::default()
        };
        // SAFETY: a live 4.x context; PD and CQs of it; `attr` valid.
        let qp = unsafe { x::ibv_exp_create_qp(ctx.as_ptr(), &mut attr) };
        let qp = NonNull::new(qp).ok_or_else(|| last("ibv_exp_create_qp"))?;
        let caps = QpCaps { max_recv_wr: 0, max_recv_sge: 0, max_inline_data: attr.cap.max_inline_data, ..caps };
        let qp_type = QpType::from_raw(x::IBV_EXP_QPT_DC_INI);
        // SAFETY: created just now on `pd` with these CQs.
        let qp = unsafe { Qp::from_parts("ibv_exp_create_qp", qp, None, qp_type, caps, pd, send_cq, recv_cq, None) }?;
        Ok(Dci { qp, streams: None })
    }

    /// RESET → INIT: P_Key index, port and the DC key (`IBV_EXP_QP_DC_KEY`).
    pub(super) fn dci_init(dci: &Dci, o: &DciOpts) -> Result<()> {
        let init = QpAttr::new(QpState::INIT).pkey_index(o.pkey_index).port(o.port);
        let (mut raw, mask) = exp_qp_attr(&init);
        raw.dct_key = o.key;
        modify_raw(&dci.qp, &mut raw, mask | x::ibv_exp_qp_attr_mask::IBV_EXP_QP_DC_KEY)
    }

    pub(super) fn dci_modify(dci: &Dci, attr: &QpAttr) -> Result<()> {
        let (mut raw, mask) = exp_qp_attr(attr);
        modify_raw(&dci.qp, &mut raw, mask)
    }

    fn modify_raw(qp: &Qp, raw: &mut x::ibv_exp_qp_attr, mask: u64) -> Result<()> {
        // SAFETY: a live QP of a 4.x context; `raw` valid.
        rc("ibv_exp_modify_qp", unsafe { x::ibv_exp_modify_qp(qp.as_ptr(), raw, mask) })
    }

    /// The same attributes for `ibv_exp_modify_qp`: `struct ibv_exp_qp_attr`
    /// begins with the members of `struct ibv_qp_attr` (names and types),
    /// and the `IBV_EXP_QP_*` bits below `IBV_EXP_START_FLAG` are the
    /// `IBV_QP_*` bits.
    pub(super) fn exp_qp_attr(attr: &QpAttr) -> (x::ibv_exp_qp_attr, u64) {
        let a = attr.as_raw();
        let raw = x::ibv_exp_qp_attr {
            qp_state: a.qp_state.0,
            cur_qp_state: a.cur_qp_state.0,
            path_mtu: a.path_mtu.0,
            path_mig_state: a.path_mig_state.0,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            qp_access_flags: a.qp_access_flags as i32,
            cap: a.cap,
            ah_attr: a.ah_attr,
            alt_ah_attr: a.alt_ah_attr,
            pkey_index: a.pkey_index,
            alt_pkey_index: a.alt_pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify,
            sq_draining: a.sq_draining,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            alt_port_num: a.alt_port_num,
            alt_timeout: a.alt_timeout,
            rate_limit: a.rate_limit,
            ..Default::default()
        };
        (raw, u64::from(attr.mask().bits()))
    }

    /// `wr` as an `ibv_exp_send_wr` to the target `dctn` with key `key`
    /// through `ah`. The opcodes of `SendWr`'s
    /// constructors and the four send flags have the same values in
    /// `enum ibv_exp_wr_opcode` / `enum ibv_exp_send_flags`.
    ///
    /// # Panics
    /// If `wr` carries a send flag other than FENCE, SIGNALED, SOLICITED and
    /// INLINE (no `SendWr` constructor sets one).
    pub(super) fn exp_send_wr(wr: &SendWr<'_>, ah: *mut ffi::ibv_ah, dctn: u32, key: u64) -> x::ibv_exp_send_wr {
        use x::ibv_exp_send_flags as F;
        let w = wr.as_raw();
        let known = [
            (SendFlags::FENCE, F::IBV_EXP_SEND_FENCE),
            (SendFlags::SIGNALED, F::IBV_EXP_SEND_SIGNALED),
            (SendFlags::SOLICITED, F::IBV_EXP_SEND_SOLICITED),
            (SendFlags::INLINE, F::IBV_EXP_SEND_INLINE),
        ];
        let mut flags = 0;
        let mut rest = w.send_flags;
        for (ours, exp) in known {
            if w.send_flags & ours.bits() != 0 {
                flags |= exp;
                rest &= !ours.bits();
            }
        }
        assert!(rest == 0, "send flags {rest:#x} have no MLNX_OFED 4.x DC counterpart: drop them from the request");
        // SAFETY: a `u32` either way.
        let imm = unsafe { w.__bindgen_anon_1.imm_data };
        let wr_union = match w.opcode {
            ffi::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP | ffi::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: the atomic constructors set this member.
                let a = unsafe { w.wr.atomic };
                let atomic = x::ibv_exp_wr_atomic {
                    remote_addr: a.remote_addr,
                    compare_add: a.compare_add,
                    swap: a.swap,
                    rkey: a.rkey,
                };
                x::ibv_exp_send_wr_wr { atomic }
            }
            _ => {
                // SAFETY: the other constructors set this member or leave it zero.
                let r = unsafe { w.wr.rdma };
                x::ibv_exp_send_wr_wr { rdma: x::ibv_exp_wr_rdma { remote_addr: r.remote_addr, rkey: r.rkey } }
            }
        };
        x::ibv_exp_send_wr {
            wr_id: w.wr_id,
            next: ptr::null_mut(),
            sg_list: w.sg_list,
            num_sge: w.num_sge,
            exp_opcode: w.opcode.0,
            imm_data: imm,
            wr: wr_union,
            dc: x::ibv_exp_wr_dc { ah, dct_access_key: key, dct_number: dctn },
            exp_send_flags: flags,
            ..Default::default()
        }
    }
}

/// A stream id the DCI does not have, named with the range and the fix.
#[cfg(not(rrddmma_mlnx_ofed4))]
#[cold]
#[inline(never)]
#[track_caller]
fn no_such_stream(id: u16, streams: u32) -> ! {
    if streams == 1 {
        panic!(
            "DciBatch::post_stream: stream {id} named, but the DCI has one stream, 0; create it with \
             Dci::create_with_streams (DciStreams::log_num_concurrent) to post on others"
        )
    }
    panic!(
        "DciBatch::post_stream: stream {id} named, but the DCI has streams 0..{streams} (log_num_concurrent {}); \
         pick one of those, or create the DCI with a larger DciStreams::log_num_concurrent",
        streams.trailing_zeros()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defaults are the documented ones; each setter sets its own field only.
    #[test]
    fn options_default_and_setters() {
        let d = DctOpts::default();
        assert_eq!((d.port, d.gid_index, d.pkey_index, d.mtu), (1, None, 0, Mtu::MTU_1024));
        assert_eq!(
            (d.access, d.min_rnr_timer, d.hop_limit, d.traffic_class, d.flow_label, d.sl),
            (AccessFlags::empty(), 12, 64, 0, 0, 0)
        );
        let o = DctOpts::default().gid_index(Some(3)).access(AccessFlags::REMOTE_READ).sl(2);
        assert_eq!(o, DctOpts { gid_index: Some(3), access: AccessFlags::REMOTE_READ, sl: 2, ..d });
        let c = DciOpts::default();
        assert_eq!((c.timeout, c.retry_cnt, c.rnr_retry, c.max_rd_atomic, c.key), (14, 7, 7, 1, 0));
        assert_eq!(DciOpts::default().key(9).mtu(Mtu::MTU_4096), DciOpts { key: 9, mtu: Mtu::MTU_4096, ..c });
    }

    /// A request converted for `ibv_exp_post_send` keeps everything the
    /// rdma-core path hands to `ibv_wr_*` + `mlx5dv_wr_set_dc_addr`.
    #[cfg(rrddmma_mlnx_ofed4)]
    #[test]
    fn send_wr_converts_to_the_experimental_request() {
        use crate::bindings::exp4 as x;
        use crate::prim::{RemoteAddr, SendFlags, SendWr, Sge};
        use x::ibv_exp_send_flags as F;
        use x::ibv_exp_wr_opcode as O;
        let sges = [Sge::from_raw(0x1000, 64, 7), Sge::from_raw(0x2000, 8, 8)];
        let remote = RemoteAddr { addr: 0xdead_0000, rkey: 0x55 };
        let ah = 0x40usize as *mut crate::bindings::ibv_ah;
        let check = |wr: SendWr<'_>, opcode: u32, flags: u64| {
            let e = imp::exp_send_wr(&wr, ah, 0xabc, 0x1234_5678_9abc);
            assert_eq!((e.wr_id, e.exp_opcode, e.exp_send_flags), (wr.as_raw().wr_id, opcode, flags));
            assert_eq!((e.sg_list, e.num_sge), (wr.as_raw().sg_list, wr.as_raw().num_sge));
            assert_eq!((e.dc.ah, e.dc.dct_number, e.dc.dct_access_key), (ah, 0xabc, 0x1234_5678_9abc));
            assert!(e.next.is_null());
            e
        };
        let e =
            check(SendWr::write(&sges, remote).wr_id(5).signaled(), O::IBV_EXP_WR_RDMA_WRITE, F::IBV_EXP_SEND_SIGNALED);
        // SAFETY: the member the opcode uses; plain integers.
        assert_eq!(unsafe { (e.wr.rdma.remote_addr, e.wr.rdma.rkey) }, (0xdead_0000, 0x55));
        let e = check(SendWr::read(&sges[..1], remote).fence(), O::IBV_EXP_WR_RDMA_READ, F::IBV_EXP_SEND_FENCE);
        // SAFETY: as above.
        assert_eq!(unsafe { e.wr.rdma.rkey }, 0x55);
        let e = check(
            SendWr::write_imm(&sges, remote, 0x0102_0304).inline().solicited(),
            O::IBV_EXP_WR_RDMA_WRITE_WITH_IMM,
            F::IBV_EXP_SEND_INLINE | F::IBV_EXP_SEND_SOLICITED,
        );
        assert_eq!(e.imm_data, 0x0102_0304u32.to_be());
        check(SendWr::send(&sges), O::IBV_EXP_WR_SEND, 0);
        check(SendWr::send_imm(&sges, 1), O::IBV_EXP_WR_SEND_WITH_IMM, 0);
        let old = [Sge::from_raw(0x3000, 8, 9)];
        let e = check(SendWr::compare_swap(&old, remote, 11, 22), O::IBV_EXP_WR_ATOMIC_CMP_AND_SWP, 0);
        // SAFETY: the member the opcode uses; plain integers.
        let a = unsafe { e.wr.atomic };
        assert_eq!((a.remote_addr, a.compare_add, a.swap, a.rkey), (0xdead_0000, 11, 22, 0x55));
        let e = check(SendWr::fetch_add(&old, remote, 33), O::IBV_EXP_WR_ATOMIC_FETCH_AND_ADD, 0);
        // SAFETY: the member the opcode uses; plain integers.
        let a = unsafe { e.wr.atomic };
        assert_eq!((a.remote_addr, a.compare_add, a.rkey), (0xdead_0000, 33, 0x55));
        let all = SendFlags::FENCE | SendFlags::SIGNALED | SendFlags::SOLICITED | SendFlags::INLINE;
        let every =
            F::IBV_EXP_SEND_FENCE | F::IBV_EXP_SEND_SIGNALED | F::IBV_EXP_SEND_SOLICITED | F::IBV_EXP_SEND_INLINE;
        check(SendWr::send(&sges).flags(all), O::IBV_EXP_WR_SEND, every);
    }

    /// `QpAttr` for `ibv_exp_modify_qp`: the same members and mask bits.
    #[cfg(rrddmma_mlnx_ofed4)]
    #[test]
    fn qp_attr_converts_to_the_experimental_attributes() {
        use crate::bindings::exp4::ibv_exp_qp_attr_mask as M;
        let av = AhAttr::global(2, 3, Gid::default()).hop_limit(9).traffic_class(4).sl(5);
        let a = QpAttr::new(QpState::RTS)
            .pkey_index(6)
            .port(2)
            .path_mtu(Mtu::MTU_2048)
            .av(&av)
            .timeout(14)
            .retry_cnt(5)
            .rnr_retry(7)
            .sq_psn(0x12_3456)
            .max_rd_atomic(4)
            .access(AccessFlags::REMOTE_READ);
        let (e, mask) = imp::exp_qp_attr(&a);
        let want = M::IBV_EXP_QP_STATE
            | M::IBV_EXP_QP_PKEY_INDEX
            | M::IBV_EXP_QP_PORT
            | M::IBV_EXP_QP_PATH_MTU
            | M::IBV_EXP_QP_AV
            | M::IBV_EXP_QP_TIMEOUT
            | M::IBV_EXP_QP_RETRY_CNT
            | M::IBV_EXP_QP_RNR_RETRY
            | M::IBV_EXP_QP_SQ_PSN
            | M::IBV_EXP_QP_MAX_QP_RD_ATOMIC
            | M::IBV_EXP_QP_ACCESS_FLAGS;
        assert_eq!(mask, want);
        assert_eq!(
            (e.qp_state, e.pkey_index, e.port_num, e.path_mtu),
            (QpState::RTS.to_raw(), 6, 2, Mtu::MTU_2048.to_raw())
        );
        assert_eq!((e.timeout, e.retry_cnt, e.rnr_retry, e.sq_psn, e.max_rd_atomic), (14, 5, 7, 0x12_3456, 4));
        assert_eq!(e.qp_access_flags as u32, AccessFlags::REMOTE_READ.bits());
        let g = e.ah_attr.grh;
        assert_eq!((e.ah_attr.port_num, e.ah_attr.is_global, e.ah_attr.sl), (2, 1, 5));
        assert_eq!((g.sgid_index, g.hop_limit, g.traffic_class), (3, 9, 4));
        assert_eq!(e.dct_key, 0, "the DC key is set by Dci::connect alone");
    }
}
