//! What rdma-core's headers gained after the release [`sys`](super::sys) is
//! generated from (44.0): FLUSH (`ibv_wr_flush`, its access flags, send-op
//! flag, opcodes and enums). Written by hand from rdma-core v59's public
//! `infiniband/verbs.h` and the kernel's `rdma/ib_user_verbs.h`; the layout
//! is checked at compile time against the generated `ibv_qp_ex`.
//!
//! A newer field of a provider's structure exists only where the provider
//! is that new: [`ibv_qp_ex_flush::wr_flush`] may be read only on a QP that
//! the provider created with `IBV_QP_EX_WITH_FLUSH` (a provider older than
//! FLUSH refuses that flag, so its QPs never reach the read).

use core::ffi::c_void;
use core::mem::{offset_of, size_of};

use super::sys::{ibv_access_flags, ibv_qp_create_send_ops_flags, ibv_qp_ex, ibv_wc_opcode, ibv_wr_opcode};

impl ibv_qp_create_send_ops_flags {
    /// `IBV_QP_EX_WITH_FLUSH`: the QP may post `ibv_wr_flush`.
    pub const IBV_QP_EX_WITH_FLUSH: ibv_qp_create_send_ops_flags = ibv_qp_create_send_ops_flags(2048);
}

impl ibv_access_flags {
    /// `IBV_ACCESS_FLUSH_GLOBAL`: the region accepts FLUSH to global visibility.
    pub const IBV_ACCESS_FLUSH_GLOBAL: ibv_access_flags = ibv_access_flags(256);
    /// `IBV_ACCESS_FLUSH_PERSISTENT`: the region accepts FLUSH to persistence.
    pub const IBV_ACCESS_FLUSH_PERSISTENT: ibv_access_flags = ibv_access_flags(512);
}

impl ibv_wc_opcode {
    /// `IBV_WC_FLUSH`: a FLUSH completed.
    pub const IBV_WC_FLUSH: ibv_wc_opcode = ibv_wc_opcode(8);
}

impl ibv_wr_opcode {
    /// `IBV_WR_FLUSH`: FLUSH (posted only through `ibv_wr_flush`).
    pub const IBV_WR_FLUSH: ibv_wr_opcode = ibv_wr_opcode(14);
}

/// `enum ibv_placement_type`: how far a FLUSH pushes the data (bits).
#[repr(transparent)]
#[derive(Debug, Default, Copy, Clone, Hash, PartialEq, Eq)]
pub struct ibv_placement_type(pub core::ffi::c_uint);

impl ibv_placement_type {
    /// `IBV_FLUSH_GLOBAL`: visible to every later reader.
    pub const IBV_FLUSH_GLOBAL: ibv_placement_type = ibv_placement_type(1);
    /// `IBV_FLUSH_PERSISTENT`: in persistent memory.
    pub const IBV_FLUSH_PERSISTENT: ibv_placement_type = ibv_placement_type(2);
}

/// `enum ibv_selectivity_level`: what a FLUSH covers.
#[repr(transparent)]
#[derive(Debug, Default, Copy, Clone, Hash, PartialEq, Eq)]
pub struct ibv_selectivity_level(pub core::ffi::c_uint);

impl ibv_selectivity_level {
    /// `IBV_FLUSH_RANGE`: the address range of the request.
    pub const IBV_FLUSH_RANGE: ibv_selectivity_level = ibv_selectivity_level(0);
    /// `IBV_FLUSH_MR`: the whole region the key names.
    pub const IBV_FLUSH_MR: ibv_selectivity_level = ibv_selectivity_level(1);
}

/// The `wr_flush` entry's type.
pub type wr_flush_fn =
    unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, len: usize, type_: u8, level: u8);

/// `struct ibv_qp_ex` as rdma-core 45 and later define it: the 44.0 fields,
/// then `wr_flush`.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ibv_qp_ex_flush {
    /// Every field up to `wr_atomic_write`.
    pub base: ibv_qp_ex,
    /// `wr_flush`, set by a provider that accepted `IBV_QP_EX_WITH_FLUSH`.
    pub wr_flush: Option<wr_flush_fn>,
}

// The header puts `wr_flush` right after `wr_atomic_write`, the last field
// of the 44.0 structure, with no padding between (both are pointers).
const _: () = {
    assert!(offset_of!(ibv_qp_ex, wr_atomic_write) + size_of::<*const c_void>() == size_of::<ibv_qp_ex>());
    assert!(offset_of!(ibv_qp_ex_flush, wr_flush) == size_of::<ibv_qp_ex>());
    assert!(size_of::<ibv_qp_ex_flush>() == size_of::<ibv_qp_ex>() + size_of::<*const c_void>());
    assert!(size_of::<Option<wr_flush_fn>>() == size_of::<*const c_void>());
};

/// `ibv_wr_flush`: FLUSH of `len` bytes at `remote_addr` (key `rkey`), to
/// placement `type_` ([`ibv_placement_type`] bits) at `level`
/// ([`ibv_selectivity_level`]).
///
/// # Safety
/// `qp` is a live extended QP that its provider created with
/// `IBV_QP_EX_WITH_FLUSH` (so its structure has the field), inside an open
/// batch (`ibv_wr_start`).
#[inline(always)]
pub unsafe fn ibv_wr_flush(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, len: usize, type_: u8, level: u8) {
    // SAFETY: per the contract, the provider's structure has `wr_flush`.
    let f = unsafe { (*qp.cast::<ibv_qp_ex_flush>()).wr_flush };
    match f {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f(qp, rkey, remote_addr, len, type_, level) },
        None => panic!("the provider left wr_flush null on a QP it created with IBV_QP_EX_WITH_FLUSH"),
    }
}

/// What rdma-core 54 to 59 added (DMA handles, `ibv_reg_mr_ex`, data-direct,
/// out-of-order placement), each function looked up at run time.
#[path = "newer_v59.rs"]
pub mod v59;
pub use v59::*;
