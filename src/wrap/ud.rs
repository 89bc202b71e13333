//! [`UdEndpoint`]: a UD QP ready to send and receive, with cached address handles.

use std::collections::HashMap;

use crate::ctrl::QpInfo;
use crate::prim::{Ah, AhAttr, Cq, Gid, Pd, Qp, QpCaps, QpType, Srq, Wc, GRH_LEN};

/// The fields of a peer's port address that an address handle depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct AhKey {
    gid: Gid,
    lid: u16,
    sl: u8,
}

/// Settings of a [`UdEndpoint`]: start from [`UdOpts::default`] and chain
/// the setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UdOpts {
    pub(crate) caps: QpCaps,
    pub(crate) port: u8,
    pub(crate) gid_index: Option<u8>,
    pub(crate) qkey: u32,
    pub(crate) srq: Option<Srq>,
}

impl Default for UdOpts {
    fn default() -> UdOpts {
        UdOpts { caps: QpCaps::default(), port: 1, gid_index: None, qkey: 0x1111_1111, srq: None }
    }
}

impl UdOpts {
    setters! {
        /// Queue sizes (receive sizes are ignored with an SRQ). Default
        /// [`QpCaps::default`].
        const caps: QpCaps;
        /// Local port (`ibv_qp_attr::port_num`). Default 1.
        const port: u8;
        /// Source GID index of the address handles this endpoint creates
        /// (`ibv_global_route::sgid_index`). Default `None`: the port's RoCE
        /// v2 GID ([`crate::prim::Context::roce_v2_gid_index`]), 0 on InfiniBand.
        const gid_index: Option<u8>;
        /// The Q_Key peers send with (`ibv_qp_attr::qkey`). Default `0x1111_1111`.
        const qkey: u32;
        /// Take receives from this shared receive queue (`ibv_qp_init_attr::srq`).
        /// Default `None`: the QP has a receive queue of its own.
        srq: Option<Srq>;
    }
}

/// A UD QP brought up to RTS, with an address-handle cache keyed by the
/// peer's GID, LID and service level: the first send to a peer port creates
/// its AH (a system call), later ones reuse it.
///
/// Receive buffers of a UD QP hold the 40-byte Global Route Header before
/// each message ([`GRH_LEN`]): post `GRH_LEN + n` bytes to receive `n`. A
/// server answers whoever sent a request with [`UdEndpoint::reply_route`],
/// which builds (and caches) the address handle from the completion and
/// that header.
#[derive(Debug)]
pub struct UdEndpoint {
    qp: Qp,
    pd: Pd,
    port: u8,
    gid_index: u8,
    qkey: u32,
    ahs: HashMap<AhKey, Ah>,
    srq: Option<Srq>,
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
        let opts = UdOpts { caps, port, gid_index: Some(gid_index), qkey, srq: None };
        UdEndpoint::with_opts(pd, send_cq, recv_cq, &opts)
    }

    /// Creates the UD QP as `opts` says (an SRQ, the automatic GID, ...)
    /// and brings it to RTS.
    pub fn with_opts(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, opts: &UdOpts) -> crate::prim::Result<UdEndpoint> {
        let gid_index = match opts.gid_index {
            Some(i) => i,
            None => pd.context().roce_v2_gid_index(opts.port)?,
        };
        let mut b = Qp::builder(pd, QpType::UD, send_cq, recv_cq).caps(opts.caps);
        if let Some(srq) = &opts.srq {
            b = b.srq(srq);
        }
        let qp = b.build()?;
        qp.bring_up_ud(opts.port, 0, opts.qkey, 0)?;
        Ok(UdEndpoint {
            qp,
            pd: pd.clone(),
            port: opts.port,
            gid_index,
            qkey: opts.qkey,
            ahs: HashMap::new(),
            srq: opts.srq.clone(),
        })
    }

    /// The shared receive queue, when the endpoint takes receives from one.
    pub fn srq(&self) -> Option<&Srq> {
        self.srq.as_ref()
    }

    /// The source GID index of the address handles this endpoint creates.
    pub fn gid_index(&self) -> u8 {
        self.gid_index
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
            let ah = Ah::create(&self.pd, &peer.ah_attr(self.port, self.gid_index).sl(sl))?;
            self.ahs.insert(key, ah);
        }
        Ok((&self.qp, &self.ahs[&key]))
    }

    /// The QP and the address handle back to the sender of a received
    /// completion `wc`, whose receive buffer starts with `grh` (the first
    /// [`GRH_LEN`] bytes); send to QPN `wc.src_qp()` with [`UdEndpoint::qkey`].
    /// Handles are cached by the sender's GID, LID and service level.
    pub fn reply_route(&mut self, wc: &Wc, grh: &[u8; GRH_LEN]) -> crate::prim::Result<(&Qp, &Ah)> {
        let attr = AhAttr::from_wc(self.pd.context(), self.port, wc, grh)?;
        let key = AhKey { gid: attr.dgid(), lid: wc.slid(), sl: wc.sl() };
        if !self.ahs.contains_key(&key) {
            let ah = Ah::create(&self.pd, &attr)?;
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
