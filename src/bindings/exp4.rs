//! MLNX_OFED 4.x experimental verbs (`infiniband/verbs_exp.h`), bound by hand.
//!
//! Compiled only with `--cfg rrddmma_mlnx_ofed4`, which `build.rs` sets when
//! the linkage probe selects MLNX_OFED 4.x. Only what DC, masked atomics and
//! experimental completion timestamps need is here.
//!
//! # Header revision
//! Layouts and values are taken from the public MLNX_OFED 4.6-1.0.1.1
//! libibverbs (`libibverbs-41mlnx1`) as published in the GitHub repository
//! `gpudirect/libibverbs`, commit `bf7ecd9022a3d09ea0441b04853f5c16ce0c673c`,
//! files `include/infiniband/verbs_exp.h` and `include/infiniband/verbs.h`
//! (symbol list: `src/libibverbs.map`). Every size and offset asserted below
//! was computed by hand for x86-64 (LP64, glibc: `pthread_mutex_t` 40 bytes,
//! `pthread_cond_t` 48) from that revision; no 4.x header or library exists on
//! the build machines, so nothing here has been compiled against them or run.
//!
//! # Symbols and inlines
//! Of the experimental API, 4.x libibverbs exports only the provider-side
//! `ibv_exp_cmd_*` helpers (`src/libibverbs.map`; the header also declares
//! `ibv_exp_get_device_list`, which that map does not export, so it is not
//! bound). Every `ibv_exp_*` verb used here is a `static inline` in `verbs_exp.h` that
//! finds `struct verbs_context_exp` in front of the extended context
//! (`verbs_get_exp_ctx`) and calls one of its function pointers; they are
//! mirrored below as Rust functions. As in C, a missing entry yields `ENOSYS`
//! (with the header's own return convention per verb). The header's
//! invalid-`comp_mask` checks are kept (`EINVAL`), without their message on
//! standard error.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    missing_docs,
    missing_debug_implementations,
    clippy::missing_safety_doc
)]

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;

use super::sys::{
    ibv_ah, ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_cap, ibv_qp_init_attr, ibv_sge,
    ibv_srq, ibv_xrcd,
};

/// Compile-time layout check: `assert_layout!(T, size; field @ offset, ...)`.
macro_rules! assert_layout {
    ($t:ty, $size:expr; $($f:ident @ $off:expr),* $(,)?) => {
        const _: () = {
            assert!(size_of::<$t>() == $size, concat!("size of ", stringify!($t)));
            $(assert!(offset_of!($t, $f) == $off, concat!("offset of ", stringify!($t), "::", stringify!($f)));)*
        };
    };
}

// ---------------------------------------------------------------- values

/// `IBV_EXP_START_ENUM`: first experimental enum value.
pub const IBV_EXP_START_ENUM: u32 = 0x40;
/// `IBV_EXP_START_FLAG`: first experimental 64-bit flag.
pub const IBV_EXP_START_FLAG: u64 = 1 << 32;

/// `VERBS_CONTEXT_EXP` in `verbs_context::has_comp_mask` (4.x `verbs.h`).
pub const VERBS_CONTEXT_EXP: u64 = 1 << 62;

/// `enum ibv_qp_type` experimental value (4.x `verbs.h`): DC initiator.
pub const IBV_EXP_QPT_DC_INI: u32 = 32;

/// `enum ibv_exp_wr_opcode` (an `int` in C).
pub mod ibv_exp_wr_opcode {
    pub const IBV_EXP_WR_RDMA_WRITE: u32 = 0;
    pub const IBV_EXP_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const IBV_EXP_WR_SEND: u32 = 2;
    pub const IBV_EXP_WR_SEND_WITH_IMM: u32 = 3;
    pub const IBV_EXP_WR_RDMA_READ: u32 = 4;
    pub const IBV_EXP_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const IBV_EXP_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub const IBV_EXP_WR_SEND_ENABLE: u32 = 0x20 + super::IBV_EXP_START_ENUM;
    pub const IBV_EXP_WR_RECV_ENABLE: u32 = IBV_EXP_WR_SEND_ENABLE + 1;
    pub const IBV_EXP_WR_CQE_WAIT: u32 = IBV_EXP_WR_SEND_ENABLE + 2;
    pub const IBV_EXP_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP: u32 = IBV_EXP_WR_SEND_ENABLE + 3;
    pub const IBV_EXP_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD: u32 = IBV_EXP_WR_SEND_ENABLE + 4;
    pub const IBV_EXP_WR_NOP: u32 = IBV_EXP_WR_SEND_ENABLE + 5;
}

/// `enum ibv_exp_send_flags` (for the 64-bit `exp_send_flags`).
pub mod ibv_exp_send_flags {
    pub const IBV_EXP_SEND_FENCE: u64 = 1 << 0;
    pub const IBV_EXP_SEND_SIGNALED: u64 = 1 << 1;
    pub const IBV_EXP_SEND_SOLICITED: u64 = 1 << 2;
    pub const IBV_EXP_SEND_INLINE: u64 = 1 << 3;
    pub const IBV_EXP_SEND_EXT_ATOMIC_INLINE: u64 = super::IBV_EXP_START_FLAG << 3;
}

/// `enum ibv_exp_device_cap_flags` (experimental part, 64-bit).
pub mod ibv_exp_device_cap_flags {
    pub const IBV_EXP_DEVICE_DC_TRANSPORT: u64 = super::IBV_EXP_START_FLAG;
    pub const IBV_EXP_DEVICE_EXT_ATOMICS: u64 = super::IBV_EXP_START_FLAG << 4;
    pub const IBV_EXP_DEVICE_EXT_MASKED_ATOMICS: u64 = super::IBV_EXP_START_FLAG << 14;
}

/// `enum ibv_exp_device_attr_comp_mask`.
pub mod ibv_exp_device_attr_comp_mask {
    pub const IBV_EXP_DEVICE_ATTR_WITH_TIMESTAMP_MASK: u32 = 1 << 1;
    pub const IBV_EXP_DEVICE_ATTR_WITH_HCA_CORE_CLOCK: u32 = 1 << 2;
    pub const IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS: u32 = 1 << 3;
    pub const IBV_EXP_DEVICE_ATTR_EXT_ATOMIC_ARGS: u32 = 1 << 8;
    pub const IBV_EXP_DEVICE_ATTR_MAX_DCT: u32 = 1 << 11;
    pub const IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS: u32 = 1 << 19;
    pub const IBV_EXP_DEVICE_ATTR_COMP_MASK_2: u32 = 1 << 31;
    /// `enum ibv_exp_device_attr_comp_mask_2`: `IBV_EXP_DEVICE_ATTR_RESERVED_2`.
    pub const IBV_EXP_DEVICE_ATTR_RESERVED_2: u64 = 1 << 2;
}

/// `enum ibv_exp_values_comp_mask`.
pub mod ibv_exp_values_comp_mask {
    pub const IBV_EXP_VALUES_HW_CLOCK_NS: u32 = 1 << 0;
    pub const IBV_EXP_VALUES_HW_CLOCK: u32 = 1 << 1;
    pub const IBV_EXP_VALUES_CLOCK_INFO: u32 = 1 << 2;
    pub const IBV_EXP_VALUES_RESERVED: u32 = 1 << 3;
}

/// `enum ibv_exp_cq_create_flags`.
pub mod ibv_exp_cq_create_flags {
    pub const IBV_EXP_CQ_CREATE_CROSS_CHANNEL: u32 = 1 << 0;
    pub const IBV_EXP_CQ_TIMESTAMP: u32 = 1 << 1;
    pub const IBV_EXP_CQ_TIMESTAMP_TO_SYS_TIME: u32 = 1 << 2;
}

/// `enum ibv_exp_cq_init_attr_mask`.
pub mod ibv_exp_cq_init_attr_mask {
    pub const IBV_EXP_CQ_INIT_ATTR_FLAGS: u32 = 1 << 0;
    pub const IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN: u32 = 1 << 1;
    pub const IBV_EXP_CQ_INIT_ATTR_PEER_DIRECT: u32 = 1 << 2;
    pub const IBV_EXP_CQ_INIT_ATTR_RESERVED1: u32 = 1 << 3;
}

/// `enum ibv_exp_qp_init_attr_comp_mask`.
pub mod ibv_exp_qp_init_attr_comp_mask {
    pub const IBV_EXP_QP_INIT_ATTR_PD: u32 = 1 << 0;
    pub const IBV_EXP_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
    pub const IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
    pub const IBV_EXP_QP_INIT_ATTR_ATOMICS_ARG: u32 = 1 << 5;
    pub const IBV_EXP_QP_INIT_ATTR_RESERVED1: u32 = 1 << 13;
}

/// `enum ibv_exp_qp_attr_mask` (the 64-bit `exp_attr_mask` of `ibv_exp_modify_qp`).
pub mod ibv_exp_qp_attr_mask {
    pub const IBV_EXP_QP_STATE: u64 = 1 << 0;
    pub const IBV_EXP_QP_ACCESS_FLAGS: u64 = 1 << 3;
    pub const IBV_EXP_QP_PKEY_INDEX: u64 = 1 << 4;
    pub const IBV_EXP_QP_PORT: u64 = 1 << 5;
    pub const IBV_EXP_QP_AV: u64 = 1 << 7;
    pub const IBV_EXP_QP_PATH_MTU: u64 = 1 << 8;
    pub const IBV_EXP_QP_TIMEOUT: u64 = 1 << 9;
    pub const IBV_EXP_QP_RETRY_CNT: u64 = 1 << 10;
    pub const IBV_EXP_QP_RNR_RETRY: u64 = 1 << 11;
    pub const IBV_EXP_QP_MAX_QP_RD_ATOMIC: u64 = 1 << 13;
    pub const IBV_EXP_QP_SQ_PSN: u64 = 1 << 16;
    pub const IBV_EXP_QP_DC_KEY: u64 = super::IBV_EXP_START_FLAG << 22;
    /// `enum ibv_exp_qp_attr_comp_mask`: `IBV_EXP_QP_ATTR_RESERVED`.
    pub const IBV_EXP_QP_ATTR_RESERVED: u32 = 1 << 2;
}

/// `enum ibv_exp_dct_init_attr_comp_mask`: `IBV_EXP_DCT_INIT_ATTR_RESERVED`.
pub const IBV_EXP_DCT_INIT_ATTR_RESERVED: u32 = 1 << 0;

/// `enum ibv_exp_wc_opcode` (an `int` in C).
pub mod ibv_exp_wc_opcode {
    pub const IBV_EXP_WC_SEND: u32 = 0;
    pub const IBV_EXP_WC_RDMA_WRITE: u32 = 1;
    pub const IBV_EXP_WC_RDMA_READ: u32 = 2;
    pub const IBV_EXP_WC_COMP_SWAP: u32 = 3;
    pub const IBV_EXP_WC_FETCH_ADD: u32 = 4;
    pub const IBV_EXP_WC_MASKED_COMP_SWAP: u32 = 9;
    pub const IBV_EXP_WC_MASKED_FETCH_ADD: u32 = 10;
    pub const IBV_EXP_WC_RECV: u32 = 1 << 7;
    pub const IBV_EXP_WC_RECV_RDMA_WITH_IMM: u32 = IBV_EXP_WC_RECV + 1;
}

/// `enum ibv_exp_wc_flags` (the 64-bit `exp_wc_flags`).
pub mod ibv_exp_wc_flags {
    pub const IBV_EXP_WC_GRH: u64 = 1 << 0;
    pub const IBV_EXP_WC_WITH_IMM: u64 = 1 << 1;
    pub const IBV_EXP_WC_WITH_TIMESTAMP: u64 = super::IBV_EXP_START_FLAG << 6;
    pub const IBV_EXP_WC_QP: u64 = super::IBV_EXP_START_FLAG << 7;
    pub const IBV_EXP_WC_SRQ: u64 = super::IBV_EXP_START_FLAG << 8;
    pub const IBV_EXP_WC_DCT: u64 = super::IBV_EXP_START_FLAG << 9;
}

// ---------------------------------------------------------------- structs

/// `struct ibv_exp_clock_info`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_clock_info {
    pub cycles: u64,
    pub nsec: u64,
    pub frac: u64,
    pub mask: u64,
    pub shift: u32,
    pub mult: u32,
    pub comp_mask: u32,
}
assert_layout!(ibv_exp_clock_info, 48; cycles @ 0, nsec @ 8, frac @ 16, mask @ 24, shift @ 32, mult @ 36, comp_mask @ 40);

/// `struct ibv_exp_values`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_values {
    pub comp_mask: u32,
    pub hwclock_ns: u64,
    pub hwclock: u64,
    pub clock_info: ibv_exp_clock_info,
}
assert_layout!(ibv_exp_values, 72; comp_mask @ 0, hwclock_ns @ 8, hwclock @ 16, clock_info @ 24);

/// `struct ibv_exp_cq_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_exp_cq_init_attr {
    pub comp_mask: u32,
    pub flags: u32,
    /// `struct ibv_exp_res_domain *` (not bound).
    pub res_domain: *mut c_void,
    /// `struct ibv_exp_peer_direct_attr *` (not bound).
    pub peer_direct_attrs: *mut c_void,
}
assert_layout!(ibv_exp_cq_init_attr, 24; comp_mask @ 0, flags @ 4, res_domain @ 8, peer_direct_attrs @ 16);

impl Default for ibv_exp_cq_init_attr {
    fn default() -> Self {
        ibv_exp_cq_init_attr { comp_mask: 0, flags: 0, res_domain: ptr::null_mut(), peer_direct_attrs: ptr::null_mut() }
    }
}

/// `struct ibv_exp_wc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_exp_wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_exp_wc_opcode`.
    pub exp_opcode: u32,
    pub vendor_err: u32,
    /// `byte_len`, or the multi-packet `mp_wr` pair, in one union.
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub reserved: c_int,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub timestamp: u64,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub dct: *mut ibv_exp_dct,
    pub exp_wc_flags: u64,
    pub tm_tag: u64,
    pub tm_priv: u32,
}
assert_layout!(ibv_exp_wc, 104;
    wr_id @ 0, status @ 8, exp_opcode @ 12, vendor_err @ 16, byte_len @ 20, imm_data @ 24, qp_num @ 28,
    src_qp @ 32, reserved @ 36, pkey_index @ 40, slid @ 42, sl @ 44, dlid_path_bits @ 45, timestamp @ 48,
    qp @ 56, srq @ 64, dct @ 72, exp_wc_flags @ 80, tm_tag @ 88, tm_priv @ 96);

impl Default for ibv_exp_wc {
    fn default() -> Self {
        // SAFETY: integers and raw pointers; all-zero is a valid value of each.
        unsafe { core::mem::zeroed() }
    }
}

/// `struct ibv_exp_dct_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_exp_dct_init_attr {
    pub pd: *mut ibv_pd,
    pub cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub dc_key: u64,
    pub port: u8,
    pub access_flags: u32,
    pub min_rnr_timer: u8,
    pub tclass: u8,
    pub flow_label: u32,
    /// `enum ibv_mtu`.
    pub mtu: u32,
    pub pkey_index: u8,
    pub gid_index: u8,
    pub hop_limit: u8,
    pub inline_size: u32,
    pub create_flags: u32,
    pub comp_mask: u32,
}
assert_layout!(ibv_exp_dct_init_attr, 72;
    pd @ 0, cq @ 8, srq @ 16, dc_key @ 24, port @ 32, access_flags @ 36, min_rnr_timer @ 40, tclass @ 41,
    flow_label @ 44, mtu @ 48, pkey_index @ 52, gid_index @ 53, hop_limit @ 54, inline_size @ 56,
    create_flags @ 60, comp_mask @ 64);

/// `struct ibv_exp_dct`.
#[repr(C)]
pub struct ibv_exp_dct {
    pub context: *mut ibv_context,
    pub handle: u32,
    pub dct_num: u32,
    pub pd: *mut ibv_pd,
    pub srq: *mut ibv_srq,
    pub cq: *mut ibv_cq,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}
assert_layout!(ibv_exp_dct, 136;
    context @ 0, handle @ 8, dct_num @ 12, pd @ 16, srq @ 24, cq @ 32, mutex @ 40, cond @ 80,
    events_completed @ 128);

/// The union of `struct ibv_exp_qpg`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_exp_qpg_u {
    pub qpg_parent: *mut ibv_qp,
    /// `struct ibv_exp_qpg_init_attrib { tss_child_count, rss_child_count }`.
    pub parent_attrib: [u32; 2],
}

/// `struct ibv_exp_qpg` (QP groups; left zero here).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_exp_qpg {
    pub qpg_type: u32,
    pub u: ibv_exp_qpg_u,
}
assert_layout!(ibv_exp_qpg, 16; qpg_type @ 0, u @ 8);

/// `struct ibv_exp_qp_init_attr`. Its first seven fields are those of
/// `struct ibv_qp_init_attr` (the header casts one to the other).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_exp_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`, including [`IBV_EXP_QPT_DC_INI`].
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub exp_create_flags: u32,
    pub max_inl_recv: u32,
    pub qpg: ibv_exp_qpg,
    pub max_atomic_arg: u32,
    pub max_inl_send_klms: u32,
    /// `struct ibv_exp_res_domain *` (not bound).
    pub res_domain: *mut c_void,
    /// `struct ibv_exp_rx_hash_conf *` (not bound).
    pub rx_hash_conf: *mut c_void,
    pub port_num: u8,
    /// `struct ibv_exp_peer_direct_attr *` (not bound).
    pub peer_direct_attrs: *mut c_void,
    pub max_tso_header: u16,
    pub associated_qpn: u32,
}
assert_layout!(ibv_exp_qp_init_attr, 152;
    qp_context @ 0, send_cq @ 8, recv_cq @ 16, srq @ 24, cap @ 32, qp_type @ 52, sq_sig_all @ 56,
    comp_mask @ 60, pd @ 64, xrcd @ 72, exp_create_flags @ 80, max_inl_recv @ 84, qpg @ 88,
    max_atomic_arg @ 104, max_inl_send_klms @ 108, res_domain @ 112, rx_hash_conf @ 120, port_num @ 128,
    peer_direct_attrs @ 136, max_tso_header @ 144, associated_qpn @ 148);
// The prefix shared with `struct ibv_qp_init_attr` (rdma-core's is the same
// 64 bytes as 4.x's), which `ibv_exp_create_qp` relies on.
const _: () = assert!(size_of::<ibv_qp_init_attr>() == 64 && offset_of!(ibv_qp_init_attr, sq_sig_all) == 56);

impl Default for ibv_exp_qp_init_attr {
    fn default() -> Self {
        // SAFETY: integers, raw pointers and a union of those; all-zero is valid.
        unsafe { core::mem::zeroed() }
    }
}

/// `struct ibv_exp_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_exp_qp_attr {
    /// `enum ibv_qp_state`.
    pub qp_state: u32,
    pub cur_qp_state: u32,
    /// `enum ibv_mtu`.
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_int,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub dct_key: u64,
    pub comp_mask: u32,
    pub flow_entropy: u32,
    pub rate_limit: u32,
    /// `struct ibv_exp_burst_info { max_burst_sz: u32, typical_pkt_sz: u16 }`.
    pub burst_info: [u32; 2],
}
assert_layout!(ibv_exp_qp_attr, 168;
    qp_state @ 0, path_mtu @ 8, dest_qp_num @ 28, qp_access_flags @ 32, cap @ 36, ah_attr @ 56,
    alt_ah_attr @ 88, pkey_index @ 120, alt_pkey_index @ 122, en_sqd_async_notify @ 124, max_rd_atomic @ 126,
    min_rnr_timer @ 128, port_num @ 129, timeout @ 130, retry_cnt @ 131, rnr_retry @ 132, alt_port_num @ 133,
    alt_timeout @ 134, dct_key @ 136, comp_mask @ 144, flow_entropy @ 148, rate_limit @ 152, burst_info @ 156);
const _: () = assert!(size_of::<ibv_ah_attr>() == 32 && size_of::<ibv_qp_cap>() == 20);

impl Default for ibv_exp_qp_attr {
    fn default() -> Self {
        // SAFETY: integers only; all-zero is valid.
        unsafe { core::mem::zeroed() }
    }
}

/// `struct ibv_exp_cmp_swap`: masked compare-and-swap operands.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_cmp_swap {
    pub compare_mask: u64,
    pub compare_val: u64,
    pub swap_val: u64,
    pub swap_mask: u64,
}
assert_layout!(ibv_exp_cmp_swap, 32; compare_mask @ 0, compare_val @ 8, swap_val @ 16, swap_mask @ 24);

/// `struct ibv_exp_fetch_add`: masked fetch-and-add operands.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_fetch_add {
    pub add_val: u64,
    pub field_boundary: u64,
}
assert_layout!(ibv_exp_fetch_add, 16; add_val @ 0, field_boundary @ 8);

/// `ibv_exp_send_wr::wr.rdma`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_exp_send_wr::wr.atomic`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `ibv_exp_send_wr::wr.ud`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_exp_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// `ibv_exp_send_wr::wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_exp_send_wr_wr {
    pub rdma: ibv_exp_wr_rdma,
    pub atomic: ibv_exp_wr_atomic,
    pub ud: ibv_exp_wr_ud,
}
assert_layout!(ibv_exp_send_wr_wr, 32;);

/// `ibv_exp_send_wr::dc`: where a DCI request goes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_exp_wr_dc {
    pub ah: *mut ibv_ah,
    pub dct_access_key: u64,
    pub dct_number: u32,
}
assert_layout!(ibv_exp_wr_dc, 24; ah @ 0, dct_access_key @ 8, dct_number @ 16);

/// `ibv_exp_send_wr::ext_op.masked_atomics.wr_data.inline_data.op`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_exp_masked_atomic_op {
    pub cmp_swap: ibv_exp_cmp_swap,
    pub fetch_add: ibv_exp_fetch_add,
}

/// `ibv_exp_send_wr::ext_op.masked_atomics`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_exp_masked_atomics {
    /// log2 of the operand size in bytes (2 or 3 for inline operands).
    pub log_arg_sz: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// `wr_data.inline_data.op` (used with `IBV_EXP_SEND_EXT_ATOMIC_INLINE`).
    pub op: ibv_exp_masked_atomic_op,
}
assert_layout!(ibv_exp_masked_atomics, 56; log_arg_sz @ 0, remote_addr @ 8, rkey @ 16, op @ 24);

/// `ibv_exp_send_wr::ext_op`: masked atomics, or UMR (not bound, 72 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_exp_send_wr_ext_op {
    pub masked_atomics: ibv_exp_masked_atomics,
    pub umr: [u64; 9],
}
assert_layout!(ibv_exp_send_wr_ext_op, 72;);

/// `struct ibv_exp_send_wr`. Members this crate does not use are opaque
/// arrays of the members' size and alignment: `task` (cross-channel),
/// `op` (calc), `bind_mw`/`tso`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_exp_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_exp_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `enum ibv_exp_wr_opcode`.
    pub exp_opcode: u32,
    pub reserved: c_int,
    /// `ex.imm_data` (network order) or `ex.invalidate_rkey`.
    pub imm_data: u32,
    pub wr: ibv_exp_send_wr_wr,
    /// `qp_type.xrc.remote_srqn` / `xrc_remote_srq_num` (one union).
    pub xrc_remote_srq_num: u32,
    pub task: [u64; 4],
    pub op: [u32; 3],
    pub dc: ibv_exp_wr_dc,
    pub bind_mw_tso: [u64; 6],
    /// `enum ibv_exp_send_flags`.
    pub exp_send_flags: u64,
    pub comp_mask: u32,
    pub ext_op: ibv_exp_send_wr_ext_op,
}
assert_layout!(ibv_exp_send_wr, 288;
    wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24, exp_opcode @ 28, reserved @ 32, imm_data @ 36, wr @ 40,
    xrc_remote_srq_num @ 72, task @ 80, op @ 112, dc @ 128, bind_mw_tso @ 152, exp_send_flags @ 200,
    comp_mask @ 208, ext_op @ 216);

impl Default for ibv_exp_send_wr {
    fn default() -> Self {
        // SAFETY: integers, raw pointers and unions of those; all-zero is valid.
        unsafe { core::mem::zeroed() }
    }
}

/// `struct ibv_exp_ext_atomics_params`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_ext_atomics_params {
    pub log_atomic_arg_sizes: u64,
    pub max_fa_bit_boundary: u32,
    pub log_max_atomic_inline: u32,
}

/// `struct ibv_exp_masked_atomic_params`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct ibv_exp_masked_atomic_params {
    pub max_fa_bit_boundary: u32,
    pub log_max_atomic_inline: u32,
    pub masked_log_atomic_arg_sizes: u64,
    pub masked_log_atomic_arg_sizes_network_endianness: u64,
}
assert_layout!(ibv_exp_masked_atomic_params, 24;
    max_fa_bit_boundary @ 0, log_max_atomic_inline @ 4, masked_log_atomic_arg_sizes @ 8,
    masked_log_atomic_arg_sizes_network_endianness @ 16);

/// `struct ibv_exp_device_attr`: named through `masked_atomic`; the members
/// this crate does not read are opaque arrays of their size and alignment,
/// and everything after `masked_atomic` is `tail` (the C struct is 600 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_exp_device_attr {
    pub fw_ver: [u8; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub reserved: c_int,
    /// `max_sge` ... `max_srq_sge`: 26 `int`s (`exp_atomic_cap` among them, at 164).
    pub base_limits: [c_int; 26],
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    pub comp_mask: u32,
    /// `struct ibv_exp_device_calc_cap`.
    pub calc_cap: [u64; 5],
    pub timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub exp_device_cap_flags: u64,
    pub max_dc_req_rd_atom: c_int,
    pub max_dc_res_rd_atom: c_int,
    pub inline_recv_sz: c_int,
    pub max_rss_tbl_sz: u32,
    pub ext_atom: ibv_exp_ext_atomics_params,
    /// `struct ibv_exp_umr_caps`.
    pub umr_caps: [u32; 4],
    /// `struct ibv_exp_odp_caps`.
    pub odp_caps: [u64; 4],
    pub max_dct: c_int,
    pub max_ctx_res_domain: c_int,
    /// `struct ibv_exp_rx_hash_caps`.
    pub rx_hash_caps: [u64; 4],
    pub max_wq_type_rq: u32,
    pub max_device_ctx: c_int,
    /// `struct ibv_exp_mp_rq_caps`.
    pub mp_rq_caps: [u32; 3],
    pub wq_vlan_offloads_cap: u16,
    /// `struct ibv_exp_ec_caps`.
    pub ec_caps: [u32; 2],
    pub masked_atomic: ibv_exp_masked_atomic_params,
    /// `rx_pad_end_addr_align` ... `pci_atomic_caps` (bytes 472..600).
    pub tail: [u64; 16],
}
assert_layout!(ibv_exp_device_attr, 600;
    node_guid @ 64, vendor_id @ 96, max_qp_wr @ 112, reserved @ 116, base_limits @ 120, max_pkeys @ 224,
    phys_port_cnt @ 227, comp_mask @ 228, calc_cap @ 232, timestamp_mask @ 272, hca_core_clock @ 280,
    exp_device_cap_flags @ 288, max_dc_req_rd_atom @ 296, max_rss_tbl_sz @ 308, ext_atom @ 312, umr_caps @ 328,
    odp_caps @ 344, max_dct @ 376, max_ctx_res_domain @ 380, rx_hash_caps @ 384, max_wq_type_rq @ 416,
    max_device_ctx @ 420, mp_rq_caps @ 424, wq_vlan_offloads_cap @ 436, ec_caps @ 440, masked_atomic @ 448,
    tail @ 472);

impl Default for ibv_exp_device_attr {
    fn default() -> Self {
        // SAFETY: integers only; all-zero is valid.
        unsafe { core::mem::zeroed() }
    }
}

// ------------------------------------------------- the experimental context

type Op = *const c_void;

/// `struct verbs_context_exp`: 82 function pointers, `venv` and `sz` (664
/// bytes), allocated by 4.x libibverbs immediately in front of the
/// `struct verbs_context` that holds the `ibv_context`. Entries this crate
/// does not call are opaque pointer arrays, named by the index of their first
/// member in the header's order.
#[repr(C)]
pub struct verbs_context_exp {
    /// `exp_alloc_dm` ... `drv_exp_bind_mw`, with `venv` at index 34.
    pub _ops_0: [Op; 52],
    pub drv_exp_post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_exp_send_wr, *mut *mut ibv_exp_send_wr) -> c_int>,
    /// `drv_exp_reg_mr`, `lib_exp_reg_mr`, `drv_exp_ibv_create_ah`.
    pub _ops_53: [Op; 3],
    pub drv_exp_query_values: Option<unsafe extern "C" fn(*mut ibv_context, c_int, *mut ibv_exp_values) -> c_int>,
    pub exp_create_cq: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            c_int,
            *mut ibv_comp_channel,
            c_int,
            *mut ibv_exp_cq_init_attr,
        ) -> *mut ibv_cq,
    >,
    pub drv_exp_ibv_poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_exp_wc, u32) -> c_int>,
    /// `drv_exp_get_legacy_xrc` ... `drv_exp_modify_qp`.
    pub _ops_59: [Op; 5],
    pub lib_exp_modify_qp: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_exp_qp_attr, u64) -> c_int>,
    /// `drv_exp_post_task` ... `lib_exp_query_port`.
    pub _ops_65: [Op; 10],
    pub create_dct: Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_exp_dct_init_attr) -> *mut ibv_exp_dct>,
    pub destroy_dct: Option<unsafe extern "C" fn(*mut ibv_exp_dct) -> c_int>,
    pub query_dct: Op,
    pub drv_exp_query_device: Op,
    pub lib_exp_query_device: Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_exp_device_attr) -> c_int>,
    pub drv_exp_create_qp: Op,
    pub lib_exp_create_qp: Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_exp_qp_init_attr) -> *mut ibv_qp>,
    /// Set by the library to `sizeof(struct verbs_context_exp)`; must stay last.
    pub sz: usize,
}
assert_layout!(verbs_context_exp, 664;
    drv_exp_post_send @ 416, drv_exp_query_values @ 448, exp_create_cq @ 456, drv_exp_ibv_poll_cq @ 464,
    lib_exp_modify_qp @ 512, create_dct @ 600, destroy_dct @ 608, query_dct @ 616, lib_exp_query_device @ 632,
    lib_exp_create_qp @ 648, sz @ 656);

/// `sizeof(struct ibv_context)`, the same 328 bytes in 4.x `verbs.h` (32
/// entries of `ibv_context_ops`) as in the rdma-core bindings.
const IBV_CONTEXT_SIZE: usize = 328;
const _: () = assert!(size_of::<ibv_context>() == IBV_CONTEXT_SIZE);

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// `verbs_get_exp_ctx`: the experimental context of `ctx`, or null when the
/// library did not allocate one.
///
/// In 4.x `verbs.h` the last three members of `struct verbs_context` are
/// `has_comp_mask` (u64), `sz` (size_t) and the `ibv_context`; so the two
/// words before `ctx` are `sz` (at -8) and `has_comp_mask` (at -16), and the
/// `verbs_context` starts `sz - sizeof(ibv_context)` bytes before `ctx`.
///
/// # Safety
/// `ctx` must be a live context opened by MLNX_OFED 4.x libibverbs.
#[inline(always)]
pub unsafe fn verbs_get_exp_ctx(ctx: *mut ibv_context) -> *mut verbs_context_exp {
    // SAFETY: the caller passes a live context.
    if ctx.is_null() || unsafe { (*ctx).abi_compat } != usize::MAX as *mut c_void {
        return ptr::null_mut();
    }
    let base = ctx.cast::<u8>();
    // SAFETY: an extended 4.x context: the two words before the context are
    // `has_comp_mask` and `sz` of the enclosing `verbs_context` (see above).
    let (has_comp_mask, sz) = unsafe { (base.sub(16).cast::<u64>().read(), base.sub(8).cast::<usize>().read()) };
    if has_comp_mask & VERBS_CONTEXT_EXP == 0 || sz < IBV_CONTEXT_SIZE {
        return ptr::null_mut();
    }
    // SAFETY: with VERBS_CONTEXT_EXP set, libibverbs allocated the
    // experimental context right before the `verbs_context` of `sz` bytes
    // that ends with `ctx`'s `ibv_context`: both steps stay in that block.
    unsafe { base.sub(sz - IBV_CONTEXT_SIZE).sub(size_of::<verbs_context_exp>()).cast() }
}

/// `verbs_get_exp_ctx_op`: the experimental context if its size covers `op`
/// and `op` is set; else null.
macro_rules! exp_ctx_op {
    ($ctx:expr, $op:ident) => {{
        // SAFETY: forwarded from the enclosing function's contract.
        let v = unsafe { verbs_get_exp_ctx($ctx) };
        if v.is_null() {
            None
        } else {
            // SAFETY: non-null: the live experimental context of `$ctx`;
            // `sz` is read first and the entry only when `sz` covers it.
            unsafe {
                if (*v).sz < size_of::<verbs_context_exp>() - offset_of!(verbs_context_exp, $op) {
                    None
                } else {
                    (*v).$op
                }
            }
        }
    }};
}

/// `ibv_exp_query_device`. Returns 0, or an error number (`ENOSYS` when the
/// provider has no experimental query).
///
/// # Safety
/// `context` must be a live 4.x context; `attr` valid for reads and writes.
#[inline]
pub unsafe fn ibv_exp_query_device(context: *mut ibv_context, attr: *mut ibv_exp_device_attr) -> c_int {
    use ibv_exp_device_attr_comp_mask as M;
    let Some(f) = exp_ctx_op!(context, lib_exp_query_device) else {
        return libc::ENOSYS;
    };
    // SAFETY: `attr` is valid (caller).
    let a = unsafe { &*attr };
    if a.comp_mask & M::IBV_EXP_DEVICE_ATTR_COMP_MASK_2 != 0 {
        // `comp_mask_2` is the u64 at 576, inside `tail`.
        let comp_mask_2 = a.tail[(576 - 472) / 8];
        if comp_mask_2 > M::IBV_EXP_DEVICE_ATTR_RESERVED_2 - 1 {
            set_errno(libc::EINVAL);
            return libc::EINVAL;
        }
    }
    // SAFETY: provider entry of this context, called as the header does.
    unsafe { f(context, attr) }
}

/// `ibv_exp_create_qp`. Null with `errno` set on failure.
///
/// # Safety
/// `context` must be a live 4.x context; `attr` valid, its objects live and
/// of that context.
#[inline]
pub unsafe fn ibv_exp_create_qp(context: *mut ibv_context, attr: *mut ibv_exp_qp_init_attr) -> *mut ibv_qp {
    use ibv_exp_qp_init_attr_comp_mask as M;
    // SAFETY: `attr` is valid (caller).
    let mask = unsafe { (*attr).comp_mask };
    if mask == M::IBV_EXP_QP_INIT_ATTR_PD {
        // SAFETY: the leading members are `struct ibv_qp_init_attr` (asserted
        // above); the header makes the same call.
        return unsafe { super::sys::ibv_create_qp((*attr).pd, attr.cast()) };
    }
    let Some(f) = exp_ctx_op!(context, lib_exp_create_qp) else {
        set_errno(libc::ENOSYS);
        return ptr::null_mut();
    };
    if mask > M::IBV_EXP_QP_INIT_ATTR_RESERVED1 - 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: provider entry of this context.
    unsafe { f(context, attr) }
}

/// `ibv_exp_modify_qp`. Returns 0 or an error number.
///
/// # Safety
/// `qp` must be a live QP of a 4.x context; `attr` valid.
#[inline]
pub unsafe fn ibv_exp_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_exp_qp_attr, exp_attr_mask: u64) -> c_int {
    // SAFETY: live QP (caller).
    let ctx = unsafe { (*qp).context };
    let Some(f) = exp_ctx_op!(ctx, lib_exp_modify_qp) else {
        set_errno(libc::ENOSYS);
        return libc::ENOSYS;
    };
    // SAFETY: `attr` is valid (caller).
    if unsafe { (*attr).comp_mask } > ibv_exp_qp_attr_mask::IBV_EXP_QP_ATTR_RESERVED - 1 {
        set_errno(libc::EINVAL);
        return libc::EINVAL;
    }
    // SAFETY: provider entry of this context.
    unsafe { f(qp, attr, exp_attr_mask) }
}

/// `ibv_exp_create_dct`: under the context's mutex, as the header does; sets
/// the DCT's `context`. Null with `errno` set on failure.
///
/// # Safety
/// `context` must be a live 4.x context; `attr` valid, its PD, CQ and SRQ
/// live and of that context.
#[inline]
pub unsafe fn ibv_exp_create_dct(context: *mut ibv_context, attr: *mut ibv_exp_dct_init_attr) -> *mut ibv_exp_dct {
    let Some(f) = exp_ctx_op!(context, create_dct) else {
        set_errno(libc::ENOSYS);
        return ptr::null_mut();
    };
    // SAFETY: `attr` is valid (caller).
    if unsafe { (*attr).comp_mask } > IBV_EXP_DCT_INIT_ATTR_RESERVED - 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: the context's own mutex (a glibc mutex, same layout in the
    // bindings); the provider entry is called while holding it.
    unsafe {
        let m = ptr::addr_of_mut!((*context).mutex).cast::<libc::pthread_mutex_t>();
        libc::pthread_mutex_lock(m);
        let dct = f(context, attr);
        if !dct.is_null() {
            (*dct).context = context;
        }
        libc::pthread_mutex_unlock(m);
        dct
    }
}

/// `ibv_exp_destroy_dct`. Returns 0 or an error number.
///
/// # Safety
/// `dct` must be a live DCT from [`ibv_exp_create_dct`], not used afterwards.
#[inline]
pub unsafe fn ibv_exp_destroy_dct(dct: *mut ibv_exp_dct) -> c_int {
    // SAFETY: live DCT (caller).
    let context = unsafe { (*dct).context };
    let Some(f) = exp_ctx_op!(context, destroy_dct) else {
        set_errno(libc::ENOSYS);
        return libc::ENOSYS;
    };
    // SAFETY: as in `ibv_exp_create_dct`.
    unsafe {
        let m = ptr::addr_of_mut!((*context).mutex).cast::<libc::pthread_mutex_t>();
        libc::pthread_mutex_lock(m);
        let rc = f(dct);
        libc::pthread_mutex_unlock(m);
        rc
    }
}

/// `ibv_exp_create_cq`: the provider creates the CQ; the generic fields are
/// filled in here as the header does (context, channel with its reference
/// count, user context, event counters, mutex and condition variable), under
/// the context's mutex. Null with `errno` set on failure.
///
/// # Safety
/// `context` must be a live 4.x context; `channel` null or a live channel of
/// it; `attr` valid.
#[inline]
pub unsafe fn ibv_exp_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
    attr: *mut ibv_exp_cq_init_attr,
) -> *mut ibv_cq {
    let Some(f) = exp_ctx_op!(context, exp_create_cq) else {
        set_errno(libc::ENOSYS);
        return ptr::null_mut();
    };
    // SAFETY: `attr` is valid (caller).
    if unsafe { (*attr).comp_mask } > ibv_exp_cq_init_attr_mask::IBV_EXP_CQ_INIT_ATTR_RESERVED1 - 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: the context's mutex is held around the provider call and the
    // initialisation of the new CQ's generic fields, whose layout is the same
    // in 4.x `verbs.h` as in the bindings (both 128 bytes).
    unsafe {
        let m = ptr::addr_of_mut!((*context).mutex).cast::<libc::pthread_mutex_t>();
        libc::pthread_mutex_lock(m);
        let cq = f(context, cqe, channel, comp_vector, attr);
        if !cq.is_null() {
            (*cq).context = context;
            (*cq).channel = channel;
            if !channel.is_null() {
                (*channel).refcnt += 1;
            }
            (*cq).cq_context = cq_context;
            (*cq).comp_events_completed = 0;
            (*cq).async_events_completed = 0;
            libc::pthread_mutex_init(ptr::addr_of_mut!((*cq).mutex).cast(), ptr::null());
            libc::pthread_cond_init(ptr::addr_of_mut!((*cq).cond).cast(), ptr::null());
        }
        libc::pthread_mutex_unlock(m);
        cq
    }
}

/// `ibv_exp_poll_cq`: up to `num_entries` completions of `wc_size` bytes
/// each. Returns the count, or a negative value (`-ENOSYS` without the entry).
///
/// # Safety
/// `cq` must be a live CQ of a 4.x context; `wc` valid for `num_entries`
/// writes of `wc_size` bytes.
#[inline(always)]
pub unsafe fn ibv_exp_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_exp_wc, wc_size: u32) -> c_int {
    // SAFETY: live CQ (caller).
    let ctx = unsafe { (*cq).context };
    let Some(f) = exp_ctx_op!(ctx, drv_exp_ibv_poll_cq) else {
        return -libc::ENOSYS;
    };
    // SAFETY: provider entry of this context.
    unsafe { f(cq, num_entries, wc, wc_size) }
}

/// `ibv_exp_post_send`. Returns 0, an error number, or `-ENOSYS`.
///
/// # Safety
/// `qp` must be a live QP of a 4.x context; the request list valid, with
/// `post_send`'s memory contract for the buffers it names.
#[inline(always)]
pub unsafe fn ibv_exp_post_send(qp: *mut ibv_qp, wr: *mut ibv_exp_send_wr, bad_wr: *mut *mut ibv_exp_send_wr) -> c_int {
    // SAFETY: live QP (caller).
    let ctx = unsafe { (*qp).context };
    let Some(f) = exp_ctx_op!(ctx, drv_exp_post_send) else {
        return -libc::ENOSYS;
    };
    // SAFETY: provider entry of this context.
    unsafe { f(qp, wr, bad_wr) }
}

/// `ibv_exp_query_values`. Returns 0, or a negative error (`-ENOSYS`), or the
/// provider's result; `EINVAL` for an unknown `comp_mask` bit, as the header.
///
/// # Safety
/// `context` must be a live 4.x context; `values` valid.
#[inline]
pub unsafe fn ibv_exp_query_values(context: *mut ibv_context, q_values: c_int, values: *mut ibv_exp_values) -> c_int {
    let Some(f) = exp_ctx_op!(context, drv_exp_query_values) else {
        set_errno(libc::ENOSYS);
        return -libc::ENOSYS;
    };
    // SAFETY: `values` is valid (caller).
    if unsafe { (*values).comp_mask } > ibv_exp_values_comp_mask::IBV_EXP_VALUES_RESERVED - 1 {
        set_errno(libc::EINVAL);
        return libc::EINVAL;
    }
    // SAFETY: provider entry of this context.
    unsafe { f(context, q_values, values) }
}

/// `ibv_exp_cqe_ts_to_ns`: a device timestamp in nanoseconds. The header's
/// formula, which is the one of rdma-core's `mlx5dv_ts_to_ns`
/// ([`crate::mlx5dv::clock::ts_to_ns`]); an unknown `comp_mask` bit yields 0
/// as in the header.
#[inline]
pub fn ibv_exp_cqe_ts_to_ns(clock_info: &ibv_exp_clock_info, ts: u64) -> u64 {
    if clock_info.comp_mask > 0 {
        return 0;
    }
    let shr = |v: u64| v.checked_shr(clock_info.shift).unwrap_or(0);
    let delta = ts.wrapping_sub(clock_info.cycles) & clock_info.mask;
    if delta > clock_info.mask / 2 {
        let delta = clock_info.cycles.wrapping_sub(ts) & clock_info.mask;
        clock_info.nsec.wrapping_sub(shr(delta.wrapping_mul(u64::from(clock_info.mult)).wrapping_sub(clock_info.frac)))
    } else {
        clock_info.nsec.wrapping_add(shr(delta.wrapping_mul(u64::from(clock_info.mult)).wrapping_add(clock_info.frac)))
    }
}

#[cfg(test)]
mod tests {
    //! The inline mirrors over a block laid out as 4.x libibverbs allocates an
    //! extended context (`src/device.c` of the same revision: the
    //! experimental context, then `struct verbs_context`, whose `sz` is its own
    //! size, ending with the `ibv_context`), with entries of this test's own.

    use super::*;
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

    /// 4.x `struct verbs_context`: 11 entries, `has_comp_mask`, `sz`, context.
    #[repr(C)]
    struct Block {
        exp: verbs_context_exp,
        legacy_ops: [usize; 11],
        has_comp_mask: u64,
        sz: usize,
        ctx: ibv_context,
    }
    const LEGACY_VERBS_CONTEXT_SIZE: usize = 11 * 8 + 8 + 8 + IBV_CONTEXT_SIZE;
    const _: () = assert!(LEGACY_VERBS_CONTEXT_SIZE == 432);
    const _: () = assert!(offset_of!(Block, ctx) == 664 + 432 - IBV_CONTEXT_SIZE);

    fn block() -> Box<Block> {
        // SAFETY: integers, raw pointers, `Option<fn>` and a glibc mutex, for
        // all of which all-zero is valid (the mutex: PTHREAD_MUTEX_INITIALIZER).
        let mut b: Box<Block> = Box::new(unsafe { core::mem::zeroed() });
        b.ctx.abi_compat = usize::MAX as *mut c_void;
        b.has_comp_mask = VERBS_CONTEXT_EXP | 0b111;
        b.sz = LEGACY_VERBS_CONTEXT_SIZE;
        b.exp.sz = size_of::<verbs_context_exp>();
        b
    }

    #[test]
    fn finds_the_experimental_context_in_front_of_the_legacy_one() {
        let mut b = block();
        let want: *mut verbs_context_exp = &mut b.exp;
        // SAFETY: a block laid out as a 4.x extended context.
        assert_eq!(unsafe { verbs_get_exp_ctx(&mut b.ctx) }, want);
        b.has_comp_mask = 0b111;
        // SAFETY: as above.
        assert!(unsafe { verbs_get_exp_ctx(&mut b.ctx) }.is_null(), "no VERBS_CONTEXT_EXP: no experimental context");
        b.has_comp_mask = VERBS_CONTEXT_EXP;
        b.ctx.abi_compat = ptr::null_mut();
        // SAFETY: as above.
        assert!(unsafe { verbs_get_exp_ctx(&mut b.ctx) }.is_null(), "a legacy (non-extended) context has none");
    }

    static POLLED_WC_SIZE: AtomicU32 = AtomicU32::new(0);
    /// A provider's `drv_exp_ibv_poll_cq` that records the entry size it is
    /// given (it reads no pointer: a safe function).
    extern "C" fn poll(_cq: *mut ibv_cq, n: c_int, _wc: *mut ibv_exp_wc, wc_size: u32) -> c_int {
        POLLED_WC_SIZE.store(wc_size, Ordering::SeqCst);
        n - 1
    }

    #[test]
    fn poll_dispatches_and_respects_the_table_size() {
        let mut b = block();
        // SAFETY: all-zero is a valid `ibv_cq` for the fields read here.
        let mut cq: ibv_cq = unsafe { core::mem::zeroed() };
        cq.context = &mut b.ctx;
        let mut wc = [ibv_exp_wc::default(); 4];
        let size = size_of::<ibv_exp_wc>() as u32;
        // SAFETY: the block's context; `wc` holds 4 entries.
        let call = |cq: &mut ibv_cq, wc: &mut [ibv_exp_wc; 4]| unsafe { ibv_exp_poll_cq(cq, 4, wc.as_mut_ptr(), size) };
        assert_eq!(call(&mut cq, &mut wc), -libc::ENOSYS, "unset entry");
        b.exp.drv_exp_ibv_poll_cq = Some(poll);
        assert_eq!(call(&mut cq, &mut wc), 3);
        assert_eq!(POLLED_WC_SIZE.load(Ordering::SeqCst), 104);
        // A table too small to hold the entry (an older library) is not used.
        b.exp.sz = size_of::<verbs_context_exp>() - offset_of!(verbs_context_exp, drv_exp_ibv_poll_cq) - 1;
        assert_eq!(call(&mut cq, &mut wc), -libc::ENOSYS, "entry beyond the library's table");
    }

    static DCT_CALLS: AtomicUsize = AtomicUsize::new(0);
    /// A provider's `create_dct`, counted: a DCT numbered with the DC key.
    ///
    /// # Safety
    /// `attr` is a valid attribute struct, as `ibv_exp_create_dct` passes it.
    unsafe extern "C" fn create_dct(_ctx: *mut ibv_context, attr: *mut ibv_exp_dct_init_attr) -> *mut ibv_exp_dct {
        DCT_CALLS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: all-zero is valid for `ibv_exp_dct`; leaked to the test.
        let dct: &mut ibv_exp_dct = Box::leak(Box::new(unsafe { core::mem::zeroed() }));
        // SAFETY: the caller's valid attribute struct.
        dct.dct_num = unsafe { (*attr).dc_key } as u32;
        dct
    }

    #[test]
    fn create_dct_sets_the_context_and_checks_comp_mask() {
        let mut b = block();
        b.exp.create_dct = Some(create_dct);
        // SAFETY: all-zero is valid for the attribute struct.
        let mut attr: ibv_exp_dct_init_attr = unsafe { core::mem::zeroed() };
        attr.dc_key = 0x1234;
        // SAFETY: the block's context; a valid attribute struct.
        let dct = unsafe { ibv_exp_create_dct(&mut b.ctx, &mut attr) };
        assert!(!dct.is_null());
        // SAFETY: returned by the entry above.
        let d = unsafe { &*dct };
        assert_eq!((d.context, d.dct_num), (&mut b.ctx as *mut ibv_context, 0x1234));
        attr.comp_mask = IBV_EXP_DCT_INIT_ATTR_RESERVED;
        // SAFETY: as above.
        assert!(unsafe { ibv_exp_create_dct(&mut b.ctx, &mut attr) }.is_null());
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EINVAL));
        assert_eq!(DCT_CALLS.load(Ordering::SeqCst), 1, "an invalid comp_mask never reaches the provider");
    }

    static CQ: AtomicUsize = AtomicUsize::new(0);
    /// A provider's `exp_create_cq` that hands out the CQ in [`CQ`].
    ///
    /// # Safety
    /// `attr` is a valid attribute struct, as `ibv_exp_create_cq` passes
    /// it, and [`CQ`] holds a live CQ.
    unsafe extern "C" fn create_cq(
        _ctx: *mut ibv_context,
        cqe: c_int,
        _ch: *mut ibv_comp_channel,
        _vec: c_int,
        attr: *mut ibv_exp_cq_init_attr,
    ) -> *mut ibv_cq {
        // SAFETY: the caller's valid attribute struct.
        assert_eq!(unsafe { (*attr).flags }, ibv_exp_cq_create_flags::IBV_EXP_CQ_TIMESTAMP);
        let cq = CQ.load(Ordering::SeqCst) as *mut ibv_cq;
        // SAFETY: the test's CQ.
        unsafe { (*cq).cqe = cqe };
        cq
    }

    #[test]
    fn create_cq_fills_the_generic_fields() {
        let mut b = block();
        b.exp.exp_create_cq = Some(create_cq);
        // SAFETY: all-zero is valid for these C structs.
        let (mut cq, mut ch): (ibv_cq, ibv_comp_channel) = unsafe { (core::mem::zeroed(), core::mem::zeroed()) };
        cq.comp_events_completed = 7;
        CQ.store(&mut cq as *mut ibv_cq as usize, Ordering::SeqCst);
        let mut attr = ibv_exp_cq_init_attr {
            comp_mask: ibv_exp_cq_init_attr_mask::IBV_EXP_CQ_INIT_ATTR_FLAGS,
            flags: ibv_exp_cq_create_flags::IBV_EXP_CQ_TIMESTAMP,
            ..Default::default()
        };
        let user = 0x55usize as *mut c_void;
        // SAFETY: the block's context, a live channel, a valid attribute struct.
        let got = unsafe { ibv_exp_create_cq(&mut b.ctx, 64, user, &mut ch, 0, &mut attr) };
        assert_eq!(got, &mut cq as *mut ibv_cq);
        assert_eq!((cq.context, cq.channel, cq.cq_context), (&mut b.ctx as *mut _, &mut ch as *mut _, user));
        assert_eq!((cq.cqe, cq.comp_events_completed, ch.refcnt), (64, 0, 1));
    }

    #[test]
    fn timestamps_convert_as_the_rdma_core_path() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..10_000 {
            let c = ibv_exp_clock_info {
                cycles: next(),
                nsec: next(),
                frac: next() & 0xffff,
                mask: next() >> (next() % 40),
                shift: (next() % 32) as u32,
                mult: next() as u32,
                comp_mask: 0,
            };
            let ts = next();
            let ci = crate::mlx5dv::exp4::to_clock_info(&c);
            assert_eq!(ibv_exp_cqe_ts_to_ns(&c, ts), crate::mlx5dv::clock::ts_to_ns(&ci, ts));
        }
    }
}
