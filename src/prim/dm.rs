//! Device memory and XRC domains: present on some ConnectX devices, reported
//! as [`Error::Unsupported`] elsewhere.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::mr::RemoteMr;
use super::pd::Pd;
use super::values::AccessFlags;
use super::wr::Sge;
use crate::bindings as ffi;

/// On-device memory (`struct ibv_dm`). Cloning shares it; freed when the
/// last clone and the last region on it ([`Dm::reg_mr`]) are gone.
///
/// # References
/// `ibv_alloc_dm(3)`, `ibv_reg_dm_mr(3)`
#[derive(Clone)]
pub struct Dm(Arc<Owned<DmData>>);

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
            return Err(Error::unsupported("ibv_alloc_dm", &crate::prim::unsupported::DEVICE_MEMORY, ctx.name(), 0));
        }
        let mut attr = ffi::ibv_alloc_dm_attr { length: len, log_align_req: 0, comp_mask: 0 };
        // SAFETY: live context; `attr` is valid for the call.
        let dm = unsafe { ffi::ibv_alloc_dm(ctx.as_ptr(), &mut attr) };
        let dm = NonNull::new(dm).ok_or_else(|| Error::last("ibv_alloc_dm"))?;
        // SAFETY: made by `ibv_alloc_dm` just now, owned by nothing else.
        Ok(Dm(Arc::new(unsafe { Owned::new(dm, DmData { len, _ctx: ctx.clone() }) })))
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

impl Dm {
    /// Registers `len` bytes of this device memory from `offset` on `pd`,
    /// so that requests can name it: as a local entry ([`DmMr::sge`]) or
    /// as the target of a peer's WRITE, READ or atomic ([`DmMr::remote`]).
    /// The region is zero-based (`IBV_ACCESS_ZERO_BASED` is added to
    /// `access`): addresses in it are offsets from its start. It keeps this
    /// memory and `pd` alive. [`Error::Unsupported`] (feature `device memory
    /// regions`) where the provider cannot register device memory.
    ///
    /// # Panics
    /// If the range is outside the allocation, or `pd` belongs to another
    /// device context (programming errors).
    ///
    /// # References
    /// `ibv_reg_dm_mr(3)`
    #[doc(alias = "ibv_reg_dm_mr")]
    pub fn reg_mr(&self, pd: &Pd, offset: usize, len: usize, access: AccessFlags) -> Result<DmMr> {
        assert!(
            offset.checked_add(len).is_some_and(|e| e <= self.0.len),
            "Dm::reg_mr: {len} bytes at offset {offset} are outside the {}-byte allocation",
            self.0.len
        );
        assert!(
            pd.context().as_ptr() == self.0._ctx.as_ptr(),
            "Dm::reg_mr: the PD belongs to another device context than the device memory"
        );
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            let _ = access;
            Err(Error::unsupported(
                "ibv_reg_dm_mr",
                &crate::prim::unsupported::OFED4,
                pd.context().name(),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let access = (access | AccessFlags::ZERO_BASED).bits();
            // SAFETY: live PD and DM of one context (checked above); the
            // range lies in the allocation.
            let mr = unsafe { ffi::ibv_reg_dm_mr(pd.as_ptr(), self.0.as_ptr(), offset as u64, len, access) };
            let mr = NonNull::new(mr).ok_or_else(|| {
                Error::last("ibv_reg_dm_mr").lacking(&crate::prim::unsupported::DEVICE_MEMORY_MR, pd.context().name())
            })?;
            // SAFETY: made just now, owned by nothing else.
            let (lkey, rkey) = unsafe { ((*mr.as_ptr()).lkey, (*mr.as_ptr()).rkey) };
            Ok(DmMr {
                // SAFETY: made by `ibv_reg_dm_mr` just now, owned by the result.
                mr: unsafe { Owned::new(mr, DmMrData { _dm: self.clone(), _pd: pd.clone() }) },
                len,
                lkey,
                rkey,
            })
        }
    }
}

pub(crate) struct DmMrData {
    _dm: Dm,
    _pd: Pd,
}

// SAFETY: `ibv_dereg_mr` releases what `ibv_reg_dm_mr` made; the region is
// only read (its keys) after creation.
unsafe impl Destroy for DmMrData {
    type Raw = ffi::ibv_mr;
    const VERB: &'static str = "ibv_dereg_mr";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_mr>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_dereg_mr(raw.as_ptr()) }
    }
}

/// A region of device memory ([`Dm::reg_mr`]): zero-based, so its
/// addresses are offsets from its start. Deregistered on drop; keeps its
/// device memory and PD alive.
///
/// # References
/// `ibv_reg_dm_mr(3)`
pub struct DmMr {
    mr: Owned<DmMrData>,
    len: usize,
    lkey: u32,
    rkey: u32,
}

impl fmt::Debug for DmMr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmMr").field("len", &self.len).field("lkey", &self.lkey).field("rkey", &self.rkey).finish()
    }
}

impl DmMr {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The raw region.
    pub fn as_ptr(&self) -> *mut ffi::ibv_mr {
        self.mr.as_ptr()
    }

    /// A local entry for `len` bytes at `offset` of the region (its address
    /// is the offset: the region is zero-based). Offsets and lengths are
    /// `usize`, as for [`Mr::sge_at`](super::Mr::sge_at).
    ///
    /// # Panics
    /// If the range is outside the region, or `len` exceeds the 32-bit
    /// length of an entry (programming errors; the message is the
    /// [`RangeError`](super::RangeError)'s of [`DmMr::checked_sge_at`]).
    #[inline]
    #[track_caller]
    pub fn sge_at(&self, offset: usize, len: usize) -> Sge {
        match self.checked_sge_at(offset, len) {
            Ok(sge) => sge,
            Err(e) => e.fail(),
        }
    }

    /// [`DmMr::sge_at`], returning the [`RangeError`](super::RangeError)
    /// where `sge_at` panics.
    #[inline]
    pub fn checked_sge_at(&self, offset: usize, len: usize) -> std::result::Result<Sge, super::RangeError> {
        let len32 = super::mr::local_range("DmMr::sge_at", 0, self.len, offset, len)?;
        Ok(Sge::from_raw(offset as u64, len32, self.lkey))
    }

    /// Old form of [`DmMr::sge_at`], with the length as `u32`.
    #[deprecated(note = "offsets and lengths are usize across the memory APIs: use `dm_mr.sge_at(offset, len)`; \
                see docs/upgrading.md")]
    #[doc(hidden)]
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        self.sge_at(offset, len as usize)
    }

    /// What a peer needs to reach the region: address 0 (zero-based), its
    /// length and remote key.
    pub fn remote(&self) -> RemoteMr {
        RemoteMr { addr: 0, len: self.len as u64, rkey: self.rkey }
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
        let xrcd = NonNull::new(xrcd)
            .ok_or_else(|| Error::last("ibv_open_xrcd").lacking(&crate::prim::unsupported::XRC, ctx.name()))?;
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
