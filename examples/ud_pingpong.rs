//! UD ping-pong, interoperable with rdma-core's `ibv_ud_pingpong`: same
//! flags, same TCP exchange of QP addresses, same output lines, so either
//! side may be the C tool.
//!
//! ```text
//! cargo run --example ud_pingpong -- -d rxe0 -g 1              # server
//! cargo run --example ud_pingpong -- -d rxe0 -g 1 localhost    # client
//! ```
//!
//! The buffer holds 40 bytes of room for the GRH in front of the message:
//! receives take all `40 + size` bytes, sends go out from offset 40. Messages
//! travel through an address handle to the peer's QP number with Q_Key
//! 0x11111111, inline when the QP allows it. The message must fit the port's
//! active MTU. A bad flag or value prints the usage and exits with code 2; a
//! failure at run time exits with code 1.

mod pingpong_common;

use std::process::ExitCode;

use pingpong_common::*;
use rrddmma::prim::{AccessFlags, Ah, AhAttr, CompChannel, Cq, Gid, Mr, Pd, Qp, QpCaps, QpType, RecvWr, SendWr};

/// Bytes of room for the GRH in front of every received message.
const GRH: usize = 40;
/// The Q_Key both sides use.
const QKEY: u32 = 0x1111_1111;

fn main() -> ExitCode {
    tool_main(Kind::Ud, run)
}

fn run(c: &Config) -> Res<()> {
    let ctx = open(c)?;
    let size = c.size as usize;
    let port =
        ctx.query_port(c.ib_port).map_err(|e| format!("Unable to query port info for port {}: {e}", c.ib_port))?;
    let mtu = 1u64 << (port.active_mtu().to_raw() + 7);
    if u64::from(c.size) > mtu {
        return Err(format!("Requested size larger than port MTU ({mtu})").into());
    }

    let buf = Buf::new(size + GRH)?;
    let channel = if c.events { Some(CompChannel::create(&ctx)?) } else { None };
    let pd = Pd::alloc(&ctx)?;
    // SAFETY: `buf` holds `size + GRH` bytes and is declared before `mr`, so
    // it outlives the registration; every request completes or is flushed
    // (QP destroyed) before `mr` is dropped, the QP being declared after it.
    let mr = unsafe { Mr::register(&pd, buf.ptr(), size + GRH, AccessFlags::LOCAL_WRITE)? };
    let mut cq = Cq::builder(&ctx, c.rx_depth + 1);
    if let Some(ch) = &channel {
        cq = cq.channel(ch);
    }
    let cq = cq.build()?;
    let caps =
        QpCaps::default().max_send_wr(1).max_recv_wr(c.rx_depth).max_send_sge(1).max_recv_sge(1).max_inline_data(0);
    let qp = Qp::builder(&pd, QpType::UD, &cq, &cq).caps(caps).build()?;
    let inline = qp.caps().get_max_inline_data() >= c.size;
    let psn = random_psn();
    // A UD QP needs no peer to reach RTS.
    qp.bring_up_ud(c.ib_port, 0, QKEY, psn)?;

    let recv_sges = [mr.sge_at(0, c.size as usize + GRH)];
    let post_recv = |n: u32| -> u32 {
        let mut k = 0;
        while k < n {
            // SAFETY: the entry covers `mr`, registered for local write and
            // alive (with `buf`) until the QP is gone.
            if unsafe { qp.post_recv(&mut [RecvWr::new(&recv_sges, RECV_WRID)]) }.is_err() {
                break;
            }
            k += 1;
        }
        k
    };
    let posted = post_recv(c.rx_depth);
    if posted < c.rx_depth {
        return Err(format!("Couldn't post receive ({posted})").into());
    }
    if c.events {
        cq.req_notify(false)?;
    }

    let gid = match c.gid_idx {
        Some(i) => ctx
            .query_gid(c.ib_port, u32::from(i))
            .map_err(|e| format!("Could not get local gid for gid index {i}: {e}"))?,
        None => Gid::default(),
    };
    let me = Dest { lid: port.lid(), qpn: qp.qpn(), psn, gid };
    print_dest("local", &me, ':');

    let mut ah = None;
    let mut make_ah = |r: &Dest| -> Res<()> {
        let attr = match r.route_gid() {
            Some(g) => AhAttr::global(c.ib_port, c.gid_idx.unwrap_or(0), g).dlid(r.lid).hop_limit(1),
            None => AhAttr::lid(c.ib_port, r.lid),
        };
        ah = Some(Ah::create(&pd, &attr.sl(c.sl)).map_err(|e| format!("Failed to create AH: {e}"))?);
        Ok(())
    };
    let remote = match &c.server {
        Some(host) => {
            let r = client_exchange(host, c.port, &me)?;
            make_ah(&r)?;
            r
        }
        None => server_exchange(c.port, &me, make_ah)?,
    };
    print_dest("remote", &remote, ',');
    let ah = ah.expect("the exchange made the address handle");

    let send_sges = [mr.sge_at(GRH, c.size as usize)];
    let post_send = || -> Res<()> {
        let mut wr = SendWr::send(&send_sges).ud(&ah, remote.qpn, QKEY).wr_id(SEND_WRID).signaled();
        if inline {
            wr = wr.inline();
        }
        // SAFETY: as for the receives; `ah` lives until the end of `run`,
        // after every completion; inline payloads are copied at the call.
        unsafe { qp.post_send(&mut [wr])? };
        Ok(())
    };

    if c.server.is_some() && c.chk {
        // SAFETY: the message starts GRH bytes into the buffer.
        mark_pages(unsafe { buf.ptr().add(GRH) }, size);
    }
    let (t, _) = ping_pong(c, &cq, posted, post_send, post_recv)?;
    report(c, t);
    // SAFETY: as above.
    if c.server.is_none() && c.chk && !check_pages(unsafe { buf.ptr().add(GRH) }, size) {
        return Err("received data lack the -c pattern".into());
    }
    Ok(())
}
