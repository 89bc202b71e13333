//! Async endpoints connected through the RDMA CM (features `tokio` and `cm`):
//! by IP address, with no TCP side channel.
//!
//! The data QP is the CM's connection. The control QP rides on it: each side
//! names its control QP's number and first PSN in the private data of the
//! connect request and of the accept, and moves that QP with the CM's path
//! attributes (`rdma_init_qp_attr` of the data connection) and the peer's
//! numbers. Each side posts its control receives and brings its control QP
//! to RTS before the message that lets the peer send (the accept, the RTU),
//! so no extra round trip is needed.

use std::io;
use std::net::SocketAddr;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::{timeout_at, Instant};

use super::endpoint::{AioOpts, Gone, Parts, RcEndpoint, Watch};
use super::error::{Error, Result};
use crate::prim::cm::{CmEvent, CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use crate::prim::{Context, QpState};

/// Private data of both directions: a tag, then the control QP's number and
/// first PSN (little-endian).
const TAG: &[u8; 4] = b"rA1c";
const HELLO_LEN: usize = 12;

fn hello(qpn: u32, psn: u32) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..4].copy_from_slice(TAG);
    b[4..8].copy_from_slice(&qpn.to_le_bytes());
    b[8..].copy_from_slice(&psn.to_le_bytes());
    b
}

/// The peer's control QP number and PSN from its private data (which the CM
/// pads with zeros).
fn parse_hello(data: &[u8]) -> Result<(u32, u32)> {
    if data.len() < HELLO_LEN || &data[..4] != TAG {
        return Err(Error::Protocol(format!(
            "the peer's CM private data ({} bytes) is not an async endpoint's hello: is the peer an \
             rrddmma RcEndpoint connecting with connect_cm / Listener::bind_cm?",
            data.len()
        )));
    }
    let u32_at = |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().expect("4 bytes"));
    Ok((u32_at(4), u32_at(8)))
}

/// An event channel registered with the reactor.
struct Events(AsyncFd<EventChannel>);

impl Events {
    fn new(ch: &EventChannel) -> Result<Events> {
        // SAFETY: the channel owns its descriptor, which stays open while the
        // channel (a clone moved into the `AsyncFd`) lives, and `as_raw_fd`
        // always returns that descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(ch.clone(), Interest::READABLE) };
        Ok(Events(fd.map_err(|e| Error::Io {
            op: "register the RDMA CM event channel with the tokio reactor",
            addr: None,
            source: e.into_parts().1,
        })?))
    }

    /// The next event, by `deadline` if there is one (`waiting` names what
    /// for, in the timeout error).
    async fn next(&self, deadline: Option<Instant>, waiting: &'static str) -> Result<CmEvent> {
        let after = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        loop {
            let readable = match (deadline, after) {
                (Some(d), Some(after)) => {
                    timeout_at(d, self.0.readable()).await.map_err(|_| Error::Timeout { op: waiting, after })?
                }
                _ => self.0.readable().await,
            };
            let mut ready = readable.map_err(Error::io("wait on the RDMA CM event channel", None))?;
            match self.0.get_ref().get() {
                Ok(ev) => return Ok(ev),
                Err(e) if e.is_would_block() => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The next event, which must be `want` (else the CM's error, e.g. a
    /// `REJECTED` with the peer's reason).
    async fn expect(&self, want: CmEventType, deadline: Instant) -> Result<CmEvent> {
        Ok(self.next(Some(deadline), want.waiting_for()).await?.expect(want)?)
    }
}

fn conn_param<'a>(o: &AioOpts, private_data: &'a [u8]) -> ConnParam<'a> {
    ConnParam {
        private_data,
        responder_resources: o.connect.max_dest_rd_atomic,
        initiator_depth: o.connect.max_rd_atomic,
        retry_count: o.connect.retry_cnt,
        rnr_retry_count: o.connect.rnr_retry,
    }
}

/// Opens the device the id is bound to and builds the endpoint's objects;
/// the control QP goes to INIT with its receives posted.
fn parts_on(id: &CmId, o: &AioOpts) -> Result<Parts> {
    let dev = id.device_name().ok_or(crate::prim::Error::BadArgument {
        op: "opening the device of an RDMA CM id",
        what: "the id",
        why: "is bound to no RDMA device: bind or resolve an address on an RDMA device's netdev",
    })?;
    let p = Parts::new(Context::open(&dev)?, o)?;
    id.modify_qp(&p.ctrl_qp, QpState::INIT)?;
    p.post_ctrl_recvs()?;
    Ok(p)
}

/// Moves the control QP to RTR and RTS on the data connection's path, to
/// the peer's control QP.
fn ctrl_ready(id: &CmId, p: &Parts, peer: (u32, u32), my_psn: u32) -> Result<()> {
    p.ctrl_qp.modify(&id.qp_attr(QpState::RTR)?.dest_qpn(peer.0).rq_psn(peer.1))?;
    p.ctrl_qp.modify(&id.qp_attr(QpState::RTS)?.sq_psn(my_psn))?;
    Ok(())
}

/// Accepts connections of [`RcEndpoint::connect_cm`] on an RDMA CM listener
/// (behind [`Listener::bind_cm`](super::Listener::bind_cm)).
pub(super) struct CmListen {
    id: CmId,
    events: Events,
}

impl std::fmt::Debug for CmListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmListen").field("id", &self.id).finish_non_exhaustive()
    }
}

impl CmListen {
    pub fn bind(addr: SocketAddr) -> Result<CmListen> {
        let ch = EventChannel::create()?;
        let id = CmId::bound(&ch, PortSpace::Rc, addr)?;
        id.listen(64)?;
        Ok(CmListen { events: Events::new(&ch)?, id })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.id.local_addr().ok_or_else(|| Error::Io {
            op: "read the RDMA CM listener's address: the id has none",
            addr: None,
            source: io::ErrorKind::NotConnected.into(),
        })
    }

    /// The next connect request, accepted. A request that is not an async
    /// endpoint's is rejected (with a reason in the reject's private data)
    /// and skipped.
    pub async fn accept(&self, o: &AioOpts) -> Result<RcEndpoint> {
        loop {
            let mut ev = self.events.next(None, "waiting for a connect request").await?;
            if ev.kind() != CmEventType::CONNECT_REQUEST {
                continue;
            }
            let Some(mut id) = ev.take_request() else { continue };
            let peer = match parse_hello(ev.private_data()) {
                Ok(p) => p,
                Err(_) => {
                    let _ = id.reject(b"rrddmma aio: not an RcEndpoint hello");
                    continue;
                }
            };
            // Its own channel: its events do not mix with the listener's.
            let ch = EventChannel::create()?;
            id.migrate(&ch)?;
            let events = Events::new(&ch)?;
            id.set_ack_timeout(o.connect.timeout)?;
            // The data QP gets `o.connect.access` (the CM alone grants none).
            id.set_access(o.connect.access);
            let p = parts_on(&id, o)?;
            let psn = crate::prim::random_psn();
            ctrl_ready(&id, &p, peer, psn)?;
            id.accept(&p.data, &conn_param(o, &hello(p.ctrl_qp.qpn(), psn)))?;
            events.expect(CmEventType::ESTABLISHED, Instant::now() + o.setup_timeout).await?;
            return Ok(p.start(o, watch_cm(id, events)));
        }
    }
}

/// The connection's end as a [`Watch`]: `DISCONNECTED` (or the device's
/// removal, or a failing event channel) is a lost peer. Owns the id: when
/// the endpoint closes, dropping it disconnects (the peer sees `DISCONNECTED`).
fn watch_cm(id: CmId, events: Events) -> Watch {
    Box::pin(async move {
        let _id = id;
        loop {
            match events.next(None, "waiting for the disconnect").await {
                Ok(ev) if matches!(ev.kind(), CmEventType::DISCONNECTED | CmEventType::DEVICE_REMOVAL) => {
                    return Gone::Lost
                }
                Ok(_) => {}
                Err(_) => return Gone::Lost,
            }
        }
    })
}

#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
impl RcEndpoint {
    /// Connects to a [`Listener::bind_cm`](super::Listener::bind_cm) at `addr` through the RDMA CM
    /// (address and route resolution, then REQ/REP/RTU with the control
    /// QP's numbers in the private data). The device is the one the route
    /// to `addr` leaves from; `opts.device`, `opts.port` and the GID and MTU
    /// of `opts.connect` are not used. Each step is bounded by
    /// [`AioOpts::setup_timeout`]; a refused connection is
    /// [`Error::Verbs`] with the CM's `REJECTED` event and its reason.
    pub async fn connect_cm(addr: SocketAddr, o: &AioOpts) -> Result<RcEndpoint> {
        o.check_no_secret("RcEndpoint::connect_cm")?;
        let deadline = || Instant::now() + o.setup_timeout;
        let ch = EventChannel::create()?;
        let events = Events::new(&ch)?;
        let id = CmId::create(&ch, PortSpace::Rc)?;
        id.resolve_addr(None, addr, o.setup_timeout)?;
        events.expect(CmEventType::ADDR_RESOLVED, deadline()).await?;
        id.resolve_route(o.setup_timeout)?;
        events.expect(CmEventType::ROUTE_RESOLVED, deadline()).await?;
        id.set_ack_timeout(o.connect.timeout)?;
        // The data QP gets `o.connect.access` (the CM alone grants none).
        id.set_access(o.connect.access);
        let p = parts_on(&id, o)?;
        let psn = crate::prim::random_psn();
        id.connect(&p.data, &conn_param(o, &hello(p.ctrl_qp.qpn(), psn)))?;
        let rep = events.expect(CmEventType::CONNECT_RESPONSE, deadline()).await?;
        ctrl_ready(&id, &p, parse_hello(rep.private_data())?, psn)?;
        id.establish(&p.data)?;
        Ok(p.start(o, watch_cm(id, events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_foreign_data_is_refused() {
        let mut padded = hello(0x12_3456, 0xab_cdef).to_vec();
        padded.resize(56, 0);
        assert_eq!(parse_hello(&padded).unwrap(), (0x12_3456, 0xab_cdef));
        let e = parse_hello(b"rping").unwrap_err();
        assert!(e.to_string().contains("not an async endpoint's hello"), "{e}");
    }
}
