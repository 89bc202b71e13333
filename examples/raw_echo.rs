//! A UDP echo on a raw packet QP: a flow rule steers the IPv4 UDP packets
//! for one port to the QP, each is sent back with MACs, addresses and ports
//! swapped (the device fixes the checksums, `SendFlags::IP_CSUM`). Needs a
//! ConnectX Ethernet port; on a device without raw packet QPs (rxe, siw)
//! it prints the refusal and exits with status 0.
//!
//! ```text
//! cargo run --release --example raw_echo -- [DEVICE [PORT [UDP_PORT [PACKETS]]]]
//! ```

mod cli;

use rrddmma::prim::{
    AccessFlags, Context, Cq, EthFilter, Flow, Ipv4Filter, Mr, Pd, PortFilter, Qp, QpCaps, QpType, RecvWr, SendFlags,
    SendWr, Wc, WcOpcode, WcStatus,
};

/// Receive buffers and their size (a standard Ethernet frame fits).
const SLOTS: usize = 64;
const SLOT: usize = 2048;

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
    let cq = Cq::create(&ctx, 2 * SLOTS as u32)?;
    let caps = QpCaps::default().max_send_wr(SLOTS as u32).max_recv_wr(SLOTS as u32);
    let qp = match Qp::builder(&pd, QpType::RAW_PACKET, &cq, &cq).caps(caps).build() {
        Ok(qp) => qp,
        Err(e) if e.is_unsupported() => {
            println!("unsupported: {e}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    qp.bring_up_raw(port)?;
    let udp = PortFilter { dst_port: udp_port, src_port: 0 };
    let _flow = Flow::builder(&qp, port)
        .eth(
            EthFilter { ether_type: 0x0800, ..Default::default() },
            EthFilter { ether_type: 0xffff, ..Default::default() },
        )
        .ipv4(Ipv4Filter::default(), Ipv4Filter::default())
        .udp(udp, PortFilter { dst_port: 0xffff, src_port: 0 })
        .build()?;
    let mut buf = vec![0u8; SLOTS * SLOT];
    // SAFETY: `buf` outlives the region and every request on it (the QP and
    // flow are dropped first, at the end of `main`, after the last completion).
    let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), AccessFlags::LOCAL_WRITE)? };
    let recv = |slot: usize| -> rrddmma::prim::Result<()> {
        let sges = [mr.sge(slot * SLOT, SLOT as u32)];
        // SAFETY: the slot lies in `mr`, untouched until its completion.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sges, slot as u64)]) }
    };
    for slot in 0..SLOTS {
        recv(slot)?;
    }
    println!("echoing UDP port {udp_port} on {} port {port}", ctx.name());
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
                    let frame = &mut buf[slot * SLOT..slot * SLOT + len];
                    if len < 42 {
                        recv(slot)?;
                        continue;
                    }
                    // Ethernet: swap the MACs; IPv4 (no options assumed
                    // beyond the IHL): swap the addresses; UDP: swap the
                    // ports, no checksum.
                    let (dst, src) = frame[..12].split_at_mut(6);
                    dst.swap_with_slice(src);
                    let ihl = usize::from(frame[14] & 0x0f) * 4;
                    let (a, b) = frame[26..34].split_at_mut(4);
                    a.swap_with_slice(b);
                    let udp = 14 + ihl;
                    let (a, b) = frame[udp..udp + 4].split_at_mut(2);
                    a.swap_with_slice(b);
                    frame[udp + 6..udp + 8].fill(0);
                    let sges = [mr.sge(slot * SLOT, len as u32)];
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
