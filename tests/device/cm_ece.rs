//! ECE through librdmacm, on the harness's CM device (`RRDDMMA_CM_ADDR`):
//! what each side offers with `CmId::set_local_ece` arrives in the peer's
//! `CmId::remote_ece` through the CM's REQ and REP.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::cm::cm_ip;
use rrddmma::prim::cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
use rrddmma::prim::{Context, Cq, Ece, Pd, Qp, QpState, QpType};

fn rc_parts(id: &CmId) -> (Pd, Cq, Qp) {
    let ctx = Context::open(&id.device_name().expect("bound to a device")).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    (pd, cq, qp)
}

#[test]
#[ignore = "needs the harness's CM device (RRDDMMA_CM_ADDR)"]
fn ece_offers_cross_in_the_connect_request_and_reply() {
    let deadline = || Instant::now() + Duration::from_secs(5);
    let client_offer = Ece { vendor_id: 0x02c9, options: 0x5, comp_mask: 0 };
    let server_offer = Ece { vendor_id: 0x02c9, options: 0x1, comp_mask: 0 };

    let sch = EventChannel::create().unwrap();
    let server = CmId::bound(&sch, PortSpace::Rc, SocketAddr::new(cm_ip(), 0)).unwrap();
    server.listen(4).unwrap();
    let addr = server.local_addr().unwrap();

    let cch = EventChannel::create().unwrap();
    let client = CmId::create(&cch, PortSpace::Rc).unwrap();
    client.resolve_addr(None, addr, Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ADDR_RESOLVED, deadline()).unwrap();
    client.resolve_route(Duration::from_secs(2)).unwrap();
    client.expect(CmEventType::ROUTE_RESOLVED, deadline()).unwrap();
    let (_cpd, _ccq, cqp) = rc_parts(&client);
    client.set_local_ece(&client_offer).unwrap();
    client.connect(&cqp, &ConnParam::default()).unwrap();

    let mut req = server.expect(CmEventType::CONNECT_REQUEST, deadline()).unwrap();
    let conn = req.take_request().expect("a new id");
    let seen_by_server = conn.remote_ece().unwrap();
    let (_spd, _scq, sqp) = rc_parts(&conn);
    conn.set_local_ece(&server_offer).unwrap();
    conn.accept(&sqp, &ConnParam::default()).unwrap();
    client.expect(CmEventType::CONNECT_RESPONSE, deadline()).unwrap();
    let seen_by_client = client.remote_ece().unwrap();
    client.establish(&cqp).unwrap();
    conn.expect(CmEventType::ESTABLISHED, deadline()).unwrap();
    assert_eq!(cqp.query_state().unwrap(), QpState::RTS);
    eprintln!("ECE seen by the server: {seen_by_server:?}; by the client: {seen_by_client:?}");
    assert_eq!(seen_by_server, client_offer, "the REQ carried the client's offer");
    assert_eq!(seen_by_client, server_offer, "the REP carried the server's offer");

    client.disconnect().unwrap();
    conn.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
    conn.disconnect().unwrap();
    client.expect(CmEventType::DISCONNECTED, deadline()).unwrap();
}
