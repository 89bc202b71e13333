//! ECE through the CM: the options a CM id offers in its connect request or
//! reply, and the ones its peer offered (see [`crate::prim::Ece`]).
//!
//! librdmacm keeps both in the id: setting and reading them never reaches
//! the device. The kernel's CM carries them in the REQ and REP messages; a
//! QP the application created itself (as every [`CmId`] connects) takes
//! what both sides accepted with [`Qp::set_ece`](crate::prim::Qp::set_ece).

use super::CmId;
#[cfg(not(rrddmma_mlnx_ofed4))]
use crate::bindings::cm as cmffi;
use crate::prim::{Ece, Error, Result};

impl CmId {
    /// The ECE options this id offers in its connect request or reply (call
    /// before [`CmId::connect`] / [`CmId::accept`]).
    ///
    /// # Panics
    /// If `ece.vendor_id` is 0 or `ece.comp_mask` is not 0 (librdmacm
    /// refuses both: name a vendor, set no further fields).
    ///
    /// # References
    /// `rdma_set_local_ece(3)`
    #[doc(alias = "rdma_set_local_ece")]
    pub fn set_local_ece(&self, ece: &Ece) -> Result<()> {
        assert!(
            ece.vendor_id != 0 && ece.comp_mask == 0,
            "CmId::set_local_ece: {ece:?} names no vendor or sets comp_mask; give the vendor's OUI and comp_mask 0"
        );
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            Err(Error::unsupported(
                "rdma_set_local_ece",
                &crate::prim::unsupported::OFED4,
                &self.device_name().unwrap_or_else(|| "(no device yet)".into()),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let mut e = ece.to_raw();
            // SAFETY: live id; `e` is valid for the call (copied by librdmacm).
            let rc = unsafe { cmffi::rdma_set_local_ece(self.as_ptr(), &mut e) };
            if rc != 0 {
                return Err(Error::last("rdma_set_local_ece").lacking(
                    &crate::prim::unsupported::ECE,
                    &self.device_name().unwrap_or_else(|| "(no device yet)".into()),
                ));
            }
            Ok(())
        }
    }

    /// The ECE options the peer offered, as its connect request or reply
    /// carried them (all zero when it offered none).
    ///
    /// # References
    /// `rdma_get_remote_ece(3)`
    #[doc(alias = "rdma_get_remote_ece")]
    pub fn remote_ece(&self) -> Result<Ece> {
        #[cfg(rrddmma_mlnx_ofed4)]
        {
            Err(Error::unsupported(
                "rdma_get_remote_ece",
                &crate::prim::unsupported::OFED4,
                &self.device_name().unwrap_or_else(|| "(no device yet)".into()),
                "rrddmma_mlnx_ofed4",
            ))
        }
        #[cfg(not(rrddmma_mlnx_ofed4))]
        {
            let mut e = crate::bindings::ibv_ece::default();
            // SAFETY: live id; `e` is valid for writes.
            let rc = unsafe { cmffi::rdma_get_remote_ece(self.as_ptr(), &mut e) };
            if rc != 0 {
                return Err(Error::last("rdma_get_remote_ece").lacking(
                    &crate::prim::unsupported::ECE,
                    &self.device_name().unwrap_or_else(|| "(no device yet)".into()),
                ));
            }
            Ok(Ece::from_raw(&e))
        }
    }
}
