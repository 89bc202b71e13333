//! The `ibverbs` crate's peer benchmark, written as its `loopback` example
//! teaches (`QueuePairBuilder`, `handshake`, `post_send` / `post_receive` of
//! a range of a `MemoryRegion`, `CompletionQueue::poll`). The crate posts
//! SENDs and RECVs only: `write1`, `write32`, `read` and `faa` exit with
//! status 3 and say so. `peers-ibverbs DEVICE WORKLOAD N [settle]`; the GID
//! index is `PEERS_GID_INDEX` (default 1).

#[path = "../../common.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use common::{die, peers_settle, report, Counting};

#[global_allocator]
static A: Counting = Counting;

fn main() {
    let a = common::args("peers-ibverbs");
    if !["setup", "send"].contains(&a.workload.as_str()) {
        println!(
            "UNSUPPORTED crate=ibverbs workload={} reason=ibverbs 0.9 posts only SEND and RECV \
             (QueuePair::post_send / post_receive); no RDMA WRITE, READ or atomic",
            a.workload
        );
        std::process::exit(3)
    }
    let gi: u32 = std::env::var("PEERS_GID_INDEX").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let list = ibverbs::devices().unwrap_or_else(|e| die("devices", e));
    let dev = list
        .iter()
        .find(|d| d.name().is_some_and(|n| n.to_bytes() == a.device.as_bytes()))
        .unwrap_or_else(|| die("device", &a.device));
    let empty = AtomicU64::new(0);
    if a.workload == "setup" {
        return report("ibverbs", &a, &empty, || {
            for _ in 0..a.iters {
                let ctx = dev.open().unwrap_or_else(|e| die("open", e));
                let cq = ctx.create_cq(128, 0).unwrap_or_else(|e| die("create_cq", e));
                let pd = ctx.alloc_pd().unwrap_or_else(|e| die("alloc_pd", e));
                let pa = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC).set_gid_index(gi).build();
                let pa = pa.unwrap_or_else(|e| die("build", e));
                let pb = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC).set_gid_index(gi).build();
                let pb = pb.unwrap_or_else(|e| die("build", e));
                let (ea, eb) = (pa.endpoint(), pb.endpoint());
                let qa = pa.handshake(eb).unwrap_or_else(|e| die("handshake", e));
                let qb = pb.handshake(ea).unwrap_or_else(|e| die("handshake", e));
                let mr = pd.allocate::<u8>(64 * 64).unwrap_or_else(|e| die("allocate", e));
                drop(std::hint::black_box((mr, qa, qb)));
            }
        });
    }
    let ctx = dev.open().unwrap_or_else(|e| die("open", e));
    let cq = ctx.create_cq(128, 0).unwrap_or_else(|e| die("create_cq", e));
    let pd = ctx.alloc_pd().unwrap_or_else(|e| die("alloc_pd", e));
    let pa = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC).set_gid_index(gi).build();
    let pa = pa.unwrap_or_else(|e| die("build", e));
    let pb = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC).set_gid_index(gi).build();
    let pb = pb.unwrap_or_else(|e| die("build", e));
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let mut qa = pa.handshake(eb).unwrap_or_else(|e| die("handshake", e));
    let mut qb = pb.handshake(ea).unwrap_or_else(|e| die("handshake", e));
    let mut mr = pd.allocate::<u8>(64 * 64).unwrap_or_else(|e| die("allocate", e));
    let mut wcs = [ibverbs::ibv_wc::default(); 4];
    report("ibverbs", &a, &empty, || {
        for _ in 0..a.iters {
            // SAFETY: the ranges lie in `mr`, alive for the run; both
            // requests complete before the next pair is posted.
            unsafe { qb.post_receive(&mut mr, 2048..2112, 1) }.unwrap_or_else(|e| die("post_receive", e));
            // SAFETY: as above.
            unsafe { qa.post_send(&mut mr, 0..64, 0) }.unwrap_or_else(|e| die("post_send", e));
            peers_settle(a.settle);
            let mut got = 0;
            while got < 2 {
                let done = cq.poll(&mut wcs).unwrap_or_else(|e| die("poll", e));
                if done.is_empty() {
                    empty.fetch_add(1, Relaxed);
                }
                for wc in done.iter() {
                    if let Some(err) = wc.error() {
                        die("completion", err);
                    }
                }
                got += done.len();
            }
        }
    });
}
