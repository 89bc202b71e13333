//! [`UdEndpoint`]: a UD QP ready to send and receive, with cached address handles.

use std::collections::HashMap;

use crate::ctrl::QpInfo;
use crate::prim::QpType;
use crate::prim::{Ah, AhAttr, Cq, Gid, Pd, Qp, QpBuilder, QpCaps};

/// The fields of a peer's port address that an address handle depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct AhKey {
    gid: Gid,
    lid: u16,
    sl: u8,
}

/// A UD QP brought up to RTS, with an address-handle cache keyed by the
/// peer's GID, LID and service level: the first send to a peer port creates
/// its AH (a system call), later ones reuse it.
#[derive(Debug)]
pub struct UdEndpoint {
    qp: Qp,
    pd: Pd,
    port: u8,
    gid_index: u8,
    qkey: u32,
    ahs: HashMap<AhKey, Ah>,
}

impl UdEndpoint {
    /// Creates the UD QP on `pd` and brings it to RTS on `port` with `qkey`;
    /// `gid_index` is the source GID of address handles it creates.
    pub fn new(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: QpCaps,
        port: u8,
        gid_index: u8,
        qkey: u32,
    ) -> crate::prim::Result<UdEndpoint> {
        let qp = QpBuilder::new(pd, QpType::UD, send_cq, recv_cq).caps(caps).build()?;
        qp.bring_up_ud(port, 0, qkey, 0)?;
        Ok(UdEndpoint { qp, pd: pd.clone(), port, gid_index, qkey, ahs: HashMap::new() })
    }

    /// The QP, for posting.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// The Q_Key peers must send with.
    pub fn qkey(&self) -> u32 {
        self.qkey
    }

    /// What peers need to reach this endpoint (the PSN field is unused by UD).
    pub fn info(&self, mtu: crate::prim::Mtu) -> crate::prim::Result<QpInfo> {
        let e = self.qp.endpoint(self.port, self.gid_index, 0)?;
        Ok(QpInfo::new(&e, self.gid_index, self.port, mtu))
    }

    /// The QP and the address handle for `peer` at service level `sl` (the
    /// handle created on first use), ready for
    /// [`SendWr::ud`](crate::prim::SendWr::ud).
    pub fn route(&mut self, peer: &QpInfo, sl: u8) -> crate::prim::Result<(&Qp, &Ah)> {
        let key = AhKey { gid: peer.gid, lid: peer.lid, sl };
        if !self.ahs.contains_key(&key) {
            let attr = if peer.gid.is_zero() {
                AhAttr::lid(self.port, peer.lid)
            } else {
                AhAttr::global(self.port, self.gid_index, peer.gid).dlid(peer.lid)
            };
            let ah = Ah::new(&self.pd, &attr.sl(sl))?;
            self.ahs.insert(key, ah);
        }
        Ok((&self.qp, &self.ahs[&key]))
    }

    /// Number of cached address handles.
    pub fn cached(&self) -> usize {
        self.ahs.len()
    }

    /// Drops every cached address handle (they are recreated on demand).
    pub fn clear_cache(&mut self) {
        self.ahs.clear();
    }
}
