//! [`MrPool`] and [`LocalMr`]: registered memory handed out in pieces.

use std::alloc::Layout;
use std::fmt;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::prim::{Pd, RemoteAddr, RemoteMr, Sge};
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
    /// A pool of `len` bytes registered on `pd` with local write and remote
    /// read, write and atomic access.
    pub fn new(pd: &Pd, len: usize) -> crate::wrap::Result<MrPool> {
        let mem = RegisteredMem::with(pd, len, &MemOpts::default())?;
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

    /// Bytes not handed out.
    pub fn free_bytes(&self) -> usize {
        self.0.free.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|r| r.len()).sum()
    }

    /// The token of the whole pool.
    pub(crate) fn remote(&self) -> RemoteMr {
        self.0.mem.remote()
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
    let (i, start) = free.iter().enumerate().find_map(|(i, r)| {
        let start = (base + r.start).next_multiple_of(align) - base;
        (start + size <= r.end).then_some((i, start))
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
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Never true: a piece holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Start address (in this process).
    pub fn addr(&self) -> u64 {
        self.ptr().as_ptr() as u64
    }

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

    fn check(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|e| e <= self.len()),
            "range {offset}..+{len} is outside the {} bytes of this LocalMr",
            self.len()
        );
    }

    /// A scatter/gather entry for `range` of the piece.
    ///
    /// # Panics
    /// If the range is outside the piece or longer than 4 GiB.
    pub(crate) fn sge(&self, range: Range<usize>) -> Sge {
        self.check(range.start, range.len());
        self.pool.0.mem.sge(self.range.start + range.start..self.range.start + range.end)
    }

    /// The token a peer needs to access this piece remotely.
    pub fn token(&self) -> RemoteMr {
        let whole = self.pool.remote();
        RemoteMr { addr: self.addr(), len: self.len() as u64, rkey: whole.rkey }
    }

    /// The remote address of `offset` into this piece (for atomics on it).
    pub fn remote_at(&self, offset: usize) -> RemoteAddr {
        self.token().at(offset as u64)
    }

    /// Whether `token` names exactly this piece.
    pub(crate) fn is(&self, token: &RemoteMr) -> bool {
        let t = self.token();
        (t.addr, t.len, t.rkey) == (token.addr, token.len, token.rkey)
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
        give_back(&mut free, 16..24);
        give_back(&mut free, 56..120);
        give_back(&mut free, 0..10);
        assert_eq!(free, std::iter::once(0..4096).collect::<Vec<_>>(), "every piece merged back");
    }
}
