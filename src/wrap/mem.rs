//! [`RegisteredMem`]: memory that owns its registration.

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::error::{Error, Result};
use crate::prim::{AccessFlags, Mr, Pd, RemoteMr, Sge};

/// Huge-page policy of a [`RegisteredMem`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HugePages {
    /// Ordinary pages.
    #[default]
    No,
    /// Aligned to 2 MiB and advised for transparent huge pages
    /// (`madvise(MADV_HUGEPAGE)`); falls back to small pages silently, as THP does.
    Transparent,
    /// Explicit 2 MiB huge pages (`MAP_HUGETLB`); fails if none are reserved
    /// (`/proc/sys/vm/nr_hugepages`).
    Explicit,
}

/// How to allocate and register a [`RegisteredMem`]: start from
/// [`MemOpts::default`] (page alignment, small pages, and local write plus
/// remote read, write and atomic access) and chain the setters.
///
/// ```
/// use rrddmma::prim::AccessFlags;
/// use rrddmma::wrap::{HugePages, MemOpts};
/// let o = MemOpts::default().huge(HugePages::Transparent).access(AccessFlags::LOCAL_WRITE);
/// # let _ = o;
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct MemOpts {
    pub(crate) align: usize,
    pub(crate) huge: HugePages,
    pub(crate) access: AccessFlags,
}

impl Default for MemOpts {
    fn default() -> MemOpts {
        use AccessFlags as A;
        MemOpts {
            align: 4096,
            huge: HugePages::No,
            access: A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::REMOTE_ATOMIC,
        }
    }
}

impl MemOpts {
    setters! {
        /// Alignment of the start, a power of two (at least the page size is
        /// used). Default 4096.
        const align: usize;
        /// Huge pages. Default [`HugePages::No`].
        const huge: HugePages;
        /// Access rights of the registration (`ibv_reg_mr`'s `access`).
        /// Default local write and remote read, write and atomic.
        const access: AccessFlags;
    }
}

const HUGE: usize = 2 << 20;
const SMALL: usize = 4096;

/// Zeroed, aligned memory of this process, registered with a PD.
///
/// The bytes may change under the process at any time (remote writes,
/// receives), so the safe accessors copy ([`RegisteredMem::read`],
/// [`RegisteredMem::write`]) without ever forming a Rust reference to the
/// memory; [`RegisteredMem::as_slice`] is there, `unsafe`, for callers who
/// know no remote access is in flight.
///
/// `write` takes `&mut self`: two threads cannot store into the same bytes
/// at once, and no safe store can happen under a slice from `as_slice`.
/// Shared readers (`&self`, also across threads) copy out with `read`.
/// (Atomic byte-wise copies would let `write` take `&self`, but cost the
/// vectorised `memcpy` that bulk copies into registered buffers want; a
/// caller who needs shared writers wraps the value in a lock.)
///
/// The mapping belongs to the registration: it is unmapped when the last
/// handle to the region is gone (this value, clones of [`RegisteredMem::mr`],
/// and memory windows bound to it), and never if the deregistration fails.
///
/// ```compile_fail
/// // Stores need exclusive access: this does not compile.
/// fn store(mem: &rrddmma::wrap::RegisteredMem) {
///     mem.write(0, b"x");
/// }
/// ```
///
/// ```compile_fail
/// // No safe store can happen while a slice of the memory lives.
/// fn alias(mem: &mut rrddmma::wrap::RegisteredMem) {
///     // SAFETY: (for the example) no RDMA operation is in flight.
///     let view = unsafe { mem.as_slice() };
///     mem.write(0, b"x");
///     assert_eq!(view[0], b'x');
/// }
/// ```
pub struct RegisteredMem {
    mr: Mr,
    ptr: NonNull<u8>,
    len: usize,
}

/// Sizes of the mapping behind a [`RegisteredMem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    /// The region's bytes, rounded up to its page size.
    body: usize,
    /// Bytes to map: the body plus the slack to reach `align` from the
    /// alignment mmap guarantees.
    map_len: usize,
    /// Alignment of the region's start.
    align: usize,
}

impl Plan {
    /// The plan for `len` bytes, or `None` if the sizes overflow.
    fn new(len: usize, opts: &MemOpts) -> Option<Plan> {
        let page = match opts.huge {
            HugePages::No => SMALL,
            HugePages::Transparent | HugePages::Explicit => HUGE,
        };
        // What mmap itself guarantees: hugetlbfs mappings start on a huge
        // page; anonymous mappings only on a small page, whatever is later
        // advised (Linux 6.1 returns most 2 MiB anonymous mappings off a
        // 2 MiB boundary).
        let mapped = match opts.huge {
            HugePages::Explicit => HUGE,
            HugePages::No | HugePages::Transparent => SMALL,
        };
        let align = opts.align.max(page);
        let body = len.checked_add(page - 1)? & !(page - 1);
        let map_len = body.checked_add(align - mapped)?;
        Some(Plan { body, map_len, align })
    }

    /// Where the region starts in a mapping at `base`: `base + offset` is
    /// aligned, and `offset + body <= map_len` whenever `base` has the
    /// alignment mmap guarantees.
    fn offset(&self, base: usize) -> usize {
        (self.align - (base & (self.align - 1))) & (self.align - 1)
    }
}

/// An anonymous mapping, unmapped on drop. Owned by the registration over it.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain process memory; only `Drop` touches it here.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our mapping; it is dropped only after the registration over
        // it was removed (see `Mr`).
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        if rc != 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            crate::prim::count_destroy_failure("munmap", errno);
        }
    }
}

// SAFETY: the memory is owned by the registration `mr` (Send + Sync); every
// safe access copies through raw pointers, and stores need `&mut self`.
unsafe impl Send for RegisteredMem {}
// SAFETY: as above: `&self` only reads.
unsafe impl Sync for RegisteredMem {}

impl std::fmt::Debug for RegisteredMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredMem").field("addr", &self.ptr).field("len", &self.len).field("mr", &self.mr).finish()
    }
}

impl RegisteredMem {
    /// `len` zeroed bytes with [`MemOpts::default`].
    pub fn new(pd: &Pd, len: usize) -> Result<RegisteredMem> {
        RegisteredMem::with(pd, len, &MemOpts::default())
    }

    /// `len` zeroed bytes allocated and registered as `opts` says.
    ///
    /// # Panics
    /// If `len` is 0 or `opts.align` is not a power of two.
    pub fn with(pd: &Pd, len: usize, opts: &MemOpts) -> Result<RegisteredMem> {
        assert!(len > 0, "RegisteredMem of 0 bytes: ask for at least one byte");
        assert!(opts.align.is_power_of_two(), "MemOpts::align ({}) must be a power of two", opts.align);
        let too_big = || Error::Alloc { len, source: std::io::Error::from_raw_os_error(libc::ENOMEM) };
        let plan = Plan::new(len, opts).ok_or_else(too_big)?;
        let (body, map_len) = (plan.body, plan.map_len);
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if opts.huge == HugePages::Explicit {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing; no existing memory is touched.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if base == libc::MAP_FAILED {
            return Err(Error::Alloc { len, source: std::io::Error::last_os_error() });
        }
        let base = NonNull::new(base.cast::<u8>()).expect("mmap does not return null on success");
        let offset = plan.offset(base.as_ptr() as usize);
        // SAFETY: `offset + body <= map_len` for any base aligned to what
        // mmap guarantees (`Plan::offset`), so the result stays inside the mapping.
        let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(offset)) };
        if opts.huge == HugePages::Transparent {
            // SAFETY: advice on our own mapping; failure only means no THP.
            unsafe { libc::madvise(ptr.as_ptr().cast(), body, libc::MADV_HUGEPAGE) };
        }
        let mapping = Mapping { base, len: map_len };
        // SAFETY: the mapping is handed to the registration as its backing:
        // it is unmapped only after a successful deregistration.
        let mr = unsafe { Mr::register_backed(pd, ptr.as_ptr(), len, opts.access, Some(Box::new(mapping))) };
        // On error the backing was dropped (unmapped) with the failed attempt.
        Ok(RegisteredMem { mr: mr?, ptr, len })
    }

    /// The registration.
    pub fn mr(&self) -> &Mr {
        &self.mr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a `RegisteredMem` holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Start of the memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A raw pointer to the byte at `offset`, for code that hands the
    /// memory to the device or reads it with volatile or atomic accesses
    /// (benchmark loops polling for a peer's RDMA WRITE, payload checks).
    /// The bounds are checked once here; what is done through the pointer
    /// is the caller's (the type's documentation says what the device may
    /// change under it).
    ///
    /// # Panics
    /// If `offset` is not inside the memory.
    #[inline]
    pub fn ptr_at(&self, offset: usize) -> *mut u8 {
        assert!(offset < self.len, "offset {offset} is outside the {} bytes of this RegisteredMem", self.len);
        // SAFETY: `offset < len`: inside the live mapping.
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// Reads the 8-byte word at `offset` with an acquire load: the way to
    /// poll for a peer's RDMA WRITE (a sequence number or flag it writes
    /// last), with no `unsafe` per read. Reads after it see what the writer
    /// wrote before the word, in so far as the device wrote them first:
    /// ConnectX and SoftRoCE place a WRITE's bytes in address order, which
    /// the InfiniBand specification does not promise (where it matters, a
    /// WRITE with immediate and its receive completion do).
    /// docs/recipes.md, "A message ring polled in memory", shows the pattern.
    ///
    /// # Panics
    /// If `offset` is not a multiple of 8 or the word is not inside the memory.
    #[inline]
    pub fn load_acquire_u64(&self, offset: usize) -> u64 {
        self.word_at::<8>(offset);
        // SAFETY: in bounds and 8-byte aligned (the mapping is page-aligned;
        // checked above). An atomic is only ever formed here and in
        // `load_acquire_u32`, for loads; safe writes take `&mut self`, so no
        // non-atomic write of this process races with the load, and the
        // device's DMA is outside the Rust memory model, as for `read`.
        unsafe { (*self.ptr.as_ptr().add(offset).cast::<AtomicU64>()).load(Ordering::Acquire) }
    }

    /// Reads the 4-byte word at `offset` with an acquire load (as
    /// [`RegisteredMem::load_acquire_u64`]).
    ///
    /// # Panics
    /// If `offset` is not a multiple of 4 or the word is not inside the memory.
    #[inline]
    pub fn load_acquire_u32(&self, offset: usize) -> u32 {
        self.word_at::<4>(offset);
        // SAFETY: as in `load_acquire_u64`, 4-byte aligned.
        unsafe { (*self.ptr.as_ptr().add(offset).cast::<AtomicU32>()).load(Ordering::Acquire) }
    }

    fn word_at<const N: usize>(&self, offset: usize) {
        assert!(
            offset % N == 0,
            "offset {offset} of this RegisteredMem is not a multiple of {N}: a {N}-byte word is read at an aligned offset"
        );
        self.check(&(offset..offset.saturating_add(N)));
    }

    /// The token a peer needs to access the whole region remotely.
    pub fn remote(&self) -> RemoteMr {
        self.mr.remote()
    }

    /// A scatter/gather entry for `len` bytes at `offset`, as
    /// [`Mr::sge_at`] (offsets and lengths are `usize` throughout the memory
    /// APIs: see [`RangeError`](crate::prim::RangeError)).
    ///
    /// # Panics
    /// If the range is not inside the memory or `len` exceeds the 32-bit
    /// length of an entry (4 GiB - 1); the message is the
    /// [`RangeError`](crate::prim::RangeError)'s that
    /// [`RegisteredMem::checked_sge_at`] returns.
    #[inline]
    #[track_caller]
    pub fn sge_at(&self, offset: usize, len: usize) -> Sge {
        match self.checked_sge_at(offset, len) {
            Ok(sge) => sge,
            Err(e) => e.fail(),
        }
    }

    /// [`RegisteredMem::sge_at`], returning the
    /// [`RangeError`](crate::prim::RangeError) where `sge_at` panics.
    #[inline]
    pub fn checked_sge_at(&self, offset: usize, len: usize) -> std::result::Result<Sge, crate::prim::RangeError> {
        let len32 = crate::prim::mr::local_range("RegisteredMem::sge_at", self.mr.addr(), self.len, offset, len)?;
        Ok(Sge::from_raw(self.mr.addr() + offset as u64, len32, self.mr.lkey()))
    }

    /// A scatter/gather entry for `range`, indexed as a slice would be:
    /// `mem.sge(a..b)` is `mem.sge_at(a, b - a)`.
    ///
    /// # Panics
    /// If `range` is not inside the memory (also when `start > end`), or
    /// longer than 4 GiB - 1, as [`RegisteredMem::sge_at`].
    #[inline]
    #[track_caller]
    pub fn sge(&self, range: Range<usize>) -> Sge {
        self.check(&range);
        self.sge_at(range.start, range.end - range.start)
    }

    /// Copies `dst.len()` bytes out, starting at `offset`.
    ///
    /// # Panics
    /// If the range is not inside the memory.
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        self.check(&(offset..offset.saturating_add(dst.len())));
        // SAFETY: in bounds (checked); `dst` is a distinct Rust buffer. The
        // source is read through a raw pointer: no reference to memory that
        // the device may write is formed.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` in, starting at `offset`.
    ///
    /// Exclusive (`&mut self`): see the type's documentation. The device may
    /// still read or write these bytes if an operation on them is in flight;
    /// that is a question of the data's meaning, not of memory safety.
    ///
    /// # Panics
    /// If the range is not inside the memory.
    pub fn write(&mut self, offset: usize, src: &[u8]) {
        self.check(&(offset..offset.saturating_add(src.len())));
        // SAFETY: in bounds (checked); written through a raw pointer only.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len()) }
    }

    /// The memory as a slice.
    ///
    /// # Safety
    /// No RDMA operation (local receive or READ, remote WRITE or atomic) may
    /// write the memory while the slice lives, and no other thread may hold a
    /// `&mut` to this value meanwhile (safe code cannot: [`RegisteredMem::write`]
    /// takes `&mut self`, so the borrow of the slice excludes it; the
    /// contract is about the device, whose writes Rust cannot see).
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: a live mapping of `len` bytes; the no-writer contract is the caller's.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The memory as a mutable slice.
    ///
    /// # Safety
    /// No RDMA operation may read or write the memory while the slice lives.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, and `&mut self` excludes other slices.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    #[track_caller]
    fn check(&self, r: &Range<usize>) {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "range {r:?} is outside the {} bytes of this RegisteredMem",
            self.len
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{HugePages, Mapping, MemOpts, Plan, HUGE, SMALL};
    use std::ptr::NonNull;

    /// Regression (issue: huge-page region past its mapping): for every base
    /// address mmap may return, the aligned region lies inside the mapping.
    /// Transparent huge pages come from a plain anonymous mapping, which is
    /// only 4 KiB-aligned.
    #[test]
    fn transparent_huge_region_stays_inside_its_mapping_for_any_base() {
        for huge in [HugePages::No, HugePages::Transparent, HugePages::Explicit] {
            for align in [SMALL, 1 << 16, HUGE, 4 * HUGE] {
                for len in [1, SMALL, HUGE - 1, HUGE, HUGE + 1, 3 * HUGE + 5] {
                    let plan = Plan::new(len, &MemOpts { align, huge, ..MemOpts::default() }).expect("no overflow");
                    assert!(plan.body >= len);
                    let step = if huge == HugePages::Explicit { HUGE } else { SMALL };
                    let mut base = 0x7f00_0000_0000usize;
                    while base < 0x7f00_0000_0000 + 4 * HUGE {
                        let off = plan.offset(base);
                        assert_eq!((base + off) % plan.align, 0, "{huge:?} align {align} base {base:#x}");
                        assert!(
                            off + plan.body <= plan.map_len,
                            "{huge:?} align {align} len {len} base {base:#x}: region ends {} past the mapping",
                            off + plan.body - plan.map_len
                        );
                        base += step;
                    }
                }
            }
        }
    }

    /// Sizes that overflow are refused, not wrapped.
    #[test]
    fn overflowing_sizes_have_no_plan() {
        let opts = MemOpts { huge: HugePages::Transparent, ..MemOpts::default() };
        assert_eq!(Plan::new(usize::MAX - 10, &opts), None);
        assert_eq!(Plan::new(usize::MAX - 3 * HUGE, &MemOpts { align: 4 * HUGE, ..opts }), None);
    }

    /// A failed `munmap` in `Mapping`'s drop is counted, not ignored.
    #[test]
    fn a_failed_unmap_is_counted() {
        let before = crate::prim::destroy_failures();
        // An address that is not page-aligned: munmap refuses it (EINVAL)
        // without touching any mapping.
        drop(Mapping { base: NonNull::new(8 as *mut u8).expect("non-null"), len: 4096 });
        assert!(crate::prim::destroy_failures() > before, "the failed munmap was counted");
    }
}
