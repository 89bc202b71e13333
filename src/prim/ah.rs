//! Address vectors and address handles.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::cq::Wc;
use super::device::Context;
use super::error::{Error, Result};
use super::gid::Gid;
use super::handle::{Destroy, Owned};
use super::pd::Pd;
use crate::bindings as ffi;

/// An address vector (`struct ibv_ah_attr`): where packets go. Used for UD
/// address handles and for the primary path of connected QPs.
#[derive(Clone, Copy)]
pub struct AhAttr(ffi::ibv_ah_attr);

impl fmt::Debug for AhAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.0.grh;
        f.debug_struct("AhAttr")
            .field("port", &self.0.port_num)
            .field("dlid", &self.0.dlid)
            .field("sl", &self.0.sl)
            .field("global", &(self.0.is_global != 0))
            // SAFETY: every bit pattern of the GID union is a valid byte array.
            .field("dgid", &Gid(unsafe { g.dgid.raw }))
            .field("sgid_index", &g.sgid_index)
            .finish()
    }
}

impl AhAttr {
    /// A path out of `port` to LID `dlid` (InfiniBand, within the subnet).
    pub fn lid(port: u8, dlid: u16) -> AhAttr {
        AhAttr(ffi::ibv_ah_attr { dlid, port_num: port, ..Default::default() })
    }

    /// A routed path (GRH) out of `port`, from the local GID at `sgid_index`
    /// to `dgid`: what RoCE always needs. Hop limit 64, traffic class 0.
    pub fn global(port: u8, sgid_index: u8, dgid: Gid) -> AhAttr {
        AhAttr(ffi::ibv_ah_attr {
            port_num: port,
            is_global: 1,
            grh: ffi::ibv_global_route {
                dgid: dgid.to_raw(),
                sgid_index,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            },
            ..Default::default()
        })
    }

    /// Destination LID (also meaningful with a GRH on InfiniBand).
    pub fn dlid(mut self, dlid: u16) -> AhAttr {
        self.0.dlid = dlid;
        self
    }

    /// Service level.
    pub fn sl(mut self, sl: u8) -> AhAttr {
        self.0.sl = sl;
        self
    }

    /// Hop limit of the GRH.
    pub fn hop_limit(mut self, hop_limit: u8) -> AhAttr {
        self.0.grh.hop_limit = hop_limit;
        self
    }

    /// Traffic class of the GRH (RoCE: DSCP and ECN).
    pub fn traffic_class(mut self, tc: u8) -> AhAttr {
        self.0.grh.traffic_class = tc;
        self
    }

    /// Flow label of the GRH (20 bits).
    pub fn flow_label(mut self, label: u32) -> AhAttr {
        self.0.grh.flow_label = label & 0xf_ffff;
        self
    }

    /// Static rate (`IBV_RATE_*`).
    pub fn static_rate(mut self, rate: u8) -> AhAttr {
        self.0.static_rate = rate;
        self
    }

    /// The raw attributes.
    pub fn as_raw(&self) -> &ffi::ibv_ah_attr {
        &self.0
    }

    /// From the C struct (e.g. the CM's `rdma_ud_param`).
    pub fn from_raw(raw: ffi::ibv_ah_attr) -> AhAttr {
        AhAttr(raw)
    }

    /// The path back to the sender of a received UD completion
    /// (`ibv_init_ah_from_wc`): `wc` from the receive, `grh` the first
    /// [`GRH_LEN`] bytes of its receive buffer, `port` the local port.
    /// The sender's QPN is `wc.src_qp()`.
    ///
    /// # References
    /// `ibv_init_ah_from_wc(3)`
    pub fn from_wc(ctx: &Context, port: u8, wc: &Wc, grh: &[u8; GRH_LEN]) -> Result<AhAttr> {
        let mut raw_wc = wc.0;
        // SAFETY: `ibv_grh` is 40 bytes of plain integers (layout asserted in
        // the bindings); any byte pattern is valid, and the copy is unaligned.
        let mut raw_grh: ffi::ibv_grh = unsafe { std::ptr::read_unaligned(grh.as_ptr().cast()) };
        let mut attr = ffi::ibv_ah_attr::default();
        // SAFETY: live context; every pointer is to a local valid for the call.
        let rc = unsafe { ffi::ibv_init_ah_from_wc(ctx.as_ptr(), port, &mut raw_wc, &mut raw_grh, &mut attr) };
        if rc != 0 {
            return Err(Error::code("ibv_init_ah_from_wc", rc));
        }
        Ok(AhAttr(attr))
    }

    /// Destination GID (zero without a GRH).
    pub fn dgid(&self) -> Gid {
        // SAFETY: every bit pattern of the GID union is a valid byte array.
        Gid(unsafe { self.0.grh.dgid.raw })
    }
}

/// Bytes a UD receive buffer holds before the payload: the Global Route
/// Header, written by the device whether or not the packet carried one
/// (RoCE always does). A UD receive of an `n`-byte message needs
/// `GRH_LEN + n` bytes.
pub const GRH_LEN: usize = 40;

pub(crate) struct AhInner {
    pd: Pd,
}

// SAFETY: `ibv_destroy_ah` releases what the matching create verb made; an address handle is immutable after creation.
unsafe impl Destroy for AhInner {
    type Raw = ffi::ibv_ah;
    const VERB: &'static str = "ibv_destroy_ah";
    unsafe fn destroy(&mut self, raw: NonNull<ffi::ibv_ah>) -> i32 {
        // SAFETY: the caller's contract.
        unsafe { ffi::ibv_destroy_ah(raw.as_ptr()) }
    }
}

/// An address handle for UD sends. Cloning shares it.
///
/// # References
/// `ibv_create_ah(3)`
#[derive(Clone)]
pub struct Ah(Arc<Owned<AhInner>>);

impl fmt::Debug for Ah {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ah").field("ptr", &self.0.raw()).finish()
    }
}

impl Ah {
    /// Creates an address handle on `pd`.
    ///
    /// # References
    /// `ibv_create_ah(3)`
    #[doc(alias = "ibv_create_ah")]
    pub fn create(pd: &Pd, attr: &AhAttr) -> Result<Ah> {
        let mut raw = attr.0;
        // SAFETY: live PD; `raw` is valid for the call.
        let ah = unsafe { ffi::ibv_create_ah(pd.as_ptr(), &mut raw) };
        let ah = NonNull::new(ah).ok_or_else(|| Error::last("ibv_create_ah"))?;
        Ok(Ah(Arc::new(
            // SAFETY: just made by its create verb, owned by nothing else.
            unsafe { Owned::new(ah, AhInner { pd: pd.clone() }) },
        )))
    }

    /// An address handle back to the sender of a received UD completion
    /// ([`AhAttr::from_wc`]).
    pub fn from_wc(pd: &Pd, port: u8, wc: &Wc, grh: &[u8; GRH_LEN]) -> Result<Ah> {
        Ah::create(pd, &AhAttr::from_wc(pd.context(), port, wc, grh)?)
    }

    /// The raw handle.
    pub fn as_ptr(&self) -> *mut ffi::ibv_ah {
        self.0.as_ptr()
    }

    /// The protection domain it was created on.
    pub fn pd(&self) -> &Pd {
        &self.0.pd
    }
}
