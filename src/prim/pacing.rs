//! Packet pacing: a send rate limit per QP (`ibv_modify_qp_rate_limit`).
//! Present on ConnectX-5 and later; reported as [`Error::Unsupported`]
//! elsewhere (rxe among them).

use super::error::{Error, Result};
use super::qp::Qp;
use crate::bindings as ffi;

/// A QP's send rate limit (`struct ibv_qp_rate_limit_attr`). Build with
/// [`RateLimit::kbps`], then the setters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimit {
    rate_kbps: u32,
    max_burst_sz: u32,
    typical_pkt_sz: u16,
}

impl RateLimit {
    /// At most `rate_kbps` kilobits per second; 0 lifts the limit.
    pub const fn kbps(rate_kbps: u32) -> RateLimit {
        RateLimit { rate_kbps, max_burst_sz: 0, typical_pkt_sz: 0 }
    }

    /// The largest burst, in bytes, the device may send at line rate
    /// (`max_burst_sz`); 0: the device's default.
    pub const fn max_burst_bytes(mut self, bytes: u32) -> RateLimit {
        self.max_burst_sz = bytes;
        self
    }

    /// The usual packet size, in bytes, which the device may use to tune
    /// the pacing (`typical_pkt_sz`); 0: the device's default.
    pub const fn typical_packet_bytes(mut self, bytes: u16) -> RateLimit {
        self.typical_pkt_sz = bytes;
        self
    }

    /// The rate in kilobits per second.
    pub const fn rate_kbps(&self) -> u32 {
        self.rate_kbps
    }
}

impl Qp {
    /// Limits this QP's send rate (the QP must be in `RTS`).
    ///
    /// [`Error::Unsupported`] (feature `packet pacing`) when the device
    /// reports no pacing (`packet_pacing_caps.qp_rate_limit_max` 0) or its
    /// provider has none; [`Error::BadArgument`] when the rate is outside
    /// the device's range (`qp_rate_limit_min..=qp_rate_limit_max`, from
    /// `ibv_query_device_ex`).
    ///
    /// # References
    /// `ibv_modify_qp_rate_limit(3)`
    #[doc(alias = "ibv_modify_qp_rate_limit")]
    pub fn set_rate_limit(&self, limit: &RateLimit) -> Result<()> {
        const OP: &str = "ibv_modify_qp_rate_limit";
        if cfg!(rrddmma_mlnx_ofed4) {
            return Err(Error::unsupported(
                OP,
                &crate::prim::unsupported::OFED4,
                self.pd().context().name(),
                "rrddmma_mlnx_ofed4",
            ));
        }
        let caps = self.pd().context().query_device_ex()?.packet_pacing_caps;
        if caps.qp_rate_limit_max == 0 {
            return Err(Error::unsupported(OP, &crate::prim::unsupported::PACING, self.pd().context().name(), 0));
        }
        let r = limit.rate_kbps;
        if r != 0 && !(caps.qp_rate_limit_min..=caps.qp_rate_limit_max).contains(&r) {
            return Err(Error::BadArgument {
                op: OP,
                what: "rate_limit (kbps)",
                why: "is outside the device's packet_pacing_caps range qp_rate_limit_min..=qp_rate_limit_max \
                      (ibv_query_device_ex)",
            });
        }
        let mut attr = ffi::ibv_qp_rate_limit_attr {
            rate_limit: r,
            max_burst_sz: limit.max_burst_sz,
            typical_pkt_sz: limit.typical_pkt_sz,
            comp_mask: 0,
        };
        // SAFETY: live QP; `attr` is valid for the call.
        let rc = unsafe { ffi::ibv_modify_qp_rate_limit(self.as_ptr(), &mut attr) };
        if rc != 0 {
            return Err(Error::code(OP, rc).lacking(&crate::prim::unsupported::PACING, self.pd().context().name()));
        }
        Ok(())
    }
}
