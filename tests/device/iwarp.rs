//! iWARP (soft-iWARP `siw0`, built by the harness: docs/testing.md): what the
//! transport lacks is a typed error. `RRDDMMA_EXPECT_IWARP=1` (set by the
//! harness on siw0) makes the iWARP branch mandatory; on RoCE the same calls
//! must succeed.

use rrddmma::bindings as ffi;
use rrddmma::prim::{Cq, Pd, Qp, QpType};

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn iwarp_refuses_ud_with_a_typed_error_and_reports_no_atomics() {
    let ctx = open_device();
    let iwarp = iwarp_expected();
    let attr = ctx.query_device_ex().unwrap();
    let none = attr.orig_attr.atomic_cap == ffi::ibv_atomic_cap::IBV_ATOMIC_NONE;
    assert_eq!(none, iwarp, "atomic_cap {:?} on {} (iWARP expected: {iwarp})", attr.orig_attr.atomic_cap, ctx.name());
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    match Qp::builder(&pd, QpType::UD, &cq, &cq).build() {
        Ok(_) => assert!(!iwarp, "{} created a UD QP although it is iWARP", ctx.name()),
        Err(e) => {
            assert!(iwarp, "UD QP on {}: {e:?}", ctx.name());
            assert!(e.is_unsupported(), "UD on iWARP must be a typed Unsupported: {e:?}");
            eprintln!("iwarp: UD refused with {e} on {}", ctx.name());
        }
    }
}

fn iwarp_expected() -> bool {
    std::env::var("RRDDMMA_EXPECT_IWARP").is_ok_and(|v| v == "1")
}

/// A listening server id and a client id whose route to it is resolved,
/// each on its own channel (the channels first: they outlive the ids).
#[cfg(feature = "cm")]
fn listener_and_routed_client(
) -> (rrddmma::prim::cm::EventChannel, rrddmma::prim::cm::CmId, rrddmma::prim::cm::EventChannel, rrddmma::prim::cm::CmId)
{
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use rrddmma::prim::cm::{CmEventType, CmId, EventChannel, PortSpace};

    let deadline = || Instant::now() + Duration::from_secs(10);
    let sch = EventChannel::create().unwrap();
    let server = CmId::bound(&sch, PortSpace::Rc, SocketAddr::new(crate::cm::cm_ip(), 0)).unwrap();
    server.listen(4).unwrap();
    let cch = EventChannel::create().unwrap();
    let client = CmId::create(&cch, PortSpace::Rc).unwrap();
    client.resolve_addr(None, server.local_addr().unwrap(), Duration::from_secs(5)).unwrap();
    client.expect(CmEventType::ADDR_RESOLVED, deadline()).unwrap();
    client.resolve_route(Duration::from_secs(5)).unwrap();
    client.expect(CmEventType::ROUTE_RESOLVED, deadline()).unwrap();
    (sch, server, cch, client)
}

/// A PD, a CQ and an RC QP on the device of `id`.
#[cfg(feature = "cm")]
fn rc_parts(id: &rrddmma::prim::cm::CmId) -> (rrddmma::prim::Context, Pd, Cq, Qp) {
    let ctx = rrddmma::prim::Context::open(&id.device_name().expect("bound to a device")).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 64).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    (ctx, pd, cq, qp)
}

/// An RC connection through the RDMA CM, on iWARP as on RoCE: the QPs move
/// through the CM's attribute sets (no P_Key index on iWARP), the active
/// side sees `ESTABLISHED` at once on iWARP (the kernel's iWARP CM moves the
/// QP to RTS itself) and `CONNECT_RESPONSE` then [`CmId::establish`] on
/// RoCE; then WRITE, SEND and READ with their data checked.
#[cfg(feature = "cm")]
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_CM_ADDR (cargo xtask test)"]
fn rc_through_the_cm_write_send_and_read() {
    use std::time::{Duration, Instant};

    use rrddmma::prim::cm::{CmEventType, ConnParam};
    use rrddmma::prim::{AccessFlags, QpState, RecvWr, RemoteMr, SendWr, WcOpcode, WcStatus};
    use rrddmma::wrap::RegisteredMem;

    use crate::common::poll_one;

    let deadline = || Instant::now() + Duration::from_secs(10);
    let (_sch, server, _cch, client) = listener_and_routed_client();
    let (cctx, cpd, ccq, cqp) = rc_parts(&client);
    let name = cctx.name().to_string();
    let iwarp = iwarp_expected();
    client.connect(&cqp, &ConnParam { private_data: b"iwarp hello", ..ConnParam::default() }).unwrap();

    let mut req = server.expect(CmEventType::CONNECT_REQUEST, deadline()).unwrap();
    assert_eq!(&req.private_data()[..11], b"iwarp hello");
    let conn = req.take_request().expect("a new id");
    let (_, spd, scq, sqp) = rc_parts(&conn);
    conn.set_access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    let mut target = RegisteredMem::new(&spd, 4096).unwrap();
    target.write(2048, b"read me back over the wire");
    let token = target.remote().to_bytes();
    conn.accept(&sqp, &ConnParam { private_data: &token, ..ConnParam::default() }).unwrap();
    // After the accept: rxe refuses receives on a QP in RESET. The client
    // sends only once it sees the connection established.
    let inbox = RegisteredMem::new(&spd, 64).unwrap();
    let rsge = [inbox.sge(0..64)];
    // SAFETY: `inbox` is registered on the server's PD and outlives the completion.
    unsafe { sqp.post_recv(&mut [RecvWr::new(&rsge, 3)]) }.unwrap();

    let reply = if iwarp {
        client.expect(CmEventType::ESTABLISHED, deadline()).expect("iWARP: ESTABLISHED answers rdma_connect")
    } else {
        let ev = client.expect(CmEventType::CONNECT_RESPONSE, deadline()).unwrap();
        client.establish(&cqp).unwrap();
        ev
    };
    let remote = RemoteMr::from_bytes(reply.private_data()[..RemoteMr::WIRE_LEN].try_into().unwrap());
    assert_eq!(remote, target.remote(), "the token came with the reply");
    conn.expect(CmEventType::ESTABLISHED, deadline()).unwrap();
    let states = (cqp.query_state().unwrap(), sqp.query_state().unwrap());
    if iwarp {
        // siw leaves the state out of its ibv_query_qp answer (it reads as
        // RESET): the data below is what shows the connection.
        eprintln!("iwarp: {name} reports QP states {states:?} once connected");
    } else {
        assert_eq!(states, (QpState::RTS, QpState::RTS), "{name}: both sides");
    }

    // WRITE, then a SEND behind it, then a READ of another part.
    let msg = b"written over iwarp or roce";
    let mut src = RegisteredMem::new(&cpd, 4096).unwrap();
    src.write(0, msg);
    src.write(1024, b"done");
    let wsge = [src.sge(0..msg.len())];
    let ssge = [src.sge(1024..1028)];
    let at = remote.checked_addr_at(100, msg.len()).unwrap();
    // SAFETY: `src` is registered on the client's PD and outlives the completions.
    unsafe { cqp.post_send(&mut [SendWr::write(&wsge, at).wr_id(1), SendWr::send(&ssge).wr_id(2).signaled()]) }
        .unwrap();
    let wc = poll_one(&ccq);
    assert_eq!((wc.status(), wc.wr_id(), wc.opcode()), (WcStatus::SUCCESS, 2, WcOpcode::SEND));
    let wc = poll_one(&scq);
    assert_eq!((wc.status(), wc.wr_id(), wc.byte_len()), (WcStatus::SUCCESS, 3, 4));
    let mut got = vec![0; msg.len()];
    target.read(100, &mut got);
    assert_eq!(&got, msg, "the WRITE landed before the SEND behind it");
    let mut done = [0; 4];
    inbox.read(0, &mut done);
    assert_eq!(&done, b"done");

    let back = b"read me back over the wire";
    let rsge = [src.sge(3000..3000 + back.len())];
    let from = remote.checked_addr_at(2048, back.len()).unwrap();
    // SAFETY: as above.
    unsafe { cqp.post_send(&mut [SendWr::read(&rsge, from).wr_id(4).signaled()]) }.unwrap();
    let wc = poll_one(&ccq);
    assert_eq!((wc.status(), wc.wr_id(), wc.opcode()), (WcStatus::SUCCESS, 4, WcOpcode::RDMA_READ));
    let mut got = vec![0; back.len()];
    src.read(3000, &mut got);
    assert_eq!(&got, back, "READ over {name}");

    client.disconnect().unwrap();
    conn.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
    let _ = conn.disconnect();
    client.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
    eprintln!("iwarp: RC through the CM, WRITE, SEND and READ on {name} (iWARP: {iwarp})");
}

/// The wrap layer's CM connection ([`connect_rc_cm`] / [`accept_rc_cm`]) on
/// iWARP as on RoCE, with a SEND each way.
#[cfg(feature = "cm")]
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_CM_ADDR (cargo xtask test)"]
fn wrap_cm_connection_sends_both_ways() {
    use std::net::SocketAddr;

    use rrddmma::prim::{RecvWr, SendWr, WcStatus};
    use rrddmma::wrap::{accept_rc_cm, connect_rc_cm, CmConn, CmListener, CmOpts, RegisteredMem};

    use crate::cm::cm_ip;
    use crate::common::poll_one;

    let l = CmListener::bind(SocketAddr::new(cm_ip(), 0), 4).unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || accept_rc_cm(&l, &CmOpts::default().private_data(b"srv".to_vec())));
    let client = connect_rc_cm(addr, &CmOpts::default().private_data(b"cli".to_vec())).expect("connect_rc_cm");
    let server = server.join().unwrap().expect("accept_rc_cm");
    assert_eq!(&client.peer_data[..3], b"srv");
    assert_eq!(&server.peer_data[..3], b"cli");
    let send = |a: &CmConn, b: &CmConn, msg: &[u8]| {
        let mut src = RegisteredMem::new(&a.pd, 256).unwrap();
        let dst = RegisteredMem::new(&b.pd, 256).unwrap();
        src.write(0, msg);
        let r = [dst.sge(0..256)];
        // SAFETY: `dst` is registered on b's PD and outlives the completion.
        unsafe { b.qp.post_recv(&mut [RecvWr::new(&r, 1)]) }.unwrap();
        let s = [src.sge(0..msg.len())];
        // SAFETY: `src` is registered on a's PD and outlives the completion.
        unsafe { a.qp.post_send(&mut [SendWr::send(&s).wr_id(2).signaled()]) }.unwrap();
        assert_eq!(poll_one(&a.send_cq).status(), WcStatus::SUCCESS);
        let wc = poll_one(&b.recv_cq);
        assert_eq!((wc.status(), wc.byte_len() as usize), (WcStatus::SUCCESS, msg.len()));
        let mut got = vec![0; msg.len()];
        dst.read(0, &mut got);
        assert_eq!(got, msg);
    };
    send(&client, &server, b"client to server");
    send(&server, &client, b"and back");
    eprintln!("iwarp: wrap CM connection, SEND both ways (iWARP: {})", iwarp_expected());
}

/// The atomics iWARP lacks, as typed errors at each place a program meets
/// them, on a connection through the CM: a QP made with atomic send ops
/// and a FETCH_AND_ADD and a CMP_AND_SWP posted (siw's provider refuses them
/// with `EINVAL`, which the library names). The accept grants
/// `REMOTE_ATOMIC`, as C programs do, and is accepted on both (the library
/// passes the access on as asked). The connection carries a WRITE
/// afterwards. On RoCE the same calls succeed and the atomics return the
/// old values.
#[cfg(feature = "cm")]
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_CM_ADDR (cargo xtask test)"]
fn atomics_on_iwarp_are_typed_errors_naming_the_cap() {
    use std::time::{Duration, Instant};

    use crate::common::poll_one;
    use rrddmma::prim::cm::{CmEventType, ConnParam};
    use rrddmma::prim::{AccessFlags, Error, RemoteMr, SendOps, SendWr, WcStatus};
    use rrddmma::wrap::RegisteredMem;

    let iwarp = iwarp_expected();
    let is_atomic_refusal = |e: &Error, op: &str, what: &str| {
        let msg = e.to_string();
        matches!(e, Error::Unsupported { op: o, .. } if *o == op)
            && msg.contains(what)
            && msg.contains("atomic_cap = IBV_ATOMIC_NONE")
    };
    // A posted atomic: the refused request's index too, EOPNOTSUPP.
    let is_refused_post = |e: &Error, what: &str, at: Option<usize>| {
        let msg = e.to_string();
        matches!(e, Error::Post { op: "ibv_post_send", index, unsupported: Some(u), .. }
                 if *index == at && u.missing.feature.contains(what) && !u.device.is_empty() && u.device != "(no device)")
            && e.is_unsupported()
            && e.errno() == Some(libc::EOPNOTSUPP)
            && msg.contains(what)
            && msg.contains("atomic_cap = IBV_ATOMIC_NONE")
    };
    let deadline = || Instant::now() + Duration::from_secs(10);
    let (_sch, server, _cch, client) = listener_and_routed_client();
    let (cctx, cpd, ccq, cqp) = rc_parts(&client);
    assert_eq!(cctx.atomics(), !iwarp, "{}: Context::atomics (iWARP expected: {iwarp})", cctx.name());

    // A QP with atomic send ops: refused before the provider is asked.
    let ex = Qp::builder(&cpd, QpType::RC, &ccq, &ccq)
        .send_ops(SendOps::SEND | SendOps::RDMA_WRITE | SendOps::ATOMIC_FETCH_AND_ADD)
        .build();
    match ex {
        Err(e) if iwarp => {
            assert!(is_atomic_refusal(&e, "ibv_create_qp_ex", "ATOMIC_FETCH_AND_ADD"), "{e:?}: {e}");
            eprintln!("iwarp: {e}");
        }
        Err(e) => assert!(!is_atomic_refusal(&e, "ibv_create_qp_ex", ""), "{} has atomics: {e}", cctx.name()),
        Ok(_) => assert!(!iwarp, "{} made a QP with atomic send ops although it is iWARP", cctx.name()),
    }

    client.connect(&cqp, &ConnParam::default()).unwrap();
    let mut req = server.expect(CmEventType::CONNECT_REQUEST, deadline()).unwrap();
    let conn = req.take_request().expect("a new id");
    let (_, spd, _scq, sqp) = rc_parts(&conn);
    let target = RegisteredMem::new(&spd, 4096).unwrap();
    let token = target.remote().to_bytes();
    let param = ConnParam { private_data: &token, ..ConnParam::default() };
    // REMOTE_ATOMIC granted, as C programs grant it: accepted on iWARP too.
    conn.set_access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC);
    conn.accept(&sqp, &param).unwrap_or_else(|e| panic!("accept with REMOTE_ATOMIC (iWARP: {iwarp}): {e}"));
    let reply = if iwarp {
        client.expect(CmEventType::ESTABLISHED, deadline()).unwrap()
    } else {
        let ev = client.expect(CmEventType::CONNECT_RESPONSE, deadline()).unwrap();
        client.establish(&cqp).unwrap();
        ev
    };
    let remote = RemoteMr::from_bytes(reply.private_data()[..RemoteMr::WIRE_LEN].try_into().unwrap());
    conn.expect(CmEventType::ESTABLISHED, deadline()).unwrap();

    let mut src = RegisteredMem::new(&cpd, 64).unwrap();
    let old = [src.sge(0..8)];
    let at = remote.checked_addr_at(0, 8).unwrap();
    let atomics = [
        ("IBV_WR_ATOMIC_FETCH_AND_ADD", SendWr::fetch_add(&old, at, 5)),
        ("IBV_WR_ATOMIC_CMP_AND_SWP", SendWr::compare_swap(&old, at, 5, 9)),
    ];
    for (i, (name, wr)) in atomics.into_iter().enumerate() {
        // SAFETY: `src` is registered on the client's PD and outlives the completion.
        match unsafe { cqp.post_send(&mut [wr.wr_id(i as u64).signaled()]) } {
            Err(e) if iwarp => {
                assert!(is_refused_post(&e, name, Some(0)), "{e:?}: {e}");
                eprintln!("iwarp: {e}");
            }
            r => {
                r.unwrap_or_else(|e| panic!("{name} on {}: {e}", cctx.name()));
                let wc = poll_one(&ccq);
                assert_eq!((wc.status(), wc.wr_id()), (WcStatus::SUCCESS, i as u64), "{name}");
                let mut v = [0; 8];
                src.read(0, &mut v);
                assert_eq!(u64::from_ne_bytes(v), [0, 5][i], "{name}: the old value");
            }
        }
    }
    let mut v = [0; 8];
    target.read(0, &mut v);
    assert_eq!(u64::from_ne_bytes(v), if iwarp { 0 } else { 9 }, "the target after the atomics");
    // An atomic behind a WRITE in one list: on iWARP the error names the
    // atomic's index, and the WRITE before it was posted (its completion
    // comes, its bytes land); elsewhere both complete.
    src.write(16, b"first");
    let w = [src.sge(16..21)];
    let mut list = [
        SendWr::write(&w, remote.checked_addr_at(200, 5).unwrap()).wr_id(20).signaled(),
        SendWr::fetch_add(&old, at, 1).wr_id(21).signaled(),
    ];
    // SAFETY: as above.
    match unsafe { cqp.post_send(&mut list) } {
        Err(e) if iwarp => {
            assert!(is_refused_post(&e, "IBV_WR_ATOMIC_FETCH_AND_ADD", Some(1)), "{e:?}: {e}");
            assert!(e.to_string().contains("at work request 1 of the batch; the ones before it were posted"), "{e}");
            eprintln!("iwarp: {e}");
            let wc = poll_one(&ccq);
            assert_eq!((wc.status(), wc.wr_id()), (WcStatus::SUCCESS, 20), "the WRITE before the atomic");
        }
        r => {
            r.unwrap_or_else(|e| panic!("WRITE + FETCH_AND_ADD on {}: {e}", cctx.name()));
            let ids = [poll_one(&ccq), poll_one(&ccq)].map(|wc| (wc.status(), wc.wr_id()));
            assert_eq!(ids, [(WcStatus::SUCCESS, 20), (WcStatus::SUCCESS, 21)]);
        }
    }
    let mut got = [0; 5];
    target.read(200, &mut got);
    assert_eq!(&got, b"first", "the WRITE ahead of the atomic landed");
    // The connection still carries a WRITE.
    src.write(8, b"after");
    let w = [src.sge(8..13)];
    // SAFETY: as above.
    unsafe { cqp.post_send(&mut [SendWr::write(&w, remote.checked_addr_at(100, 5).unwrap()).wr_id(7).signaled()]) }
        .unwrap();
    assert_eq!(poll_one(&ccq).status(), WcStatus::SUCCESS);
    let mut got = [0; 5];
    target.read(100, &mut got);
    assert_eq!(&got, b"after");
    client.disconnect().unwrap();
    conn.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
    let _ = conn.disconnect();
    eprintln!("iwarp: atomics on {} (iWARP: {iwarp}) checked", cctx.name());
}
