//! Async endpoints connected through the RDMA CM (features `tokio` and `cm`):
//! by IP address, with no TCP side channel.
//!
//! Each of the endpoint's two QPs has a CM connection of its own: the data
//! QP's and the control QP's. iWARP needs this (every iWARP RC QP is the
//! end of its own TCP stream and is driven to RTS by the kernel's iWARP
//! CM); on RoCE and InfiniBand the same two connections are made, so there
//! is one way to connect. The client makes both at once, each carrying a
//! hello in its private data: a tag naming the role (data or control) and a
//! 64-bit token drawn from the kernel's random source for this endpoint.
//! The listener pairs the two requests by token and peer address before it
//! opens a device or registers a pool, accepts both with its hello echoed,
//! and hands over the endpoint when both are established and the client
//! has spoken. Each side posts its control receives before the message that
//! lets the peer send (the control connection's request or accept).
//!
//! The client speaks first: once both its connections are established it
//! sends a greeting (a keepalive) on the control QP, and the listener's side
//! sends nothing on either QP before that message arrives; `accept` hands
//! the endpoint over only then. iWARP's MPA start-up has the connecting side
//! send first: siw's connecting side ends the connection when bytes follow
//! the CM's reply on its TCP stream before it has processed that reply,
//! which an eager listener could cause. The greeting costs one message's
//! latency on every transport, so there is one way to connect.
//!
//! The peer is untrusted: a request that is not a hello is rejected; a half
//! whose other half does not come within [`AioOpts::setup_timeout`] is
//! rejected then, and at most [`HALVES_MAX`] halves wait at once, at most
//! [`PEER_HALVES_MAX`] of them from one address (one more is rejected at
//! once).

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::{timeout_at, Instant};

use super::endpoint::{AioOpts, Gone, Parts, RcEndpoint, Watch};
use super::error::{Error, Result};
use crate::prim::cm::{CmEvent, CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use crate::prim::{Context, Qp, QpState};

/// Connect requests the listener keeps waiting for their other half, at most.
const HALVES_MAX: usize = 64;
/// Of those, at most this many from one peer address, so that one peer
/// cannot keep the others out (a client has two halves per endpoint it
/// connects; this lets one host connect 8 endpoints at once).
const PEER_HALVES_MAX: usize = 16;
/// The listen backlog. On iWARP it also bounds the connect requests the
/// kernel's iWARP CM holds before `accept` reads them (one more is dropped,
/// and its client sees `REJECTED` with no reason), so a burst of
/// [`HALVES_MAX`] halves and more fits.
const BACKLOG: i32 = 4 * HALVES_MAX as i32;

/// Tags of the two connections' hellos.
const DATA_TAG: &[u8; 4] = b"rA2d";
const CTRL_TAG: &[u8; 4] = b"rA2c";
/// A hello: the tag, then the token (little-endian).
const HELLO_LEN: usize = 12;

/// Which of the endpoint's QPs a CM connection carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Data,
    Ctrl,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Data => "data",
            Role::Ctrl => "control",
        }
    }
}

fn hello(role: Role, token: u64) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..4].copy_from_slice(match role {
        Role::Data => DATA_TAG,
        Role::Ctrl => CTRL_TAG,
    });
    b[4..].copy_from_slice(&token.to_le_bytes());
    b
}

/// The role and token of a hello (the CM pads private data with zeros).
fn parse_hello(data: &[u8]) -> Result<(Role, u64)> {
    let role = match data.get(..4) {
        Some(t) if t == DATA_TAG => Some(Role::Data),
        Some(t) if t == CTRL_TAG => Some(Role::Ctrl),
        _ => None,
    };
    match (role, data.get(4..HELLO_LEN)) {
        (Some(role), Some(t)) => Ok((role, u64::from_le_bytes(t.try_into().expect("8 bytes")))),
        _ => Err(Error::Protocol(format!(
            "the peer's CM private data ({} bytes) is not an async endpoint's hello: is the peer an \
             rrddmma RcEndpoint connecting with connect_cm / Listener::bind_cm of this version?",
            data.len()
        ))),
    }
}

/// A fresh token from the kernel's random source.
fn token() -> Result<u64> {
    let mut b = [0u8; 8];
    crate::ctrl::auth::os_random(&mut b).map_err(Error::io("draw the RDMA CM connection token (getrandom)", None))?;
    Ok(u64::from_le_bytes(b))
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

/// The connection parameters of `role`'s connection: the data QP gets the
/// READ and atomic depths of `o.connect` on `ctx` (those set, else the
/// device's: `ConnectOpts::with_device_rd_atomic`); the control QP takes
/// only SENDs.
fn conn_param<'a>(o: &AioOpts, ctx: &Context, role: Role, private_data: &'a [u8]) -> Result<ConnParam<'a>> {
    let (responder_resources, initiator_depth) = match role {
        Role::Data => {
            let (init, dest) = o.connect.with_device_rd_atomic(ctx)?.rd_atomic();
            (dest, init)
        }
        Role::Ctrl => (0, 0),
    };
    Ok(ConnParam {
        private_data,
        responder_resources,
        initiator_depth,
        retry_count: o.connect.retry_cnt,
        rnr_retry_count: o.connect.rnr_retry,
    })
}

/// One of an endpoint's two CM connections: an id with an event channel of
/// its own.
struct Conn {
    id: CmId,
    events: Events,
}

impl Conn {
    /// A new id with `addr` resolved (address, then route), each step
    /// bounded by [`AioOpts::setup_timeout`].
    async fn resolve(addr: SocketAddr, o: &AioOpts) -> Result<Conn> {
        let ch = EventChannel::create()?;
        let events = Events::new(&ch)?;
        let id = CmId::create(&ch, PortSpace::Rc)?;
        id.resolve_addr(None, addr, o.setup_timeout)?;
        events.expect(CmEventType::ADDR_RESOLVED, Instant::now() + o.setup_timeout).await?;
        id.resolve_route(o.setup_timeout)?;
        events.expect(CmEventType::ROUTE_RESOLVED, Instant::now() + o.setup_timeout).await?;
        Ok(Conn { id, events })
    }

    /// A connect request's id, moved to a channel of its own (its events do
    /// not mix with the listener's).
    fn adopt(mut id: CmId) -> Result<Conn> {
        let ch = EventChannel::create()?;
        id.migrate(&ch)?;
        Ok(Conn { events: Events::new(&ch)?, id })
    }

    /// Active side, after `connect`: the reply must echo `sent`. On iWARP
    /// the reply is `ESTABLISHED` (the kernel's iWARP CM has brought `qp` to
    /// RTS); elsewhere it is `CONNECT_RESPONSE`, and `establish` moves `qp`
    /// to RTS and answers.
    async fn connected(&self, qp: &Qp, role: Role, sent: &[u8; HELLO_LEN], deadline: Instant) -> Result<()> {
        let ev = self.events.next(Some(deadline), CmEventType::CONNECT_RESPONSE.waiting_for()).await?;
        let iwarp = ev.kind() == CmEventType::ESTABLISHED;
        let ev = ev.expect(if iwarp { CmEventType::ESTABLISHED } else { CmEventType::CONNECT_RESPONSE })?;
        if ev.private_data().get(..HELLO_LEN) != Some(&sent[..]) {
            return Err(Error::Protocol(format!(
                "the listener's accept of the {} connection does not echo its hello (role and token): is the \
                 peer an rrddmma Listener::bind_cm of this version?",
                role.name()
            )));
        }
        if !iwarp {
            self.id.establish(qp)?;
        }
        Ok(())
    }
}

/// Opens the device both connections are on.
fn device_of(data: &Conn, ctrl: &Conn) -> Result<Context> {
    let dev = data.id.device_name().ok_or(crate::prim::Error::BadArgument {
        op: "opening the device of an RDMA CM id",
        what: "the id",
        why: "is bound to no RDMA device: bind or resolve an address on an RDMA device's netdev",
    })?;
    let other = ctrl.id.device_name();
    if other.as_deref() != Some(dev.as_str()) {
        return Err(Error::Protocol(format!(
            "the data connection is on {dev} and the control connection on {}: both must come from one device",
            other.as_deref().unwrap_or("no device")
        )));
    }
    Ok(Context::open(&dev)?)
}

/// The endpoint's parts on `ctx` for its two connections, before either
/// side's connect or accept: both ids get the CM's ACK timeout, the data QP
/// `o.connect.access` ([`granted`](super::endpoint::granted): the CM alone grants none; the control QP takes only
/// SENDs, so no remote access at all), and the control QP its receives,
/// posted in INIT.
fn parts_for(ctx: Context, data: &Conn, ctrl: &Conn, o: &AioOpts) -> Result<Parts> {
    for c in [data, ctrl] {
        c.id.set_ack_timeout(o.connect.timeout)?;
    }
    data.id.set_access(super::endpoint::granted(&ctx, o.connect.access));
    let p = Parts::new(ctx, o)?;
    ctrl.id.modify_qp(&p.ctrl_qp, QpState::INIT)?;
    p.post_ctrl_recvs()?;
    Ok(p)
}

/// A connect request waiting for its other half.
struct Half {
    conn: Conn,
    role: Role,
    token: u64,
    peer: Option<IpAddr>,
    until: Instant,
}

/// Reject reasons (in the reject's private data).
const NOT_A_HELLO: &[u8] = b"rrddmma aio: not an RcEndpoint hello";
const NEVER_CAME: &[u8] = b"rrddmma aio: the other connection (data or control) with this token never came";
const TOO_MANY: &[u8] = b"rrddmma aio: too many connections wait for their other half; try again later";
const TOO_MANY_FROM: &[u8] =
    b"rrddmma aio: too many connections from this address wait for their other half; try again later";
const SAME_ROLE: &[u8] = b"rrddmma aio: two connections of one role named one token";

/// Accepts connections of [`RcEndpoint::connect_cm`] on an RDMA CM listener
/// (behind [`Listener::bind_cm`](super::Listener::bind_cm)).
pub(super) struct CmListen {
    id: CmId,
    events: Events,
    /// Requests waiting for their other half (at most [`HALVES_MAX`]); the
    /// lock also makes concurrent `accept`s take turns.
    halves: tokio::sync::Mutex<Vec<Half>>,
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
        id.listen(BACKLOG)?;
        Ok(CmListen { events: Events::new(&ch)?, id, halves: tokio::sync::Mutex::new(Vec::new()) })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.id.local_addr().ok_or_else(|| Error::Io {
            op: "read the RDMA CM listener's address: the id has none",
            addr: None,
            source: io::ErrorKind::NotConnected.into(),
        })
    }

    /// The next endpoint: its two connect requests paired by token and
    /// accepted. A request that is not a hello, a half whose other half does
    /// not come within `setup_timeout`, a half beyond [`HALVES_MAX`] (or
    /// beyond [`PEER_HALVES_MAX`] from one address) and two halves of one
    /// role are rejected (with a reason in the reject's private data) and
    /// skipped.
    ///
    /// The pairing takes turns among concurrent `accept`s; the set-up of a
    /// paired client (bounded by `setup_timeout`) does not, so a client
    /// that pairs and then stalls holds up only the `accept` that took it.
    pub async fn accept(&self, o: &AioOpts) -> Result<RcEndpoint> {
        let (data, ctrl, token) = self.pair(o).await?;
        accept_pair(data, ctrl, token, o).await
    }

    /// The next pair of halves: (data, control, token).
    async fn pair(&self, o: &AioOpts) -> Result<(Conn, Conn, u64)> {
        let mut halves = self.halves.lock().await;
        loop {
            let next = halves.iter().map(|h| h.until).min();
            let mut ev = match self.events.next(next, "waiting for a connect request").await {
                Ok(ev) => ev,
                // No request is queued and the oldest half is due.
                Err(Error::Timeout { .. }) => {
                    expire(&mut halves);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if ev.kind() != CmEventType::CONNECT_REQUEST {
                continue;
            }
            let Some(id) = ev.take_request() else { continue };
            let Ok((role, token)) = parse_hello(ev.private_data()) else {
                let _ = id.reject(NOT_A_HELLO);
                continue;
            };
            let peer = id.peer_addr().map(|a| a.ip());
            // A half past its bound still pairs with a request that was
            // queued behind it (its client was on time; this listener was
            // not reading); halves are expired only when room is needed or
            // nothing is queued.
            let Some(i) = halves.iter().position(|h| h.token == token && h.peer == peer) else {
                expire(&mut halves);
                if halves.len() >= HALVES_MAX {
                    let _ = id.reject(TOO_MANY);
                } else if halves.iter().filter(|h| h.peer == peer).count() >= PEER_HALVES_MAX {
                    let _ = id.reject(TOO_MANY_FROM);
                } else {
                    let until = Instant::now() + o.setup_timeout;
                    halves.push(Half { conn: Conn::adopt(id)?, role, token, peer, until });
                }
                continue;
            };
            let other = halves.swap_remove(i);
            if other.role == role {
                let _ = id.reject(SAME_ROLE);
                let _ = other.conn.id.reject(SAME_ROLE);
                continue;
            }
            let conn = Conn::adopt(id)?;
            return Ok(if role == Role::Data { (conn, other.conn, token) } else { (other.conn, conn, token) });
        }
    }
}

/// Rejects the halves whose other half did not come in time.
fn expire(halves: &mut Vec<Half>) {
    let now = Instant::now();
    halves.retain(|h| {
        let waiting = h.until > now;
        if !waiting {
            let _ = h.conn.id.reject(NEVER_CAME);
        }
        waiting
    });
}

/// Builds the endpoint on the device of a paired data and control request
/// and accepts both, the control receives posted first.
async fn accept_pair(data: Conn, ctrl: Conn, token: u64, o: &AioOpts) -> Result<RcEndpoint> {
    let ctx = match device_of(&data, &ctrl) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = data.id.reject(b"rrddmma aio: the data and control connections arrived on two devices");
            let _ = ctrl.id.reject(b"rrddmma aio: the data and control connections arrived on two devices");
            return Err(e);
        }
    };
    let p = parts_for(ctx, &data, &ctrl, o)?;
    ctrl.id.accept(&p.ctrl_qp, &conn_param(o, &p.ctx, Role::Ctrl, &hello(Role::Ctrl, token))?)?;
    data.id.accept(&p.data, &conn_param(o, &p.ctx, Role::Data, &hello(Role::Data, token))?)?;
    let deadline = Instant::now() + o.setup_timeout;
    tokio::try_join!(
        data.events.expect(CmEventType::ESTABLISHED, deadline),
        ctrl.events.expect(CmEventType::ESTABLISHED, deadline)
    )?;
    // Silent until the client's greeting (see the module's documentation).
    p.ctrl.wait_for_peer();
    let heard = std::sync::Arc::clone(&p.ctrl);
    let ep = p.start(o, watch_cm(data, ctrl));
    timeout_at(deadline, heard.heard()).await.map_err(|_| Error::Timeout {
        op: "waiting for the client's first control message after both RDMA CM connections were established",
        after: o.setup_timeout,
    })?;
    Ok(ep)
}

/// The connections' end as a [`Watch`]: `DISCONNECTED` on either (or the
/// device's removal, or a failing event channel) is a lost peer. Owns the
/// ids: when the endpoint closes, dropping them disconnects (the peer sees
/// `DISCONNECTED`).
fn watch_cm(data: Conn, ctrl: Conn) -> Watch {
    let gone = |r: Result<CmEvent>| match r {
        Ok(ev) => matches!(ev.kind(), CmEventType::DISCONNECTED | CmEventType::DEVICE_REMOVAL),
        Err(_) => true,
    };
    Box::pin(async move {
        // Moved whole: the loop below names only the `events` fields, and an
        // `async move` block captures just the fields it names, which would
        // drop the ids here. A dropped id is destroyed, and on iWARP the
        // kernel's CM then moves its QP to ERROR (its receives flushed) and
        // closes the TCP stream; elsewhere the peer is sent a disconnect.
        let (data, ctrl) = (data, ctrl);
        loop {
            let ended = tokio::select! {
                r = data.events.next(None, "waiting for the disconnect") => gone(r),
                r = ctrl.events.next(None, "waiting for the disconnect") => gone(r),
            };
            if ended {
                return Gone::Lost;
            }
        }
    })
}

#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
impl RcEndpoint {
    /// Connects to a [`Listener::bind_cm`](super::Listener::bind_cm) at `addr` through the RDMA CM,
    /// with two connections, one for the data QP
    /// and one for the control QP, made at once and paired by the listener
    /// through a random token in their private data. The device is the one
    /// the route to `addr` leaves from; `opts.device`, `opts.port` and the
    /// GID and MTU of `opts.connect` are not used. Each step (resolution,
    /// the two connections) is bounded by [`AioOpts::setup_timeout`]: a
    /// listener that answers one connection and not the other is
    /// [`Error::Timeout`]; one that answers with something other than the
    /// hello it was sent, [`Error::Protocol`]; a refused connection,
    /// [`Error::Verbs`] with the CM's `REJECTED` event and its reason.
    pub async fn connect_cm(addr: SocketAddr, o: &AioOpts) -> Result<RcEndpoint> {
        o.check_no_secret("RcEndpoint::connect_cm", &format!("any device (the RDMA CM path to {addr})"))?;
        let token = token()?;
        let (data, ctrl) = tokio::try_join!(Conn::resolve(addr, o), Conn::resolve(addr, o))?;
        let p = parts_for(device_of(&data, &ctrl)?, &data, &ctrl, o)?;
        let (hd, hc) = (hello(Role::Data, token), hello(Role::Ctrl, token));
        ctrl.id.connect(&p.ctrl_qp, &conn_param(o, &p.ctx, Role::Ctrl, &hc)?)?;
        data.id.connect(&p.data, &conn_param(o, &p.ctx, Role::Data, &hd)?)?;
        let deadline = Instant::now() + o.setup_timeout;
        tokio::try_join!(
            data.connected(&p.data, Role::Data, &hd, deadline),
            ctrl.connected(&p.ctrl_qp, Role::Ctrl, &hc, deadline)
        )?;
        p.ctrl.greet(&p.ctrl_qp)?;
        Ok(p.start(o, watch_cm(data, ctrl)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hellos_round_trip_and_foreign_data_is_refused() {
        let mut padded = hello(Role::Ctrl, 0x0123_4567_89ab_cdef).to_vec();
        padded.resize(56, 0);
        assert_eq!(parse_hello(&padded).unwrap(), (Role::Ctrl, 0x0123_4567_89ab_cdef));
        assert_eq!(parse_hello(&hello(Role::Data, 7)).unwrap(), (Role::Data, 7));
        for foreign in [&b"rping"[..], b"rA1c\x01\x02\x03\x04\x05\x06\x07\x08", b"rA2d\x01\x02"] {
            let e = parse_hello(foreign).unwrap_err();
            assert!(e.to_string().contains("not an async endpoint's hello"), "{e}");
        }
    }

    /// The remote access flags of `qp`, as the device reports them.
    fn access_of(qp: &crate::prim::Qp) -> u32 {
        let mut attr = crate::bindings::ibv_qp_attr::default();
        let mut init = std::mem::MaybeUninit::<crate::bindings::ibv_qp_init_attr>::zeroed();
        let mask = crate::bindings::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0 as i32;
        // SAFETY: live QP; both out-parameters are valid for writes.
        let rc = unsafe { crate::bindings::ibv_query_qp(qp.as_ptr(), &mut attr, mask, init.as_mut_ptr()) };
        assert_eq!(rc, 0, "ibv_query_qp");
        attr.qp_access_flags
    }

    /// D4: on the CM path the control QP takes no remote access (the CM
    /// grants none, and the endpoint sets none: it carries only SENDs),
    /// while the data QP has `AioOpts::connect`'s.
    #[test]
    #[ignore = "device test: needs the harness's CM device, RRDDMMA_CM_ADDR (cargo xtask vm)"]
    fn d4_control_qp_takes_no_remote_access_on_the_cm_path() {
        let ip: std::net::IpAddr = std::env::var("RRDDMMA_CM_ADDR").expect("RRDDMMA_CM_ADDR").parse().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let o = AioOpts::new("").pool_size(4 << 20).setup_timeout(std::time::Duration::from_secs(60));
            let l = super::super::Listener::bind_cm(SocketAddr::new(ip, 0), o.clone()).await.unwrap();
            let addr = l.local_addr().unwrap();
            let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect_cm(addr, &o));
            for (side, ep) in [("server", server.unwrap()), ("client", client.unwrap())] {
                let (data, ctrl) = ep.qps();
                assert_eq!(access_of(ctrl), 0, "{side}: the control QP's remote access");
                let write = crate::bindings::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
                assert_ne!(access_of(data) & write, 0, "{side}: the data QP's remote write (the query works)");
            }
        });
    }

    #[test]
    fn the_reject_reasons_fit_a_reject() {
        for why in [NOT_A_HELLO, NEVER_CAME, TOO_MANY, SAME_ROLE] {
            assert!(why.len() <= crate::prim::cm::private_data_max::RC_REJECT, "{}", String::from_utf8_lossy(why));
        }
    }
}
