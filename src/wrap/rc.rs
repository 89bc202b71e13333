//! Connected RC QPs: a local pair, or one QP per peer of a cluster session.

use crate::ctrl::{QpInfo, Session};
use crate::prim::{ConnectOpts, Cq, Endpoint, Pd, Qp, QpCaps, Result, Srq};

/// Creates two RC QPs on `pd`, both completing sends on `send_cq` and
/// receives on `recv_cq` (which may be the same CQ), and connects them to each
/// other through `opts.port` / `opts.gid_index`. The first QP sends from PSN
/// `psn`, the second from `psn + 1` (mod 2^24). READ and atomic depths not
/// set in `opts` are the device's (`ConnectOpts::with_device_rd_atomic`):
/// the pair is built for many operations in flight.
pub fn connected_rc_pair(
    pd: &Pd,
    send_cq: &Cq,
    recv_cq: &Cq,
    caps: QpCaps,
    psn: u32,
    opts: &ConnectOpts,
) -> Result<(Qp, Qp)> {
    let a = Qp::builder(pd, crate::prim::QpType::RC, send_cq, recv_cq).caps(caps).build()?;
    let b = Qp::builder(pd, crate::prim::QpType::RC, send_cq, recv_cq).caps(caps).build()?;
    // Chosen once: both endpoints and both connections use the same index
    // (and the GID table is read once, not once per connection).
    let gid_index = opts.gid_index_on(pd.context())?;
    let opts = &ConnectOpts { gid_index: Some(gid_index), ..opts.with_device_rd_atomic(pd.context())? };
    let ea: Endpoint = a.endpoint(opts.port, gid_index, psn)?;
    let eb: Endpoint = b.endpoint(opts.port, gid_index, psn.wrapping_add(1))?;
    a.connect(&eb, ea.psn, opts)?;
    b.connect(&ea, eb.psn, opts)?;
    Ok((a, b))
}

/// Settings of [`connect_rc_mesh`]: start from [`MeshOpts::default`] and
/// chain the setters. The values can be read back (`get_caps`,
/// `get_connect`, `get_psn`) by code that builds its own mesh.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MeshOpts {
    pub(crate) caps: QpCaps,
    pub(crate) connect: ConnectOpts,
    pub(crate) psn: u32,
    pub(crate) srq: Option<Srq>,
    pub(crate) pairs: Option<fn(u32, u32) -> bool>,
}

impl MeshOpts {
    setters! {
        /// Capacities of every QP. Default [`QpCaps::default`].
        const caps: QpCaps, get_caps;
        /// Connection parameters (port, GID index, MTU, timeouts, access).
        /// The path MTU used with each peer is the smaller of both sides'
        /// MTU. Default [`ConnectOpts::default`]: automatic RoCE v2 GID, MTU
        /// 1024, no remote access (grant what the ranks need).
        const connect: ConnectOpts, get_connect;
        /// First PSN: the QP to peer `j` sends from `(psn + j) mod 2^24`
        /// ([`crate::prim::random_psn`] gives a random start). Default 0.
        const psn: u32, get_psn;
    }

    /// Every QP takes its receives from `srq` (a shared receive queue of
    /// this rank's, on the mesh's PD): one pool of receives for all peers,
    /// as chain replication and RPC servers want. Default: each QP its own
    /// receive queue of `caps`.
    #[must_use]
    pub fn srq(mut self, srq: &Srq) -> Self {
        self.srq = Some(srq.clone());
        self
    }

    /// The SRQ set with [`MeshOpts::srq`].
    pub fn get_srq(&self) -> Option<&Srq> {
        self.srq.as_ref()
    }

    /// Connects only the rank pairs `(a, b)` for which `pairs(a, b)` holds:
    /// a mesh over a subset, or servers connected to every client while the
    /// clients need no QPs to each other (`|a, b| a < 2 || b < 2` with
    /// ranks 0 and 1 the servers). It must be symmetric and the same on
    /// every rank; a rank gets `None` for a peer it is not paired with.
    /// Default: every pair.
    #[must_use]
    pub fn pairs(mut self, pairs: fn(u32, u32) -> bool) -> Self {
        self.pairs = Some(pairs);
        self
    }
}

/// Creates one RC QP per other rank of `session` on `pd`, exchanges their
/// endpoints through the session, and connects each to its peer's QP for
/// this rank. Every rank must call it with the same session round.
///
/// Returns the QPs indexed by peer rank (`None` at this rank's own index,
/// and for peers [`MeshOpts::pairs`] leaves out).
///
/// # Panics
/// If [`MeshOpts::pairs`] is not symmetric for a pair of this rank's.
pub fn connect_rc_mesh(
    session: &mut Session,
    pd: &Pd,
    send_cq: &Cq,
    recv_cq: &Cq,
    opts: &MeshOpts,
) -> super::Result<Vec<Option<Qp>>> {
    let (me, n) = (session.rank(), session.size());
    let c = &opts.connect.with_device_rd_atomic(pd.context())?;
    let (init, dest) = c.rd_atomic();
    let gid_index = c.gid_index_on(pd.context())?;
    let mut qps = Vec::with_capacity(n as usize);
    let mut infos = Vec::with_capacity(n as usize);
    for peer in 0..n {
        let paired = opts.pairs.is_none_or(|f| {
            let (there, back) = (f(me, peer), f(peer, me));
            assert_eq!(
                there, back,
                "MeshOpts::pairs is not symmetric: pairs({me}, {peer}) is {there} but pairs({peer}, {me}) is {back}; \
                 both ranks of a pair must agree to connect it"
            );
            there
        });
        if peer == me || !paired {
            qps.push(None);
            // Never read by the peer: a placeholder keeping indices aligned.
            infos.push(QpInfo::new(&Endpoint { qpn: 0, psn: 0, lid: 0, gid: Default::default() }, 0, 0, c.mtu));
            continue;
        }
        let b = Qp::builder(pd, crate::prim::QpType::RC, send_cq, recv_cq).caps(opts.caps);
        let qp = match &opts.srq {
            Some(srq) => b.srq(srq),
            None => b,
        }
        .build()?;
        let e = qp.endpoint(c.port, gid_index, opts.psn.wrapping_add(peer))?;
        infos.push(QpInfo::new(&e, gid_index, c.port, c.mtu).with_rd_atomic(init, dest));
        qps.push(Some(qp));
    }
    let all = session.exchange_endpoints(&infos)?;
    for (peer, qp) in qps.iter().enumerate() {
        let Some(qp) = qp else { continue };
        let theirs = all[peer].get(me as usize).ok_or_else(|| {
            crate::ctrl::Error::Protocol(format!("rank {peer} sent {} endpoints for {n} ranks", all[peer].len()))
        })?;
        let mtu = c.mtu.min(theirs.mtu);
        let depths = c.clamp_rd_atomic(theirs.rd_atomic, theirs.dest_rd_atomic);
        qp.connect(&theirs.endpoint(), infos[peer].psn, &ConnectOpts { mtu, gid_index: Some(gid_index), ..depths })
            .inspect_err(|e| event!(warn, "rank {me}: connecting the RC QP to rank {peer} failed: {e}"))?;
    }
    let connected = qps.iter().filter(|q| q.is_some()).count();
    event!(info, "rank {me}: RC QPs connected to {connected} peers (GID index {gid_index}, port {})", c.port);
    Ok(qps)
}
