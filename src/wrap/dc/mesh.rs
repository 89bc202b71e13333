//! DC endpoints to every rank of a session: one DCT and a DCI pool per
//! rank, whatever the rank count; an RC mesh where the device lacks DC.

use std::fmt;

use super::pool::{DcCompletion, DciPool, DciPoolOpts, PostError};
use super::sched::Outcome;
use crate::ctrl::{DctInfo, Session};
use crate::mlx5dv::dc::{Dct, DctAddr, DctOpts};
use crate::prim::{Ah, Cq, Error as PrimError, Gid, Pd, Qp, SendWr, Srq, Wc};
use crate::wrap::{connect_rc_mesh, MeshOpts};

/// Settings of [`DcMesh::connect`]: start from [`DcMeshOpts::default`] and
/// chain the setters.
///
/// | field | default | |
/// |---|---|---|
/// | `pool` | [`DciPoolOpts::default`] | the DCIs of this rank (their count, streams, policy, port and GID index) |
/// | `dct` | [`DctOpts::default`] | this rank's DC target; grant the remote access peers need |
/// | `key` | 0 | the DC access key of this rank's target (sent to the peers) |
/// | `rc` | [`MeshOpts::default`] | the RC mesh of the fallback (its SRQ is the mesh's); grant the same access |
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct DcMeshOpts {
    pub(crate) pool: DciPoolOpts,
    pub(crate) dct: DctOpts,
    pub(crate) key: u64,
    pub(crate) rc: MeshOpts,
}

impl DcMeshOpts {
    setters! {
        /// The DCI pool of this rank.
        pool: DciPoolOpts, get_pool;
        /// This rank's DC target.
        dct: DctOpts, get_dct;
        /// The access key of this rank's DC target.
        key: u64, get_key;
    }

    /// The RC mesh used where DC is not available (its SRQ is replaced by
    /// the mesh's).
    #[must_use]
    pub fn rc(mut self, rc: MeshOpts) -> Self {
        self.rc = rc;
        self
    }

    /// Grants `access` on this rank's side in both modes: the DC target's
    /// ([`DctOpts::access`]) and the fallback's RC QPs' (`ConnectOpts::access`).
    #[must_use]
    pub fn access(mut self, access: crate::prim::AccessFlags) -> Self {
        self.dct = self.dct.access(access);
        let c = self.rc.get_connect().access(access);
        self.rc = self.rc.connect(c);
        self
    }

    /// The RC mesh options set with [`DcMeshOpts::rc`].
    pub fn get_rc(&self) -> &MeshOpts {
        &self.rc
    }
}

enum Inner {
    Dc { _dct: Dct, pool: Box<DciPool>, peers: Vec<DctInfo>, ahs: Vec<Option<Ah>> },
    Rc { qps: Vec<Option<Qp>>, cq: Cq },
}

/// Endpoints from this rank to every other rank of a [`Session`]: over DC,
/// one DC target and a [`DciPool`] per rank (O(1) QPs per rank: the pool's
/// DCIs and the DCT, whatever the rank count), the targets found through
/// the session ([`Session::exchange_dcts`]); on a group where any rank's
/// device lacks DC (rxe, siw, a non-mlx5 device), an RC mesh
/// ([`connect_rc_mesh`]: N-1 QPs per rank) with the same [`DcMesh::post`]
/// and [`DcMesh::poll`]. [`DcMesh::refusal`] says why DC was not used.
///
/// Receives (SENDs, WRITEs with immediate) land in the SRQ given to
/// [`DcMesh::connect`] in both modes, their completions on its `recv_cq`.
pub struct DcMesh {
    inner: Inner,
    rank: u32,
    size: u32,
    refusal: Option<String>,
}

impl fmt::Debug for DcMesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DcMesh")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("dc", &self.is_dc())
            .field("qps", &self.qps())
            .field("refusal", &self.refusal)
            .finish()
    }
}

impl DcMesh {
    /// Creates this rank's DC target (receiving into `srq`, completing on
    /// `recv_cq`) and DCI pool (completing on `send_cq`), exchanges the
    /// targets through `session`, and makes an address handle per peer.
    /// Where any rank's device refuses DC ([`Error::Unsupported`](crate::prim::Error::Unsupported)),
    /// every rank drops its DC objects and connects an RC mesh instead
    /// (the ranks agree: each sees every rank's [`DctInfo::has_dc`]).
    /// Every rank must call it in the same session round.
    pub fn connect(
        session: &mut Session,
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        srq: &Srq,
        opts: &DcMeshOpts,
    ) -> super::super::Result<DcMesh> {
        let (rank, size) = (session.rank(), session.size());
        let ctx = pd.context();
        let c = &opts.pool.connect;
        let port = c.port;
        let ethernet = ctx.query_port(port)?.is_ethernet();
        let gid_index = match c.gid_index {
            Some(i) => Some(i),
            None if ethernet => Some(ctx.roce_v2_gid_index(port)?),
            None => None,
        };
        let gid = match gid_index {
            Some(i) => ctx.query_gid(port, u32::from(i))?,
            None => Gid::default(),
        };
        let lid = ctx.query_port(port)?.lid();
        let mut refusal = None;
        let dc = match Dct::create(pd, recv_cq, srq, opts.key, &opts.dct) {
            Ok(dct) => match DciPool::create(pd, send_cq, size, &opts.pool) {
                Ok(pool) => Some((dct, pool)),
                Err(e @ PrimError::Unsupported { .. }) => {
                    refusal = Some(e.to_string());
                    None
                }
                Err(e) => return Err(e.into()),
            },
            Err(e @ PrimError::Unsupported { .. }) => {
                refusal = Some(e.to_string());
                None
            }
            Err(e) => return Err(e.into()),
        };
        let mine = match &dc {
            Some((dct, _)) => DctInfo::new(dct.dctn(), dct.key(), lid, gid, gid_index.unwrap_or(0), port, c.mtu),
            None => DctInfo::without_dc(lid, gid, gid_index.unwrap_or(0), port, c.mtu),
        };
        let peers = session.exchange_dcts(&mine)?;
        if peers.len() != size as usize {
            return Err(crate::ctrl::Error::Protocol(format!("{} DCT entries for {size} ranks", peers.len())).into());
        }
        let lacking: Vec<u32> = (0..size).filter(|&r| !peers[r as usize].has_dc).collect();
        match dc {
            Some((dct, pool)) if lacking.is_empty() => {
                let mut ahs = Vec::with_capacity(size as usize);
                for (r, p) in peers.iter().enumerate() {
                    ahs.push(if r as u32 == rank {
                        None
                    } else {
                        Some(Ah::create(pd, &p.ah_attr(port, gid_index.unwrap_or(0)))?)
                    });
                }
                event!(info, "rank {rank}: DC mesh to {} peers with {} DCIs and one DCT", size - 1, opts.pool.dcis);
                Ok(DcMesh {
                    inner: Inner::Dc { _dct: dct, pool: Box::new(pool), peers, ahs },
                    rank,
                    size,
                    refusal: None,
                })
            }
            dc => {
                drop(dc);
                if refusal.is_none() {
                    refusal = Some(format!("ranks {lacking:?} have no DC target (their devices refused DC)"));
                }
                event!(info, "rank {rank}: RC mesh instead of DC: {}", refusal.as_deref().unwrap_or(""));
                let qps = connect_rc_mesh(session, pd, send_cq, recv_cq, &opts.rc.clone().srq(srq))?;
                Ok(DcMesh { inner: Inner::Rc { qps, cq: send_cq.clone() }, rank, size, refusal })
            }
        }
    }

    /// Whether the endpoints are DC (else RC, see [`DcMesh::refusal`]).
    pub fn is_dc(&self) -> bool {
        matches!(self.inner, Inner::Dc { .. })
    }

    /// Why DC was not used: this device's refusal as it printed, or the
    /// ranks whose devices refused; `None` over DC.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// This rank's QPs for the mesh: the pool's DCIs and the DCT over DC,
    /// one RC QP per peer otherwise.
    pub fn qps(&self) -> usize {
        match &self.inner {
            Inner::Dc { pool, .. } => usize::from(pool.sched().shape().dcis) + 1,
            Inner::Rc { qps, .. } => qps.iter().flatten().count(),
        }
    }

    /// The DCT directory (every rank's entry, in rank order), over DC.
    pub fn peers(&self) -> Option<&[DctInfo]> {
        match &self.inner {
            Inner::Dc { peers, .. } => Some(peers),
            Inner::Rc { .. } => None,
        }
    }

    /// The DCI pool, over DC.
    pub fn pool(&self) -> Option<&DciPool> {
        match &self.inner {
            Inner::Dc { pool, .. } => Some(pool),
            Inner::Rc { .. } => None,
        }
    }

    /// Posts `wr` to rank `peer`, signalled, the completion carrying
    /// `wr_id` ([`DcMesh::poll`]): over DC through the pool's policy, over
    /// RC on the peer's QP.
    ///
    /// # Panics
    /// For this rank or a rank outside the session.
    ///
    /// # Safety
    /// As [`DciPool::post`]: the memory `wr` names is registered, alive
    /// and untouched until its completion.
    pub unsafe fn post(&mut self, peer: u32, wr: &SendWr<'_>, wr_id: u64) -> Result<(), PostError> {
        assert!(
            peer < self.size && peer != self.rank,
            "DcMesh::post: rank {peer} is not a peer of rank {} (ranks 0..{}, not itself)",
            self.rank,
            self.size
        );
        match &mut self.inner {
            Inner::Dc { pool, peers, ahs, .. } => {
                let (p, ah) = (&peers[peer as usize], ahs[peer as usize].as_ref().expect("an AH per peer"));
                // SAFETY: the caller's contract.
                unsafe { pool.post(peer, &DctAddr::new(ah, p.dctn, p.key), wr, wr_id) }.map(|_| ())
            }
            Inner::Rc { qps, .. } => {
                let qp = qps[peer as usize].as_ref().expect("an RC QP per peer");
                // SAFETY: the caller's contract.
                unsafe { qp.post_send(&mut [wr.wr_id(wr_id).signaled()]) }.map_err(PostError::Verbs)
            }
        }
    }

    /// Polls the send completions into `out` (the target is the peer's
    /// rank); over DC as [`DciPool::poll`], which also recovers channels in
    /// error.
    pub fn poll(&mut self, out: &mut [Option<DcCompletion>]) -> crate::prim::Result<usize> {
        match &mut self.inner {
            Inner::Dc { pool, .. } => pool.poll(out),
            Inner::Rc { qps, cq } => {
                let mut wc = [Wc::default(); 16];
                let want = out.len().min(wc.len());
                let n = cq.poll(&mut wc[..want])?;
                let mut filled = 0;
                for w in &wc[..n] {
                    let Some(peer) = qps.iter().position(|q| q.as_ref().is_some_and(|q| q.qpn() == w.qp_num())) else {
                        continue;
                    };
                    let outcome = match w.status() {
                        s if s.is_success() => Outcome::Ok,
                        crate::prim::WcStatus::WR_FLUSH_ERR => Outcome::Flushed,
                        _ => Outcome::Failed,
                    };
                    out[filled] = Some(DcCompletion {
                        target: peer as u32,
                        wr_id: w.wr_id(),
                        channel: None,
                        status: w.status(),
                        outcome,
                    });
                    filled += 1;
                }
                Ok(filled)
            }
        }
    }
}
