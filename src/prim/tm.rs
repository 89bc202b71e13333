//! Hardware tag matching on an SRQ: the tag operations ([`TmOp`],
//! [`Srq::post_tm_ops`]); the creation ([`SrqBuilder::tag_matching`](super::SrqBuilder::tag_matching))
//! is the SRQ builder's, its settings in `tm_config`.
//!
//! A tag-matching SRQ (`IBV_SRQT_TM`) keeps a list of tagged receives in the
//! device. An incoming tagged message whose tag matches an entry (under its
//! mask) lands in that entry's buffers; one that matches nothing lands in the
//! SRQ's ordinary receives (posted with [`Srq::post_recv`]) and is reported
//! as unexpected. Tag add, remove and sync are operations posted through
//! `ibv_post_srq_ops`. docs/mlx5dv.md walks through a whole exchange with
//! an unexpected message; below this path,
//! [`mlx5dv::tm_wqe::TmRing`](crate::mlx5dv::tm_wqe::TmRing) writes the
//! same operations as direct WQEs on the SRQ's command QP.

use std::marker::PhantomData;
use std::ptr;

use super::error::{Error, Result};
use super::srq::Srq;
use super::wr::Sge;
use crate::bindings as ffi;

/// One tag-matching operation, laid out as `ibv_ops_wr` so a slice of them
/// is posted in place by [`Srq::post_tm_ops`] (no allocation). `'a` ties an
/// add to the entries it points at.
///
/// An MPI-style receiver: a posted receive for tag 7 from any source (the
/// low 32 bits), ordinary receives for what arrives before its receive is
/// posted. On the SRQ's CQ, built with
/// [`CqBuilder::tag_matching`](super::CqBuilder::tag_matching),
/// [`ExWc::tm_info`](super::ExWc::tm_info) of a receive tells the two apart
/// (`matched`).
///
/// ```no_run
/// # fn f(pd: &rrddmma::prim::Pd, mr: &rrddmma::prim::Mr) -> rrddmma::prim::Result<()> {
/// use rrddmma::prim::{Cq, RecvWr, Srq, TmConfig, TmOp, WcFlagsEx};
/// let cq = Cq::builder(pd.context(), 256).tag_matching().extended(WcFlagsEx::TM_INFO).build()?;
/// let srq = Srq::builder(pd).max_wr(64).tag_matching(TmConfig { max_num_tags: 64, max_ops: 16 }, &cq).build()?;
/// // Room for unexpected messages.
/// let bounce = [mr.sge_at(0, 4096)];
/// // SAFETY: `mr` is this PD's, untouched until the completions.
/// unsafe { srq.post_recv(&mut [RecvWr::new(&bounce, 1)]) }?;
/// // The application's receive: tag 7 in the high half, any source.
/// let user = [mr.sge_at(4096, 4096)];
/// let mut add = [TmOp::add(7 << 32, 0xffff_ffff_0000_0000, &user, 2).signaled(100)];
/// // SAFETY: as above.
/// unsafe { srq.post_tm_ops(&mut add) }?;
/// let handle = add[0].handle(); // for TmOp::remove(handle) on cancel
/// # let _ = handle; Ok(()) }
/// ```
#[repr(transparent)]
pub struct TmOp<'a> {
    raw: ffi::ibv_ops_wr,
    _sge: PhantomData<&'a [Sge]>,
}

impl std::fmt::Debug for TmOp<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TmOp")
            .field("opcode", &self.raw.opcode.0)
            .field("wr_id", &self.raw.wr_id)
            .field("flags", &self.raw.flags)
            .field("handle", &self.raw.tm.handle)
            .field("tag", &self.raw.tm.add.tag)
            .field("mask", &self.raw.tm.add.mask)
            .finish()
    }
}

impl<'a> TmOp<'a> {
    fn new(opcode: ffi::ibv_ops_wr_opcode) -> Self {
        TmOp {
            raw: ffi::ibv_ops_wr {
                wr_id: 0,
                next: ptr::null_mut(),
                opcode,
                flags: 0,
                tm: ffi::ibv_ops_wr__bindgen_ty_1 {
                    unexpected_cnt: 0,
                    handle: 0,
                    add: ffi::ibv_ops_wr__bindgen_ty_1__bindgen_ty_1 {
                        recv_wr_id: 0,
                        sg_list: ptr::null_mut(),
                        num_sge: 0,
                        tag: 0,
                        mask: 0,
                    },
                },
            },
            _sge: PhantomData,
        }
    }

    /// Adds a tagged receive: a message whose tag equals `tag` on the bits
    /// of `mask` lands in `sges`, and its completion carries `recv_wr_id`.
    /// After the post, [`TmOp::handle`] is the handle a later
    /// [`TmOp::remove`] names.
    ///
    /// # Panics
    /// If `sges` holds more than `i32::MAX` entries.
    pub fn add(tag: u64, mask: u64, sges: &'a [Sge], recv_wr_id: u64) -> Self {
        let mut op = Self::new(ffi::ibv_ops_wr_opcode::IBV_WR_TAG_ADD);
        op.raw.tm.add.tag = tag;
        op.raw.tm.add.mask = mask;
        op.raw.tm.add.recv_wr_id = recv_wr_id;
        op.raw.tm.add.sg_list = sges.as_ptr().cast::<ffi::ibv_sge>().cast_mut();
        op.raw.tm.add.num_sge =
            i32::try_from(sges.len()).unwrap_or_else(|_| panic!("TmOp::add: {} entries: at most i32::MAX", sges.len()));
        op
    }

    /// Removes the tagged receive `handle` (returned by an add's
    /// [`TmOp::handle`]).
    pub fn remove(handle: u32) -> Self {
        let mut op = Self::new(ffi::ibv_ops_wr_opcode::IBV_WR_TAG_DEL);
        op.raw.tm.handle = handle;
        op
    }

    /// Syncs the device's list with software after `unexpected_cnt`
    /// unexpected messages were handled (`IBV_WR_TAG_SYNC`).
    pub fn sync(unexpected_cnt: u32) -> Self {
        let mut op = Self::new(ffi::ibv_ops_wr_opcode::IBV_WR_TAG_SYNC);
        op.raw.tm.unexpected_cnt = unexpected_cnt;
        op
    }

    /// Sets the operation's own completion id and asks for a completion
    /// (`IBV_OPS_SIGNALED`).
    pub fn signaled(mut self, wr_id: u64) -> Self {
        self.raw.wr_id = wr_id;
        self.raw.flags |= ffi::ibv_ops_flags::IBV_OPS_SIGNALED.0 as i32;
        self
    }

    /// Also syncs the list (`IBV_OPS_TM_SYNC`) with `unexpected_cnt`.
    pub fn with_sync(mut self, unexpected_cnt: u32) -> Self {
        self.raw.tm.unexpected_cnt = unexpected_cnt;
        self.raw.flags |= ffi::ibv_ops_flags::IBV_OPS_TM_SYNC.0 as i32;
        self
    }

    /// The tag handle: after an add is posted, the one the provider gave.
    pub fn handle(&self) -> u32 {
        self.raw.tm.handle
    }

    /// The raw operation.
    pub fn as_raw(&self) -> &ffi::ibv_ops_wr {
        &self.raw
    }
}

impl Srq {
    /// Posts tag-matching operations (`ibv_post_srq_ops`), linked in place
    /// and handed over with one call. Each posted add's [`TmOp::handle`] is
    /// set. Refused before the call with [`Error::Unsupported`] naming tag
    /// matching when the SRQ was not made with
    /// [`SrqBuilder::tag_matching`](super::SrqBuilder::tag_matching).
    ///
    /// # Safety
    /// Every added entry must lie in memory registered on this SRQ's PD with
    /// local write access, alive and untouched until its completion.
    ///
    /// # References
    /// `ibv_post_srq_ops(3)`
    #[inline]
    pub unsafe fn post_tm_ops(&self, ops: &mut [TmOp<'_>]) -> Result<()> {
        if !self.is_tm() {
            // SAFETY: a live SRQ points to its live context.
            let device = unsafe { crate::prim::unsupported::device_name((*self.as_ptr()).context) };
            return Err(Error::unsupported(
                "ibv_post_srq_ops",
                &crate::prim::unsupported::TAG_MATCHING_SRQ,
                &device,
                "not IBV_SRQT_TM",
            ));
        }
        let n = ops.len();
        if n == 0 {
            return Ok(());
        }
        let base = ops.as_mut_ptr().cast::<ffi::ibv_ops_wr>();
        for i in 0..n {
            // SAFETY: `i` and `i + 1` index `ops` (`TmOp` is `ibv_ops_wr`).
            unsafe { (*base.add(i)).next = if i + 1 < n { base.add(i + 1) } else { ptr::null_mut() } };
        }
        let mut bad = ptr::null_mut();
        // SAFETY: live SRQ; the list is linked above; memory is the caller's contract.
        let rc = unsafe { ffi::ibv_post_srq_ops(self.as_ptr(), base, &mut bad) };
        if rc != 0 {
            return Err(Error::post("ibv_post_srq_ops", rc, base, bad));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prim::tm_config::{check_caps, TmCaps, TmConfig};

    fn caps(tags: u32, ops: u32) -> TmCaps {
        TmCaps { max_num_tags: tags, max_ops: ops, ..Default::default() }
    }

    #[test]
    fn no_tm_caps_is_unsupported_naming_tag_matching() {
        let e = check_caps("rxe0", &caps(0, 0), &TmConfig { max_num_tags: 1, max_ops: 1 }).unwrap_err();
        assert!(e.is_unsupported());
        assert!(e.to_string().contains("tag matching is not supported by rxe0 (tm_caps.max_num_tags = 0)"), "{e}");
    }

    #[test]
    fn counts_above_the_caps_name_the_cap() {
        let e = check_caps("rxe0", &caps(64, 16), &TmConfig { max_num_tags: 65, max_ops: 1 }).unwrap_err();
        assert!(matches!(e, Error::CapExceeded { what: "tm_caps.max_num_tags", asked: 65, limit: 64 }), "{e}");
        let e = check_caps("rxe0", &caps(64, 16), &TmConfig { max_num_tags: 64, max_ops: 17 }).unwrap_err();
        assert!(matches!(e, Error::CapExceeded { what: "tm_caps.max_ops", asked: 17, limit: 16 }), "{e}");
        check_caps("rxe0", &caps(64, 16), &TmConfig { max_num_tags: 64, max_ops: 16 }).unwrap();
    }

    #[test]
    fn ops_fill_ibv_ops_wr() {
        let sges = [Sge::from_raw(0x1000, 64, 7), Sge::from_raw(0x2000, 32, 7)];
        let a = TmOp::add(0xabcd, !0, &sges, 9).signaled(3).with_sync(2);
        let r = a.as_raw();
        assert_eq!(r.opcode, ffi::ibv_ops_wr_opcode::IBV_WR_TAG_ADD);
        assert_eq!((r.wr_id, r.flags, r.tm.unexpected_cnt), (3, 3, 2));
        assert_eq!((r.tm.add.tag, r.tm.add.mask, r.tm.add.recv_wr_id, r.tm.add.num_sge), (0xabcd, !0, 9, 2));
        assert_eq!(r.tm.add.sg_list.cast_const(), sges.as_ptr().cast());
        let d = TmOp::remove(5);
        assert_eq!(
            (d.as_raw().opcode, d.as_raw().tm.handle, d.as_raw().flags),
            (ffi::ibv_ops_wr_opcode::IBV_WR_TAG_DEL, 5, 0)
        );
        let s = TmOp::sync(4);
        assert_eq!((s.as_raw().opcode, s.as_raw().tm.unexpected_cnt), (ffi::ibv_ops_wr_opcode::IBV_WR_TAG_SYNC, 4));
        assert_eq!(std::mem::size_of::<TmOp<'_>>(), std::mem::size_of::<ffi::ibv_ops_wr>());
    }
}
