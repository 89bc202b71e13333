//! async-rdma's peer benchmark, written as its README and examples teach:
//! `RdmaBuilder::listen` / `connect` over TCP, memory from
//! `alloc_local_mr` and `request_remote_mr`, `Rdma::write` / `read` awaited,
//! a multi-threaded tokio runtime (`#[tokio::main]`'s).
//!
//! `peers-async-rdma DEVICE WORKLOAD N`, the GID index from
//! `PEERS_GID_INDEX` (async-rdma's default, 1, without it). WORKLOAD:
//!
//! - `OP-SIZE-INFLIGHT` (`write-64-1` ... `read-65536-32`): RDMA WRITE or
//!   READ of SIZE bytes, INFLIGHT at a time, each awaited (32 futures
//!   joined); one remote region per request in flight (a `RemoteMr` lends
//!   its bytes to one `write` at a time);
//! - `frontpage`: the README's exchange per iteration: the client requests
//!   an 8-byte region of the server, writes the second half of its own
//!   region into it, reads it back into a second local region and checks
//!   it, and gives it back
//!   (`send_remote_mr`); the server takes it back (`receive_local_mr`) and
//!   checks it.
//!
//! A warm-up of [`WARM_UP`] operations runs before the measured region.
//! Both `Rdma`s live in one process: the server listens on a port of
//! 127.0.0.1 and the client connects to it, both awaited together (the
//! listener is bound at the first poll, before the client connects).

#[path = "../../common.rs"]
mod common;

use std::alloc::Layout;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use async_rdma::{LocalMr, LocalMrReadAccess, LocalMrWriteAccess, MRManageStrategy, Rdma, RdmaBuilder, RemoteMr};
use common::{die, report, Args, Counting, AIO_WORKLOADS};

#[global_allocator]
static A: Counting = Counting;

/// Operations run before the measured region (whole batches).
const WARM_UP: usize = 64;

/// A remote region outlives the slowest run (`request_remote_mr`'s default
/// is 60 s, after which the region's operations fail).
const RMR_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The README's data: the second half of the client's 8 bytes written.
const EXPECTED: [u8; 8] = [0, 0, 0, 0, 1, 1, 1, 1];

fn main() {
    let a = common::args("peers-async-rdma");
    if a.workload != "frontpage" && !AIO_WORKLOADS.contains(&a.workload.as_str()) {
        println!(
            "UNSUPPORTED crate=async-rdma workload={} reason=this program runs the async comparison only",
            a.workload
        );
        return;
    }
    let gid = std::env::var("PEERS_GID_INDEX").ok().and_then(|g| g.parse().ok()).unwrap_or(1);
    // A port of 127.0.0.1 free now (the README picks one with portpicker).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|e| die("free port", e))
        .port();
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    // `#[tokio::main]`'s runtime, built by hand so that the measured
    // region can block on it.
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| die("tokio runtime", e));
    let builder = |strategy| {
        RdmaBuilder::default()
            .set_dev(&a.device)
            .set_gid_index(gid)
            // 32 requests in flight besides the agent's own messages
            // (the default send queue holds 10).
            .set_qp_max_send_wr(64)
            .set_mr_strategy(strategy)
    };
    // The client's memory comes from jemalloc (the default); the server
    // registers each region on its own (`Raw`): two jemalloc-managed
    // `Rdma`s in one process share async-rdma's global extent map, and a
    // lookup that finds the other arena's extent fails an assertion
    // (mr_allocator.rs, `assert_eq!(arena_ind, item.arena_ind)`).
    let (server, client) = rt.block_on(async {
        let (s, c) = tokio::join!(
            builder(MRManageStrategy::Raw).listen(addr),
            builder(MRManageStrategy::Jemalloc).connect(addr)
        );
        (s.unwrap_or_else(|e| die("RdmaBuilder::listen", e)), c.unwrap_or_else(|e| die("RdmaBuilder::connect", e)))
    });
    let empty = AtomicU64::new(0);
    if a.workload == "frontpage" {
        let n = a.iters as usize;
        let run = |n: usize| {
            rt.block_on(async {
                for _ in 0..n {
                    frontpage(&server, &client).await
                }
            })
        };
        run(WARM_UP);
        return report("async-rdma", &a, &empty, || run(n));
    }
    let mut it = a.workload.split('-');
    let write = it.next() == Some("write");
    let num = |s: Option<&str>| s.and_then(|s| s.parse::<usize>().ok()).unwrap_or_else(|| die("workload", &a.workload));
    let (size, inflight) = (num(it.next()), num(it.next()));
    let layout = Layout::array::<u8>(size).unwrap_or_else(|e| die("layout", e));
    // READs alternate between two sets of local regions: a READ locks its
    // region with `try_write` and fails when the lock is taken, and the
    // listener drops the previous READ's lock only after it has woken the
    // awaiting task (on another worker, which may already have posted the
    // next READ). Two sets apart, the listener has dropped it.
    let sets = if write { 1 } else { 2 };
    let (mut lmrs, mut rmrs) = rt.block_on(async {
        let mut lmrs = Vec::new();
        for _ in 0..inflight * sets {
            lmrs.push(client.alloc_local_mr(layout).unwrap_or_else(|e| die("alloc_local_mr", e)));
        }
        let mut rmrs = Vec::new();
        for _ in 0..inflight {
            let r = client.request_remote_mr_with_timeout(layout, RMR_TIMEOUT).await;
            rmrs.push(r.unwrap_or_else(|e| die("request_remote_mr", e)));
        }
        (lmrs, rmrs)
    });
    let batches = (a.iters as usize).div_ceil(inflight);
    let mut run = |batches: usize| {
        rt.block_on(ops(&client, write, &mut lmrs, &mut rmrs, batches));
    };
    run(WARM_UP.div_ceil(inflight));
    report("async-rdma", &Args { iters: (batches * inflight) as u64, ..a.clone() }, &empty, || run(batches));
    // A requested region's drop tells the server through a task of the runtime.
    rt.block_on(async move { drop(rmrs) });
    drop(server);
}

/// `batches` rounds of one WRITE or READ per remote region, awaited
/// together; the local regions `all` are `all.len() / rmrs.len()` sets
/// taken in turn.
async fn ops(client: &Rdma, write: bool, all: &mut [LocalMr], rmrs: &mut [RemoteMr], batches: usize) {
    let sets = all.len() / rmrs.len();
    for b in 0..batches {
        let lmrs = &mut all[(b % sets) * rmrs.len()..][..rmrs.len()];
        if lmrs.len() == 1 {
            let r = if write {
                client.write(&lmrs[0], &mut rmrs[0]).await
            } else {
                client.read(&mut lmrs[0], &rmrs[0]).await
            };
            r.unwrap_or_else(|e| die("write/read", e));
        } else if write {
            let futs = lmrs.iter().zip(rmrs.iter_mut()).map(|(l, r)| client.write(l, r));
            for r in futures::future::join_all(futs).await {
                r.unwrap_or_else(|e| die("write", e));
            }
        } else {
            let futs = lmrs.iter_mut().zip(rmrs.iter()).map(|(l, r)| client.read(l, r));
            for r in futures::future::join_all(futs).await {
                r.unwrap_or_else(|e| die("read", e));
            }
        }
    }
}

/// One iteration of the README's exchange, both sides awaited together.
async fn frontpage(server: &Rdma, client: &Rdma) {
    let client_side = async {
        let layout = Layout::new::<[u8; 8]>();
        // alloc 8 bytes of remote memory
        let mut rmr = client.request_remote_mr(layout).await.unwrap_or_else(|e| die("request_remote_mr", e));
        // alloc 8 bytes of local memory and fill it
        let mut lmr = client.alloc_local_mr(layout).unwrap_or_else(|e| die("alloc_local_mr", e));
        let _num = lmr.as_mut_slice().write(&[1_u8; 8]).unwrap_or_else(|e| die("fill", e));
        // write the second half of the local region into the remote one
        // (the slices lock their regions until the statement ends)
        client
            .write(
                &lmr.get(4..8).unwrap_or_else(|| die("LocalMr::get", 4..8)),
                &mut rmr.get_mut(4..8).unwrap_or_else(|e| die("RemoteMr::get_mut", e)),
            )
            .await
            .unwrap_or_else(|e| die("write", e));
        // read the whole remote region back into a second local region and
        // check it (reading into `lmr` can fail: the listener drops the
        // WRITE's lock on `lmr` only after it has woken this task, and a
        // READ's lock is taken with `try_write`)
        let mut back = client.alloc_local_mr(layout).unwrap_or_else(|e| die("alloc_local_mr", e));
        client.read(&mut back, &rmr).await.unwrap_or_else(|e| die("read", e));
        check("client", *back.as_slice());
        // give the region back to the server
        client.send_remote_mr(rmr).await.unwrap_or_else(|e| die("send_remote_mr", e));
    };
    let server_side = async {
        let lmr = server.receive_local_mr().await.unwrap_or_else(|e| die("receive_local_mr", e));
        check("server", *lmr.as_slice());
    };
    tokio::join!(client_side, server_side);
}

fn check(who: &str, data: &[u8]) {
    if data != EXPECTED {
        die(&format!("{who}: the region holds"), data);
    }
}
