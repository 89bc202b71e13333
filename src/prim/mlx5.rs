//! mlx5 creation options of [`CqBuilder`](super::CqBuilder) and
//! [`QpBuilder`](super::QpBuilder): asked for, they make the builder create
//! through libmlx5 (`mlx5dv_create_cq`, `mlx5dv_create_qp`). Off mlx5 the
//! build is [`Error::Unsupported`] naming the option, decided by
//! `mlx5dv_is_supported` before any other libmlx5 call.
//!
//! The direct-verbs layer ([`crate::mlx5dv`]) builds on what is here: a CQ
//! made with [`CqeResFormat`] compresses its CQEs, which only its direct
//! view (`mlx5dv::obj::cq_ring`) can read.

use super::cvalue::c_type;
use super::device::Context;
use super::error::{Error, Result};
use crate::bindings as ffi;

/// The contents of the mini-CQEs of a compressed session
/// (`enum mlx5dv_cqe_comp_res_format`): besides the byte count, each mini-CQE
/// carries one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "mlx5dv_cqe_comp_res_format")]
pub enum CqeResFormat {
    /// `MLX5DV_CQE_RES_FORMAT_HASH`: the RSS hash result (CQE bytes 12-15).
    Hash,
    /// `MLX5DV_CQE_RES_FORMAT_CSUM`: the packet checksum (CQE bytes 20-21).
    Csum,
    /// `MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX`: checksum and stride index
    /// (striding RQs; the stride index is the CQE's WQE counter).
    CsumStridx,
}

impl CqeResFormat {
    /// The C value (`MLX5DV_CQE_RES_FORMAT_*`).
    pub const fn to_raw(self) -> u8 {
        match self {
            CqeResFormat::Hash => 1,
            CqeResFormat::Csum => 2,
            CqeResFormat::CsumStridx => 4,
        }
    }

    /// The C name.
    pub const fn name(self) -> &'static str {
        match self {
            CqeResFormat::Hash => "MLX5DV_CQE_RES_FORMAT_HASH",
            CqeResFormat::Csum => "MLX5DV_CQE_RES_FORMAT_CSUM",
            CqeResFormat::CsumStridx => "MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX",
        }
    }
}

/// The size of a CQ's entries (`mlx5dv_cq_init_attr::cqe_size`); without
/// [`CqBuilder::mlx5_cqe_size`](super::CqBuilder::mlx5_cqe_size) libmlx5
/// takes `MLX5_CQE_SIZE` from the environment, else 64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CqeSize {
    /// 64-byte CQEs.
    B64,
    /// 128-byte CQEs (a receive payload of up to 64 bytes can be scattered
    /// into the CQE's second half).
    B128,
}

impl CqeSize {
    /// Bytes.
    pub const fn bytes(self) -> u16 {
        match self {
            CqeSize::B64 => 64,
            CqeSize::B128 => 128,
        }
    }
}

/// The mlx5 options of a CQ being built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CqOptions {
    pub(crate) size: Option<CqeSize>,
    pub(crate) pad: bool,
    pub(crate) compression: Option<CqeResFormat>,
}

impl CqOptions {
    /// Whether any option asks for `mlx5dv_create_cq`.
    pub(crate) fn any(&self) -> bool {
        self.size.is_some() || self.pad || self.compression.is_some()
    }

    /// The first option asked for, named for an `Unsupported` off mlx5.
    pub(crate) fn first_name(&self) -> &'static str {
        if let Some(f) = self.compression {
            match f {
                CqeResFormat::Hash => "CQE compression in format MLX5DV_CQE_RES_FORMAT_HASH (an mlx5 option)",
                CqeResFormat::Csum => "CQE compression in format MLX5DV_CQE_RES_FORMAT_CSUM (an mlx5 option)",
                CqeResFormat::CsumStridx => {
                    "CQE compression in format MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX (an mlx5 option)"
                }
            }
        } else if self.pad {
            "CQE padding MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD (an mlx5 option)"
        } else {
            "a CQE size MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE (an mlx5 option)"
        }
    }

    /// `mlx5dv_cq_init_attr` for these options.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn to_raw(self) -> ffi::mlx5dv_cq_init_attr {
        use ffi::mlx5dv_cq_init_attr_mask as M;
        let mut dv = ffi::mlx5dv_cq_init_attr::default();
        if let Some(s) = self.size {
            dv.comp_mask |= u64::from(M::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE.0);
            dv.cqe_size = s.bytes();
        }
        if self.pad {
            dv.comp_mask |= u64::from(M::MLX5DV_CQ_INIT_ATTR_MASK_FLAGS.0);
            dv.flags |= ffi::mlx5dv_cq_init_attr_flags::MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD.0;
        }
        if let Some(f) = self.compression {
            dv.comp_mask |= u64::from(M::MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE.0);
            dv.cqe_comp_res_format = f.to_raw();
        }
        dv
    }
}

c_type! {
    /// mlx5 QP creation flags (`enum mlx5dv_qp_create_flags`), given to
    /// `mlx5dv_create_qp` with `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`
    /// ([`QpBuilder::mlx5_create_flags`](super::QpBuilder::mlx5_create_flags)).
    /// `DISABLE_SCATTER_TO_CQE`: payloads are never scattered into CQEs;
    /// `ALLOW_SCATTER_TO_CQE`: requester completions of small READs and
    /// atomics may carry their data in the CQE also when the QP does not
    /// signal every request.
    #[doc(alias = "mlx5dv_qp_create_flags")]
    pub flags Mlx5QpFlags: u32, from enum ffi::mlx5dv_qp_create_flags {
        TUNNEL_OFFLOADS = MLX5DV_QP_CREATE_TUNNEL_OFFLOADS "MLX5DV_QP_CREATE_TUNNEL_OFFLOADS",
        TIR_ALLOW_SELF_LOOPBACK_UC = MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC "MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC",
        TIR_ALLOW_SELF_LOOPBACK_MC = MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC "MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC",
        DISABLE_SCATTER_TO_CQE = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE "MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE",
        ALLOW_SCATTER_TO_CQE = MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE "MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE",
        PACKET_BASED_CREDIT_MODE = MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE "MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE",
        SIG_PIPELINING = MLX5DV_QP_CREATE_SIG_PIPELINING "MLX5DV_QP_CREATE_SIG_PIPELINING",
        /// Out-of-order data placement (rdma-core 55): receive WQEs may be
        /// consumed out of order and the sender need not keep arrival order;
        /// completions stay in order. Set on both sides (DCI and DCT too).
        /// [`QpBuilder::build`](super::QpBuilder::build) refuses it from the
        /// device's `ooo_recv_wrs_caps` for the QP's type
        /// ([`ooo_recv_wrs_caps`]), before libmlx5 says a bare `EOPNOTSUPP`.
        OOO_DP = MLX5DV_QP_CREATE_OOO_DP "MLX5DV_QP_CREATE_OOO_DP",
    }
}

c_type! {
    /// mlx5 send operations of an extended QP (`enum
    /// mlx5dv_qp_create_send_ops_flags`), given to `mlx5dv_create_qp` with
    /// `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`
    /// ([`QpBuilder::mlx5_send_ops`](super::QpBuilder::mlx5_send_ops)):
    /// they install the `mlx5dv_wr_*` memory-key entries that
    /// [`MkeyWr`](crate::mlx5dv::mkey_wr::MkeyWr) calls.
    #[doc(alias = "mlx5dv_qp_create_send_ops_flags")]
    pub flags Mlx5SendOps: u64, from enum ffi::mlx5dv_qp_create_send_ops_flags {
        MR_INTERLEAVED = MLX5DV_QP_EX_WITH_MR_INTERLEAVED "MLX5DV_QP_EX_WITH_MR_INTERLEAVED",
        MR_LIST = MLX5DV_QP_EX_WITH_MR_LIST "MLX5DV_QP_EX_WITH_MR_LIST",
        MKEY_CONFIGURE = MLX5DV_QP_EX_WITH_MKEY_CONFIGURE "MLX5DV_QP_EX_WITH_MKEY_CONFIGURE",
    }
}

/// `Err(Unsupported)` naming `missing` and the option `asked` unless `ctx`
/// is an mlx5 device (`mlx5dv_is_supported`, the first libmlx5 call of
/// every mlx5 path).
pub(crate) fn require(ctx: &Context, op: &'static str, missing: &'static super::Missing, asked: &str) -> Result<()> {
    #[cfg(not(rrddmma_mlnx_ofed4))]
    // SAFETY: a live context points to its device.
    if unsafe { ffi::mlx5dv_is_supported((*ctx.as_ptr()).device) } {
        return Ok(());
    }
    Err(Error::unsupported(op, missing, ctx.name(), format_args!("false (asked for {asked})")))
}

/// The `mlx5dv_context` fields the bindings' struct holds, as a request mask.
///
/// `mlx5dv_query_device` takes no size: it fills every field whose bit is set
/// in `comp_mask`. A newer libmlx5 knows fields past the end of the struct
/// these bindings were generated from (`MAX_DC_RD_ATOM`, `REG_C0`,
/// `OOO_RECV_WRS`, ...); asking for their bits would let it write past the
/// caller's struct. So the mask names exactly the bits whose fields exist
/// here, the highest being `CRYPTO_OFFLOAD` for the last field, `crypto_caps`.
#[cfg(not(rrddmma_mlnx_ofed4))]
pub const QUERY_DEVICE_MASK: u64 = {
    use ffi::mlx5dv_context_comp_mask as M;
    let all = M::MLX5DV_CONTEXT_MASK_CQE_COMPRESION.0
        | M::MLX5DV_CONTEXT_MASK_SWP.0
        | M::MLX5DV_CONTEXT_MASK_STRIDING_RQ.0
        | M::MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS.0
        | M::MLX5DV_CONTEXT_MASK_DYN_BFREGS.0
        | M::MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE.0
        | M::MLX5DV_CONTEXT_MASK_FLOW_ACTION_FLAGS.0
        | M::MLX5DV_CONTEXT_MASK_DC_ODP_CAPS.0
        | M::MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK.0
        | M::MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS.0
        | M::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD.0
        | M::MLX5DV_CONTEXT_MASK_DCI_STREAMS.0
        | M::MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH.0
        | M::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD.0;
    all as u64
};

/// `mlx5dv_query_device` asking for every field the bindings hold, on a
/// context already known to be mlx5.
#[cfg(not(rrddmma_mlnx_ofed4))]
pub(crate) fn query_device_unchecked(ctx: &Context) -> Result<ffi::mlx5dv_context> {
    let mut attr = ffi::mlx5dv_context { comp_mask: QUERY_DEVICE_MASK, ..Default::default() };
    // SAFETY: an mlx5 context (the caller's check); `attr` is valid for writes.
    let rc = unsafe { ffi::mlx5dv_query_device(ctx.as_ptr(), &mut attr) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_query_device", rc));
    }
    Ok(attr)
}

/// The operation named by the out-of-order placement refusals.
pub const OOO_OP: &str = "mlx5dv_create_qp (MLX5DV_QP_CREATE_OOO_DP)";

/// `mlx5dv_query_device` into the v59 structure, asking also for
/// `MLX5DV_CONTEXT_MASK_OOO_RECV_WRS` (whose field the 44.0 structure lacks),
/// on a context already known to be mlx5. A libmlx5 older than the field
/// leaves its bit clear in the answer and writes nothing past the 44.0
/// structure's end.
#[cfg(not(rrddmma_mlnx_ofed4))]
pub(crate) fn query_device_v59(ctx: &Context) -> Result<ffi::mlx5dv_context_v59> {
    let ooo = u64::from(ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_OOO_RECV_WRS.0);
    let mut attr = ffi::mlx5dv_context_v59::default();
    attr.base.comp_mask = QUERY_DEVICE_MASK | ooo;
    // SAFETY: an mlx5 context (the caller's check); `attr` holds every field
    // whose bit is asked for (the layout is checked in `bindings::newer::v59`),
    // and `base` is its first field, so the cast names the same memory.
    let rc = unsafe { ffi::mlx5dv_query_device(ctx.as_ptr(), (&raw mut attr).cast::<ffi::mlx5dv_context>()) };
    if rc != 0 {
        return Err(Error::code("mlx5dv_query_device", rc));
    }
    Ok(attr)
}

/// The device's out-of-order receive capabilities
/// (`MLX5DV_CONTEXT_MASK_OOO_RECV_WRS`): `None` when libmlx5 does not report
/// them (a libmlx5 older than rdma-core 55, or a device without out-of-order
/// placement). [`Error::Unsupported`] off mlx5.
pub fn ooo_recv_wrs_caps(ctx: &Context) -> Result<Option<ffi::mlx5dv_ooo_recv_wrs_caps>> {
    #[cfg(rrddmma_mlnx_ofed4)]
    {
        let _ = ctx;
        Err(Error::unsupported(OOO_OP, &super::unsupported::OFED4, ctx.name(), "MLNX_OFED 4.x"))
    }
    #[cfg(not(rrddmma_mlnx_ofed4))]
    {
        require(ctx, OOO_OP, &super::unsupported::MLX5_OPTION, "Mlx5QpFlags::OOO_DP")?;
        let attr = query_device_v59(ctx)?;
        let ooo = u64::from(ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_OOO_RECV_WRS.0);
        Ok((attr.base.comp_mask & ooo != 0).then_some(attr.ooo_recv_wrs_caps))
    }
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// The `ooo_recv_wrs_caps` field that bounds a QP of type `t`, as libmlx5
/// reads it; `None` for a type libmlx5 never gives out-of-order placement.
pub(crate) fn ooo_cap_of(caps: &ffi::mlx5dv_ooo_recv_wrs_caps, t: super::QpType) -> Option<(&'static str, u32)> {
    use super::QpType as T;
    Some(match t {
        T::RC => ("ooo_recv_wrs_caps.max_rc", caps.max_rc),
        T::UC => ("ooo_recv_wrs_caps.max_uc", caps.max_uc),
        T::UD => ("ooo_recv_wrs_caps.max_ud", caps.max_ud),
        T::XRC_SEND | T::XRC_RECV => ("ooo_recv_wrs_caps.max_xrc", caps.max_xrc),
        T::DRIVER => ("ooo_recv_wrs_caps.max_dct", caps.max_dct),
        _ => return None,
    })
}

#[cfg(not(rrddmma_mlnx_ofed4))]
/// `Ok` when a QP of type `t` with `max_recv_wr` receive WQEs may be created
/// with [`Mlx5QpFlags::OOO_DP`] on `device`, whose libmlx5 reported `caps`
/// (`None`: not reported). The refusal names the device, the capability and
/// its value; more receive WQEs than the capability is
/// [`Error::CapExceeded`] (libmlx5's bare `EINVAL`).
pub(crate) fn check_ooo(
    device: &str,
    caps: Option<&ffi::mlx5dv_ooo_recv_wrs_caps>,
    t: super::QpType,
    max_recv_wr: u32,
) -> Result<()> {
    use super::unsupported::{OOO_NOT_REPORTED, OOO_QP_TYPE};
    let Some(caps) = caps else {
        return Err(Error::unsupported(OOO_OP, &OOO_NOT_REPORTED, device, "absent"));
    };
    let Some((cap, value)) = ooo_cap_of(caps, t) else {
        return Err(Error::unsupported(OOO_OP, &OOO_QP_TYPE, device, format_args!("none for {t:?} QPs")));
    };
    if value == 0 {
        return Err(Error::unsupported(OOO_OP, &OOO_QP_TYPE, device, format_args!("{cap} = 0 ({t:?} QPs)")));
    }
    if max_recv_wr > value && !matches!(t, super::QpType::XRC_SEND | super::QpType::XRC_RECV | super::QpType::DRIVER) {
        return Err(Error::CapExceeded { what: cap, asked: max_recv_wr.into(), limit: value.into() });
    }
    Ok(())
}

/// The sysfs path of the data-direct device bonded with `ctx`
/// (`mlx5dv_get_data_direct_sysfs_path`, with `/sys` put in front as its
/// man page says), or `None` when there is none (`ENODEV`).
///
/// [`Error::Unsupported`] naming rdma-core 54 when the loaded libmlx5 has
/// no such function, then naming the device when it is not mlx5.
#[doc(alias = "mlx5dv_get_data_direct_sysfs_path")]
pub fn data_direct_sysfs_path(ctx: &Context) -> Result<Option<std::path::PathBuf>> {
    const OP: &str = "mlx5dv_get_data_direct_sysfs_path";
    let sym = &ffi::newer::v59::MLX5DV_GET_DATA_DIRECT_SYSFS_PATH;
    if !sym.present() {
        let value = if sym.static_build() { "absent (static build)" } else { "absent" };
        return Err(Error::unsupported(OP, &super::unsupported::DATA_DIRECT_PATH_SYMBOL, ctx.name(), value));
    }
    #[cfg(rrddmma_mlnx_ofed4)]
    {
        let _ = ctx;
        Err(Error::unsupported(OP, &super::unsupported::OFED4, ctx.name(), "MLNX_OFED 4.x"))
    }
    #[cfg(not(rrddmma_mlnx_ofed4))]
    {
        require(ctx, OP, &super::unsupported::NOT_MLX5, "mlx5dv_get_data_direct_sysfs_path")?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: an mlx5 context; `buf` is writable for its length.
        let rc = unsafe {
            ffi::newer::v59::mlx5dv_get_data_direct_sysfs_path(ctx.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        };
        match rc {
            0 => {
                let s = std::ffi::CStr::from_bytes_until_nul(&buf)
                    .map_err(|_| Error::Verbs { op: OP, errno: libc::ENOSPC })?;
                let rel = s.to_string_lossy();
                Ok(Some(std::path::PathBuf::from("/sys").join(rel.trim_start_matches('/'))))
            }
            libc::ENODEV => Ok(None),
            rc => Err(Error::code(OP, rc).lacking(&super::unsupported::DATA_DIRECT, ctx.name())),
        }
    }
}

/// `Ok` when a CQ of `ctx` (an mlx5 context) may compress its CQEs in
/// format `f`, else [`Error::Unsupported`] naming the format (where
/// libmlx5's `mlx5dv_create_cq` fails with a bare `EINVAL`).
#[cfg(not(rrddmma_mlnx_ofed4))]
pub(crate) fn check_compression(device: &str, attr: &ffi::mlx5dv_context, f: CqeResFormat) -> Result<()> {
    let mask = u64::from(ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_CQE_COMPRESION.0);
    let caps = attr.cqe_comp_caps;
    if attr.comp_mask & mask != 0 && caps.max_num > 0 && caps.supported_format & u32::from(f.to_raw()) != 0 {
        return Ok(());
    }
    Err(Error::unsupported(
        "mlx5dv_create_cq (cqe_comp_res_format)",
        &crate::prim::unsupported::CQE_COMPRESSION,
        device,
        format_args!("({}, {:#x}), not {} (bit {:#x})", caps.max_num, caps.supported_format, f.name(), f.to_raw()),
    ))
}

/// `Ok` when CQEs of `opts` can be padded on this device: 128-byte CQEs and
/// `MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD` (libmlx5 says a bare `EINVAL`).
#[cfg(not(rrddmma_mlnx_ofed4))]
pub(crate) fn check_padding(device: &str, attr: &ffi::mlx5dv_context, opts: &CqOptions) -> Result<()> {
    if !opts.pad {
        return Ok(());
    }
    if opts.size != Some(CqeSize::B128) {
        return Err(Error::unsupported(
            "mlx5dv_create_cq (MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD)",
            &crate::prim::unsupported::CQE_PAD_SIZE,
            device,
            format_args!("{:?}", opts.size),
        ));
    }
    let pad = u64::from(ffi::mlx5dv_context_flags::MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD.0);
    if attr.flags & pad == 0 {
        return Err(Error::unsupported(
            "mlx5dv_create_cq (MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD)",
            &crate::prim::unsupported::CQE_PAD,
            device,
            "not set",
        ));
    }
    Ok(())
}

/// The operation named by the refusals of a striding WQ's creation.
pub const STRIDING_OP: &str = "mlx5dv_create_wq (striding RQ, MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ)";

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
        self.check_on("the device these caps were read from", p)
    }

    /// [`StridingRqCaps::check`] for the device named `device` (named in an
    /// [`Error::Unsupported`]).
    pub fn check_on(&self, device: &str, p: &StridingParams) -> Result<()> {
        let raw_packet = 1 << crate::bindings::ibv_qp_type::IBV_QPT_RAW_PACKET.0;
        if !self.available() || self.supported_qpts & raw_packet == 0 {
            return Err(Error::unsupported(
                STRIDING_OP,
                &crate::prim::unsupported::RAW_STRIDING,
                device,
                format_args!(
                    "log strides {}..={}, log stride bytes {}..={}, supported_qpts {:#x} (none for raw packet QPs)",
                    self.min_log_num_strides,
                    self.max_log_num_strides,
                    self.min_log_stride_bytes,
                    self.max_log_stride_bytes,
                    self.supported_qpts
                ),
            ));
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
pub fn striding_rq_caps(ctx: &Context) -> Result<StridingRqCaps> {
    #[cfg(rrddmma_mlnx_ofed4)]
    {
        Err(Error::unsupported(
            STRIDING_OP,
            &crate::prim::unsupported::RAW_STRIDING_OFED4,
            ctx.name(),
            "rrddmma_mlnx_ofed4 (no mlx5dv_create_wq)",
        ))
    }
    #[cfg(not(rrddmma_mlnx_ofed4))]
    {
        require(ctx, STRIDING_OP, &crate::prim::unsupported::RAW_NOT_MLX5, "a striding RQ")?;
        let attr = query_device_unchecked(ctx)?;
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

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod tests {
    use super::*;

    #[test]
    fn formats_have_the_header_values() {
        use ffi::mlx5dv_cqe_comp_res_format as F;
        assert_eq!(u32::from(CqeResFormat::Hash.to_raw()), F::MLX5DV_CQE_RES_FORMAT_HASH.0);
        assert_eq!(u32::from(CqeResFormat::Csum.to_raw()), F::MLX5DV_CQE_RES_FORMAT_CSUM.0);
        assert_eq!(u32::from(CqeResFormat::CsumStridx.to_raw()), F::MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX.0);
    }

    /// The attribute given to `mlx5dv_create_cq` names exactly the options asked for.
    #[test]
    fn cq_options_set_their_mask_bits_and_fields() {
        use ffi::mlx5dv_cq_init_attr_mask as M;
        let none = CqOptions::default();
        assert!(!none.any());
        assert_eq!(none.to_raw().comp_mask, 0);
        let all = CqOptions { size: Some(CqeSize::B128), pad: true, compression: Some(CqeResFormat::Csum) };
        let raw = all.to_raw();
        let mask = M::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE.0
            | M::MLX5DV_CQ_INIT_ATTR_MASK_FLAGS.0
            | M::MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE.0;
        assert_eq!(raw.comp_mask, u64::from(mask));
        assert_eq!((raw.cqe_size, raw.flags, raw.cqe_comp_res_format), (128, 1, 2));
        let size = CqOptions { size: Some(CqeSize::B64), ..CqOptions::default() }.to_raw();
        assert_eq!((size.comp_mask, size.cqe_size), (u64::from(M::MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE.0), 64));
        assert!(all.first_name().contains("MLX5DV_CQE_RES_FORMAT_CSUM"));
    }

    /// Padding needs 128-byte CQEs and the device's flag; compression the
    /// device's format bit and a session size.
    #[test]
    fn device_checks_name_what_is_missing() {
        let mut attr = ffi::mlx5dv_context::default();
        let pad = CqOptions { pad: true, ..CqOptions::default() };
        assert!(check_padding("mlx5_0", &attr, &pad).unwrap_err().to_string().contains("CqeSize::B128"));
        let pad = CqOptions { size: Some(CqeSize::B128), ..pad };
        assert!(check_padding("mlx5_0", &attr, &pad).unwrap_err().to_string().contains("CQE_128B_PAD"));
        attr.flags = u64::from(ffi::mlx5dv_context_flags::MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD.0);
        assert!(check_padding("mlx5_0", &attr, &pad).is_ok());
        assert!(check_compression("mlx5_0", &attr, CqeResFormat::Hash).is_err());
        attr.comp_mask = u64::from(ffi::mlx5dv_context_comp_mask::MLX5DV_CONTEXT_MASK_CQE_COMPRESION.0);
        attr.cqe_comp_caps.max_num = 64;
        attr.cqe_comp_caps.supported_format = 2;
        assert!(check_compression("mlx5_0", &attr, CqeResFormat::Csum).is_ok());
        let e = check_compression("mlx5_0", &attr, CqeResFormat::Hash).unwrap_err().to_string();
        assert!(e.contains("MLX5DV_CQE_RES_FORMAT_HASH"), "{e}");
    }

    /// OOO_DP is refused from the cap of the QP's type, naming the device,
    /// the cap and its value; unreported caps name the missing mask bit.
    #[test]
    fn ooo_is_refused_from_the_cap_of_the_qp_type() {
        use crate::prim::QpType;
        let row = |e: &Error| e.lack().map(|l| (l.missing.name, l.device.clone(), l.value.clone()));
        let e = check_ooo("mlx5_0", None, QpType::RC, 16).unwrap_err();
        let v = "MLX5DV_CONTEXT_MASK_OOO_RECV_WRS in mlx5dv_query_device's answer = absent".to_string();
        assert_eq!(row(&e), Some(("OOO_NOT_REPORTED", "mlx5_0".into(), v)), "{e}");
        let caps = ffi::mlx5dv_ooo_recv_wrs_caps { max_rc: 1024, max_ud: 0, ..Default::default() };
        assert!(check_ooo("mlx5_0", Some(&caps), QpType::RC, 1024).is_ok());
        let e = check_ooo("mlx5_0", Some(&caps), QpType::UD, 16).unwrap_err();
        assert!(e.is_unsupported());
        let v = "ooo_recv_wrs_caps for the QP type = ooo_recv_wrs_caps.max_ud = 0 (UD QPs)".to_string();
        assert_eq!(row(&e), Some(("OOO_QP_TYPE", "mlx5_0".into(), v)), "{e}");
        assert!(e.to_string().starts_with("mlx5dv_create_qp (MLX5DV_QP_CREATE_OOO_DP): out-of-order data placement"));
        let e = check_ooo("mlx5_0", Some(&caps), QpType::RC, 1025).unwrap_err().to_string();
        assert!(e.contains("ooo_recv_wrs_caps.max_rc") && e.contains("1025") && e.contains("1024"), "{e}");
        let e = check_ooo("mlx5_1", Some(&caps), QpType::RAW_PACKET, 1).unwrap_err().to_string();
        assert!(e.contains("RAW_PACKET") && e.contains("mlx5_1"), "{e}");
        assert_eq!(Mlx5QpFlags::OOO_DP.bits(), 1 << 7);
    }
}
