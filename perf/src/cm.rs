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

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rrddmma::prim::cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use rrddmma::prim::{Qp, QpState};

type Res<T> = Result<T, String>;

/// The ids of the connected QPs: dropping one disconnects its QP, so they
/// live as long as the test.
pub struct Conns {
    ids: Vec<CmId>,
}

impl Conns {
    /// The first PSN the CM gave each QP (for the report; the CM chose it).
    pub fn sq_psns(&self) -> Vec<u32> {
        self.ids.iter().map(|id| id.qp_attr(QpState::RTS).map_or(0, |a| a.as_raw().sq_psn)).collect()
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

/// Client: connects `qps` (all on `device`) to the server at `addr`.
pub fn connect(addr: SocketAddr, device: &str, qps: &[Qp], rd_atomic: u8, wait: Duration) -> Res<Conns> {
    let start = Instant::now();
    let mut ids = Vec::with_capacity(qps.len());
    for (i, qp) in qps.iter().enumerate() {
        let id = loop {
            match connect_one(addr, device, qp, rd_atomic) {
                Ok(id) => break id,
                Err(e) if start.elapsed() < wait => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(format!("rdma_cm: connecting QP {i} to {addr}: {e}")),
            }
        };
        ids.push(id);
    }
    Ok(Conns { ids })
}

fn connect_one(addr: SocketAddr, device: &str, qp: &Qp, rd_atomic: u8) -> Res<CmId> {
    let step = Duration::from_secs(2);
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let id = CmId::new(&ch, PortSpace::Rc).map_err(|e| e.to_string())?;
    let expect = |kind, what: &str| id.expect(kind, Instant::now() + step * 2).map_err(|e| format!("{what}: {e}"));
    id.resolve_addr(None, addr, step).map_err(|e| e.to_string())?;
    expect(CmEventType::ADDR_RESOLVED, "resolving the address")?;
    id.resolve_route(step).map_err(|e| e.to_string())?;
    expect(CmEventType::ROUTE_RESOLVED, "resolving the route")?;
    same_device(&id, device, &format!("the route to {addr}"))?;
    id.connect(qp, &param(rd_atomic)).map_err(|e| e.to_string())?;
    expect(CmEventType::CONNECT_RESPONSE, "connecting")?;
    id.establish(qp).map_err(|e| e.to_string())?;
    Ok(id)
}

/// Server: the QPs' listener, on `port` on every address. It goes up
/// before the exchange message that lets the client connect: perftest's
/// client gives up (and crashes on its retry) when its first request finds
/// nobody listening.
pub struct Listener {
    id: CmId,
}

/// Listens on `port` (every address) for up to `backlog` connections.
pub fn listen(port: u16, backlog: usize) -> Res<Listener> {
    let ch = EventChannel::new().map_err(|e| e.to_string())?;
    let id = CmId::new(&ch, PortSpace::Rc).map_err(|e| e.to_string())?;
    id.bind(SocketAddr::from(([0, 0, 0, 0], port)))
        .map_err(|e| format!("rdma_cm: binding the QPs' listener to port {port}: {e}"))?;
    id.listen(i32::try_from(backlog).unwrap_or(i32::MAX))
        .map_err(|e| format!("rdma_cm: listening on port {port}: {e}"))?;
    Ok(Listener { id })
}

/// Server: accepts one connection per QP on `l`, the i-th for `qps[i]`.
pub fn accept(l: Listener, device: &str, qps: &[Qp], rd_atomic: u8, wait: Duration) -> Res<Conns> {
    let deadline = Instant::now() + wait;
    let listener = l.id;
    let mut ids = Vec::with_capacity(qps.len());
    for (i, qp) in qps.iter().enumerate() {
        let what = |e: rrddmma::prim::Error| format!("rdma_cm: accepting the connection of QP {i}: {e}");
        let mut ev = listener.expect(CmEventType::CONNECT_REQUEST, deadline).map_err(what)?;
        let Some(mut id) = ev.take_request() else {
            return Err(format!("rdma_cm: the connect request for QP {i} carried no id"));
        };
        // Its later events (ESTABLISHED, DISCONNECTED) on a channel of its own.
        id.migrate(&EventChannel::new().map_err(what)?).map_err(what)?;
        same_device(&id, device, &format!("the connection of QP {i}"))?;
        id.accept(qp, &param(rd_atomic)).map_err(what)?;
        id.expect(CmEventType::ESTABLISHED, deadline).map_err(what)?;
        ids.push(id);
    }
    Ok(Conns { ids })
}
