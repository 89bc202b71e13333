//! perftest's `-R`: the test's QPs connected through rdma_cm.
//!
//! As perftest does it (`create_rdma_cm_connection`): after one message
//! each way on the exchange, the server listens on the test's port on every
//! address (the exchange's listener is gone by then) and accepts one
//! connection per QP, the i-th request for QP i; the client connects its QPs
//! one after another, retrying while the server's listener is not up yet
//! (perftest's client tries 10 times, 100 ms apart). Then one more message
//! each way. The QPs are ordinary `prim::Qp`s the CM moves to RTS with the
//! attributes `rdma_init_qp_attr` gives (path MTU and GID from the route, so
//! `-m` and `-x` do not apply to them).
//!
//! With `-c UD` (perftest's UD over rdma_cm), the ids are in the UDP port
//! space and a connection is a SIDR exchange: the client's `rdma_connect`
//! asks, the server's `rdma_accept` answers with its QPN and the Q_Key the
//! CM gave its QP (`RDMA_UDP_QKEY`, not perftest's own `0x11111111`), and
//! the client's `ESTABLISHED` event carries both and an address vector to
//! the server. The server learns nothing of the client this way, so where
//! it sends too (latency tests and `-b`) the client then announces its QP:
//! one SEND with its QPN as immediate data (and as the 4-byte payload),
//! which the server has a receive posted for before it answers; the server
//! makes its address handle from that receive (`ibv_init_ah_from_wc`) and
//! sends with its own QP's Q_Key.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrddmma::prim::cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use rrddmma::prim::{Ah, Cq, Mr, Pd, Qp, QpAttr, QpState, RecvWr, SendWr, Wc, GRH_LEN};

use crate::ud::UdPeer;

type Res<T> = Result<T, String>;

/// The ids of the connected QPs: dropping one disconnects its QP, so they
/// live as long as the test.
pub struct Conns {
    ids: Vec<CmId>,
    /// `-c UD`: how each QP reaches its peer, where this side sends (empty
    /// on a server that only receives).
    pub ud: Vec<UdPeer>,
}

/// What a UD connection needs from the test's resources.
pub struct Ud<'a> {
    pub pd: &'a Pd,
    pub mr: &'a Mr,
    /// An offset into `mr` with [`HELLO_RX`] bytes nothing else uses
    /// during set-up: the announcement's source or receive buffer.
    pub scratch: usize,
    /// The send CQ of each QP.
    pub send_cqs: Vec<&'a Cq>,
    pub recv_cq: &'a Cq,
    /// Whether the server sends too (latency tests, `-b`): then the client
    /// announces its QP after connecting.
    pub announce: bool,
}

/// Bytes of the announcement's receive: the GRH and the 4-byte QPN (as
/// perftest posts it).
pub const HELLO_RX: usize = GRH_LEN + 4;

/// Polls `cq` for one successful completion until `deadline` (set-up only:
/// sleeps between polls); `Ok(None)` when none came.
fn completion(cq: &Cq, deadline: Instant, what: &str) -> Res<Option<Wc>> {
    loop {
        match cq.poll_one() {
            Ok(Some(wc)) if wc.is_success() => return Ok(Some(wc)),
            Ok(Some(wc)) => return Err(format!("rdma_cm: {what} completed with status {:?}", wc.status())),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(200)),
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("rdma_cm: {what}: ibv_poll_cq: {e}")),
        }
    }
}

impl Conns {
    /// The first PSN the CM gave each QP (for the report; the CM chose it).
    pub fn sq_psns(&self) -> Vec<u32> {
        self.ids.iter().map(|id| id.qp_attr(QpState::RTS).map_or(0, |a| a.as_raw().sq_psn)).collect()
    }
}

fn port_space(ud: bool) -> PortSpace {
    if ud {
        PortSpace::Ud
    } else {
        PortSpace::Rc
    }
}

fn param(rd_atomic: u8) -> ConnParam<'static> {
    // perftest: responder resources and initiator depth of its outstanding
    // reads, 7 transport and RNR retries.
    ConnParam { responder_resources: rd_atomic, initiator_depth: rd_atomic, ..ConnParam::default() }
}

fn same_device(id: &CmId, device: &str, what: &str) -> Res<()> {
    match id.device_name() {
        Some(d) if d == device => Ok(()),
        Some(d) => Err(format!(
            "rdma_cm: {what} goes through device {d}, but the test runs on {device}: give -d {d} (or no -d)"
        )),
        None => Err(format!("rdma_cm: {what} is bound to no device")),
    }
}

/// Client: connects `qps` (all on `device`) to the server at `addr`; on
/// UD also announces each QP where `ud` says so.
pub fn connect(
    addr: SocketAddr,
    device: &str,
    qps: &[Qp],
    rd_atomic: u8,
    wait: Duration,
    ud: Option<Ud>,
) -> Res<Conns> {
    let start = Instant::now();
    let mut conns = Conns { ids: Vec::with_capacity(qps.len()), ud: Vec::new() };
    for (i, qp) in qps.iter().enumerate() {
        let (id, peer) = loop {
            match connect_one(addr, device, qp, rd_atomic, &ud) {
                Ok(c) => break c,
                Err(e) if start.elapsed() < wait => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                    // A UD attempt left its QP in RTS; the next starts from RESET.
                    if ud.is_some() {
                        qp.modify(&QpAttr::new(QpState::RESET))
                            .map_err(|e| format!("rdma_cm: resetting QP {i} to connect again: {e}"))?;
                    }
                }
                Err(e) => return Err(format!("rdma_cm: connecting QP {i} to {addr}: {e}")),
            }
        };
        conns.ids.push(id);
        if let (Some(u), Some(peer)) = (&ud, peer) {
            if u.announce {
                announce(u, i, qp, &peer, start + wait)?;
            }
            conns.ud.push(peer);
        }
    }
    Ok(conns)
}

fn connect_one(addr: SocketAddr, device: &str, qp: &Qp, rd_atomic: u8, ud: &Option<Ud>) -> Res<(CmId, Option<UdPeer>)> {
    let step = Duration::from_secs(2);
    let ch = EventChannel::create().map_err(|e| e.to_string())?;
    let id = CmId::create(&ch, port_space(ud.is_some())).map_err(|e| e.to_string())?;
    let expect = |kind, what: &str| id.expect(kind, Instant::now() + step * 2).map_err(|e| format!("{what}: {e}"));
    id.resolve_addr(None, addr, step).map_err(|e| e.to_string())?;
    expect(CmEventType::ADDR_RESOLVED, "resolving the address")?;
    id.resolve_route(step).map_err(|e| e.to_string())?;
    expect(CmEventType::ROUTE_RESOLVED, "resolving the route")?;
    same_device(&id, device, &format!("the route to {addr}"))?;
    id.connect(qp, &param(rd_atomic)).map_err(|e| e.to_string())?;
    let Some(u) = ud else {
        expect(CmEventType::CONNECT_RESPONSE, "connecting")?;
        id.establish(qp).map_err(|e| e.to_string())?;
        return Ok((id, None));
    };
    // SIDR: the reply comes as ESTABLISHED with the server's QPN, Q_Key
    // and an address vector to it.
    let ev = expect(CmEventType::ESTABLISHED, "connecting (SIDR)")?;
    let p = *ev.ud_param().ok_or("the server's SIDR reply carried no UD parameters")?;
    let ah = Ah::create(u.pd, &p.ah_attr).map_err(|e| format!("creating the address handle to the server: {e}"))?;
    Ok((id, Some(UdPeer { ah, qpn: p.qpn, qkey: p.qkey })))
}

/// UD client: tells the server QP `i`'s number, as perftest does: a SEND
/// with the QPN as immediate data and as the 4-byte payload.
fn announce(u: &Ud, i: usize, qp: &Qp, peer: &UdPeer, deadline: Instant) -> Res<()> {
    let qpn = qp.qpn();
    let at = u.mr.addr() as usize + u.scratch;
    // SAFETY: `scratch` names HELLO_RX bytes of the registered buffer that
    // nothing else uses or has posted during set-up.
    unsafe { std::ptr::write_unaligned(at as *mut [u8; 4], qpn.to_ne_bytes()) };
    let sges = [u.mr.sge(u.scratch, 4)];
    // SAFETY: the source lies in `mr`; the completion is awaited below,
    // before the region is used again.
    unsafe { qp.post_send(&mut [SendWr::send_imm(&sges, qpn).ud(&peer.ah, peer.qpn, peer.qkey).signaled()]) }
        .map_err(|e| format!("rdma_cm: announcing QP {i} to the server: ibv_post_send: {e}"))?;
    let what = format!("announcing QP {i} to the server");
    match completion(u.send_cqs[i], deadline, &what)? {
        Some(_) => Ok(()),
        None => Err(format!("rdma_cm: {what}: the SEND did not complete in time")),
    }
}

/// Server: the QPs' listener, on `port` on every address. It goes up
/// before the exchange message that lets the client connect: perftest's
/// client gives up (and crashes on its retry) when its first request finds
/// nobody listening.
pub struct Listener {
    id: CmId,
}

/// Listens on `port` (every address) for up to `backlog` connections, in
/// the UDP port space when `ud`.
pub fn listen(port: u16, backlog: usize, ud: bool) -> Res<Listener> {
    let ch = EventChannel::create().map_err(|e| e.to_string())?;
    let id = CmId::create(&ch, port_space(ud)).map_err(|e| e.to_string())?;
    id.bind(SocketAddr::from(([0, 0, 0, 0], port)))
        .map_err(|e| format!("rdma_cm: binding the QPs' listener to port {port}: {e}"))?;
    id.listen(i32::try_from(backlog).unwrap_or(i32::MAX))
        .map_err(|e| format!("rdma_cm: listening on port {port}: {e}"))?;
    Ok(Listener { id })
}

/// Server: accepts one connection per QP on `l`, the i-th for `qps[i]`; on
/// UD also takes each QP's announcement where `ud` says so.
pub fn accept(l: Listener, device: &str, qps: &[Qp], rd_atomic: u8, wait: Duration, ud: Option<Ud>) -> Res<Conns> {
    let deadline = Instant::now() + wait;
    let listener = l.id;
    let mut conns = Conns { ids: Vec::with_capacity(qps.len()), ud: Vec::new() };
    for (i, qp) in qps.iter().enumerate() {
        let what = |e: rrddmma::prim::Error| format!("rdma_cm: accepting the connection of QP {i}: {e}");
        let mut ev = listener.expect(CmEventType::CONNECT_REQUEST, deadline).map_err(what)?;
        let Some(mut id) = ev.take_request() else {
            return Err(format!("rdma_cm: the connect request for QP {i} carried no id"));
        };
        // Its later events (ESTABLISHED, DISCONNECTED) on a channel of its own.
        id.migrate(&EventChannel::create().map_err(what)?).map_err(what)?;
        same_device(&id, device, &format!("the connection of QP {i}"))?;
        match &ud {
            None => {
                id.accept(qp, &param(rd_atomic)).map_err(what)?;
                id.expect(CmEventType::ESTABLISHED, deadline).map_err(what)?;
            }
            // SIDR: the reply is all; no ESTABLISHED follows on this side.
            Some(u) if !u.announce => id.accept(qp, &param(rd_atomic)).map_err(what)?,
            Some(u) => {
                // The announcement's receive goes up before the reply that
                // lets the client send it (INIT first: a QP in RESET takes none).
                id.modify_qp(qp, QpState::INIT).map_err(what)?;
                let sges = [u.mr.sge(u.scratch, HELLO_RX as u32)];
                // SAFETY: the region lies in `mr` and is read only after the
                // receive completes below.
                unsafe { qp.post_recv(&mut [RecvWr::new(&sges, 0)]) }.map_err(what)?;
                id.accept(qp, &param(rd_atomic)).map_err(what)?;
                conns.ud.push(announced(u, i, &id, deadline)?);
            }
        }
        conns.ids.push(id);
    }
    Ok(conns)
}

/// UD server: the client's announcement of QP `i`, and the way back to it:
/// an address handle from the receive, the QPN it came from, and this QP's
/// own Q_Key (as perftest's server sends with).
fn announced(u: &Ud, i: usize, id: &CmId, deadline: Instant) -> Res<UdPeer> {
    let Some(wc) = completion(u.recv_cq, deadline, &format!("the client's announcement of QP {i}"))? else {
        return Err(format!(
            "rdma_cm: QP {i}: the client did not announce its QP (a UD client does after connecting in latency \
             tests and with -b; do both sides run the same test, both with or without -b?)"
        ));
    };
    if wc.imm().is_none() {
        return Err(format!(
            "rdma_cm: QP {i} received a message without immediate data where the client's announcement of its QP \
             was due (do both sides run the same test with -R -c UD?)"
        ));
    }
    let mut grh = [0u8; GRH_LEN];
    // SAFETY: the receive into this region of `mr` has completed; nothing
    // else writes it.
    unsafe {
        std::ptr::copy_nonoverlapping((u.mr.addr() as usize + u.scratch) as *const u8, grh.as_mut_ptr(), GRH_LEN)
    };
    let ah = Ah::from_wc(u.pd, id.port_num(), &wc, &grh)
        .map_err(|e| format!("rdma_cm: the address handle back to the client of QP {i}: {e}"))?;
    let qkey = id.qp_attr(QpState::INIT).map_err(|e| format!("rdma_cm: the Q_Key of QP {i}: {e}"))?.as_raw().qkey;
    Ok(UdPeer { ah, qpn: wc.src_qp(), qkey })
}
