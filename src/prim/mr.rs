//! Memory regions.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::pd::Pd;
use super::wr::{RemoteAddr, Sge};
use crate::bindings as ffi;
use crate::prim::AccessFlags;

/// A registered memory region. Cloning shares it; deregistered when the
/// last clone (and every memory window bound to it, see [`Mw`](super::Mw))
/// is gone.
///
/// If the deregistration fails (a provider that refuses while a window is
/// still bound, a kernel error), the memory under the region is never freed
/// by this crate: memory it owns ([`RegisteredMem`](crate::wrap::RegisteredMem))
/// is leaked and the failure counted in [`destroy_failures`](super::destroy_failures),
/// because the device may still access it.
///
/// # References
/// `ibv_reg_mr(3)`
#[derive(Clone)]
pub struct Mr(Arc<Owned<MrInner>>);

pub(crate) struct MrInner {
    _pd: Pd,
    /// The access it was registered with.
    access: AccessFlags,
    /// What owns the memory under the region; dropped only after a
    /// successful deregistration.
    backing: Option<Box<dyn Send + Sync>>,
}

// SAFETY: `ibv_dereg_mr` releases what the matching create verb made; an MR is an immutable handle once registered, deregistered once, when the last clone goes; the backing is `Send + Sync`.
unsafe impl Destroy for MrInner {
    type Raw = ffi::ibv_mr;
    const VERB: &'static str = "ibv_dereg_mr";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_mr>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_dereg_mr(raw.as_ptr()) }
    }
    fn keep_on_failure(&mut self) {
        // The device may still reach the memory: never free it.
        std::mem::forget(self.backing.take());
    }
}

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
    /// for as long as the region exists (until the last clone of the
    /// returned `Mr` and every memory window bound to it are dropped) and any
    /// posted work request or remote peer may access it. If deregistration
    /// fails (counted in [`destroy_failures`](super::destroy_failures)), the
    /// device may still reach the memory: do not free it then.
    ///
    /// With `IBV_ACCESS_ON_DEMAND` on a device without on-demand paging, the
    /// result is [`Error::Unsupported`], decided before the system call.
    pub unsafe fn register(pd: &Pd, addr: *mut u8, len: usize, access: AccessFlags) -> Result<Mr> {
        // SAFETY: the caller's contract.
        unsafe { Mr::register_backed(pd, addr, len, access, None) }
    }

    /// An implicit on-demand-paging region: the whole address space of this
    /// process, paged in as requests touch it (`ibv_reg_mr` of address 0
    /// and length `SIZE_MAX` with `IBV_ACCESS_ON_DEMAND`, added here to
    /// `access`). [`Mr::addr`] is 0, so an offset is a virtual address:
    /// `mr.sge(ptr as usize, len)`, `mr.remote().at(ptr as u64)`.
    ///
    /// [`Error::Unsupported`] (feature `implicit on-demand paging`),
    /// decided before the system call, on a device that does not report
    /// `IBV_ODP_SUPPORT_IMPLICIT` (rxe has explicit ODP only; mlx5 has it).
    ///
    /// # Safety
    /// Every page of the process becomes reachable through the region's
    /// keys: each request posted with its local key, and each peer given its
    /// remote key with the `access` granted, may read or write any address,
    /// as with [`Mr::register`] over all memory at once. The caller must hand
    /// the keys only to requests and peers that touch memory it means them
    /// to, and keep that memory allocated while they may.
    ///
    /// # References
    /// `ibv_reg_mr(3)` (implicit ODP)
    pub unsafe fn register_implicit_odp(pd: &Pd, access: AccessFlags) -> Result<Mr> {
        let odp = pd.context().query_device_ex()?.odp_caps.general_caps;
        let bit = |b: ffi::ibv_odp_general_caps| odp & u64::from(b.0) != 0;
        if !bit(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT) || !bit(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT_IMPLICIT)
        {
            return Err(Error::unsupported(
                "ibv_reg_mr",
                &crate::prim::unsupported::ODP_IMPLICIT,
                pd.context().name(),
                format_args!("{odp:#x}"),
            ));
        }
        // SAFETY: the caller's contract covers all memory.
        unsafe { Mr::register_backed(pd, std::ptr::null_mut(), usize::MAX, access | AccessFlags::ON_DEMAND, None) }
    }

    /// [`Mr::register`] for memory owned by `backing`, which is dropped only
    /// after the region is deregistered successfully (and leaked otherwise).
    ///
    /// # Safety
    /// `addr..addr+len` must stay valid for as long as `backing` lives.
    pub(crate) unsafe fn register_backed(
        pd: &Pd,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
        backing: Option<Box<dyn Send + Sync>>,
    ) -> Result<Mr> {
        if access.contains(AccessFlags::ON_DEMAND) {
            let odp = pd.context().query_device_ex()?.odp_caps.general_caps;
            if odp & u64::from(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT.0) == 0 {
                return Err(Error::unsupported(
                    "ibv_reg_mr",
                    &crate::prim::unsupported::ODP,
                    pd.context().name(),
                    format_args!("{odp:#x}"),
                ));
            }
        }
        let flags = access;
        let access = i32::try_from(access.bits()).expect("access flags are a 32-bit mask");
        // SAFETY: live PD; the memory contract is the caller's.
        let mr = unsafe { ffi::ibv_reg_mr(pd.as_ptr(), addr.cast(), len, access) };
        let mr = NonNull::new(mr).ok_or_else(|| Error::last("ibv_reg_mr"))?;
        Ok(Mr(Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe { Owned::new(mr, MrInner { _pd: pd.clone(), access: flags, backing }) },
        )))
    }

    /// Registers `len` bytes of a dma-buf, from `offset` into the buffer
    /// behind `fd`, at device address `iova`, with the given access rights.
    /// Work requests and peers address the region by `iova`:
    /// [`Mr::addr`] is `iova`, [`Mr::sge`] and [`Mr::remote`] follow it.
    ///
    /// [`Error::Unsupported`]
    /// (feature `dma-buf registration`) when the provider or kernel driver
    /// has none (rxe; MLNX_OFED 4.x). The kernel checks the rest: that
    /// `fd` is a dma-buf, that the range lies inside it, that the exporter
    /// lets the device attach (a failure is [`Error::Verbs`] with its errno).
    ///
    /// # Why this is safe
    /// The memory belongs to the buffer's exporter (a GPU driver,
    /// `/dev/udmabuf`, a DMA heap), not to this process's allocator: the
    /// kernel takes its own reference to the dma-buf for the life of the
    /// region, so `fd` may be closed after the call and no memory this
    /// process frees can be reached through the region. What the region does
    /// not change is that the buffer is shared memory: local work requests
    /// and, with remote access granted, peers write it at any time. A CPU
    /// mapping of the same buffer (an `mmap` of the dma-buf, or of the memfd
    /// behind a udmabuf) must be treated as such, which is the business of
    /// the code that maps it (e.g. `memmap2`'s mappings are `unsafe` to make
    /// for this reason). Posting work requests stays `unsafe` as for any region.
    ///
    /// # References
    /// `ibv_reg_dmabuf_mr(3)`
    pub fn register_dmabuf(
        pd: &Pd,
        fd: std::os::fd::BorrowedFd<'_>,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<Mr> {
        check_dmabuf_range(offset, len, iova);
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            let _ = (pd, fd, access);
            Err(Error::unsupported(
                "ibv_reg_dmabuf_mr",
                &crate::prim::unsupported::OFED4,
                pd.context().name(),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            use std::os::fd::AsRawFd;
            let flags = access;
            let access = i32::try_from(access.bits()).expect("access flags are a 32-bit mask");
            // SAFETY: live PD; `fd` is an open descriptor for the call (the
            // kernel takes its own reference to the dma-buf); the region
            // reaches only the exporter's memory, which the kernel keeps
            // alive until deregistration.
            let mr = unsafe { ffi::ibv_reg_dmabuf_mr(pd.as_ptr(), offset, len, iova, fd.as_raw_fd(), access) };
            let mr = NonNull::new(mr).ok_or_else(|| {
                Error::last("ibv_reg_dmabuf_mr").lacking(&crate::prim::unsupported::DMABUF, pd.context().name())
            })?;
            Ok(Mr(Arc::new(
                // SAFETY: just made by its create verb, owned by nothing else.
                unsafe { Owned::new(mr, MrInner { _pd: pd.clone(), access: flags, backing: None }) },
            )))
        }
    }

    /// The PD the region belongs to.
    pub fn pd(&self) -> &Pd {
        &self.0._pd
    }

    /// The access the region was registered with.
    pub fn access(&self) -> AccessFlags {
        self.0.access
    }

    /// The raw region.
    pub fn as_ptr(&self) -> *mut ffi::ibv_mr {
        self.0.as_ptr()
    }

    #[inline]
    fn raw(&self) -> &ffi::ibv_mr {
        // SAFETY: the MR stays registered while `self` lives.
        unsafe { self.0.raw().as_ref() }
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
    #[inline]
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        let end = offset.checked_add(len as usize);
        assert!(
            end.is_some_and(|e| e <= self.len()),
            "sge range {offset}..+{len} is outside the memory region of {} bytes",
            self.len()
        );
        Sge::from_raw(self.addr() + offset as u64, len, self.lkey())
    }

    /// The token a peer needs to access this region remotely.
    pub fn remote(&self) -> RemoteMr {
        RemoteMr { addr: self.addr(), len: self.len() as u64, rkey: self.rkey() }
    }
}

/// The checks of [`Mr::register_dmabuf`] that need no device: the program
/// wrote these values, so a bad one is a programming error (see the error
/// policy in the crate docs), as a zero length is for `RegisteredMem`.
///
/// # Panics
/// If `len` is 0, or `offset + len` or `iova + len` passes 2^64.
fn check_dmabuf_range(offset: u64, len: usize, iova: u64) {
    assert!(len > 0, "Mr::register_dmabuf: length is 0; a region holds at least one byte");
    let len = len as u64;
    assert!(
        offset.checked_add(len).is_some(),
        "Mr::register_dmabuf: offset {offset:#x} + length {len:#x} passes 2^64; the range must lie inside the dma-buf"
    );
    assert!(
        iova.checked_add(len).is_some(),
        "Mr::register_dmabuf: iova {iova:#x} + length {len:#x} passes 2^64; the region's device addresses \
         must fit in 64 bits (iova 0 is a common choice)"
    );
}

/// A peer's memory region: address, length and rkey, as exchanged out of band.
///
/// Offsets into it are `u64` where local ones ([`Mr::sge`],
/// `RegisteredMem`'s ranges) are `usize`: the region lives in the peer's
/// address space, which need not be this process's width, and its fields
/// come from the peer as 64-bit values. Convert a local `usize` offset with
/// `as u64` (lossless on every supported target).
///
/// ```
/// use rrddmma::prim::RemoteMr;
/// let mr = RemoteMr { addr: 0x7f00_0000_1000, len: 4096, rkey: 0x1234 };
/// assert_eq!(RemoteMr::from_bytes(&mr.to_bytes()), mr);
/// assert_eq!(mr.at(64).addr, 0x7f00_0000_1040);
/// assert!(mr.checked_at(4096, 1).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RemoteMr {
    /// Start address in the peer's address space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
}

impl RemoteMr {
    /// Size of the wire form.
    pub const WIRE_LEN: usize = 20;

    /// Wire form: address, length (u64) and rkey (u32), little-endian.
    pub fn to_bytes(&self) -> [u8; Self::WIRE_LEN] {
        let mut b = [0u8; Self::WIRE_LEN];
        b[..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..].copy_from_slice(&self.rkey.to_le_bytes());
        b
    }

    /// Parses the wire form of [`RemoteMr::to_bytes`].
    pub fn from_bytes(b: &[u8; Self::WIRE_LEN]) -> RemoteMr {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        RemoteMr { addr: u64_at(0), len: u64_at(8), rkey: u32::from_le_bytes(b[16..].try_into().expect("4 bytes")) }
    }

    /// One past the region's last byte, or `None` when `addr + len` does not
    /// fit in 64 bits (a token no real registration produces: treat it as a
    /// peer's error).
    pub fn end(&self) -> Option<u64> {
        self.addr.checked_add(self.len)
    }

    /// The remote location `offset` bytes in, if `len` bytes fit there.
    ///
    /// `None` when `offset + len` passes the region's length, or when the
    /// region's addresses do not fit in 64 bits. Every sum is checked: the
    /// fields usually come from a peer, and no peer value can make this panic
    /// or wrap.
    ///
    /// ```
    /// use rrddmma::prim::RemoteMr;
    /// let bogus = RemoteMr { addr: u64::MAX - 16, len: 4096, rkey: 1 };
    /// assert!(bogus.checked_at(0, 8).is_none());
    /// assert!(bogus.checked_at(u64::MAX, 2).is_none());
    /// ```
    pub fn checked_at(&self, offset: u64, len: u64) -> Option<RemoteAddr> {
        let last = offset.checked_add(len)?;
        if last > self.len {
            return None;
        }
        self.end()?;
        Some(RemoteAddr { addr: self.addr.checked_add(offset)?, rkey: self.rkey })
    }

    /// The remote location `offset` bytes in.
    ///
    /// # Panics
    /// If `offset` is not inside the region (a programming error), or if the
    /// region's addresses do not fit in 64 bits. For a token that came from a
    /// peer and has not been checked, use [`RemoteMr::checked_at`], which
    /// returns `None` instead.
    #[inline]
    pub fn at(&self, offset: u64) -> RemoteAddr {
        // Two compares on the hot path: `offset < len` and `addr + len`
        // fitting in 64 bits together prove `addr + offset` does not wrap.
        match self.addr.checked_add(self.len) {
            Some(_) if offset < self.len => RemoteAddr { addr: self.addr + offset, rkey: self.rkey },
            _ => self.at_failed(offset),
        }
    }

    #[cold]
    #[inline(never)]
    fn at_failed(&self, offset: u64) -> ! {
        if self.end().is_none() {
            panic!(
                "remote region at {:#x} of {} bytes wraps past the end of the address space \
                 (a bad token: check peer tokens with RemoteMr::checked_at or RemoteMr::end)",
                self.addr, self.len
            );
        }
        panic!("offset {offset} is outside the remote region of {} bytes", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::{check_dmabuf_range, RemoteMr};

    /// Lengths and offsets that cannot describe a region panic before any
    /// call, naming the argument, as a zero-length `RegisteredMem` does.
    #[test]
    fn dmabuf_ranges_are_checked_before_the_call() {
        check_dmabuf_range(0, 4096, 0);
        check_dmabuf_range(u64::MAX - 4096, 4096, u64::MAX - 4096);
        let cases = [
            (0, 0, 0, "length is 0"),
            (u64::MAX - 4095, 4097, 0, "offset 0xfffffffffffff000 + length 0x1001 passes 2^64"),
            (u64::MAX, 1, 0, "offset 0xffffffffffffffff + length 0x1 passes 2^64"),
            (0, 4096, u64::MAX - 10, "iova 0xfffffffffffffff5 + length 0x1000 passes 2^64"),
        ];
        for (offset, len, iova, named) in cases {
            let p = std::panic::catch_unwind(|| check_dmabuf_range(offset, len, iova)).expect_err("must panic");
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            let msg = msg.expect("a message");
            assert!(msg.starts_with(&format!("Mr::register_dmabuf: {named}")), "({offset}, {len}, {iova}): {msg}");
        }
    }

    /// A peer's token near the top of the address space: every lookup is
    /// `None`, nothing panics or wraps (debug and release alike).
    #[test]
    fn peer_token_near_u64_max_is_refused_not_wrapped() {
        let bogus = RemoteMr { addr: u64::MAX - 100, len: 4096, rkey: 7 };
        assert_eq!(bogus.end(), None);
        for (off, len) in [(0, 0), (0, 8), (200, 8), (4095, 1), (u64::MAX, 1), (1, u64::MAX)] {
            assert!(bogus.checked_at(off, len).is_none(), "({off}, {len}) must be refused");
        }
        let top = RemoteMr { addr: u64::MAX - 4096, len: 4096, rkey: 7 };
        assert_eq!(top.end(), Some(u64::MAX));
        assert_eq!(top.checked_at(4088, 8).map(|r| r.addr), Some(u64::MAX - 8));
        assert!(top.checked_at(4089, 8).is_none());
        let r = std::panic::catch_unwind(|| bogus.at(0)).expect_err("at() on a wrapping token panics");
        let msg = r.downcast_ref::<String>().expect("message");
        assert!(msg.contains("wraps past the end of the address space") && msg.contains("checked_at"), "{msg}");
    }
}
