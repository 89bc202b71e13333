//! The doorbell side of direct verbs: barriers, doorbell records and MMIO
//! stores, behind a trait so that tests can record the sequence.

use std::ptr;

use crate::mlx5dv::queue::be::Be32;

/// The operations of a doorbell sequence. [`HwMmio`] performs them on real
/// hardware; [`Recorder`] records them.
pub trait Mmio {
    /// `udma_to_device_barrier`: descriptors in host memory are visible
    /// before what follows.
    fn to_device_barrier(&mut self);
    /// Stores `val` (host order) big-endian into a doorbell record in host memory.
    ///
    /// # Safety
    /// `rec` must be a writable doorbell record of a live queue.
    unsafe fn write_dbrec(&mut self, rec: *mut Be32, val: u32);
    /// `mmio_wc_start`: orders the record before the write-combining stores.
    fn wc_start(&mut self);
    /// One 8-byte MMIO store of `bytes` (memory order) at `reg + offset`.
    ///
    /// # Safety
    /// `reg + offset` must be an 8-byte aligned, mapped register address of a
    /// live queue (for [`Recorder`], any value).
    unsafe fn write64(&mut self, reg: *mut u8, offset: usize, bytes: [u8; 8]);
    /// `mmio_flush_writes`: pushes write-combining buffers out.
    fn flush_writes(&mut self);
}

/// Real MMIO: volatile stores and the x86-64 fences rdma-core uses
/// (x86-64 only: other architectures need the barriers of rdma-core's
/// `udma_barrier.h`, not written here).
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Default, Clone, Copy)]
pub struct HwMmio;

#[cfg(target_arch = "x86_64")]
impl Mmio for HwMmio {
    #[inline(always)]
    fn to_device_barrier(&mut self) {
        // x86-64 keeps stores in order; only the compiler must not reorder.
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }

    #[inline(always)]
    unsafe fn write_dbrec(&mut self, rec: *mut Be32, val: u32) {
        // SAFETY: the caller's contract.
        unsafe { ptr::write_volatile(rec, Be32::new(val)) }
    }

    #[inline(always)]
    fn wc_start(&mut self) {
        sfence();
    }

    #[inline(always)]
    unsafe fn write64(&mut self, reg: *mut u8, offset: usize, bytes: [u8; 8]) {
        // SAFETY: the caller's contract: a mapped, aligned register address.
        unsafe { ptr::write_volatile(reg.add(offset).cast::<u64>(), u64::from_ne_bytes(bytes)) }
    }

    #[inline(always)]
    fn flush_writes(&mut self) {
        sfence();
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sfence() {
    // SAFETY: `sfence` has no operands and no memory effects beyond ordering.
    unsafe { std::arch::x86_64::_mm_sfence() };
}

/// One recorded MMIO operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `udma_to_device_barrier`.
    Barrier,
    /// A doorbell record store (host-order value).
    DbRec(u32),
    /// `mmio_wc_start`.
    WcStart,
    /// An 8-byte MMIO store: offset from the register base, bytes.
    Write64(usize, [u8; 8]),
    /// `mmio_flush_writes`.
    Flush,
}

/// Records every operation (and still stores doorbell records, so that ring
/// state stays true); MMIO stores go to the log only.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    /// The operations, in order.
    pub ops: Vec<Op>,
}

impl Mmio for Recorder {
    fn to_device_barrier(&mut self) {
        self.ops.push(Op::Barrier);
    }

    unsafe fn write_dbrec(&mut self, rec: *mut Be32, val: u32) {
        // SAFETY: the caller's contract: a live record of the ring under test.
        unsafe { ptr::write_volatile(rec, Be32::new(val)) };
        self.ops.push(Op::DbRec(val));
    }

    fn wc_start(&mut self) {
        self.ops.push(Op::WcStart);
    }

    unsafe fn write64(&mut self, _reg: *mut u8, offset: usize, bytes: [u8; 8]) {
        self.ops.push(Op::Write64(offset, bytes));
    }

    fn flush_writes(&mut self) {
        self.ops.push(Op::Flush);
    }
}
