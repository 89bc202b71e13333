//! Hostile-peer tests against the ctrl victim: a `ctrl` coordinator (rank
//! 0) and a member, attacked over TCP by a peer that writes raw frames.
//! Each attack runs while honest ranks join; the honest ranks must finish
//! their round, and the attacker must get a typed refusal (or be cut off)
//! within its deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use rrddmma::ctrl::wire::{Decoder, Msg, HEADER_LEN, MAC_LEN, NONCE_LEN};
use rrddmma::ctrl::{ClusterConfig, Error, RankSource, RejectCode, Resolved, Session};

use crate::table;

const VICTIM: &str = "ctrl coordinator (rank 0)";

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn cfg(secret: Option<&str>) -> ClusterConfig {
    let mut c = ClusterConfig::default();
    c.secret = secret.map(|s| s.as_bytes().to_vec());
    c.join_timeout = Duration::from_secs(15);
    c.op_timeout = Duration::from_secs(10);
    c.handshake_timeout = Duration::from_secs(1);
    c
}

fn place(rank: u32, size: u32, coordinator: SocketAddr) -> Resolved {
    Resolved { rank, size, coordinator, rank_source: RankSource::Config, device: None }
}

/// Connects to `addr`, retrying while the coordinator is not up.
fn connect(addr: SocketAddr) -> TcpStream {
    let t = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "the coordinator never listened on {addr}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Reads frames from `s` until one decodes (or the peer closes: `None`).
fn next_msg(s: &mut TcpStream) -> Option<Msg> {
    let mut d = Decoder::new(1 << 16);
    let mut b = [0u8; 4096];
    loop {
        if let Ok(Some(m)) = d.next_msg() {
            return Some(m);
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => d.feed(&b[..n]),
        }
    }
}

/// Whether the peer closed `s` within `within` (reads EOF or a reset,
/// after any frames it sent first).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let t = Instant::now();
    let mut b = [0u8; 4096];
    while t.elapsed() < within {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
    false
}

/// A cluster of `size` with secret `k`: rank 0 starts, `attack` runs
/// against it, then the honest members join and every rank gathers once.
/// Returns rank 0's refusal log and what `attack` returned.
fn under_attack<T: Send + 'static>(
    size: u32,
    attack: impl FnOnce(SocketAddr) -> T + Send + 'static,
) -> (Vec<String>, T) {
    under_attack_with(cfg(Some("k")), size, attack)
}

/// [`under_attack`] with the configuration `c` on every rank.
fn under_attack_with<T: Send + 'static>(
    c: ClusterConfig,
    size: u32,
    attack: impl FnOnce(SocketAddr) -> T + Send + 'static,
) -> (Vec<String>, T) {
    let addr = free_port();
    let coord = {
        let c = c.clone();
        thread::spawn(move || {
            let mut s = Session::join_as(&c, &place(0, size, addr))?;
            let all = s.all_gather(b"r0")?;
            Ok::<_, Error>((all, s.refused().map(String::from).collect::<Vec<_>>()))
        })
    };
    let out = attack(addr);
    let members: Vec<_> = (1..size)
        .map(|r| {
            let c = c.clone();
            thread::spawn(move || Session::join_as(&c, &place(r, size, addr))?.all_gather(format!("r{r}").as_bytes()))
        })
        .collect();
    let want: Vec<Vec<u8>> = (0..size).map(|r| format!("r{r}").into_bytes()).collect();
    for (r, m) in members.into_iter().enumerate() {
        let all = m.join().unwrap().unwrap_or_else(|e| panic!("honest rank {} failed under the attack: {e}", r + 1));
        assert_eq!(all, want);
    }
    let (all, refused) = coord.join().unwrap().expect("rank 0 completes under the attack");
    assert_eq!(all, want);
    (refused, out)
}

fn hello(rank: u32, size: u32, mac: [u8; MAC_LEN]) -> Vec<u8> {
    Msg::Hello { rank, size, nonce: [3; NONCE_LEN], mac }.encode()
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_oversized_and_undersized_frames_are_cut_off() {
    let (refused, closed) = under_attack(3, |addr| {
        // A header announcing 4 GiB, before any hello.
        let mut big = connect(addr);
        let mut f = Msg::Contribute { round: 0, data: vec![] }.encode();
        f[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        big.write_all(&f).unwrap();
        // A hello with 4 bytes of its 56.
        let mut short = connect(addr);
        let mut h = hello(1, 3, [0; MAC_LEN]);
        h[8..12].copy_from_slice(&4u32.to_be_bytes());
        h.truncate(HEADER_LEN + 4);
        short.write_all(&h).unwrap();
        // A frame shorter than its header, then nothing.
        let mut stub = connect(addr);
        stub.write_all(&f[..5]).unwrap();
        let t = Instant::now();
        let r = [&mut big, &mut short].map(|s| closed_within(s, Duration::from_secs(3)));
        (r, t.elapsed(), closed_within(&mut stub, Duration::from_secs(4)))
    });
    let ([big, short], fast, stub) = closed;
    assert!(big && short, "the oversize and the short frame were cut off (big {big}, short {short})");
    assert!(fast < Duration::from_secs(3), "cut off at once, not at a timeout: {fast:?}");
    assert!(stub, "a half header is cut off by the handshake timeout");
    let text = refused.join("\n");
    assert!(text.contains("4294967295 bytes exceeds"), "the oversize frame's refusal names its length: {text}");
    assert!(text.contains("malformed control frame: hello"), "the short hello's refusal says what was short: {text}");
    table::hostile(
        "frame announcing 4 GiB; hello cut to 4 bytes; half a header",
        VICTIM,
        "each cut off (typed reason in Session::refused, nothing buffered past the hello size); members joined",
    );
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_member_refuses_a_gathered_count_larger_than_its_frame() {
    // Played the other way round: a fake coordinator admits a member (no
    // secret) and answers its contribution with a frame that declares 2^32-1
    // parts in 8 bytes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let member = thread::spawn(move || {
        let t = Instant::now();
        let r = Session::join_as(&cfg(None), &place(1, 2, addr)).and_then(|mut s| s.all_gather(b"mine"));
        (r, t.elapsed())
    });
    let (mut s, _) = l.accept().unwrap();
    s.write_all(&Msg::Challenge { nonce: [1; NONCE_LEN], auth: false }.encode()).unwrap();
    assert!(matches!(next_msg(&mut s), Some(Msg::Hello { rank: 1, size: 2, .. })));
    s.write_all(&Msg::Welcome { mac: [0; MAC_LEN] }.encode()).unwrap();
    assert!(matches!(next_msg(&mut s), Some(Msg::Contribute { round: 0, .. })));
    let mut f = rrddmma::ctrl::wire::encode_gathered(0, [b"x"]);
    let count_at = HEADER_LEN + 4;
    f[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    s.write_all(&f).unwrap();
    let (r, took) = member.join().unwrap();
    let e = r.expect_err("a gathered frame whose count exceeds it is refused");
    assert!(matches!(&e, Error::Malformed(why) if why.contains("count")), "{e:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    table::hostile(
        "gathered frame declaring 2^32-1 parts in 8 bytes",
        "ctrl member",
        "typed Error::Malformed (count exceeds the frame) at once; nothing sized from the count",
    );
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_silence_and_disconnect_at_each_join_step_leave_the_members_served() {
    let (refused, ()) = under_attack(3, |addr| {
        // Connect and close at once.
        drop(connect(addr));
        // Take the challenge, then close.
        let mut a = connect(addr);
        assert!(matches!(next_msg(&mut a), Some(Msg::Challenge { auth: true, .. })));
        drop(a);
        // Half a hello, then close.
        let mut b = connect(addr);
        let _ = next_msg(&mut b);
        b.write_all(&hello(1, 3, [0; MAC_LEN])[..20]).unwrap();
        drop(b);
        // Connect and say nothing: the handshake timeout (1 s) lets it go.
        let mut silent = connect(addr);
        let t = Instant::now();
        let _ = next_msg(&mut silent);
        assert!(closed_within(&mut silent, Duration::from_secs(4)), "a silent connection is let go");
        assert!(t.elapsed() < Duration::from_secs(4), "within the handshake timeout: {:?}", t.elapsed());
    });
    assert!(refused.iter().any(|w| w.contains("handshake")), "{refused:?}");
    table::hostile(
        "silence after connect; close after connect, after the challenge, mid-hello",
        VICTIM,
        "silent one let go at the 1 s handshake timeout; the others dropped; members joined",
    );
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_forged_mac_wrong_secret_and_out_of_range_ranks_are_refused_with_their_code() {
    let (refused, codes) = under_attack(3, |addr| {
        let mut codes = Vec::new();
        // A forged MAC, then ranks out of range (which the MAC check
        // catches first without the secret: the attacker cannot prove it).
        for (rank, size) in [(1, 3), (3, 3), (0, 3), (u32::MAX, 3), (1, 99)] {
            let mut s = connect(addr);
            let _ = next_msg(&mut s);
            s.write_all(&hello(rank, size, [0xab; MAC_LEN])).unwrap();
            match next_msg(&mut s) {
                Some(Msg::Reject { code, .. }) => codes.push(code),
                other => panic!("rank {rank} size {size}: expected a reject, got {other:?}"),
            }
            assert!(closed_within(&mut s, Duration::from_secs(2)));
        }
        // A member configured with another secret: a typed refusal, fast.
        let t = Instant::now();
        let e = Session::join_as(&cfg(Some("not-k")), &place(1, 3, addr)).unwrap_err();
        assert!(matches!(e, Error::Rejected { by: 0, code: RejectCode::Auth, .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        codes
    });
    assert!(codes.iter().all(|c| *c == RejectCode::Auth), "{codes:?}");
    assert!(refused.iter().any(|w| w.contains("secret")), "{refused:?}");
    table::hostile(
        "forged hello MAC (ranks 1, 3, 0, 2^32-1; size 99); wrong shared secret",
        VICTIM,
        "RejectCode::Auth for each; Error::Rejected{Auth} at the member in < 3 s; members joined",
    );
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_out_of_range_ranks_without_a_secret_get_reject_rank() {
    let addr = free_port();
    let c = cfg(None);
    let coord = {
        let c = c.clone();
        thread::spawn(move || Session::join_as(&c, &place(0, 2, addr)).and_then(|mut s| s.all_gather(b"r0")))
    };
    let mut got = Vec::new();
    for (rank, size) in [(2, 2), (0, 2), (u32::MAX, 2), (1, 3)] {
        let mut s = connect(addr);
        let _ = next_msg(&mut s);
        s.write_all(&hello(rank, size, [0; MAC_LEN])).unwrap();
        match next_msg(&mut s) {
            Some(Msg::Reject { code, detail, .. }) => got.push((code, detail)),
            other => panic!("rank {rank} size {size}: expected a reject, got {other:?}"),
        }
    }
    let m = Session::join_as(&c, &place(1, 2, addr)).and_then(|mut s| s.all_gather(b"r1")).unwrap();
    assert_eq!(m, [b"r0".to_vec(), b"r1".to_vec()]);
    coord.join().unwrap().unwrap();
    assert_eq!(
        got,
        [(RejectCode::Rank, 2), (RejectCode::Rank, 0), (RejectCode::Rank, u32::MAX), (RejectCode::Size, 2)],
        "each refusal names the rank (or the coordinator's size)"
    );
    table::hostile(
        "hello with rank = size, rank 0, rank 2^32-1, wrong size (no secret)",
        VICTIM,
        "RejectCode::Rank with the rank (Size with the size); no slot taken; the member joined",
    );
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_stranger_flood_before_the_members_does_not_keep_them_out() {
    // Deterministic: 150 silent strangers hold their connections (more than
    // the coordinator's 64 handshake slots) before any member connects. The
    // handshake timeout is longer than the test, so every stranger let go
    // is let go for the bound (Busy), never for its silence: with the usual
    // 1 s on a slow machine, timeouts of the last strangers filled the
    // coordinator's list of the latest 16 refusals.
    let rss0 = table::rss_kib(std::process::id());
    let mut c = cfg(Some("k"));
    c.handshake_timeout = Duration::from_secs(30);
    let (refused, took) = under_attack_with(c, 3, |addr| {
        let held: Vec<TcpStream> = (0..150).map(|_| connect(addr)).collect();
        // Keep them open while the members join (returned, dropped at the end).
        let t = Instant::now();
        (held, t)
    });
    let (held, t) = took;
    let took = t.elapsed();
    drop(held);
    let busy = refused.iter().filter(|w| w.contains("max_pending") || w.contains("busy") || w.contains("Busy")).count();
    assert!(
        busy > 0 && busy == refused.len(),
        "strangers beyond the bound were let go with a typed reason: {refused:?}"
    );
    assert!(took < Duration::from_secs(8), "the members got in under the flood: {took:?}");
    let grown = table::rss_kib(std::process::id()).saturating_sub(rss0);
    assert!(grown < 64 << 10, "resident memory grew by {grown} KiB under 150 connections");
    table::hostile(
        "150 silent strangers connected before the members (64 handshake slots)",
        VICTIM,
        &format!(
            "oldest strangers let go with Busy; members joined in {:.1} s; RSS grew {grown} KiB",
            took.as_secs_f64()
        ),
    );
}

#[test]
#[ignore = "device test: runs in the hostile-peer suite (cargo xtask test)"]
fn ctrl_a_rank_taken_by_a_stranger_and_dropped_before_assembly_is_free_again() {
    // Without a secret anyone who speaks the protocol may take a free rank
    // (docs/ctrl.md, "Shared secret"); one who takes rank 1 and leaves before every rank is
    // present frees it for the real rank 1.
    let addr = free_port();
    let c = cfg(None);
    let coord = {
        let c = c.clone();
        thread::spawn(move || Session::join_as(&c, &place(0, 3, addr)).and_then(|mut s| s.all_gather(b"r0")))
    };
    let mut s = connect(addr);
    assert!(matches!(next_msg(&mut s), Some(Msg::Challenge { auth: false, .. })));
    s.write_all(&hello(1, 3, [0; MAC_LEN])).unwrap();
    assert!(matches!(next_msg(&mut s), Some(Msg::Welcome { .. })), "an open cluster admits the stranger as rank 1");
    drop(s);
    thread::sleep(Duration::from_millis(200));
    let members: Vec<_> = (1..3)
        .map(|r| {
            let c = c.clone();
            thread::spawn(move || Session::join_as(&c, &place(r, 3, addr))?.all_gather(format!("r{r}").as_bytes()))
        })
        .collect();
    for m in members {
        let all = m.join().unwrap().expect("the real ranks join after the stranger left");
        assert_eq!(all, [b"r0".to_vec(), b"r1".to_vec(), b"r2".to_vec()]);
    }
    coord.join().unwrap().unwrap();
    table::hostile(
        "stranger takes rank 1 of an open cluster (no secret), leaves before assembly",
        VICTIM,
        "rank 1 freed on the disconnect; the real rank 1 joined and the round completed",
    );
}
