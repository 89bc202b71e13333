//! Convenience set-ups over [`crate::prim`].
//!
//! Present: [`connected_rc_pair`], two RC QPs of one device connected to each
//! other (loopback), every knob passed through.
//!
//! To come: `RegisteredMem` (aligned, optionally huge-page, registered
//! memory), RC pairs across hosts through [`crate::ctrl`], UD endpoints with an
//! address-handle cache, and MR-token exchange.

use crate::prim::{ConnectOpts, Cq, Endpoint, Pd, Qp, QpCaps, Result};

/// Creates two RC QPs on `pd`, both completing sends on `send_cq` and
/// receives on `recv_cq` (which may be the same CQ), and connects them to each
/// other through `opts.port` / `opts.gid_index`. The first QP sends from PSN
/// `psn`, the second from `psn + 1` (mod 2^24).
pub fn connected_rc_pair(
    pd: &Pd,
    send_cq: &Cq,
    recv_cq: &Cq,
    caps: QpCaps,
    psn: u32,
    opts: &ConnectOpts,
) -> Result<(Qp, Qp)> {
    let a = Qp::new_rc(pd, send_cq, recv_cq, caps)?;
    let b = Qp::new_rc(pd, send_cq, recv_cq, caps)?;
    let ea: Endpoint = a.endpoint(opts.port, opts.gid_index, psn)?;
    let eb: Endpoint = b.endpoint(opts.port, opts.gid_index, psn.wrapping_add(1))?;
    a.connect(&eb, ea.psn, opts)?;
    b.connect(&ea, eb.psn, opts)?;
    Ok((a, b))
}
