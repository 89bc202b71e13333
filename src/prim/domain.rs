//! Parent domains: present on ConnectX (mlx5), reported as
//! [`Error::Unsupported`] by providers without them (rxe among them).
//!
//! A parent domain extends a PD; it is "completely interchangeable with the
//! `struct ibv_pd` used to create it" (`ibv_alloc_parent_domain(3)`), so
//! [`ParentDomain`] derefs to a [`Pd`]: QPs, SRQs and memory regions take
//! it where they take a PD, and a CQ takes it through
//! [`CqBuilder::parent_domain`](super::CqBuilder::parent_domain).
//!
//! A [`ParentDomain`] has no thread domain and keeps every provider lock.
//! With a thread domain ([`Td`](super::Td)) the provider may drop its locks,
//! so that one is a [`TdParentDomain`](super::TdParentDomain), whose
//! objects stay on one thread (see `prim::local`).

use std::ops::Deref;
use std::ptr::{self, NonNull};

use super::error::{Error, Result};
use super::pd::Pd;
use super::td::Td;
use crate::bindings as ffi;

/// A parent domain: a [`Pd`] extended, without a thread domain. Cloning
/// shares it; it keeps its PD and TD alive, and every object created on it
/// keeps it alive. Deallocated (`ibv_dealloc_pd`) when the last is gone.
///
/// Derefs to [`Pd`]: pass `&parent_domain` where a `&Pd` goes (e.g.
/// [`Qp::builder`](super::Qp::builder)).
///
/// # References
/// `ibv_alloc_parent_domain(3)`
#[derive(Clone, Debug)]
pub struct ParentDomain(Pd);

impl ParentDomain {
    /// A parent domain over `pd`, without a thread domain: objects created
    /// on it keep the provider's locks. [`Error::Unsupported`] (feature
    /// `parent-domain allocation`) when the provider has none.
    ///
    /// # References
    /// `ibv_alloc_parent_domain(3)`
    #[doc(alias = "ibv_alloc_parent_domain")]
    pub fn alloc(pd: &Pd) -> Result<ParentDomain> {
        Self::alloc_on(pd, None)
    }

    /// A parent domain over `pd` (with `td`: only for [`super::TdParentDomain`]).
    pub(crate) fn alloc_on(pd: &Pd, td: Option<&Td>) -> Result<ParentDomain> {
        assert!(pd.parent().is_none(), "ParentDomain: the PD is itself a parent domain; pass the plain PD it extends");
        let mut attr = ffi::ibv_parent_domain_init_attr {
            pd: pd.as_ptr(),
            td: td.map_or(ptr::null_mut(), Td::as_ptr),
            ..Default::default()
        };
        // SAFETY: live context; `attr` is valid for the call and names a live
        // PD (and TD) of that context (checked above).
        let raw = unsafe { ffi::ibv_alloc_parent_domain(pd.context().as_ptr(), &mut attr) };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::last("ibv_alloc_parent_domain")
                .lacking(&crate::prim::unsupported::PARENT_DOMAIN, pd.context().name())
        })?;
        // SAFETY: just allocated over `pd` and `td`, owned by the result.
        Ok(ParentDomain(unsafe { Pd::from_parent_domain(raw, pd, td) }))
    }

    /// The parent domain as a PD (what [`Deref`] gives).
    pub fn as_pd(&self) -> &Pd {
        &self.0
    }

    /// The PD it extends.
    pub fn protection_domain(&self) -> &Pd {
        self.0.parent().expect("a ParentDomain always has the PD it extends")
    }
}

impl Deref for ParentDomain {
    type Target = Pd;

    fn deref(&self) -> &Pd {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_names_the_feature_and_keeps_other_errors() {
        let td = &crate::prim::unsupported::THREAD_DOMAIN;
        let e = Error::from_errno("ibv_alloc_td", libc::EOPNOTSUPP).lacking(td, "rxe0");
        assert!(
            e.to_string().starts_with(
                "ibv_alloc_td: thread-domain allocation is not supported by rxe0 \
                 (the provider's ibv_alloc_td = EOPNOTSUPP); use an ordinary Pd"
            ),
            "{e}"
        );
        let e = Error::from_errno("ibv_alloc_td", libc::ENOMEM).lacking(td, "rxe0");
        assert!(matches!(e, Error::Verbs { op: "ibv_alloc_td", errno: libc::ENOMEM }), "{e:?}");
    }
}
