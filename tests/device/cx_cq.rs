//! ConnectX completion queues polled through their direct views: a CQ that
//! compresses its CQEs, fed a burst of small receives whose completions the
//! device writes while nobody polls (some come as compressed sessions and
//! are expanded by the view); and the completion clock
//! (`mlx5dv::clock::Clock::completion_ns`), free-running and real-time
//! stamps converted and compared with the device's and the host's clocks.
//!
//! Off mlx5 (SoftRoCE) every test here skips through `mlx5_test_skips`.
//! Written for hardware, never run on it here.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rrddmma::mlx5dv;
use rrddmma::mlx5dv::clock::Clock;
use rrddmma::mlx5dv::comp;
use rrddmma::mlx5dv::cqe::{Completion, CqeOpcode};
use rrddmma::mlx5dv::mini::CqeResFormat;
use rrddmma::mlx5dv::obj::{self, DirectCq};
use rrddmma::prim::{AccessFlags, Cq, Mr, Pd, Qp, QpCaps, QpType, RecvWr, RemoteAddr, SendWr, WcFlagsEx, WcStatus};

use crate::common::{connect_pair, mlx5_test_skips, open_device, opts, poll_one, Buf};

/// Receives (and SENDs) in one burst.
const BURST: usize = 1024;
/// Bursts at most, each on a new QP pair (libmlx5 frees receive slots only
/// when its own poller runs, so a QP's receive queue is filled once here).
const ROUNDS: usize = 8;

/// Polls `n` completions from `view`, or panics after 10 s.
fn poll_n(view: &mut DirectCq<'_>, n: usize) -> Vec<Completion> {
    let mut all = Vec::with_capacity(n);
    let mut out = [Completion::default(); 64];
    let t = Instant::now();
    while all.len() < n {
        assert!(t.elapsed() < Duration::from_secs(10), "{} of {n} completions within 10 s", all.len());
        let k = view.poll(&mut out[..(n - all.len()).min(64)]);
        all.extend_from_slice(&out[..k]);
    }
    all
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn compressed_cq_expands_a_burst_of_small_receives_on_mlx5() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    let caps = comp::cqe_compression_caps(&ctx).unwrap();
    // Receive sessions of RC QPs: the hash or the checksum format (the
    // stride-index one is for striding WQs).
    let Some(format) = [CqeResFormat::Hash, CqeResFormat::Csum].into_iter().find(|f| caps.supports(*f)) else {
        mlx5_test_skips(&format!("{}: no CQE compression in the hash or checksum format ({caps:?})", ctx.name()));
        return;
    };
    let pd = Pd::alloc(&ctx).unwrap();
    let scq = Cq::create(&ctx, 2 * BURST as u32).unwrap();
    let rcq = Cq::builder(&ctx, 2 * BURST as u32).mlx5_compression(format).build().unwrap();
    assert_eq!(rcq.compression(), Some(format));
    // SAFETY: the receive CQ is polled through this view alone (`Cq::poll`
    // would panic on it anyway).
    let mut view = unsafe { obj::cq_ring(&rcq) }.unwrap();
    let caps_qp = QpCaps::default().max_send_wr(BURST as u32).max_recv_wr(BURST as u32);
    let o = opts(&ctx);
    let (mut total, mut expanded, mut rounds) = (0usize, 0usize, 0usize);
    while rounds < ROUNDS && expanded == 0 {
        rounds += 1;
        let qa = Qp::builder(&pd, QpType::RC, &scq, &rcq).caps(caps_qp).build().unwrap();
        let qb = Qp::builder(&pd, QpType::RC, &scq, &rcq).caps(caps_qp).build().unwrap();
        connect_pair(&qa, &qb, &o, (rounds as u32 * 1000, rounds as u32 * 1000 + 500));
        let mut src = Buf::new(&pd, BURST * 8);
        let mut dst = Buf::new(&pd, BURST * 16);
        for i in 0..BURST {
            src.bytes()[i * 8..i * 8 + 8].copy_from_slice(&(((rounds << 20) | i) as u64).to_le_bytes());
        }
        // BURST receives of 16 bytes on qb, in one call.
        let rsges: Vec<[rrddmma::prim::Sge; 1]> = (0..BURST).map(|i| [dst.mr.sge_at(i * 16, 16)]).collect();
        let mut rwrs: Vec<RecvWr<'_>> = rsges.iter().enumerate().map(|(i, s)| RecvWr::new(s, i as u64)).collect();
        // SAFETY: every entry lies in `dst`, untouched until the completions.
        unsafe { qb.post_recv(&mut rwrs) }.unwrap();
        // BURST SENDs of 8 bytes from qa, in one call, the last signalled:
        // its completion means every SEND was acknowledged, so every
        // receive completion is in the CQ before anything polls it.
        let ssges: Vec<[rrddmma::prim::Sge; 1]> = (0..BURST).map(|i| [src.mr.sge_at(i * 8, 8)]).collect();
        let mut swrs: Vec<SendWr<'_>> =
            ssges.iter().enumerate().map(|(i, s)| SendWr::send(s).wr_id(i as u64)).collect();
        swrs[BURST - 1] = SendWr::send(&ssges[BURST - 1]).wr_id(BURST as u64).signaled();
        // SAFETY: every entry lies in `src`, untouched until the completion.
        unsafe { qa.post_send(&mut swrs) }.unwrap();
        let wc = poll_one(&scq);
        assert_eq!((wc.wr_id(), wc.status()), (BURST as u64, WcStatus::SUCCESS), "{wc:?}");
        let got = poll_n(&mut view, BURST);
        let mut slots = HashSet::new();
        for c in &got {
            assert_eq!(c.status(), WcStatus::SUCCESS, "{c:?}");
            assert_eq!((c.opcode(), c.qpn(), c.byte_len()), (CqeOpcode::RESP_SEND, qb.qpn(), 8), "{c:?}");
            // The receive queue's WQE counter: whole or expanded (title's
            // counter plus the CQE's place in the session), each receive
            // named once.
            assert!(
                slots.insert(usize::from(c.wqe_counter()) % BURST),
                "receive {} named twice: {c:?}",
                c.wqe_counter()
            );
            expanded += usize::from(c.expanded());
        }
        total += got.len();
        let mut none = [Completion::default()];
        assert_eq!(view.poll(&mut none), 0, "no completion past the burst");
        // The SENDs landed in order, one per receive.
        for i in 0..BURST {
            let v = u64::from_le_bytes(dst.bytes()[i * 16..i * 16 + 8].try_into().unwrap());
            assert_eq!(v, ((rounds << 20) | i) as u64, "receive {i} of round {rounds} holds SEND {i}");
        }
    }
    eprintln!(
        "{}: {expanded} of {total} receive completions expanded from compressed sessions ({format:?}, {rounds} bursts)",
        ctx.name()
    );
    // The device compresses CQEs it writes back to back while the CQ is not
    // polled; bursts of 1024 acknowledged SENDs are such a case. A view
    // that never saw a session here means either no compression happened
    // or the view read sessions as whole CQEs: both fail.
    assert!(expanded > 0, "no compressed session in {rounds} bursts of {BURST} receives on a compressing CQ");
}

/// Posts a WRITE of 64 bytes from `src` to `to` on `qp` (verbs path),
/// signalled, and polls its completion from `view`.
fn write_and_poll(qp: &Qp, src: &Buf, to: RemoteAddr, view: &mut DirectCq<'_>) -> Completion {
    let s = [src.mr.sge_at(0, 64)];
    // SAFETY: `src` is registered and outlives the completion.
    unsafe { qp.post_send(&mut [SendWr::write(&s, to).signaled()]) }.unwrap();
    poll_n(view, 1)[0]
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn completion_clock_stamps_advance_with_the_device_and_host_clocks_on_mlx5() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    let clock = Clock::new(&ctx).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let mut src = Buf::new(&pd, 64);
    src.bytes().fill(0x5c);
    let mut dst = Buf::new(&pd, 64);
    // A region without remote access: a WRITE under its rkey fails.
    let mut closed_mem = vec![0u8; 64];
    // SAFETY: `closed_mem` outlives the region (dropped after it, at the end).
    let closed = unsafe { Mr::register(&pd, closed_mem.as_mut_ptr(), 64, AccessFlags::LOCAL_WRITE) }.unwrap();
    let o = opts(&ctx);

    // Free-running stamps on an ordinary CQ: each completion lies between
    // two readings of the device clock around it (ibv_query_rt_values_ex,
    // the same free-running counter), converted alike.
    let cq = Cq::create(&ctx, 16).unwrap();
    assert!(!clock.is_real_time(&cq), "an ordinary CQ gets free-running stamps");
    let qa = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    let qb = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    connect_pair(&qa, &qb, &o, (11, 22));
    // SAFETY: `cq` is polled through this view alone.
    let mut view = unsafe { obj::cq_ring(&cq) }.unwrap();
    let mut stamps = Vec::new();
    for _ in 0..2 {
        let before = clock.ns(&cq, ctx.raw_clock().unwrap()).unwrap();
        let host = Instant::now();
        let c = write_and_poll(&qa, &src, dst.mr.remote().addr_at(0), &mut view);
        assert_eq!(c.status(), WcStatus::SUCCESS, "{c:?}");
        let after = clock.ns(&cq, ctx.raw_clock().unwrap()).unwrap();
        let t = clock.completion_ns(&cq, &c).unwrap().expect("a successful completion has a stamp");
        assert!(before <= t && t <= after, "completion at {t} ns, device clock read at {before} and {after} ns");
        stamps.push((t, host));
        std::thread::sleep(Duration::from_millis(20));
    }
    let (dev, host) = (stamps[1].0 - stamps[0].0, stamps[1].1.duration_since(stamps[0].1).as_nanos() as u64);
    assert!(dev.abs_diff(host) < host / 4 + 2_000_000, "stamps {dev} ns apart, host {host} ns");
    // An error completion has no stamp: its bytes hold the syndrome.
    assert!(dst.bytes().iter().all(|&b| b == 0x5c), "the WRITEs landed");
    let bad = RemoteAddr { addr: closed.addr(), rkey: closed.rkey() };
    let c = write_and_poll(&qa, &src, bad, &mut view);
    assert_eq!(c.status(), WcStatus::REM_ACCESS_ERR, "a WRITE under an rkey without remote write fails: {c:?}");
    assert_eq!(clock.completion_ns(&cq, &c).unwrap(), None, "{c:?}");
    assert!(closed_mem.iter().all(|&b| b == 0), "the refused WRITE wrote nothing");

    // Real-time stamps where the device offers them: a CQ created extended
    // with the wall-clock flag alone (the one case in which libmlx5 asks the
    // kernel for them). The kernel sets the device's real-time clock from
    // the host's when the driver loads and it runs at the same rate; without
    // PTP it drifts by parts per million, so "near" is within 10 minutes,
    // and two stamps 20 ms apart are 20 ms apart.
    if !clock.real_time_capable() {
        eprintln!("{}: no real-time CQE stamps (MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS unset)", ctx.name());
        drop(closed);
        drop(closed_mem);
        return;
    }
    let wall = Cq::builder(&ctx, 16).extended(WcFlagsEx::COMPLETION_TIMESTAMP_WALLCLOCK).build().unwrap();
    assert!(clock.is_real_time(&wall));
    let qc = Qp::builder(&pd, QpType::RC, &wall, &wall).build().unwrap();
    let qd = Qp::builder(&pd, QpType::RC, &wall, &wall).build().unwrap();
    connect_pair(&qc, &qd, &o, (33, 44));
    // SAFETY: `wall` is polled through this view alone.
    let mut view = unsafe { obj::cq_ring(&wall) }.unwrap();
    let mut stamps = Vec::new();
    for _ in 0..2 {
        let host = Instant::now();
        let c = write_and_poll(&qc, &src, dst.mr.remote().addr_at(0), &mut view);
        assert_eq!(c.status(), WcStatus::SUCCESS, "{c:?}");
        let t = clock.completion_ns(&wall, &c).unwrap().expect("a successful completion has a stamp");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        assert!(t.abs_diff(now) < 600_000_000_000, "real-time stamp {t} ns, host real time {now} ns");
        stamps.push((t, host));
        std::thread::sleep(Duration::from_millis(20));
    }
    let (dev, host) = (stamps[1].0 - stamps[0].0, stamps[1].1.duration_since(stamps[0].1).as_nanos() as u64);
    assert!(dev.abs_diff(host) < host / 4 + 2_000_000, "real-time stamps {dev} ns apart, host {host} ns");
    drop(closed);
    drop(closed_mem);
}
