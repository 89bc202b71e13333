//! `rdma_client` of librdmacm's examples, over rrddmma: connects to
//! `-s server` (default 127.0.0.1) port `-p` (default 7471), sends a 16-byte
//! message, receives the 16-byte answer, disconnects. Pairs with
//! `rdma_server` (this crate's or librdmacm's).
//!
//! ```text
//! rdma_client [-s server_address] [-p port_number]
//! ```

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[path = "cm_common/mod.rs"]
mod cm_common;

use rrddmma::wrap::{connect_rc_cm, RegisteredMem};

fn run(addr: SocketAddr) -> Result<(), String> {
    let c = connect_rc_cm(addr, &cm_common::opts()).map_err(|e| format!("connect: {e}"))?;
    let recv = RegisteredMem::new(&c.pd, cm_common::MSG_LEN).map_err(|e| e.to_string())?;
    let mut send = RegisteredMem::new(&c.pd, cm_common::MSG_LEN).map_err(|e| e.to_string())?;
    send.write(0, b"rdma_client:ping");
    cm_common::post_recv(&c, &recv).map_err(|e| e.to_string())?;
    cm_common::send(&c, &send).map_err(|e| format!("rdma_get_send_comp: {e}"))?;
    cm_common::wait(&c, false).map_err(|e| format!("rdma_get_recv_comp: {e}"))?;
    c.disconnect(Instant::now() + Duration::from_secs(10)).map_err(|e| e.to_string())
}

fn parse(args: &[String]) -> Option<SocketAddr> {
    let (mut server, mut port): (IpAddr, u16) = ([127, 0, 0, 1].into(), 7471);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = a.split_at(a.len().min(2));
        let v = if inline.is_empty() { it.next()?.clone() } else { inline.to_string() };
        match flag {
            "-s" => server = v.parse().ok()?,
            "-p" => port = v.parse().ok()?,
            _ => return None,
        }
    }
    Some(SocketAddr::new(server, port))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(addr) = parse(&args) else {
        println!("usage: rdma_client\n\t[-s server_address]\n\t[-p port_number]");
        return ExitCode::from(1);
    };
    println!("rdma_client: start");
    let r = run(addr);
    if let Err(e) = &r {
        eprintln!("rdma_client: {e}");
    }
    println!("rdma_client: end {}", if r.is_ok() { 0 } else { -1 });
    if r.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
