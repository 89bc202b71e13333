//! A peer killed mid-run (SIGKILL: no goodbye) is reported to the survivor
//! by the control-plane session at once and by the RC keepalive within its
//! bound, each as a typed error. The peer is this test binary run again as
//! `liveness_child_peer`.

use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use rrddmma::ctrl::{ClusterConfig, Error as CtrlError, QpInfo, RankSource, Resolved, Session};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Pd, Qp, QpType, Wc, WcStatus};
use rrddmma::wrap::{LostCause, RcKeepalive};

use crate::common::open_device;

/// Short retries, so that a lost peer fails a probe in well under a
/// second; the QPs grant REMOTE_WRITE, which the probe needs.
fn opts() -> ConnectOpts {
    ConnectOpts::default().timeout(12).retry_cnt(3).access(AccessFlags::REMOTE_WRITE)
}

fn cfg() -> ClusterConfig {
    let mut c = ClusterConfig::default();
    c.join_timeout = Duration::from_secs(60);
    c.op_timeout = Duration::from_secs(60);
    c
}

/// One rank's side: its RC QP, connected to the other rank's through the session.
fn connect(ctx: &Context, s: &mut Session) -> (Pd, Cq, Qp) {
    let pd = Pd::alloc(ctx).unwrap();
    let cq = Cq::create(ctx, 16).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
    let gid_index = ctx.roce_v2_gid_index(1).unwrap();
    let mtu = ctx.query_port(1).unwrap().active_mtu();
    let me = QpInfo::new(&qp.endpoint(1, gid_index, 100 + s.rank()).unwrap(), gid_index, 1, mtu);
    let all = s.all_gather(&me.to_bytes()).unwrap();
    let theirs: &[u8; QpInfo::WIRE_LEN] = all[1 - s.rank() as usize].as_slice().try_into().unwrap();
    let peer = QpInfo::from_bytes(theirs).unwrap();
    qp.connect(&peer.endpoint(), me.psn, &opts()).unwrap();
    s.barrier().unwrap();
    (pd, cq, qp)
}

/// The peer: joins as rank 1, connects its QP, then waits to be killed.
/// Run alone (no `RRDDMMA_LIVENESS_COORD`) it does nothing.
#[test]
#[ignore = "the child process of a liveness test; does nothing unless that test starts it"]
fn liveness_child_peer() {
    let Ok(addr) = std::env::var("RRDDMMA_LIVENESS_COORD") else { return };
    let place = Resolved {
        rank: 1,
        size: 2,
        coordinator: addr.parse().unwrap(),
        rank_source: RankSource::Config,
        device: None,
    };
    let mut s = Session::join_as(&cfg(), &place).unwrap();
    let ctx = open_device();
    let _side = connect(&ctx, &mut s);
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn liveness_killed_peer_is_reported_by_the_session_and_the_rc_keepalive() {
    let coord = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "liveness::liveness_child_peer", "--ignored", "--test-threads=1"])
        .env("RRDDMMA_LIVENESS_COORD", coord.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let place = Resolved { rank: 0, size: 2, coordinator: coord, rank_source: RankSource::Config, device: None };
    let mut s = match Session::join_as(&cfg(), &place) {
        Ok(s) => s,
        Err(e) => {
            // Say why the peer did not join: its exit and its own words.
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "rank 0 could not join ({e}); the peer process (rank 1) ended {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let ctx = open_device();
    let (_pd, cq, qp) = connect(&ctx, &mut s);
    let mut ka = RcKeepalive::new(&qp, Duration::from_millis(100), &opts());
    let mut wcs = [Wc::default(); 8];
    // While the peer lives, probes are answered.
    let mut answered = 0;
    let alive_until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < alive_until {
        ka.tick(&qp).unwrap();
        let n = cq.poll(&mut wcs).unwrap();
        for wc in &wcs[..n] {
            ka.on_completion(wc).expect("only probes on this QP").unwrap();
            answered += 1;
        }
    }
    assert!(answered >= 2, "{answered} probes answered in 1 s");
    assert!(s.check_peers().is_ok());

    child.kill().unwrap();
    let killed = Instant::now();
    child.wait().unwrap();
    // The session: its descriptor turns readable and the query names rank 1.
    let mut p = libc::pollfd { fd: s.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the call.
    assert_eq!(unsafe { libc::poll(&mut p, 1, 5000) }, 1, "the session's watch became readable");
    let e = s.check_peers().unwrap_err();
    let session_took = killed.elapsed();
    assert!(matches!(e, CtrlError::PeerLost { rank: 1 }), "{e:?}");
    assert!(session_took < Duration::from_secs(1), "session reported after {session_took:?}");

    // The keepalive: a probe runs out of retries.
    let lost = loop {
        assert!(killed.elapsed() < Duration::from_secs(30), "no loss reported in 30 s");
        if let Err(l) = ka.tick(&qp) {
            break l;
        }
        let n = cq.poll(&mut wcs).unwrap();
        if let Some(Err(l)) = wcs[..n].iter().find_map(|wc| ka.on_completion(wc)).filter(Result::is_err) {
            break l;
        }
    };
    let ka_took = killed.elapsed();
    eprintln!("liveness: session {session_took:?}, RC keepalive {ka_took:?} (bound {:?}) after the kill", ka.bound());
    assert!(matches!(&lost.cause, LostCause::Failed(w) if w.status == WcStatus::RETRY_EXC_ERR), "{lost:?}");
    assert!(
        lost.to_string().contains("keepalive probe failed") && lost.to_string().contains("RETRY_EXC_ERR"),
        "{lost}"
    );
    // The emulated device's timers run late: the bound plus 2 s.
    assert!(ka_took < ka.bound() + Duration::from_secs(2), "keepalive reported after {ka_took:?}");
    // Asked again, the same loss.
    assert_eq!(ka.tick(&qp).unwrap_err(), lost);
}
