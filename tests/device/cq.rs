//! Extended CQ polling, completion channels, moderation, timestamps.

use std::time::{Duration, Instant};

use rrddmma::prim::{CompChannel, Cq, Pd, QpCaps, RecvWr, SendWr, Wc, WcFlagsEx, WcOpcode, WcStatus};
use rrddmma::wrap::connected_rc_pair;

use crate::common::{open_device, opts, panic_message, poll_one, Buf};

/// Collects `n` completions through extended polling passes.
fn collect(cq: &Cq, n: usize) -> Vec<(u64, WcStatus, WcOpcode, u32, u32)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} completions within 10 s", out.len());
        let mut pass = cq.start_poll().expect("ibv_start_poll");
        while let Some(p) = pass {
            let wc = p.wc();
            out.push((wc.wr_id(), wc.status(), wc.opcode(), wc.byte_len(), wc.qp_num()));
            pass = p.advance().expect("ibv_next_poll");
        }
    }
    out
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn extended_poller_drains_and_resumes_in_order() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::builder(&ctx, 64).extended(WcFlagsEx::STANDARD).build().unwrap();
    assert!(cq.start_poll().unwrap().is_none(), "a new CQ is empty");
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 3, &opts(&ctx)).unwrap();
    let mut src = Buf::new(&pd, 4096);
    let dst = Buf::new(&pd, 4096);
    src.bytes().fill(0xab);
    let sges: Vec<_> = (0..8).map(|i| [src.mr.sge_at(i * 512, 512)]).collect();
    // Several rounds: each drains the CQ to empty (the path where rdma-core
    // < 55 rxe ends the pass inside next_poll), then more completions follow.
    let mut next_id = 0u64;
    for round in [5usize, 3, 1, 8] {
        let mut wrs: Vec<SendWr<'_>> = (0..round)
            .map(|i| SendWr::write(&sges[i], dst.mr.remote().addr_at(i * 512)).wr_id(next_id + i as u64).signaled())
            .collect();
        // SAFETY: entries in registered memory, alive until completion.
        unsafe { qa.post_send(&mut wrs) }.unwrap();
        let got = collect(&cq, round);
        for (i, (id, status, op, _len, qpn)) in got.iter().enumerate() {
            assert_eq!(*id, next_id + i as u64, "completions in order, none skipped or repeated: {got:?}");
            assert_eq!((*status, *op, *qpn), (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE, qa.qpn()));
        }
        next_id += round as u64;
        assert!(cq.start_poll().unwrap().is_none(), "nothing left after round of {round}");
    }
    let mut wc = [Wc::default()];
    assert_eq!(cq.poll(&mut wc).unwrap(), 0, "classic poll agrees the CQ is empty");
}

/// A classic CQ reaches `start_poll`'s provider call through a stand-in
/// view whose entry touches nothing; the call must still panic naming the
/// fix, and leave the CQ and its completions to the classic poll.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn start_poll_on_a_classic_cq_panics_naming_the_fix() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    assert!(format!("{cq:?}").contains("extended: false"), "{cq:?}");
    let ex = Cq::builder(&ctx, 16).extended(WcFlagsEx::default()).build().unwrap();
    assert!(format!("{ex:?}").contains("extended: true"), "{ex:?}");
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 3, &opts(&ctx)).unwrap();
    let src = Buf::new(&pd, 64);
    let dst = Buf::new(&pd, 64);
    let sges = [src.mr.sge_at(0, 64)];
    let mut wrs = [SendWr::write(&sges, dst.mr.remote().addr_at(0)).wr_id(7).signaled()];
    // SAFETY: entries in registered memory, alive until completion.
    unsafe { qa.post_send(&mut wrs) }.unwrap();
    for _ in 0..2 {
        let msg = panic_message(|| cq.start_poll().map(|p| p.is_some()));
        assert_eq!(msg, "start_poll on a classic CQ: create it with CqBuilder::extended");
    }
    let wc = poll_one(&cq);
    assert_eq!((wc.wr_id(), wc.status()), (7, WcStatus::SUCCESS), "the classic poll still takes the completion");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn completion_channel_wakes_a_blocked_thread() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let ch = CompChannel::create(&ctx).unwrap();
    let send_cq = Cq::create(&ctx, 16).unwrap();
    let recv_cq = Cq::builder(&ctx, 16).channel(&ch).build().unwrap();
    let (qa, qb) = connected_rc_pair(&pd, &send_cq, &recv_cq, QpCaps::default(), 1, &opts(&ctx)).unwrap();
    let src = Buf::new(&pd, 64);
    let dst = Buf::new(&pd, 64);

    // Nothing armed and nothing sent: the wait times out.
    recv_cq.req_notify(false).unwrap();
    let t = Instant::now();
    assert!(!recv_cq.wait(Some(Duration::from_millis(50))).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(45));

    let rs = [dst.mr.sge_at(0, 64)];
    // SAFETY: entry in registered memory, alive until completion.
    unsafe { qb.post_recv(&mut [RecvWr::new(&rs, 42)]) }.unwrap();
    let waiter = {
        let cq = recv_cq.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let woke = cq.wait(Some(Duration::from_secs(10))).unwrap();
            let mut wc = [Wc::default()];
            let n = cq.poll(&mut wc).unwrap();
            (woke, t.elapsed(), n, wc[0])
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let ss = [src.mr.sge_at(0, 32)];
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::send(&ss).wr_id(1).signaled()]) }.unwrap();
    let (woke, blocked_for, n, wc) = waiter.join().unwrap();
    assert!(woke, "the waiter was woken by the completion");
    assert!(blocked_for >= Duration::from_millis(150), "the waiter really blocked ({blocked_for:?})");
    assert!(blocked_for < Duration::from_secs(10));
    assert_eq!((n, wc.wr_id(), wc.status(), wc.byte_len()), (1, 42, WcStatus::SUCCESS, 32));
    assert_eq!(recv_cq.unacked_events(), 1, "the event awaits a batched ack");
    recv_cq.ack_events();
    assert_eq!(recv_cq.unacked_events(), 0);
    assert_eq!(poll_one(&send_cq).status(), WcStatus::SUCCESS);

    // Without a timeout on a blocking channel the wait is the read inside
    // `ibv_get_cq_event` alone: it blocks all the same and wakes on the event.
    recv_cq.req_notify(false).unwrap();
    // SAFETY: as above.
    unsafe { qb.post_recv(&mut [RecvWr::new(&rs, 43)]) }.unwrap();
    let waiter = {
        let cq = recv_cq.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let woke = cq.wait(None).unwrap();
            let mut wc = [Wc::default()];
            (woke, t.elapsed(), cq.poll(&mut wc).unwrap(), wc[0])
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: as above.
    unsafe { qa.post_send(&mut [SendWr::send(&ss).wr_id(2).signaled()]) }.unwrap();
    let (woke, blocked_for, n, wc) = waiter.join().unwrap();
    assert!(woke && blocked_for >= Duration::from_millis(150), "blocked {blocked_for:?}, woke {woke}");
    assert_eq!((n, wc.wr_id(), wc.status()), (1, 43, WcStatus::SUCCESS));
    assert_eq!(recv_cq.unacked_events(), 1);
    assert_eq!(poll_one(&send_cq).status(), WcStatus::SUCCESS);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn timestamps_and_moderation_report_unsupported_where_absent() {
    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let ts = Cq::builder(&ctx, 16).extended(WcFlagsEx::STANDARD | WcFlagsEx::COMPLETION_TIMESTAMP).build();
    if attr.completion_timestamp_mask == 0 {
        let err = ts.unwrap_err();
        assert!(err.is_unsupported(), "{err:?}");
    } else {
        let cq = ts.unwrap();
        assert!(cq.wc_flags().contains(WcFlagsEx::COMPLETION_TIMESTAMP));
    }
    let cq = Cq::create(&ctx, 16).unwrap();
    match cq.set_moderation(16, 10) {
        Ok(()) => assert!(attr.cq_mod_caps.max_cq_count > 0, "moderation accepted, so the device says it has it"),
        Err(e) => assert!(e.is_unsupported(), "{e:?}"),
    }
}

/// `spin_one` and `wait_one`: one completion, or `None` once the timeout
/// passes on an empty CQ; `wait_one` sleeps on the channel.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn one_completion_helpers_return_it_or_time_out() {
    use rrddmma::prim::{CompChannel, Cq, Pd, QpCaps, SendWr};
    use rrddmma::wrap::connected_rc_pair;
    let ctx = crate::common::open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let ch = CompChannel::create(&ctx).unwrap();
    let cq = Cq::builder(&ctx, 16).channel(&ch).build().unwrap();
    let (qa, _qb) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 5, &crate::common::opts(&ctx)).unwrap();
    let mut buf = crate::common::Buf::new(&pd, 64);
    buf.bytes().fill(3);
    let t = std::time::Instant::now();
    assert!(cq.wait_one(std::time::Duration::from_millis(200)).unwrap().is_none());
    assert!(t.elapsed() >= std::time::Duration::from_millis(200), "waited the whole timeout");
    assert!(cq.spin_one(std::time::Duration::from_millis(50)).unwrap().is_none());
    assert!(cq.poll_one().unwrap().is_none());
    let s = [buf.mr.sge_at(0, 8)];
    for (i, how) in ["wait", "spin"].into_iter().enumerate() {
        // SAFETY: `buf` outlives the completion taken below.
        unsafe { qa.post_send(&mut [SendWr::write(&s, buf.mr.remote().addr_at(32)).wr_id(i as u64).signaled()]) }
            .unwrap();
        let wc = match how {
            "wait" => cq.wait_one(std::time::Duration::from_secs(10)),
            _ => cq.spin_one(std::time::Duration::from_secs(10)),
        }
        .unwrap()
        .unwrap_or_else(|| panic!("{how}_one: no completion within 10 s"));
        assert_eq!(wc.ok().unwrap().wr_id(), i as u64);
    }
}
