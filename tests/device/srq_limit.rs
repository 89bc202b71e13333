//! The SRQ limit event: armed with `ibv_modify_srq`, raised once when the
//! posted receives fall below it, then disarmed.

use std::time::Duration;

use rrddmma::prim::{
    ConnectOpts, Cq, Error, EventElement, EventType, Qp, QpCaps, QpType, RecvWr, SendWr, Srq, WcOpcode, WcStatus,
};

use crate::common::{poll_one, Loopback};

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn srq_limit_event_fires_once_below_the_armed_limit() {
    let lb = Loopback::new(QpCaps::default());
    let srq = Srq::builder(&lb.pd).max_wr(16).build().unwrap();
    let cq = Cq::create(&lb.ctx, 64).unwrap();
    let qa = Qp::builder(&lb.pd, QpType::RC, &cq, &cq).build().unwrap();
    let qb = Qp::builder(&lb.pd, QpType::RC, &cq, &cq).srq(&srq).build().unwrap();
    let opts = ConnectOpts::default();
    crate::common::connect_pair(&qa, &qb, &opts, (5, 6));
    // Drain what came before.
    while lb.ctx.async_event(Some(Duration::from_millis(100))).unwrap().is_some() {}

    let size = srq.query().unwrap();
    assert!(size.max_wr >= 16, "granted {size:?}");
    assert_eq!(size.srq_limit, 0, "no limit unless armed");
    let e = srq.arm_limit(size.max_wr + 1).unwrap_err();
    assert!(
        matches!(e, Error::CapExceeded { asked, limit, .. } if asked == u64::from(size.max_wr) + 1 && limit == u64::from(size.max_wr)),
        "{e:?}"
    );

    let sges: Vec<_> = (0..8).map(|i| [lb.mr_b.sge_at(i * 64, 64)]).collect();
    let mut wrs: Vec<_> = sges.iter().enumerate().map(|(i, s)| RecvWr::new(s, 100 + i as u64)).collect();
    // SAFETY: receives in `mr_b`, untouched until their completions.
    unsafe { srq.post_recv(&mut wrs) }.unwrap();
    srq.arm_limit(4).unwrap();
    assert_eq!(srq.query().unwrap().srq_limit, 4);

    let s = [lb.mr_a.sge_at(0, 16)];
    let send = |n: u64| {
        // SAFETY: the entry lies in `mr_a`, untouched until the completion.
        unsafe { qa.post_send(&mut [SendWr::send(&s).wr_id(n).signaled()]) }.unwrap();
        let mut opcodes = Vec::new();
        for _ in 0..2 {
            let wc = poll_one(&cq);
            assert_eq!(wc.status(), WcStatus::SUCCESS, "{wc:?}");
            opcodes.push(wc.opcode());
        }
        assert!(opcodes.contains(&WcOpcode::RECV), "{opcodes:?}");
    };
    // Four of eight consumed: four remain, not below the limit.
    for n in 0..4 {
        send(n);
    }
    let early = lb.ctx.async_event(Some(Duration::from_millis(300))).unwrap();
    assert!(early.is_none(), "no event while 4 receives remain: {early:?}");
    // The fifth leaves three: the event, for this SRQ.
    send(4);
    let ev = lb.ctx.async_event(Some(Duration::from_secs(5))).unwrap().expect("SRQ_LIMIT_REACHED within 5 s");
    assert_eq!(ev.event_type, EventType::SRQ_LIMIT_REACHED, "{ev:?}");
    assert_eq!(ev.element, EventElement::Srq(srq.as_ptr() as usize));
    assert_eq!(srq.query().unwrap().srq_limit, 0, "the limit disarms when it fires");
    // Disarmed: the next receive raises nothing.
    send(5);
    let again = lb.ctx.async_event(Some(Duration::from_millis(300))).unwrap();
    assert!(again.is_none(), "the event fires once per arming: {again:?}");
    eprintln!("srq limit: SRQ_LIMIT_REACHED after the fifth of 8 receives (limit 4) on {}", lb.ctx.name());
}
