//! Memory regions.

use std::fmt;
use std::ptr::NonNull;

use super::error::{Error, Result};
use super::pd::Pd;
use crate::bindings as ffi;

/// A registered memory region. Deregistered on drop.
///
/// # References
/// `ibv_reg_mr(3)`
pub struct Mr {
    mr: NonNull<ffi::ibv_mr>,
    _pd: Pd,
}

// SAFETY: an MR is an immutable handle once registered; deregistration
// happens once, on drop.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl fmt::Debug for Mr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mr")
            .field("addr", &self.addr())
            .field("len", &self.len())
            .field("lkey", &self.lkey())
            .field("rkey", &self.rkey())
            .finish()
    }
}

impl Mr {
    /// Registers `len` bytes at `addr` with the given access rights.
    ///
    /// Grant only what the peers need: local write for receive and READ
    /// targets, remote read/write/atomic for what remote peers access.
    ///
    /// # Safety
    /// `addr..addr+len` must be memory of this process that stays allocated
    /// for as long as the region exists and any posted work request or remote
    /// peer may access it.
    pub unsafe fn register(pd: &Pd, addr: *mut u8, len: usize, access: ffi::ibv_access_flags) -> Result<Mr> {
        let access = i32::try_from(access.0).expect("access flags are a 32-bit mask");
        // SAFETY: live PD; the memory contract is the caller's.
        let mr = unsafe { ffi::ibv_reg_mr(pd.as_ptr(), addr.cast(), len, access) };
        let mr = NonNull::new(mr).ok_or_else(|| Error::last("ibv_reg_mr"))?;
        Ok(Mr { mr, _pd: pd.clone() })
    }

    fn raw(&self) -> &ffi::ibv_mr {
        // SAFETY: the MR stays registered while `self` lives.
        unsafe { self.mr.as_ref() }
    }

    /// Start address of the region.
    pub fn addr(&self) -> u64 {
        self.raw().addr as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.raw().length
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Local key, for scatter/gather entries.
    pub fn lkey(&self) -> u32 {
        self.raw().lkey
    }

    /// Remote key, for peers' RDMA and atomic operations.
    pub fn rkey(&self) -> u32 {
        self.raw().rkey
    }

    /// A scatter/gather entry for `len` bytes at `offset` into the region.
    ///
    /// # Panics
    /// If the range does not lie inside the region (a programming error).
    pub fn sge(&self, offset: usize, len: u32) -> ffi::ibv_sge {
        let end = offset.checked_add(len as usize);
        assert!(
            end.is_some_and(|e| e <= self.len()),
            "sge range {offset}..+{len} is outside the memory region of {} bytes",
            self.len()
        );
        ffi::ibv_sge { addr: self.addr() + offset as u64, length: len, lkey: self.lkey() }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by `ibv_reg_mr`, deregistered once.
        unsafe { ffi::ibv_dereg_mr(self.mr.as_ptr()) };
    }
}
