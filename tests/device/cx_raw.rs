//! Raw Ethernet on a ConnectX port: UDP frames sent on a raw packet QP to
//! the port's own MAC come back through the NIC's local loopback, are
//! steered by a flow rule to an RSS QP over one striding WQ, land in its
//! strides (polled through the CQ's direct view, found by
//! `MprqRing::payload`), and each WQE goes back to the device once all its
//! strides are consumed.
//!
//! Loopback on one port: the sender uses a second device context. Each
//! context has its own transport domain; mlx5_ib turns the vport's local
//! loopback on once a second user transport domain exists
//! (`mlx5_ib_enable_lb`), and a TIR blocks only loopback from its own
//! domain when asked to. So a frame to the port's own MAC from the second
//! context reaches the first one's flow rules.
//!
//! Off mlx5 (SoftRoCE) the test skips through `mlx5_test_skips`. Written
//! for hardware, never run on it here.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use rrddmma::bindings as ffi;
use rrddmma::mlx5dv::mprq::{self, MprqRing, StrideCompletion, StridingParams};
use rrddmma::mlx5dv::{self, mprq_wq, obj};
use rrddmma::prim::{
    AccessFlags, Context, CounterKind, Counters, Cq, EthFilter, Flow, FlowBuilder, Ipv4Filter, Mr, Pd, PortFilter, Qp,
    QpCaps, QpType, RateLimit, RecvWr, RssQp, RwqIndTable, RxHashFields, SendWr, WcStatus, Wq,
};

use crate::common::{mlx5_test_skips, open_device, poll_one, Buf};

const UDP_PORT: u16 = 47_123;
const SRC_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const DST_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Frames sent: more strides than the WQ holds, so WQEs must come back.
const PACKETS: usize = 48;
/// Every frame: Ethernet, IPv4, UDP headers (42 bytes) and 30 payload bytes.
const FRAME: usize = 72;
/// WQEs of the striding WQ.
const WQES: u32 = 4;

/// The MAC address of the netdev behind port 1 (from the GID table).
fn port_mac(ctx: &Context) -> Option<[u8; 6]> {
    let netdev = ctx.gid_table(1).ok()?.iter().find_map(|e| e.netdev())?;
    let text = std::fs::read_to_string(format!("/sys/class/net/{netdev}/address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

/// `rule` narrowed to IPv4 UDP frames to `mac`, `DST_IP` and UDP port `port`.
fn udp_to(rule: FlowBuilder<'_>, mac: [u8; 6], port: u16) -> FlowBuilder<'_> {
    rule.eth(
        EthFilter { dst_mac: mac, ether_type: 0x0800, ..Default::default() },
        EthFilter { dst_mac: [0xff; 6], ether_type: 0xffff, ..Default::default() },
    )
    .ipv4(
        Ipv4Filter { src: Ipv4Addr::UNSPECIFIED, dst: DST_IP },
        Ipv4Filter { src: Ipv4Addr::UNSPECIFIED, dst: Ipv4Addr::BROADCAST },
    )
    .udp(PortFilter { dst_port: port, src_port: 0 }, PortFilter { dst_port: 0xffff, src_port: 0 })
}
/// The one's-complement sum of the IPv4 header.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Frame `seq`: to and from `mac`, IPv4 SRC_IP -> DST_IP, UDP to UDP_PORT
/// (no UDP checksum), payload `seq` then a pattern of it.
fn frame(mac: [u8; 6], seq: u8) -> [u8; FRAME] {
    frame_to(mac, seq, UDP_PORT)
}

/// [`frame`] to UDP port `port`, `N` bytes long.
fn frame_to<const N: usize>(mac: [u8; 6], seq: u8, port: u16) -> [u8; N] {
    let mut f = [0u8; N];
    f[0..6].copy_from_slice(&mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((N - 14) as u16).to_be_bytes());
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&SRC_IP.octets());
    ip[16..20].copy_from_slice(&DST_IP.octets());
    let sum = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&40_000u16.to_be_bytes());
    f[36..38].copy_from_slice(&port.to_be_bytes());
    f[38..40].copy_from_slice(&((N - 34) as u16).to_be_bytes());
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = if i == 0 { seq } else { seq.wrapping_mul(31).wrapping_add(i as u8) };
    }
    f
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn raw_udp_frames_land_in_a_striding_rq_through_a_flow_on_connectx() {
    let ctx = open_device();
    if !mlx5dv::is_supported(&ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return;
    }
    if !ctx.query_port(1).unwrap().is_ethernet()
        && mlx5_test_skips(&format!("{} port 1 is InfiniBand: raw Ethernet needs an Ethernet port", ctx.name()))
    {
        return;
    }
    let caps = mprq::striding_rq_caps(&ctx).unwrap();
    if !caps.available() && mlx5_test_skips(&format!("{}: no striding RQ for raw packet QPs ({caps:?})", ctx.name())) {
        return;
    }
    let mac = port_mac(&ctx).expect("the MAC of port 1's netdev (GID table, /sys/class/net)");
    // Strides of 64 bytes (or the device's nearest), 8 to a WQE (or the
    // nearest): a 72-byte frame takes 2 strides, so 4 WQEs of 8 strides
    // hold 16 frames at most, fewer than PACKETS: WQEs must come back.
    let clamp = |want: u32, min: u32, max: u32| want.max(min).min(max) as u8;
    let p = StridingParams {
        log_stride_bytes: clamp(6, caps.min_log_stride_bytes, caps.max_log_stride_bytes),
        log_num_strides: clamp(3, caps.min_log_num_strides, caps.max_log_num_strides),
        two_byte_shift: false,
    };
    caps.check(&p).unwrap();
    let strides_per_frame = FRAME.div_ceil(p.stride_bytes() as usize) as u32;

    // Receiver, on the test's context: striding WQ, indirection table, RSS
    // QP, flow rule for UDP to UDP_PORT at our MAC and DST_IP.
    let pd = Pd::alloc(&ctx).unwrap();
    let wqe_bytes = p.wqe_bytes() as usize;
    let mut recv_buf = vec![0u8; WQES as usize * wqe_bytes];
    // SAFETY: `recv_buf` outlives the region and every WQE (dropped last).
    let recv_mr =
        unsafe { Mr::register(&pd, recv_buf.as_mut_ptr(), recv_buf.len(), AccessFlags::LOCAL_WRITE) }.unwrap();
    let base = recv_buf.as_ptr() as u64;
    let recv_cq = Cq::create(&ctx, WQES * p.num_strides()).unwrap();
    let wq = Wq::builder(&pd, &recv_cq).max_wr(WQES).striding(p).build().unwrap();
    wq.ready().unwrap();
    let table = RwqIndTable::create(&ctx, std::slice::from_ref(&wq)).unwrap();
    let fields = RxHashFields::SRC_IPV4.union(RxHashFields::DST_IPV4).union(RxHashFields::DST_PORT_UDP);
    let key = [0x6du8; 40];
    let rss = RssQp::create(&pd, &table, fields, &key).unwrap();
    let flow = udp_to(Flow::builder(&rss, 1), mac, UDP_PORT).build().unwrap();
    // SAFETY: the receive CQ is polled through this view alone.
    let mut view = unsafe { obj::cq_ring(&recv_cq) }.unwrap();
    // SAFETY: the WQ is posted through this ring alone; the ring drops first.
    let mut ring: MprqRing = unsafe { mprq_wq::ring(&wq, &view) }.unwrap();
    let post = |ring: &mut MprqRing| {
        let slot = u64::from(ring.head() % WQES);
        // SAFETY: the WQE's buffer lies in `recv_mr`, left to the device
        // until the ring hands the WQE back.
        unsafe { ring.post(recv_mr.lkey(), base + slot * wqe_bytes as u64) }
    };
    while ring.outstanding() < WQES.min(ring.wqe_cnt()) {
        assert!(post(&mut ring).is_some());
    }
    ring.ring_doorbell();

    // Sender, on a second context of the same device.
    let ctx2 = open_device();
    let pd2 = Pd::alloc(&ctx2).unwrap();
    let cq2 = Cq::create(&ctx2, 16).unwrap();
    let caps2 = QpCaps::default().max_send_wr(16).max_recv_wr(1);
    let tx = Qp::builder(&pd2, QpType::RAW_PACKET, &cq2, &cq2).caps(caps2).build().unwrap();
    tx.bring_up_raw(1).unwrap();
    let mut out = Buf::new(&pd2, FRAME);

    let mut got = 0usize;
    let (mut fillers, mut reposted) = (0u32, 0u32);
    let mut cqes = [StrideCompletion::default(); 8];
    for seq in 0..PACKETS as u8 {
        let f = frame(mac, seq);
        out.bytes().copy_from_slice(&f);
        let sges = [out.mr.sge_at(0, FRAME)];
        // SAFETY: `out` is registered and untouched until the completion.
        unsafe { tx.post_send(&mut [SendWr::send(&sges).wr_id(u64::from(seq)).signaled()]) }.unwrap();
        let wc = poll_one(&cq2);
        assert_eq!((wc.wr_id(), wc.status()), (u64::from(seq), WcStatus::SUCCESS), "{wc:?}");
        // Poll until this frame arrives (fillers may come first).
        let t = Instant::now();
        let mut arrived = false;
        while !arrived {
            assert!(t.elapsed() < Duration::from_secs(5), "frame {seq} did not arrive within 5 s (loopback?)");
            let n = view.poll_strides(&mut cqes);
            for sc in &cqes[..n] {
                assert_eq!(sc.cqe.status(), WcStatus::SUCCESS, "{sc:?}");
                if sc.filler {
                    fillers += 1;
                    assert!(ring.payload(sc).is_none(), "a filler carries no packet");
                } else {
                    let (addr, len) = ring.payload(sc).expect("a packet completion has its bytes in the WQE");
                    assert_eq!(len as usize, FRAME, "{sc:?}");
                    assert_eq!(u32::from(sc.strides), strides_per_frame, "{sc:?}");
                    let at = (addr - base) as usize;
                    assert_eq!(&recv_buf[at..at + FRAME], &f[..], "frame {seq} landed whole in its strides");
                    assert!(!arrived, "one completion per frame");
                    arrived = true;
                    got += 1;
                }
                if ring.complete(sc).unwrap().is_some() {
                    // Every stride of the WQE consumed: it goes back.
                    assert!(post(&mut ring).is_some());
                    ring.ring_doorbell();
                    reposted += 1;
                }
            }
        }
    }
    assert_eq!(got, PACKETS);
    // Each WQE handed back was reposted; the strides the frames took fill
    // at least this many WQEs whole.
    let min_reposts = (PACKETS as u32 * strides_per_frame) / p.num_strides();
    assert!(reposted >= min_reposts, "{reposted} WQEs handed back (at least {min_reposts}); {fillers} fillers");
    assert_eq!(ring.stray(), 0, "no completion named a WQE that was not outstanding");
    drop(flow);
    drop(ring);
}

/// The ConnectX Ethernet port 1 of `ctx` and its MAC, or `None` after a
/// skip through `mlx5_test_skips` (not mlx5, or an InfiniBand port).
fn raw_port(ctx: &Context) -> Option<[u8; 6]> {
    if !mlx5dv::is_supported(ctx) && mlx5_test_skips(&format!("{} is not an mlx5 device", ctx.name())) {
        return None;
    }
    if !ctx.query_port(1).unwrap().is_ethernet()
        && mlx5_test_skips(&format!("{} port 1 is InfiniBand: raw Ethernet needs an Ethernet port", ctx.name()))
    {
        return None;
    }
    Some(port_mac(ctx).expect("the MAC of port 1's netdev (GID table, /sys/class/net)"))
}

/// A raw packet QP on `pd`, in RTS on port 1, sending from `cq`.
fn raw_sender(pd: &Pd, cq: &Cq) -> Qp {
    let caps = QpCaps::default().max_send_wr(16).max_recv_wr(1);
    let tx = Qp::builder(pd, QpType::RAW_PACKET, cq, cq).caps(caps).build().unwrap();
    tx.bring_up_raw(1).unwrap();
    tx
}

/// Sends `f` on `tx` and waits for its send completion.
fn send_frame(tx: &Qp, cq: &Cq, out: &mut Buf, f: &[u8], id: u64) {
    out.bytes()[..f.len()].copy_from_slice(f);
    let sges = [out.mr.sge_at(0, f.len())];
    // SAFETY: `out` is registered and untouched until the completion.
    unsafe { tx.post_send(&mut [SendWr::send(&sges).wr_id(id).signaled()]) }.unwrap();
    let wc = poll_one(cq);
    assert_eq!((wc.wr_id(), wc.status()), (id, WcStatus::SUCCESS), "{wc:?}");
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn flow_counters_count_the_frames_a_rule_matched_on_connectx() {
    const COUNTED: u16 = UDP_PORT + 1;
    const MATCHED: usize = 16;
    const SLOT: usize = 128;
    let ctx = open_device();
    let Some(mac) = raw_port(&ctx) else { return };
    // Receiver: a raw packet QP with its own receive queue, a rule for UDP
    // to COUNTED at our MAC and DST_IP, counting packets and bytes.
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 64).unwrap();
    let caps = QpCaps::default().max_send_wr(1).max_recv_wr(MATCHED as u32);
    let rx = Qp::builder(&pd, QpType::RAW_PACKET, &cq, &cq).caps(caps).build().unwrap();
    rx.bring_up_raw(1).unwrap();
    let mut slots = Buf::new(&pd, MATCHED * SLOT);
    let sges: Vec<_> = (0..MATCHED).map(|i| slots.mr.sge_at(i * SLOT, SLOT)).collect();
    let mut wrs: Vec<RecvWr<'_>> =
        sges.iter().enumerate().map(|(i, s)| RecvWr::new(std::slice::from_ref(s), i as u64)).collect();
    // SAFETY: every entry lies in `slots`, which outlives the QP's receives
    // (read only after their completions).
    unsafe { rx.post_recv(&mut wrs) }.unwrap();
    let mut counters = Counters::create(&ctx).unwrap();
    counters.attach(CounterKind::PACKETS, 0).unwrap();
    counters.attach(CounterKind::BYTES, 1).unwrap();
    let flow = udp_to(Flow::builder(&rx, 1), mac, COUNTED).count(counters).build().unwrap();
    let counted = flow.counters().expect("the flow holds its counters");
    let mut v = [u64::MAX; 2];
    counted.read(&mut v, false).unwrap();
    assert_eq!(v, [0, 0], "bound to a flow that matched nothing yet");

    // Sender on a second context (local loopback, as above): MATCHED frames
    // to COUNTED, each followed by one to the next port, which the rule
    // does not match.
    let ctx2 = open_device();
    let pd2 = Pd::alloc(&ctx2).unwrap();
    let cq2 = Cq::create(&ctx2, 16).unwrap();
    let tx = raw_sender(&pd2, &cq2);
    let mut out = Buf::new(&pd2, FRAME);
    for seq in 0..MATCHED as u8 {
        let f: [u8; FRAME] = frame_to(mac, seq, COUNTED);
        send_frame(&tx, &cq2, &mut out, &f, u64::from(seq) * 2);
        let wc = poll_one(&cq);
        assert_eq!((wc.wr_id(), wc.status(), wc.byte_len()), (u64::from(seq), WcStatus::SUCCESS, FRAME as u32));
        let other: [u8; FRAME] = frame_to(mac, seq, COUNTED + 1);
        send_frame(&tx, &cq2, &mut out, &other, u64::from(seq) * 2 + 1);
    }
    let got = slots.bytes().to_vec();
    for seq in 0..MATCHED as u8 {
        let want: [u8; FRAME] = frame_to(mac, seq, COUNTED);
        let at = usize::from(seq) * SLOT;
        assert_eq!(&got[at..at + FRAME], &want[..], "frame {seq} in its receive slot");
    }
    // The rule counted what it matched, not the frames to the next port.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        counted.read(&mut v, false).unwrap();
        if v[0] >= MATCHED as u64 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(v[0], MATCHED as u64, "packets counted by the rule: {v:?}");
    let bytes = (MATCHED * FRAME) as u64;
    assert!((bytes..=bytes + 4 * MATCHED as u64).contains(&v[1]), "bytes counted {} (frames {bytes})", v[1]);
    // Cached values never run ahead of the device's.
    let mut cached = [0u64; 2];
    counted.read(&mut cached, true).unwrap();
    assert!(cached[0] <= v[0] && cached[1] <= v[1], "cached {cached:?} vs {v:?}");
    drop(flow);
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn a_paced_raw_packet_qp_sends_no_faster_than_its_rate_on_connectx() {
    const BIG: usize = 1024;
    let ctx = open_device();
    let Some(mac) = raw_port(&ctx) else { return };
    let caps = ctx.query_device_ex().unwrap().packet_pacing_caps;
    let raw = 1u32 << ffi::ibv_qp_type::IBV_QPT_RAW_PACKET.0;
    if (caps.qp_rate_limit_max == 0 || caps.supported_qpts & raw == 0)
        && mlx5_test_skips(&format!("{}: no packet pacing for raw packet QPs ({caps:?})", ctx.name()))
    {
        return;
    }
    // 10 Mbit/s, or the nearest rate the device paces at; frames enough
    // for 100 ms of traffic at it (at least 16).
    let kbps = 10_000u32.clamp(caps.qp_rate_limit_min.max(1), caps.qp_rate_limit_max);
    let n = ((u64::from(kbps) * 1000 / 8 / 10 / BIG as u64) as u32).clamp(16, 50_000);
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 16).unwrap();
    let tx = raw_sender(&pd, &cq);
    let mut out = Buf::new(&pd, BIG);
    // To this port's MAC (no rule steers them anywhere: the kernel's stack
    // drops UDP to an address it does not have), discard port 9.
    let f: [u8; BIG] = frame_to(mac, 0, 9);
    let timed = |out: &mut Buf| {
        let t = Instant::now();
        for i in 0..n {
            send_frame(&tx, &cq, out, &f, u64::from(i));
        }
        t.elapsed()
    };
    tx.set_rate_limit(&RateLimit::kbps(kbps)).unwrap();
    let paced = timed(&mut out);
    let floor = Duration::from_secs_f64(f64::from(n) * BIG as f64 * 8.0 / (f64::from(kbps) * 1000.0) / 2.0);
    assert!(paced >= floor, "{n} frames of {BIG} B at {kbps} kbit/s took {paced:?} (at least {floor:?})");
    tx.set_rate_limit(&RateLimit::kbps(0)).unwrap();
    let free = timed(&mut out);
    assert!(free < paced, "unpaced {free:?}, paced {paced:?}");
    eprintln!("{}: {n} frames paced at {kbps} kbit/s in {paced:?}, unpaced in {free:?}", ctx.name());
}
