//! Connected RC QPs: a local pair, or one QP per peer of a cluster session.

use crate::ctrl::{QpInfo, Session};
use crate::prim::{ConnectOpts, Cq, Endpoint, Pd, Qp, QpCaps, Result};

/// Creates two RC QPs on `pd`, both completing sends on `send_cq` and
/// receives on `recv_cq` (which may be the same CQ), and connects them to each
/// other through `opts.port` / `opts.gid_index`. The first QP sends from PSN
/// `psn`, the second from `psn + 1` (mod 2^24).
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
    let opts = &ConnectOpts { gid_index: Some(gid_index), ..*opts };
    let ea: Endpoint = a.endpoint(opts.port, gid_index, psn)?;
    let eb: Endpoint = b.endpoint(opts.port, gid_index, psn.wrapping_add(1))?;
    a.connect(&eb, ea.psn, opts)?;
    b.connect(&ea, eb.psn, opts)?;
    Ok((a, b))
}

/// Settings of [`connect_rc_mesh`]: start from [`MeshOpts::default`] and
/// chain the setters. The values can be read back (`get_caps`,
/// `get_connect`, `get_psn`) by code that builds its own mesh.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct MeshOpts {
    pub(crate) caps: QpCaps,
    pub(crate) connect: ConnectOpts,
    pub(crate) psn: u32,
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
}

/// Creates one RC QP per other rank of `session` on `pd`, exchanges their
/// endpoints through the session, and connects each to its peer's QP for
/// this rank. Every rank must call it with the same session round.
///
/// Returns the QPs indexed by peer rank (`None` at this rank's own index).
pub fn connect_rc_mesh(
    session: &mut Session,
    pd: &Pd,
    send_cq: &Cq,
    recv_cq: &Cq,
    opts: &MeshOpts,
) -> super::Result<Vec<Option<Qp>>> {
    let (me, n) = (session.rank(), session.size());
    let c = &opts.connect;
    let gid_index = c.gid_index_on(pd.context())?;
    let mut qps = Vec::with_capacity(n as usize);
    let mut infos = Vec::with_capacity(n as usize);
    for peer in 0..n {
        if peer == me {
            qps.push(None);
            // Never read by the peer: a placeholder keeping indices aligned.
            infos.push(QpInfo::new(&Endpoint { qpn: 0, psn: 0, lid: 0, gid: Default::default() }, 0, 0, c.mtu));
            continue;
        }
        let qp = Qp::builder(pd, crate::prim::QpType::RC, send_cq, recv_cq).caps(opts.caps).build()?;
        let e = qp.endpoint(c.port, gid_index, opts.psn.wrapping_add(peer))?;
        infos.push(QpInfo::new(&e, gid_index, c.port, c.mtu));
        qps.push(Some(qp));
    }
    let all = session.exchange_endpoints(&infos)?;
    for (peer, qp) in qps.iter().enumerate() {
        let Some(qp) = qp else { continue };
        let theirs = all[peer].get(me as usize).ok_or_else(|| {
            crate::ctrl::Error::Protocol(format!("rank {peer} sent {} endpoints for {n} ranks", all[peer].len()))
        })?;
        let mtu = c.mtu.min(theirs.mtu);
        qp.connect(&theirs.endpoint(), infos[peer].psn, &ConnectOpts { mtu, gid_index: Some(gid_index), ..*c })
            .inspect_err(|e| event!(warn, "rank {me}: connecting the RC QP to rank {peer} failed: {e}"))?;
    }
    event!(info, "rank {me}: RC QPs connected to {} peers (GID index {gid_index}, port {})", n - 1, c.port);
    Ok(qps)
}
