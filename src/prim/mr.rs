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
    /// `mr.sge_at(ptr as usize, len)`, `mr.remote().addr_at(ptr as usize)`.
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
    /// [`Mr::addr`] is `iova`, [`Mr::sge_at`] and [`Mr::remote`] follow it.
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

    /// A region a registration verb just made (`mr_ex.rs`'s `ibv_reg_mr_ex`
    /// and `mlx5dv_reg_dmabuf_mr`), owning `backing` until deregistration.
    ///
    /// # Safety
    /// `mr` was just returned by a registration verb on `pd` and is owned by
    /// nothing else.
    pub(crate) unsafe fn from_registered(
        mr: NonNull<ffi::ibv_mr>,
        pd: &Pd,
        access: AccessFlags,
        backing: Option<Box<dyn Send + Sync>>,
    ) -> Mr {
        // SAFETY: the caller's contract.
        Mr(Arc::new(unsafe { Owned::new(mr, MrInner { _pd: pd.clone(), access, backing }) }))
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
    /// Offsets and lengths are `usize` here as everywhere in the memory
    /// APIs (see [`RangeError`] for the convention). A zero length is a
    /// valid entry, also at the region's end.
    ///
    /// # Panics
    /// If the range does not lie inside the region, or `len` exceeds the
    /// 32-bit length of an entry (programming errors; the message is
    /// [`RangeError`]'s). [`Mr::checked_sge_at`] returns the error instead.
    #[inline]
    #[track_caller]
    pub fn sge_at(&self, offset: usize, len: usize) -> Sge {
        match self.checked_sge_at(offset, len) {
            Ok(sge) => sge,
            Err(e) => e.fail(),
        }
    }

    /// [`Mr::sge_at`], returning a [`RangeError`] (kind
    /// [`RangeErrorKind::TooLong`] or [`RangeErrorKind::PastEnd`]) where
    /// `sge_at` panics.
    #[inline]
    pub fn checked_sge_at(&self, offset: usize, len: usize) -> std::result::Result<Sge, RangeError> {
        let len32 = local_range("Mr::sge_at", self.addr(), self.len(), offset, len)?;
        Ok(Sge::from_raw(self.addr() + offset as u64, len32, self.lkey()))
    }

    /// Old form of [`Mr::sge_at`], with the length as `u32`.
    #[deprecated(note = "offsets and lengths are usize across the memory APIs: use `mr.sge_at(offset, len)` \
                (len: usize; over 4 GiB - 1 is a clear error); see docs/upgrading.md")]
    #[doc(hidden)]
    #[inline]
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        self.sge_at(offset, len as usize)
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

/// A sub-range of a region that cannot be used: what was asked, of which
/// region, and why.
///
/// # One integer convention for the memory APIs
/// Every offset and length a program passes into a region, local or
/// remote, is a `usize`, in the order `(offset, len)`:
/// [`Mr::sge_at`], [`RegisteredMem::sge_at`](crate::wrap::RegisteredMem::sge_at),
/// [`DmMr::sge_at`](super::DmMr::sge_at), [`RemoteMr::addr_at`],
/// [`RemoteMr::checked_addr_at`], the fields of
/// [`MrRange`](crate::mlx5dv::umr::MrRange), and the `Range<usize>` a
/// `RegisteredMem` or an async operation takes where it indexes like a slice.
/// They are computed from Rust sizes (`size_of`, `Layout::size`, slice
/// lengths, indices), which are `usize`, so a local entry and the remote
/// location it is copied to take the same values with no cast. Addresses
/// (`Mr::addr`, `RemoteMr::addr`, [`RemoteAddr::addr`], an [`Sge`]'s) and
/// the fields of a peer's token are `u64`: they are device and wire values,
/// not indices. The device's 32-bit limit on one entry's length is checked
/// where the entry is made: a longer length is a
/// [`RangeErrorKind::TooLong`] error, never a silent truncation.
///
/// The panicking forms (`sge_at`, `addr_at`) treat a bad range as a
/// programming error and panic with this error's message; the `checked_`
/// forms return it, for ranges that come from a peer or from input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RangeError {
    /// Why.
    pub kind: RangeErrorKind,
    /// The method that refused it (`"Mr::sge_at"`).
    pub op: &'static str,
    /// The offset asked for.
    pub offset: usize,
    /// The length asked for.
    pub len: usize,
    /// The region's start address.
    pub region_addr: u64,
    /// The region's length in bytes.
    pub region_len: u64,
}

/// Why a [`RangeError`] refused a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RangeErrorKind {
    /// The length exceeds the 32 bits of a scatter/gather entry's length
    /// (4 GiB - 1, `u32::MAX`).
    TooLong,
    /// `offset + len` passes the end of the region (or of the address space).
    PastEnd,
    /// The region's own addresses do not fit in 64 bits: a bad token from a peer.
    BadRegion,
    /// A length of 0 where a region is made: a region holds at least one
    /// byte (an entry of 0 bytes, [`Mr::sge_at`]'s, is valid).
    Empty,
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RangeError { kind, op, offset, len, region_addr, region_len } = *self;
        match kind {
            RangeErrorKind::TooLong => write!(
                f,
                "{op}: length {len} exceeds the {} bytes one scatter/gather entry holds; split the transfer \
                 into several entries or requests",
                u32::MAX
            ),
            RangeErrorKind::PastEnd => write!(
                f,
                "{op}: {len} bytes at offset {offset} pass the end of the region of {region_len} bytes; \
                 offset + len must be at most the region's length"
            ),
            RangeErrorKind::BadRegion => write!(
                f,
                "{op}: the region at {region_addr:#x} of {region_len} bytes wraps past the end of the 64-bit \
                 address space (a bad token from the peer: check tokens with RemoteMr::end)"
            ),
            RangeErrorKind::Empty => {
                write!(
                    f,
                    "{op}: length 0 at offset {offset}; a region holds at least one byte: give a length of 1 or more"
                )
            }
        }
    }
}

impl std::error::Error for RangeError {}

impl From<RangeError> for std::io::Error {
    fn from(e: RangeError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}

impl RangeError {
    /// Panics with the message (the panicking forms' path, kept out of line).
    #[cold]
    #[inline(never)]
    #[track_caller]
    pub(crate) fn fail(self) -> ! {
        panic!("{self}")
    }
}

/// Checks `len` bytes at `offset` of a local region of `region_len` bytes
/// at `region_addr` for one scatter/gather entry: the length as the
/// entry's `u32`, or why not.
#[inline]
pub(crate) fn local_range(
    op: &'static str,
    region_addr: u64,
    region_len: usize,
    offset: usize,
    len: usize,
) -> std::result::Result<u32, RangeError> {
    let err = |kind| RangeError { kind, op, offset, len, region_addr, region_len: region_len as u64 };
    let Ok(len32) = u32::try_from(len) else {
        return Err(err(RangeErrorKind::TooLong));
    };
    match offset.checked_add(len) {
        Some(end) if end <= region_len => Ok(len32),
        _ => Err(err(RangeErrorKind::PastEnd)),
    }
}

/// A peer's memory region: address, length and rkey, as exchanged out of band.
///
/// Its fields are the peer's values as exchanged (64-bit on the wire);
/// offsets and lengths into it are `usize`, as for local memory
/// ([`Mr::sge_at`]): `mem.sge_at(off, len)` and `remote.addr_at(off)` or
/// `remote.checked_addr_at(off, len)` take the same values with no cast
/// (see [`RangeError`] for the convention).
///
/// ```
/// use rrddmma::prim::RemoteMr;
/// let mr = RemoteMr { addr: 0x7f00_0000_1000, len: 4096, rkey: 0x1234 };
/// assert_eq!(RemoteMr::from_bytes(&mr.to_bytes()), mr);
/// assert_eq!(mr.addr_at(64).addr, 0x7f00_0000_1040);
/// assert!(mr.checked_addr_at(4096, 1).is_err());
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
    /// [`RangeErrorKind::PastEnd`] when `offset + len` passes the region's
    /// length, [`RangeErrorKind::BadRegion`] when the region's addresses do
    /// not fit in 64 bits. Every sum is checked: the fields usually come
    /// from a peer, and no peer value can make this panic or wrap. A zero
    /// length is accepted anywhere up to the end, the end included.
    ///
    /// ```
    /// use rrddmma::prim::{RangeErrorKind, RemoteMr};
    /// let bogus = RemoteMr { addr: u64::MAX - 16, len: 4096, rkey: 1 };
    /// assert_eq!(bogus.checked_addr_at(0, 8).unwrap_err().kind, RangeErrorKind::BadRegion);
    /// let mr = RemoteMr { addr: 0x1000, len: 4096, rkey: 1 };
    /// assert_eq!(mr.checked_addr_at(usize::MAX, 2).unwrap_err().kind, RangeErrorKind::PastEnd);
    /// ```
    #[inline]
    pub fn checked_addr_at(&self, offset: usize, len: usize) -> std::result::Result<RemoteAddr, RangeError> {
        let err = |kind| RangeError {
            kind,
            op: "RemoteMr::checked_addr_at",
            offset,
            len,
            region_addr: self.addr,
            region_len: self.len,
        };
        if self.end().is_none() {
            return Err(err(RangeErrorKind::BadRegion));
        }
        match (offset as u64).checked_add(len as u64) {
            Some(last) if last <= self.len => Ok(RemoteAddr { addr: self.addr + offset as u64, rkey: self.rkey }),
            _ => Err(err(RangeErrorKind::PastEnd)),
        }
    }

    /// The remote location `offset` bytes in.
    ///
    /// # Panics
    /// If `offset` is not inside the region (a programming error), or if the
    /// region's addresses do not fit in 64 bits. For a token that came from a
    /// peer and has not been checked, use [`RemoteMr::checked_addr_at`],
    /// which returns an error instead.
    #[inline]
    pub fn addr_at(&self, offset: usize) -> RemoteAddr {
        // Two compares on the hot path: `offset < len` and `addr + len`
        // fitting in 64 bits together prove `addr + offset` does not wrap.
        let offset = offset as u64;
        match self.addr.checked_add(self.len) {
            Some(_) if offset < self.len => RemoteAddr { addr: self.addr + offset, rkey: self.rkey },
            _ => self.at_failed(offset),
        }
    }

    /// Old form of [`RemoteMr::checked_addr_at`], with `u64` offsets and an `Option`.
    #[deprecated(
        note = "offsets and lengths are usize across the memory APIs: use `remote.checked_addr_at(offset, len)`, \
                which returns a RangeError naming the bound; see docs/upgrading.md"
    )]
    #[doc(hidden)]
    pub fn checked_at(&self, offset: u64, len: u64) -> Option<RemoteAddr> {
        let last = offset.checked_add(len)?;
        if last > self.len {
            return None;
        }
        self.end()?;
        Some(RemoteAddr { addr: self.addr.checked_add(offset)?, rkey: self.rkey })
    }

    /// Old form of [`RemoteMr::addr_at`], with a `u64` offset.
    #[deprecated(note = "offsets and lengths are usize across the memory APIs: use `remote.addr_at(offset)`; \
                see docs/upgrading.md")]
    #[doc(hidden)]
    #[inline]
    pub fn at(&self, offset: u64) -> RemoteAddr {
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
                 (a bad token: check peer tokens with RemoteMr::checked_addr_at or RemoteMr::end)",
                self.addr, self.len
            );
        }
        panic!("offset {offset} is outside the remote region of {} bytes", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::{check_dmabuf_range, local_range, RangeError, RangeErrorKind, RemoteMr};

    fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
        msg.expect("a message")
    }

    /// The local bounds of one scatter/gather entry, as `Mr::sge_at`,
    /// `RegisteredMem::sge_at` and `DmMr::sge_at` check them: a length over
    /// 32 bits, a range past the end, a range exactly at the end, a zero
    /// length. Each refusal names its kind, the values and the fix.
    #[test]
    fn local_ranges_refuse_long_and_past_the_end_and_take_the_end_and_zero() {
        let op = "Mr::sge_at";
        // Length overflow: one past the entry's 32 bits, even in a region
        // that holds it (an implicit ODP region is the whole address space).
        let e = local_range(op, 0, usize::MAX, 0, u32::MAX as usize + 1).expect_err("over 32 bits");
        assert_eq!(e.kind, RangeErrorKind::TooLong);
        assert_eq!(
            e.to_string(),
            "Mr::sge_at: length 4294967296 exceeds the 4294967295 bytes one scatter/gather entry holds; \
             split the transfer into several entries or requests"
        );
        assert_eq!(local_range(op, 0, usize::MAX, 0, u32::MAX as usize), Ok(u32::MAX));
        // Too long wins over past the end: the fix it names comes first.
        assert_eq!(local_range(op, 0, 4096, 0, usize::MAX).unwrap_err().kind, RangeErrorKind::TooLong);
        // Past the end, by one byte and by wrapping.
        let e = local_range(op, 0x1000, 4096, 4000, 97).expect_err("one byte past");
        assert_eq!(e.kind, RangeErrorKind::PastEnd);
        assert_eq!((e.offset, e.len, e.region_len), (4000, 97, 4096));
        assert_eq!(
            e.to_string(),
            "Mr::sge_at: 97 bytes at offset 4000 pass the end of the region of 4096 bytes; \
             offset + len must be at most the region's length"
        );
        assert_eq!(local_range(op, 0, 4096, usize::MAX, 1).unwrap_err().kind, RangeErrorKind::PastEnd);
        assert_eq!(local_range(op, 0, 4096, 4097, 0).unwrap_err().kind, RangeErrorKind::PastEnd);
        // Exactly at the end, and zero lengths (at the start and at the end).
        assert_eq!(local_range(op, 0, 4096, 4000, 96), Ok(96));
        assert_eq!(local_range(op, 0, 4096, 0, 4096), Ok(4096));
        assert_eq!(local_range(op, 0, 4096, 0, 0), Ok(0));
        assert_eq!(local_range(op, 0, 4096, 4096, 0), Ok(0));
    }

    /// The panicking forms panic with the error's message, at the caller.
    #[test]
    fn a_refused_range_panics_with_its_message() {
        let e = local_range("RegisteredMem::sge_at", 0, 64, 60, 8).expect_err("past the end");
        let p = std::panic::catch_unwind(|| e.fail()).expect_err("must panic");
        assert_eq!(panic_message(p), e.to_string());
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    }

    /// The remote bounds, with `usize` offsets and lengths like the local
    /// ones: past the end, exactly at the end, zero length, a token that
    /// wraps.
    #[test]
    fn remote_ranges_take_the_same_usize_values_as_local_ones() {
        let mr = RemoteMr { addr: 0x10_0000, len: 4096, rkey: 9 };
        // The same (offset, len) values a local entry takes, no cast.
        let (off, len): (usize, usize) = (4000, 96);
        assert_eq!(local_range("Mr::sge_at", 0, 4096, off, len), Ok(96));
        assert_eq!(mr.checked_addr_at(off, len).map(|a| a.addr), Ok(0x10_0000 + 4000));
        assert_eq!(mr.addr_at(off).addr, 0x10_0000 + 4000);
        let e: RangeError = mr.checked_addr_at(4000, 97).expect_err("one byte past");
        assert_eq!(e.kind, RangeErrorKind::PastEnd);
        assert_eq!(
            e.to_string(),
            "RemoteMr::checked_addr_at: 97 bytes at offset 4000 pass the end of the region of 4096 bytes; \
             offset + len must be at most the region's length"
        );
        assert_eq!(mr.checked_addr_at(usize::MAX, 1).unwrap_err().kind, RangeErrorKind::PastEnd);
        assert_eq!(mr.checked_addr_at(1, usize::MAX).unwrap_err().kind, RangeErrorKind::PastEnd);
        assert_eq!(mr.checked_addr_at(4097, 0).unwrap_err().kind, RangeErrorKind::PastEnd);
        assert!(mr.checked_addr_at(4096, 0).is_ok(), "a zero length at the end");
        assert!(mr.checked_addr_at(0, 0).is_ok(), "a zero length at the start");
        assert!(mr.checked_addr_at(0, 4096).is_ok(), "the whole region");
        let p = std::panic::catch_unwind(|| mr.addr_at(4096)).expect_err("addr_at past the end panics");
        assert_eq!(panic_message(p), "offset 4096 is outside the remote region of 4096 bytes");
        let bogus = RemoteMr { addr: u64::MAX - 100, len: 4096, rkey: 7 };
        let e = bogus.checked_addr_at(0, 8).expect_err("wrapping token");
        assert_eq!(e.kind, RangeErrorKind::BadRegion);
        assert!(e.to_string().contains("wraps past the end of the 64-bit address space"), "{e}");
    }

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
        for (off, len) in [(0, 0), (0, 8), (200, 8), (4095, 1), (usize::MAX, 1), (1, usize::MAX)] {
            assert!(bogus.checked_addr_at(off, len).is_err(), "({off}, {len}) must be refused");
        }
        let top = RemoteMr { addr: u64::MAX - 4096, len: 4096, rkey: 7 };
        assert_eq!(top.end(), Some(u64::MAX));
        assert_eq!(top.checked_addr_at(4088, 8).map(|r| r.addr), Ok(u64::MAX - 8));
        assert!(top.checked_addr_at(4089, 8).is_err());
        let r = std::panic::catch_unwind(|| bogus.addr_at(0)).expect_err("addr_at() on a wrapping token panics");
        let msg = r.downcast_ref::<String>().expect("message");
        assert!(msg.contains("wraps past the end of the address space") && msg.contains("checked_addr_at"), "{msg}");
    }
}
