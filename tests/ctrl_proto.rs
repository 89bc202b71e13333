//! The rendezvous protocol's state machines, driven in memory: a
//! coordinator, members and hostile peers exchanging bytes with a simulated
//! clock. No sockets, no sleeps: every outcome is deterministic.

use std::time::{Duration, Instant};

use rrddmma::ctrl::proto::{ConnId, Coordinator, Event, Member, Output, Params};
use rrddmma::ctrl::wire::{decode_all, Msg, MAC_LEN, NONCE_LEN};
use rrddmma::ctrl::{Error, RejectCode};

/// Connections `params` lets wait in the handshake at once.
const MAX_PENDING: usize = 8;

fn params(size: u32, secret: Option<&str>) -> Params {
    Params::new(size)
        .secret(secret.map(|s| s.as_bytes().to_vec()))
        .max_frame(4096)
        .handshake_timeout(Duration::from_secs(2))
        .max_pending(MAX_PENDING)
}

/// A coordinator and its members connected by in-memory pipes.
struct Net {
    now: Instant,
    c: Coordinator,
    members: Vec<(ConnId, Member)>,
    /// Bytes the coordinator sent to connections that are not members (strangers).
    to_strangers: Vec<(ConnId, Vec<u8>)>,
    closed: Vec<ConnId>,
    c_events: Vec<Event>,
}

impl Net {
    fn new(size: u32, secret: Option<&str>) -> Net {
        let now = Instant::now();
        let mut c = Coordinator::new(params(size, secret));
        c.expect_joins(now, Duration::from_secs(10));
        Net { now, c, members: vec![], to_strangers: vec![], closed: vec![], c_events: vec![] }
    }

    fn add_member(&mut self, conn: ConnId, rank: u32, p: Params) {
        let mut m = Member::new(p, rank, [rank as u8; NONCE_LEN]);
        m.connected(self.now, Duration::from_secs(5));
        self.c.accept(conn, [0xc0 | conn as u8; NONCE_LEN], self.now);
        self.members.push((conn, m));
    }

    /// Moves bytes until nothing is in flight.
    fn settle(&mut self) {
        loop {
            let mut moved = false;
            while let Some(o) = self.c.poll_output() {
                moved = true;
                match o {
                    Output::Send { conn, bytes } => match self.members.iter_mut().find(|(c, _)| *c == conn) {
                        Some((_, m)) => m.receive(&bytes),
                        None => self.to_strangers.push((conn, bytes)),
                    },
                    Output::Close { conn } => {
                        self.closed.push(conn);
                        if let Some((_, m)) = self.members.iter_mut().find(|(c, _)| *c == conn) {
                            m.closed();
                        }
                    }
                }
            }
            for (conn, m) in &mut self.members {
                while let Some(b) = m.poll_output() {
                    moved = true;
                    if !self.closed.contains(conn) {
                        self.c.receive(*conn, &b, self.now);
                    }
                }
            }
            while let Some(e) = self.c.poll_event() {
                self.c_events.push(e);
            }
            if !moved {
                return;
            }
        }
    }

    fn member(&mut self, rank: u32) -> &mut Member {
        let i = self.members.iter().position(|(_, m)| m.rank() == rank).expect("member present");
        &mut self.members[i].1
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.c.tick(self.now);
        for (_, m) in &mut self.members {
            m.tick(self.now);
        }
        self.settle();
    }
}

fn events(m: &mut Member) -> Vec<Event> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

fn gathered(evs: &[Event]) -> Option<&Vec<Vec<u8>>> {
    evs.iter().find_map(|e| match e {
        Event::Gathered { parts, .. } => Some(parts),
        _ => None,
    })
}

fn failure(evs: &[Event]) -> Option<&Error> {
    evs.iter().find_map(|e| match e {
        Event::Failed(e) => Some(e),
        _ => None,
    })
}

#[test]
fn three_ranks_join_and_gather_twice() {
    for secret in [None, Some("s3cret")] {
        let mut n = Net::new(3, secret);
        n.add_member(10, 2, params(3, secret));
        n.add_member(11, 1, params(3, secret));
        n.settle();
        assert!(n.c.all_joined(), "{:?}", n.c_events);
        for round in 0u8..2 {
            let now = n.now;
            n.member(1).contribute(vec![1, round], now, Duration::from_secs(1));
            n.settle();
            assert!(gathered(&n.c_events).is_none(), "a round completes only with every rank");
            let now = n.now;
            n.member(2).contribute(vec![2, round], now, Duration::from_secs(1));
            n.c.contribute(vec![0, round], n.now, Duration::from_secs(1));
            n.settle();
            let want = vec![vec![0, round], vec![1, round], vec![2, round]];
            assert_eq!(gathered(&n.c_events), Some(&want));
            for r in [1, 2] {
                let evs = events(n.member(r));
                assert_eq!(gathered(&evs), Some(&want), "rank {r}");
            }
            n.c_events.clear();
        }
    }
}

#[test]
fn wrong_or_missing_secrets_are_rejected_and_the_coordinator_keeps_serving() {
    let mut n = Net::new(2, Some("right"));
    n.add_member(1, 1, params(2, Some("wrong")));
    n.settle();
    let evs = events(n.member(1));
    assert!(
        matches!(failure(&evs), Some(Error::Rejected { code: RejectCode::Auth, .. })),
        "member sees the refusal: {evs:?}"
    );
    assert!(n.closed.contains(&1));
    assert!(n.c_events.iter().any(|e| matches!(e, Event::Dropped { conn: 1, error: Error::AuthFailed(_) })));
    assert!(!n.c.failed());
    // A member with no secret is told the coordinator wants one.
    n.members.clear();
    n.add_member(2, 1, params(2, None));
    n.settle();
    let evs = events(n.member(1));
    assert!(matches!(failure(&evs), Some(Error::AuthFailed(_))), "{evs:?}");
    // The right secret still gets in.
    n.members.clear();
    n.add_member(3, 1, params(2, Some("right")));
    n.settle();
    assert!(n.c.all_joined());
    // A member with a secret refuses a coordinator that checks none.
    let mut open = Net::new(2, None);
    open.add_member(1, 1, params(2, Some("x")));
    open.settle();
    let evs = events(open.member(1));
    assert!(matches!(failure(&evs), Some(Error::AuthFailed(_))), "{evs:?}");
}

#[test]
fn a_coordinator_that_fakes_the_welcome_is_refused() {
    let p = params(2, Some("k"));
    let mut m = Member::new(p, 1, [1; NONCE_LEN]);
    m.connected(Instant::now(), Duration::from_secs(1));
    m.receive(&Msg::Challenge { nonce: [5; NONCE_LEN], auth: true }.encode());
    assert!(m.poll_output().is_some(), "hello sent");
    m.receive(&Msg::Welcome { mac: [0; MAC_LEN] }.encode());
    let evs = events(&mut m);
    assert!(matches!(failure(&evs), Some(Error::AuthFailed(_))), "{evs:?}");
}

#[test]
fn strangers_garbage_oversize_and_other_versions_are_dropped() {
    let mut n = Net::new(2, None);
    let now = n.now;
    // Garbage.
    n.c.accept(100, [0; NONCE_LEN], now);
    n.c.receive(100, b"GET / HTTP/1.1\r\n\r\n", now);
    // Oversize: a header announcing 1 GiB.
    n.c.accept(101, [0; NONCE_LEN], now);
    let mut f = Msg::Hello { rank: 1, size: 2, nonce: [0; NONCE_LEN], mac: [0; MAC_LEN] }.encode();
    f[8..12].copy_from_slice(&(1u32 << 30).to_be_bytes());
    n.c.receive(101, &f[..12], now);
    // Another protocol version.
    n.c.accept(102, [0; NONCE_LEN], now);
    let mut f = Msg::Hello { rank: 1, size: 2, nonce: [0; NONCE_LEN], mac: [0; MAC_LEN] }.encode();
    f[4] = 2;
    n.c.receive(102, &f, now);
    // Wrong size, out-of-range rank.
    n.c.accept(103, [0; NONCE_LEN], now);
    n.c.receive(103, &Msg::Hello { rank: 1, size: 5, nonce: [0; NONCE_LEN], mac: [0; MAC_LEN] }.encode(), now);
    n.c.accept(104, [0; NONCE_LEN], now);
    n.c.receive(104, &Msg::Hello { rank: 7, size: 2, nonce: [0; NONCE_LEN], mac: [0; MAC_LEN] }.encode(), now);
    // A message out of turn.
    n.c.accept(105, [0; NONCE_LEN], now);
    n.c.receive(105, &Msg::Contribute { round: 0, data: vec![] }.encode(), now);
    n.settle();
    for conn in 100..=105 {
        assert!(n.closed.contains(&conn), "connection {conn} closed");
    }
    let dropped = |conn: ConnId| {
        n.c_events.iter().find_map(|e| match e {
            Event::Dropped { conn: c, error } if *c == conn => Some(error),
            _ => None,
        })
    };
    assert!(matches!(dropped(100), Some(Error::BadMagic)));
    assert!(matches!(dropped(101), Some(Error::FrameTooLarge { len: 0x4000_0000, cap: 56 })));
    assert!(matches!(dropped(102), Some(Error::VersionMismatch { ours: 1, theirs: 2 })));
    assert!(matches!(dropped(103), Some(Error::Protocol(s)) if s.contains("size 5")));
    assert!(matches!(dropped(104), Some(Error::Protocol(s)) if s.contains("rank 7")));
    assert!(matches!(dropped(105), Some(Error::Protocol(_))));
    // The version mismatch is answered with a reject the peer can read.
    let sent: Vec<u8> = n.to_strangers.iter().filter(|(c, _)| *c == 102).flat_map(|(_, b)| b.clone()).collect();
    let (msgs, _) = decode_all(&sent, 4096);
    assert!(msgs.iter().any(|m| matches!(m, Msg::Reject { code: RejectCode::Version, detail: 1, .. })), "{msgs:?}");
    // And a real member still joins.
    n.add_member(1, 1, params(2, None));
    n.settle();
    assert!(n.c.all_joined() && !n.c.failed());
}

/// Before its hello is accepted, a connection may send no frame larger than
/// a hello (56 bytes), whatever `max_frame` allows members afterwards; a
/// frame just over that is refused from its header, before any payload is
/// buffered.
#[test]
fn a_strangers_frame_before_hello_is_capped_at_the_hello_size() {
    assert_eq!(Params::PRE_HELLO_FRAME, 56);
    let mut n = Net::new(2, None);
    let now = n.now;
    n.c.accept(200, [0; NONCE_LEN], now);
    let f = Msg::Contribute { round: 0, data: vec![0; 53] }.encode(); // payload 57
    n.c.receive(200, &f[..12], now);
    n.settle();
    let dropped: Vec<&Error> = n
        .c_events
        .iter()
        .filter_map(|e| match e {
            Event::Dropped { conn: 200, error } => Some(error),
            _ => None,
        })
        .collect();
    assert!(matches!(dropped[..], [Error::FrameTooLarge { len: 57, cap: 56 }]), "{dropped:?}");
    assert!(dropped[0].to_string().contains("57"), "{}", dropped[0]);
    // A member's frames, after its hello, may use the whole max_frame.
    n.add_member(1, 1, params(2, None));
    n.settle();
    assert!(n.c.all_joined());
    n.c.contribute(vec![1; 8], n.now, Duration::from_secs(1));
    n.members[0].1.contribute(vec![2; 1000], n.now, Duration::from_secs(1));
    n.settle();
    assert!(!n.c.failed(), "a 1 KiB contribution after the hello is within max_frame");
}

/// At most `max_pending` connections sit in the handshake; one more makes
/// the coordinator let the longest-waiting go (a `Busy` reject, then close),
/// and it still admits members afterwards.
#[test]
fn pending_connections_are_bounded() {
    let mut n = Net::new(2, None);
    let max = MAX_PENDING as u64;
    for conn in 0..max + 3 {
        let now = n.now;
        n.c.accept(1000 + conn, [0; NONCE_LEN], now);
        n.advance(Duration::from_millis(1));
    }
    n.settle();
    let evicted: Vec<u64> = n
        .c_events
        .iter()
        .filter_map(|e| match e {
            Event::Dropped { conn, error: Error::HandshakeFull { max_pending } } if *max_pending == MAX_PENDING => {
                Some(conn)
            }
            _ => None,
        })
        .copied()
        .collect();
    assert_eq!(evicted, vec![1000, 1001, 1002]);
    for conn in &evicted {
        assert!(n.closed.contains(conn));
        let sent: Vec<u8> = n.to_strangers.iter().filter(|(c, _)| c == conn).flat_map(|(_, b)| b.clone()).collect();
        let (msgs, _) = decode_all(&sent, 4096);
        assert!(matches!(msgs.last(), Some(Msg::Reject { code: RejectCode::Busy, .. })), "{msgs:?}");
    }
    // A member arriving now lets the oldest stranger go, and is admitted.
    n.add_member(1, 1, params(2, None));
    n.settle();
    assert!(n.c.all_joined() && !n.c.failed());
    assert!(n.closed.contains(&1003));
}

/// When the handshake is full, the connection let go comes from the source
/// with the most connections waiting: a flood from one host evicts its own
/// connections, never a member's from another host, however long it waited.
#[test]
fn a_flood_from_one_source_evicts_its_own_connections_first() {
    use std::net::{IpAddr, Ipv4Addr};
    let stranger = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 66)));
    let mut n = Net::new(3, None);
    // Rank 1's host connects first; its hello is not in yet.
    let now = n.now;
    n.c.accept_from(1, Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))), [1; NONCE_LEN], now);
    for conn in 0..3 * MAX_PENDING as u64 {
        n.advance(Duration::from_millis(1));
        let now = n.now;
        n.c.accept_from(1000 + conn, stranger, [0; NONCE_LEN], now);
    }
    n.settle();
    assert!(!n.closed.contains(&1), "the member's connection was let go for a stranger's");
    assert_eq!(n.closed.len(), 2 * MAX_PENDING + 1);
    // Its handshake then completes on the connection it kept.
    let mut m = Member::new(params(3, None), 1, [1; NONCE_LEN]);
    m.connected(n.now, Duration::from_secs(5));
    let challenge: Vec<u8> = n.to_strangers.iter().filter(|(c, _)| *c == 1).flat_map(|(_, b)| b.clone()).collect();
    m.receive(&challenge);
    let hello = m.poll_output().expect("a hello");
    let now = n.now;
    n.c.receive(1, &hello, now);
    n.settle();
    assert!(n.c_events.iter().any(|e| matches!(e, Event::Joined { rank: 1 })), "{:?}", n.c_events);
}

/// A member let go by a busy coordinator, or whose connection closed or
/// whose handshake took too long, may try again; one refused for a reason
/// that will not pass may not.
#[test]
fn a_member_retries_only_what_may_pass() {
    let p = || params(2, None);
    let busy = Msg::Reject { code: RejectCode::Busy, detail: 8, reason: "try again".into() }.encode();
    let auth = Msg::Reject { code: RejectCode::Auth, detail: 0, reason: "wrong secret".into() }.encode();
    let t0 = Instant::now();
    let mut m = Member::new(p(), 1, [1; NONCE_LEN]);
    m.connected(t0, Duration::from_secs(1));
    m.receive(&busy);
    assert!(m.failed() && m.can_retry());
    let mut m = Member::new(p(), 1, [1; NONCE_LEN]);
    m.connected(t0, Duration::from_secs(1));
    m.closed();
    assert!(m.failed() && m.can_retry());
    let mut m = Member::new(p(), 1, [1; NONCE_LEN]);
    m.connected(t0, Duration::from_secs(1));
    m.tick(t0 + Duration::from_secs(1));
    assert!(m.failed() && m.can_retry());
    let mut m = Member::new(p(), 1, [1; NONCE_LEN]);
    m.connected(t0, Duration::from_secs(1));
    m.receive(&auth);
    assert!(m.failed() && !m.can_retry());
    // Once admitted, nothing is retried.
    let mut n = Net::new(2, None);
    n.add_member(1, 1, p());
    n.settle();
    let m = n.member(1);
    m.receive(&busy);
    assert!(m.failed() && !m.can_retry());
}

/// A member that leaves before every rank has been present frees its rank
/// (it may be trying again); once all were present, leaving loses the rank.
#[test]
fn a_rank_that_leaves_during_the_join_may_come_back() {
    let mut n = Net::new(3, None);
    n.add_member(1, 1, params(3, None));
    n.settle();
    n.c.closed(1);
    n.members.retain(|(c, _)| *c != 1);
    n.add_member(2, 1, params(3, None));
    n.add_member(3, 2, params(3, None));
    n.settle();
    assert!(n.c.all_joined() && !n.c.failed(), "{:?}", n.c_events);
}

#[test]
fn a_duplicate_rank_is_refused() {
    let mut n = Net::new(3, None);
    n.add_member(1, 1, params(3, None));
    n.add_member(2, 1, params(3, None));
    n.settle();
    let dup = &mut n.members[1].1;
    let evs = events(dup);
    assert!(matches!(failure(&evs), Some(Error::Rejected { code: RejectCode::Duplicate, detail: 1, .. })), "{evs:?}");
    assert_eq!(n.c.missing(), vec![2]);
}

#[test]
fn a_member_vanishing_mid_round_fails_everyone_with_its_rank() {
    let mut n = Net::new(3, None);
    n.add_member(1, 1, params(3, None));
    n.add_member(2, 2, params(3, None));
    n.settle();
    let now = n.now;
    n.member(1).contribute(vec![1], now, Duration::from_secs(1));
    n.c.contribute(vec![0], n.now, Duration::from_secs(1));
    n.settle();
    n.c.closed(2);
    n.members.retain(|(c, _)| *c != 2);
    n.settle();
    assert!(matches!(failure(&n.c_events), Some(Error::PeerLost { rank: 2 })), "{:?}", n.c_events);
    let evs = events(n.member(1));
    assert!(matches!(failure(&evs), Some(Error::Rejected { code: RejectCode::PeerLost, detail: 2, .. })), "{evs:?}");
}

#[test]
fn a_member_leaving_between_rounds_fails_the_next_round_at_once() {
    let mut n = Net::new(2, None);
    n.add_member(1, 1, params(2, None));
    n.settle();
    n.c.closed(1);
    n.settle();
    assert!(failure(&n.c_events).is_none(), "idle departures are not failures yet");
    n.c.contribute(vec![], n.now, Duration::from_secs(1));
    n.settle();
    assert!(matches!(failure(&n.c_events), Some(Error::PeerLost { rank: 1 })));
}

#[test]
fn the_coordinator_vanishing_fails_the_member() {
    let mut n = Net::new(2, None);
    n.add_member(1, 1, params(2, None));
    n.settle();
    let m = n.member(1);
    m.contribute(vec![], Instant::now(), Duration::from_secs(1));
    m.closed();
    let evs = events(m);
    assert!(matches!(failure(&evs), Some(Error::PeerLost { rank: 0 })), "{evs:?}");
}

#[test]
fn deadlines_name_what_was_missing() {
    // A rank that never comes.
    let mut n = Net::new(3, None);
    n.add_member(1, 1, params(3, None));
    n.settle();
    assert_eq!(n.c.next_deadline(), Some(n.now + Duration::from_secs(10)));
    n.advance(Duration::from_secs(10));
    match failure(&n.c_events) {
        Some(Error::Timeout { missing, after, .. }) => {
            assert_eq!((missing.as_slice(), *after), (&[2][..], Duration::from_secs(10)));
        }
        other => panic!("expected a join timeout, got {other:?}"),
    }
    let evs = events(n.member(1));
    assert!(matches!(failure(&evs), Some(Error::Rejected { code: RejectCode::Timeout, .. })), "{evs:?}");

    // A rank that joins but never contributes.
    let mut n = Net::new(3, None);
    n.add_member(1, 1, params(3, None));
    n.add_member(2, 2, params(3, None));
    n.settle();
    let now = n.now;
    n.member(1).contribute(vec![], now, Duration::from_secs(3));
    n.c.contribute(vec![], n.now, Duration::from_secs(1));
    n.settle();
    n.advance(Duration::from_millis(999));
    assert!(failure(&n.c_events).is_none());
    n.advance(Duration::from_millis(1));
    assert!(matches!(failure(&n.c_events), Some(Error::Timeout { missing, .. }) if missing == &[2]));

    // A silent stranger loses its connection after the handshake timeout, and nothing else happens.
    let mut n = Net::new(2, None);
    n.c.accept(50, [0; NONCE_LEN], n.now);
    n.advance(Duration::from_secs(2));
    assert!(n.closed.contains(&50));
    assert!(!n.c.failed());
    // A member that never hears back times out too.
    let mut m = Member::new(params(2, None), 1, [1; NONCE_LEN]);
    let t0 = Instant::now();
    m.connected(t0, Duration::from_millis(500));
    m.tick(t0 + Duration::from_millis(500));
    assert!(matches!(failure(&events(&mut m)), Some(Error::Timeout { .. })));
}

#[test]
fn contributions_above_the_cap_are_refused_before_sending() {
    let mut n = Net::new(2, None);
    n.add_member(1, 1, params(2, None));
    n.settle();
    let max = params(2, None).max_contribution();
    let m = n.member(1);
    m.contribute(vec![0; max + 1], Instant::now(), Duration::from_secs(1));
    assert!(m.poll_output().is_none());
    assert!(matches!(failure(&events(m)), Some(Error::TooLarge { .. })));
}

#[test]
fn the_fuzz_corpus_seeds_decode_as_named() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wire_decode");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let ok = |name: &str| {
        let (msgs, err) = decode_all(&read(name), 1 << 16);
        assert!(err.is_none(), "{name}: {err:?}");
        msgs
    };
    assert!(matches!(ok("hello")[..], [Msg::Hello { rank: 1, size: 3, .. }]));
    assert!(matches!(ok("gathered")[..], [Msg::Gathered { round: 0, ref parts }] if parts.len() == 3));
    assert!(matches!(ok("reject_v9")[..], [Msg::Reject { code: RejectCode::Version, detail: 9, .. }]));
    assert_eq!(ok("two_frames").len(), 2);
    for (name, want) in
        [("garbage", "bad magic"), ("oversize", "exceeds the 65536-byte limit"), ("huge_count", "exceeds the frame")]
    {
        let err = decode_all(&read(name), 1 << 16).1.unwrap_or_else(|| panic!("{name} must not decode"));
        assert!(err.to_string().contains(want), "{name}: {err}");
    }
}

/// A member caps the coordinator's frames at the handshake's largest frame
/// (a reject with the longest reason) until it is welcomed; after the
/// welcome, a gathered frame may use all of `max_frame`.
#[test]
fn a_member_caps_frames_before_the_welcome() {
    use rrddmma::ctrl::wire::{HANDSHAKE_MAX, HEADER_LEN};
    let mut m = Member::new(params(2, None), 1, [1; NONCE_LEN]);
    m.connected(Instant::now(), Duration::from_secs(1));
    let mut f = Msg::Challenge { nonce: [5; NONCE_LEN], auth: false }.encode();
    f[8..12].copy_from_slice(&(HANDSHAKE_MAX as u32 + 1).to_be_bytes());
    m.receive(&f[..HEADER_LEN]);
    let evs = events(&mut m);
    assert!(matches!(failure(&evs), Some(Error::FrameTooLarge { cap, .. }) if *cap == HANDSHAKE_MAX as u32), "{evs:?}");

    // Welcomed, the same member takes a round's result larger than the handshake cap.
    let mut n = Net::new(2, None);
    n.add_member(1, 1, params(2, None));
    n.settle();
    assert!(n.member(1).joined());
    let big = vec![3u8; 2 * HANDSHAKE_MAX];
    let now = n.now;
    n.member(1).contribute(big.clone(), now, Duration::from_secs(1));
    n.c.contribute(vec![], now, Duration::from_secs(1));
    n.settle();
    let evs = events(n.member(1));
    assert_eq!(gathered(&evs).expect("round completes"), &vec![vec![], big]);
}
