//! Connection management through librdmacm, on the harness's CM device
//! (`RRDDMMA_CM_ADDR`: an address on a veth end with an rxe device on it).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use rrddmma::prim::cm::{private_data_max, CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use rrddmma::prim::{Error, QpState, RecvWr, SendWr, WcStatus};
use rrddmma::wrap::{accept_rc_cm, connect_rc_cm, CmConn, CmListener, CmOpts, RegisteredMem};

use super::common::{panic_message, poll_one};

/// The address the harness put on the CM device's netdev.
pub fn cm_ip() -> IpAddr {
    std::env::var("RRDDMMA_CM_ADDR")
        .expect(
            "RRDDMMA_CM_ADDR is not set: the CM tests need an rxe device on a veth end with an address; \
             `cargo xtask test` / `cargo xtask vm` make one",
        )
        .parse()
        .expect("RRDDMMA_CM_ADDR is an IP address")
}

fn listener() -> (CmListener, SocketAddr) {
    let l = CmListener::bind(SocketAddr::new(cm_ip(), 0), 16).expect("bind and listen");
    let addr = l.local_addr().expect("listener address");
    assert_ne!(addr.port(), 0, "rdma_bind_addr picked a port");
    (l, addr)
}

/// Sends `msg` from `a` to `b` and checks it arrived.
fn send_and_check(a: &CmConn, b: &CmConn, msg: &[u8]) {
    let mut src = RegisteredMem::new(&a.pd, 4096).unwrap();
    let dst = RegisteredMem::new(&b.pd, 4096).unwrap();
    src.write(0, msg);
    let rsge = [dst.sge(0..msg.len())];
    // SAFETY: `dst` is registered on b's PD and outlives the completion polled below.
    unsafe { b.qp.post_recv(&mut [RecvWr::new(&rsge, 7)]) }.unwrap();
    let ssge = [src.sge(0..msg.len())];
    // SAFETY: `src` is registered on a's PD and outlives the completion polled below.
    unsafe { a.qp.post_send(&mut [SendWr::send(&ssge).wr_id(8).signaled()]) }.unwrap();
    assert_eq!(poll_one(&a.send_cq).status(), WcStatus::SUCCESS);
    let wc = poll_one(&b.recv_cq);
    assert_eq!(wc.status(), WcStatus::SUCCESS);
    assert_eq!(wc.byte_len() as usize, msg.len());
    let mut got = vec![0; msg.len()];
    dst.read(0, &mut got);
    assert_eq!(got, msg);
}

fn padded_prefix(data: &[u8], want: &[u8]) {
    assert!(data.len() >= want.len(), "private data {data:?} shorter than {want:?}");
    assert_eq!(&data[..want.len()], want);
    assert!(data[want.len()..].iter().all(|b| *b == 0), "CM padding is zeros");
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn rc_connect_accept_exchange_private_data_and_send() {
    let (l, addr) = listener();
    let server = std::thread::spawn(move || {
        let opts = CmOpts::default().private_data(b"from server".to_vec());
        accept_rc_cm(&l, &opts).expect("accept")
    });
    let opts = CmOpts::default().private_data(b"from client".to_vec());
    let client = connect_rc_cm(addr, &opts).expect("connect");
    let server = server.join().unwrap();
    padded_prefix(&client.peer_data, b"from server");
    padded_prefix(&server.peer_data, b"from client");
    assert_eq!(client.qp.query_state().unwrap(), QpState::RTS);
    assert_eq!(server.qp.query_state().unwrap(), QpState::RTS);
    assert_eq!(client.id.peer_addr(), Some(addr));
    send_and_check(&client, &server, b"hello over rdmacm");
    send_and_check(&server, &client, b"and back");
    let deadline = Instant::now() + Duration::from_secs(5);
    let waiter = std::thread::spawn(move || server.wait_disconnect(deadline).map(|()| server));
    client.disconnect(deadline).expect("disconnect confirmed");
    let server = waiter.join().unwrap().expect("server sees the disconnect");
    assert_eq!(server.qp.query_state().unwrap(), QpState::RTS, "the QP is the caller's to move to ERR");
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn server_accepts_many_clients_without_blocking_on_one() {
    let (l, addr) = listener();
    // A client that sends a request and then never establishes: the raw id
    // connects with a QP number but nobody answers the accept's REP.
    let stalled_ch = EventChannel::create().unwrap();
    let stalled = CmId::create(&stalled_ch, PortSpace::Rc).unwrap();
    stalled.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    stalled.expect(CmEventType::ADDR_RESOLVED, Instant::now() + Duration::from_secs(3)).unwrap();
    stalled.resolve_route(Duration::from_secs(2)).unwrap();
    stalled.expect(CmEventType::ROUTE_RESOLVED, Instant::now() + Duration::from_secs(3)).unwrap();
    let ctx = rrddmma::prim::Context::open(&stalled.device_name().unwrap()).unwrap();
    let pd = rrddmma::prim::Pd::alloc(&ctx).unwrap();
    let cq = rrddmma::prim::Cq::create(&ctx, 16).unwrap();
    let sqp = rrddmma::prim::Qp::builder(&pd, rrddmma::prim::QpType::RC, &cq, &cq).build().unwrap();
    stalled.connect(&sqp, &ConnParam::default()).unwrap();
    let first = l.next_request(Instant::now() + Duration::from_secs(5)).expect("the stalled request");
    // Its accept waits on its own channel in another thread ...
    let slow = std::thread::spawn(move || first.accept(&CmOpts::default().timeout(Duration::from_secs(3))));
    // ... while three more clients connect and are served.
    let clients: Vec<_> = (0..3u8)
        .map(|i| {
            std::thread::spawn(move || {
                connect_rc_cm(addr, &CmOpts::default().private_data(vec![i + 1])).expect("connect")
            })
        })
        .collect();
    let mut served = Vec::new();
    for _ in 0..3 {
        let req = l.next_request(Instant::now() + Duration::from_secs(5)).expect("request");
        served.push(req.accept(&CmOpts::default()).expect("accept"));
    }
    // Pair each client with the connection that carried its number.
    served.sort_by_key(|s| s.peer_data[0]);
    assert_eq!(served.iter().map(|s| s.peer_data[0]).collect::<Vec<_>>(), [1, 2, 3]);
    let clients: Vec<CmConn> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    for (c, s) in clients.iter().zip(&served) {
        send_and_check(c, s, b"served");
    }
    let slow = slow.join().unwrap();
    assert!(slow.is_err(), "the stalled client never established");
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn connect_without_listener_is_rejected_reason_8() {
    let (l, addr) = listener();
    drop(l);
    let t0 = Instant::now();
    let err = connect_rc_cm(addr, &CmOpts::default()).expect_err("no one listens");
    match &err {
        Error::CmEvent { got, status, .. } => {
            assert_eq!(*got, CmEventType::REJECTED, "{err}");
            assert_eq!(*status, 8, "{err}");
        }
        e => panic!("expected a CM rejection, got {e}"),
    }
    assert!(err.to_string().contains("no one listens"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(6));
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn rejected_connect_surfaces_the_peers_private_data() {
    let (l, addr) = listener();
    let server = std::thread::spawn(move || {
        let req = l.next_request(Instant::now() + Duration::from_secs(5)).unwrap();
        padded_prefix(&req.private_data, b"let me in");
        assert_eq!(req.private_data.len(), private_data_max::RC_CONNECT);
        req.reject(b"server full").unwrap();
    });
    let err = connect_rc_cm(addr, &CmOpts::default().private_data(b"let me in".to_vec())).expect_err("rejected");
    server.join().unwrap();
    match &err {
        Error::CmEvent { got, status, private_data, .. } => {
            assert_eq!(*got, CmEventType::REJECTED);
            assert_eq!(*status, 28, "consumer-defined reject");
            padded_prefix(private_data, b"server full");
        }
        e => panic!("expected a rejection, got {e}"),
    }
    assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::ConnectionRefused);
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn oversize_private_data_panics_before_sending() {
    let (l, addr) = listener();
    let too_long = vec![1u8; private_data_max::RC_CONNECT + 1];
    let m = panic_message(|| connect_rc_cm(addr, &CmOpts::default().private_data(too_long)));
    assert!(m.starts_with("rdma_connect: 57 bytes of private data") && m.contains("at most 56"), "{m}");
    // Exactly the limit goes through; an accept and a reject past theirs panic.
    let server = std::thread::spawn(move || {
        let req = l.next_request(Instant::now() + Duration::from_secs(5)).unwrap();
        let m = panic_message(|| req.id().reject(&[0; private_data_max::RC_REJECT + 1]));
        assert!(m.contains("at most 148"), "{m}");
        let long = CmOpts::default().private_data(vec![2; private_data_max::RC_ACCEPT + 1]);
        let m = panic_message(|| req.accept(&long));
        assert!(m.contains("at most 196"), "{m}");
    });
    let ok = vec![3u8; private_data_max::RC_CONNECT];
    let _ = connect_rc_cm(addr, &CmOpts::default().private_data(ok).timeout(Duration::from_secs(2)));
    server.join().unwrap();
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn unresolvable_address_fails_within_its_timeout() {
    // An address in the CM device's subnet that no host answers ARP for.
    let IpAddr::V4(ip) = cm_ip() else { panic!("RRDDMMA_CM_ADDR is IPv4") };
    let o = ip.octets();
    let nobody = SocketAddr::from(([o[0], o[1], o[2], 213], 7471));
    let t0 = Instant::now();
    let err = connect_rc_cm(nobody, &CmOpts::default().timeout(Duration::from_millis(1500))).expect_err("nobody there");
    let took = t0.elapsed();
    assert!(matches!(&err, Error::CmEvent { got: CmEventType::ADDR_ERROR, .. } | Error::Timeout { .. }), "{err}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    eprintln!("unresolvable: {err} after {took:?}");
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn peer_disconnect_mid_stream_is_seen() {
    let (l, addr) = listener();
    let server = std::thread::spawn(move || accept_rc_cm(&l, &CmOpts::default()).unwrap());
    let client = connect_rc_cm(addr, &CmOpts::default()).unwrap();
    let server = server.join().unwrap();
    send_and_check(&client, &server, b"before");
    drop(server); // the peer goes away: its id is destroyed, which disconnects
    client.wait_disconnect(Instant::now() + Duration::from_secs(5)).expect("DISCONNECTED on the survivor");
    let err = client.wait_disconnect(Instant::now() + Duration::from_millis(200)).expect_err("nothing more");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn event_channel_dropped_while_id_lives_and_nonblocking_get() {
    let ch = EventChannel::create().unwrap();
    let id = CmId::create(&ch, PortSpace::Rc).unwrap();
    let err = ch.get().expect_err("no event yet");
    assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::WouldBlock);
    drop(ch);
    // The id holds the channel: it still works, and drops cleanly.
    id.bind(SocketAddr::new(cm_ip(), 0)).unwrap();
    id.listen(1).unwrap();
    let err = id.channel().wait(Instant::now() + Duration::from_millis(100)).expect_err("quiet");
    assert!(matches!(err, Error::Timeout { .. }));
    drop(id);
}

#[test]
fn unknown_event_kinds_are_kept() {
    let k = CmEventType::from_raw(999);
    assert_eq!(k.name(), None);
    assert_eq!(k.to_string(), "CmEventType(999)");
    assert_eq!(CmEventType::TIMEWAIT_EXIT.name(), Some("TIMEWAIT_EXIT"));
}

/// A QP of type `ty` with its PD and CQ on the device `id` is bound to.
fn qp_parts(id: &CmId, ty: rrddmma::prim::QpType) -> (rrddmma::prim::Pd, rrddmma::prim::Cq, rrddmma::prim::Qp) {
    use rrddmma::prim::{Context, Cq, Pd, Qp};
    let ctx = Context::open(&id.device_name().expect("bound to a device")).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 64).unwrap();
    let qp = Qp::builder(&pd, ty, &cq, &cq).build().unwrap();
    (pd, cq, qp)
}

fn ud_parts(id: &CmId) -> (rrddmma::prim::Pd, rrddmma::prim::Cq, rrddmma::prim::Qp) {
    qp_parts(id, rrddmma::prim::QpType::UD)
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn uc_through_rdmacm_write_and_send() {
    use rrddmma::prim::{QpType, RemoteMr};
    let deadline = || Instant::now() + Duration::from_secs(5);
    let m = panic_message(|| CmId::create(&EventChannel::create().unwrap(), PortSpace::Uc));
    assert!(m.contains("CmId::bound"), "{m}");

    let sch = EventChannel::create().unwrap();
    let server = CmId::bound(&sch, PortSpace::Uc, SocketAddr::new(cm_ip(), 0)).unwrap();
    assert_eq!(server.port_space(), PortSpace::Uc);
    server.listen(4).unwrap();
    let addr = server.local_addr().unwrap();
    assert_ne!(addr.port(), 0);

    let cch = EventChannel::create().unwrap();
    let client = CmId::bound(&cch, PortSpace::Uc, "0.0.0.0:0".parse().unwrap()).unwrap();
    client.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ADDR_RESOLVED, deadline()).unwrap();
    client.resolve_route(Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ROUTE_RESOLVED, deadline()).unwrap();
    let (cpd, ccq, cqp) = qp_parts(&client, QpType::UC);
    let too_long = vec![0u8; private_data_max::RC_CONNECT + 1];
    let m = panic_message(|| client.connect(&cqp, &ConnParam { private_data: &too_long, ..ConnParam::default() }));
    assert!(m.contains("at most 56"), "{m}");
    let uc = ConnParam { responder_resources: 0, initiator_depth: 0, ..ConnParam::default() };
    client.connect(&cqp, &ConnParam { private_data: b"uc hello", ..uc.clone() }).unwrap();

    let mut req = server.expect(CmEventType::CONNECT_REQUEST, deadline()).unwrap();
    padded_prefix(req.private_data(), b"uc hello");
    let conn = req.take_request().expect("a new id");
    assert_eq!(conn.port_space(), PortSpace::Uc);
    let (spd, scq, sqp) = qp_parts(&conn, QpType::UC);
    // The client WRITEs into `target`: the server's QP must allow it.
    conn.set_access(rrddmma::prim::AccessFlags::REMOTE_WRITE);
    let target = RegisteredMem::new(&spd, 4096).unwrap();
    let token = target.remote().to_bytes();
    conn.accept(&sqp, &ConnParam { private_data: &token, ..uc }).unwrap();

    let resp = client.expect(CmEventType::CONNECT_RESPONSE, deadline()).unwrap();
    let remote = RemoteMr::from_bytes(resp.private_data()[..RemoteMr::WIRE_LEN].try_into().unwrap());
    assert_eq!(remote, target.remote(), "the token came through the REP");
    client.establish(&cqp).unwrap();
    conn.expect(CmEventType::ESTABLISHED, deadline()).unwrap();
    assert_eq!(cqp.query_state().unwrap(), QpState::RTS);
    assert_eq!(sqp.query_state().unwrap(), QpState::RTS);

    // An RDMA WRITE into the server's region, then a SEND it receives.
    let msg = b"unreliable but connected";
    let mut src = RegisteredMem::new(&cpd, 4096).unwrap();
    src.write(0, msg);
    src.write(1024, b"done");
    let inbox = RegisteredMem::new(&spd, 64).unwrap();
    let rsge = [inbox.sge(0..64)];
    // SAFETY: `inbox` is registered on the server's PD and outlives the completion.
    unsafe { sqp.post_recv(&mut [RecvWr::new(&rsge, 3)]) }.unwrap();
    let wsge = [src.sge(0..msg.len())];
    let ssge = [src.sge(1024..1028)];
    let at = remote.checked_addr_at(100, msg.len()).unwrap();
    // SAFETY: `src` is registered on the client's PD and outlives both completions.
    unsafe { cqp.post_send(&mut [SendWr::write(&wsge, at).wr_id(1), SendWr::send(&ssge).wr_id(2).signaled()]) }
        .unwrap();
    let wc = poll_one(&ccq);
    assert_eq!((wc.status(), wc.wr_id()), (WcStatus::SUCCESS, 2));
    let wc = poll_one(&scq);
    assert_eq!((wc.status(), wc.byte_len()), (WcStatus::SUCCESS, 4));
    let mut got = vec![0; msg.len()];
    target.read(100, &mut got);
    assert_eq!(&got, msg, "the WRITE landed before the SEND that followed it");
    let mut done = [0; 4];
    inbox.read(0, &mut done);
    assert_eq!(&done, b"done");

    // The passive side sees the DREQ and answers it; then the active side's
    // disconnect is confirmed.
    client.disconnect().unwrap();
    conn.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
    conn.disconnect().unwrap();
    client.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn ud_through_rdmacm_address_handle_qpn_and_qkey_from_the_event() {
    use rrddmma::prim::{Ah, GRH_LEN};
    let deadline = || Instant::now() + Duration::from_secs(5);
    let sch = EventChannel::create().unwrap();
    let server = CmId::create(&sch, PortSpace::Ud).unwrap();
    server.bind(SocketAddr::new(cm_ip(), 0)).unwrap();
    server.listen(4).unwrap();
    let addr = server.local_addr().unwrap();

    let cch = EventChannel::create().unwrap();
    let client = CmId::create(&cch, PortSpace::Ud).unwrap();
    client.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ADDR_RESOLVED, deadline()).unwrap();
    client.resolve_route(Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ROUTE_RESOLVED, deadline()).unwrap();
    let (cpd, ccq, cqp) = ud_parts(&client);
    let too_long = vec![0u8; private_data_max::UD_CONNECT + 1];
    let m = panic_message(|| client.connect(&cqp, &ConnParam { private_data: &too_long, ..ConnParam::default() }));
    assert!(m.contains("at most 180"), "{m}");
    client.connect(&cqp, &ConnParam { private_data: b"ud hello", ..ConnParam::default() }).unwrap();

    let mut req = server.expect(CmEventType::CONNECT_REQUEST, deadline()).unwrap();
    padded_prefix(req.private_data(), b"ud hello");
    let conn = req.take_request().expect("a new id");
    assert_eq!(conn.port_space(), PortSpace::Ud);
    let (spd, scq, sqp) = ud_parts(&conn);
    conn.accept(&sqp, &ConnParam { private_data: b"ud welcome", ..ConnParam::default() }).unwrap();

    let est = client.expect(CmEventType::ESTABLISHED, deadline()).unwrap();
    padded_prefix(est.private_data(), b"ud welcome");
    let ud = *est.ud_param().expect("UD parameters");
    assert_eq!(ud.qpn, sqp.qpn(), "the event names the server's QP");
    assert_eq!(ud.qkey, rrddmma::bindings::cm::RDMA_UDP_QKEY);

    let msg = b"datagram through rdmacm";
    let dst = RegisteredMem::new(&spd, 4096).unwrap();
    let rsge = [dst.sge(0..GRH_LEN + msg.len())];
    // SAFETY: `dst` is registered on the server's PD and outlives the completion.
    unsafe { sqp.post_recv(&mut [RecvWr::new(&rsge, 1)]) }.unwrap();
    let mut src = RegisteredMem::new(&cpd, 4096).unwrap();
    src.write(0, msg);
    let ah = Ah::create(&cpd, &ud.ah_attr).unwrap();
    let ssge = [src.sge(0..msg.len())];
    // SAFETY: `src` is registered on the client's PD; `ah` outlives the completion.
    unsafe { cqp.post_send(&mut [SendWr::send(&ssge).ud(&ah, ud.qpn, ud.qkey).signaled()]) }.unwrap();
    assert_eq!(poll_one(&ccq).status(), WcStatus::SUCCESS);
    let wc = poll_one(&scq);
    assert_eq!(wc.status(), WcStatus::SUCCESS);
    let mut got = vec![0; msg.len()];
    dst.read(GRH_LEN, &mut got);
    assert_eq!(&got, msg);
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn ud_multicast_join_send_receive_and_leave() {
    use rrddmma::prim::{Ah, GRH_LEN};
    let deadline = || Instant::now() + Duration::from_secs(5);
    let group: IpAddr = "239.77.0.1".parse().unwrap();
    // Two members on the CM device: one receives, one sends.
    let join = |ch: &EventChannel| {
        let id = CmId::create(ch, PortSpace::Ud).unwrap();
        // Bound to the CM device's address, so the join goes out on its netdev.
        id.bind(SocketAddr::new(cm_ip(), 0)).unwrap();
        id.join_multicast(group).unwrap();
        let ev = id.expect(CmEventType::MULTICAST_JOIN, deadline()).unwrap_or_else(|e| panic!("join on rxe: {e}"));
        let ud = *ev.ud_param().expect("a join carries the group's address vector");
        assert_eq!(ud.qpn, 0xff_ffff, "multicast QPN");
        (id, ud)
    };
    let (rch, sch) = (EventChannel::create().unwrap(), EventChannel::create().unwrap());
    let (rid, rud) = join(&rch);
    let (sid, sud) = join(&sch);
    assert_eq!(rud.ah_attr.dgid(), sud.ah_attr.dgid(), "one group");

    let (rpd, rcq, rqp) = ud_parts(&rid);
    rqp.bring_up_ud(rid.port_num(), 0, rud.qkey, 0).unwrap();
    let (mgid, mlid) = (rud.ah_attr.dgid(), rud.ah_attr.as_raw().dlid);
    rqp.attach_mcast(mgid, mlid).unwrap();
    let (spd, scq, sqp) = ud_parts(&sid);
    sqp.bring_up_ud(sid.port_num(), 0, sud.qkey, 0).unwrap();

    let msg = b"to every member of 239.77.0.1";
    let dst = RegisteredMem::new(&rpd, 4096).unwrap();
    let rsge = [dst.sge(0..GRH_LEN + msg.len())];
    // SAFETY: `dst` is registered on the receiver's PD and outlives the completion.
    unsafe { rqp.post_recv(&mut [RecvWr::new(&rsge, 1)]) }.unwrap();
    let mut src = RegisteredMem::new(&spd, 4096).unwrap();
    src.write(0, msg);
    let ah = Ah::create(&spd, &sud.ah_attr).unwrap();
    let ssge = [src.sge(0..msg.len())];
    // SAFETY: `src` is registered on the sender's PD; `ah` outlives the completion.
    unsafe { sqp.post_send(&mut [SendWr::send(&ssge).ud(&ah, sud.qpn, sud.qkey).signaled()]) }.unwrap();
    assert_eq!(poll_one(&scq).status(), WcStatus::SUCCESS);
    let wc = poll_one(&rcq);
    assert_eq!(wc.status(), WcStatus::SUCCESS);
    assert_eq!(wc.byte_len() as usize, GRH_LEN + msg.len());
    let mut got = vec![0; msg.len()];
    dst.read(GRH_LEN, &mut got);
    assert_eq!(&got, msg);

    rqp.detach_mcast(mgid, mlid).unwrap();
    rid.leave_multicast(group).unwrap();
    sid.leave_multicast(group).unwrap();
}

/// Counts of `rdma resource show` for one device: (cm_id, qp, pd, cq).
fn resource_counts(dev: &str) -> String {
    let out = std::process::Command::new("rdma").args(["resource", "show"]).output().expect("rdma resource show");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.contains(&format!(" {dev}:"))).unwrap_or_else(|| panic!("{dev} in {text}"));
    line.split_once(':').map(|x| x.1).unwrap_or(line).split_once(':').map_or(line, |x| x.1).trim().to_string()
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn thousand_connect_disconnect_cycles_leak_nothing() {
    let dev = std::env::var("RRDDMMA_CM_DEVICE").expect("RRDDMMA_CM_DEVICE set by the harness");
    let (l, addr) = listener();
    let before = resource_counts(&dev);
    let cycles = 1000;
    // A leak check, not a latency one: generous bounds, as a loaded
    // emulated machine can stall one cycle for seconds.
    let opts = CmOpts::default().timeout(Duration::from_secs(30));
    let server_opts = opts.clone();
    let server = std::thread::spawn(move || {
        for i in 0..cycles {
            let c = accept_rc_cm(&l, &server_opts).unwrap_or_else(|e| panic!("accept {i}: {e}"));
            c.wait_disconnect(Instant::now() + Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("peer disconnect {i}: {e}"));
        }
        l
    });
    let t0 = Instant::now();
    for i in 0..cycles {
        let c = connect_rc_cm(addr, &opts).unwrap_or_else(|e| panic!("cycle {i}: {e}"));
        c.disconnect(Instant::now() + Duration::from_secs(30)).unwrap_or_else(|e| panic!("cycle {i}: {e}"));
    }
    let l = server.join().unwrap();
    eprintln!("{cycles} cycles in {:?}", t0.elapsed());
    // Destroyed ids leave the kernel's list once their time-wait ends.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut after = resource_counts(&dev);
    while after != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        after = resource_counts(&dev);
    }
    assert_eq!(after, before, "rdma resource counts on {dev} before and after {cycles} cycles");
    drop(l);
}

/// Issue 22: `CmId::expect` consumed other ids' events on a shared channel
/// and failed on them; a connect request taken that way was destroyed.
#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn regression_cm_expect_keeps_other_ids_events_on_a_shared_channel() {
    use rrddmma::prim::QpType;
    let deadline = || Instant::now() + Duration::from_secs(5);
    let settle = || std::thread::sleep(Duration::from_millis(1500));
    let ch = EventChannel::create().unwrap();
    let listener = CmId::create(&ch, PortSpace::Rc).unwrap();
    listener.bind(SocketAddr::new(cm_ip(), 0)).unwrap();
    listener.listen(4).unwrap();
    let addr = listener.local_addr().unwrap();
    let client = CmId::create(&ch, PortSpace::Rc).unwrap();
    client.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    settle();
    // The listener waits first and reads the client's ADDR_RESOLVED: kept for the client.
    let err = listener.expect(CmEventType::CONNECT_REQUEST, Instant::now() + Duration::from_millis(300));
    assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
    client.expect(CmEventType::ADDR_RESOLVED, deadline()).expect("the client's event was kept for it");
    client.resolve_route(Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ROUTE_RESOLVED, deadline()).unwrap();
    let (_cpd, _ccq, cqp) = qp_parts(&client, QpType::RC);
    client.connect(&cqp, &ConnParam { private_data: b"one channel", ..ConnParam::default() }).unwrap();
    settle();
    // The client waits for its response and reads the listener's request: kept for the listener.
    let err = client.expect(CmEventType::CONNECT_RESPONSE, Instant::now() + Duration::from_millis(300));
    assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
    let mut req = listener.expect(CmEventType::CONNECT_REQUEST, deadline()).expect("the request was kept");
    padded_prefix(req.private_data(), b"one channel");
    let conn = req.take_request().expect("the request's id, alive");
    let (_spd, _scq, sqp) = qp_parts(&conn, QpType::RC);
    conn.accept(&sqp, &ConnParam::default()).unwrap();
    client.expect(CmEventType::CONNECT_RESPONSE, deadline()).unwrap();
    client.establish(&cqp).unwrap();
    conn.expect(CmEventType::ESTABLISHED, deadline()).unwrap();
    assert_eq!(cqp.query_state().unwrap(), QpState::RTS);

    // An id's queued events go with it: nothing stale is left on the channel.
    let other = CmId::create(&ch, PortSpace::Rc).unwrap();
    other.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    settle();
    let err = listener.expect(CmEventType::CONNECT_REQUEST, Instant::now() + Duration::from_millis(300));
    assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
    drop(other);
    let err = ch.get().expect_err("the dropped id's ADDR_RESOLVED went with it");
    assert_eq!(std::io::Error::from(err).kind(), std::io::ErrorKind::WouldBlock);
}

/// Issue 22: the CM paths gave the QP remote write (and read and atomics)
/// whatever was asked, so a peer could write into every region of the PD.
#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn regression_cm_connection_grants_no_remote_write_unless_asked() {
    use rrddmma::prim::AccessFlags;
    for granted in [AccessFlags::empty(), AccessFlags::REMOTE_WRITE] {
        let (l, addr) = listener();
        let server = std::thread::spawn(move || accept_rc_cm(&l, &CmOpts::default().access(granted)).unwrap());
        let client = connect_rc_cm(addr, &CmOpts::default()).unwrap();
        let server = server.join().unwrap();
        // A region registered with the default access, remote write among
        // it: only the QP's access stands in the way.
        let target = RegisteredMem::new(&server.pd, 4096).unwrap();
        let mut src = RegisteredMem::new(&client.pd, 64).unwrap();
        src.write(0, &[0xa5; 64]);
        let sge = [src.sge(0..64)];
        let at = target.remote().checked_addr_at(128, 64).unwrap();
        // SAFETY: `src` is registered on the client's PD and outlives the completion polled below.
        unsafe { client.qp.post_send(&mut [SendWr::write(&sge, at).wr_id(9).signaled()]) }.unwrap();
        let wc = poll_one(&client.send_cq);
        let mut got = vec![0xffu8; 4096];
        target.read(0, &mut got);
        if granted.is_empty() {
            assert!(
                matches!(wc.status(), WcStatus::REM_ACCESS_ERR | WcStatus::REM_INV_REQ_ERR),
                "a WRITE to a QP connected without remote write: {:?}",
                wc.status()
            );
            assert!(got.iter().all(|b| *b == 0), "the region is unchanged");
            eprintln!("no remote write granted: the peer's WRITE ended {:?}", wc.status());
        } else {
            assert_eq!(wc.status(), WcStatus::SUCCESS);
            assert!(got[128..192].iter().all(|b| *b == 0xa5) && got[..128].iter().all(|b| *b == 0));
        }
    }
}

/// Issue 22: `CmId` is `Sync`, and its accessors read fields librdmacm
/// writes while resolving; they now read under the channel's lock. Threads
/// read them throughout address and route resolution and see whole values.
#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn regression_cm_id_accessors_from_threads_during_resolution_see_whole_values() {
    let (l, addr) = listener();
    let ch = EventChannel::create().unwrap();
    for _ in 0..20 {
        let id = std::sync::Arc::new(CmId::create(&ch, PortSpace::Rc).unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = std::sync::Arc::new(std::sync::Barrier::new(4));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (id, stop, started) = (id.clone(), stop.clone(), started.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    started.wait();
                    loop {
                        if let Some(p) = id.peer_addr() {
                            assert_eq!(p, addr, "a torn peer address");
                        }
                        if let Some(a) = id.local_addr() {
                            assert!(a.ip() == cm_ip() || a.ip().is_unspecified(), "a torn local address {a}");
                        }
                        if let Some(d) = id.device_name() {
                            assert!(!d.is_empty());
                        }
                        let _ = id.port_num();
                        seen += 1;
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break seen;
                        }
                    }
                })
            })
            .collect();
        started.wait();
        id.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
        id.expect(CmEventType::ADDR_RESOLVED, Instant::now() + Duration::from_secs(5)).unwrap();
        id.resolve_route(Duration::from_secs(2)).unwrap();
        id.expect(CmEventType::ROUTE_RESOLVED, Instant::now() + Duration::from_secs(5)).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().expect("a reader saw a torn value") > 0);
        }
        assert_eq!(id.peer_addr(), Some(addr));
        assert_eq!(id.local_addr().map(|a| a.ip()), Some(cm_ip()));
    }
    drop(l);
}

/// A listener migrated with a connect request queued for it takes the
/// request on its new channel; the request's id stays where its events
/// arrive (the channel the request came on), so its connection completes.
#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn migrated_listener_takes_its_queued_request_whose_id_keeps_its_channel() {
    use rrddmma::prim::QpType;
    let deadline = || Instant::now() + Duration::from_secs(5);
    let ch = EventChannel::create().unwrap();
    let mut listener = CmId::create(&ch, PortSpace::Rc).unwrap();
    listener.bind(SocketAddr::new(cm_ip(), 0)).unwrap();
    listener.listen(4).unwrap();
    let addr = listener.local_addr().unwrap();
    let client = CmId::create(&ch, PortSpace::Rc).unwrap();
    client.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ADDR_RESOLVED, deadline()).unwrap();
    client.resolve_route(Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ROUTE_RESOLVED, deadline()).unwrap();
    let (_cpd, _ccq, cqp) = qp_parts(&client, QpType::RC);
    client.connect(&cqp, &ConnParam::default()).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let err = client.expect(CmEventType::CONNECT_RESPONSE, Instant::now() + Duration::from_millis(300));
    assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
    // The request is queued on `ch`; the listener moves to a channel of its own.
    let ch2 = EventChannel::create().unwrap();
    listener.migrate(&ch2).unwrap();
    let mut req = listener.expect(CmEventType::CONNECT_REQUEST, deadline()).expect("the request moved with it");
    let conn = req.take_request().unwrap();
    assert_eq!(conn.channel().as_ptr(), ch.as_ptr(), "the request's id is on the channel it came on");
    let (_spd, _scq, sqp) = qp_parts(&conn, QpType::RC);
    conn.accept(&sqp, &ConnParam::default()).unwrap();
    client.expect(CmEventType::CONNECT_RESPONSE, deadline()).unwrap();
    client.establish(&cqp).unwrap();
    conn.expect(CmEventType::ESTABLISHED, deadline()).unwrap();
    assert_eq!(sqp.query_state().unwrap(), QpState::RTS);
}

/// Set in the child process of [`a1_device_name_and_connect_under_an_absent_libibverbs`].
const A1_CHILD: &str = "RRDDMMA_A1_CHILD";

/// A1: under the `dlopen` linkage librdmacm loads a libibverbs of its own,
/// so an id resolves to a device even when the libibverbs this crate loads
/// (`RRDDMMA_LIBIBVERBS`) does not open. The id's device name must still be
/// read (it was a null dereference) and connecting must end in the typed
/// `Error::Load`, not a crash. The case runs in a child process (a library
/// is opened once per process); on the linked linkages, where the override
/// means nothing, the id's device name is the one the device list has.
#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn a1_device_name_and_connect_under_an_absent_libibverbs() {
    let resolved = |ch: &EventChannel| {
        let (_l, addr) = listener();
        let id = CmId::create(ch, PortSpace::Rc).unwrap();
        id.resolve_addr(None, addr, Duration::from_secs(5)).unwrap();
        id.expect(CmEventType::ADDR_RESOLVED, Instant::now() + Duration::from_secs(10)).unwrap();
        id
    };
    if std::env::var_os(A1_CHILD).is_some() {
        let ch = EventChannel::create().expect("librdmacm loads (the override names libibverbs only)");
        let name = resolved(&ch).device_name().expect("the id is bound to a device after ADDR_RESOLVED");
        assert!(!name.is_empty(), "the device name is read from the device");
        let (_l, addr) = listener();
        match connect_rc_cm(addr, &CmOpts::default()) {
            // `Error::Load` exists on the dlopen linkage only: matched by its words.
            Err(e) if format!("{e:?}").starts_with("Load") && e.to_string().contains("libibverbs-absent.so.1") => {
                println!("a1 child: device {name}; connect_rc_cm: {e}");
            }
            other => panic!("connect_rc_cm with libibverbs absent: expected Error::Load, got {other:?}"),
        }
        return;
    }
    if rrddmma::build_info().linkage != "dlopen" {
        let ch = EventChannel::create().unwrap();
        let name = resolved(&ch).device_name().expect("bound to a device");
        let names = rrddmma::prim::device_names().unwrap();
        assert!(names.contains(&name), "the id's device {name} is in the device list {names:?}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--ignored", "--exact", "--nocapture", "cm::a1_device_name_and_connect_under_an_absent_libibverbs"])
        .env(A1_CHILD, "1")
        .env("RRDDMMA_LIBIBVERBS", "libibverbs-absent.so.1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success()
            && text.contains("a1 child: device ")
            && text.contains("cannot load libibverbs-absent.so.1"),
        "the child (RRDDMMA_LIBIBVERBS=libibverbs-absent.so.1) ended with {:?}:\n{text}",
        out.status
    );
}
