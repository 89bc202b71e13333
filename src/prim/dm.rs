//! Device memory and XRC domains: present on some ConnectX devices, reported
//! as [`Error::Unsupported`] elsewhere.

use std::fmt;
use std::ptr::NonNull;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use crate::bindings as ffi;

/// On-device memory (`struct ibv_dm`). Freed on drop.
///
/// # References
/// `ibv_alloc_dm(3)`
pub struct Dm(Owned<DmData>);

pub(crate) struct DmData {
    len: usize,
    _ctx: Context,
}

// SAFETY: `ibv_free_dm` releases what `ibv_alloc_dm` made; copies go through
// the provider's thread-safe entries.
unsafe impl Destroy for DmData {
    type Raw = ffi::ibv_dm;
    const VERB: &'static str = "ibv_free_dm";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_dm>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_free_dm(raw.as_ptr()) }
    }
}

impl fmt::Debug for Dm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dm").field("len", &self.0.len).finish()
    }
}

impl Dm {
    /// Allocates `len` bytes of device memory. [`Error::Unsupported`] when
    /// the device reports none (`max_dm_size` 0) or the provider lacks it.
    pub fn alloc(ctx: &Context, len: usize) -> Result<Dm> {
        let max = ctx.query_device_ex()?.max_dm_size;
        if max == 0 {
            return Err(Error::Unsupported { op: "ibv_alloc_dm", feature: "device memory" });
        }
        let mut attr = ffi::ibv_alloc_dm_attr { length: len, log_align_req: 0, comp_mask: 0 };
        // SAFETY: live context; `attr` is valid for the call.
        let dm = unsafe { ffi::ibv_alloc_dm(ctx.as_ptr(), &mut attr) };
        let dm = NonNull::new(dm).ok_or_else(|| Error::last("ibv_alloc_dm"))?;
        // SAFETY: made by `ibv_alloc_dm` just now, owned by nothing else.
        Ok(Dm(unsafe { Owned::new(dm, DmData { len, _ctx: ctx.clone() }) }))
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// Whether the allocation is empty.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Copies `data` to `offset` in device memory.
    ///
    /// # Panics
    /// If the range is outside the allocation (a programming error).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        assert!(offset.checked_add(data.len()).is_some_and(|e| e <= self.0.len), "device memory write out of range");
        // SAFETY: live DM; the provider's entry copies `data.len()` bytes from `data`.
        let rc = unsafe {
            match (*self.0.as_ptr()).memcpy_to_dm {
                Some(f) => f(self.0.as_ptr(), offset as u64, data.as_ptr().cast(), data.len()),
                None => libc::EOPNOTSUPP,
            }
        };
        if rc != 0 {
            return Err(Error::code("ibv_memcpy_to_dm", rc));
        }
        Ok(())
    }

    /// Copies from `offset` in device memory into `out`.
    ///
    /// # Panics
    /// If the range is outside the allocation (a programming error).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        assert!(offset.checked_add(out.len()).is_some_and(|e| e <= self.0.len), "device memory read out of range");
        // SAFETY: live DM; the provider's entry writes `out.len()` bytes into `out`.
        let rc = unsafe {
            match (*self.0.as_ptr()).memcpy_from_dm {
                Some(f) => f(out.as_mut_ptr().cast(), self.0.as_ptr(), offset as u64, out.len()),
                None => libc::EOPNOTSUPP,
            }
        };
        if rc != 0 {
            return Err(Error::code("ibv_memcpy_from_dm", rc));
        }
        Ok(())
    }
}

pub(crate) struct XrcdInner {
    _ctx: Context,
}

// SAFETY: `ibv_close_xrcd` releases what the matching create verb made; an XRCD handle is used through thread-safe verbs calls.
unsafe impl Destroy for XrcdInner {
    type Raw = ffi::ibv_xrcd;
    const VERB: &'static str = "ibv_close_xrcd";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_xrcd>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_close_xrcd(raw.as_ptr()) }
    }
}

/// An XRC domain (`struct ibv_xrcd`). Closed when the last clone and the
/// last QP on it are gone.
///
/// # References
/// `ibv_open_xrcd(3)`
#[derive(Clone)]
pub struct Xrcd(std::sync::Arc<Owned<XrcdInner>>);

impl fmt::Debug for Xrcd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Xrcd").finish_non_exhaustive()
    }
}

impl Xrcd {
    /// Opens a process-private XRC domain. [`Error::Unsupported`] when the
    /// device has no XRC.
    pub fn open(ctx: &Context) -> Result<Xrcd> {
        let mut attr = ffi::ibv_xrcd_init_attr {
            comp_mask: ffi::ibv_xrcd_init_attr_mask::IBV_XRCD_INIT_ATTR_FD.0
                | ffi::ibv_xrcd_init_attr_mask::IBV_XRCD_INIT_ATTR_OFLAGS.0,
            fd: -1,
            oflags: libc::O_CREAT,
        };
        // SAFETY: live context; `attr` is valid for the call.
        let xrcd = unsafe { ffi::ibv_open_xrcd(ctx.as_ptr(), &mut attr) };
        let xrcd = NonNull::new(xrcd).ok_or_else(|| Error::last("ibv_open_xrcd"))?;
        Ok(Xrcd(std::sync::Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe { Owned::new(xrcd, XrcdInner { _ctx: ctx.clone() }) },
        )))
    }

    /// The device context the domain belongs to.
    pub fn context(&self) -> &Context {
        &self.0._ctx
    }

    /// The raw domain.
    pub fn as_ptr(&self) -> *mut ffi::ibv_xrcd {
        self.0.as_ptr()
    }
}
