//! The rendezvous protocol as two state machines, free of I/O.
//!
//! A [`Coordinator`] (rank 0) and a [`Member`] (every other rank) are fed
//! received bytes, connection events and the current time; they hand back
//! frames to send ([`Output`]) and what happened ([`Event`]). Randomness
//! (nonces) is an input too, so every run of the machines is reproducible.
//! [`super::Session`] drives them over TCP; the tests drive them in memory.
//!
//! A session is a star: members connect to the coordinator, prove the shared
//! secret if one is set, and then take part in numbered rounds. In each round
//! every rank contributes bytes and every rank receives all contributions in
//! rank order (an all-gather; a barrier is an all-gather of nothing).

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::auth::{hello_mac, mac_eq, welcome_mac};
use super::error::{Error, RejectCode};
use super::wire::{encode_gathered, Decoder, Msg, HANDSHAKE_MAX, MAC_LEN, NONCE_LEN, VERSION};

/// How much longer than its deadline a member waits for a round's result, so
/// that the coordinator's timeout (which names the missing ranks) reaches it
/// before its own.
pub const MEMBER_GRACE: Duration = Duration::from_millis(250);

/// A connection, named by the driver.
pub type ConnId = u64;

/// Settings both machines share: [`Params::new`] with the number of ranks,
/// then the setters. `Debug` prints `<redacted>` for the secret.
///
/// ```
/// use rrddmma::ctrl::proto::Params;
/// let p = Params::new(4).secret(Some(b"experiment-42".to_vec())).max_frame(1 << 20);
/// # let _ = p;
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Params {
    pub(crate) size: u32,
    pub(crate) secret: Option<Vec<u8>>,
    pub(crate) max_frame: u32,
    pub(crate) handshake_timeout: Duration,
    pub(crate) max_pending: usize,
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Params")
            .field("size", &self.size)
            .field("secret", &self.secret.as_ref().map(|_| super::config::Redacted))
            .field("max_frame", &self.max_frame)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_pending", &self.max_pending)
            .finish()
    }
}

impl Params {
    /// Default bound of connections in the handshake at once.
    pub const DEFAULT_MAX_PENDING: usize = 64;

    /// Settings for a session of `size` ranks, coordinator included; the
    /// rest as each setter says.
    pub const fn new(size: u32) -> Params {
        Params {
            size,
            secret: None,
            max_frame: 16 << 20,
            handshake_timeout: Duration::from_secs(5),
            max_pending: Params::DEFAULT_MAX_PENDING,
        }
    }

    setters! {
        /// Number of ranks, coordinator included. Set by [`Params::new`].
        const size: u32;
        /// Shared secret. Default `None`: admits anyone who speaks the protocol.
        secret: Option<Vec<u8>>;
        /// Largest frame payload accepted or sent. Default 16 MiB (as
        /// [`super::ClusterConfig`]).
        const max_frame: u32;
        /// How long a new connection may take to complete its handshake.
        /// Default 5 s.
        const handshake_timeout: Duration;
        /// Most connections the coordinator keeps in the handshake at once.
        /// Default [`Params::DEFAULT_MAX_PENDING`]. When one more arrives,
        /// the coordinator lets one go to make room: the one that has waited
        /// longest from the source address with the most connections
        /// waiting (a [`RejectCode::Busy`] reject, then the connection
        /// closes; [`Error::HandshakeFull`] in [`Event::Dropped`]). So a
        /// flood of strangers cannot grow the coordinator's memory, a
        /// stranger's flood from one host evicts its own connections before
        /// a member's from another, and an honest member, which answers the
        /// challenge within a round trip, is not the one that has waited
        /// longest. A member let go retries within its join deadline
        /// ([`Member::can_retry`]).
        const max_pending: usize;
    }

    /// Largest frame a connection may send before its hello is accepted:
    /// the hello's own payload. Until then a stranger cannot make the
    /// coordinator buffer more than this, whatever `max_frame` says.
    pub const PRE_HELLO_FRAME: u32 = (8 + NONCE_LEN + MAC_LEN) as u32;

    /// Most bytes one rank may contribute to a round, so that the gathered
    /// frame of all ranks stays within `max_frame`.
    pub fn max_contribution(&self) -> usize {
        ((self.max_frame as usize).saturating_sub(8) / self.size.max(1) as usize).saturating_sub(4)
    }
}

/// What a coordinator asks its driver to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// Write these bytes to the connection.
    Send {
        /// Where.
        conn: ConnId,
        /// One or more whole frames.
        bytes: Vec<u8>,
    },
    /// Close the connection (after the sends queued before this).
    Close {
        /// Which.
        conn: ConnId,
    },
}

/// What happened, for the driver and the caller.
#[derive(Debug)]
pub enum Event {
    /// A rank completed its handshake (on a member: this rank was admitted).
    Joined {
        /// The rank.
        rank: u32,
    },
    /// A connection that never became a member was dropped, or a member
    /// left before every rank had been present (its rank is free again),
    /// and why. The session goes on: strangers and garbage do not hurt it.
    Dropped {
        /// The connection.
        conn: ConnId,
        /// Why.
        error: Error,
    },
    /// A round completed: every rank's contribution, in rank order.
    Gathered {
        /// The round.
        round: u32,
        /// Contributions.
        parts: Vec<Vec<u8>>,
    },
    /// The session failed; the machine does nothing more.
    Failed(Error),
}

#[derive(Debug)]
enum Peer {
    Handshaking { nonce: [u8; NONCE_LEN], deadline: Instant, since: Instant, source: Option<IpAddr> },
    Member { rank: u32 },
}

#[derive(Debug)]
struct Conn {
    dec: Decoder,
    peer: Peer,
}

/// Slot of a rank at the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Empty,
    Joined(ConnId),
    Lost,
}

/// A deadline and what it guards.
#[derive(Clone, Copy, Debug)]
struct Wait {
    what: &'static str,
    deadline: Instant,
    allowed: Duration,
}

/// Rank 0's machine: admits members and completes rounds.
#[derive(Debug)]
pub struct Coordinator {
    p: Params,
    conns: BTreeMap<ConnId, Conn>,
    slots: Vec<Slot>,
    round: u32,
    parts: Vec<Option<Vec<u8>>>,
    join_wait: Option<Wait>,
    round_wait: Option<Wait>,
    /// Every rank has been present at once: from here on a member that
    /// leaves is lost, not free to come back.
    assembled: bool,
    out: VecDeque<Output>,
    events: VecDeque<Event>,
    failed: bool,
}

impl Coordinator {
    /// A coordinator for `p.size` ranks.
    ///
    /// # Panics
    /// If `p.size` is 0.
    pub fn new(p: Params) -> Coordinator {
        assert!(p.size >= 1, "a cluster has at least one rank (size is 0)");
        let n = p.size as usize;
        let mut slots = vec![Slot::Empty; n];
        slots[0] = Slot::Joined(ConnId::MAX);
        Coordinator {
            p,
            conns: BTreeMap::new(),
            slots,
            round: 0,
            parts: vec![None; n],
            join_wait: None,
            round_wait: None,
            assembled: n == 1,
            out: VecDeque::new(),
            events: VecDeque::new(),
            failed: false,
        }
    }

    /// The settings this coordinator runs with.
    pub fn params(&self) -> &Params {
        &self.p
    }

    /// Whether every rank has joined.
    pub fn all_joined(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Joined(_)))
    }

    /// The ranks whose connection closed after every rank had joined, in
    /// rank order (a round in progress fails on them at once; between
    /// rounds they are only recorded, for the driver to report).
    pub fn lost_ranks(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| matches!(s, Slot::Lost)).map(|(r, _)| r as u32)
    }

    /// Ranks that have not joined (or were lost).
    pub fn missing(&self) -> Vec<u32> {
        (0..self.p.size).filter(|&r| !matches!(self.slots[r as usize], Slot::Joined(_))).collect()
    }

    /// Whether the session failed.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Sets the deadline by which every member must have joined.
    pub fn expect_joins(&mut self, now: Instant, allowed: Duration) {
        self.join_wait = Some(Wait { what: "waiting for members to join", deadline: now + allowed, allowed });
    }

    /// A new connection was accepted; `nonce` must be fresh and random.
    /// The same as [`Coordinator::accept_from`] with no source address (all
    /// such connections count as one source).
    pub fn accept(&mut self, conn: ConnId, nonce: [u8; NONCE_LEN], now: Instant) {
        self.accept_from(conn, None, nonce, now);
    }

    /// A new connection was accepted from `source`; `nonce` must be fresh
    /// and random. With [`Params::max_pending`] connections already in the
    /// handshake, one is let go first (see there).
    pub fn accept_from(&mut self, conn: ConnId, source: Option<IpAddr>, nonce: [u8; NONCE_LEN], now: Instant) {
        if self.failed {
            self.out.push_back(Output::Close { conn });
            return;
        }
        while self.pending() >= self.p.max_pending.max(1) {
            let Some(victim) = self.eviction_victim() else { break };
            let max = self.p.max_pending;
            self.reject(victim, RejectCode::Busy, max as u32, "too many connections in the handshake; try again");
            self.drop_conn(victim, Error::HandshakeFull { max_pending: max });
        }
        let deadline = now + self.p.handshake_timeout;
        let dec = Decoder::new(Params::PRE_HELLO_FRAME.min(self.p.max_frame));
        self.conns.insert(conn, Conn { dec, peer: Peer::Handshaking { nonce, deadline, since: now, source } });
        self.send(conn, &Msg::Challenge { nonce, auth: self.p.secret.is_some() });
    }

    /// Connections in the handshake.
    fn pending(&self) -> usize {
        self.conns.values().filter(|c| matches!(c.peer, Peer::Handshaking { .. })).count()
    }

    /// The connection to let go when the handshake is full: from the source
    /// with the most connections waiting, the one that has waited longest.
    fn eviction_victim(&self) -> Option<ConnId> {
        let mut per_source: BTreeMap<Option<IpAddr>, usize> = BTreeMap::new();
        for c in self.conns.values() {
            if let Peer::Handshaking { source, .. } = c.peer {
                *per_source.entry(source).or_default() += 1;
            }
        }
        let busiest = per_source.iter().max_by_key(|(_, n)| **n).map(|(s, _)| *s)?;
        self.conns
            .iter()
            .filter_map(|(id, c)| match c.peer {
                Peer::Handshaking { since, source, .. } if source == busiest => Some((since, *id)),
                _ => None,
            })
            .min()
            .map(|(_, id)| id)
    }

    /// Bytes arrived on a connection.
    pub fn receive(&mut self, conn: ConnId, data: &[u8], now: Instant) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        c.dec.feed(data);
        loop {
            let Some(c) = self.conns.get_mut(&conn) else { return };
            match c.dec.next_msg() {
                Ok(Some(msg)) => self.on_msg(conn, msg, now),
                Ok(None) => return,
                Err(e) => return self.on_decode_error(conn, e),
            }
            if self.failed {
                return;
            }
        }
    }

    /// A connection closed (end of stream or an I/O error).
    pub fn closed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else { return };
        match c.peer {
            Peer::Handshaking { .. } => self.events.push_back(Event::Dropped {
                conn,
                error: Error::Protocol("connection closed before the handshake completed".into()),
            }),
            // Before every rank has been present, a member that leaves
            // frees its rank: it may have given up on a slow handshake and
            // be connecting again.
            Peer::Member { rank } if !self.assembled => {
                self.slots[rank as usize] = Slot::Empty;
                self.events.push_back(Event::Dropped { conn, error: Error::PeerLost { rank } });
            }
            Peer::Member { rank } => {
                self.slots[rank as usize] = Slot::Lost;
                if self.round_in_progress() {
                    self.fail(Error::PeerLost { rank }, RejectCode::PeerLost, rank);
                }
            }
        }
    }

    /// Rank 0's own contribution to the current round, to be complete within `allowed`.
    pub fn contribute(&mut self, data: Vec<u8>, now: Instant, allowed: Duration) {
        if self.failed {
            return;
        }
        assert!(self.parts[0].is_none(), "rank 0 contributed twice to round {}: wait for its result", self.round);
        if data.len() > self.p.max_contribution() {
            self.events.push_back(Event::Failed(Error::TooLarge { len: data.len(), max: self.p.max_contribution() }));
            return;
        }
        self.parts[0] = Some(data);
        self.assembled = true;
        self.round_wait =
            Some(Wait { what: "waiting for the contributions to a round", deadline: now + allowed, allowed });
        if let Some(rank) = self.slots.iter().position(|s| *s == Slot::Lost) {
            let rank = rank as u32;
            return self.fail(Error::PeerLost { rank }, RejectCode::PeerLost, rank);
        }
        self.try_complete();
    }

    /// The time passed: enforces handshake, join and round deadlines.
    pub fn tick(&mut self, now: Instant) {
        if self.failed {
            return;
        }
        let expired: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.peer, Peer::Handshaking { deadline, .. } if deadline <= now))
            .map(|(id, _)| *id)
            .collect();
        for conn in expired {
            self.reject(conn, RejectCode::Timeout, 0, "handshake not completed in time");
            self.drop_conn(
                conn,
                Error::Timeout { op: "waiting for a handshake", after: self.p.handshake_timeout, missing: vec![] },
            );
        }
        if let Some(w) = self.join_wait {
            if self.all_joined() {
                self.join_wait = None;
            } else if w.deadline <= now {
                let missing = self.missing();
                return self.fail(Error::Timeout { op: w.what, after: w.allowed, missing }, RejectCode::Timeout, 0);
            }
        }
        if let Some(w) = self.round_wait {
            if w.deadline <= now {
                let missing = (0..self.p.size).filter(|&r| self.parts[r as usize].is_none()).collect();
                self.fail(Error::Timeout { op: w.what, after: w.allowed, missing }, RejectCode::Timeout, 0);
            }
        }
    }

    /// The earliest deadline the driver must wake up for.
    pub fn next_deadline(&self) -> Option<Instant> {
        let hs = self.conns.values().filter_map(|c| match c.peer {
            Peer::Handshaking { deadline, .. } => Some(deadline),
            Peer::Member { .. } => None,
        });
        hs.chain(self.join_wait.map(|w| w.deadline)).chain(self.round_wait.map(|w| w.deadline)).min()
    }

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The next thing that happened.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn round_in_progress(&self) -> bool {
        self.parts.iter().any(Option::is_some)
    }

    fn send(&mut self, conn: ConnId, msg: &Msg) {
        self.out.push_back(Output::Send { conn, bytes: msg.encode() });
    }

    fn reject(&mut self, conn: ConnId, code: RejectCode, detail: u32, reason: &str) {
        self.send(conn, &Msg::Reject { code, detail, reason: reason.into() });
    }

    fn drop_conn(&mut self, conn: ConnId, error: Error) {
        self.conns.remove(&conn);
        self.out.push_back(Output::Close { conn });
        self.events.push_back(Event::Dropped { conn, error });
    }

    /// Ends the session: tells every member why and closes everything.
    fn fail(&mut self, error: Error, code: RejectCode, detail: u32) {
        let reason = error.to_string();
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in conns {
            self.reject(conn, code, detail, &reason);
            self.out.push_back(Output::Close { conn });
        }
        self.conns.clear();
        self.failed = true;
        self.join_wait = None;
        self.round_wait = None;
        self.events.push_back(Event::Failed(error));
    }

    fn on_decode_error(&mut self, conn: ConnId, e: Error) {
        let rank = match self.conns.get(&conn).map(|c| &c.peer) {
            Some(Peer::Member { rank }) => Some(*rank),
            _ => None,
        };
        if let Error::VersionMismatch { .. } = e {
            self.reject(conn, RejectCode::Version, u32::from(VERSION), &e.to_string());
        }
        match rank {
            // A stranger or a confused client: drop it, keep serving the others.
            None => self.drop_conn(conn, e),
            Some(rank) => {
                self.conns.remove(&conn);
                self.out.push_back(Output::Close { conn });
                self.slots[rank as usize] = Slot::Lost;
                self.fail(Error::Protocol(format!("rank {rank} sent a bad frame: {e}")), RejectCode::Protocol, rank);
            }
        }
    }

    fn on_msg(&mut self, conn: ConnId, msg: Msg, now: Instant) {
        // Err: still handshaking (with the nonce we sent); Ok: a member's rank.
        let peer = match &self.conns[&conn].peer {
            Peer::Handshaking { nonce, .. } => Err(*nonce),
            Peer::Member { rank } => Ok(*rank),
        };
        match (peer, msg) {
            (Err(cnonce), Msg::Hello { rank, size, nonce, mac }) => {
                self.on_hello(conn, cnonce, rank, size, nonce, mac, now)
            }
            (Ok(rank), Msg::Contribute { round, data }) => self.on_contribution(rank, round, data),
            (Err(_), Msg::Reject { reason, .. }) => {
                self.drop_conn(conn, Error::Protocol(format!("a connecting peer gave up: {reason}")))
            }
            (Ok(rank), Msg::Reject { code, detail, reason }) => {
                self.conns.remove(&conn);
                self.out.push_back(Output::Close { conn });
                self.slots[rank as usize] = Slot::Lost;
                self.fail(Error::Rejected { by: rank, code, detail, reason }, RejectCode::PeerLost, rank);
            }
            (Err(_), other) => {
                let why = format!("expected a hello, got {:?}", kind_name(&other));
                self.reject(conn, RejectCode::Protocol, 0, &why);
                self.drop_conn(conn, Error::Protocol(why));
            }
            (Ok(rank), other) => {
                let why = format!("rank {rank} sent {} during a session", kind_name(&other));
                self.conns.remove(&conn);
                self.out.push_back(Output::Close { conn });
                self.slots[rank as usize] = Slot::Lost;
                self.fail(Error::Protocol(why), RejectCode::Protocol, rank);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_hello(
        &mut self,
        conn: ConnId,
        cnonce: [u8; NONCE_LEN],
        rank: u32,
        size: u32,
        mnonce: [u8; NONCE_LEN],
        mac: [u8; MAC_LEN],
        _now: Instant,
    ) {
        let refuse = |s: &mut Coordinator, code, detail, why: String| {
            s.reject(conn, code, detail, &why);
            s.drop_conn(conn, Error::Protocol(why));
        };
        if let Some(secret) = &self.p.secret {
            if !mac_eq(&mac, &hello_mac(secret, &cnonce, &mnonce, rank, size)) {
                let why = "wrong shared secret (or none) in hello".to_string();
                self.reject(conn, RejectCode::Auth, 0, &why);
                return self.drop_conn(conn, Error::AuthFailed("a peer did not prove the shared secret"));
            }
        }
        if size != self.p.size {
            let why = format!("cluster size {size} does not match the coordinator's {}", self.p.size);
            return refuse(self, RejectCode::Size, self.p.size, why);
        }
        if rank == 0 || rank >= self.p.size {
            let why = format!("rank {rank} is not a member rank of a cluster of {}", self.p.size);
            return refuse(self, RejectCode::Rank, rank, why);
        }
        if matches!(self.slots[rank as usize], Slot::Joined(_)) {
            let why = format!("rank {rank} has already joined");
            return refuse(self, RejectCode::Duplicate, rank, why);
        }
        if self.slots[rank as usize] == Slot::Lost {
            let why = format!("rank {rank} left this session; it cannot rejoin");
            return refuse(self, RejectCode::Duplicate, rank, why);
        }
        let mac = match &self.p.secret {
            Some(secret) => welcome_mac(secret, &mnonce, &cnonce),
            None => [0; MAC_LEN],
        };
        let c = self.conns.get_mut(&conn).expect("connection present");
        c.peer = Peer::Member { rank };
        c.dec.set_cap(self.p.max_frame);
        self.slots[rank as usize] = Slot::Joined(conn);
        self.send(conn, &Msg::Welcome { mac });
        self.events.push_back(Event::Joined { rank });
        if self.all_joined() {
            self.join_wait = None;
            self.assembled = true;
        }
    }

    fn on_contribution(&mut self, rank: u32, round: u32, data: Vec<u8>) {
        if round != self.round || self.parts[rank as usize].is_some() {
            let why = format!("rank {rank} contributed to round {round} while round {} is open", self.round);
            return self.fail(Error::Protocol(why), RejectCode::Protocol, rank);
        }
        if data.len() > self.p.max_contribution() {
            let why = format!("rank {rank} contributed {} bytes, above {}", data.len(), self.p.max_contribution());
            return self.fail(Error::Protocol(why), RejectCode::Protocol, rank);
        }
        self.parts[rank as usize] = Some(data);
        self.try_complete();
    }

    fn try_complete(&mut self) {
        if self.parts.iter().any(Option::is_none) {
            return;
        }
        let parts: Vec<Vec<u8>> = self.parts.iter_mut().map(|p| p.take().expect("all present")).collect();
        let round = self.round;
        let frame = encode_gathered(round, &parts);
        let members: Vec<ConnId> = self.slots[1..]
            .iter()
            .filter_map(|s| match s {
                Slot::Joined(c) => Some(*c),
                _ => None,
            })
            .collect();
        for conn in members {
            self.out.push_back(Output::Send { conn, bytes: frame.clone() });
        }
        self.round += 1;
        self.round_wait = None;
        self.events.push_back(Event::Gathered { round, parts });
    }
}

fn kind_name(m: &Msg) -> &'static str {
    match m {
        Msg::Challenge { .. } => "a challenge",
        Msg::Hello { .. } => "a hello",
        Msg::Welcome { .. } => "a welcome",
        Msg::Contribute { .. } => "a contribution",
        Msg::Gathered { .. } => "a gathered result",
        Msg::Reject { .. } => "a reject",
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MState {
    Connecting,
    AwaitChallenge,
    AwaitWelcome { coordinator: [u8; NONCE_LEN] },
    Ready,
    Failed,
}

/// A member rank's machine: one connection, to the coordinator.
#[derive(Debug)]
pub struct Member {
    p: Params,
    rank: u32,
    nonce: [u8; NONCE_LEN],
    dec: Decoder,
    state: MState,
    round: u32,
    wait: Option<Wait>,
    awaiting: bool,
    lost: bool,
    /// The failure happened before the welcome and may pass: a busy
    /// coordinator, a connection cut or a handshake that took too long.
    transient: bool,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
}

impl Member {
    /// A member for `rank`; `nonce` must be fresh and random.
    ///
    /// # Panics
    /// If `rank` is 0 or not below `p.size` (the caller resolves ranks first).
    pub fn new(p: Params, rank: u32, nonce: [u8; NONCE_LEN]) -> Member {
        assert!(rank != 0 && rank < p.size, "member rank {rank} must be in 1..{}", p.size);
        Member {
            // Until the coordinator welcomes this rank, only handshake frames are expected.
            dec: Decoder::new(p.max_frame.min(HANDSHAKE_MAX as u32)),
            p,
            rank,
            nonce,
            state: MState::Connecting,
            round: 0,
            wait: None,
            awaiting: false,
            lost: false,
            transient: false,
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// This member's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Whether the coordinator admitted this rank.
    pub fn joined(&self) -> bool {
        self.state == MState::Ready
    }

    /// Whether the session failed.
    pub fn failed(&self) -> bool {
        self.state == MState::Failed
    }

    /// Whether the connection to the coordinator closed (recorded between
    /// rounds; a round in progress fails on it at once).
    pub fn coordinator_lost(&self) -> bool {
        self.lost
    }

    /// Whether the failure may pass if this rank connects again with a new
    /// machine (and a fresh nonce): it came before the welcome, from a
    /// [`RejectCode::Busy`] reject, a connection closed or cut, or a
    /// handshake that did not finish within the `allowed` of
    /// [`Member::connected`]. Refusals that say something is wrong (secret,
    /// size, rank, version, a duplicate rank, the coordinator's own
    /// deadline) are not retried. The driver retries until its join
    /// deadline.
    pub fn can_retry(&self) -> bool {
        self.failed() && self.transient
    }

    /// The connection is up; the handshake must finish within `allowed`
    /// (on expiry the failure is one [`Member::can_retry`] allows).
    pub fn connected(&mut self, now: Instant, allowed: Duration) {
        if self.state == MState::Connecting {
            self.state = MState::AwaitChallenge;
            self.wait =
                Some(Wait { what: "waiting for the coordinator's handshake", deadline: now + allowed, allowed });
        }
    }

    /// Bytes arrived from the coordinator.
    pub fn receive(&mut self, data: &[u8]) {
        if self.failed() {
            return;
        }
        self.dec.feed(data);
        while !self.failed() {
            match self.dec.next_msg() {
                Ok(Some(m)) => self.on_msg(m),
                Ok(None) => return,
                Err(e) => return self.fail(e),
            }
        }
    }

    /// The connection closed.
    pub fn closed(&mut self) {
        self.lost = true;
        if self.handshaking() {
            self.fail_transient(Error::PeerLost { rank: 0 });
        } else if self.awaiting {
            self.fail(Error::PeerLost { rank: 0 });
        }
    }

    fn handshaking(&self) -> bool {
        matches!(self.state, MState::Connecting | MState::AwaitChallenge | MState::AwaitWelcome { .. })
    }

    /// This rank's contribution to the next round, whose result must come within `allowed`.
    ///
    /// # Panics
    /// If called again before the previous round's result, or before joining.
    pub fn contribute(&mut self, data: Vec<u8>, now: Instant, allowed: Duration) {
        if self.failed() {
            return;
        }
        assert!(self.joined(), "contribute before the member joined");
        assert!(!self.awaiting, "rank {} contributed twice to round {}: wait for its result", self.rank, self.round);
        if data.len() > self.p.max_contribution() {
            return self
                .events
                .push_back(Event::Failed(Error::TooLarge { len: data.len(), max: self.p.max_contribution() }));
        }
        if self.lost {
            return self.fail(Error::PeerLost { rank: 0 });
        }
        self.out.push_back(Msg::Contribute { round: self.round, data }.encode());
        self.awaiting = true;
        // The coordinator's verdict names the missing ranks: give it a moment to arrive.
        self.wait =
            Some(Wait { what: "waiting for a round's result", deadline: now + allowed + MEMBER_GRACE, allowed });
    }

    /// The time passed.
    pub fn tick(&mut self, now: Instant) {
        if let Some(w) = self.wait {
            if !self.failed() && w.deadline <= now {
                let e = Error::Timeout { op: w.what, after: w.allowed, missing: vec![] };
                if self.handshaking() {
                    self.fail_transient(e);
                } else {
                    self.fail(e);
                }
            }
        }
    }

    /// The earliest deadline the driver must wake up for.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.wait.map(|w| w.deadline)
    }

    /// Bytes to write to the coordinator.
    pub fn poll_output(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// The next thing that happened.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn fail_transient(&mut self, e: Error) {
        self.fail(e);
        self.transient = true;
    }

    fn fail(&mut self, e: Error) {
        self.transient = false;
        self.state = MState::Failed;
        self.wait = None;
        self.awaiting = false;
        self.events.push_back(Event::Failed(e));
    }

    fn on_msg(&mut self, m: Msg) {
        match (self.state, m) {
            (_, Msg::Reject { code: RejectCode::Busy, detail, reason }) if self.handshaking() => {
                self.fail_transient(Error::Rejected { by: 0, code: RejectCode::Busy, detail, reason });
            }
            (_, Msg::Reject { code, detail, reason }) => {
                self.fail(Error::Rejected { by: 0, code, detail, reason });
            }
            (MState::AwaitChallenge, Msg::Challenge { nonce, auth }) => {
                let mac = match (&self.p.secret, auth) {
                    (Some(s), true) => hello_mac(s, &nonce, &self.nonce, self.rank, self.p.size),
                    (None, false) => [0; MAC_LEN],
                    (None, true) => {
                        return self.fail(Error::AuthFailed(
                            "the coordinator requires a shared secret and none is configured here",
                        ))
                    }
                    (Some(_), false) => {
                        return self.fail(Error::AuthFailed(
                            "a shared secret is configured here but the coordinator does not check it",
                        ))
                    }
                };
                self.out.push_back(Msg::Hello { rank: self.rank, size: self.p.size, nonce: self.nonce, mac }.encode());
                self.state = MState::AwaitWelcome { coordinator: nonce };
            }
            (MState::AwaitWelcome { coordinator }, Msg::Welcome { mac }) => {
                if let Some(s) = &self.p.secret {
                    if !mac_eq(&mac, &welcome_mac(s, &self.nonce, &coordinator)) {
                        return self.fail(Error::AuthFailed("the coordinator did not prove the shared secret"));
                    }
                }
                self.state = MState::Ready;
                self.dec.set_cap(self.p.max_frame);
                self.wait = None;
                self.events.push_back(Event::Joined { rank: self.rank });
            }
            (MState::Ready, Msg::Gathered { round, parts }) if self.awaiting && round == self.round => {
                if parts.len() != self.p.size as usize {
                    return self.fail(Error::Protocol(format!(
                        "round {round} gathered {} parts for {} ranks",
                        parts.len(),
                        self.p.size
                    )));
                }
                self.awaiting = false;
                self.wait = None;
                self.round += 1;
                // The count is the cluster's size (checked above): one `Vec` per rank is ours to spend.
                self.events.push_back(Event::Gathered { round, parts: parts.to_vecs() });
            }
            (_, other) => {
                let why = format!("unexpected {} from the coordinator", kind_name(&other));
                self.fail(Error::Protocol(why));
            }
        }
    }
}
