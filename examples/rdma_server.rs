//! `rdma_server` of librdmacm's examples, over rrddmma: listens on every
//! address at port 7471 (`-p` to change), takes one connection, receives a
//! 16-byte message, answers with 16 bytes, disconnects. Pairs with
//! `rdma_client` (this crate's or librdmacm's).
//!
//! ```text
//! rdma_server [-p port_number]
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[path = "cm_common/mod.rs"]
mod cm_common;

use rrddmma::wrap::{accept_rc_cm, CmListener, RegisteredMem};

fn run(port: u16) -> Result<(), String> {
    let l = CmListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)), 0).map_err(|e| e.to_string())?;
    let opts = cm_common::opts().timeout(Duration::from_secs(60));
    let c = accept_rc_cm(&l, &opts).map_err(|e| format!("accept: {e}"))?;
    let recv = RegisteredMem::new(&c.pd, cm_common::MSG_LEN).map_err(|e| e.to_string())?;
    let mut send = RegisteredMem::new(&c.pd, cm_common::MSG_LEN).map_err(|e| e.to_string())?;
    send.write(0, b"rdma_server:pong");
    cm_common::post_recv(&c, &recv).map_err(|e| e.to_string())?;
    cm_common::wait(&c, false).map_err(|e| format!("rdma_get_recv_comp: {e}"))?;
    cm_common::send(&c, &send).map_err(|e| format!("rdma_get_send_comp: {e}"))?;
    c.disconnect(Instant::now() + Duration::from_secs(10)).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = match args.as_slice() {
        [] => Some(7471),
        [p, v] if p == "-p" => v.parse().ok(),
        [p] => p.strip_prefix("-p").and_then(|v| v.parse().ok()),
        _ => None,
    };
    let Some(port) = port else {
        println!("usage: rdma_server\n\t[-p port_number]");
        return ExitCode::from(1);
    };
    println!("rdma_server: start");
    let r = run(port);
    if let Err(e) = &r {
        eprintln!("rdma_server: {e}");
    }
    println!("rdma_server: end {}", if r.is_ok() { 0 } else { -1 });
    if r.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
