//! On-demand paging hints: `ibv_advise_mr` asks the device to fault in the
//! pages behind parts of ODP regions before requests touch them.

use super::error::{Error, Result};
use super::pd::Pd;
use super::wr::Sge;
use crate::bindings as ffi;

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

impl Pd {
    /// Advises the device about the ranges `sges` of ODP regions of this PD
    /// (`ibv_advise_mr`). With `flush` the call returns once the pages are
    /// mapped (`IBV_ADVISE_MR_FLAG_FLUSH`); without it the device may work
    /// in the background. Each entry names a range by a region's local key
    /// ([`Mr::sge`](super::Mr::sge)); the kernel checks the keys and ranges.
    ///
    /// A provider or kernel without it (rxe's provider in rdma-core 44; a
    /// device without ODP) gives [`Error::Unsupported`]; a key the kernel
    /// does not know is [`Error::Verbs`] with its errno. Name only regions
    /// registered with [`AccessFlags::ON_DEMAND`](super::AccessFlags::ON_DEMAND):
    /// SoftRoCE under Linux 7.3.4 crashes the kernel on a region without
    /// ODP instead of refusing it.
    ///
    /// # Panics
    /// If `sges` is empty, or longer than `u32::MAX` (a programming error).
    ///
    /// # References
    /// `ibv_advise_mr(3)`
    #[doc(alias = "ibv_advise_mr")]
    pub fn advise_mr(&self, advice: Advice, flush: bool, sges: &[Sge]) -> Result<()> {
        assert!(!sges.is_empty(), "Pd::advise_mr needs at least one range (Mr::sge)");
        let n = u32::try_from(sges.len()).expect("Pd::advise_mr: at most u32::MAX ranges");
        let flags = if flush { ffi::ib_uverbs_advise_mr_flag::IB_UVERBS_ADVISE_MR_FLAG_FLUSH.0 } else { 0 };
        // SAFETY: live PD; `Sge` has the layout of `ibv_sge`; the list is
        // read during the call (the verb does not write it).
        let rc =
            unsafe { ffi::ibv_advise_mr(self.as_ptr(), advice.to_raw(), flags, sges.as_ptr().cast_mut().cast(), n) };
        if rc != 0 {
            return Err(match Error::code("ibv_advise_mr", rc) {
                Error::Unsupported { op, .. } => Error::Unsupported { op, feature: "ODP prefetch (advise_mr)" },
                e => e,
            });
        }
        Ok(())
    }
}
