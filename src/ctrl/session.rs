//! [`Session`]: the rendezvous machines of [`super::proto`] driven over TCP.
//!
//! Rank 0 listens on the coordinator address until every member has joined,
//! then closes the listener; members connect (retrying while the coordinator
//! is not up yet, or its handshake may pass on another try) and stay
//! connected. Every wait has a deadline. Sockets are blocking, and every frame
//! is written within one deadline for the whole frame; reads happen only
//! after `poll(2)` says a socket is readable, so one slow or hostile peer
//! cannot stall the others for long.

use std::collections::{BTreeMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use super::auth;
use super::config::{ClusterConfig, Resolved};
use super::error::{Error, Result};
use super::poll;
use super::proto::{ConnId, Coordinator, Event, Member, Output, Params};

/// Time every frame may take to write, on top of [`WRITE_RATE`]'s share.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Slowest rate at which a peer must take a frame (bytes per second): a
/// frame of `n` bytes must be written within `WRITE_TIMEOUT + n / WRITE_RATE`
/// (16 MiB: 6 s), or the peer is taken as gone. One deadline per frame, not
/// per write: a peer that reads a trickle at a time cannot hold a write.
const WRITE_RATE: u64 = 16 << 20;
/// How often a member retries connecting while the coordinator is not up,
/// and its first pause before connecting again after a handshake that may
/// pass (a busy coordinator, a cut connection); that pause doubles, with
/// jitter, up to [`RETRY_MAX`].
const RETRY: Duration = Duration::from_millis(50);
/// Longest pause between a member's handshake attempts.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// Most refused connections remembered for [`Session::refused`].
const REFUSED_KEPT: usize = 16;
/// When the coordinator first logs the ranks it still waits for, and how
/// often after that.
const REPORT_FIRST: Duration = Duration::from_secs(1);
const REPORT_EVERY: Duration = Duration::from_secs(5);

enum Role {
    Solo,
    Coordinator { m: Coordinator, conns: BTreeMap<ConnId, TcpStream>, next: ConnId },
    Member { m: Member, stream: Option<TcpStream> },
}

/// A joined cluster session: this rank's connection(s) to the others.
pub struct Session {
    rank: u32,
    size: u32,
    device: Option<String>,
    op_timeout: Duration,
    role: Role,
    failed: Option<String>,
    refused: VecDeque<String>,
    /// Which ranks have joined (for the log of who is still missing).
    joined: Vec<bool>,
    /// An epoll instance holding this rank's session connections once
    /// joined: readable when one of them is (a peer closed it, or sent its
    /// part of a collective early). [`Session::check_peers`] says which.
    watch: OwnedFd,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("rank", &self.rank).field("size", &self.size).finish_non_exhaustive()
    }
}

fn io(op: &'static str, addr: Option<SocketAddr>) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { op, addr, source }
}

impl Session {
    /// Resolves this process's rank from `cfg` and the environment (launcher
    /// variables, local addresses) and joins the cluster.
    pub fn join(cfg: &ClusterConfig) -> Result<Session> {
        let r = cfg.resolve(&|k| std::env::var(k).ok())?;
        Session::join_as(cfg, &r)
    }

    /// Joins the cluster in the place `r` gives.
    pub fn join_as(cfg: &ClusterConfig, r: &Resolved) -> Result<Session> {
        super::config::check_secret(cfg.secret.as_deref())?;
        let p = Params::new(r.size)
            .secret(cfg.secret.clone())
            .max_frame(cfg.max_frame)
            .handshake_timeout(cfg.handshake_timeout)
            .max_pending(Params::DEFAULT_MAX_PENDING.max(2 * r.size as usize));
        let mut s = Session {
            rank: r.rank,
            size: r.size,
            device: r.device.clone(),
            op_timeout: cfg.op_timeout,
            role: Role::Solo,
            failed: None,
            refused: VecDeque::new(),
            joined: (0..r.size).map(|k| k == r.rank).collect(),
            watch: epoll()?,
        };
        let start = Instant::now();
        event!(
            info,
            "joining a session of {} ranks as rank {} ({:?}), coordinator {}",
            r.size,
            r.rank,
            r.rank_source,
            r.coordinator
        );
        if r.size == 1 {
            return Ok(s);
        }
        if r.rank == 0 {
            let listener = TcpListener::bind(r.coordinator)
                .map_err(io("listen on the coordinator address", Some(r.coordinator)))?;
            listener.set_nonblocking(true).map_err(io("set the listener non-blocking", Some(r.coordinator)))?;
            let mut m = Coordinator::new(p);
            m.expect_joins(start, cfg.join_timeout);
            s.role = Role::Coordinator { m, conns: BTreeMap::new(), next: 0 };
            event!(info, "listening on {} for {} ranks", r.coordinator, r.size - 1);
            s.run(Some(&listener), |role| matches!(role, Role::Coordinator { m, .. } if m.all_joined()))?;
            event!(info, "all {} ranks joined in {:?}", r.size, start.elapsed());
            s.watch_connections()?;
            return Ok(s);
        }
        let deadline = start + cfg.join_timeout;
        let mut pause = RETRY;
        let mut attempt = 1u32;
        loop {
            let stream = connect_until(r.coordinator, deadline, cfg.join_timeout)?;
            let nonce = auth::nonce().map_err(io("getrandom", None))?;
            let mut m = Member::new(p.clone(), r.rank, nonce);
            // Each attempt gets the handshake timeout: a coordinator too busy
            // to answer is tried again, not waited for until the join deadline.
            let left = deadline.saturating_duration_since(Instant::now());
            m.connected(Instant::now(), left.min(cfg.handshake_timeout));
            s.role = Role::Member { m, stream: Some(stream) };
            let e = match s.run(None, |role| matches!(role, Role::Member { m, .. } if m.joined())) {
                Ok(_) => break,
                Err(e) => e,
            };
            if !matches!(&s.role, Role::Member { m, .. } if m.can_retry()) {
                return Err(e);
            }
            // Close this attempt's connection before the next one, so that
            // rank 0 frees anything it held for it first.
            s.role = Role::Solo;
            s.failed = None;
            let mut jitter = [0u8; 2];
            auth::os_random(&mut jitter).map_err(io("getrandom", None))?;
            let nap = pause + pause.mul_f64(f64::from(u16::from_ne_bytes(jitter)) / f64::from(u16::MAX) / 2.0);
            if Instant::now() + nap >= deadline {
                event!(warn, "rank {}: giving up joining after {attempt} attempts; the last: {e}", r.rank);
                return Err(Error::Timeout {
                    op: "waiting for the coordinator to admit this rank",
                    after: cfg.join_timeout,
                    missing: vec![0],
                });
            }
            event!(debug, "rank {}: join attempt {attempt} did not complete ({e}); retrying in {nap:?}", r.rank);
            std::thread::sleep(nap);
            pause = (pause * 2).min(RETRY_MAX);
            attempt += 1;
        }
        event!(info, "rank {} joined in {:?} ({attempt} attempts)", r.rank, start.elapsed());
        s.watch_connections()?;
        Ok(s)
    }

    /// Registers the session's connections with [`Session::watch`]'s epoll.
    fn watch_connections(&mut self) -> Result<()> {
        let fds: Vec<i32> = match &self.role {
            Role::Solo => Vec::new(),
            Role::Coordinator { conns, .. } => conns.values().map(AsRawFd::as_raw_fd).collect(),
            Role::Member { stream, .. } => stream.iter().map(AsRawFd::as_raw_fd).collect(),
        };
        for fd in fds {
            poll::watch(&self.watch, fd).map_err(io("watch a session connection (epoll_ctl)", None))?;
        }
        Ok(())
    }

    /// Whether every rank is still there, without waiting: reads what the
    /// session's connections hold (a peer's part of the next collective is
    /// kept for it) and reports a lost one as [`Error::PeerLost`] naming
    /// the rank. For a data-path loop between collectives, beside the
    /// descriptor [`Session::as_fd`] gives, which becomes readable when a
    /// connection does.
    ///
    /// What each rank sees, and how soon: rank 0 holds a connection to
    /// every other rank and sees any of them end (process killed or
    /// exited, connection reset) as soon as its kernel does, on the next
    /// call; another rank holds only its connection to rank 0, so it sees
    /// rank 0 end at once and another rank's end only at the next
    /// collective, which rank 0 then fails naming that rank. A host that
    /// vanishes without closing its connections (power, network cut) is
    /// seen when TCP gives up on it, or by a collective's deadline
    /// (`ClusterConfig::op_timeout`), whichever comes first.
    ///
    /// # Errors
    /// [`Error::PeerLost`] (the lowest lost rank; on other ranks than 0,
    /// rank 0), the error a collective failed with earlier, or
    /// [`Error::Io`] when reading the connections fails.
    pub fn check_peers(&mut self) -> Result<()> {
        if let Some(why) = &self.failed {
            return Err(Error::Protocol(format!("the session failed earlier: {why}")));
        }
        if let Err(e) = self.step(None, Duration::ZERO) {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        self.flush();
        while let Some(ev) = self.next_event() {
            match ev {
                Event::Failed(e) => {
                    self.failed = Some(e.to_string());
                    return Err(e);
                }
                Event::Dropped { conn, error } => {
                    if self.refused.len() == REFUSED_KEPT {
                        self.refused.pop_front();
                    }
                    self.refused.push_back(format!("connection {conn}: {error}"));
                }
                // No round is open between collectives: a rank's early part
                // stays in the machine, and nothing else completes here.
                Event::Joined { .. } | Event::Gathered { .. } => {}
            }
        }
        let lost = match &self.role {
            Role::Solo => None,
            Role::Coordinator { m, .. } => m.lost_ranks().next(),
            Role::Member { m, .. } => m.coordinator_lost().then_some(0),
        };
        match lost {
            Some(rank) => Err(Error::PeerLost { rank }),
            None => Ok(()),
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The deadline of a collective without one of its own
    /// (`ClusterConfig::op_timeout`).
    pub fn op_timeout(&self) -> Duration {
        self.op_timeout
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// This rank's RDMA device, if the configuration names one.
    pub fn device(&self) -> Option<&str> {
        self.device.as_deref()
    }

    /// Why connections that never became members were refused (the
    /// coordinator only; the latest few).
    pub fn refused(&self) -> impl Iterator<Item = &str> {
        self.refused.iter().map(String::as_str)
    }

    /// Every rank's `data`, in rank order, within the configured operation timeout.
    pub fn all_gather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.all_gather_within(data, self.op_timeout)
    }

    /// [`Session::all_gather`] with its own deadline. Rank 0 enforces it; the
    /// others wait up to [`super::proto::MEMBER_GRACE`] longer for rank 0's
    /// verdict, which names the ranks that did not contribute.
    pub fn all_gather_within(&mut self, data: &[u8], allowed: Duration) -> Result<Vec<Vec<u8>>> {
        if let Some(why) = &self.failed {
            return Err(Error::Protocol(format!("the session failed earlier: {why}")));
        }
        let now = Instant::now();
        match &mut self.role {
            Role::Solo => return Ok(vec![data.to_vec()]),
            Role::Coordinator { m, .. } => m.contribute(data.to_vec(), now, allowed),
            Role::Member { m, .. } => m.contribute(data.to_vec(), now, allowed),
        }
        match self.run(None, |_| false)? {
            Some(parts) => Ok(parts),
            None => unreachable!("run only returns without a result when `done` holds"),
        }
    }

    /// Waits until every rank has called `barrier`, within the session's
    /// operation timeout (`ClusterConfig::op_timeout`).
    pub fn barrier(&mut self) -> Result<()> {
        self.all_gather(&[]).map(drop)
    }

    /// [`Session::barrier`] with its own deadline: for a phase that may take
    /// longer (or must take less) than the operation timeout, such as waiting
    /// for every rank to finish a benchmark. A rank missing when it passes is
    /// named in the error ([`Error::Timeout`](super::Error)).
    pub fn barrier_within(&mut self, allowed: Duration) -> Result<()> {
        self.all_gather_within(&[], allowed).map(drop)
    }

    /// Runs the machine until `done` holds (`Ok(None)`), a round completes
    /// (`Ok(Some(parts))`) or the session fails.
    fn run(&mut self, listener: Option<&TcpListener>, done: impl Fn(&Role) -> bool) -> Result<Option<Vec<Vec<u8>>>> {
        let mut report = Instant::now() + REPORT_FIRST;
        loop {
            self.flush();
            while let Some(ev) = self.next_event() {
                match ev {
                    Event::Joined { rank } => {
                        if let Some(j) = self.joined.get_mut(rank as usize) {
                            *j = true;
                        }
                        if matches!(self.role, Role::Coordinator { .. }) {
                            let n = self.joined.iter().filter(|j| **j).count();
                            event!(debug, "rank {rank} joined ({n} of {} ranks present)", self.size);
                        }
                    }
                    Event::Dropped { conn, error } => {
                        event!(warn, "refused connection {conn}: {error}");
                        if self.refused.len() == REFUSED_KEPT {
                            self.refused.pop_front();
                        }
                        self.refused.push_back(format!("connection {conn}: {error}"));
                    }
                    Event::Gathered { parts, .. } => return Ok(Some(parts)),
                    Event::Failed(e) => {
                        if matches!(&self.role, Role::Member { m, .. } if m.can_retry()) {
                            event!(debug, "rank {}: this join attempt failed: {e}", self.rank);
                        } else {
                            event!(error, "rank {}: the session failed: {e}", self.rank);
                        }
                        self.flush();
                        self.failed = Some(e.to_string());
                        return Err(e);
                    }
                }
            }
            if done(&self.role) {
                return Ok(None);
            }
            if listener.is_some() && Instant::now() >= report {
                let missing: Vec<usize> =
                    self.joined.iter().enumerate().filter(|(_, j)| !**j).map(|(k, _)| k).collect();
                event!(info, "still waiting for ranks {missing:?} to join");
                report = Instant::now() + REPORT_EVERY;
            }
            if let Err(e) = self.step(listener, Duration::MAX) {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        }
    }

    fn next_event(&mut self) -> Option<Event> {
        match &mut self.role {
            Role::Solo => None,
            Role::Coordinator { m, .. } => m.poll_event(),
            Role::Member { m, .. } => m.poll_event(),
        }
    }

    /// Writes what the machine queued; a failed write counts as a closed connection.
    fn flush(&mut self) {
        match &mut self.role {
            Role::Solo => {}
            Role::Coordinator { m, conns, .. } => {
                while let Some(o) = m.poll_output() {
                    match o {
                        Output::Send { conn, bytes } => {
                            let broke = conns.get_mut(&conn).is_some_and(|s| write_frame(s, &bytes).is_err());
                            if broke {
                                conns.remove(&conn);
                                m.closed(conn);
                            }
                        }
                        Output::Close { conn } => {
                            if let Some(s) = conns.remove(&conn) {
                                let _ = s.shutdown(Shutdown::Write);
                            }
                        }
                    }
                }
            }
            Role::Member { m, stream, .. } => {
                while let Some(bytes) = m.poll_output() {
                    let broke = stream.as_mut().is_some_and(|s| write_frame(s, &bytes).is_err());
                    if broke {
                        *stream = None;
                        m.closed();
                    }
                }
            }
        }
    }

    /// Waits for input or the next deadline (at most `cap`), then feeds the machine.
    fn step(&mut self, listener: Option<&TcpListener>, cap: Duration) -> Result<()> {
        let now = Instant::now();
        let mut buf = [0u8; 64 << 10];
        match &mut self.role {
            Role::Solo => Ok(()),
            Role::Coordinator { m, conns, next } => {
                // While joining, wake often enough to log who is missing.
                let nap = if listener.is_some() { REPORT_FIRST } else { Duration::MAX };
                let wait = until(m.next_deadline(), now).min(nap).min(cap);
                let ids: Vec<ConnId> = conns.keys().copied().collect();
                let mut fds: Vec<_> = listener.iter().map(|l| poll::fd(*l)).collect();
                fds.extend(ids.iter().map(|id| poll::fd(&conns[id])));
                let ready = poll::readable(&fds, wait).map_err(io("poll", None))?;
                let (lready, cready) = ready.split_at(usize::from(listener.is_some()));
                for (id, _) in ids.iter().zip(cready).filter(|(_, r)| **r) {
                    let Some(s) = conns.get_mut(id) else { continue };
                    match s.read(&mut buf) {
                        Ok(0) => {
                            conns.remove(id);
                            m.closed(*id);
                        }
                        Ok(n) => m.receive(*id, &buf[..n], Instant::now()),
                        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                        Err(_) => {
                            conns.remove(id);
                            m.closed(*id);
                        }
                    }
                }
                // Members' bytes first, then new connections: a member that
                // answered its challenge is admitted before a flood of new
                // connections can make rank 0 let it go. At most half of
                // `max_pending` are accepted per wake-up, so each pending
                // connection has a whole wake-up to be read before it can be
                // the longest waiting (the rest wait in the kernel's backlog).
                if let (Some(l), [true]) = (listener, lready) {
                    for _ in 0..(m.params().max_pending / 2).max(1) {
                        match l.accept() {
                            Ok((stream, peer)) => {
                                let id = *next;
                                *next += 1;
                                let nonce = auth::nonce().map_err(io("getrandom", None))?;
                                if prepare(&stream).is_ok() {
                                    conns.insert(id, stream);
                                    m.accept_from(id, Some(peer.ip()), nonce, Instant::now());
                                }
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                            // A connection that died in the backlog: not ours to fail on.
                            Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                            Err(e) => return Err(io("accept", None)(e)),
                        }
                    }
                }
                m.tick(Instant::now());
                Ok(())
            }
            Role::Member { m, stream, .. } => {
                let wait = until(m.next_deadline(), now).min(cap);
                match stream {
                    Some(s) => {
                        let ready = poll::readable(&[poll::fd(s)], wait).map_err(io("poll", None))?;
                        if ready[0] {
                            match s.read(&mut buf) {
                                Ok(0) => {
                                    *stream = None;
                                    m.closed();
                                }
                                Ok(n) => m.receive(&buf[..n]),
                                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                                Err(_) => {
                                    *stream = None;
                                    m.closed();
                                }
                            }
                        }
                    }
                    None => std::thread::sleep(wait),
                }
                m.tick(Instant::now());
                Ok(())
            }
        }
    }
}

impl AsFd for Session {
    /// A descriptor that becomes readable when one of the session's
    /// connections does: a peer closed it (or sent its part of a collective
    /// early). Put it in a `poll`/`epoll` set beside a completion channel,
    /// and call [`Session::check_peers`] when it is readable. It stays
    /// readable while a connection holds unread bytes, which
    /// `check_peers` reads.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.watch.as_fd()
    }
}

/// A new epoll instance for [`Session::watch`].
fn epoll() -> Result<OwnedFd> {
    poll::epoll().map_err(io("create the session's watch (epoll_create1)", None))
}

/// Time left until `deadline` (a short nap when there is none).
fn until(deadline: Option<Instant>, now: Instant) -> Duration {
    deadline.map_or(Duration::from_millis(100), |d| d.saturating_duration_since(now))
}

/// Writes `bytes` whole within one deadline for the frame (see [`WRITE_RATE`]).
fn write_frame(s: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let allowed = WRITE_TIMEOUT + Duration::from_millis(bytes.len() as u64 * 1000 / WRITE_RATE);
    let deadline = Instant::now() + allowed;
    let mut done = 0;
    while done < bytes.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                format!("the peer took {done} of {} bytes in {allowed:?}", bytes.len()),
            ));
        }
        s.set_write_timeout(Some(left))?;
        match s.write(&bytes[done..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn prepare(s: &TcpStream) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))
}

/// Connects to the coordinator, retrying while it is not listening yet.
fn connect_until(addr: SocketAddr, deadline: Instant, allowed: Duration) -> Result<TcpStream> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout {
                op: "waiting for the coordinator to accept a connection",
                after: allowed,
                missing: vec![0],
            });
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => {
                prepare(&s).map_err(io("configure the connection", Some(addr)))?;
                return Ok(s);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionRefused
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::TimedOut
                        | ErrorKind::Interrupted
                        | ErrorKind::WouldBlock
                ) || e.raw_os_error() == Some(libc::EHOSTUNREACH)
                    || e.raw_os_error() == Some(libc::ENETUNREACH) =>
            {
                event!(debug, "coordinator {addr} not reachable yet ({e}); retrying");
                std::thread::sleep(RETRY.min(deadline.saturating_duration_since(Instant::now())));
            }
            Err(e) => return Err(io("connect to the coordinator", Some(addr))(e)),
        }
    }
}
