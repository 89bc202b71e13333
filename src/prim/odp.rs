//! On-demand paging hints: `ibv_advise_mr` asks the device to fault in the
//! pages behind parts of ODP regions before requests touch them.

use super::error::{Error, Result};
use super::mr::Mr;
use super::pd::Pd;
use super::wr::Sge;
use crate::bindings as ffi;
use crate::prim::AccessFlags;

/// What [`Pd::advise_mr`] asks for (`enum ib_uverbs_advise_mr_advice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Advice {
    /// Fault the pages in for reading (`IBV_ADVISE_MR_ADVICE_PREFETCH`).
    Prefetch,
    /// Fault the pages in writable (`IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE`).
    PrefetchWrite,
    /// Map only the pages already present, faulting none in
    /// (`IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`).
    PrefetchNoFault,
}

impl Advice {
    fn to_raw(self) -> ffi::ib_uverbs_advise_mr_advice {
        use ffi::ib_uverbs_advise_mr_advice as A;
        match self {
            Advice::Prefetch => A::IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH,
            Advice::PrefetchWrite => A::IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
            Advice::PrefetchNoFault => A::IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
        }
    }
}

/// Checks the arguments of [`Pd::advise_mr`].
///
/// # Panics
/// If `sges` is empty or longer than `u32::MAX`, if `mr` is not of `pd`, was
/// registered without [`AccessFlags::ON_DEMAND`], or an entry names another
/// region's key.
fn check_advice(pd: &Pd, mr: &Mr, sges: &[Sge]) -> u32 {
    assert!(!sges.is_empty(), "Pd::advise_mr needs at least one range (Mr::sge)");
    let n = u32::try_from(sges.len()).expect("Pd::advise_mr: at most u32::MAX ranges");
    assert!(
        mr.access().contains(AccessFlags::ON_DEMAND),
        "Pd::advise_mr: the region at {:#x} (lkey {:#x}) was registered with access {:?}, without \
         AccessFlags::ON_DEMAND; advise only regions registered with it (some kernels crash on a region without ODP)",
        mr.addr(),
        mr.lkey(),
        mr.access()
    );
    assert!(
        mr.pd().as_ptr() == pd.as_ptr(),
        "Pd::advise_mr: the region at {:#x} (lkey {:#x}) belongs to another PD; call advise_mr on mr.pd()",
        mr.addr(),
        mr.lkey()
    );
    if let Some((i, s)) = sges.iter().enumerate().find(|(_, s)| s.0.lkey != mr.lkey()) {
        panic!(
            "Pd::advise_mr: range {i} has lkey {:#x}, not the region's {:#x}; build the ranges with mr.sge(..)",
            s.0.lkey,
            mr.lkey()
        );
    }
    n
}

impl Pd {
    /// Advises the device about the ranges `sges` of the ODP region `mr` of
    /// this PD (`ibv_advise_mr`). With `flush` the call returns once the
    /// pages are mapped (`IBV_ADVISE_MR_FLAG_FLUSH`); without it the device
    /// may work in the background. Each entry names a range of `mr`
    /// ([`Mr::sge`]); the kernel checks the ranges.
    ///
    /// A provider or kernel without it (rxe's provider in rdma-core 44; a
    /// device without ODP) gives [`Error::Unsupported`]; a range the kernel
    /// refuses is [`Error::Verbs`] with its errno.
    ///
    /// # Panics
    /// If `mr` was registered without [`AccessFlags::ON_DEMAND`] (SoftRoCE
    /// under Linux 7.3.4 crashes the kernel on such a region instead of
    /// refusing it, so it is refused before the call), is of another PD, an
    /// entry of `sges` carries another region's key, or `sges` is empty or
    /// longer than `u32::MAX` (programming errors).
    ///
    /// # References
    /// `ibv_advise_mr(3)`
    #[doc(alias = "ibv_advise_mr")]
    pub fn advise_mr(&self, advice: Advice, flush: bool, mr: &Mr, sges: &[Sge]) -> Result<()> {
        let n = check_advice(self, mr, sges);
        let flags = if flush { ffi::ib_uverbs_advise_mr_flag::IB_UVERBS_ADVISE_MR_FLAG_FLUSH.0 } else { 0 };
        // SAFETY: live PD; `Sge` has the layout of `ibv_sge`; the list is
        // read during the call (the verb does not write it); every entry
        // names `mr`, an ODP region of this PD, which `mr` keeps registered.
        let rc =
            unsafe { ffi::ibv_advise_mr(self.as_ptr(), advice.to_raw(), flags, sges.as_ptr().cast_mut().cast(), n) };
        if rc != 0 {
            return Err(
                Error::code("ibv_advise_mr", rc).lacking(&crate::prim::unsupported::ODP_ADVISE, self.context().name())
            );
        }
        Ok(())
    }
}
