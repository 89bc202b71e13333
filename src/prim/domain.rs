//! Parent domains: present on ConnectX (mlx5), reported as
//! [`Error::Unsupported`] by providers without them (rxe among them). The
//! thread domain a parent domain may take is [`Td`] (its own module: a
//! parent domain's [`Pd`] holds it, and `pd` does not import this module).
//!
//! A parent domain extends a PD; it is "completely interchangeable with the
//! `struct ibv_pd` used to create it" (`ibv_alloc_parent_domain(3)`), so
//! [`ParentDomain`] derefs to a [`Pd`]: QPs, SRQs and memory regions take
//! it where they take a PD, and a CQ takes it through
//! [`CqBuilder::parent_domain`](super::CqBuilder::parent_domain).
//!
//! With a thread domain, the provider may drop its locks and give the
//! objects a doorbell of their own (mlx5 does both). Rust cannot check that
//! those objects are then used by one thread at a time, so
//! [`ParentDomain::with_td`] is `unsafe` and states that contract; a parent
//! domain without a thread domain keeps every lock and is safe.

use std::ops::Deref;
use std::ptr::{self, NonNull};

use super::error::{Error, Result};
use super::pd::Pd;
use super::td::Td;
use crate::bindings as ffi;

/// A parent domain: a [`Pd`] extended with an optional [`Td`]. Cloning
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

    /// A parent domain over `pd` with the thread domain `td`.
    ///
    /// # Safety
    /// The provider may then serialise nothing: every object created on a
    /// parent domain using `td` (QPs, CQs, SRQs, on this parent domain or any
    /// other with the same `td`) must be used by one thread at a time, taken
    /// together: no two calls into any of them (posting, polling, modifying,
    /// arming) may run concurrently. The types stay `Send` and `Sync`; the
    /// caller keeps this promise for them.
    ///
    /// # Panics
    /// If `td` belongs to another device context than `pd` (a programming
    /// error: open the device once and allocate both from that context).
    pub unsafe fn with_td(pd: &Pd, td: &Td) -> Result<ParentDomain> {
        assert!(
            td.context().as_ptr() == pd.context().as_ptr(),
            "ParentDomain::with_td: the thread domain belongs to another device context than the PD \
             (open the device once and allocate both from that Context)"
        );
        Self::alloc_on(pd, Some(td))
    }

    fn alloc_on(pd: &Pd, td: Option<&Td>) -> Result<ParentDomain> {
        assert!(pd.parent().is_none(), "ParentDomain: the PD is itself a parent domain; pass the plain PD it extends");
        let mut attr = ffi::ibv_parent_domain_init_attr {
            pd: pd.as_ptr(),
            td: td.map_or(ptr::null_mut(), Td::as_ptr),
            ..Default::default()
        };
        // SAFETY: live context; `attr` is valid for the call and names a live
        // PD (and TD) of that context (checked above).
        let raw = unsafe { ffi::ibv_alloc_parent_domain(pd.context().as_ptr(), &mut attr) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::last("ibv_alloc_parent_domain").lacking("parent-domain allocation"))?;
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

    /// Its thread domain, if it has one.
    pub fn td(&self) -> Option<&Td> {
        self.0.thread_domain()
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
        let e = Error::from_errno("ibv_alloc_td", libc::EOPNOTSUPP).lacking("thread-domain allocation");
        assert_eq!(e.to_string(), "ibv_alloc_td: thread-domain allocation is not supported by this device");
        let e = Error::from_errno("ibv_alloc_td", libc::ENOMEM).lacking("thread-domain allocation");
        assert!(matches!(e, Error::Verbs { op: "ibv_alloc_td", errno: libc::ENOMEM }), "{e:?}");
    }
}
