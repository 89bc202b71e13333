//! Every refusal the crate can return, in one table.
//!
//! An [`Error::Unsupported`](super::Error::Unsupported) has one shape: the
//! operation refused, and a [`Lack`]: the device that lacks something, the
//! capability it lacks with the device's value of it (`max_dc_streams = 0`,
//! `mlx5dv_is_supported = false`), and the way out that exists (for DC an
//! RC mesh; for memory keys a ConnectX; for raw packets a ConnectX Ethernet
//! port). What is missing and the way out are one [`Missing`] of [`ALL`];
//! the crate builds a refusal only through
//! `Error::unsupported` (crate-private), which takes one, the
//! device's name and its value, so none can leave a part out.
//!
//! A provider that answers `EOPNOTSUPP` to a call the crate makes without
//! knowing what it lacks is reported as
//! [`Error::Verbs`](super::Error::Verbs) with that errno
//! ([`Error::is_unsupported`](super::Error::is_unsupported) is true); where
//! the crate knows (XRC, ODP prefetch, thread domains, ...) it names the
//! [`Missing`] as for a refusal decided before the call.

use std::fmt;

/// What a refusal says is missing, and the way out: one row of [`ALL`].
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Missing {
    /// The row's name in [`ALL`] (`DC_NOT_MLX5`).
    pub name: &'static str,
    /// What is missing, e.g. `DCI streams`.
    pub feature: &'static str,
    /// The device capability (or setting) whose value says so, e.g.
    /// `max_dc_streams`; the refusal gives the device's value of it.
    pub cap: &'static str,
    /// The way out that exists, as advice (`use an RC mesh instead: ...`).
    pub instead: &'static str,
}

/// Which device refused, what it has, and what to do: the parts of every
/// [`Error::Unsupported`](super::Error::Unsupported).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lack {
    /// The device's name (`mlx5_0`, `rxe0`).
    pub device: String,
    /// The device's value of [`Missing::cap`], as `cap = value`
    /// (`max_dc_streams = 0`).
    pub value: String,
    /// What is missing and the way out.
    pub missing: &'static Missing,
}

impl Lack {
    /// The way out ([`Missing::instead`]).
    pub fn instead(&self) -> &'static str {
        self.missing.instead
    }
}

impl fmt::Display for Lack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not supported by {} ({}); {}",
            self.missing.feature, self.device, self.value, self.missing.instead
        )
    }
}

/// The name of the device of `ctx`, for a refusal where only the raw
/// context is at hand; `(no device)` for a null one (a CM id not bound yet).
///
/// # Safety
/// `ctx` is null or a live context.
pub(crate) unsafe fn device_name(ctx: *mut crate::bindings::ibv_context) -> String {
    // SAFETY: a live context (the caller's contract) points to its device
    // (null only in a stand-in), whose name is a C string.
    unsafe {
        if ctx.is_null() || (*ctx).device.is_null() {
            return "(no device)".into();
        }
        let name = crate::bindings::ibv_get_device_name((*ctx).device);
        if name.is_null() {
            return "(unnamed device)".into();
        }
        std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// The way out of a DC refusal: DC has no verbs path, an RC mesh does the same work.
const RC_MESH: &str = "use an RC mesh instead: one RC QP per peer (wrap::connect_rc_mesh), which every device \
                       runs; wrap::dc::DcMesh falls back to one by itself";
/// The way out of an mlx5-only feature.
const CONNECTX: &str = "use a ConnectX (mlx5) device, which `ibv_devices` lists as mlx5_N";
/// The way out of a raw packet feature.
const CONNECTX_ETH: &str = "use a ConnectX (mlx5) Ethernet port (link layer Ethernet), which has raw packet \
                            QPs, flow steering, WQs and RSS";
/// The way out of a build for MLNX_OFED 4.x.
const RDMA_CORE: &str = "build against rdma-core (without --cfg rrddmma_mlnx_ofed4), whose libraries have it";

macro_rules! table {
    ($($(#[$m:meta])* $name:ident: $feature:expr, $cap:expr, $instead:expr;)*) => {
        $(
            $(#[$m])*
            pub static $name: Missing =
                Missing { name: stringify!($name), feature: $feature, cap: $cap, instead: $instead };
        )*
        /// Every refusal the crate can return (each row's static, in
        /// declaration order). A refusal is built from a row, so a new
        /// refusal is a new row here.
        pub static ALL: &[&Missing] = &[$(&$name),*];
    };
}

table! {
    // Off mlx5: the mlx5dv entry points.
    /// An mlx5dv entry point on a device that is not mlx5.
    NOT_MLX5: "mlx5 direct verbs", "mlx5dv_is_supported",
        "open a ConnectX (mlx5) device, which `ibv_devices` lists as mlx5_N, or use the verbs path \
         (Qp::post_send and Cq::poll), which runs on every device";
    /// An mlx5 option of a CQ or QP builder on a device that is not mlx5.
    MLX5_OPTION: "mlx5 creation options (QpBuilder::mlx5_create_flags, mlx5_send_ops, CqBuilder's mlx5 options)",
        "mlx5dv_is_supported",
        "open a ConnectX (mlx5) device, or build the CQ or QP without its mlx5 options";
    /// DEVX on a device that is not mlx5.
    DEVX_NOT_MLX5: "DEVX (mlx5 firmware commands)", "mlx5dv_is_supported",
        "open a ConnectX (mlx5) device, which `ibv_devices` lists as mlx5_N, or use the verbs and mlx5dv paths \
         that do not need DEVX";
    /// DEVX refused by the kernel.
    DEVX_KERNEL: "DEVX (mlx5 firmware commands)", "mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX)",
        "run on a kernel whose mlx5_ib has CONFIG_MLX5_INFINIBAND user access (DEVX) as a user with CAP_NET_RAW, \
         or use the mlx5dv paths that do not need DEVX";
    /// LAG port affinity on ports that are not bonded, or a QP with none.
    LAG_PORT: "LAG port affinity", "LAG state / the QP's lag_tx_port_affinity",
        "bond the ConnectX's two ports (a LAG in the kernel) and connect the QP, or leave the port unqueried";
    /// An atomic size the device lacks (DEVX caps).
    ATOMIC_SIZE: "this atomic size", "atomic_size_qp / atomic_size_dc",
        "use 8-byte atomics, or a ConnectX whose atomic caps list the size (HcaCaps::atomic)";

    // DC.
    /// DC on a device that is not mlx5.
    DC_NOT_MLX5: "DC (dynamically connected transport)", "mlx5dv_is_supported", RC_MESH;
    /// DC where the QP has no mlx5 extended view.
    DC_NO_MLX5_QP: "DC (dynamically connected transport)", "mlx5dv_qp_ex_from_ibv_qp_ex", RC_MESH;
    /// DCI streams where the device reports none.
    DC_STREAMS: "DCI streams", "dci_streams_caps (max_log_num_concurent, max_log_num_errored)",
        "use a DCI per stream (Dci::create), or an RC mesh: one RC QP per peer (wrap::connect_rc_mesh)";
    /// DCI streams in a build for MLNX_OFED 4.x.
    DC_STREAMS_OFED4: "DCI streams", "build", "use a DCI per stream (Dci::create), or build against rdma-core \
        (without --cfg rrddmma_mlnx_ofed4); an RC mesh (wrap::connect_rc_mesh) is the way out off DC";
    /// A DCT service level the MLNX_OFED 4.x verbs cannot carry.
    DC_SL_OFED4: "a DCT service level other than 0", "DctOpts::sl",
        "leave DctOpts::sl at 0, or build against rdma-core (without --cfg rrddmma_mlnx_ofed4); off DC, an RC \
         mesh (wrap::connect_rc_mesh) takes any service level";
    /// A DCT P_Key index above 255 with MLNX_OFED 4.x.
    DC_PKEY_OFED4: "a DCT P_Key index above 255", "DctOpts::pkey_index",
        "use a P_Key index below 256, or build against rdma-core (without --cfg rrddmma_mlnx_ofed4); off DC, an \
         RC mesh (wrap::connect_rc_mesh) takes any P_Key index";

    // Memory keys.
    /// An indirect memory key on a device that is not mlx5.
    MKEY_NOT_MLX5: "indirect memory keys (MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT, UMR)", "mlx5dv_is_supported",
        "use a ConnectX (mlx5) device, which has UMR and indirect keys; elsewhere register each range as its \
         own Mr";

    /// The mlx5 memory-key send ops on a device that is not mlx5.
    MKEY_SEND_OPS: "mlx5 memory-key send ops (QpBuilder::mlx5_send_ops: the mlx5dv_wr_* UMR entries)",
        "mlx5dv_is_supported",
        "use a ConnectX (mlx5) device, which has UMR; elsewhere register each range as its own Mr";

    // Raw packets.
    /// A raw packet QP where the device reports no raw packet capability.
    RAW_QP: "raw packet QPs (IBV_QPT_RAW_PACKET)", "raw_packet_caps", CONNECTX_ETH;
    /// Flow steering where the device has none.
    RAW_FLOW: "flow steering", "IBV_DEVICE_MANAGED_FLOW_STEERING in device_cap_flags", CONNECTX_ETH;
    /// Receive WQs where the device has none.
    RAW_WQ: "receive work queues", "max_wq_type_rq", CONNECTX_ETH;
    /// Posting to a receive WQ whose provider has no entry.
    RAW_WQ_POST: "posting to receive work queues", "ibv_wq.post_recv", CONNECTX_ETH;
    /// RSS indirection tables where the device has none.
    RAW_RSS_TABLE: "RSS indirection tables", "rss_caps.max_rwq_indirection_tables", CONNECTX_ETH;
    /// RSS QPs where the device has no RSS for raw packet QPs.
    RAW_RSS_QP: "RSS QPs", "rss_caps (supported_qpts, rx_hash_function)", CONNECTX_ETH;
    /// RSS over fields the device cannot hash.
    RAW_RSS_FIELDS: "RSS hashing of these fields", "rss_caps.rx_hash_fields_mask",
        "hash only fields of the device's rss_caps.rx_hash_fields_mask, on a ConnectX (mlx5) Ethernet port";
    /// A striding WQ on a device that is not mlx5.
    RAW_NOT_MLX5: "striding receive queues (mlx5dv_create_wq)", "mlx5dv_is_supported", CONNECTX_ETH;
    /// A striding WQ where the device has none for raw packet QPs.
    RAW_STRIDING: "striding receive queues", "striding_rq_caps",
        "use a ConnectX-5 or later (mlx5) Ethernet port, which has striding RQs, or ordinary receives (Wq)";
    /// A striding WQ in a build for MLNX_OFED 4.x.
    RAW_STRIDING_OFED4: "striding receive queues", "build",
        "build against rdma-core (without --cfg rrddmma_mlnx_ofed4) and use a ConnectX-5 or later (mlx5) Ethernet \
         port, or ordinary receives (Wq)";
    /// A striding WQ whose reported shape the ring cannot drive.
    RAW_STRIDING_SHAPE: "a striding WQ of this shape", "mlx5dv_rwq (stride, wqe_cnt)",
        "use a ConnectX (mlx5) Ethernet port with libmlx5 from rdma-core, whose striding WQs have power-of-two \
         shapes, or ordinary receives (Wq)";

    // Direct queues.
    /// A send queue stride other than 64.
    SQ_STRIDE: "a send queue stride other than 64 bytes", "mlx5dv_qp.sq.stride",
        "use a ConnectX (mlx5) QP made by libmlx5 from rdma-core (stride 64), or the verbs path (Qp::post_send)";
    /// An AH without an address vector.
    AV_NONE: "an address vector for this AH", "mlx5dv_ah.av", CONNECTX;
    /// BlueFlame without a register of the QP's own.
    BLUEFLAME_SHARED: "BlueFlame on a shared register", "blueflame_dedicated",
        "create the QP on a TdParentDomain: libmlx5 gives each thread domain a register of its own";
    /// BlueFlame on a doorbell-only register.
    BLUEFLAME_SIZE: "BlueFlame on this QP's register", "mlx5dv_qp.bf.size",
        "keep plain doorbells (a doorbell-only register), or use a ConnectX whose UAR has BlueFlame buffers";
    /// CQE compression in a format the device lacks.
    CQE_COMPRESSION: "CQE compression in this format", "cqe_comp_caps (max_num, supported_format)",
        "pick a format of the device's cqe_comp_caps (mlx5dv::comp::compression_caps) or leave compression off";
    /// CQE padding of CQEs other than 128 bytes.
    CQE_PAD_SIZE: "CQE padding of CQEs other than 128 bytes", "CqBuilder's CQE size",
        "ask for CqeSize::B128 too, or leave padding off";
    /// CQE padding where the device lacks it.
    CQE_PAD: "128-byte CQE padding", "MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD",
        "leave padding off, or use a ConnectX that reports MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD";

    // Verbs.
    /// `MLX5_SINGLE_THREADED=1` in the environment.
    SINGLE_THREADED: "opening a device with MLX5_SINGLE_THREADED=1 (it turns off libmlx5's locks, which \
        rrddmma's Send + Sync QPs, CQs and SRQs rely on)", "MLX5_SINGLE_THREADED",
        "unset MLX5_SINGLE_THREADED; thread domains (TdParentDomain) give lock-free queues safely";
    /// Tag matching where the device has none.
    TAG_MATCHING: "tag matching", "tm_caps.max_num_tags",
        "use a ConnectX-5 or later (mlx5), which has tag matching, or match tags in software over an ordinary SRQ";
    /// Tag-matching operations on an SRQ not made for them.
    TAG_MATCHING_SRQ: "tag matching", "the SRQ's type",
        "post tag operations to an SRQ made with Srq::create_tm (IBV_SRQT_TM)";
    /// On-demand paging where the device has none.
    ODP: "on-demand paging", "odp_caps.general_caps",
        "register the memory without AccessFlags::ON_DEMAND, or use a device with ODP (a ConnectX, or rxe under \
         kernel 6.9 or later)";
    /// Implicit on-demand paging where the device has none.
    ODP_IMPLICIT: "implicit on-demand paging", "odp_caps.general_caps (IBV_ODP_SUPPORT_IMPLICIT)",
        "register the ranges used (explicit ODP, Mr::register with AccessFlags::ON_DEMAND), or use a ConnectX \
         with implicit ODP";
    /// ODP prefetch where the provider lacks it.
    ODP_ADVISE: "ODP prefetch (advise_mr)", "the provider's ibv_advise_mr",
        "skip the prefetch (pages fault in on first access), or use a provider with advise_mr (mlx5; rxe with \
         rdma-core 45 or later)";
    /// Device memory where the device has none.
    DEVICE_MEMORY: "device memory", "max_dm_size", "use host memory (Mr), or a ConnectX with device memory (MEMIC)";
    /// Device-memory regions where the provider lacks them.
    DEVICE_MEMORY_MR: "device memory regions", "the provider's ibv_reg_dm_mr",
        "use host memory (Mr), or a ConnectX with device memory (MEMIC)";
    /// dma-buf registration where the provider lacks it.
    DMABUF: "dma-buf registration", "the provider's ibv_reg_dmabuf_mr",
        "register host memory (Mr::register), or use rdma-core 34 or later with a provider that has it (mlx5)";
    /// XRC where the provider has none.
    XRC: "XRC", "the provider's XRC verbs",
        "use a ConnectX (mlx5) device, which has XRC; elsewhere an SRQ shared by RC QPs (Srq, QpBuilder::srq)";
    /// Packet pacing where the device has none.
    PACING: "packet pacing", "packet_pacing_caps.qp_rate_limit_max",
        "pace in software (a token bucket before the post), or use a ConnectX-5 or later";
    /// Flow counters where the provider has none.
    FLOW_COUNTERS: "flow counters", "the provider's ibv_create_counters",
        "count in software, or use a ConnectX (mlx5) Ethernet port";
    /// ECE where the provider has none.
    ECE: "ECE (enhanced connection establishment)", "the provider's ECE verbs",
        "connect without ECE (the connection works without it), or use a ConnectX-6 or later with rdma-core 31+";
    /// A device core clock where the device has none.
    CLOCK: "a device clock", "hca_core_clock / the provider's ibv_query_rt_values_ex",
        "take timestamps from the host clock (std::time::Instant), or use a ConnectX, whose core clock runs";
    /// Thread domains where the provider has none.
    THREAD_DOMAIN: "thread-domain allocation", "the provider's ibv_alloc_td",
        "use an ordinary Pd (the provider's locks stay), or a ConnectX (mlx5), which has thread domains";
    /// Parent domains where the provider has none.
    PARENT_DOMAIN: "parent-domain allocation", "the provider's ibv_alloc_parent_domain",
        "use an ordinary Pd, or a ConnectX (mlx5), which has parent domains";
    /// A CQ on a parent domain where the provider has none.
    CQ_PARENT_DOMAIN: "a CQ on a parent domain", "the provider's ibv_create_cq_ex with a parent domain",
        "create the CQ without CqBuilder::parent_domain, or use a ConnectX (mlx5)";
    /// Extended CQs on an rxe whose rdma-core release is unknown.
    CQ_EX_RXE: "extended CQs on rxe when the rdma-core release cannot be read (ending a polling pass differs \
        between releases)", "the rdma-core release",
        "use a classic CQ (Cq::create), or an rdma-core whose libibverbs names its release";
    /// A provider whose extended CQ lacks its poll entries.
    CQ_EX_ENTRIES: "start_poll, next_poll and end_poll entries in the provider's extended CQ",
        "the extended CQ's entries", "use a classic CQ (Cq::create), which every provider polls";
    /// A provider without `poll_cq`.
    CQ_POLL_ENTRY: "a poll_cq entry in the provider", "the CQ's ops.poll_cq",
        "use a provider that polls CQs (every rdma-core provider does), or poll an mlx5 CQ through mlx5dv";
    /// A provider without post entries.
    QP_POST_ENTRIES: "post_send and post_recv entries in the provider", "the QP's post entries",
        "use a provider that posts (every rdma-core provider does)";
    /// A provider without the extended QP's entries.
    QP_EX_ENTRIES: "wr_start, wr_complete, wr_abort and wr_set_sge entries, and those of the requested send \
        ops, in the provider", "the extended QP's entries",
        "leave QpBuilder::send_ops out and post through Qp::post_send, which every provider has";
    /// Atomic send ops where the device has no atomics.
    ATOMICS: "atomic send ops (ATOMIC_FETCH_AND_ADD, ATOMIC_CMP_AND_SWP)", "atomic_cap",
        "leave them out of QpBuilder::send_ops, or use a device with atomics (InfiniBand, RoCE: a ConnectX, rxe)";
    /// A posted FETCH_AND_ADD on a device without atomics (an `Error::Post`).
    ATOMIC_POST_FETCH_ADD: "IBV_WR_ATOMIC_FETCH_AND_ADD", "atomic_cap",
        "post atomics only on a device with them (InfiniBand or RoCE: a ConnectX, rxe); on iWARP, serialise a \
         READ and a WRITE under a lock of your own, or ask the peer with a SEND";
    /// A posted CMP_AND_SWP on a device without atomics (an `Error::Post`).
    ATOMIC_POST_CMP_SWAP: "IBV_WR_ATOMIC_CMP_AND_SWP", "atomic_cap",
        "post atomics only on a device with them (InfiniBand or RoCE: a ConnectX, rxe); on iWARP, serialise a \
         READ and a WRITE under a lock of your own, or ask the peer with a SEND";
    /// ATOMIC WRITE where the device lacks it.
    ATOMIC_WRITE: "ATOMIC WRITE", "IB_UVERBS_DEVICE_ATOMIC_WRITE in device_cap_flags_ex",
        "use an 8-byte RDMA WRITE, or rxe under kernel 6.3 or later";
    /// ATOMIC WRITE where the provider lacks it.
    ATOMIC_WRITE_PROVIDER: "ATOMIC WRITE in the provider", "the extended QP's wr_atomic_write",
        "use an 8-byte RDMA WRITE, or rdma-core 45 or later";
    /// FLUSH where the device lacks it.
    FLUSH: "FLUSH", "IB_UVERBS_DEVICE_FLUSH_GLOBAL / _PERSISTENT in device_cap_flags_ex",
        "leave SendOps::FLUSH out (a READ after the WRITE orders it on most devices), or use rxe under kernel \
         6.2 or later";
    /// FLUSH where the provider lacks it.
    FLUSH_PROVIDER: "FLUSH in the provider (IBV_QP_EX_WITH_FLUSH needs rdma-core 45 or later)",
        "the provider's FLUSH entries", "leave SendOps::FLUSH out, or use rdma-core 45 or later";
    /// Type-2 window binds where the provider lacks them.
    MW_BIND: "type-2 window binds in the provider", "the extended QP's wr_bind_mw",
        "bind through Qp::post_send (IBV_WR_BIND_MW), or use a provider with ibv_wr_bind_mw";
    /// An SGE list of unequal lengths on an rxe with the inline-length bug.
    SGE_UNEQUAL: "a scatter/gather list of unequal lengths in WrBatch", "the rdma-core release (rxe before 64)",
        "use Qp::post_send, or equal-length entries, or rdma-core 64 or later";
    /// A secret on the RDMA CM path of `wrap::aio`.
    AIO_CM_SECRET: "AioOpts::secret on the RDMA CM path", "the connection path (RDMA CM, no handshake)",
        "use Listener::bind and RcEndpoint::connect, whose handshake carries the secret";

    // Builds for MLNX_OFED 4.x.
    /// An rdma-core verb a build for MLNX_OFED 4.x lacks.
    OFED4: "this verb with MLNX_OFED 4.x", "build", RDMA_CORE;
    /// The experimental verbs off an MLNX_OFED 4.x device.
    OFED4_EXP: "MLNX_OFED 4.x experimental verbs", "ibv_exp_* support", CONNECTX;

    // rdma-core 54 to 59 (bindings::newer::v59): functions looked up at run time.
    /// `ibv_alloc_dmah` absent from the loaded libibverbs (or a static build).
    DMAH_SYMBOL: "DMA handles (ibv_alloc_dmah: rdma-core 58, IBVERBS_1.15)", "ibv_alloc_dmah in the loaded libibverbs",
        "install rdma-core 58 or later, or point a `dlopen` build at one (RRDDMMA_LIBIBVERBS); a static build \
         links only the rdma-core 44 bindings' symbols: use the pkg-config or `dlopen` linkage";
    /// The provider has no DMA handles (libibverbs' default op: `EOPNOTSUPP`).
    DMAH_PROVIDER: "DMA handles", "ibv_alloc_dmah",
        "use a ConnectX (mlx5) device on a kernel with TPH: rdma-core 59 implements DMA handles in mlx5 only";
    /// `ibv_reg_mr_ex` absent from the loaded libibverbs (or a static build).
    REG_MR_EX_SYMBOL: "extended MR registration (ibv_reg_mr_ex: rdma-core 58, IBVERBS_1.15)",
        "ibv_reg_mr_ex in the loaded libibverbs",
        "install rdma-core 58 or later, or point a `dlopen` build at one (RRDDMMA_LIBIBVERBS); a static build \
         links only the rdma-core 44 bindings' symbols: use the pkg-config or `dlopen` linkage; without a DMA \
         handle, Mr::register or Mr::register_dmabuf do the same";
    /// The provider has no `ibv_reg_mr_ex` (libibverbs' default op: `EOPNOTSUPP`).
    REG_MR_EX_PROVIDER: "extended MR registration", "ibv_reg_mr_ex",
        "use Mr::register or Mr::register_dmabuf, which every provider has (rdma-core 59 implements \
         ibv_reg_mr_ex in mlx5 only)";
    /// `mlx5dv_get_data_direct_sysfs_path` absent from the loaded libmlx5.
    DATA_DIRECT_PATH_SYMBOL: "data-direct (mlx5dv_get_data_direct_sysfs_path: rdma-core 54, MLX5_1.25)",
        "mlx5dv_get_data_direct_sysfs_path in the loaded libmlx5",
        "install rdma-core 54 or later, or point a `dlopen` build at one (RRDDMMA_LIBMLX5); a static build links \
         only the rdma-core 44 bindings' symbols: use the pkg-config or `dlopen` linkage";
    /// `mlx5dv_reg_dmabuf_mr` absent from the loaded libmlx5.
    DATA_DIRECT_REG_SYMBOL: "data-direct (mlx5dv_reg_dmabuf_mr: rdma-core 54, MLX5_1.25)",
        "mlx5dv_reg_dmabuf_mr in the loaded libmlx5",
        "install rdma-core 54 or later, or point a `dlopen` build at one (RRDDMMA_LIBMLX5); a static build links \
         only the rdma-core 44 bindings' symbols: use the pkg-config or `dlopen` linkage";
    /// Data-direct access refused by the device or kernel.
    DATA_DIRECT: "data-direct access (MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT)", "mlx5dv_reg_dmabuf_mr",
        "register without data-direct (Mr::register_dmabuf), or use a ConnectX bonded with a data-direct device \
         (mlx5::data_direct_sysfs_path names it)";
    /// Out-of-order placement where libmlx5 reports no caps for it.
    OOO_NOT_REPORTED: "out-of-order data placement (MLX5DV_QP_CREATE_OOO_DP)",
        "MLX5DV_CONTEXT_MASK_OOO_RECV_WRS in mlx5dv_query_device's answer",
        "leave Mlx5QpFlags::OOO_DP off, or run rdma-core 55 or later on a ConnectX and kernel that report it";
    /// Out-of-order placement where the cap of the QP's type is 0 (or the type has none).
    OOO_QP_TYPE: "out-of-order data placement (MLX5DV_QP_CREATE_OOO_DP)", "ooo_recv_wrs_caps for the QP type",
        "leave Mlx5QpFlags::OOO_DP off for this QP type; libmlx5 gives it to RC, UC, UD, XRC and DC QPs whose \
         ooo_recv_wrs_caps field is not 0";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prim::Error;

    /// Every `.rs` file under `dir`, with its text.
    fn sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }

    /// Every refusal the crate can return (each row of [`ALL`]), built as the
    /// code builds it, has its three parts: the device, the capability with
    /// the device's value, and a way out; DC's way out is an RC mesh, memory
    /// keys' and raw packets' a ConnectX (for raw packets an Ethernet port).
    /// And the table is all there is: every row is used, no refusal is built
    /// outside `Error::unsupported`, and a provider's EOPNOTSUPP that the
    /// crate names goes through a row too.
    #[test]
    fn every_refusal_names_device_capability_value_and_way_out() {
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "two rows with one name");
        assert!(n >= 60, "{n} rows");
        for m in ALL {
            let e = Error::unsupported("some_verb", m, "dev7", "v42");
            let lack = e.lack().unwrap_or_else(|| panic!("{}: {e:?}", m.name));
            assert!(std::ptr::eq(lack.missing, *m), "{}", m.name);
            assert_eq!(lack.device, "dev7", "{}", m.name);
            assert_eq!(lack.value, format!("{} = v42", m.cap), "{}", m.name);
            assert!(!m.feature.is_empty() && !m.cap.is_empty() && m.instead.len() > 20, "{m:?}");
            assert!(matches!(&e, Error::Unsupported { feature, .. } if *feature == m.feature), "{}", m.name);
            assert!(e.is_unsupported() && e.errno() == Some(libc::EOPNOTSUPP), "{}", m.name);
            assert_eq!(
                std::io::Error::from(Error::unsupported("v", m, "d", 0)).kind(),
                std::io::ErrorKind::Unsupported
            );
            let text = e.to_string();
            let want = format!("some_verb: {} is not supported by dev7 ({} = v42); {}", m.feature, m.cap, m.instead);
            assert_eq!(text, want, "{}", m.name);
            // The same parts in a refused post (`Error::Post`'s `unsupported`).
            let post = Error::post_list("ibv_post_send", -libc::EINVAL).unsupported_post(m, "dev7", "v42");
            assert_eq!(post.lack(), e.lack(), "{}", m.name);
            assert!(post.is_unsupported() && post.errno() == Some(libc::EOPNOTSUPP), "{}", m.name);
            assert!(post.to_string().ends_with(&want["some_verb: ".len()..]), "{}: {post}", m.name);
            let family = m.name.split('_').next().unwrap();
            match family {
                "DC" => assert!(m.instead.contains("RC mesh"), "{}: DC's way out is an RC mesh: {text}", m.name),
                "MKEY" => assert!(m.instead.contains("ConnectX"), "{}: {text}", m.name),
                "RAW" => assert!(
                    m.instead.contains("ConnectX") && m.instead.contains("Ethernet"),
                    "{}: raw packets need a ConnectX Ethernet port: {text}",
                    m.name
                ),
                _ => {}
            }
            if m.cap == "mlx5dv_is_supported" {
                assert!(m.instead.contains("ConnectX") || m.instead.contains("RC mesh"), "{}: {text}", m.name);
            }
        }
        // A provider's answer, named by the crate, is a refusal of a row.
        let e = Error::from_errno("ibv_open_xrcd", libc::EOPNOTSUPP);
        assert!(e.is_unsupported() && e.lack().is_none(), "{e:?}");
        let e = e.lacking(&XRC, "rxe0");
        assert_eq!(
            e.lack().map(|l| (l.device.as_str(), l.value.as_str())),
            Some(("rxe0", "the provider's XRC verbs = EOPNOTSUPP"))
        );
        let e = Error::from_errno("ibv_alloc_td", libc::ENOSYS).lacking(&THREAD_DOMAIN, "siw0");
        assert!(e.to_string().contains("(the provider's ibv_alloc_td = ENOSYS)"), "{e}");

        let mut files = Vec::new();
        sources(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let (here, error) = (std::path::Path::new("prim/unsupported.rs"), std::path::Path::new("prim/error.rs"));
        // Every row is returned somewhere.
        for m in ALL {
            let used = files.iter().any(|(p, text)| {
                !p.ends_with(here)
                    && text.match_indices(m.name).any(|(i, _)| {
                        let after = text[i + m.name.len()..].chars().next().unwrap_or(' ');
                        let before = text[..i].chars().last().unwrap_or(' ');
                        !(after.is_alphanumeric() || after == '_' || before.is_alphanumeric() || before == '_')
                    })
            });
            assert!(used, "row {} of unsupported::ALL is never returned", m.name);
        }
        // No refusal is built but through `Error::unsupported`: outside
        // error.rs, `Unsupported {` is only ever a pattern (with `..`).
        for (p, text) in &files {
            if p.ends_with(error) {
                continue;
            }
            for (i, _) in text.match_indices("Unsupported {") {
                let body = &text[i..i + text[i..].find('}').unwrap()];
                assert!(body.contains(".."), "{}: a refusal built without Error::unsupported: {body}", p.display());
            }
            for (i, _) in text.match_indices("Post {") {
                let body = &text[i..i + text[i..].find('}').unwrap()];
                assert!(
                    body.contains("..") || body.contains("unsupported: None"),
                    "{}: a refused post built without Error::unsupported_post: {body}",
                    p.display()
                );
            }
        }
    }
}
