//! What rdma-core 54 to 59 added that the library exposes, written by hand
//! from rdma-core v59's public `infiniband/verbs.h`, `infiniband/mlx5dv.h`,
//! `mlx5_api.h` and their man pages (re-exported flat through
//! [`newer`](super::newer)):
//!
//! - DMA handles and TPH: `struct ibv_dmah`, `ibv_dmah_init_attr` (and its
//!   mask, `ibv_tph_mem_type`), `ibv_alloc_dmah`, `ibv_dealloc_dmah`;
//!   `ibv_mr_init_attr` (`IBV_REG_MR_MASK_*`) and `ibv_reg_mr_ex`
//!   (libibverbs `IBVERBS_1.15`, rdma-core 58);
//! - data-direct: `mlx5dv_get_data_direct_sysfs_path`, `mlx5dv_reg_dmabuf_mr`
//!   and `MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT` (libmlx5 `MLX5_1.25`,
//!   rdma-core 54);
//! - out-of-order data placement: `MLX5DV_QP_CREATE_OOO_DP` and the
//!   capability it is refused from, `MLX5DV_CONTEXT_MASK_OOO_RECV_WRS` with
//!   `ooo_recv_wrs_caps` (rdma-core 55), in [`mlx5dv_context_v59`], the v59
//!   `struct mlx5dv_context`: the generated 44.0 structure, then the fields
//!   after it.
//!
//! # Linkage
//! These functions are newer than the rdma-core 44 the bindings are
//! generated from, so nothing links to them: each is looked up at run time,
//! once, in the library already in use ([`NewerSymbol::address`]): with the
//! `dlopen` feature in the library the crate opened (`RRDDMMA_LIBIBVERBS`,
//! `RRDDMMA_LIBMLX5`), with shared linkage by `dlsym(RTLD_DEFAULT)` in the
//! libraries the program loaded. A static build (`static`, `source`) links
//! only what the generated bindings name, so it has none of them. A symbol
//! that is absent makes its function here set `errno` to `EOPNOTSUPP` and
//! return its failure value; the safe layer checks
//! [`NewerSymbol::address`] first and says [`NewerSymbol::missing`] (which
//! names the rdma-core release that has it) as `Error::Unsupported`.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::mem::{align_of, offset_of, size_of};
use std::sync::OnceLock;

use crate::bindings::sys::{
    ibv_context, ibv_mr, ibv_pd, mlx5_ib_uapi_reg, mlx5dv_context, mlx5dv_context_comp_mask, mlx5dv_qp_create_flags,
};

/// `struct ibv_dmah`: a DMA handle (its provider's structure starts with this).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ibv_dmah {
    /// The context it was allocated on.
    pub context: *mut ibv_context,
}

/// `enum ibv_tph_mem_type`: the memory a TPH steering tag targets.
#[repr(transparent)]
#[derive(Debug, Default, Copy, Clone, Hash, PartialEq, Eq)]
pub struct ibv_tph_mem_type(pub core::ffi::c_uint);

impl ibv_tph_mem_type {
    /// `IBV_TPH_MEM_TYPE_VM`: volatile memory.
    pub const IBV_TPH_MEM_TYPE_VM: ibv_tph_mem_type = ibv_tph_mem_type(0);
    /// `IBV_TPH_MEM_TYPE_PM`: persistent memory.
    pub const IBV_TPH_MEM_TYPE_PM: ibv_tph_mem_type = ibv_tph_mem_type(1);
}

/// `enum ibv_dmah_init_attr_mask`: which fields of [`ibv_dmah_init_attr`] are set.
#[repr(transparent)]
#[derive(Debug, Default, Copy, Clone, Hash, PartialEq, Eq)]
pub struct ibv_dmah_init_attr_mask(pub core::ffi::c_uint);

impl ibv_dmah_init_attr_mask {
    /// `IBV_DMAH_INIT_ATTR_MASK_CPU_ID`: `cpu_id` is set.
    pub const IBV_DMAH_INIT_ATTR_MASK_CPU_ID: ibv_dmah_init_attr_mask = ibv_dmah_init_attr_mask(1);
    /// `IBV_DMAH_INIT_ATTR_MASK_PH`: `ph` (the processing hint) is set.
    pub const IBV_DMAH_INIT_ATTR_MASK_PH: ibv_dmah_init_attr_mask = ibv_dmah_init_attr_mask(2);
    /// `IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE`: `tph_mem_type` is set.
    pub const IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE: ibv_dmah_init_attr_mask = ibv_dmah_init_attr_mask(4);
}

/// `struct ibv_dmah_init_attr`, the argument of `ibv_alloc_dmah`.
#[repr(C)]
#[derive(Debug, Default, Copy, Clone, PartialEq, Eq)]
pub struct ibv_dmah_init_attr {
    /// [`ibv_dmah_init_attr_mask`] bits.
    pub comp_mask: u32,
    /// The CPU the handle steers to.
    pub cpu_id: u32,
    /// The TPH processing hint.
    pub ph: u8,
    /// An [`ibv_tph_mem_type`] value.
    pub tph_mem_type: u8,
}

/// `enum ibv_mr_init_attr_mask`: which fields of [`ibv_mr_init_attr`] are set.
#[repr(transparent)]
#[derive(Debug, Default, Copy, Clone, Hash, PartialEq, Eq)]
pub struct ibv_mr_init_attr_mask(pub core::ffi::c_uint);

impl ibv_mr_init_attr_mask {
    /// `IBV_REG_MR_MASK_IOVA`: `iova` is set.
    pub const IBV_REG_MR_MASK_IOVA: ibv_mr_init_attr_mask = ibv_mr_init_attr_mask(1);
    /// `IBV_REG_MR_MASK_ADDR`: `addr` is set (process memory).
    pub const IBV_REG_MR_MASK_ADDR: ibv_mr_init_attr_mask = ibv_mr_init_attr_mask(2);
    /// `IBV_REG_MR_MASK_FD`: `fd` (a dma-buf) is set.
    pub const IBV_REG_MR_MASK_FD: ibv_mr_init_attr_mask = ibv_mr_init_attr_mask(4);
    /// `IBV_REG_MR_MASK_FD_OFFSET`: `fd_offset` is set.
    pub const IBV_REG_MR_MASK_FD_OFFSET: ibv_mr_init_attr_mask = ibv_mr_init_attr_mask(8);
    /// `IBV_REG_MR_MASK_DMAH`: `dmah` is set.
    pub const IBV_REG_MR_MASK_DMAH: ibv_mr_init_attr_mask = ibv_mr_init_attr_mask(16);
}

/// `struct ibv_mr_init_attr`, the argument of `ibv_reg_mr_ex`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ibv_mr_init_attr {
    /// Bytes.
    pub length: usize,
    /// `ibv_access_flags` bits.
    pub access: c_int,
    /// [`ibv_mr_init_attr_mask`] bits.
    pub comp_mask: u64,
    /// The region's device address.
    pub iova: u64,
    /// Process memory (with `IBV_REG_MR_MASK_ADDR`).
    pub addr: *mut c_void,
    /// A dma-buf (with `IBV_REG_MR_MASK_FD`).
    pub fd: c_int,
    /// The offset into the dma-buf.
    pub fd_offset: u64,
    /// A DMA handle (with `IBV_REG_MR_MASK_DMAH`).
    pub dmah: *mut ibv_dmah,
}

impl Default for ibv_mr_init_attr {
    fn default() -> ibv_mr_init_attr {
        ibv_mr_init_attr {
            length: 0,
            access: 0,
            comp_mask: 0,
            iova: 0,
            addr: core::ptr::null_mut(),
            fd: -1,
            fd_offset: 0,
            dmah: core::ptr::null_mut(),
        }
    }
}

impl mlx5dv_qp_create_flags {
    /// `MLX5DV_QP_CREATE_OOO_DP`: out-of-order data placement (receive
    /// WQEs may be consumed out of order; completions stay in order).
    pub const MLX5DV_QP_CREATE_OOO_DP: mlx5dv_qp_create_flags = mlx5dv_qp_create_flags(1 << 7);
}

impl mlx5dv_context_comp_mask {
    /// `MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM`: `max_dc_rd_atom`, `max_dc_init_rd_atom`.
    pub const MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM: mlx5dv_context_comp_mask = mlx5dv_context_comp_mask(1 << 14);
    /// `MLX5DV_CONTEXT_MASK_REG_C0`: `reg_c0`.
    pub const MLX5DV_CONTEXT_MASK_REG_C0: mlx5dv_context_comp_mask = mlx5dv_context_comp_mask(1 << 15);
    /// `MLX5DV_CONTEXT_MASK_OOO_RECV_WRS`: `ooo_recv_wrs_caps`.
    pub const MLX5DV_CONTEXT_MASK_OOO_RECV_WRS: mlx5dv_context_comp_mask = mlx5dv_context_comp_mask(1 << 16);
}

/// `MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT` (`mlx5_access` of
/// `mlx5dv_reg_dmabuf_mr`): the region is reached through the data-direct
/// engine bonded with the device.
pub const MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT: c_int = 1;

/// `struct mlx5dv_ooo_recv_wrs_caps`: the most receive WQEs a QP of each
/// type may have with out-of-order placement (0: not offered for that type).
#[repr(C)]
#[derive(Debug, Default, Copy, Clone, PartialEq, Eq)]
pub struct mlx5dv_ooo_recv_wrs_caps {
    /// RC.
    pub max_rc: u32,
    /// XRC.
    pub max_xrc: u32,
    /// DCT.
    pub max_dct: u32,
    /// UD.
    pub max_ud: u32,
    /// UC.
    pub max_uc: u32,
}

/// `struct mlx5dv_context` as rdma-core 55 to 59 define it: the 44.0
/// structure, then `max_dc_rd_atom`, `max_dc_init_rd_atom`, `reg_c0` and
/// `ooo_recv_wrs_caps`. Give it to `mlx5dv_query_device` (cast to the 44.0
/// type) to ask for the bits of those fields: libmlx5 writes only the fields
/// whose bits are asked for, and a libmlx5 older than a field leaves its bit
/// clear in the answer.
#[repr(C)]
#[derive(Debug, Default, Copy, Clone)]
pub struct mlx5dv_context_v59 {
    /// Every field up to `crypto_caps`.
    pub base: mlx5dv_context,
    /// `max_dc_rd_atom`.
    pub max_dc_rd_atom: u64,
    /// `max_dc_init_rd_atom`.
    pub max_dc_init_rd_atom: u64,
    /// `reg_c0` (`struct mlx5dv_reg`, the same layout as `mlx5_ib_uapi_reg`).
    pub reg_c0: mlx5_ib_uapi_reg,
    /// `ooo_recv_wrs_caps`.
    pub ooo_recv_wrs_caps: mlx5dv_ooo_recv_wrs_caps,
}

// The layouts, from the v59 headers (x86-64/aarch64 LP64).
const _: () = {
    assert!(size_of::<ibv_dmah>() == 8);
    assert!(size_of::<ibv_dmah_init_attr>() == 12 && align_of::<ibv_dmah_init_attr>() == 4);
    assert!(offset_of!(ibv_dmah_init_attr, cpu_id) == 4);
    assert!(offset_of!(ibv_dmah_init_attr, ph) == 8);
    assert!(offset_of!(ibv_dmah_init_attr, tph_mem_type) == 9);
    assert!(size_of::<ibv_mr_init_attr>() == 64 && align_of::<ibv_mr_init_attr>() == 8);
    assert!(offset_of!(ibv_mr_init_attr, access) == 8);
    assert!(offset_of!(ibv_mr_init_attr, comp_mask) == 16);
    assert!(offset_of!(ibv_mr_init_attr, iova) == 24);
    assert!(offset_of!(ibv_mr_init_attr, addr) == 32);
    assert!(offset_of!(ibv_mr_init_attr, fd) == 40);
    assert!(offset_of!(ibv_mr_init_attr, fd_offset) == 48);
    assert!(offset_of!(ibv_mr_init_attr, dmah) == 56);
    assert!(size_of::<mlx5dv_ooo_recv_wrs_caps>() == 20);
    assert!(size_of::<mlx5_ib_uapi_reg>() == 8 && align_of::<mlx5_ib_uapi_reg>() == 4);
    // The 44.0 structure ends with `crypto_caps` (12 bytes at 136) and 4
    // bytes of padding; v59's next field, a u64, starts at its end.
    assert!(offset_of!(mlx5dv_context, crypto_caps) == 136 && size_of::<mlx5dv_context>() == 152);
    assert!(offset_of!(mlx5dv_context_v59, max_dc_rd_atom) == 152);
    assert!(offset_of!(mlx5dv_context_v59, max_dc_init_rd_atom) == 160);
    assert!(offset_of!(mlx5dv_context_v59, reg_c0) == 168);
    assert!(offset_of!(mlx5dv_context_v59, ooo_recv_wrs_caps) == 176);
    assert!(size_of::<mlx5dv_context_v59>() == 200 && align_of::<mlx5dv_context_v59>() == 8);
};

/// Which library holds a newer symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewerLib {
    /// libibverbs.
    Verbs,
    /// libmlx5.
    Mlx5,
}

/// A function newer than rdma-core 44, looked up at run time.
#[derive(Debug)]
pub struct NewerSymbol {
    /// The C name.
    pub name: &'static CStr,
    /// Its library.
    pub lib: NewerLib,
    /// Why it is absent from the loaded library, naming the release that has it.
    absent: &'static str,
    /// Why a static build has none of it.
    absent_static: &'static str,
    /// The address, 0 when absent; looked up once.
    address: OnceLock<usize>,
}

impl NewerSymbol {
    const fn new(name: &'static CStr, lib: NewerLib, absent: &'static str, absent_static: &'static str) -> NewerSymbol {
        NewerSymbol { name, lib, absent, absent_static, address: OnceLock::new() }
    }

    /// The function's address in the library in use; `None` when that
    /// library lacks it (older than the release that added it), did not
    /// load (`dlopen`), or the build is static.
    pub fn address(&self) -> Option<*mut c_void> {
        let a = *self.address.get_or_init(|| lookup(self.name, self.lib) as usize);
        (a != 0).then_some(a as *mut c_void)
    }

    /// Whether [`NewerSymbol::address`] finds it.
    pub fn present(&self) -> bool {
        self.address().is_some()
    }

    /// Whether the build is static (`static`, `source`), which has none of
    /// these functions whatever rdma-core is installed.
    pub fn static_build(&self) -> bool {
        static_linkage()
    }

    /// What is missing, for an `Unsupported` error: the function, its
    /// library, the rdma-core release that added it and the way out.
    pub fn missing(&self) -> &'static str {
        if static_linkage() {
            self.absent_static
        } else {
            self.absent
        }
    }
}

/// Whether this build links rdma-core statically (then no newer symbol is in it).
fn static_linkage() -> bool {
    matches!(env!("RRDDMMA_BUILD_LINKAGE").as_bytes(), b"static" | b"source")
}

/// The address of `name` in the library in use, null when absent.
fn lookup(name: &CStr, lib: NewerLib) -> *mut c_void {
    #[cfg(feature = "dlopen")]
    {
        let lib = match lib {
            NewerLib::Verbs => &crate::bindings::dl::LIBIBVERBS,
            NewerLib::Mlx5 => &crate::bindings::dl::LIBMLX5,
        };
        // SAFETY: `*mut c_void` has a pointer's size; it is only stored and
        // later transmuted to the function's own type by its caller.
        unsafe { lib.sym::<*mut c_void>(name) }.unwrap_or(core::ptr::null_mut())
    }
    #[cfg(not(feature = "dlopen"))]
    {
        let _ = lib;
        if static_linkage() {
            return core::ptr::null_mut();
        }
        // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the
        // libraries the program loaded, libibverbs and libmlx5 among them.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
    }
}

macro_rules! newer_text {
    ($what:literal, $lib:literal, $sym:literal, $release:literal, $ver:literal, $env:literal) => {
        (
            concat!(
                $what,
                ": the loaded ",
                $lib,
                " has no ",
                $sym,
                " (added in rdma-core ",
                $release,
                ", symbol version ",
                $ver,
                "); install rdma-core ",
                $release,
                " or later, or point a `dlopen` build at one (",
                $env,
                ")"
            ),
            concat!(
                $what,
                ": a static build (linkage static/source) links only the symbols of the rdma-core 44 bindings, not ",
                $sym,
                " (rdma-core ",
                $release,
                ", ",
                $ver,
                "); build with the pkg-config or `dlopen` linkage"
            ),
        )
    };
}

const DMAH_TEXT: (&str, &str) =
    newer_text!("DMA handles", "libibverbs", "ibv_alloc_dmah", "58", "IBVERBS_1.15", "RRDDMMA_LIBIBVERBS");
const DEALLOC_TEXT: (&str, &str) =
    newer_text!("DMA handles", "libibverbs", "ibv_dealloc_dmah", "58", "IBVERBS_1.15", "RRDDMMA_LIBIBVERBS");
const REG_MR_EX_TEXT: (&str, &str) =
    newer_text!("extended MR registration", "libibverbs", "ibv_reg_mr_ex", "58", "IBVERBS_1.15", "RRDDMMA_LIBIBVERBS");
const DD_PATH_TEXT: (&str, &str) =
    newer_text!("data-direct", "libmlx5", "mlx5dv_get_data_direct_sysfs_path", "54", "MLX5_1.25", "RRDDMMA_LIBMLX5");
const DD_REG_TEXT: (&str, &str) =
    newer_text!("data-direct", "libmlx5", "mlx5dv_reg_dmabuf_mr", "54", "MLX5_1.25", "RRDDMMA_LIBMLX5");

/// `ibv_alloc_dmah` (libibverbs `IBVERBS_1.15`, rdma-core 58).
pub static IBV_ALLOC_DMAH: NewerSymbol = NewerSymbol::new(c"ibv_alloc_dmah", NewerLib::Verbs, DMAH_TEXT.0, DMAH_TEXT.1);
/// `ibv_dealloc_dmah` (libibverbs `IBVERBS_1.15`, rdma-core 58).
pub static IBV_DEALLOC_DMAH: NewerSymbol =
    NewerSymbol::new(c"ibv_dealloc_dmah", NewerLib::Verbs, DEALLOC_TEXT.0, DEALLOC_TEXT.1);
/// `ibv_reg_mr_ex` (libibverbs `IBVERBS_1.15`, rdma-core 58).
pub static IBV_REG_MR_EX: NewerSymbol =
    NewerSymbol::new(c"ibv_reg_mr_ex", NewerLib::Verbs, REG_MR_EX_TEXT.0, REG_MR_EX_TEXT.1);
/// `mlx5dv_get_data_direct_sysfs_path` (libmlx5 `MLX5_1.25`, rdma-core 54).
pub static MLX5DV_GET_DATA_DIRECT_SYSFS_PATH: NewerSymbol =
    NewerSymbol::new(c"mlx5dv_get_data_direct_sysfs_path", NewerLib::Mlx5, DD_PATH_TEXT.0, DD_PATH_TEXT.1);
/// `mlx5dv_reg_dmabuf_mr` (libmlx5 `MLX5_1.25`, rdma-core 54).
pub static MLX5DV_REG_DMABUF_MR: NewerSymbol =
    NewerSymbol::new(c"mlx5dv_reg_dmabuf_mr", NewerLib::Mlx5, DD_REG_TEXT.0, DD_REG_TEXT.1);

/// The function at `sym`'s address as `F`, or `None`.
///
/// # Safety
/// `F` is the `unsafe extern "C" fn` type of the C function `sym` names.
unsafe fn resolved<F: Copy>(sym: &NewerSymbol) -> Option<F> {
    const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
    let p = sym.address()?;
    // SAFETY: a non-null function address, `F` its type (the caller's contract).
    Some(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// The failure of an absent function: `errno` = `EOPNOTSUPP`.
fn set_eopnotsupp() {
    // SAFETY: errno is thread-local and always writable.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
}

/// `ibv_alloc_dmah(3)`; null with `errno` `EOPNOTSUPP` when absent.
///
/// # Safety
/// The C function's contract: a live context, `attr` valid for the call.
pub unsafe fn ibv_alloc_dmah(context: *mut ibv_context, attr: *mut ibv_dmah_init_attr) -> *mut ibv_dmah {
    type F = unsafe extern "C" fn(*mut ibv_context, *mut ibv_dmah_init_attr) -> *mut ibv_dmah;
    // SAFETY: `F` is the header's type of `ibv_alloc_dmah`.
    match unsafe { resolved::<F>(&IBV_ALLOC_DMAH) } {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f(context, attr) },
        None => {
            set_eopnotsupp();
            core::ptr::null_mut()
        }
    }
}

/// `ibv_dealloc_dmah(3)`; `EOPNOTSUPP` when absent.
///
/// # Safety
/// The C function's contract: a live handle, no MR still using it.
pub unsafe fn ibv_dealloc_dmah(dmah: *mut ibv_dmah) -> c_int {
    type F = unsafe extern "C" fn(*mut ibv_dmah) -> c_int;
    // SAFETY: `F` is the header's type of `ibv_dealloc_dmah`.
    match unsafe { resolved::<F>(&IBV_DEALLOC_DMAH) } {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f(dmah) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_reg_mr_ex(3)`; null with `errno` `EOPNOTSUPP` when absent.
///
/// # Safety
/// The C function's contract: a live PD, `attr` valid for the call and
/// describing memory (or a dma-buf) that stays valid while the region lives.
pub unsafe fn ibv_reg_mr_ex(pd: *mut ibv_pd, attr: *mut ibv_mr_init_attr) -> *mut ibv_mr {
    type F = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_mr_init_attr) -> *mut ibv_mr;
    // SAFETY: `F` is the header's type of `ibv_reg_mr_ex`.
    match unsafe { resolved::<F>(&IBV_REG_MR_EX) } {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f(pd, attr) },
        None => {
            set_eopnotsupp();
            core::ptr::null_mut()
        }
    }
}

/// `mlx5dv_get_data_direct_sysfs_path(3)`; `EOPNOTSUPP` when absent.
///
/// # Safety
/// The C function's contract: a live mlx5 context, `buf` writable for `buf_len` bytes.
pub unsafe fn mlx5dv_get_data_direct_sysfs_path(context: *mut ibv_context, buf: *mut c_char, buf_len: usize) -> c_int {
    type F = unsafe extern "C" fn(*mut ibv_context, *mut c_char, usize) -> c_int;
    // SAFETY: `F` is the header's type of `mlx5dv_get_data_direct_sysfs_path`.
    match unsafe { resolved::<F>(&MLX5DV_GET_DATA_DIRECT_SYSFS_PATH) } {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f(context, buf, buf_len) },
        None => libc::EOPNOTSUPP,
    }
}

/// `mlx5dv_reg_dmabuf_mr(3)`; null with `errno` `EOPNOTSUPP` when absent.
///
/// # Safety
/// The C function's contract: a live PD of an mlx5 context, `fd` an open descriptor.
pub unsafe fn mlx5dv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
    mlx5_access: c_int,
) -> *mut ibv_mr {
    type F = unsafe extern "C" fn(*mut ibv_pd, u64, usize, u64, c_int, c_int, c_int) -> *mut ibv_mr;
    // SAFETY: `F` is the header's type of `mlx5dv_reg_dmabuf_mr`.
    match unsafe { resolved::<F>(&MLX5DV_REG_DMABUF_MR) } {
        // SAFETY: the caller's contract.
        Some(f) => unsafe { f(pd, offset, length, iova, fd, access, mlx5_access) },
        None => {
            set_eopnotsupp();
            core::ptr::null_mut()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text names its function, the release and the symbol version.
    #[test]
    fn absence_texts_name_the_release() {
        for (s, rel, ver) in [
            (&IBV_ALLOC_DMAH, "rdma-core 58", "IBVERBS_1.15"),
            (&IBV_DEALLOC_DMAH, "rdma-core 58", "IBVERBS_1.15"),
            (&IBV_REG_MR_EX, "rdma-core 58", "IBVERBS_1.15"),
            (&MLX5DV_GET_DATA_DIRECT_SYSFS_PATH, "rdma-core 54", "MLX5_1.25"),
            (&MLX5DV_REG_DMABUF_MR, "rdma-core 54", "MLX5_1.25"),
        ] {
            let name = s.name.to_str().unwrap();
            for t in [s.absent, s.absent_static] {
                assert!(t.contains(name) && t.contains(rel) && t.contains(ver), "{t}");
            }
        }
        assert!(IBV_ALLOC_DMAH.absent.starts_with("DMA handles: the loaded libibverbs has no ibv_alloc_dmah"));
    }
}
