//! [`MrPool`] and [`LocalMr`]: registered memory handed out in pieces.

use std::alloc::Layout;
use std::fmt;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::prim::{AccessFlags, Mr, Pd, RemoteMr, Sge};
use crate::wrap::{MemOpts, RegisteredMem};

struct PoolInner {
    /// The registration and its mapping; never accessed through `&mut`
    /// (pieces are written through their own raw pointers).
    mem: RegisteredMem,
    /// Free ranges, sorted by start, never adjacent.
    free: Mutex<Vec<Range<usize>>>,
}

/// One registered region handed out in pieces ([`LocalMr`]): allocation
/// and freeing are a lock and a small free list, with no system call.
#[derive(Clone)]
pub struct MrPool(Arc<PoolInner>);

impl fmt::Debug for MrPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MrPool").field("len", &self.0.mem.len()).field("free", &self.free_bytes()).finish()
    }
}

impl MrPool {
    /// A pool of `len` bytes registered on `pd` for local access only (local
    /// write): no peer can reach it through the pool's registration. A piece
    /// lent or granted to a peer gets a registration of its own, over
    /// exactly its bytes, deregistered when the peer gives it back.
    pub fn new(pd: &Pd, len: usize) -> crate::wrap::Result<MrPool> {
        let mem = RegisteredMem::with(pd, len, &MemOpts::default().access(AccessFlags::LOCAL_WRITE))?;
        Ok(MrPool(Arc::new(PoolInner { mem, free: Mutex::new(std::iter::once(0..len).collect()) })))
    }

    /// A zeroed piece of `layout.size()` bytes (at least one) aligned to
    /// `layout.align()`; `None` when the pool has no such free range.
    pub fn alloc(&self, layout: Layout) -> Option<LocalMr> {
        let size = layout.size().max(1);
        let base = self.0.mem.as_ptr() as usize;
        let mut free = self.0.free.lock().unwrap_or_else(|e| e.into_inner());
        let start = take(&mut free, base, size, layout.align())?;
        drop(free);
        let mut mr = LocalMr { pool: self.clone(), range: start..start + size };
        mr.as_mut_bytes_zero();
        Some(mr)
    }

    /// The protection domain the pool is registered on.
    pub fn pd(&self) -> &Pd {
        self.0.mem.mr().pd()
    }

    /// Bytes not handed out.
    pub fn free_bytes(&self) -> usize {
        self.0.free.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|r| r.len()).sum()
    }

    /// Returns a piece to the free list.
    fn release(&self, range: Range<usize>) {
        let mut free = self.0.free.lock().unwrap_or_else(|e| e.into_inner());
        give_back(&mut free, range);
    }
}

/// First fit: the start (an offset from `base`'s pool) of `size` bytes whose
/// address is a multiple of `align`, taken out of `free`.
fn take(free: &mut Vec<Range<usize>>, base: usize, size: usize, align: usize) -> Option<usize> {
    // Checked sums: the size and alignment may come from a peer's request.
    let (i, start) = free.iter().enumerate().find_map(|(i, r)| {
        let start = (base + r.start).checked_next_multiple_of(align)? - base;
        (start.checked_add(size)? <= r.end).then_some((i, start))
    })?;
    let r = free.remove(i);
    if start + size < r.end {
        free.insert(i, start + size..r.end);
    }
    if r.start < start {
        free.insert(i, r.start..start);
    }
    Some(start)
}

/// Puts `range` back into the sorted free list, merging neighbours.
fn give_back(free: &mut Vec<Range<usize>>, range: Range<usize>) {
    {
        let i = free.partition_point(|r| r.start < range.start);
        free.insert(i, range);
        // Merge with the neighbours.
        if i + 1 < free.len() && free[i].end == free[i + 1].start {
            let next = free.remove(i + 1);
            free[i].end = next.end;
        }
        if i > 0 && free[i - 1].end == free[i].start {
            let cur = free.remove(i);
            free[i - 1].end = cur.end;
        }
    }
}

/// A piece of an [`MrPool`]: registered, owned, returned to the pool on drop.
///
/// Operations of [`RcEndpoint`](super::RcEndpoint) take it by value and give
/// it back with their result: while the device may access it, the endpoint's
/// table of requests in flight holds it, so a dropped future cannot free or
/// reuse it early.
pub struct LocalMr {
    pool: MrPool,
    range: Range<usize>,
}

impl fmt::Debug for LocalMr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalMr").field("addr", &self.addr()).field("len", &self.len()).finish()
    }
}

impl LocalMr {
    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Never true: a piece holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Start address (in this process).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.ptr().as_ptr() as u64
    }

    #[inline]
    fn ptr(&self) -> NonNull<u8> {
        let base = self.pool.0.mem.as_ptr();
        // SAFETY: `range` lies inside the pool's memory.
        unsafe { NonNull::new_unchecked(base.add(self.range.start)) }
    }

    /// Copies `dst.len()` bytes out, starting at `offset`.
    ///
    /// # Panics
    /// If the range is outside the piece.
    pub fn read(&self, offset: usize, dst: &mut [u8]) {
        self.check(offset, dst.len());
        // SAFETY: inside this piece (checked), which no other `LocalMr`
        // covers; copied through raw pointers, no reference to memory a
        // peer may write is formed.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr().as_ptr().add(offset), dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `src` in, starting at `offset`.
    ///
    /// # Panics
    /// If the range is outside the piece.
    pub fn write(&mut self, offset: usize, src: &[u8]) {
        self.check(offset, src.len());
        // SAFETY: inside this piece (checked), which no other `LocalMr`
        // covers, and `&mut self` excludes other stores to it.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr().as_ptr().add(offset), src.len()) }
    }

    fn as_mut_bytes_zero(&mut self) {
        // SAFETY: as in `write`.
        unsafe { std::ptr::write_bytes(self.ptr().as_ptr(), 0, self.len()) }
    }

    #[inline]
    fn check(&self, offset: usize, len: usize) {
        if offset.checked_add(len).is_none_or(|e| e > self.len()) {
            self.outside(offset, len)
        }
    }

    #[cold]
    #[inline(never)]
    fn outside(&self, offset: usize, len: usize) -> ! {
        panic!("range {offset}..+{len} is outside the {} bytes of this LocalMr", self.len())
    }

    /// A scatter/gather entry for `range` of the piece.
    ///
    /// # Panics
    /// If the range is outside the piece or longer than 4 GiB.
    #[inline]
    pub(crate) fn sge(&self, range: Range<usize>) -> Sge {
        self.check(range.start, range.len());
        let Ok(len) = u32::try_from(range.len()) else { panic!("an SGE covers at most 4 GiB - 1") };
        // Inside the piece (checked), which lies inside the pool's region:
        // no second check against the region.
        let mr = self.pool.0.mem.mr();
        Sge::from_raw(mr.addr() + (self.range.start + range.start) as u64, len, mr.lkey())
    }

    /// Registers exactly this piece's bytes with remote read, write and
    /// atomic access, for a peer: the piece is handed over with it.
    pub(crate) fn expose(self) -> Result<Exposed, (LocalMr, crate::prim::Error)> {
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let released = Arc::new(AtomicBool::new(false));
        let pd = self.pool.0.mem.mr().pd().clone();
        // SAFETY: the piece lies inside the pool's mapping, which the piece
        // keeps alive (it holds the pool); the `Exposed` keeps the piece
        // until the region is deregistered, and keeps it forever (leaked,
        // never back in the free list) if the deregistration fails: the
        // backing's drop, which marks `released`, runs only after a
        // successful `ibv_dereg_mr`.
        let mr = unsafe {
            Mr::register_backed(
                &pd,
                self.ptr().as_ptr(),
                self.len(),
                access,
                Some(Box::new(Released(released.clone()))),
            )
        };
        match mr {
            Ok(mr) => Ok(Exposed { mr: Some(mr), piece: Some(self), released }),
            Err(e) => Err((self, e)),
        }
    }
}

/// Marks a successful deregistration when dropped (as a region's backing).
struct Released(Arc<AtomicBool>);

impl Drop for Released {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A piece handed to the peer with a registration of its own over exactly
/// its bytes: the peer reaches this piece through its token and nothing
/// else. The piece goes back to its owner ([`Exposed::withdraw`]) or to the
/// pool (on drop) only after the registration is gone; if deregistering
/// fails, the piece is never reused.
pub(crate) struct Exposed {
    mr: Option<Mr>,
    piece: Option<LocalMr>,
    released: Arc<AtomicBool>,
}

impl Exposed {
    /// The token the peer gets: the piece's address and length, and the
    /// rkey of its own registration.
    pub fn token(&self) -> RemoteMr {
        let (mr, piece) = (self.mr.as_ref().expect("registered"), self.piece.as_ref().expect("held"));
        RemoteMr { addr: piece.addr(), len: piece.len() as u64, rkey: mr.rkey() }
    }

    /// Whether `token` is exactly this piece's token.
    pub fn is(&self, token: &RemoteMr) -> bool {
        self.token() == *token
    }

    /// Bytes of the piece.
    pub fn len(&self) -> usize {
        self.piece.as_ref().map_or(0, LocalMr::len)
    }

    /// Deregisters and gives the piece back; `None` when the
    /// deregistration failed (the piece is then never reused).
    pub fn withdraw(mut self) -> Option<LocalMr> {
        self.take()
    }

    fn take(&mut self) -> Option<LocalMr> {
        // The only clone of the region: dropping it deregisters.
        drop(self.mr.take());
        let piece = self.piece.take()?;
        if self.released.load(Ordering::Acquire) {
            Some(piece)
        } else {
            // The device may still reach it: never back into the free list.
            std::mem::forget(piece);
            None
        }
    }
}

impl Drop for Exposed {
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl Drop for LocalMr {
    fn drop(&mut self) {
        self.pool.release(self.range.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_aligns_splits_and_merges_back() {
        let mut free: Vec<Range<usize>> = std::iter::once(0..4096).collect();
        // A pool whose base address is 8 past a 64-byte boundary.
        let base = 0x1000 + 8;
        assert_eq!(take(&mut free, base, 10, 8), Some(0));
        assert_eq!(take(&mut free, base, 64, 64), Some(56), "(base + 56) is 64-aligned");
        assert_eq!(free, vec![10..56, 120..4096]);
        assert_eq!(take(&mut free, base, 8, 8), Some(16), "(base + 16) is 8-aligned; 10..16 stays free");
        assert_eq!(take(&mut free, base, 5000, 8), None);
        assert_eq!(take(&mut free, base, usize::MAX - 8, 8), None, "no overflow on a huge size");
        assert_eq!(take(&mut free, base, 8, 1 << 62), None, "no overflow on a huge alignment");
        give_back(&mut free, 16..24);
        give_back(&mut free, 56..120);
        give_back(&mut free, 0..10);
        assert_eq!(free, std::iter::once(0..4096).collect::<Vec<_>>(), "every piece merged back");
    }
}
