//! Shared receive queues.

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use super::error::{Error, Result};
use super::handle::{Destroy, Owned};
use super::pd::Pd;
use super::wr::{link_in_place, RecvWr};
use crate::bindings as ffi;

pub(crate) struct SrqData {
    pd: Pd,
    /// What an XRC SRQ uses besides its PD (its domain and CQ), released
    /// after it.
    xrc: Option<(super::Xrcd, super::Cq)>,
    /// The CQ of a tag-matching SRQ's operations, released after it.
    tm_cq: Option<super::Cq>,
}

impl SrqData {
    pub(crate) fn new(pd: Pd, xrc: Option<(super::Xrcd, super::Cq)>, tm_cq: Option<super::Cq>) -> SrqData {
        SrqData { pd, xrc, tm_cq }
    }
}

// SAFETY: `ibv_destroy_srq` releases what `ibv_create_srq` made; posting to
// an SRQ is thread-safe in libibverbs providers (the provider locks it).
unsafe impl Destroy for SrqData {
    type Raw = ffi::ibv_srq;
    const VERB: &'static str = "ibv_destroy_srq";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_srq>) -> i32 {
        // SAFETY: the caller's contract; QPs using the SRQ hold an `Arc` to it.
        unsafe { ffi::ibv_destroy_srq(raw.as_ptr()) }
    }
}

/// A shared receive queue. Cloning shares it. Made by [`Srq::builder`].
///
/// # References
/// `ibv_create_srq(3)`, `ibv_modify_srq(3)`, `ibv_post_srq_recv(3)`
#[derive(Clone)]
pub struct Srq(Arc<Owned<SrqData>>);

impl fmt::Debug for Srq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srq").field("ptr", &self.0.raw()).finish()
    }
}

/// Creates an SRQ: [`Srq::builder`], setters, [`SrqBuilder::build`].
///
/// ```no_run
/// # fn f(pd: &rrddmma::prim::Pd) -> rrddmma::prim::Result<()> {
/// use rrddmma::prim::Srq;
/// let srq = Srq::builder(pd).max_wr(1024).max_sge(2).build()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SrqBuilder<'a> {
    pd: &'a Pd,
    max_wr: u32,
    max_sge: u32,
    limit: u32,
    pub(crate) tm: Option<(super::tm_config::TmConfig, &'a super::Cq)>,
}

impl SrqBuilder<'_> {
    setters! {
        /// Receives the SRQ holds (`ibv_srq_attr::max_wr`). Default 64.
        const max_wr: u32;
        /// Scatter/gather entries per receive (`ibv_srq_attr::max_sge`). Default 1.
        const max_sge: u32;
        /// Limit event threshold, armed after the creation (which ignores
        /// it) with [`Srq::arm_limit`]. Default 0: no event.
        const limit: u32;
    }

    /// Creates the SRQ (`ibv_create_srq`), then arms its limit if one is set.
    ///
    /// # References
    /// `ibv_create_srq(3)`, `ibv_modify_srq(3)`
    pub fn build(self) -> Result<Srq> {
        if let Some((cfg, cq)) = self.tm {
            let srq = create_tm_srq(self.pd, self.max_wr, self.max_sge, cfg, cq)?;
            if self.limit > 0 {
                srq.arm_limit(self.limit)?;
            }
            return Ok(srq);
        }
        let mut attr = ffi::ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: ffi::ibv_srq_attr { max_wr: self.max_wr, max_sge: self.max_sge, srq_limit: 0 },
        };
        // SAFETY: live PD; `attr` is valid for the call.
        let raw = unsafe { ffi::ibv_create_srq(self.pd.as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| Error::last("ibv_create_srq"))?;
        // SAFETY: made by `ibv_create_srq` just now, owned by nothing else.
        let srq = Srq(Arc::new(unsafe { Owned::new(raw, SrqData::new(self.pd.clone(), None, None)) }));
        if self.limit > 0 {
            srq.arm_limit(self.limit)?;
        }
        Ok(srq)
    }
}

impl Srq {
    /// Starts an SRQ on `pd`: 64 receives of one entry each, no limit
    /// event, unless the setters say otherwise.
    ///
    /// # References
    /// `ibv_create_srq(3)`
    pub fn builder(pd: &Pd) -> SrqBuilder<'_> {
        SrqBuilder { pd, max_wr: 64, max_sge: 1, limit: 0, tm: None }
    }

    /// An SRQ made by `ibv_create_srq_ex` (see `prim::xrc`).
    ///
    /// # Safety
    /// `raw` must be a live SRQ created on `pd` (with `xrc`'s domain and CQ),
    /// owned by the result.
    pub(crate) unsafe fn from_raw(raw: NonNull<ffi::ibv_srq>, pd: &Pd, xrc: Option<(super::Xrcd, super::Cq)>) -> Srq {
        // SAFETY: the caller's contract.
        Srq(Arc::new(unsafe { Owned::new(raw, SrqData::new(pd.clone(), xrc, None)) }))
    }

    /// An SRQ made from its owned data.
    pub(crate) fn from_data(data: Arc<Owned<SrqData>>) -> Srq {
        Srq(data)
    }

    /// Whether the SRQ is a tag-matching one ([`SrqBuilder::tag_matching`]).
    pub fn is_tm(&self) -> bool {
        self.0.tm_cq.is_some()
    }

    /// The XRC domain of an XRC SRQ ([`Srq::create_xrc`]); `None` for a basic SRQ.
    pub fn xrcd(&self) -> Option<&super::Xrcd> {
        self.0.xrc.as_ref().map(|(x, _)| x)
    }

    /// The PD the SRQ belongs to.
    pub fn pd(&self) -> &Pd {
        &self.0.pd
    }

    /// The raw SRQ.
    #[inline]
    pub fn as_ptr(&self) -> *mut ffi::ibv_srq {
        self.0.as_ptr()
    }

    /// Arms the limit event (`ibv_modify_srq` with `IBV_SRQ_LIMIT`): when
    /// fewer than `limit` receives remain posted, the device raises
    /// [`EventType::SRQ_LIMIT_REACHED`](super::EventType::SRQ_LIMIT_REACHED)
    /// for this SRQ ([`Context::async_event`](super::Context::async_event),
    /// element [`EventElement::Srq`](super::EventElement::Srq) of
    /// [`Srq::as_ptr`]) once, and the limit falls back to 0: arm it again
    /// after reposting. 0 disarms it.
    ///
    /// A limit above the SRQ's size is refused before the call with
    /// [`Error::CapExceeded`] (the size is read with [`Srq::query`]);
    /// a device without the limit event refuses it with the provider's code.
    ///
    /// # References
    /// `ibv_modify_srq(3)`
    #[doc(alias = "ibv_modify_srq")]
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        let size = self.query()?.max_wr;
        if limit > size {
            return Err(Error::CapExceeded {
                what: "srq_limit (the SRQ's max_wr)",
                asked: limit.into(),
                limit: size.into(),
            });
        }
        let mut a = ffi::ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: limit };
        // SAFETY: live SRQ; `a` is valid for the call.
        let rc = unsafe { ffi::ibv_modify_srq(self.as_ptr(), &mut a, ffi::ibv_srq_attr_mask::IBV_SRQ_LIMIT.0 as i32) };
        if rc != 0 {
            return Err(Error::code("ibv_modify_srq", rc));
        }
        Ok(())
    }

    /// The SRQ's attributes as the device holds them (`ibv_query_srq`): its
    /// size as granted (`max_wr`, `max_sge`) and the armed limit
    /// (`srq_limit`, 0 once the event fired).
    ///
    /// # References
    /// `ibv_query_srq(3)`
    #[doc(alias = "ibv_query_srq")]
    pub fn query(&self) -> Result<ffi::ibv_srq_attr> {
        let mut a = ffi::ibv_srq_attr { max_wr: 0, max_sge: 0, srq_limit: 0 };
        // SAFETY: live SRQ; `a` is valid for writes.
        let rc = unsafe { ffi::ibv_query_srq(self.as_ptr(), &mut a) };
        if rc != 0 {
            return Err(Error::code("ibv_query_srq", rc));
        }
        Ok(a)
    }

    /// Posts receives, linked in place and handed over with one call.
    ///
    /// # Safety
    /// Every entry must lie in memory registered on this SRQ's PD with local
    /// write access, alive and untouched until its completion.
    #[inline]
    pub unsafe fn post_recv(&self, wrs: &mut [RecvWr<'_>]) -> Result<()> {
        let Some(head) = link_in_place!(&mut *wrs) else { return Ok(()) };
        let mut bad = ptr::null_mut();
        // SAFETY: live SRQ; the list is linked above; memory is the caller's contract.
        let rc = unsafe { ffi::ibv_post_srq_recv(self.as_ptr(), head, &mut bad) };
        if rc != 0 {
            return Err(Error::post("ibv_post_srq_recv", rc, head, bad));
        }
        Ok(())
    }
}

impl<'a> SrqBuilder<'a> {
    /// Makes the SRQ a tag-matching one (`IBV_SRQT_TM`) with `cfg`'s list
    /// size and operation count; `cq`, built with
    /// [`CqBuilder::tag_matching`](super::CqBuilder::tag_matching), receives
    /// the completions of its tag operations and of its receives. The QPs
    /// and DCTs that take receives from the SRQ need such a receive CQ too.
    /// [`SrqBuilder::build`] then checks them
    /// against the device's `tm_caps` before the creation: a device without
    /// tag matching gives [`Error::Unsupported`] naming it, a count above
    /// the device's gives [`Error::CapExceeded`] naming the capability.
    ///
    /// # Panics
    /// If `cfg.max_num_tags` or `cfg.max_ops` is 0 (a tag-matching SRQ
    /// needs both; pass at least 1), or if `cq` was not built with
    /// [`CqBuilder::tag_matching`](super::CqBuilder::tag_matching) (its
    /// classic poller would misreport tag-matching completions). Programming
    /// errors, checked before anything is created.
    ///
    /// # References
    /// `ibv_create_srq_ex(3)`
    pub fn tag_matching(mut self, cfg: super::tm_config::TmConfig, cq: &'a super::Cq) -> Self {
        assert!(
            cfg.max_num_tags > 0 && cfg.max_ops > 0,
            "SrqBuilder::tag_matching: max_num_tags {} / max_ops {}: both must be at least 1",
            cfg.max_num_tags,
            cfg.max_ops
        );
        assert!(
            cq.is_tag_matching(),
            "SrqBuilder::tag_matching: the CQ {cq:?} is not built for tag matching: build it with \
             Cq::builder(ctx, n).tag_matching() (libmlx5 reads tag-matching completions through the extended \
             poller only)"
        );
        self.tm = Some((cfg, cq));
        self
    }
}

impl Srq {
    /// Panics unless `recv_cq`, the receive CQ of a QP or DCT made by
    /// `what` taking receives from `srq`, is built for tag matching when
    /// `srq` is a tag-matching SRQ: the receives of its messages complete
    /// with tag-matching CQEs, which libmlx5's classic poller misreads.
    pub(crate) fn check_tm_recv_cq(what: &str, srq: Option<&Srq>, recv_cq: &super::Cq) {
        if srq.is_some_and(Srq::is_tm) && !recv_cq.is_tag_matching() {
            panic!(
                "{what}: the receive CQ {recv_cq:?} is not built for tag matching but the SRQ is a tag-matching \
                 one: build the CQ with Cq::builder(ctx, n).tag_matching() (libmlx5's classic poller misreads \
                 tag-matching completions)"
            );
        }
    }
}

/// Creates a tag-matching SRQ (`ibv_create_srq_ex` with `IBV_SRQT_TM`) with
/// the capability check made first.
fn create_tm_srq(
    pd: &super::Pd,
    max_wr: u32,
    max_sge: u32,
    cfg: super::tm_config::TmConfig,
    cq: &super::Cq,
) -> Result<Srq> {
    let caps = pd.context().query_device_ex()?.tm_caps;
    super::tm_config::check_caps(pd.context().name(), &caps, &cfg)?;
    let mut attr = ffi::ibv_srq_init_attr_ex {
        srq_context: ptr::null_mut(),
        attr: ffi::ibv_srq_attr { max_wr, max_sge, srq_limit: 0 },
        comp_mask: (ffi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_TYPE
            | ffi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_PD
            | ffi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_CQ
            | ffi::ibv_srq_init_attr_mask::IBV_SRQ_INIT_ATTR_TM)
            .0,
        srq_type: ffi::ibv_srq_type::IBV_SRQT_TM,
        pd: pd.as_ptr(),
        xrcd: ptr::null_mut(),
        cq: cq.as_ptr(),
        tm_cap: ffi::ibv_tm_cap { max_num_tags: cfg.max_num_tags, max_ops: cfg.max_ops },
    };
    // SAFETY: live context, PD and CQ; `attr` is valid for the call.
    let raw = unsafe { ffi::ibv_create_srq_ex(pd.context().as_ptr(), &mut attr) };
    let raw = NonNull::new(raw).ok_or_else(|| {
        Error::last("ibv_create_srq_ex").lacking(&crate::prim::unsupported::TAG_MATCHING, pd.context().name())
    })?;
    // SAFETY: made by `ibv_create_srq_ex` just now, owned by nothing else.
    Ok(Srq::from_data(Arc::new(unsafe { Owned::new(raw, SrqData::new(pd.clone(), None, Some(cq.clone()))) })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prim::cq::tests::{host_context, host_cq_on};
    use crate::prim::{Qp, QpType};

    /// B-1′: the receives of a tag-matching SRQ complete with tag-matching
    /// CQEs, which libmlx5's classic poller misreads; a QP or a DCT taking
    /// receives from one is refused, before anything is created, unless
    /// its receive CQ is built for tag matching (rxe has no tag matching:
    /// the SRQ here is host-made, never handed to libibverbs).
    #[test]
    fn b1_prime_qps_and_dcts_on_a_tm_srq_need_a_tag_matching_recv_cq() {
        let ctx = host_context();
        let pd = Pd::for_host_tests(ctx);
        let (plain, tm_cq) = (host_cq_on(ctx, None, false), host_cq_on(ctx, None, true));
        let raw: &'static mut ffi::ibv_srq = Box::leak(Box::default());
        // SAFETY: the host SRQ is never destroyed (the `Srq` is leaked).
        let data = unsafe { Owned::new(NonNull::from(raw), SrqData::new(pd.clone(), None, Some(tm_cq.clone()))) };
        let srq: &'static Srq = Box::leak(Box::new(Srq::from_data(Arc::new(data))));
        assert!(srq.is_tm());
        let message = |f: &dyn Fn()| {
            let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("refused");
            err.downcast_ref::<String>().cloned().unwrap_or_default()
        };
        let msg = message(&|| drop(Qp::builder(pd, QpType::RC, tm_cq, plain).srq(srq).build()));
        assert!(msg.starts_with("QpBuilder::build: the receive CQ"), "{msg}");
        assert!(msg.contains("not built for tag matching") && msg.contains(".tag_matching()"), "{msg}");
        let dct = || crate::mlx5dv::dc::Dct::create(pd, plain, srq, 1, &crate::mlx5dv::dc::DctOpts::default());
        let msg = message(&|| drop(dct()));
        assert!(msg.starts_with("Dct::create: the receive CQ"), "{msg}");
        // What passes the check: a tag-matching receive CQ, or an SRQ that
        // is not a tag-matching one.
        Srq::check_tm_recv_cq("QpBuilder::build", Some(srq), tm_cq);
        Srq::check_tm_recv_cq("QpBuilder::build", None, plain);
    }
}
