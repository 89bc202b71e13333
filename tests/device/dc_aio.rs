//! `wrap::aio::DcLocalEndpoint` on the device: over a DCI pool to two DC
//! targets where the device has DC (WRITEs to both targets in flight at
//! once, READs back, the bytes checked; a pool whose CQ has another handle
//! refused, naming the fix), else (rxe, siw) the pool's exact refusal and
//! the RC fallback, an RC `LocalEndpoint` per target, passing the same
//! data checks.

use std::alloc::Layout;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use rrddmma::ctrl::DctInfo;
use rrddmma::mlx5dv::dc::{Dct, DctOpts};
use rrddmma::prim::unsupported::{ALL, DC_NOT_MLX5};
use rrddmma::prim::{AccessFlags, Cq, Error, Mtu, Pd, Qp, QpType, RemoteAddr, Srq};
use rrddmma::wrap::aio::{DcLocalEndpoint, DcTarget, LocalEndpoint, LocalMr, MrPool};
use rrddmma::wrap::dc::{DciPool, DciPoolOpts};
use rrddmma::wrap::RegisteredMem;

use crate::common::{connect_pair, open_device, opts, panic_message};

const ROUNDS: usize = 8;

/// Round `r`'s bytes for target `t`.
fn pattern(t: u32, r: usize) -> Vec<u8> {
    (0..64).map(|i| (i as u8).wrapping_mul(3) ^ (t as u8).wrapping_mul(0x40) ^ r as u8).collect()
}

fn filled(mem: &MrPool, bytes: &[u8]) -> LocalMr {
    let mut b = mem.alloc(Layout::from_size_align(bytes.len(), 8).unwrap()).expect("a buffer");
    b.write(0, bytes);
    b
}

/// Both futures to their ends, polled in turn (both in flight at once).
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    (ra.unwrap(), rb.unwrap())
}

/// The checks both modes pass: `ROUNDS` WRITEs to target `t`'s memory at
/// `at(t, r)`, READ back through `read`, and the memory itself.
fn check_memory(remote: &[RegisteredMem; 2]) {
    for t in 0..2u32 {
        for r in 0..ROUNDS {
            let mut bytes = vec![0u8; 64];
            remote[t as usize].read(64 * r, &mut bytes);
            assert_eq!(bytes, pattern(t, r), "target {t} round {r}: the target's memory");
        }
    }
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn dc_local_endpoint_writes_and_reads_each_target_or_falls_back_to_rc() {
    let ctx = open_device();
    let pd = Pd::alloc(&ctx).unwrap();
    let remote = [RegisteredMem::new(&pd, 4096).unwrap(), RegisteredMem::new(&pd, 4096).unwrap()];
    let at = |t: u32, r: usize| -> RemoteAddr { remote[t as usize].remote().addr_at(64 * r) };
    let cq = Cq::create(&ctx, 64).unwrap();
    let pool = match DciPool::create(&pd, &cq, 2, &DciPoolOpts::default().dcis(2)) {
        Ok(pool) => pool,
        Err(e) => {
            // The refusal, exactly: the DCI's create, DC's row.
            match &e {
                Error::Unsupported { op: "mlx5dv_create_qp", feature, lack, .. } => {
                    assert_eq!(*feature, DC_NOT_MLX5.feature, "{e}");
                    assert!(ALL.iter().any(|r| r.feature == *feature), "not a row of prim::unsupported::ALL: {e}");
                    assert_eq!(lack.device, ctx.name(), "{e}");
                }
                other => panic!("DciPool::create off mlx5: expected Unsupported, got {other:?}"),
            }
            eprintln!("DC refused: {e}; the RC LocalEndpoint per target instead");
            rc_fallback(&pd, &remote);
            check_memory(&remote);
            return;
        }
    };
    // A second handle of the pool's CQ (`cq` itself, still held): refused.
    let msg = panic_message(|| DcLocalEndpoint::new(pool, Vec::new(), MrPool::new(&pd, 1 << 16).unwrap()));
    assert!(msg.contains("1 other handle(s)") && msg.contains("only poller"), "{msg}");
    let recv_cq = Cq::create(&ctx, 16).unwrap();
    let srq = Srq::builder(&pd).max_wr(4).build().unwrap();
    let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let dcts: Vec<Dct> = (0..2)
        .map(|k| Dct::create(&pd, &recv_cq, &srq, 0xd0 + k, &DctOpts::default().access(access)).unwrap())
        .collect();
    let port = 1;
    let gid_index = ctx.roce_v2_gid_index(port).ok();
    let gid = gid_index.map(|i| ctx.query_gid(port, u32::from(i)).unwrap()).unwrap_or_default();
    let lid = ctx.query_port(port).unwrap().lid();
    let sgid = gid_index.unwrap_or(0);
    let targets: Vec<DcTarget> = dcts
        .iter()
        .map(|d| {
            let info = DctInfo::new(d.dctn(), d.key(), lid, gid, sgid, port, Mtu::MTU_1024);
            DcTarget::from_info(&pd, &info, port, sgid).unwrap()
        })
        .collect();
    let pool = DciPool::create(&pd, &cq, 2, &DciPoolOpts::default().dcis(2)).unwrap();
    drop(cq);
    let ep = DcLocalEndpoint::new(pool, targets, MrPool::new(&pd, 1 << 16).unwrap());
    ep.block_on(async {
        for r in 0..ROUNDS {
            let (a, b) = (filled(ep.mem(), &pattern(0, r)), filled(ep.mem(), &pattern(1, r)));
            let (a, b) = join(ep.write(0, a, 0..64, at(0, r)), ep.write(1, b, 0..64, at(1, r))).await;
            a.unwrap_or_else(|e| panic!("round {r}: WRITE to target 0 over DC: {e}"));
            b.unwrap_or_else(|e| panic!("round {r}: WRITE to target 1 over DC: {e}"));
        }
        for t in 0..2u32 {
            for r in 0..ROUNDS {
                let dst = ep.alloc_local_mr(Layout::from_size_align(64, 8).unwrap()).unwrap();
                let got = ep
                    .read(t, dst, 0..64, at(t, r))
                    .await
                    .unwrap_or_else(|e| panic!("target {t} round {r}: READ: {e}"));
                let mut bytes = vec![0u8; 64];
                got.read(0, &mut bytes);
                assert_eq!(bytes, pattern(t, r), "target {t} round {r}: READ back over DC");
            }
        }
    });
    assert_eq!(ep.in_flight(), 0);
    check_memory(&remote);
    drop(ep);
}

/// The RC fallback: an RC `LocalEndpoint` per target (a loopback pair, the
/// endpoint's QP on a CQ of its own), the same WRITEs and READs.
fn rc_fallback(pd: &Pd, remote: &[RegisteredMem; 2]) {
    let ctx = pd.context();
    let o = opts(ctx);
    for t in 0..2u32 {
        let (cq, peer_cq) = (Cq::create(ctx, 64).unwrap(), Cq::create(ctx, 64).unwrap());
        let qa = Qp::builder(pd, QpType::RC, &cq, &cq).build().unwrap();
        let qb = Qp::builder(pd, QpType::RC, &peer_cq, &peer_cq).build().unwrap();
        connect_pair(&qa, &qb, &o, (0x100, 0x200));
        let ep = LocalEndpoint::new(qa, cq, MrPool::new(pd, 1 << 16).unwrap());
        let at = |_: u32, r: usize| -> RemoteAddr { remote[t as usize].remote().addr_at(64 * r) };
        ep.block_on(async {
            for r in 0..ROUNDS {
                let a = filled(ep.pool(), &pattern(t, r));
                ep.write(a, 0..64, at(t, r)).await.unwrap_or_else(|e| panic!("round {r}: WRITE over RC: {e}"));
            }
            for r in 0..ROUNDS {
                let dst = ep.alloc_local_mr(Layout::from_size_align(64, 8).unwrap()).unwrap();
                let got = ep.read(dst, 0..64, at(t, r)).await.unwrap();
                let mut bytes = vec![0u8; 64];
                got.read(0, &mut bytes);
                assert_eq!(bytes, pattern(t, r), "target {t} round {r}: READ back over RC");
            }
        });
        assert_eq!(ep.in_flight(), 0);
    }
}
