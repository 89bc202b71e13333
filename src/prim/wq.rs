//! Receive work queues (`ibv_create_wq`), striding ones through
//! `mlx5dv_create_wq`, and the receive WQ indirection tables an RSS QP
//! spreads packets over (`ibv_create_rwq_ind_table`).
//!
//! ConnectX Ethernet ports have them; rxe and siw report none
//! (`max_wq_type_rq` 0, no `rss_caps`), and every creation there is
//! [`Error::Unsupported`] naming the capability, decided from the device's
//! capabilities before the system call.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::cq::Cq;
use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::mlx5::{striding_rq_caps, StridingParams};
use super::pd::Pd;
use super::wr::{link_in_place, RecvWr};
use crate::bindings as ffi;

pub(crate) struct WqData {
    striding: Option<StridingParams>,
    _pd: Pd,
    _cq: Cq,
}

// SAFETY: `ibv_destroy_wq` releases what `ibv_create_wq` or
// `mlx5dv_create_wq` made; the PD and CQ it uses drop after it (fields).
unsafe impl Destroy for WqData {
    type Raw = ffi::ibv_wq;
    const VERB: &'static str = "ibv_destroy_wq";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_wq>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_wq(raw.as_ptr()) }
    }
}

/// A receive work queue. Destroyed when the last clone and the last
/// indirection table holding it are gone.
///
/// # References
/// `ibv_create_wq(3)`, `mlx5dv_create_wq(3)`
#[derive(Clone)]
pub struct Wq(Arc<Owned<WqData>>);

impl fmt::Debug for Wq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wq").field("wq_num", &self.num()).finish()
    }
}

/// Builds a [`Wq`]: [`Wq::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until build"]
pub struct WqBuilder<'a> {
    pd: &'a Pd,
    cq: &'a Cq,
    max_wr: u32,
    max_sge: u32,
    striding: Option<StridingParams>,
}

impl Wq {
    /// A receive WQ on `pd` completing to `cq`: 64 requests of one entry
    /// unless told otherwise.
    pub fn builder<'a>(pd: &'a Pd, cq: &'a Cq) -> WqBuilder<'a> {
        WqBuilder { pd, cq, max_wr: 64, max_sge: 1, striding: None }
    }

    /// The WQ number.
    pub fn num(&self) -> u32 {
        // SAFETY: a live WQ.
        unsafe { (*self.0.as_ptr()).wq_num }
    }

    /// The WQEs' shape of a striding WQ ([`WqBuilder::striding`]); `None`
    /// for an ordinary one.
    pub fn striding(&self) -> Option<StridingParams> {
        self.0.striding
    }

    /// Moves the WQ to ready (`IBV_WQS_RDY`), where it receives.
    ///
    /// # References
    /// `ibv_modify_wq(3)`
    #[doc(alias = "ibv_modify_wq")]
    pub fn ready(&self) -> Result<()> {
        let mut attr = ffi::ibv_wq_attr {
            attr_mask: ffi::ibv_wq_attr_mask::IBV_WQ_ATTR_STATE.0,
            wq_state: ffi::ibv_wq_state::IBV_WQS_RDY,
            ..Default::default()
        };
        // SAFETY: a live WQ; `attr` is valid for the call.
        let rc = unsafe { ffi::ibv_modify_wq(self.0.as_ptr(), &mut attr) };
        if rc != 0 {
            return Err(Error::code("ibv_modify_wq", rc));
        }
        Ok(())
    }

    /// Posts receives, linked in place and handed to the provider's entry
    /// with one call (`ibv_post_wq_recv`), on an ordinary WQ.
    ///
    /// A striding WQ ([`WqBuilder::striding`]) is posted through its ring
    /// only ([`mprq_wq::ring`](crate::mlx5dv::mprq_wq::ring),
    /// [`MprqRing::post`](crate::mlx5dv::mprq::MprqRing::post)): libmlx5's
    /// `ibv_post_wq_recv` writes the data segment at a striding WQE's first
    /// byte, where the device reads the next segment.
    ///
    /// # Safety
    /// Every entry must lie in memory registered on this WQ's PD with local
    /// write access, alive and untouched until its completion.
    ///
    /// # Panics
    /// On a striding WQ (a programming error), before anything is posted.
    ///
    /// # References
    /// `ibv_post_wq_recv(3)`
    #[doc(alias = "ibv_post_wq_recv")]
    #[inline]
    pub unsafe fn post_recv(&self, wrs: &mut [RecvWr<'_>]) -> Result<()> {
        // SAFETY: forwarded contract; the pointer is this live WQ's and
        // `striding` was decided at its creation.
        unsafe { post_wq_recv(self.0.as_ptr(), self.0.striding, wrs) }
    }

    /// The raw WQ.
    pub fn as_ptr(&self) -> *mut ffi::ibv_wq {
        self.0.as_ptr()
    }
}

/// [`Wq::post_recv`] on the WQ `wq`, striding (shaped so) or not.
///
/// # Safety
/// `wq` is a live WQ whose shape is `striding`, and the contract of
/// [`Wq::post_recv`].
#[inline]
unsafe fn post_wq_recv(wq: *mut ffi::ibv_wq, striding: Option<StridingParams>, wrs: &mut [RecvWr<'_>]) -> Result<()> {
    if striding.is_some() {
        // SAFETY: a live WQ (the caller's contract).
        striding_post_refused(unsafe { (*wq).wq_num });
    }
    let Some(head) = link_in_place!(&mut *wrs) else { return Ok(()) };
    let mut bad = std::ptr::null_mut();
    // SAFETY: a live WQ; providers that make WQs set its entry.
    let Some(post) = (unsafe { (*wq).post_recv }) else {
        return Err(Error::unsupported(
            "ibv_post_wq_recv",
            &crate::prim::unsupported::RAW_WQ_POST,
            // SAFETY: a live WQ points to its live context.
            &unsafe { crate::prim::unsupported::device_name((*wq).context) },
            "none",
        ));
    };
    // SAFETY: a live WQ and its provider's entry (what the inline
    // `ibv_post_wq_recv` calls); the list is linked above; memory is the
    // caller's contract.
    let rc = unsafe { post(wq, head, &mut bad) };
    if rc != 0 {
        return Err(Error::post("ibv_post_wq_recv", rc, head, bad));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn striding_post_refused(wq_num: u32) -> ! {
    panic!(
        "Wq::post_recv on WQ {wq_num:#x}, a striding WQ: libmlx5's ibv_post_wq_recv writes the data segment where \
         the device reads the next segment; post through its ring (mlx5dv::mprq_wq::ring, MprqRing::post)"
    )
}

impl WqBuilder<'_> {
    /// Receive requests the WQ holds (`max_wr`).
    pub fn max_wr(mut self, n: u32) -> Self {
        self.max_wr = n;
        self
    }

    /// Scatter entries per request (`max_sge`).
    pub fn max_sge(mut self, n: u32) -> Self {
        self.max_sge = n;
        self
    }

    /// A striding (multi-packet) receive queue of WQEs shaped `s`, made
    /// with `mlx5dv_create_wq` (ConnectX only); posted and polled through
    /// [`mprq_wq::ring`](crate::mlx5dv::mprq_wq::ring) and
    /// [`mprq`](crate::mlx5dv::mprq).
    pub fn striding(mut self, s: StridingParams) -> Self {
        self.striding = Some(s);
        self
    }

    /// Creates the WQ (in RESET; [`Wq::ready`] before use).
    ///
    /// [`Error::Unsupported`] before any system call where the device has
    /// no receive WQs (`max_wq_type_rq` 0: rxe, siw) or, for a striding
    /// one, where it is not a ConnectX (mlx5) device or reports no striding
    /// receive queues (`striding_rq_caps`); [`Error::CapExceeded`] for a
    /// size or stride shape beyond the device's.
    ///
    /// # References
    /// `ibv_create_wq(3)`, `mlx5dv_create_wq(3)`
    #[doc(alias = "ibv_create_wq")]
    #[doc(alias = "mlx5dv_create_wq")]
    // `dv` is read only where `mlx5dv_create_wq` is called (not in a MLNX_OFED 4.x build).
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(unused_variables, unused_assignments))]
    pub fn build(self) -> Result<Wq> {
        let ctx = self.pd.context();
        assert!(
            std::ptr::eq(ctx.as_ptr(), self.cq.context().as_ptr()),
            "Wq::builder: the PD and the CQ belong to different device contexts; create both on one"
        );
        let mut dv = ffi::mlx5dv_wq_init_attr::default();
        if let Some(s) = self.striding {
            // Unsupported off mlx5 (naming the device), before any system call.
            striding_rq_caps(ctx)?.check_on(ctx.name(), &s)?;
            dv.comp_mask = u64::from(ffi::mlx5dv_wq_init_attr_mask::MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ.0);
            dv.striding_rq_attrs = ffi::mlx5dv_striding_rq_init_attr {
                single_stride_log_num_of_bytes: s.log_stride_bytes.into(),
                single_wqe_log_num_of_strides: s.log_num_strides.into(),
                two_byte_shift_en: u8::from(s.two_byte_shift),
            };
        }
        let dev = ctx.query_device_ex()?;
        if dev.max_wq_type_rq == 0 {
            return Err(Error::unsupported("ibv_create_wq", &crate::prim::unsupported::RAW_WQ, ctx.name(), 0));
        }
        if self.max_wr > dev.max_wq_type_rq {
            return Err(Error::CapExceeded {
                what: "max_wq_type_rq",
                asked: u64::from(self.max_wr),
                limit: u64::from(dev.max_wq_type_rq),
            });
        }
        let mut attr = ffi::ibv_wq_init_attr {
            wq_type: ffi::ibv_wq_type::IBV_WQT_RQ,
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            pd: self.pd.as_ptr(),
            cq: self.cq.as_ptr(),
            ..Default::default()
        };
        let (raw, op) = match self.striding {
            // SAFETY: live context, PD and CQ of it; `attr` valid.
            None => (unsafe { ffi::ibv_create_wq(ctx.as_ptr(), &mut attr) }, "ibv_create_wq"),
            // SAFETY: live context, PD and CQ of it; both attributes valid.
            #[cfg(not(rrddmma_mlnx_ofed4))]
            Some(_) => (unsafe { ffi::mlx5dv_create_wq(ctx.as_ptr(), &mut attr, &mut dv) }, "mlx5dv_create_wq"),
            // `striding_rq_caps` has refused above already; its libmlx5 has
            // no mlx5dv_create_wq.
            #[cfg(rrddmma_mlnx_ofed4)]
            Some(_) => {
                return Err(Error::unsupported(
                    super::mlx5::STRIDING_OP,
                    &crate::prim::unsupported::RAW_STRIDING_OFED4,
                    ctx.name(),
                    "rrddmma_mlnx_ofed4 (no mlx5dv_create_wq)",
                ))
            }
        };
        let raw =
            NonNull::new(raw).ok_or_else(|| Error::last(op).lacking(&crate::prim::unsupported::RAW_WQ, ctx.name()))?;
        let data = WqData { striding: self.striding, _pd: self.pd.clone(), _cq: self.cq.clone() };
        // SAFETY: made just now, owned by nothing else.
        Ok(Wq(Arc::new(unsafe { Owned::new(raw, data) })))
    }
}

pub(crate) struct IndTableData {
    _wqs: Vec<Wq>,
}

// SAFETY: `ibv_destroy_rwq_ind_table` releases what the create verb made;
// the WQs it names drop after it (a field).
unsafe impl Destroy for IndTableData {
    type Raw = ffi::ibv_rwq_ind_table;
    const VERB: &'static str = "ibv_destroy_rwq_ind_table";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_rwq_ind_table>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_rwq_ind_table(raw.as_ptr()) }
    }
}

/// A receive WQ indirection table: the WQs an RSS QP spreads packets over
/// by their hash. Holds its WQs; destroyed when the last clone and the last
/// QP using it are gone.
///
/// # References
/// `ibv_create_rwq_ind_table(3)`
#[derive(Clone)]
pub struct RwqIndTable(Arc<Owned<IndTableData>>);

impl fmt::Debug for RwqIndTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwqIndTable").field("wqs", &self.0._wqs.len()).finish()
    }
}

impl RwqIndTable {
    /// A table over `wqs` (a power of two of them, at most the device's
    /// `rss_caps.max_rwq_indirection_table_size`).
    ///
    /// [`Error::Unsupported`] before any system call (and before `wqs` is
    /// looked at) where the device has no RSS
    /// (`rss_caps.max_rwq_indirection_tables` 0: rxe, siw);
    /// [`Error::CapExceeded`] for a table larger than the device's.
    ///
    /// # Panics
    /// If `wqs` is empty or not a power of two long (a programming error).
    ///
    /// # References
    /// `ibv_create_rwq_ind_table(3)`
    #[doc(alias = "ibv_create_rwq_ind_table")]
    pub fn create(ctx: &super::device::Context, wqs: &[Wq]) -> Result<RwqIndTable> {
        const OP: &str = "ibv_create_rwq_ind_table";
        let rss = ctx.query_device_ex()?.rss_caps;
        if rss.max_rwq_indirection_tables == 0 {
            return Err(Error::unsupported(OP, &crate::prim::unsupported::RAW_RSS_TABLE, ctx.name(), 0));
        }
        assert!(
            wqs.len().is_power_of_two(),
            "RwqIndTable::create: {} WQs; an indirection table holds a power of two of them (at least one)",
            wqs.len()
        );
        if wqs.len() as u64 > u64::from(rss.max_rwq_indirection_table_size) {
            return Err(Error::CapExceeded {
                what: "rss_caps.max_rwq_indirection_table_size",
                asked: wqs.len() as u64,
                limit: u64::from(rss.max_rwq_indirection_table_size),
            });
        }
        let mut table: Vec<*mut ffi::ibv_wq> = wqs.iter().map(Wq::as_ptr).collect();
        let mut attr = ffi::ibv_rwq_ind_table_init_attr {
            log_ind_tbl_size: wqs.len().trailing_zeros(),
            ind_tbl: table.as_mut_ptr(),
            comp_mask: 0,
        };
        // SAFETY: live context and WQs; `attr` and the table valid for the call.
        let raw = unsafe { ffi::ibv_create_rwq_ind_table(ctx.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last(OP).lacking(&crate::prim::unsupported::RAW_RSS_TABLE, ctx.name()))?;
        // SAFETY: made just now, owned by nothing else.
        Ok(RwqIndTable(Arc::new(unsafe { Owned::new(raw, IndTableData { _wqs: wqs.to_vec() }) })))
    }

    /// The raw table.
    pub fn as_ptr(&self) -> *mut ffi::ibv_rwq_ind_table {
        self.0.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::post_wq_recv;
    use crate::bindings as ffi;
    use crate::prim::mlx5::{StridingParams, StridingRqCaps};
    use crate::prim::{Error, RecvWr, Sge};

    static PROVIDER_POSTS: AtomicU32 = AtomicU32::new(0);

    /// A provider's `post_wq_recv` that takes every list, counted.
    ///
    /// # Safety
    /// None beyond the entry's signature: it reads none of its arguments.
    unsafe extern "C" fn counting_post(
        _: *mut ffi::ibv_wq,
        _: *mut ffi::ibv_recv_wr,
        _: *mut *mut ffi::ibv_recv_wr,
    ) -> std::ffi::c_int {
        PROVIDER_POSTS.fetch_add(1, Ordering::SeqCst);
        0
    }

    /// B-4: a striding WQ is posted through its ring only: the posting of
    /// `Wq::post_recv` panics naming the ring before the provider's
    /// `ibv_post_wq_recv` (which writes the data segment where a striding
    /// WQE has its next segment) is reached; an ordinary WQ posts as before.
    #[test]
    fn b4_post_recv_refuses_a_striding_wq() {
        let mut raw = ffi::ibv_wq { wq_num: 0x5a, post_recv: Some(counting_post), ..Default::default() };
        let sge = [Sge::from_raw(0x1000, 64, 7)];
        let before = PROVIDER_POSTS.load(Ordering::SeqCst);
        // SAFETY: a host WQ whose provider entry touches no memory.
        unsafe { post_wq_recv(&mut raw, None, &mut [RecvWr::new(&sge, 1)]) }.unwrap();
        assert_eq!(PROVIDER_POSTS.load(Ordering::SeqCst), before + 1);
        let p = StridingParams { log_stride_bytes: 6, log_num_strides: 4, two_byte_shift: false };
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: as above.
            drop(unsafe { post_wq_recv(&mut raw, Some(p), &mut [RecvWr::new(&sge, 2)]) })
        }))
        .expect_err("a striding WQ must not reach ibv_post_wq_recv");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("WQ 0x5a, a striding WQ") && msg.contains("MprqRing::post"), "{msg}");
        assert_eq!(PROVIDER_POSTS.load(Ordering::SeqCst), before + 1, "the provider's post was called");
    }

    /// One check decides a striding WQ: no striding WQs, or none for raw
    /// packet QPs, is `Unsupported`; a shape outside the caps `CapExceeded`.
    #[test]
    fn striding_caps_check_refuses_without_raw_packet_support() {
        let p = StridingParams { log_stride_bytes: 6, log_num_strides: 4, two_byte_shift: false };
        let caps = StridingRqCaps {
            min_log_stride_bytes: 6,
            max_log_stride_bytes: 13,
            min_log_num_strides: 3,
            max_log_num_strides: 16,
            supported_qpts: 1 << crate::bindings::ibv_qp_type::IBV_QPT_RAW_PACKET.0,
        };
        assert!(caps.check(&p).is_ok());
        for bad in [StridingRqCaps { supported_qpts: 0, ..caps }, StridingRqCaps::default()] {
            let e = bad.check(&p).unwrap_err();
            assert!(matches!(&e, Error::Unsupported { lack, .. } if lack.missing.name == "RAW_STRIDING"), "{e:?}");
        }
        let e = caps.check(&StridingParams { log_num_strides: 17, ..p }).unwrap_err();
        assert!(matches!(e, Error::CapExceeded { limit: 16, .. }), "{e:?}");
    }
}
