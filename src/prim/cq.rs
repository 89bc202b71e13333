//! Completion queues and work completions.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Context;
use super::error::{Error, Result};
use crate::bindings as ffi;

struct CqInner {
    cq: NonNull<ffi::ibv_cq>,
    ctx: Context,
}

// SAFETY: polling a CQ is thread-safe in libibverbs providers.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_cq`; QPs using it hold an `Arc` to this.
        unsafe { ffi::ibv_destroy_cq(self.cq.as_ptr()) };
    }
}

/// A completion queue. Cloning shares it.
///
/// # References
/// `ibv_create_cq(3)`, `ibv_poll_cq(3)`
#[derive(Clone)]
pub struct Cq(Arc<CqInner>);

impl fmt::Debug for Cq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cq").field("device", &self.0.ctx.name()).field("cqe", &self.capacity()).finish()
    }
}

impl Cq {
    /// Creates a CQ with room for at least `cqe` completions.
    pub fn new(ctx: &Context, cqe: u32) -> Result<Cq> {
        let cqe = i32::try_from(cqe).map_err(|_| Error::Verbs { op: "ibv_create_cq", errno: libc::EINVAL })?;
        // SAFETY: live context; no channel, no context pointer.
        let cq = unsafe { ffi::ibv_create_cq(ctx.as_ptr(), cqe, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        let cq = NonNull::new(cq).ok_or_else(|| Error::last("ibv_create_cq"))?;
        Ok(Cq(Arc::new(CqInner { cq, ctx: ctx.clone() })))
    }

    /// The raw CQ.
    pub fn as_ptr(&self) -> *mut ffi::ibv_cq {
        self.0.cq.as_ptr()
    }

    /// The capacity the provider granted.
    pub fn capacity(&self) -> u32 {
        // SAFETY: the CQ is live while `self` is.
        u32::try_from(unsafe { self.0.cq.as_ref() }.cqe).unwrap_or(0)
    }

    /// Polls completions into `wc`; returns how many were written.
    #[inline]
    pub fn poll(&self, wc: &mut [Wc]) -> Result<usize> {
        let n = i32::try_from(wc.len()).unwrap_or(i32::MAX);
        // SAFETY: live CQ; `wc` holds `n` writable `ibv_wc` (same layout).
        let rc = unsafe { ffi::ibv_poll_cq(self.as_ptr(), n, wc.as_mut_ptr().cast()) };
        usize::try_from(rc).map_err(|_| Error::code("ibv_poll_cq", rc))
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct Wc(pub ffi::ibv_wc);

impl Wc {
    /// The caller's `wr_id` of the work request.
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }

    /// Completion status; any value the device reports is representable.
    pub fn status(&self) -> ffi::ibv_wc_status {
        self.0.status
    }

    /// Whether the status is success.
    pub fn is_success(&self) -> bool {
        self.0.status == ffi::ibv_wc_status::IBV_WC_SUCCESS
    }

    /// The operation that completed (valid when successful).
    pub fn opcode(&self) -> ffi::ibv_wc_opcode {
        self.0.opcode
    }

    /// Bytes received (receive completions).
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// Immediate data in host order, if the completion carries it.
    pub fn imm(&self) -> Option<u32> {
        let with_imm = ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0;
        // SAFETY: the union's `imm_data` and `invalidated_rkey` are both plain u32.
        (self.0.wc_flags & with_imm != 0).then(|| u32::from_be(unsafe { self.0.__bindgen_anon_1.imm_data }))
    }

    /// Local QP number.
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    /// Remote QP number (UD).
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }

    /// Vendor error syndrome (on errors).
    pub fn vendor_err(&self) -> u32 {
        self.0.vendor_err
    }
}

impl fmt::Debug for Wc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wc")
            .field("wr_id", &self.wr_id())
            .field("status", &self.status())
            .field("opcode", &self.opcode())
            .field("byte_len", &self.byte_len())
            .field("imm", &self.imm())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_fields_decode_any_value() {
        let mut raw = ffi::ibv_wc { wr_id: 9, byte_len: 100, ..Default::default() };
        raw.status = ffi::ibv_wc_status(0xdead);
        raw.opcode = ffi::ibv_wc_opcode(0xbeef);
        raw.__bindgen_anon_1.imm_data = 0x0102_0304u32.to_be();
        let wc = Wc(raw);
        assert!(!wc.is_success());
        assert_eq!(wc.status().0, 0xdead);
        assert_eq!(wc.opcode().0, 0xbeef);
        assert_eq!(wc.imm(), None, "no IBV_WC_WITH_IMM flag: no immediate");
        raw.wc_flags = ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0;
        assert_eq!(Wc(raw).imm(), Some(0x0102_0304));
        assert!(format!("{:?}", Wc(raw)).contains("wr_id: 9"));
    }
}
