//! sideway's peer benchmark, written as its `rc_pingpong` example teaches:
//! extended QP (`ibv_wr_*` through `start_post_send` / `construct_wr` /
//! `post`), extended CQ polled with `start_poll` and its poller.
//! `peers-sideway DEVICE WORKLOAD N [settle]`; the GID index is `PEERS_GID_INDEX`
//! (default 1).

#[path = "../../common.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use common::{die, peers_settle, report, Counting};
use sideway::ibverbs::address::AddressHandleAttribute;
use sideway::ibverbs::completion::{ExtendedCompletionQueue, GenericCompletionQueue, WorkCompletionStatus};
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, SendOperationFlags,
    SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

#[global_allocator]
static A: Counting = Counting;

const LEN: usize = 64 * 64;

struct Pair {
    a: ExtendedQueuePair,
    b: ExtendedQueuePair,
    cq: Arc<ExtendedCompletionQueue>,
    mr: Arc<MemoryRegion>,
    buf: Vec<u8>,
    _pd: Arc<ProtectionDomain>,
    _ctx: Arc<DeviceContext>,
}

fn access() -> AccessFlags {
    AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead | AccessFlags::RemoteAtomic
}

fn setup(dev: &str, gid_index: u8) -> Pair {
    let list = DeviceList::new().unwrap_or_else(|e| die("DeviceList::new", e));
    let device = list.iter().find(|d| d.name() == dev).unwrap_or_else(|| die("device", dev));
    let ctx = device.open().unwrap_or_else(|e| die("open", e));
    let pd = ctx.alloc_pd().unwrap_or_else(|e| die("alloc_pd", e));
    let mut buf = vec![0u8; LEN];
    // SAFETY: `buf` lives in `Pair` beside the MR and is never moved or
    // resized; `Pair` drops the MR first (field order).
    let mr = unsafe { pd.reg_mr(buf.as_mut_ptr() as usize, LEN, access()) }.unwrap_or_else(|e| die("reg_mr", e));
    let cq = ctx.create_cq_builder().setup_cqe(128).build_ex().unwrap_or_else(|e| die("build_ex", e));
    let gid = ctx.query_gid(1, gid_index.into()).unwrap_or_else(|e| die("query_gid", e));
    let ops = SendOperationFlags::Send
        | SendOperationFlags::Write
        | SendOperationFlags::Read
        | SendOperationFlags::AtomicFetchAndAdd;
    let mut qps = (0..2).map(|_| {
        let h = GenericCompletionQueue::from(Arc::clone(&cq));
        pd.create_qp_builder()
            .setup_send_cq(h.clone())
            .setup_recv_cq(h)
            .setup_max_send_wr(64)
            .setup_max_recv_wr(64)
            .setup_send_ops_flags(ops)
            .build_ex()
            .unwrap_or_else(|e| die("build_ex", e))
    });
    let (mut a, mut b) = (qps.next().unwrap(), qps.next().unwrap());
    let (qa, qb) = (a.qp_number(), b.qp_number());
    for (qp, dest, psn, rpsn) in [(&mut a, qb, 1, 2), (&mut b, qa, 2, 1)] {
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init).setup_pkey_index(0).setup_port(1).setup_access_flags(access());
        qp.modify(&attr).unwrap_or_else(|e| die("INIT", e));
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(Mtu::Mtu1024)
            .setup_dest_qp_num(dest)
            .setup_rq_psn(rpsn)
            .setup_max_dest_read_atomic(1)
            .setup_min_rnr_timer(12);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(1)
            .setup_port(1)
            .setup_grh_src_gid_index(gid_index)
            .setup_grh_dest_gid(&gid)
            .setup_grh_hop_limit(64);
        attr.setup_address_vector(&ah);
        qp.modify(&attr).unwrap_or_else(|e| die("RTR", e));
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(psn)
            .setup_timeout(14)
            .setup_retry_cnt(6)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(1);
        qp.modify(&attr).unwrap_or_else(|e| die("RTS", e));
    }
    Pair { a, b, cq, mr, buf, _pd: pd, _ctx: ctx }
}

/// Polls until `want` completions arrived, each a success.
fn poll(p: &Pair, want: usize, empty: &AtomicU64) {
    let mut got = 0;
    while got < want {
        match p.cq.start_poll() {
            Ok(mut poller) => {
                for wc in poller.by_ref() {
                    if wc.status() != WorkCompletionStatus::Success as u32 {
                        die("completion", wc.status());
                    }
                    got += 1;
                }
            }
            Err(_) => {
                empty.fetch_add(1, Relaxed);
            }
        }
    }
}

fn main() {
    let a = common::args("peers-sideway");
    let gi: u8 = std::env::var("PEERS_GID_INDEX").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let empty = AtomicU64::new(0);
    if a.workload == "setup" {
        return report("sideway", &a, &empty, || {
            for _ in 0..a.iters {
                drop(std::hint::black_box(setup(&a.device, gi)));
            }
        });
    }
    let mut p = setup(&a.device, gi);
    let base = p.buf.as_mut_ptr() as u64;
    let (lkey, rkey) = (p.mr.lkey(), p.mr.rkey());
    let remote = base + 32 * 64;
    let wl = a.workload.clone();
    report("sideway", &a, &empty, || {
        for _ in 0..a.iters {
            match wl.as_str() {
                "write1" | "read" | "faa" => {
                    let mut guard = p.a.start_post_send();
                    let wr = guard.construct_wr(0, WorkRequestFlags::Signaled);
                    let h = match wl.as_str() {
                        "write1" => wr.setup_write(rkey, remote),
                        "read" => wr.setup_read(rkey, remote),
                        _ => wr.setup_atomic_fetch_add(rkey, remote, 1),
                    };
                    // SAFETY: the entry lies in the registered buffer, alive
                    // for the run; each request completes before the next.
                    unsafe { h.setup_sge(lkey, base, if wl == "faa" { 8 } else { 64 }) };
                    guard.post().unwrap_or_else(|e| die("post", e));
                    peers_settle(a.settle);
                    poll(&p, 1, &empty);
                }
                "write32" => {
                    let mut guard = p.a.start_post_send();
                    for i in 0..32u64 {
                        let flags = if i == 31 { WorkRequestFlags::Signaled } else { WorkRequestFlags::none() };
                        let h = guard.construct_wr(i, flags).setup_write(rkey, remote + i * 64);
                        // SAFETY: as above.
                        unsafe { h.setup_sge(lkey, base + i * 64, 64) };
                    }
                    guard.post().unwrap_or_else(|e| die("post", e));
                    peers_settle(a.settle);
                    poll(&p, 1, &empty);
                }
                _ => {
                    let mut rg = p.b.start_post_recv();
                    let h = rg.construct_wr(1);
                    // SAFETY: as above.
                    unsafe { h.setup_sge(lkey, remote, 64) };
                    rg.post().unwrap_or_else(|e| die("post_recv", e));
                    let mut guard = p.a.start_post_send();
                    let h = guard.construct_wr(0, WorkRequestFlags::Signaled).setup_send();
                    // SAFETY: as above.
                    unsafe { h.setup_sge(lkey, base, 64) };
                    guard.post().unwrap_or_else(|e| die("post", e));
                    peers_settle(a.settle);
                    poll(&p, 2, &empty);
                }
            }
        }
    });
}
