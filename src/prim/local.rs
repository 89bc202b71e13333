//! Objects on a thread domain: a parent domain with a [`Td`] and the QPs
//! and CQs made on it, all bound to the thread that made them.
//!
//! With a thread domain the provider may drop its locks and give the
//! objects a doorbell of their own (mlx5 does both), so every object under
//! one thread domain must be used by one thread at a time, all of them
//! together. Rust checks this here: [`Td`], [`TdParentDomain`],
//! [`LocalQp`] and [`LocalCq`] are neither `Send` nor `Sync`, so they stay
//! on the thread that allocated the thread domain, and none of them gives a
//! `&Pd`, `&Qp` or `&Cq` (which are `Send + Sync`) without `unsafe`.

use std::fmt;
use std::marker::PhantomData;

use super::cq::{Cq, Wc};
use super::domain::ParentDomain;
use super::error::Result;
use super::pd::Pd;
use super::qp::{ConnectOpts, Endpoint, Qp, QpAttr, QpCaps};
use super::td::Td;
use super::values::{QpState, QpType};
use super::wr::{RecvWr, SendWr};
use crate::bindings as ffi;

/// Makes a type neither `Send` nor `Sync`.
type ThreadBound = PhantomData<*const ()>;

/// A parent domain with a thread domain ([`Td`]): QPs and CQs made on it
/// ([`qp`](Self::qp), [`cq`](Self::cq)) may run without the provider's
/// locks, so they and it stay on this thread (neither `Send` nor `Sync`).
/// Deallocated when it and every object made on it are gone.
///
/// Memory for these QPs is registered on the PD it extends
/// ([`protection_domain`](Self::protection_domain)), an ordinary [`Pd`].
///
///
/// What the compiler refuses:
///
/// ```compile_fail
/// # use rrddmma::prim::TdParentDomain;
/// fn send<T: Send>(_: T) {}
/// fn shared<T: Sync>(_: &T) {}
/// # fn f(d: TdParentDomain) {
/// shared(&d); // a parent domain with a thread domain is not `Sync` ...
/// # }
/// ```
/// ```compile_fail
/// # use rrddmma::prim::LocalQp;
/// fn send<T: Send>(_: T) {}
/// # fn f(q: LocalQp) {
/// send(q); // ... nor are its QPs `Send` ...
/// # }
/// ```
/// ```compile_fail
/// # use rrddmma::prim::LocalCq;
/// fn shared<T: Sync>(_: &T) {}
/// # fn f(c: LocalCq) {
/// shared(&c); // ... or its CQs `Sync`,
/// # }
/// ```
/// ```compile_fail
/// # use rrddmma::prim::{Cq, Qp, QpType, TdParentDomain};
/// # fn f(d: &TdParentDomain, cq: &Cq) {
/// let qp = Qp::builder(d, QpType::RC, cq, cq); // and it is no `&Pd`.
/// # }
/// ```
/// ```compile_fail
/// # use rrddmma::prim::Td;
/// fn send<T: Send>(_: T) {}
/// # fn f(td: Td) {
/// send(td); // A thread domain stays on its thread too.
/// # }
/// ```
///
/// # References
/// `ibv_alloc_parent_domain(3)`, `ibv_alloc_td(3)`
pub struct TdParentDomain {
    dom: ParentDomain,
    td: Td,
    _thread: ThreadBound,
}

impl fmt::Debug for TdParentDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TdParentDomain").field("pd", self.dom.protection_domain()).field("td", &self.td).finish()
    }
}

impl TdParentDomain {
    /// A parent domain over `pd` with the thread domain `td`.
    /// [`Error::Unsupported`](super::Error::Unsupported) (feature
    /// `parent-domain allocation`) when the provider has none.
    ///
    /// # Panics
    /// If `td` belongs to another device context than `pd` (a programming
    /// error: open the device once and allocate both from that context),
    /// or if `pd` is itself a parent domain.
    #[doc(alias = "ibv_alloc_parent_domain")]
    pub fn alloc(pd: &Pd, td: &Td) -> Result<TdParentDomain> {
        assert!(
            td.context().as_ptr() == pd.context().as_ptr(),
            "TdParentDomain::alloc: the thread domain belongs to another device context than the PD \
             (open the device once and allocate both from that Context)"
        );
        let dom = ParentDomain::alloc_on(pd, Some(td))?;
        Ok(TdParentDomain { dom, td: td.clone(), _thread: PhantomData })
    }

    /// The PD it extends: register memory for its QPs here.
    pub fn protection_domain(&self) -> &Pd {
        self.dom.protection_domain()
    }

    /// Its thread domain.
    pub fn td(&self) -> &Td {
        &self.td
    }

    /// The raw parent domain.
    pub fn as_ptr(&self) -> *mut ffi::ibv_pd {
        self.dom.as_ptr()
    }

    /// A CQ of `cqe` entries on this domain (`ibv_create_cq_ex` with
    /// `IBV_CQ_INIT_ATTR_MASK_PD`), polled the classic way.
    /// [`Error::Unsupported`](super::Error::Unsupported) as
    /// [`CqBuilder::parent_domain`](super::CqBuilder::parent_domain) says.
    pub fn cq(&self, cqe: u32) -> Result<LocalCq> {
        let cq = Cq::builder(self.dom.context(), cqe).parent_domain(&self.dom).build()?;
        Ok(LocalCq { cq, _thread: PhantomData })
    }

    /// A QP of `qp_type` with `caps` on this domain, completing into CQs of
    /// this thread.
    pub fn qp(&self, qp_type: QpType, send_cq: &LocalCq, recv_cq: &LocalCq, caps: QpCaps) -> Result<LocalQp> {
        let qp = Qp::builder(&self.dom, qp_type, &send_cq.cq, &recv_cq.cq).caps(caps).build()?;
        Ok(LocalQp { qp, _thread: PhantomData })
    }

    /// The parent domain as the `Send + Sync` type other builders take.
    ///
    /// # Safety
    /// Every object created with it (QPs, CQs, SRQs), every clone of it and
    /// of what those objects return (their `Pd`, `Cq`) is used by one thread
    /// at a time together with every other object under this thread domain:
    /// no two calls into any of them run concurrently.
    pub unsafe fn as_parent_domain(&self) -> &ParentDomain {
        &self.dom
    }
}

/// A QP on a [`TdParentDomain`]: it stays on the thread that made it.
pub struct LocalQp {
    qp: Qp,
    _thread: ThreadBound,
}

impl fmt::Debug for LocalQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LocalQp").field(&self.qp).finish()
    }
}

impl LocalQp {
    /// See [`Qp::qpn`].
    pub fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    /// See [`Qp::endpoint`].
    pub fn endpoint(&self, port: u8, gid_index: u8, psn: u32) -> Result<Endpoint> {
        self.qp.endpoint(port, gid_index, psn)
    }

    /// See [`Qp::connect`].
    pub fn connect(&self, remote: &Endpoint, local_psn: u32, o: &ConnectOpts) -> Result<()> {
        self.qp.connect(remote, local_psn, o)
    }

    /// See [`Qp::modify`].
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        self.qp.modify(attr)
    }

    /// See [`Qp::query_state`].
    pub fn query_state(&self) -> Result<QpState> {
        self.qp.query_state()
    }

    /// See [`Qp::post_send`].
    ///
    /// # Safety
    /// As [`Qp::post_send`].
    #[inline]
    pub unsafe fn post_send(&self, wrs: &mut [SendWr<'_>]) -> Result<()> {
        // SAFETY: the caller's contract, the same.
        unsafe { self.qp.post_send(wrs) }
    }

    /// See [`Qp::post_recv`].
    ///
    /// # Safety
    /// As [`Qp::post_recv`].
    #[inline]
    pub unsafe fn post_recv(&self, wrs: &mut [RecvWr<'_>]) -> Result<()> {
        // SAFETY: the caller's contract, the same.
        unsafe { self.qp.post_recv(wrs) }
    }

    /// The QP as the `Send + Sync` type, for calls `LocalQp` does not offer.
    ///
    /// # Safety
    /// As [`TdParentDomain::as_parent_domain`]: the `&Qp` (and what it
    /// gives, such as its `Pd`) is used on this thread only, or by one
    /// thread at a time together with every object under the thread domain.
    pub unsafe fn as_qp(&self) -> &Qp {
        &self.qp
    }
}

/// A CQ on a [`TdParentDomain`]: it stays on the thread that made it.
pub struct LocalCq {
    cq: Cq,
    _thread: ThreadBound,
}

impl fmt::Debug for LocalCq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LocalCq").field(&self.cq).finish()
    }
}

impl LocalCq {
    /// See [`Cq::poll`].
    #[inline]
    pub fn poll(&self, wc: &mut [Wc]) -> Result<usize> {
        self.cq.poll(wc)
    }

    /// See [`Cq::poll_one`].
    #[inline]
    pub fn poll_one(&self) -> Result<Option<Wc>> {
        self.cq.poll_one()
    }

    /// The CQ as the `Send + Sync` type, for calls `LocalCq` does not offer.
    ///
    /// # Safety
    /// As [`LocalQp::as_qp`].
    pub unsafe fn as_cq(&self) -> &Cq {
        &self.cq
    }
}
