//! RC connections by IP address through librdmacm (feature `cm`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::prim::cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use crate::prim::{AccessFlags, Context, Cq, Error, Pd, Qp, QpCaps, Result};

/// Settings of [`connect_rc_cm`] and [`accept_rc_cm`]: start from
/// [`CmOpts::default`] and chain the setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CmOpts {
    pub(crate) caps: QpCaps,
    pub(crate) cq_depth: u32,
    pub(crate) private_data: Vec<u8>,
    pub(crate) rd_atomic: u8,
    pub(crate) timeout: Duration,
    pub(crate) access: AccessFlags,
}

impl Default for CmOpts {
    fn default() -> Self {
        CmOpts {
            caps: QpCaps::default(),
            cq_depth: 256,
            private_data: Vec::new(),
            rd_atomic: 1,
            timeout: Duration::from_secs(5),
            access: AccessFlags::empty(),
        }
    }
}

impl CmOpts {
    setters! {
        /// The QP's capacities. Default [`QpCaps::default`].
        const caps: QpCaps;
        /// Entries of the send and of the receive CQ. Default 256.
        const cq_depth: u32;
        /// Private data sent with the connect request or the accept
        /// (`rdma_conn_param::private_data`). Default empty.
        private_data: Vec<u8>;
        /// RDMA reads and atomics outstanding, each way
        /// (`rdma_conn_param::responder_resources` and `initiator_depth`). Default 1.
        const rd_atomic: u8;
        /// Bound on each step (address, route, connection). Default 5 s.
        const timeout: Duration;
        /// Remote access the peer gets through the QP (`REMOTE_WRITE`,
        /// `REMOTE_READ`, `REMOTE_ATOMIC`; see [`CmId::set_access`]).
        /// Default empty, as [`ConnectOpts::access`](crate::prim::ConnectOpts::access):
        /// the peer can send, but not read or write this side's memory.
        const access: AccessFlags;
    }

    fn param(&self) -> ConnParam<'_> {
        ConnParam {
            private_data: &self.private_data,
            responder_resources: self.rd_atomic,
            initiator_depth: self.rd_atomic,
            ..ConnParam::default()
        }
    }
}

/// A connected RC QP with what it was built on, and the peer's private data.
/// Dropping it disconnects (the `CmId` goes last, after the QP).
#[derive(Debug)]
pub struct CmConn {
    /// The QP: an ordinary [`Qp`], in RTS.
    pub qp: Qp,
    /// Its send CQ.
    pub send_cq: Cq,
    /// Its receive CQ.
    pub recv_cq: Cq,
    /// Its protection domain (register memory here).
    pub pd: Pd,
    /// The private data the peer sent with its accept or connect request (as
    /// the CM delivers it: padded with zeros to the message's field).
    pub peer_data: Vec<u8>,
    /// The CM identifier, on a channel of its own.
    pub id: CmId,
}

impl CmConn {
    /// Disconnects and waits (until `deadline`) for the CM to confirm, which
    /// happens when the peer answers (its [`wait_disconnect`](Self::wait_disconnect)
    /// or its drop).
    pub fn disconnect(self, deadline: Instant) -> Result<()> {
        self.id.disconnect()?;
        self.id.expect(CmEventType::DISCONNECTED, deadline).map(drop)
    }

    /// Waits (until `deadline`) for the peer to disconnect, then answers it
    /// (`rdma_disconnect` sends the reply the peer's disconnect waits for).
    pub fn wait_disconnect(&self, deadline: Instant) -> Result<()> {
        self.id.expect(CmEventType::DISCONNECTED, deadline)?;
        // The connection is down either way; a failed reply only delays the peer.
        let _ = self.id.disconnect();
        Ok(())
    }
}

fn parts(id: &CmId, opts: &CmOpts) -> Result<(Pd, Cq, Cq, Qp)> {
    let name = id.device_name().ok_or(Error::BadArgument {
        op: "opening the device of an RDMA CM id",
        what: "the id",
        why: "is bound to no RDMA device: bind or resolve an address on an RDMA device's netdev",
    })?;
    let ctx = Context::open(&name)?;
    let pd = Pd::alloc(&ctx)?;
    let send_cq = Cq::create(&ctx, opts.cq_depth)?;
    let recv_cq = Cq::create(&ctx, opts.cq_depth)?;
    let qp = Qp::builder(&pd, crate::prim::QpType::RC, &send_cq, &recv_cq).caps(opts.caps).build()?;
    Ok((pd, send_cq, recv_cq, qp))
}

/// Connects an RC QP to the listener at `addr` (resolve address and route,
/// connect, establish), each step bounded by `opts.timeout`. A rejection, an
/// absent listener, an unresolvable address: [`Error::CmEvent`] or [`Error::Timeout`].
pub fn connect_rc_cm(addr: SocketAddr, opts: &CmOpts) -> Result<CmConn> {
    let ch = EventChannel::create()?;
    let id = CmId::create(&ch, PortSpace::Rc)?;
    id.resolve_addr(None, addr, opts.timeout)?;
    id.expect(CmEventType::ADDR_RESOLVED, Instant::now() + opts.timeout + Duration::from_secs(1))?;
    id.resolve_route(opts.timeout)?;
    id.expect(CmEventType::ROUTE_RESOLVED, Instant::now() + opts.timeout + Duration::from_secs(1))?;
    let (pd, send_cq, recv_cq, qp) = parts(&id, opts)?;
    id.set_access(opts.access);
    id.connect(&qp, &opts.param())?;
    // The id has the channel to itself. On iWARP the kernel's iWARP CM
    // brings the QP to RTS itself and the reply is `ESTABLISHED`; elsewhere
    // it is `CONNECT_RESPONSE`, and `establish` moves the QP and answers.
    let ev = id.channel().wait(Instant::now() + opts.timeout)?;
    let ev = if ev.kind() == CmEventType::ESTABLISHED {
        ev.expect(CmEventType::ESTABLISHED)?
    } else {
        let ev = ev.expect(CmEventType::CONNECT_RESPONSE)?;
        id.establish(&qp)?;
        ev
    };
    Ok(CmConn { qp, send_cq, recv_cq, pd, peer_data: ev.private_data().to_vec(), id })
}

/// A listening RC CM id: connect requests queue on its channel.
#[derive(Debug)]
pub struct CmListener {
    id: CmId,
}

/// A connect request taken from a [`CmListener`], on a channel of its own:
/// accept or reject it from any thread, without holding up the listener.
#[derive(Debug)]
pub struct CmRequest {
    id: CmId,
    /// The private data of the request (padded to 56 bytes by the CM).
    pub private_data: Vec<u8>,
}

impl CmListener {
    /// Binds to `addr` (port 0: any; see [`local_addr`](Self::local_addr)) and listens.
    pub fn bind(addr: SocketAddr, backlog: i32) -> Result<CmListener> {
        let ch = EventChannel::create()?;
        let id = CmId::create(&ch, PortSpace::Rc)?;
        id.bind(addr)?;
        id.listen(backlog)?;
        Ok(CmListener { id })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.local_addr()
    }

    /// The listening id.
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// The next connect request, waiting until `deadline`.
    pub fn next_request(&self, deadline: Instant) -> Result<CmRequest> {
        loop {
            let mut ev = self.id.expect(CmEventType::CONNECT_REQUEST, deadline)?;
            if let Some(mut id) = ev.take_request() {
                id.migrate(&EventChannel::create()?)?;
                return Ok(CmRequest { id, private_data: ev.private_data().to_vec() });
            }
        }
    }
}

impl CmRequest {
    /// The request's id (e.g. for [`CmId::reject`] or [`CmId::device_name`]).
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// Builds an RC QP on the request's device, accepts, and waits (until
    /// `opts.timeout`) for the connection to be established.
    pub fn accept(self, opts: &CmOpts) -> Result<CmConn> {
        self.accept_with(opts, |_, _| Ok::<(), Error>(())).map(|((), conn)| conn)
    }

    /// As [`accept`](Self::accept), with `before` run on the QP once the CM
    /// has moved it to INIT and before the accept goes out: post there the
    /// receives the peer's first SENDs need. On iWARP the peer may send as
    /// soon as it sees the connection, and a SEND that finds no receive
    /// ends the connection (RoCE's RNR retries cover it); C's `rping`
    /// client sends at once. An error of `before` is returned and the
    /// request is not accepted.
    ///
    /// What `before` made comes first in the result, so that
    /// `let (bufs, conn) = req.accept_with(..)?` drops the connection (and
    /// its QP, which holds the posted receives) before the buffers. If the
    /// accept fails after `before`, the QP is destroyed before what `before`
    /// made is dropped.
    pub fn accept_with<T, E: From<Error>>(
        self,
        opts: &CmOpts,
        before: impl FnOnce(&Pd, &Qp) -> std::result::Result<T, E>,
    ) -> std::result::Result<(T, CmConn), E> {
        let (pd, send_cq, recv_cq, qp) = parts(&self.id, opts)?;
        self.id.set_access(opts.access);
        self.id.modify_qp(&qp, crate::prim::QpState::INIT)?;
        let made = before(&pd, &qp)?;
        let accepted = self
            .id
            .accept(&qp, &opts.param())
            .and_then(|()| self.id.expect(CmEventType::ESTABLISHED, Instant::now() + opts.timeout).map(drop));
        if let Err(e) = accepted {
            // The receives `before` posted point into `made`: the QP goes
            // first.
            drop(qp);
            drop(made);
            return Err(e.into());
        }
        // No check of the QP's state here: siw leaves the state out of its
        // ibv_query_qp answer.
        Ok((made, CmConn { qp, send_cq, recv_cq, pd, peer_data: self.private_data, id: self.id }))
    }

    /// Rejects, with private data for the peer (at most 148 bytes).
    pub fn reject(self, private_data: &[u8]) -> Result<()> {
        self.id.reject(private_data)
    }
}

/// Takes the next connect request of `listener` and accepts it (see
/// [`CmListener::next_request`] and [`CmRequest::accept`] to accept many
/// clients at once).
pub fn accept_rc_cm(listener: &CmListener, opts: &CmOpts) -> Result<CmConn> {
    listener.next_request(Instant::now() + opts.timeout)?.accept(opts)
}
