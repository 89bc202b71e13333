//! Enhanced Connection Establishment (ECE): the vendor options a QP offers
//! and the ones its peer accepted, exchanged during connection set-up (by
//! the CM: [`CmId::set_local_ece`](super::cm::CmId::set_local_ece)).
//! Present on ConnectX with a recent firmware; reported as
//! [`Error::Unsupported`] elsewhere (rxe among them).

use super::error::{Error, Result};
use super::qp::Qp;
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::bindings as ffi;

/// ECE options (`struct ibv_ece`): the vendor and a vendor-defined bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ece {
    /// The IEEE OUI of the vendor the options belong to (`vendor_id`).
    pub vendor_id: u32,
    /// The options, vendor-defined bits (`options`).
    pub options: u32,
    /// Which further fields are valid (`comp_mask`; none are defined: 0).
    pub comp_mask: u32,
}

#[cfg(not(rrddmma_mlnx_ofed4))]
impl Ece {
    pub(crate) fn to_raw(self) -> ffi::ibv_ece {
        ffi::ibv_ece { vendor_id: self.vendor_id, options: self.options, comp_mask: self.comp_mask }
    }

    pub(crate) fn from_raw(e: &ffi::ibv_ece) -> Ece {
        Ece { vendor_id: e.vendor_id, options: e.options, comp_mask: e.comp_mask }
    }
}

impl Qp {
    /// The ECE options of this QP: before the connection, what it offers;
    /// after, what both sides accepted. [`Error::Unsupported`] (feature
    /// `ECE`) where the device has none.
    ///
    /// # References
    /// `ibv_query_ece(3)`
    #[doc(alias = "ibv_query_ece")]
    pub fn query_ece(&self) -> Result<Ece> {
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            Err(Error::unsupported(
                "ibv_query_ece",
                &crate::prim::unsupported::OFED4,
                self.pd().context().name(),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let mut e = ffi::ibv_ece::default();
            // SAFETY: live QP; `e` is valid for writes.
            let rc = unsafe { ffi::ibv_query_ece(self.as_ptr(), &mut e) };
            if rc != 0 {
                return Err(Error::code("ibv_query_ece", rc)
                    .lacking(&crate::prim::unsupported::ECE, self.pd().context().name()));
            }
            Ok(Ece::from_raw(&e))
        }
    }

    /// Sets the ECE options this QP offers (in `RESET` or `INIT`, before
    /// the connection). [`Error::Unsupported`] (feature `ECE`) where the
    /// device has none.
    ///
    /// # References
    /// `ibv_set_ece(3)`
    #[doc(alias = "ibv_set_ece")]
    pub fn set_ece(&self, ece: &Ece) -> Result<()> {
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            let _ = ece;
            Err(Error::unsupported(
                "ibv_set_ece",
                &crate::prim::unsupported::OFED4,
                self.pd().context().name(),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let mut e = ece.to_raw();
            // SAFETY: live QP; `e` is valid for the call.
            let rc = unsafe { ffi::ibv_set_ece(self.as_ptr(), &mut e) };
            if rc != 0 {
                return Err(
                    Error::code("ibv_set_ece", rc).lacking(&crate::prim::unsupported::ECE, self.pd().context().name())
                );
            }
            Ok(())
        }
    }
}
