//! RC ping-pong, interoperable with rdma-core's `ibv_rc_pingpong`: same
//! flags, same TCP exchange of QP addresses, same output lines, so either
//! side may be the C tool.
//!
//! ```text
//! cargo run --example rc_pingpong -- -d rxe0 -g 1              # server
//! cargo run --example rc_pingpong -- -d rxe0 -g 1 localhost    # client
//! ```
//!
//! Each side keeps `-r` receives posted into its one buffer of `-s` bytes;
//! the client sends first, and each side sends its next message when its
//! previous send has completed and the peer's message has arrived, `-n`
//! times. A bad flag or value prints the usage and exits with code 2; a
//! failure at run time exits with code 1.

mod pingpong_common;

use std::process::ExitCode;

use pingpong_common::*;
use rrddmma::bindings as ffi;
use rrddmma::prim::{
    AccessFlags, CompChannel, ConnectOpts, Cq, Endpoint, Gid, Mr, Pd, Qp, QpCaps, QpType, RecvWr, SendWr,
};

fn main() -> ExitCode {
    tool_main(Kind::Rc, run)
}

fn run(c: &Config) -> Res<()> {
    let ctx = open(c)?;
    let size = c.size as usize;
    let mut access = AccessFlags::LOCAL_WRITE;
    if c.odp {
        let x = ctx.query_device_ex()?;
        let need = ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_SEND.0
            | ffi::ibv_odp_transport_cap_bits::IBV_ODP_SUPPORT_RECV.0;
        if x.odp_caps.general_caps & u64::from(ffi::ibv_odp_general_caps::IBV_ODP_SUPPORT.0) == 0
            || x.odp_caps.per_transport_caps.rc_odp_caps & need != need
        {
            return Err("The device isn't ODP capable or does not support RC send and receive with ODP".into());
        }
        access |= AccessFlags::ON_DEMAND;
    }

    let buf = Buf::new(size)?;
    let channel = if c.events { Some(CompChannel::create(&ctx)?) } else { None };
    let pd = Pd::alloc(&ctx)?;
    // SAFETY: `buf` holds `size` bytes and is declared before `mr`, so it
    // outlives the registration; every request completes or is flushed
    // (QP destroyed) before `mr` is dropped, the QP being declared after it.
    let mr = unsafe { Mr::register(&pd, buf.ptr(), size, access)? };
    let mut cq = Cq::builder(&ctx, c.rx_depth + 1);
    if let Some(ch) = &channel {
        cq = cq.channel(ch);
    }
    let cq = cq.build()?;
    let caps =
        QpCaps::default().max_send_wr(1).max_recv_wr(c.rx_depth).max_send_sge(1).max_recv_sge(1).max_inline_data(0);
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build()?;

    let sges = [mr.sge_at(0, c.size as usize)];
    let post_recv = |n: u32| -> u32 {
        let mut k = 0;
        while k < n {
            // SAFETY: the entry covers `mr`, registered for local write and
            // alive (with `buf`) until the QP is gone.
            if unsafe { qp.post_recv(&mut [RecvWr::new(&sges, RECV_WRID)]) }.is_err() {
                break;
            }
            k += 1;
        }
        k
    };
    let post_send = || -> Res<()> {
        // SAFETY: as for the receives; the buffer is not written by us
        // while the send is outstanding.
        unsafe { qp.post_send(&mut [SendWr::send(&sges).wr_id(SEND_WRID).signaled()])? };
        Ok(())
    };
    if c.events {
        cq.req_notify(false)?;
    }

    let port = ctx.query_port(c.ib_port)?;
    if !port.is_ethernet() && port.lid() == 0 {
        return Err("Couldn't get local LID".into());
    }
    let gid = match c.gid_idx {
        Some(i) => ctx.query_gid(c.ib_port, u32::from(i)).map_err(|e| format!("can't read sgid of index {i}: {e}"))?,
        None => Gid::default(),
    };
    let me = Dest { lid: port.lid(), qpn: qp.qpn(), psn: random_psn(), gid };
    print_dest("local", &me, ',');

    let opts =
        ConnectOpts::default().port(c.ib_port).gid_index(Some(c.gid_idx.unwrap_or(0))).mtu(c.mtu).sl(c.sl).hop_limit(1);
    // RESET -> INIT -> RTR -> RTS, then the receives (a RESET QP takes none).
    let mut posted = 0;
    let mut connect = |r: &Dest| -> Res<()> {
        let remote = Endpoint { qpn: r.qpn, psn: r.psn, lid: r.lid, gid: r.route_gid().unwrap_or_default() };
        qp.connect(&remote, me.psn, &opts)?;
        posted = post_recv(c.rx_depth);
        if posted < c.rx_depth {
            return Err(format!("Couldn't post receive ({posted})").into());
        }
        Ok(())
    };
    let remote = match &c.server {
        Some(host) => {
            let r = client_exchange(host, c.port, &me)?;
            connect(&r)?;
            r
        }
        None => server_exchange(c.port, &me, connect)?,
    };
    print_dest("remote", &remote, ',');

    if c.server.is_some() && c.chk {
        mark_pages(buf.ptr(), size);
    }
    let (t, _) = ping_pong(c, &cq, posted, post_send, post_recv)?;
    report(c, t);
    if c.server.is_none() && c.chk && !check_pages(buf.ptr(), size) {
        return Err("received data lack the -c pattern".into());
    }
    Ok(())
}
