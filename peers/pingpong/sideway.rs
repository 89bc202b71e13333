//! RC ping-pong with sideway, as its rc_pingpong example: a loopback pair,
//! 10 rounds of a 64-byte message each way, every payload checked.
//! `pingpong-sideway DEVICE [GID_INDEX]`.

use std::sync::Arc;

use sideway::ibverbs::address::AddressHandleAttribute;
use sideway::ibverbs::completion::{GenericCompletionQueue, WorkCompletionStatus};
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::Mtu;
use sideway::ibverbs::queue_pair::{
    PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = std::env::args().nth(1).ok_or("usage: pingpong-sideway DEVICE [GID_INDEX]")?;
    let gid_index: u8 = std::env::args().nth(2).map(|g| g.parse()).transpose()?.unwrap_or(1);
    let list = DeviceList::new()?;
    let ctx = list.iter().find(|d| d.name() == dev).ok_or("no such device")?.open()?;
    let pd = ctx.alloc_pd()?;
    let mut buf = vec![0u8; 256];
    // SAFETY: `buf` outlives `mr` (declared before it) and is not resized.
    let mr = unsafe { pd.reg_mr(buf.as_mut_ptr() as usize, buf.len(), AccessFlags::LocalWrite)? };
    let cq = ctx.create_cq_builder().setup_cqe(16).build_ex()?;
    let gid = ctx.query_gid(1, gid_index.into())?;
    let make = || {
        let h = GenericCompletionQueue::from(Arc::clone(&cq));
        pd.create_qp_builder().setup_send_cq(h.clone()).setup_recv_cq(h).build_ex()
    };
    let (mut a, mut b) = (make()?, make()?);
    let (na, nb) = (a.qp_number(), b.qp_number());
    for (qp, dest) in [(&mut a, nb), (&mut b, na)] {
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(1)
            .setup_access_flags(AccessFlags::LocalWrite);
        qp.modify(&attr)?;
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(Mtu::Mtu1024)
            .setup_dest_qp_num(dest)
            .setup_rq_psn(0)
            .setup_max_dest_read_atomic(0)
            .setup_min_rnr_timer(12);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(1)
            .setup_port(1)
            .setup_grh_src_gid_index(gid_index)
            .setup_grh_dest_gid(&gid)
            .setup_grh_hop_limit(64);
        attr.setup_address_vector(&ah);
        qp.modify(&attr)?;
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(0)
            .setup_timeout(14)
            .setup_retry_cnt(6)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(0);
        qp.modify(&attr)?;
    }
    let base = buf.as_mut_ptr() as u64;
    for round in 0..10u8 {
        for (at, a_sends) in [(0u64, true), (128, false)] {
            let (from, to) = if a_sends { (&mut a, &mut b) } else { (&mut b, &mut a) };
            buf[at as usize..at as usize + 64].fill(round);
            let mut rg = to.start_post_recv();
            // SAFETY: the entry lies in `buf`, untouched until the completion.
            unsafe { rg.construct_wr(1).setup_sge(mr.lkey(), base + at + 64, 64) };
            rg.post()?;
            let mut sg = from.start_post_send();
            let h = sg.construct_wr(0, WorkRequestFlags::Signaled).setup_send();
            // SAFETY: as above.
            unsafe { h.setup_sge(mr.lkey(), base + at, 64) };
            sg.post()?;
            let mut got = 0;
            while got < 2 {
                if let Ok(mut poller) = cq.start_poll() {
                    for wc in poller.by_ref() {
                        if wc.status() != WorkCompletionStatus::Success as u32 {
                            return Err(format!("completion failed: status {}", wc.status()).into());
                        }
                        got += 1;
                    }
                }
            }
            if buf[at as usize + 64..at as usize + 128] != [round; 64] {
                return Err(format!("round {round}: wrong payload").into());
            }
        }
    }
    println!("pingpong ok: 10 rounds");
    Ok(())
}
