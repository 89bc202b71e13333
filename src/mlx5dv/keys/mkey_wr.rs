//! The memory-key entries of the extended send queue (`mlx5dv_qp_ex`):
//! `mlx5dv_wr_mr_list`, `mlx5dv_wr_mr_interleaved`,
//! `mlx5dv_wr_mkey_configure` and its access and layout setters. In
//! `mlx5dv.h` these are inline functions that call through the QP's
//! function pointers; [`MkeyWr`] calls the same pointers.
//!
//! A QP has them when created with
//! [`QpBuilder::mlx5_send_ops`](crate::prim::QpBuilder::mlx5_send_ops)
//! ([`Mlx5SendOps`](crate::prim::Mlx5SendOps)); they post into the batch
//! opened on the QP's `ibv_qp_ex` (`ibv_wr_start` .. `ibv_wr_complete`).
//! The entries that start a WQE take its `wr_id` and flags, as the
//! `ibv_wr_*` builders do; a configure needs [`SendFlags::INLINE`]
//! (libmlx5 refuses it otherwise). The typed direct builders of
//! [`crate::mlx5dv::keys::umr`] write the same WQEs without libmlx5; the libmlx5
//! differential harness drives these wrappers too and compares.

use std::ptr::NonNull;

use crate::bindings as ffi;
use crate::prim::{AccessFlags, SendFlags};

/// The `mlx5dv_wr_*` memory-key entries of one QP.
#[derive(Debug)]
pub struct MkeyWr {
    ex: NonNull<ffi::ibv_qp_ex>,
    dv: NonNull<ffi::mlx5dv_qp_ex>,
}

/// The entry `$f` of the QP, or a panic naming it.
macro_rules! entry {
    ($self:ident, $f:ident) => {
        // SAFETY: `from_raw`'s contract: a live `mlx5dv_qp_ex`.
        unsafe { (*$self.dv.as_ptr()).$f }.unwrap_or_else(|| {
            panic!(concat!(
                "MkeyWr: the QP has no ",
                stringify!($f),
                " entry; create it with QpBuilder::mlx5_send_ops (MR_LIST, MR_INTERLEAVED, MKEY_CONFIGURE) on RC"
            ))
        })
    };
}

impl MkeyWr {
    /// The entries of the QP whose extended view is `ex` and whose mlx5
    /// view is `dv` (`mlx5dv_qp_ex_from_ibv_qp_ex(ex)`).
    ///
    /// # Safety
    /// `ex` and `dv` are the live views of one mlx5 QP, alive while the
    /// returned value is used, and every call below is made between
    /// `ibv_wr_start` and `ibv_wr_complete` / `ibv_wr_abort` of that QP,
    /// by the thread that opened the batch. Every `mkey` given is a live
    /// key of libmlx5 (`Mkey::as_ptr`) in the QP's protection domain.
    pub unsafe fn from_raw(ex: NonNull<ffi::ibv_qp_ex>, dv: NonNull<ffi::mlx5dv_qp_ex>) -> MkeyWr {
        MkeyWr { ex, dv }
    }

    /// The next WQE's `wr_id` and flags.
    fn start(&self, wr_id: u64, flags: SendFlags) {
        // SAFETY: `from_raw`'s contract: a live `ibv_qp_ex`, in a batch.
        unsafe {
            (*self.ex.as_ptr()).wr_id = wr_id;
            (*self.ex.as_ptr()).wr_flags = flags.bits();
        }
    }

    /// `mlx5dv_wr_mr_list`: a WQE (`wr_id`, `flags`, which must include
    /// `INLINE`) that configures `mkey` with `access` over the ranges `sges`
    /// (a KLM list).
    ///
    /// # Safety
    /// `from_raw`'s contract; once the batch completes the key reaches every
    /// range of `sges` with `access`: each lies in memory registered with
    /// its `lkey`, which stays registered while the key may be used (make
    /// the key hold the regions, [`Mkey::hold`](crate::mlx5dv::keys::mkey::Mkey::hold)).
    #[doc(alias = "mlx5dv_wr_mr_list")]
    pub unsafe fn mr_list(
        &self,
        wr_id: u64,
        flags: SendFlags,
        mkey: *mut ffi::mlx5dv_mkey,
        access: AccessFlags,
        sges: &[ffi::ibv_sge],
    ) {
        let f = entry!(self, wr_mr_list);
        self.start(wr_id, flags);
        // SAFETY: the caller's contract; libmlx5 only reads `sges`.
        unsafe { f(self.dv.as_ptr(), mkey, access.bits(), len16(sges.len()), sges.as_ptr().cast_mut()) }
    }

    /// `mlx5dv_wr_mr_interleaved`: a WQE (`wr_id`, `flags` with `INLINE`)
    /// that configures `mkey` with `access` over `data` repeated
    /// `repeat_count` times.
    ///
    /// # Safety
    /// As [`MkeyWr::mr_list`], for every repetition of every entry.
    #[doc(alias = "mlx5dv_wr_mr_interleaved")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn mr_interleaved(
        &self,
        wr_id: u64,
        flags: SendFlags,
        mkey: *mut ffi::mlx5dv_mkey,
        access: AccessFlags,
        repeat_count: u32,
        data: &[ffi::mlx5dv_mr_interleaved],
    ) {
        let f = entry!(self, wr_mr_interleaved);
        self.start(wr_id, flags);
        // SAFETY: the caller's contract; libmlx5 only reads `data`.
        unsafe { f(self.dv.as_ptr(), mkey, access.bits(), repeat_count, len16(data.len()), data.as_ptr().cast_mut()) }
    }

    /// `mlx5dv_wr_mkey_configure`: starts a WQE (`wr_id`, `flags` with
    /// `INLINE`) configuring `mkey`; it is complete after `num_setters`
    /// setter calls (0: at once).
    ///
    /// # Safety
    /// `from_raw`'s contract, and the setters that follow are this QP's,
    /// before any other request of the batch.
    #[doc(alias = "mlx5dv_wr_mkey_configure")]
    pub unsafe fn mkey_configure(&self, wr_id: u64, flags: SendFlags, mkey: *mut ffi::mlx5dv_mkey, num_setters: u8) {
        let f = entry!(self, wr_mkey_configure);
        self.start(wr_id, flags);
        let mut attr = ffi::mlx5dv_mkey_conf_attr::default();
        // SAFETY: the caller's contract; `attr` lives for the call.
        unsafe { f(self.dv.as_ptr(), mkey, num_setters, &mut attr) }
    }

    /// `mlx5dv_wr_set_mkey_access_flags`.
    ///
    /// # Safety
    /// `from_raw`'s contract, after [`MkeyWr::mkey_configure`].
    #[doc(alias = "mlx5dv_wr_set_mkey_access_flags")]
    pub unsafe fn set_access_flags(&self, access: AccessFlags) {
        let f = entry!(self, wr_set_mkey_access_flags);
        // SAFETY: the caller's contract.
        unsafe { f(self.dv.as_ptr(), access.bits()) }
    }

    /// `mlx5dv_wr_set_mkey_layout_list`.
    ///
    /// # Safety
    /// As [`MkeyWr::mr_list`], after [`MkeyWr::mkey_configure`].
    #[doc(alias = "mlx5dv_wr_set_mkey_layout_list")]
    pub unsafe fn set_layout_list(&self, sges: &[ffi::ibv_sge]) {
        let f = entry!(self, wr_set_mkey_layout_list);
        // SAFETY: the caller's contract.
        unsafe { f(self.dv.as_ptr(), len16(sges.len()), sges.as_ptr()) }
    }

    /// `mlx5dv_wr_set_mkey_layout_interleaved`.
    ///
    /// # Safety
    /// As [`MkeyWr::mr_interleaved`], after [`MkeyWr::mkey_configure`].
    #[doc(alias = "mlx5dv_wr_set_mkey_layout_interleaved")]
    pub unsafe fn set_layout_interleaved(&self, repeat_count: u32, data: &[ffi::mlx5dv_mr_interleaved]) {
        let f = entry!(self, wr_set_mkey_layout_interleaved);
        // SAFETY: the caller's contract.
        unsafe { f(self.dv.as_ptr(), repeat_count, len16(data.len()), data.as_ptr()) }
    }
}

/// An entry count as the 16-bit argument of the entries.
fn len16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| panic!("MkeyWr: {n} layout entries; a layout holds at most 65535"))
}
