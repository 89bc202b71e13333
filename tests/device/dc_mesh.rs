//! `wrap::dc::DcMesh` on the device: over DC where the device has it (one
//! DCT and a DCI pool per rank), else (rxe, siw) the exact refusal of the
//! DC target and the RC fallback, which must pass the same data checks:
//! every rank WRITEs to every other and reads what each wrote to it.

use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use rrddmma::ctrl::{ClusterConfig, RankSource, Resolved, Session};
use rrddmma::mlx5dv::dc::{Dct, DctOpts};
use rrddmma::prim::{AccessFlags, Cq, Error, Pd, Srq, WcStatus};
use rrddmma::wrap::dc::{DcMesh, DcMeshOpts, DciPoolOpts, Outcome, PostError};
use rrddmma::wrap::RegisteredMem;

use crate::common::open_device;

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dc_mesh_writes_to_every_peer_or_falls_back_to_rc() {
    const N: u32 = 3;
    let coordinator = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let ranks: Vec<_> = (0..N)
        .map(|rank| {
            thread::spawn(move || {
                let mut cfg = ClusterConfig::default();
                cfg.op_timeout = Duration::from_secs(20);
                let place = Resolved { rank, size: N, coordinator, rank_source: RankSource::Config, device: None };
                let mut s = Session::join_as(&cfg, &place).unwrap();
                let ctx = open_device();
                let pd = Pd::alloc(&ctx).unwrap();
                let (send_cq, recv_cq) = (Cq::create(&ctx, 64).unwrap(), Cq::create(&ctx, 64).unwrap());
                let srq = Srq::builder(&pd).max_wr(8).build().unwrap();
                let mut mem = RegisteredMem::new(&pd, 4096).unwrap();
                let opts = DcMeshOpts::default()
                    .pool(DciPoolOpts::default().dcis(2))
                    .key(0xdc00 + u64::from(rank))
                    .access(AccessFlags::REMOTE_WRITE);
                // What this device says to a DC target of its own.
                let direct = Dct::create(&pd, &recv_cq, &srq, 1, &DctOpts::default()).map(|_| ());
                let mut mesh = DcMesh::connect(&mut s, &pd, &send_cq, &recv_cq, &srq, &opts).unwrap();
                match direct {
                    Ok(()) => {
                        assert!(mesh.is_dc(), "rank {rank}: DC works here, yet {mesh:?}");
                        assert_eq!(mesh.qps(), 3, "two DCIs and one DCT, whatever the rank count");
                        assert_eq!(mesh.refusal(), None);
                        let peers = mesh.peers().unwrap();
                        assert_eq!(peers.len(), N as usize);
                        assert!(peers.iter().enumerate().all(|(r, p)| p.has_dc && p.key == 0xdc00 + r as u64));
                    }
                    Err(e) => {
                        // The refusal, exactly: the DC target's create names
                        // the verb and why, and the mesh reports it verbatim.
                        assert!(matches!(e, Error::Unsupported { op: "mlx5dv_create_qp", .. }), "{e:?}");
                        let text = e.to_string();
                        eprintln!("rank {rank}: DC refused: {text}");
                        assert_eq!(mesh.refusal(), Some(text.as_str()));
                        assert!(!mesh.is_dc() && mesh.peers().is_none() && mesh.pool().is_none());
                        assert_eq!(mesh.qps(), N as usize - 1, "the RC fallback: one QP per peer");
                    }
                }
                let mrs = s.exchange_mrs(&mem.remote()).unwrap();
                for peer in (0..N).filter(|&p| p != rank) {
                    let msg = format!("{rank}->{peer} over {}", if mesh.is_dc() { "DC" } else { "RC" });
                    let at = 1024 + 64 * peer as usize;
                    mem.write(at, msg.as_bytes());
                    let sge = [mem.sge(at..at + msg.len())];
                    let wr = rrddmma::prim::SendWr::write(&sge, mrs[peer as usize].addr_at(64 * rank as usize));
                    let deadline = Instant::now() + Duration::from_secs(10);
                    loop {
                        // SAFETY: `mem` outlives the completion polled below.
                        match unsafe { mesh.post(peer, &wr, u64::from(peer)) } {
                            Ok(()) => break,
                            Err(PostError::Busy(b)) => assert!(Instant::now() < deadline, "still busy: {b}"),
                            Err(e) => panic!("rank {rank} to {peer}: {e}"),
                        }
                    }
                    let mut out = [None; 4];
                    let got = loop {
                        if mesh.poll(&mut out).unwrap() > 0 {
                            break out[0].unwrap();
                        }
                        assert!(Instant::now() < deadline, "rank {rank}: no completion from {peer}");
                    };
                    assert_eq!(
                        (got.target, got.wr_id, got.status, got.outcome),
                        (peer, u64::from(peer), WcStatus::SUCCESS, Outcome::Ok),
                        "rank {rank} to {peer}"
                    );
                }
                s.barrier().unwrap();
                let mode = if mesh.is_dc() { "DC" } else { "RC" };
                for from in (0..N).filter(|&f| f != rank) {
                    let want = format!("{from}->{rank} over {mode}");
                    let mut got = vec![0u8; want.len()];
                    mem.read(64 * from as usize, &mut got);
                    assert_eq!(String::from_utf8_lossy(&got), want, "rank {rank} from {from}");
                }
                s.barrier().unwrap();
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
}
