//! Verbs that ConnectX has and SoftRoCE lacks: XRC SRQs and remote SRQNs,
//! the device clock, device-memory regions, ECE, packet pacing and flow
//! counters. Where the device lacks one, the exact typed `Unsupported` (op
//! and feature) is asserted on software devices; where it has it
//! (hardware), the positive path runs with its data checked. A ConnectX
//! that lacks one skips through `mlx5_test_skips` (a failure under
//! `--expect mlx5`, the default on mlx5), other hardware fails.

use std::time::{Duration, Instant};

use rrddmma::prim::{
    AccessFlags, AhAttr, Context, CounterKind, Counters, Cq, Dm, Ece, Error, ExWc, Mtu, Pd, Qp, QpAttr, QpCaps,
    QpState, QpType, RateLimit, RecvWr, SendWr, Srq, WcFlagsEx, WcOpcode, WcStatus, Xrcd,
};
use rrddmma::wrap::connected_rc_pair;

use rrddmma::mlx5dv;

use crate::common::{mlx5_test_skips, open_device, opts, poll_one, Buf, Loopback};

/// Asserts `e` is `Unsupported` from `op`, the refusal `row` of
/// `prim::unsupported::ALL`, naming the device and the way out.
fn assert_unsupported(e: &Error, op: &str, row: &str) {
    assert!(
        matches!(e, Error::Unsupported { op: o, lack, .. } if *o == op && lack.missing.name == row),
        "expected Unsupported {{ op: {op:?}, row {row} }}, got {e:?}"
    );
    let lack = e.lack().unwrap();
    assert!(!lack.device.is_empty() && e.to_string().contains(lack.instead()), "{e}");
}

/// SoftRoCE (vendor 0xffffff) or soft-iWARP: the devices expected to lack
/// every verb of this module; hardware that lacks one fails the test.
fn is_software(ctx: &Context) -> bool {
    ctx.query_device().unwrap().vendor_id == 0xff_ffff || ctx.name().starts_with("siw")
}

/// The device refused `what` (`why`): `false` on a software device (the
/// caller asserts the exact refusal); on a ConnectX (a model or firmware
/// without it) a skip through `mlx5_test_skips`, a failure under
/// `--expect mlx5`, and `true` (the caller returns); any other hardware
/// fails the test.
fn hardware_lacks(ctx: &Context, what: &str, why: &dyn std::fmt::Debug) -> bool {
    if is_software(ctx) {
        return false;
    }
    assert!(mlx5dv::is_supported(ctx), "{}: only software devices are expected to lack {what}: {why:?}", ctx.name());
    mlx5_test_skips(&format!("{}: this ConnectX has no {what}: {why:?}", ctx.name()))
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn xrc_srq_receives_what_the_sender_names_by_srqn() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    // A basic SRQ has no XRC number; a provider without XRC says so.
    let basic = Srq::builder(&pd).build().unwrap();
    let xrcd = match Xrcd::open(&ctx) {
        Ok(x) => x,
        Err(e) => {
            if hardware_lacks(&ctx, "XRC", &e) {
                return;
            }
            assert!(matches!(e, Error::Unsupported { op: "ibv_open_xrcd", .. }), "{e:?}");
            assert_unsupported(&basic.srq_num().unwrap_err(), "ibv_get_srq_num", "XRC");
            eprintln!("{}: XRC domains, XRC SRQs and SRQ numbers Unsupported (asserted)", ctx.name());
            return;
        }
    };
    assert!(basic.xrcd().is_none());
    // Hardware: an XRC SRQ behind an XRC_RECV QP, fed by an XRC_SEND QP
    // that names the SRQ in each request.
    let cq = Cq::create(&ctx, 64).unwrap();
    let srq = Srq::create_xrc(&pd, &xrcd, &cq, 16, 1).unwrap();
    assert!(srq.xrcd().is_some());
    let srqn = srq.srq_num().unwrap();
    let tgt = Qp::builder(&pd, QpType::XRC_RECV, &cq, &cq).xrcd(&xrcd).caps(QpCaps::default().max_recv_wr(0)).build();
    let tgt = tgt.unwrap();
    let ini = Qp::builder(&pd, QpType::XRC_SEND, &cq, &cq).caps(QpCaps::default().max_recv_wr(0)).build().unwrap();
    let port = 1;
    let gid_index = ctx.roce_v2_gid_index(port).unwrap();
    let e_tgt = tgt.endpoint(port, gid_index, 100).unwrap();
    let e_ini = ini.endpoint(port, gid_index, 200).unwrap();
    let av = |e: &rrddmma::prim::Endpoint| AhAttr::global(port, gid_index, e.gid).dlid(e.lid);
    for (qp, peer, psn) in [(&tgt, &e_ini, e_tgt.psn), (&ini, &e_tgt, e_ini.psn)] {
        qp.modify(&QpAttr::new(QpState::INIT).pkey_index(0).port(port).access(AccessFlags::REMOTE_WRITE)).unwrap();
        let mut rtr =
            QpAttr::new(QpState::RTR).av(&av(peer)).path_mtu(Mtu::MTU_1024).dest_qpn(peer.qpn).rq_psn(peer.psn);
        if qp.qp_type() == QpType::XRC_RECV {
            rtr = rtr.max_dest_rd_atomic(1).min_rnr_timer(12);
        }
        qp.modify(&rtr).unwrap();
        if qp.qp_type() == QpType::XRC_SEND {
            let rts = QpAttr::new(QpState::RTS).sq_psn(psn).timeout(14).retry_cnt(7).rnr_retry(7).max_rd_atomic(1);
            qp.modify(&rts).unwrap();
        }
    }
    let mut dst = Buf::new(&pd, 64);
    let mut src = Buf::new(&pd, 64);
    src.bytes().copy_from_slice(&[0x5a; 64]);
    let r = [dst.mr.sge_at(0, 64)];
    // SAFETY: the entries lie in registered buffers alive until the completions.
    unsafe { srq.post_recv(&mut [RecvWr::new(&r, 1)]) }.unwrap();
    let s = [src.mr.sge_at(0, 64)];
    // SAFETY: as above.
    unsafe { ini.post_send(&mut [SendWr::send(&s).xrc_srqn(srqn).wr_id(2).signaled()]) }.unwrap();
    let mut seen = [None, None];
    for _ in 0..2 {
        let wc = poll_one(&cq);
        assert_eq!(wc.status(), WcStatus::SUCCESS, "{wc:?}");
        seen[(wc.wr_id() - 1) as usize] = Some(wc);
    }
    let recv = seen[0].expect("the SRQ's receive completed");
    assert_eq!((recv.opcode(), recv.byte_len()), (WcOpcode::RECV, 64));
    assert!(dst.bytes().iter().all(|&b| b == 0x5a), "the SEND landed in the XRC SRQ's buffer");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn device_clock_reads_and_converts_completion_timestamps() {
    let ctx = open_device();
    let attr = ctx.query_device_ex().unwrap();
    let clock = match ctx.core_clock() {
        Ok(c) => {
            assert_eq!(c.khz(), attr.hca_core_clock);
            Some(c)
        }
        Err(e) => {
            assert_eq!(attr.hca_core_clock, 0, "{e:?}");
            assert_unsupported(&e, "ibv_query_device_ex", "CLOCK");
            None
        }
    };
    let raw = match ctx.raw_clock() {
        Ok(t) => Some(t),
        Err(e) => {
            assert_unsupported(&e, "ibv_query_rt_values_ex", "CLOCK");
            None
        }
    };
    eprintln!("{}: hca_core_clock {} kHz, raw clock {raw:?}", ctx.name(), attr.hca_core_clock);
    let (Some(clock), Some(t0)) = (clock, raw) else {
        assert!(is_software(&ctx), "only software devices are expected to lack the device clock");
        return;
    };
    // Hardware: 20 ms of host time is 20 ms of device time, within 25 %.
    let host = Instant::now();
    std::thread::sleep(Duration::from_millis(20));
    let t1 = ctx.raw_clock().unwrap();
    let (dev_ns, host_ns) = (clock.elapsed_ns(t0, t1), host.elapsed().as_nanos() as u64);
    assert!(dev_ns > host_ns * 3 / 4 && dev_ns < host_ns * 5 / 4, "device {dev_ns} ns vs host {host_ns} ns");
    // A completion's timestamp lies between two clock readings around it.
    let mut lb = Loopback::new(QpCaps::default());
    let cq = Cq::builder(&lb.ctx, 16).extended(WcFlagsEx::STANDARD | WcFlagsEx::COMPLETION_TIMESTAMP).build().unwrap();
    let (qa, _qb) = connected_rc_pair(&lb.pd, &cq, &cq, QpCaps::default(), 9, &opts(&lb.ctx)).unwrap();
    lb.a().fill(7);
    let s = [lb.mr_a.sge_at(0, 64)];
    let before = lb.ctx.raw_clock().unwrap();
    // SAFETY: entries in registered memory, alive until the completion.
    unsafe { qa.post_send(&mut [SendWr::write(&s, lb.mr_b.remote().addr_at(0)).wr_id(3).signaled()]) }.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let ts = loop {
        if let Some(p) = cq.start_poll().unwrap() {
            let wc: ExWc<'_> = p.wc();
            assert_eq!((wc.wr_id(), wc.status()), (3, WcStatus::SUCCESS));
            break wc.completion_ts();
        }
        assert!(Instant::now() < deadline, "no completion within 10 s");
    };
    let after = lb.ctx.raw_clock().unwrap();
    let (to_ts, to_after) = (clock.elapsed_ns(before, ts), clock.elapsed_ns(before, after));
    assert!(to_ts <= to_after, "completion at {to_ts} ns after the first reading, second reading at {to_after} ns");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn device_memory_region_is_written_and_read_by_requests() {
    let ctx = open_device();
    let dm = match Dm::alloc(&ctx, 4096) {
        Ok(dm) => dm,
        Err(e) => {
            if hardware_lacks(&ctx, "device memory", &e) {
                return;
            }
            assert_unsupported(&e, "ibv_alloc_dm", "DEVICE_MEMORY");
            assert_eq!(ctx.query_device_ex().unwrap().max_dm_size, 0);
            eprintln!("{}: device memory (and so its regions) Unsupported (asserted)", ctx.name());
            return;
        }
    };
    // Hardware: a WRITE into device memory through its zero-based region
    // and a READ into it, each read back with a copy (on the loopback's
    // context: the first allocation only showed there is device memory).
    let mut lb = Loopback::new(QpCaps::default());
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let dm = Dm::alloc(&lb.ctx, dm.len()).unwrap();
    let dmr = dm.reg_mr(&lb.pd, 0, 256, access).unwrap();
    assert_eq!((dmr.len(), dmr.remote().addr), (256, 0));
    lb.a()[..128].iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let s = [lb.mr_a.sge_at(0, 128)];
    let target = rrddmma::prim::RemoteAddr { addr: 64, rkey: dmr.rkey() };
    // SAFETY: entries in registered memory, alive until the completion.
    unsafe { lb.qa.post_send(&mut [SendWr::write(&s, target).wr_id(4).signaled()]) }.unwrap();
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.wr_id(), wc.status()), (4, WcStatus::SUCCESS), "{wc:?}");
    let mut back = [0u8; 128];
    dm.read(64, &mut back).unwrap();
    assert!(back.iter().enumerate().all(|(i, &b)| b == i as u8), "the WRITE landed in device memory");
    // The device memory as a local entry: a READ from b's buffer lands in it.
    lb.b()[..128].fill(0xa5);
    let dst = [dmr.sge_at(128, 128)];
    // SAFETY: as above.
    unsafe { lb.qa.post_send(&mut [SendWr::read(&dst, lb.mr_b.remote().addr_at(0)).wr_id(5).signaled()]) }.unwrap();
    let wc = poll_one(&lb.cq);
    assert_eq!((wc.wr_id(), wc.status()), (5, WcStatus::SUCCESS), "{wc:?}");
    dm.read(128, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0xa5), "the READ landed in device memory");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn ece_on_a_qp_and_on_a_cm_id() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    match qp.query_ece() {
        Ok(ece) => {
            // Hardware: offering what it reports is accepted.
            qp.set_ece(&ece).unwrap();
            assert_eq!(qp.query_ece().unwrap(), ece);
        }
        // A ConnectX whose firmware has no ECE skips the QP half (the CM half
        // below needs no device).
        Err(e) if hardware_lacks(&ctx, "ECE", &e) => {}
        Err(e) => {
            assert_unsupported(&e, "ibv_query_ece", "ECE");
            let offer = Ece { vendor_id: 0x02c9, options: 1, comp_mask: 0 };
            assert_unsupported(&qp.set_ece(&offer).unwrap_err(), "ibv_set_ece", "ECE");
            eprintln!("{}: ibv_query_ece / ibv_set_ece Unsupported (asserted)", ctx.name());
        }
    }
    #[cfg(feature = "cm")]
    {
        use rrddmma::prim::cm::{CmId, EventChannel, PortSpace};
        let ch = EventChannel::create().unwrap();
        let id = CmId::create(&ch, PortSpace::Rc).unwrap();
        // librdmacm keeps the options in the id (no device involved), on every device.
        assert_eq!(id.remote_ece().unwrap(), Ece::default(), "no peer yet: nothing offered");
        id.set_local_ece(&Ece { vendor_id: 0x02c9, options: 0x1, comp_mask: 0 }).unwrap();
        let msg = crate::common::panic_message(|| id.set_local_ece(&Ece::default()));
        assert!(msg.contains("names no vendor"), "{msg}");
    }
}

/// Sends `n` WRITEs of `len` bytes one after another on `qp` (each
/// completed before the next), returning the time they took.
fn timed_writes(lb: &mut Loopback, n: u32, len: usize) -> Duration {
    let s = [lb.mr_a.sge_at(0, len)];
    let start = Instant::now();
    for i in 0..n {
        // SAFETY: entries in registered memory, alive until the completion.
        unsafe {
            lb.qa.post_send(&mut [SendWr::write(&s, lb.mr_b.remote().addr_at(0)).wr_id(u64::from(i)).signaled()])
        }
        .unwrap();
        let wc = poll_one(&lb.cq);
        assert_eq!((wc.wr_id(), wc.status()), (u64::from(i), WcStatus::SUCCESS), "{wc:?}");
    }
    start.elapsed()
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn rate_limit_paces_a_qp_or_is_unsupported() {
    let ctx = open_device();
    let caps = ctx.query_device_ex().unwrap().packet_pacing_caps;
    // 10 Mbit/s, or the nearest the device paces at.
    let kbps = 10_000u32.clamp(caps.qp_rate_limit_min.max(1), caps.qp_rate_limit_max.max(1));
    let rate = RateLimit::kbps(kbps);
    if caps.qp_rate_limit_max == 0 {
        // Refused from the device's capabilities, before the QP is asked:
        // a QP that was never connected shows it (as on iWARP, where RC
        // connects through the CM only).
        let pd = Pd::alloc(&ctx).unwrap();
        let cq = Cq::create(&ctx, 4).unwrap();
        let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
        if hardware_lacks(&ctx, "packet pacing", &caps) {
            return;
        }
        assert_unsupported(&qp.set_rate_limit(&rate).unwrap_err(), "ibv_modify_qp_rate_limit", "PACING");
        eprintln!("{}: packet pacing Unsupported (asserted)", ctx.name());
        return;
    }
    let paced_types = caps.supported_qpts;
    let has = |t: rrddmma::bindings::ibv_qp_type| paced_types & (1 << t.0) != 0;
    let (rc, raw) =
        (has(rrddmma::bindings::ibv_qp_type::IBV_QPT_RC), has(rrddmma::bindings::ibv_qp_type::IBV_QPT_RAW_PACKET));
    assert!(rc || raw, "{}: pacing reported for no QP type (supported_qpts {paced_types:#x})", ctx.name());
    let mut lb = Loopback::new(QpCaps::default());
    // A rate above the device's range is refused before the call, on any QP.
    let e = lb.qa.set_rate_limit(&RateLimit::kbps(caps.qp_rate_limit_max.saturating_add(1))).unwrap_err();
    assert!(matches!(e, Error::BadArgument { op: "ibv_modify_qp_rate_limit", .. }), "{e:?}");
    if !rc {
        // ConnectX paces raw packet QPs (their send queues):
        // `cx_raw::a_paced_raw_packet_qp_sends_no_faster_than_its_rate_on_connectx`.
        eprintln!("{}: pacing for raw packet QPs only (supported_qpts {paced_types:#x})", ctx.name());
        return;
    }
    // Hardware pacing RC: 4 KiB WRITEs take at least half the time the
    // rate allows (100 ms of traffic at it); lifted (0), they go faster.
    const LEN: usize = 4096;
    let n = ((u64::from(kbps) * 1000 / 8 / 10 / LEN as u64) as u32).clamp(16, 50_000);
    lb.a()[..LEN].fill(0x11);
    lb.qa.set_rate_limit(&rate).unwrap();
    let paced = timed_writes(&mut lb, n, LEN);
    let floor = Duration::from_secs_f64(f64::from(n) * LEN as f64 * 8.0 / (f64::from(kbps) * 1000.0) / 2.0);
    assert!(paced >= floor, "{n} WRITEs of {LEN} B at {kbps} kbit/s took {paced:?} (at least {floor:?})");
    assert!(lb.b()[..LEN].iter().all(|&b| b == 0x11));
    lb.qa.set_rate_limit(&RateLimit::kbps(0)).unwrap();
    let free = timed_writes(&mut lb, n, LEN);
    assert!(free < paced, "unpaced {free:?}, paced {paced:?}");
    eprintln!("{}: {n} WRITEs paced at {kbps} kbit/s in {paced:?}, unpaced in {free:?}", ctx.name());
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn flow_counters_attach_and_read_or_are_unsupported() {
    let ctx = open_device();
    let mut counters = match Counters::create(&ctx) {
        Ok(c) => c,
        Err(e) => {
            if hardware_lacks(&ctx, "flow counters", &e) {
                return;
            }
            assert_unsupported(&e, "ibv_create_counters", "FLOW_COUNTERS");
            eprintln!("{}: flow counters Unsupported (asserted)", ctx.name());
            return;
        }
    };
    // Hardware: two counters attached (kept by the provider until a flow
    // binds them); the kernel reads counters only once a flow is bound
    // (uverbs' COUNTERS_READ refuses unbound ones). Counting what a flow
    // matched: `cx_raw::flow_counters_count_the_frames_a_rule_matched_on_connectx`.
    counters.attach(CounterKind::PACKETS, 0).unwrap();
    counters.attach(CounterKind::BYTES, 1).unwrap();
    assert_eq!(counters.len(), 2);
    let mut v = [u64::MAX; 2];
    let e = counters.read(&mut v, false).unwrap_err();
    assert!(matches!(e, Error::Verbs { op: "ibv_read_counters", .. }) && !e.is_unsupported(), "{e:?}");
}
