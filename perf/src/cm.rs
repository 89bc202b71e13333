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
//!
//! Anyone who knows the QPN can send to a UD QP with the well-known CM
//! Q_Key, so the server takes as the announcement only a datagram that
//! comes from the peer of that QP's connection ([`judge`]): received on
//! that QP, with the sender's QPN as its immediate data, and, on Ethernet
//! ports, from the GID of the connecting address. Other datagrams are
//! ignored (the receive is posted again) until the right one or the
//! deadline comes.
//!
//! The QPs' listener takes connect requests from the exchange's peer only
//! (the address its exchange connection came from, [`admit`]): a stranger
//! who connects to the test's port while the server waits is rejected and
//! cannot take one of its QPs.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use rrddmma::prim::cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use rrddmma::prim::{Ah, AhAttr, Cq, Gid, Mr, Pd, Qp, QpAttr, QpState, RecvWr, SendWr, Wc, WcStatus, GRH_LEN};

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

/// The remote access of a QP connected through rdma_cm, as on the other
/// paths: the tests WRITE, READ and use atomics (the CM alone grants none).
fn access() -> rrddmma::prim::AccessFlags {
    use rrddmma::prim::AccessFlags;
    AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
}

/// `--retry_count`: rdma_cm's retry count of the connections (unset: the
/// crate's default).
static RETRY_COUNT: std::sync::OnceLock<u8> = std::sync::OnceLock::new();

/// Sets `--retry_count` for the connections this process makes (once).
pub fn set_retry_count(n: u8) {
    let _ = RETRY_COUNT.set(n);
}

fn param(rd_atomic: u8) -> ConnParam<'static> {
    // perftest: responder resources and initiator depth of its outstanding
    // reads, 7 transport and RNR retries.
    let d = ConnParam::default();
    ConnParam {
        responder_resources: rd_atomic,
        initiator_depth: rd_atomic,
        retry_count: RETRY_COUNT.get().copied().unwrap_or(d.retry_count),
        ..d
    }
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
    id.set_access(access());
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
    let sges = [u.mr.sge_at(u.scratch, 4)];
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

/// Whether a connect request from `from` may take one of the test's QPs:
/// only the exchange's peer (`peer`, the IP address its exchange
/// connection came from) may; `Err` says why not.
pub fn admit(from: Option<IpAddr>, peer: IpAddr) -> Res<()> {
    match from {
        Some(a) if a == peer => Ok(()),
        Some(a) => Err(format!("a connect request from {a}, not from the exchange's peer {peer}")),
        None => Err(format!("a connect request with no source address (the exchange's peer is {peer})")),
    }
}

/// Server: accepts one connection per QP on `l`, the i-th for `qps[i]`, from
/// the exchange's peer `peer` only (requests from other addresses are
/// rejected and counted, see [`admit`]); on UD also takes each QP's
/// announcement where `ud` says so.
pub fn accept(
    l: Listener,
    device: &str,
    qps: &[Qp],
    rd_atomic: u8,
    wait: Duration,
    peer: IpAddr,
    ud: Option<Ud>,
) -> Res<Conns> {
    let deadline = Instant::now() + wait;
    let listener = l.id;
    let mut conns = Conns { ids: Vec::with_capacity(qps.len()), ud: Vec::new() };
    let refused = std::cell::Cell::new(0u32);
    for (i, qp) in qps.iter().enumerate() {
        let what = |e: rrddmma::prim::Error| {
            let others = if refused.get() > 0 {
                let n = refused.get();
                format!(" ({n} request(s) from other addresses than the exchange's peer {peer} rejected)")
            } else {
                String::new()
            };
            format!("rdma_cm: accepting the connection of QP {i}: {e}{others}")
        };
        let mut id = loop {
            let mut ev = listener.expect(CmEventType::CONNECT_REQUEST, deadline).map_err(what)?;
            let Some(id) = ev.take_request() else {
                return Err(format!("rdma_cm: the connect request for QP {i} carried no id"));
            };
            match admit(id.peer_addr().map(|a| a.ip()), peer) {
                Ok(()) => break id,
                Err(why) => {
                    refused.set(refused.get() + 1);
                    eprintln!("rrddmma-perf: rdma_cm: QP {i}: rejected {why}");
                    // Dropping the id destroys it; the reject tells the peer first.
                    let _ = id.reject(&[]);
                }
            }
        };
        // Its later events (ESTABLISHED, DISCONNECTED) on a channel of its own.
        id.migrate(&EventChannel::create().map_err(what)?).map_err(what)?;
        same_device(&id, device, &format!("the connection of QP {i}"))?;
        id.set_access(access());
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
                let sges = [u.mr.sge_at(u.scratch, HELLO_RX)];
                // SAFETY: the region lies in `mr` and is read only after the
                // receive completes below.
                unsafe { qp.post_recv(&mut [RecvWr::new(&sges, 0)]) }.map_err(what)?;
                id.accept(qp, &param(rd_atomic)).map_err(what)?;
                conns.ud.push(announced(u, i, qp, &id, deadline)?);
            }
        }
        conns.ids.push(id);
    }
    Ok(conns)
}

/// One datagram received while the server waits for an announcement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heard {
    pub status: WcStatus,
    /// The QP it arrived on.
    pub qp_num: u32,
    /// The sender's QPN.
    pub src_qp: u32,
    pub imm: Option<u32>,
    /// The sender's GID (from the GRH, `ibv_init_ah_from_wc`), when known.
    pub sender: Option<Gid>,
}

/// Whom the announcement of one QP must come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The QP the announcement is for.
    pub qpn: u32,
    /// The GID of the connection's peer: on Ethernet ports (RoCE), the
    /// address it connected from (IPv4-mapped for IPv4); `None` on
    /// InfiniBand, where a GID is not the IP address.
    pub peer: Option<Gid>,
}

impl Expected {
    /// The GID RoCE gives the IP address `ip` (IPv4-mapped for IPv4).
    pub fn gid_of(ip: IpAddr) -> Gid {
        let v6 = match ip {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        Gid(v6.octets())
    }
}

/// Whether `h` is the announcement `e` waits for: `Err` says why not.
pub fn judge(h: &Heard, e: &Expected) -> Res<()> {
    if h.status != WcStatus::SUCCESS {
        return Err(format!("a receive completed with status {:?}", h.status));
    }
    if h.qp_num != e.qpn {
        return Err(format!("a datagram arrived on QP {:#x}, not on QP {:#x}", h.qp_num, e.qpn));
    }
    if h.imm != Some(h.src_qp) {
        return Err(format!(
            "a datagram from QP {:#x} carried immediate data {:?}, not its QPN",
            h.src_qp,
            h.imm.map(|v| format!("{v:#x}"))
        ));
    }
    if let Some(peer) = e.peer {
        if h.sender != Some(peer) {
            return Err(format!(
                "a datagram from QP {:#x} came from GID {}, not from the connection's peer {peer:?}",
                h.src_qp,
                h.sender.map_or("(unknown)".to_string(), |g| format!("{g:?}")),
            ));
        }
    }
    Ok(())
}

/// What waiting for an announcement found.
#[derive(Debug)]
pub struct Selection<T> {
    /// The announcement, with what `next` gave beside it.
    pub chosen: Option<(Heard, T)>,
    /// Datagrams ignored, and why the last one was.
    pub ignored: u32,
    pub last_reason: Option<String>,
}

/// Takes datagrams from `next` (`None`: the deadline passed) until one
/// passes [`judge`]; each one ignored on the expected QP is followed by
/// `repost` (the QP's only receive was used up).
pub fn select<T>(
    e: &Expected,
    mut next: impl FnMut() -> Res<Option<(Heard, T)>>,
    mut repost: impl FnMut() -> Res<()>,
) -> Res<Selection<T>> {
    let mut sel = Selection { chosen: None, ignored: 0, last_reason: None };
    while let Some((h, t)) = next()? {
        match judge(&h, e) {
            Ok(()) => {
                sel.chosen = Some((h, t));
                break;
            }
            Err(why) => {
                sel.ignored += 1;
                sel.last_reason = Some(why);
                if h.qp_num == e.qpn {
                    repost()?;
                }
            }
        }
    }
    Ok(sel)
}

/// A receive's completion and the GRH bytes before its payload.
type Received = (Wc, [u8; GRH_LEN]);

/// Polls `cq` for one completion, successful or not, until `deadline`.
fn any_completion(cq: &Cq, deadline: Instant, what: &str) -> Res<Option<Wc>> {
    loop {
        match cq.poll_one() {
            Ok(Some(wc)) => return Ok(Some(wc)),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_micros(200)),
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("rdma_cm: {what}: ibv_poll_cq: {e}")),
        }
    }
}

/// UD server: the client's announcement of QP `i`, and the way back to it:
/// an address handle from the receive, the QPN it came from, and this QP's
/// own Q_Key (as perftest's server sends with). Datagrams from anyone but
/// the connection's peer are ignored ([`judge`]).
fn announced(u: &Ud, i: usize, qp: &Qp, id: &CmId, deadline: Instant) -> Res<UdPeer> {
    let ctx = u.pd.context();
    let port = id.port_num();
    let ethernet = ctx.query_port(port).map_err(|e| format!("rdma_cm: querying port {port}: {e}"))?.is_ethernet();
    let peer = if ethernet { id.peer_addr().map(|a| Expected::gid_of(a.ip())) } else { None };
    let expected = Expected { qpn: qp.qpn(), peer };
    let what = format!("the client's announcement of QP {i}");
    let next = || -> Res<Option<(Heard, Received)>> {
        let Some(wc) = any_completion(u.recv_cq, deadline, &what)? else { return Ok(None) };
        let mut grh = [0u8; GRH_LEN];
        // SAFETY: the receive into this region of `mr` has completed and no
        // other is posted there until `repost`; nothing else writes it.
        unsafe {
            std::ptr::copy_nonoverlapping((u.mr.addr() as usize + u.scratch) as *const u8, grh.as_mut_ptr(), GRH_LEN)
        };
        let sender = if wc.is_success() { AhAttr::from_wc(ctx, port, &wc, &grh).ok().map(|a| a.dgid()) } else { None };
        let heard = Heard { status: wc.status(), qp_num: wc.qp_num(), src_qp: wc.src_qp(), imm: wc.imm(), sender };
        Ok(Some((heard, (wc, grh))))
    };
    let repost = || -> Res<()> {
        let sges = [u.mr.sge_at(u.scratch, HELLO_RX)];
        // SAFETY: the region lies in `mr`; the previous receive there has
        // completed and been read; the next is read only after it completes.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sges, 0)]) }
            .map_err(|e| format!("rdma_cm: QP {i}: posting the announcement's receive again: {e}"))
    };
    let sel = select(&expected, next, repost)?;
    let Some((_, (wc, grh))) = sel.chosen else {
        let others = match (sel.ignored, sel.last_reason) {
            (0, _) | (_, None) => String::new(),
            (n, Some(why)) => format!("; {n} other datagram(s) ignored, the last because {why}"),
        };
        return Err(format!(
            "rdma_cm: QP {i}: the client did not announce its QP (a UD client does after connecting in latency \
             tests and with -b; do both sides run the same test, both with or without -b?){others}"
        ));
    };
    let ah = Ah::from_wc(u.pd, port, &wc, &grh)
        .map_err(|e| format!("rdma_cm: the address handle back to the client of QP {i}: {e}"))?;
    let qkey = id.qp_attr(QpState::INIT).map_err(|e| format!("rdma_cm: the Q_Key of QP {i}: {e}"))?.as_raw().qkey;
    Ok(UdPeer { ah, qpn: wc.src_qp(), qkey })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn heard(qp_num: u32, src_qp: u32, imm: Option<u32>, sender: Gid) -> Heard {
        Heard { status: WcStatus::SUCCESS, qp_num, src_qp, imm, sender: Some(sender) }
    }

    #[test]
    fn regression_perf_rdma_cm_test_qps_are_taken_only_by_the_exchange_peer() {
        let peer = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1));
        assert!(admit(Some(peer), peer).is_ok());
        let e = admit(Some(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 66))), peer).unwrap_err();
        assert!(e.contains("from 10.77.0.66, not from the exchange's peer 10.77.0.1"), "{e}");
        let v6 = IpAddr::V6(Ipv4Addr::new(10, 77, 0, 1).to_ipv6_mapped());
        assert!(admit(Some(v6), peer).is_err(), "another address family is another address");
        assert!(admit(None, peer).unwrap_err().contains("no source address"));
    }

    #[test]
    fn regression_ud_announcement_is_taken_only_from_the_connected_peer() {
        let client = Expected::gid_of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        let stranger = Expected::gid_of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 66)));
        assert_eq!(client.0[10..], [0xff, 0xff, 10, 0, 0, 2], "RoCE's IPv4-mapped GID");
        let e = Expected { qpn: 0x11, peer: Some(client) };
        let genuine = heard(0x11, 0x99, Some(0x99), client);
        // Strangers first, each of a kind; the genuine announcement last.
        let arrivals = [
            heard(0x11, 0x77, Some(0x77), stranger),
            heard(0x11, 0x99, None, client),
            heard(0x11, 0x99, Some(0x98), client),
            heard(0x12, 0x99, Some(0x99), client),
            Heard { status: WcStatus::LOC_LEN_ERR, sender: None, ..genuine },
            genuine,
            heard(0x11, 0x55, Some(0x55), client),
        ];
        let mut it = arrivals.iter().enumerate();
        let mut reposts = 0;
        let sel = select(
            &e,
            || Ok(it.next().map(|(k, h)| (*h, k))),
            || {
                reposts += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(sel.chosen, Some((genuine, 5)), "the first datagram from the connected peer, not the first one");
        assert_eq!(sel.ignored, 5);
        assert_eq!(reposts, 4, "the receive goes up again after each one on this QP");
        for (h, why) in arrivals[..5].iter().zip([
            "not from the connection's peer",
            "not its QPN",
            "not its QPN",
            "not on QP 0x11",
            "status",
        ]) {
            assert!(judge(h, &e).unwrap_err().contains(why), "{h:?}");
        }

        // Only strangers until the deadline: nothing is taken, and the count says so.
        let mut once = Some(heard(0x11, 0x77, Some(0x77), stranger));
        let sel = select(&e, || Ok(once.take().map(|h| (h, ()))), || Ok(())).unwrap();
        assert!(sel.chosen.is_none());
        assert_eq!(sel.ignored, 1);
        assert!(sel.last_reason.unwrap().contains("not from the connection's peer"));

        // InfiniBand: no address to compare; the QPN checks still apply.
        let ib = Expected { qpn: 0x11, peer: None };
        assert!(judge(&heard(0x11, 0x77, Some(0x77), stranger), &ib).is_ok());
        assert!(judge(&heard(0x11, 0x77, Some(0x1), stranger), &ib).is_err());
    }
}
