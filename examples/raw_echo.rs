//! A UDP echo on raw packet QPs: a flow rule steers the IPv4 UDP packets
//! for one port to the echo, each is sent back with MACs, addresses and
//! ports swapped (the device fixes the checksums, `SendFlags::IP_CSUM`).
//!
//! Where the device reports striding receive queues for raw packet QPs
//! (`mlx5dv::mprq::striding_rq_caps`), packets arrive in a striding WQ
//! (`WqBuilder::striding`) behind an RSS QP of one WQ, polled through the
//! CQ's direct view and the WQ's `MprqRing`: each WQE holds many packets,
//! and goes back to the device only once all its strides are consumed.
//! Elsewhere the raw packet QP receives into ordinary buffers. Needs a
//! ConnectX Ethernet port; on a device without raw packet QPs (rxe, siw)
//! it prints the refusal and exits with status 0.
//!
//! ```text
//! cargo run --release --example raw_echo -- [DEVICE [PORT [UDP_PORT [PACKETS]]]]
//! ```

mod cli;

use rrddmma::prim::{
    AccessFlags, Context, Cq, EthFilter, Flow, FlowBuilder, FlowTarget, Ipv4Filter, Mr, Pd, PortFilter, Qp, QpCaps,
    QpType, RecvWr, SendFlags, SendWr, Wc, WcOpcode, WcStatus,
};

/// Receive (and, for the striding echo, send) buffers and their size (a
/// standard Ethernet frame fits).
const SLOTS: usize = 64;
const SLOT: usize = 2048;

/// The shortest frame echoed: Ethernet, IPv4 and UDP headers.
const MIN_FRAME: usize = 42;

/// The flow rule for IPv4 UDP packets to `udp_port` on `port`, steering to `target`.
fn udp_flow<T: FlowTarget>(target: &T, port: u8, udp_port: u16) -> FlowBuilder<'_> {
    let udp = PortFilter { dst_port: udp_port, src_port: 0 };
    Flow::builder(target, port)
        .eth(
            EthFilter { ether_type: 0x0800, ..Default::default() },
            EthFilter { ether_type: 0xffff, ..Default::default() },
        )
        .ipv4(Ipv4Filter::default(), Ipv4Filter::default())
        .udp(udp, PortFilter { dst_port: 0xffff, src_port: 0 })
}

/// Turns a received frame into its echo: Ethernet, swap the MACs; IPv4 (no
/// options assumed beyond the IHL), swap the addresses; UDP, swap the
/// ports, no checksum. `false` for a frame too short to be one.
fn make_echo(frame: &mut [u8]) -> bool {
    if frame.len() < MIN_FRAME {
        return false;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let udp = 14 + ihl;
    if ihl < 20 || frame.len() < udp + 8 {
        return false;
    }
    let (dst, src) = frame[..12].split_at_mut(6);
    dst.swap_with_slice(src);
    let (a, b) = frame[26..34].split_at_mut(4);
    a.swap_with_slice(b);
    let (a, b) = frame[udp..udp + 4].split_at_mut(2);
    a.swap_with_slice(b);
    frame[udp + 6..udp + 8].fill(0);
    true
}

/// The raw packet QP the echo sends on (and, for the ordinary echo, receives on).
fn raw_qp(pd: &Pd, cq: &Cq, port: u8) -> rrddmma::prim::Result<Qp> {
    let caps = QpCaps::default().max_send_wr(SLOTS as u32).max_recv_wr(SLOTS as u32);
    let qp = Qp::builder(pd, QpType::RAW_PACKET, cq, cq).caps(caps).build()?;
    qp.bring_up_raw(port)?;
    Ok(qp)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = cli::operands("Usage: raw_echo [DEVICE [PORT [UDP_PORT [PACKETS]]]]");
    let ctx = match args.first() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    let port: u8 = args.get(1).map_or(Ok(1), |s| s.parse())?;
    let udp_port: u16 = args.get(2).map_or(Ok(7777), |s| s.parse())?;
    let packets: u64 = args.get(3).map_or(Ok(10), |s| s.parse())?;
    let pd = Pd::alloc(&ctx)?;
    let result = match striding::params(&ctx) {
        Some(p) => striding::echo(&ctx, &pd, port, udp_port, packets, p),
        None => ordinary_echo(&ctx, &pd, port, udp_port, packets),
    };
    match result {
        Err(e) if e.downcast_ref::<rrddmma::prim::Error>().is_some_and(|e| e.is_unsupported()) => {
            println!("unsupported: {e}");
            Ok(())
        }
        r => r,
    }
}

/// The echo over ordinary receives on the raw packet QP.
fn ordinary_echo(
    ctx: &Context,
    pd: &Pd,
    port: u8,
    udp_port: u16,
    packets: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut buf = vec![0u8; SLOTS * SLOT];
    // SAFETY: `buf` outlives the region and every request on it (declared
    // first, it is dropped last: after the flow and the QP).
    let mr = unsafe { Mr::register(pd, buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE)? };
    let cq = Cq::create(ctx, 2 * SLOTS as u32)?;
    let qp = raw_qp(pd, &cq, port)?;
    let _flow = udp_flow(&qp, port, udp_port).build()?;
    let recv = |slot: usize| -> rrddmma::prim::Result<()> {
        let sges = [mr.sge_at(slot * SLOT, SLOT)];
        // SAFETY: the slot lies in `mr`, untouched until its completion.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sges, slot as u64)]) }
    };
    for slot in 0..SLOTS {
        recv(slot)?;
    }
    println!("echoing UDP port {udp_port} on {} port {port} (ordinary receives)", ctx.name());
    let mut wc = [Wc::default(); 16];
    let mut echoed = 0;
    while echoed < packets {
        let n = cq.poll(&mut wc)?;
        for c in &wc[..n] {
            if c.status() != WcStatus::SUCCESS {
                return Err(format!("completion failed: {c:?}").into());
            }
            let slot = c.wr_id() as usize;
            match c.opcode() {
                WcOpcode::RECV => {
                    let len = c.byte_len() as usize;
                    if !make_echo(&mut buf[slot * SLOT..slot * SLOT + len]) {
                        recv(slot)?;
                        continue;
                    }
                    let sges = [mr.sge_at(slot * SLOT, len)];
                    let wr = SendWr::send(&sges).wr_id(slot as u64).flags(SendFlags::IP_CSUM | SendFlags::SIGNALED);
                    // SAFETY: the frame lies in `mr`; its slot is reposted
                    // for receiving only after this send completes.
                    unsafe { qp.post_send(&mut [wr]) }?;
                }
                _ => {
                    echoed += 1;
                    recv(slot)?;
                }
            }
        }
    }
    println!("echoed {echoed} packets");
    Ok(())
}

/// The echo over a striding WQ (not in a MLNX_OFED 4.x build: its libmlx5
/// has no `mlx5dv_create_wq`).
#[cfg(not(rrddmma_mlnx_ofed4))]
mod striding {
    use rrddmma::mlx5dv::mprq::{self, StrideCompletion, StridingParams};
    use rrddmma::mlx5dv::mprq_wq;
    use rrddmma::mlx5dv::obj::cq_ring;
    use rrddmma::prim::{
        AccessFlags, Context, Cq, Mr, Pd, RssQp, RwqIndTable, RxHashFields, SendFlags, SendWr, Wc, WcStatus, Wq,
    };

    use super::{make_echo, raw_qp, udp_flow, SLOT, SLOTS};

    /// WQEs in the striding WQ.
    const WQES: u32 = 8;
    /// A Toeplitz key (the symmetric 0x6d5a pattern); with one WQ the hash
    /// only shows in the completions.
    const KEY: [u8; 40] = {
        let mut k = [0u8; 40];
        let mut i = 0;
        while i < 40 {
            k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
            i += 1;
        }
        k
    };

    /// The WQE shape: 64-byte strides (or the device's nearest), 512 of them
    /// a WQE (or the nearest), when the device offers striding WQs for raw
    /// packet QPs; else `None` with the reason printed.
    pub fn params(ctx: &Context) -> Option<StridingParams> {
        let caps = match mprq::striding_rq_caps(ctx) {
            Ok(c) => c,
            Err(e) => {
                println!("striding RQ: {e}; ordinary receives");
                return None;
            }
        };
        let clamp = |want: u32, min: u32, max: u32| want.max(min).min(max) as u8;
        let p = StridingParams {
            log_stride_bytes: clamp(6, caps.min_log_stride_bytes, caps.max_log_stride_bytes),
            log_num_strides: clamp(9, caps.min_log_num_strides, caps.max_log_num_strides),
            two_byte_shift: false,
        };
        match caps.check(&p) {
            Ok(()) => Some(p),
            Err(e) => {
                println!("striding RQ: {e}; ordinary receives");
                None
            }
        }
    }

    /// Receives through a striding WQ behind an RSS QP of one WQ; each
    /// packet is copied to a send buffer, turned around and sent on a raw
    /// packet QP. A WQE is posted again once the device has consumed all
    /// its strides.
    pub fn echo(
        ctx: &Context,
        pd: &Pd,
        port: u8,
        udp_port: u16,
        packets: u64,
        p: StridingParams,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let wqe_bytes = p.wqe_bytes() as usize;
        let mut recv_buf = vec![0u8; WQES as usize * wqe_bytes];
        let mut send_buf = vec![0u8; SLOTS * SLOT];
        // SAFETY: both buffers outlive their regions and every request on
        // them (declared first, they are dropped last: after the flow, the
        // QPs and the WQ).
        let recv_mr = unsafe { Mr::register(pd, recv_buf.as_mut_ptr(), recv_buf.len(), AccessFlags::LOCAL_WRITE)? };
        // SAFETY: as above.
        let send_mr = unsafe { Mr::register(pd, send_buf.as_mut_ptr(), send_buf.len(), AccessFlags::LOCAL_WRITE)? };
        let base = recv_buf.as_ptr() as u64;

        let send_cq = Cq::create(ctx, 2 * SLOTS as u32)?;
        let qp = raw_qp(pd, &send_cq, port)?;
        // One CQE per packet: at most a WQE's strides each.
        let recv_cq = Cq::create(ctx, WQES * p.num_strides())?;
        let wq = Wq::builder(pd, &recv_cq).max_wr(WQES).striding(p).build()?;
        wq.ready()?;
        let table = RwqIndTable::create(ctx, std::slice::from_ref(&wq))?;
        let fields = RxHashFields::SRC_IPV4
            .union(RxHashFields::DST_IPV4)
            .union(RxHashFields::SRC_PORT_UDP)
            .union(RxHashFields::DST_PORT_UDP);
        let rss = RssQp::create(pd, &table, fields, &KEY)?;
        let _flow = udp_flow(&rss, port, udp_port).build()?;

        // SAFETY: the receive CQ is polled through this view only, and not
        // through libibverbs after it.
        let mut cq = unsafe { cq_ring(&recv_cq) }?;
        // SAFETY: the WQ is posted through this ring only; the ring is
        // dropped before the WQ (declared after it).
        let mut ring = unsafe { mprq_wq::ring(&wq, &cq) }?;
        // WQEs are handed back in the order they were posted, so the n-th
        // posted takes buffer n mod WQES, the one of the WQE handed back last.
        let post = |ring: &mut mprq::MprqRing| {
            let buf = u64::from(ring.head() % WQES);
            // SAFETY: the WQE's buffer lies in `recv_mr`, left to the device
            // until the ring hands the WQE back.
            unsafe { ring.post(recv_mr.lkey(), base + buf * wqe_bytes as u64) }
        };
        while ring.outstanding() < WQES.min(ring.wqe_cnt()) {
            post(&mut ring);
        }
        ring.ring_doorbell();
        println!(
            "echoing UDP port {udp_port} on {} port {port} (striding RQ: {} WQEs of {} strides of {} bytes)",
            ctx.name(),
            ring.outstanding(),
            p.num_strides(),
            p.stride_bytes()
        );

        let mut free: Vec<usize> = (0..SLOTS).collect();
        let mut cqes = [StrideCompletion::default(); 16];
        let mut wc = [Wc::default(); 16];
        let (mut echoed, mut dropped, mut reposted) = (0u64, 0u64, 0u64);
        while echoed < packets {
            let sent = send_cq.poll(&mut wc)?;
            for c in &wc[..sent] {
                if c.status() != WcStatus::SUCCESS {
                    return Err(format!("send completion failed: {c:?}").into());
                }
                free.push(c.wr_id() as usize);
                echoed += 1;
            }
            let n = cq.poll_strides(&mut cqes);
            for sc in &cqes[..n] {
                if sc.cqe.status() != WcStatus::SUCCESS {
                    return Err(format!("receive completion failed: {:?}", sc.cqe).into());
                }
                // The packet is read before its WQE may go back to the device.
                if let Some((addr, len)) = ring.payload(sc) {
                    let at = (addr - base) as usize;
                    let len = (len as usize).min(SLOT);
                    match free.pop() {
                        Some(slot) => {
                            let frame = &mut send_buf[slot * SLOT..slot * SLOT + len];
                            frame.copy_from_slice(&recv_buf[at..at + len]);
                            if make_echo(frame) {
                                let sges = [send_mr.sge_at(slot * SLOT, len)];
                                let wr = SendWr::send(&sges)
                                    .wr_id(slot as u64)
                                    .flags(SendFlags::IP_CSUM | SendFlags::SIGNALED);
                                // SAFETY: the frame lies in `send_mr`; its slot
                                // is reused only after this send completes.
                                unsafe { qp.post_send(&mut [wr]) }?;
                            } else {
                                free.push(slot);
                            }
                        }
                        None => dropped += 1,
                    }
                }
                // The WQ is the CQ's only one: nothing is refused.
                if ring.complete(sc)?.is_some() {
                    // Every stride of the WQE is consumed: post it again.
                    post(&mut ring);
                    ring.ring_doorbell();
                    reposted += 1;
                }
            }
        }
        println!(
            "echoed {echoed} packets ({dropped} dropped with every send buffer in flight, {reposted} WQEs reposted)"
        );
        Ok(())
    }
}

/// A MLNX_OFED 4.x build: no striding WQs (ordinary receives).
#[cfg(rrddmma_mlnx_ofed4)]
mod striding {
    use rrddmma::prim::{Context, Pd};

    /// Never: the build has no striding WQs.
    pub fn params(_ctx: &Context) -> Option<std::convert::Infallible> {
        println!("striding RQ: not in a MLNX_OFED 4.x build; ordinary receives");
        None
    }

    /// Unreachable ([`params`] is always `None`).
    pub fn echo(
        _: &Context,
        _: &Pd,
        _: u8,
        _: u16,
        _: u64,
        p: std::convert::Infallible,
    ) -> Result<(), Box<dyn std::error::Error>> {
        match p {}
    }
}
