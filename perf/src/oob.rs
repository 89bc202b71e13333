//! The out-of-band exchange over TCP, in perftest's wire format (as of
//! perftest 4.5-0.17, which reports itself as version 6.06), so that either
//! side can be `rrddmma-perf` or a perftest binary.
//!
//! The client connects and always writes first; the server reads first.
//! Sequence: version strings (16 bytes), then, when the peer's version is at
//! least 5.32, cycle-buffer and cache-line sizes (4-byte big-endian each),
//! then, from 5.1 on, the port MTU as a 2-byte decimal string
//! (`--dont_xchg_versions` skips these three), then one QP message per QP
//! before and after the connection, one more after it, and at the end of a
//! test the handshakes described in `run`.
//!
//! The peer is not trusted: the sizes it announces are bounded
//! ([`MAX_CYCLE_BUFFER`], [`MAX_CACHE_LINE`]) before anything is sized from
//! them, and every read of the exchange has a deadline ([`Limits`]), so a
//! silent peer ends the run with a message naming the step.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrddmma::prim::cm::CmEventType;
use rrddmma::prim::{RecvWr, SendWr, Wc};
use rrddmma::wrap::{connect_rc_cm, CmConn, CmListener, CmOpts, RegisteredMem};

/// The largest cycle buffer a peer may announce, in bytes: 2 MiB (a huge
/// page). perftest announces its page size (4 KiB; 16 or 64 KiB on some
/// arm64 and ppc64 kernels); the registered buffer holds two regions per QP
/// of at least this size, so a larger value is refused rather than
/// registered.
pub const MAX_CYCLE_BUFFER: u32 = 2 << 20;
/// The largest cache line a peer may announce, in bytes (real CPUs have 64
/// or 128; every region and offset is rounded up to it).
pub const MAX_CACHE_LINE: u32 = 4096;

/// Checks a size the peer announced in the preamble: a power of two no
/// larger than `max` (perftest's are page and cache-line sizes).
pub fn check_peer_size(what: &str, v: u32, max: u32) -> Result<u32, String> {
    if v.is_power_of_two() && v <= max {
        return Ok(v);
    }
    Err(format!(
        "out-of-band exchange: the peer announced a {what} of {v} bytes ({v:#x}), but this tool takes a power of two \
         of at most {max} bytes (perftest sends its page and cache-line sizes); refusing to size the registered \
         buffer from it (is the peer a perftest-compatible tool of a matching version?)"
    ))
}

/// The environment variable giving the limit of one exchange step, in seconds.
pub const XCHG_SECS_VAR: &str = "RRDDMMA_PERF_XCHG_SECS";
/// The environment variable giving the limit of a wait that spans the
/// peer's measured run, in seconds.
pub const RUN_SECS_VAR: &str = "RRDDMMA_PERF_RUN_SECS";

/// How long a read of the exchange may wait for the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// One step of the set-up (versions, sizes, MTU, QP messages):
    /// [`XCHG_SECS_VAR`], default 60 s.
    pub step: Duration,
    /// A wait after the set-up, during which the peer may still be running
    /// its measurement (a passive server waits for the client's whole run):
    /// [`RUN_SECS_VAR`], default one hour.
    pub run: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { step: Duration::from_secs(60), run: Duration::from_secs(3600) }
    }
}

/// Longest rdma_cm handshake (accept to `ESTABLISHED`) the `-R` server
/// waits for before it drops the connection and takes the next request.
pub const CM_HANDSHAKE: Duration = Duration::from_secs(10);

impl Limits {
    /// How long one rdma_cm handshake of the exchange may take: the step
    /// limit, at most [`CM_HANDSHAKE`].
    pub fn handshake(&self) -> Duration {
        self.step.min(CM_HANDSHAKE)
    }

    /// The limits from [`XCHG_SECS_VAR`] and [`RUN_SECS_VAR`] (whole seconds,
    /// at least 1); unset variables keep the defaults.
    pub fn from_env() -> Result<Limits, String> {
        let get = |name: &str| std::env::var(name).ok();
        Limits::parse(get(XCHG_SECS_VAR).as_deref(), get(RUN_SECS_VAR).as_deref())
    }

    /// [`Limits::from_env`] over the variables' values.
    pub fn parse(step: Option<&str>, run: Option<&str>) -> Result<Limits, String> {
        let secs = |name: &str, v: Option<&str>, default: Duration| match v {
            None => Ok(default),
            Some(t) => match t.trim().parse::<u64>() {
                Ok(n) if n >= 1 => Ok(Duration::from_secs(n)),
                _ => Err(format!("{name}={t:?}: give a whole number of seconds, at least 1")),
            },
        };
        let d = Limits::default();
        Ok(Limits { step: secs(XCHG_SECS_VAR, step, d.step)?, run: secs(RUN_SECS_VAR, run, d.run)? })
    }
}

/// The version this tool's exchange corresponds to.
pub const VERSION: &str = "6.06";
/// perftest's version buffer size.
const VERSION_LEN: usize = 16;
/// QP message without GID: `%04x:%04x:%06x:%06x:%08x:%016llx:%08x` and a NUL.
pub const KEY_LEN: usize = 59;
/// QP message with GID (16 `%02x:` bytes before the SRQ number) and a NUL.
pub const KEY_LEN_GID: usize = 108;
/// QP message over rdma_cm (`-R`): perftest's `struct pingpong_dest` in
/// binary, integers big-endian (see [`Dest::encode_cm`]).
pub const KEY_LEN_CM: usize = 56;

/// What a peer needs about one of our QPs (perftest's `pingpong_dest`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    /// Port LID.
    pub lid: u16,
    /// Outstanding READs/atomics this side accepts as responder.
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// Remote key of the target buffer.
    pub rkey: u32,
    /// Address of the target buffer.
    pub vaddr: u64,
    /// GID, on RoCE or when a GID index was given.
    pub gid: Option<[u8; 16]>,
    /// SRQ number (0: none).
    pub srqn: u32,
}

impl Dest {
    /// The message bytes, NUL-terminated, exactly as perftest sends them.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        match self.gid {
            Some(g) => {
                for b in g {
                    s.push_str(&format!("{b:02x}:"));
                }
                s.push_str(&format!("{:08x}:", self.srqn));
            }
            None => s.push_str(&format!("{:08x}", self.srqn)),
        }
        let mut v = s.into_bytes();
        v.push(0);
        v
    }

    /// Parses a message of either form.
    pub fn decode(msg: &[u8], with_gid: bool) -> Result<Dest, String> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end]).map_err(|_| "QP message is not ASCII".to_string())?;
        let fields: Vec<&str> = text.split(':').collect();
        let want = if with_gid { 23 } else { 7 };
        if fields.len() < want {
            return Err(format!("QP message has {} fields, expected {want}: {text:?}", fields.len()));
        }
        let hex = |i: usize| u64::from_str_radix(fields[i], 16).map_err(|_| format!("bad field {i} in {text:?}"));
        let mut d = Dest {
            lid: hex(0)? as u16,
            out_reads: hex(1)? as u32,
            qpn: hex(2)? as u32,
            psn: hex(3)? as u32,
            rkey: hex(4)? as u32,
            vaddr: hex(5)?,
            ..Dest::default()
        };
        if with_gid {
            let mut g = [0u8; 16];
            for (i, b) in g.iter_mut().enumerate() {
                *b = hex(6 + i)? as u8;
            }
            d.gid = Some(g);
            d.srqn = hex(22)? as u32;
        } else {
            d.srqn = hex(6)? as u32;
        }
        Ok(d)
    }

    /// The message as perftest sends it over rdma_cm: its `struct
    /// pingpong_dest` (x86-64 layout, 56 bytes) with the integers big-endian:
    /// LID, outstanding reads, QPN, PSN, rkey at 0, 4, 8, 12, 16; the address
    /// at 24; the GID bytes at 32; SRQ number and GID index at 48 and 52.
    pub fn encode_cm(&self) -> [u8; KEY_LEN_CM] {
        let mut m = [0u8; KEY_LEN_CM];
        let words = [u32::from(self.lid), self.out_reads, self.qpn, self.psn, self.rkey];
        for (k, w) in words.iter().enumerate() {
            m[4 * k..4 * k + 4].copy_from_slice(&w.to_be_bytes());
        }
        m[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        m[32..48].copy_from_slice(&self.gid.unwrap_or([0; 16]));
        m[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        m
    }

    /// Parses [`encode_cm`](Self::encode_cm)'s form. perftest does not read
    /// the SRQ number back over rdma_cm; neither does this.
    pub fn decode_cm(m: &[u8; KEY_LEN_CM], with_gid: bool) -> Dest {
        let word = |k: usize| u32::from_be_bytes([m[4 * k], m[4 * k + 1], m[4 * k + 2], m[4 * k + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&m[32..48]);
        Dest {
            lid: word(0) as u16,
            out_reads: word(1),
            qpn: word(2),
            psn: word(3),
            rkey: word(4),
            vaddr: u64::from_be_bytes(m[24..32].try_into().expect("8 bytes")),
            gid: with_gid.then_some(gid),
            srqn: 0,
        }
    }
}

/// perftest's `-R` exchange: an RC connection made through rdma_cm on the
/// test's port, each message one SEND into one posted receive.
struct CmLink {
    conn: CmConn,
    /// Receive slot at 0, send slot at [`SLOT`].
    mem: RegisteredMem,
    /// A receive completion taken by [`Oob::peer_spoke`], not yet read.
    stash: Mutex<Option<Wc>>,
}

/// Bytes of each slot of a [`CmLink`] (perftest posts receives of 56).
const SLOT: usize = 64;

/// How the exchange travels.
enum Link {
    Tcp(TcpStream),
    Cm(Box<CmLink>),
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Tcp(s) => write!(f, "Tcp({s:?})"),
            Link::Cm(l) => write!(f, "Cm({:?})", l.conn.id),
        }
    }
}

/// Resolves a server name to its first IPv4 address (perftest asks for
/// `AF_INET` only) with `port`.
pub fn ipv4_of(host: &str, port: u16) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| format!("{host} has no IPv4 address (rdma_cm connections here are IPv4, as perftest's)"))
}

/// The connection to the peer.
#[derive(Debug)]
pub struct Oob {
    link: Link,
    client: bool,
    limits: Limits,
    /// Whether waits may span the peer's measured run ([`Oob::run_waits`]).
    running: bool,
    /// The peer's version string (empty when not exchanged).
    pub rem_version: String,
}

fn ctx<T>(what: &str, r: io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("out-of-band {what}: {e}"))
}

/// The step name of the closing handshake's QP message.
const CLOSING: &str = "the closing handshake's QP message";

/// The step name of the QP message that ends a bandwidth run.
const END_OF_RUN: &str = "the end-of-run QP message";

/// Why a peer may close the connection before the closing handshake: a
/// perftest client exits there when its CPU-frequency estimate fails (TCG
/// spoils it now and then), unless run with `-F`.
const CLOSING_HINT: &str = "; a perftest peer exits before it when it cannot turn its cycles into time \
     (it prints \"Can't produce a report\" after \"Correlation coefficient r^2 < 0.9\"): run it with -F";

/// The message of an exchange read that ran out of time.
fn silent(limit: Duration, step: &str, running: bool) -> String {
    let (var, why) = if running {
        (RUN_SECS_VAR, "the peer stopped, or its run takes longer")
    } else {
        (XCHG_SECS_VAR, "the peer stopped, or is not a perftest-compatible tool running the same test")
    };
    format!(
        "out-of-band exchange: nothing from the peer for {} s while waiting for {step} ({why}; {var}=N waits longer)",
        limit.as_secs()
    )
}

/// Reads `b.len()` bytes from `s` before `limit` passes (the whole message,
/// not each read).
fn read_within(s: &mut TcpStream, b: &mut [u8], limit: Duration, step: &str, running: bool) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    let mut got = 0;
    while got < b.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(silent(limit, step, running));
        }
        ctx("read", s.set_read_timeout(Some(left)))?;
        match s.read(&mut b[got..]) {
            Ok(0) => {
                return Err(format!(
                    "out-of-band exchange: the peer closed the connection while this side waited for {step} \
                     ({got} of {} bytes read){}",
                    b.len(),
                    if step == CLOSING || step == END_OF_RUN { CLOSING_HINT } else { "" }
                ))
            }
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("out-of-band read of {step}: {e}")),
        }
    }
    Ok(())
}

/// `-R` server: waits (as perftest's server does, without a limit) for a
/// client whose rdma_cm handshake completes within `handshake`. A request
/// that does not complete in time (a peer that connects and goes silent, a
/// stranger) is dropped, with its QP, and the next one taken, so no peer
/// can hold the server in its handshake.
pub fn accept_exchange(l: &CmListener, opts: &CmOpts, handshake: Duration) -> Result<CmConn, String> {
    loop {
        let req = match l.next_request(Instant::now() + Duration::from_secs(3600)) {
            Ok(r) => r,
            Err(rrddmma::prim::Error::Timeout { .. }) => continue,
            Err(e) => return Err(format!("rdma_cm: waiting for the exchange connection: {e}")),
        };
        let from = req.id().peer_addr().map_or("an unknown address".to_string(), |a| a.to_string());
        match req.accept(&opts.clone().timeout(handshake)) {
            Ok(c) => return Ok(c),
            Err(e) => eprintln!(
                "rrddmma-perf: rdma_cm: the exchange connection from {from} did not complete its handshake within \
                 {} s ({e}); dropped, waiting for the next client ({XCHG_SECS_VAR} bounds it, at most {} s)",
                handshake.as_secs_f64(),
                CM_HANDSHAKE.as_secs()
            ),
        }
    }
}

impl Oob {
    /// Connects to `server` (retrying for up to `wait`), or, without a
    /// server name, waits for one client on `port`. Reads then wait at
    /// most `limits.step`.
    pub fn open(server: Option<&str>, port: u16, wait: Duration, limits: Limits) -> Result<Oob, String> {
        let s = match server {
            Some(host) => {
                let start = Instant::now();
                loop {
                    match TcpStream::connect((host, port)) {
                        Ok(s) => break s,
                        Err(e) if start.elapsed() < wait => {
                            let _ = e;
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        Err(e) => return Err(format!("cannot connect to {host}:{port}: {e}")),
                    }
                }
            }
            None => {
                let l =
                    TcpListener::bind(("0.0.0.0", port)).map_err(|e| format!("cannot listen on port {port}: {e}"))?;
                ctx("accept", l.accept())?.0
            }
        };
        Ok(Oob::over_tcp(s, server.is_some(), limits))
    }

    /// The exchange over a connected stream (`client`: this side connected).
    pub fn over_tcp(s: TcpStream, client: bool, limits: Limits) -> Oob {
        let _ = s.set_nodelay(true);
        // Messages are at most 108 bytes, so a write blocks only when the
        // peer reads nothing at all.
        let _ = s.set_write_timeout(Some(limits.step));
        Oob { link: Link::Tcp(s), client, limits, running: false, rem_version: String::new() }
    }

    /// From now on reads may span the peer's measured run and wait up to
    /// `limits.run` (a passive server waits for the client's whole run).
    pub fn run_waits(&mut self) {
        self.running = true;
    }

    /// How long the next read may wait.
    fn limit(&self) -> Duration {
        if self.running {
            self.limits.run
        } else {
            self.limits.step
        }
    }

    /// perftest's `-R`: connects through rdma_cm to `server` on `port`
    /// (retrying for up to `wait` while nobody listens), or, without a
    /// server name, listens on every address and accepts one client. One
    /// receive is kept posted, as perftest keeps one.
    pub fn open_cm(server: Option<&str>, port: u16, wait: Duration, limits: Limits) -> Result<Oob, String> {
        let opts = CmOpts::default().cq_depth(4);
        let conn = match server {
            Some(host) => {
                let addr = ipv4_of(host, port)?;
                let start = Instant::now();
                loop {
                    match connect_rc_cm(addr, &opts) {
                        Ok(c) => break c,
                        Err(e) if start.elapsed() < wait => {
                            let _ = e;
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        Err(e) => return Err(format!("rdma_cm: cannot connect to {addr}: {e}")),
                    }
                }
            }
            None => {
                let any = SocketAddr::from(([0, 0, 0, 0], port));
                // One pending request at a time (the backlog): a flood of
                // connect requests queues no more than one.
                let l = CmListener::bind(any, 1).map_err(|e| format!("rdma_cm: cannot listen on port {port}: {e}"))?;
                accept_exchange(&l, &opts, limits.handshake())?
                // The listener goes here: the test's QPs listen on the same port next.
            }
        };
        let mem = RegisteredMem::new(&conn.pd, 2 * SLOT).map_err(|e| format!("rdma_cm exchange memory: {e}"))?;
        let link = CmLink { conn, mem, stash: Mutex::new(None) };
        link.post_recv()?;
        Ok(Oob {
            link: Link::Cm(Box::new(link)),
            client: server.is_some(),
            limits,
            running: false,
            rem_version: String::new(),
        })
    }

    /// Whether the exchange runs over rdma_cm (`-R`).
    pub fn is_cm(&self) -> bool {
        matches!(self.link, Link::Cm(_))
    }

    /// The device the rdma_cm exchange connection went through.
    pub fn cm_device(&self) -> Option<String> {
        match &self.link {
            Link::Cm(l) => l.conn.id.device_name(),
            Link::Tcp(_) => None,
        }
    }

    /// The peer's address (IPv4, the test's port) of an rdma_cm exchange.
    pub fn cm_peer(&self) -> Option<SocketAddr> {
        match &self.link {
            Link::Cm(l) => l.conn.id.peer_addr(),
            Link::Tcp(_) => None,
        }
    }

    fn write_all(&mut self, b: &[u8], step: &str) -> Result<(), String> {
        let limit = self.limit();
        match &mut self.link {
            Link::Tcp(s) => s.write_all(b).map_err(|e| format!("out-of-band write of {step}: {e}")),
            Link::Cm(l) => l.send(b, limit, step),
        }
    }

    fn read_exact(&mut self, b: &mut [u8], step: &str) -> Result<(), String> {
        let (limit, running) = (self.limit(), self.running);
        match &mut self.link {
            Link::Tcp(s) => read_within(s, b, limit, step, running),
            Link::Cm(l) => l.recv(b, limit, step, running),
        }
    }

    /// Whether this side is the client.
    pub fn is_client(&self) -> bool {
        self.client
    }

    /// perftest's `ctx_xchg_data`: the client writes then reads, the server
    /// reads then writes; both buffers have the same length. `step` names
    /// the message in errors.
    pub fn xchg(&mut self, mine: &[u8], theirs: &mut [u8], step: &str) -> Result<(), String> {
        if self.client {
            self.write_all(mine, step)?;
            self.read_exact(theirs, step)
        } else {
            self.read_exact(theirs, step)?;
            self.write_all(mine, step)
        }
    }

    fn rem_version_f(&self) -> f64 {
        let v: String = self.rem_version.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        v.parse().unwrap_or(0.0)
    }

    /// Versions, system data and MTU, unless `skip` (`--dont_xchg_versions`).
    /// Returns the (cycle buffer, cache line, MTU enum) both sides use.
    pub fn preamble(&mut self, skip: bool, cycle: u32, line: u32, mtu: u32) -> Result<(u32, u32, u32), String> {
        if skip {
            return Ok((cycle, line, mtu));
        }
        let mut mine = [0u8; VERSION_LEN];
        mine[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
        let mut theirs = [0u8; VERSION_LEN];
        self.xchg(&mine, &mut theirs, "the version string")?;
        let end = theirs.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
        self.rem_version = String::from_utf8_lossy(&theirs[..end]).into_owned();
        let rv = self.rem_version_f();
        if rv < 5.70 {
            return Err(format!("peer speaks version {:?}; versions before 5.70 are not supported", self.rem_version));
        }
        let (mut cycle, mut line) = (cycle, line);
        if rv >= 5.32 {
            let mut b = [0u8; 4];
            self.xchg(&cycle.to_be_bytes(), &mut b, "the cycle-buffer size")?;
            let rem = check_peer_size("cycle buffer", u32::from_be_bytes(b), MAX_CYCLE_BUFFER)?;
            cycle = cycle.max(rem);
            self.xchg(&line.to_be_bytes(), &mut b, "the cache-line size")?;
            let rem = check_peer_size("cache line", u32::from_be_bytes(b), MAX_CACHE_LINE)?;
            line = line.max(rem);
        }
        let mut mtu = mtu;
        if rv >= 5.1 {
            // "%d" of the MTU enum, in a 2-byte buffer (one digit and a NUL).
            let mine = [b'0' + (mtu.min(9) as u8), 0];
            let mut b = [0u8; 2];
            self.xchg(&mine, &mut b, "the MTU")?;
            let rem = u32::from(b[0].wrapping_sub(b'0'));
            if (1..=5).contains(&rem) && rem < mtu {
                mtu = rem;
            }
        }
        Ok((cycle, line, mtu))
    }

    /// One QP message each way (perftest's `ctx_hand_shake`).
    pub fn handshake(&mut self, mine: &Dest) -> Result<Dest, String> {
        self.handshake_as(mine, "a QP message")
    }

    /// The handshake that ends a bandwidth run, before the report exchange:
    /// a bandwidth server waits here while its client runs.
    pub fn end_of_run(&mut self, mine: &Dest) -> Result<Dest, String> {
        self.handshake_as(mine, END_OF_RUN)
    }

    /// [`Oob::handshake`], its reads named `step`.
    fn handshake_as(&mut self, mine: &Dest, step: &str) -> Result<Dest, String> {
        if self.is_cm() {
            let mut theirs = [0u8; KEY_LEN_CM];
            self.xchg(&mine.encode_cm(), &mut theirs, step)?;
            return Ok(Dest::decode_cm(&theirs, mine.gid.is_some()));
        }
        let msg = mine.encode();
        debug_assert_eq!(msg.len(), if mine.gid.is_some() { KEY_LEN_GID } else { KEY_LEN });
        let mut theirs = [0u8; KEY_LEN_GID];
        let theirs = &mut theirs[..msg.len()];
        self.xchg(&msg, theirs, step)?;
        Dest::decode(theirs, mine.gid.is_some())
    }

    /// The bandwidth report exchange (`xchg_bw_reports`): size, iterations,
    /// peak and average bandwidth, message rate, each big-endian.
    pub fn reports(&mut self, mine: &BwReport) -> Result<BwReport, String> {
        let mut b8 = [0u8; 8];
        self.xchg(&mine.size.to_be_bytes(), &mut b8, "the report's message size")?;
        let size = u64::from_be_bytes(b8);
        let iters = if self.rem_version_f() >= 5.33 || self.rem_version.is_empty() {
            self.xchg(&mine.iters.to_be_bytes(), &mut b8, "the report's iterations")?;
            u64::from_be_bytes(b8)
        } else {
            let mut b4 = [0u8; 4];
            self.xchg(&(mine.iters as u32).to_be_bytes(), &mut b4, "the report's iterations")?;
            u64::from(u32::from_be_bytes(b4))
        };
        let mut f = |v: f64| -> Result<f64, String> {
            self.xchg(&v.to_bits().to_be_bytes(), &mut b8, "the report's bandwidth and message rate")?;
            Ok(f64::from_bits(u64::from_be_bytes(b8)))
        };
        let bw_peak = f(mine.bw_peak)?;
        let bw_avg = f(mine.bw_avg)?;
        let msg_rate = f(mine.msg_rate)?;
        Ok(BwReport { size, iters, bw_peak, bw_avg, msg_rate })
    }

    /// The closing handshake (`ctx_close_connection`): one QP message each
    /// way, then over TCP "done" and the socket is closed (over rdma_cm the
    /// message is all).
    pub fn close(&mut self, mine: &Dest) -> Result<(), String> {
        self.handshake_as(mine, CLOSING)?;
        match &mut self.link {
            Link::Tcp(s) => ctx("write of the closing \"done\"", s.write_all(b"done\0")),
            Link::Cm(_) => Ok(()),
        }
    }

    /// Whether the peer has sent something (used by receivers that run
    /// until the sender's closing handshake); never blocks.
    pub fn peer_spoke(&self) -> bool {
        match &self.link {
            Link::Tcp(s) => {
                let _ = s.set_nonblocking(true);
                let mut b = [0u8; 1];
                let r = matches!(s.peek(&mut b), Ok(n) if n > 0);
                let _ = s.set_nonblocking(false);
                r
            }
            Link::Cm(l) => l.heard(),
        }
    }

    /// The end of a `-D` WRITE latency run, which perftest ends without a
    /// closing handshake. The peer may run on until its own deadline, and
    /// its last WRITE is acknowledged only while this side's QP lives: so
    /// this side says it is done (one byte over TCP, one message over
    /// rdma_cm; perftest never reads it) and waits until the peer says the
    /// same, goes away (perftest exits after its loop), or `cap` passes.
    pub fn linger(&mut self, cap: Duration) {
        let until = Instant::now() + cap;
        match &mut self.link {
            Link::Tcp(s) => {
                // Errors mean the peer is gone already.
                let _ = s.write_all(&[0]);
                let _ = s.set_read_timeout(Some(cap));
                let _ = s.read(&mut [0u8; 1]);
            }
            Link::Cm(l) => {
                let _ = l.send(&[0], cap, "the end of the run");
                while Instant::now() < until && !l.heard() && !l.gone() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

impl CmLink {
    /// Whether a message has arrived (kept for the next read); never blocks.
    fn heard(&self) -> bool {
        let mut stash = self.stash.lock().unwrap_or_else(|p| p.into_inner());
        if stash.is_none() {
            *stash = self.conn.recv_cq.poll_one().ok().flatten();
        }
        stash.is_some()
    }

    /// Whether the peer has disconnected (or the CM channel failed); never
    /// blocks.
    fn gone(&self) -> bool {
        match self.conn.id.channel().get() {
            Ok(ev) => ev.kind() == CmEventType::DISCONNECTED,
            Err(e) => !e.is_would_block(),
        }
    }

    fn post_recv(&self) -> Result<(), String> {
        let sges = [self.mem.sge(0..SLOT)];
        // SAFETY: the slot lies in `mem`, which lives as long as the QP (same struct)
        // and is read only after the receive completes.
        unsafe { self.conn.qp.post_recv(&mut [RecvWr::new(&sges, 0)]) }
            .map_err(|e| format!("rdma_cm exchange: ibv_post_recv: {e}"))
    }

    /// Waits for one completion on `recv` (the receive CQ) or the send CQ;
    /// fails when the peer disconnects or `limit` passes.
    fn wait(&self, recv: bool, limit: Duration, step: &str, running: bool) -> Result<Wc, String> {
        let cq = if recv { &self.conn.recv_cq } else { &self.conn.send_cq };
        let deadline = Instant::now() + limit;
        loop {
            if Instant::now() >= deadline {
                return Err(if recv {
                    silent(limit, step, running)
                } else {
                    format!("rdma_cm exchange: sending {step}: no completion in {} s", limit.as_secs())
                });
            }
            if recv {
                if let Some(wc) = self.stash.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    return Ok(wc);
                }
            }
            match cq.spin_one(Duration::from_millis(1)) {
                Ok(Some(wc)) => return Ok(wc),
                Ok(None) => {}
                Err(e) => return Err(format!("rdma_cm exchange: ibv_poll_cq: {e}")),
            }
            match self.conn.id.channel().get() {
                Ok(ev) if ev.kind() == CmEventType::DISCONNECTED => {
                    return Err("rdma_cm exchange: the peer disconnected".into())
                }
                // Nothing else bears on the exchange.
                Ok(_) => {}
                Err(e) if e.is_would_block() => std::thread::sleep(Duration::from_micros(200)),
                Err(e) => return Err(format!("rdma_cm exchange: reading events: {e}")),
            }
        }
    }

    fn send(&mut self, b: &[u8], limit: Duration, step: &str) -> Result<(), String> {
        assert!(b.len() <= SLOT, "an exchange message is at most {SLOT} bytes, not {}", b.len());
        self.mem.write(SLOT, b);
        let sges = [self.mem.sge(SLOT..SLOT + b.len())];
        // SAFETY: the slot lies in `mem` and is not written again before the
        // completion below.
        unsafe { self.conn.qp.post_send(&mut [SendWr::send(&sges).signaled()]) }
            .map_err(|e| format!("rdma_cm exchange: ibv_post_send: {e}"))?;
        let wc = self.wait(false, limit, step, false)?;
        if !wc.is_success() {
            return Err(format!("rdma_cm exchange: SEND completed with status {:?}", wc.status()));
        }
        Ok(())
    }

    fn recv(&mut self, b: &mut [u8], limit: Duration, step: &str, running: bool) -> Result<(), String> {
        let wc = self.wait(true, limit, step, running)?;
        if !wc.is_success() {
            return Err(format!("rdma_cm exchange: receive completed with status {:?}", wc.status()));
        }
        if wc.byte_len() as usize != b.len() {
            return Err(format!(
                "rdma_cm exchange: the peer sent {} bytes where {} were due (do both sides run the same test with -R?)",
                wc.byte_len(),
                b.len()
            ));
        }
        self.mem.read(0, b);
        self.post_recv()
    }
}

/// A bandwidth result as exchanged (units as the sender prints them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BwReport {
    /// Message size.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth.
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Message rate in Mpps.
    pub msg_rate: f64,
}

/// The exchanges around one message size's measured run, index `i` of the
/// sizes (perftest's `ctx_hand_shake` calls between the set-up and the
/// close), for the unidirectional SEND and WRITE-with-immediate bandwidth
/// tests and the latency tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeSync {
    /// One exchange before the size's run.
    pub before: bool,
    /// One exchange after it.
    pub after: bool,
}

/// perftest's schedule: SEND (bandwidth and latency) has one exchange
/// before each size but the first (the set-up's last one serves it), and
/// bandwidth sweeps (`-a`) one after each. WRITE with immediate data
/// (`--write_with_imm`, as perftest 25.01 runs it; perftest 4.5 has no such
/// flag) posts its receives and then exchanges before every size, the
/// first too, so that no message arrives before its receive; its bandwidth
/// sweeps exchange after each size as well. Other tests none.
pub fn size_sync(verb: crate::args::Verb, test: crate::args::Test, imm: bool, all: bool, i: usize) -> SizeSync {
    use crate::args::{Test, Verb};
    match (verb, test) {
        (Verb::Send, Test::Bw) => SizeSync { before: i > 0, after: all },
        (Verb::Send, Test::Lat) => SizeSync { before: i > 0, after: false },
        (Verb::Write, Test::Bw) if imm => SizeSync { before: true, after: all },
        (Verb::Write, Test::Lat) if imm => SizeSync { before: true, after: false },
        _ => SizeSync { before: false, after: false },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_perftest_lengths_and_round_trip() {
        let d = Dest {
            lid: 1,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x7f00_0000_1000,
            ..Dest::default()
        };
        let plain = d.encode();
        assert_eq!(plain.len(), KEY_LEN);
        assert_eq!(&plain[..], &b"0001:0010:000011:abcdef:00001234:00007f0000001000:00000000\0"[..]);
        assert_eq!(Dest::decode(&plain, false).unwrap(), d);
        let g = Dest { gid: Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]), srqn: 7, ..d };
        let with = g.encode();
        assert_eq!(with.len(), KEY_LEN_GID);
        assert!(std::str::from_utf8(&with).unwrap().contains(":fe:80:00:"));
        assert_eq!(Dest::decode(&with, true).unwrap(), g);
        assert!(Dest::decode(b"12:zz\0", false).is_err());
    }

    #[test]
    fn exchange_over_loopback_tcp() {
        let port = 40000 + (std::process::id() % 20000) as u16;
        let srv = std::thread::spawn(move || {
            let mut o = Oob::open(None, port, Duration::ZERO, Limits::default()).unwrap();
            let p = o.preamble(false, 4096, 64, 5).unwrap();
            let d = o.handshake(&Dest { qpn: 2, gid: Some([2; 16]), ..Dest::default() }).unwrap();
            let r = o.reports(&BwReport::default()).unwrap();
            (p, d, r)
        });
        let mut c = Oob::open(Some("127.0.0.1"), port, Duration::from_secs(5), Limits::default()).unwrap();
        assert_eq!(c.preamble(false, 8192, 64, 3).unwrap(), (8192, 64, 3));
        let d = c.handshake(&Dest { qpn: 1, gid: Some([1; 16]), ..Dest::default() }).unwrap();
        assert_eq!(d.qpn, 2);
        let mine = BwReport { size: 64, iters: 10, bw_peak: 1.5, bw_avg: 1.25, msg_rate: 0.5 };
        c.reports(&mine).unwrap();
        let (p, d, r) = srv.join().unwrap();
        assert_eq!(p, (8192, 64, 3));
        assert_eq!(d.qpn, 1);
        assert_eq!(r, mine);
        assert_eq!(c.rem_version, VERSION);
    }

    /// perftest 4.5 (version "6.06") and perftest 25.01 (version "6.24")
    /// speak one out-of-band format: the version string in 16 bytes, the
    /// cycle buffer and cache line as big-endian 4-byte words, the MTU as
    /// "%d" in 2 bytes, the QP message with its GID in 108 bytes (59
    /// without), the reports with 8-byte iterations. A peer of each
    /// version, written byte by byte as perftest writes them, is understood
    /// and answered in that format.
    #[test]
    fn perftest_4_5_and_25_01_peers_share_one_exchange_format() {
        for version in ["6.06", "6.24"] {
            let (mut me, mut peer) = pair(Limits::default());
            let t = std::thread::spawn(move || {
                let mut v = [0u8; VERSION_LEN];
                v[..4].copy_from_slice(version.as_bytes());
                peer.write_all(&v).unwrap();
                let mut theirs = [0u8; VERSION_LEN];
                peer.read_exact(&mut theirs).unwrap();
                peer.write_all(&8192u32.to_be_bytes()).unwrap();
                let mut w = [0u8; 4];
                peer.read_exact(&mut w).unwrap();
                assert_eq!(u32::from_be_bytes(w), 4096);
                peer.write_all(&128u32.to_be_bytes()).unwrap();
                peer.read_exact(&mut w).unwrap();
                peer.write_all(b"3\0").unwrap();
                let mut mtu = [0u8; 2];
                peer.read_exact(&mut mtu).unwrap();
                assert_eq!(&mtu, b"5\0");
                // The QP message as perftest formats it with a GID (RoCE).
                let msg = b"0000:0010:000011:abcdef:00001234:00007f0000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01:00000000:\0";
                assert_eq!(msg.len(), KEY_LEN_GID);
                peer.write_all(msg).unwrap();
                let mut mine = [0u8; KEY_LEN_GID];
                peer.read_exact(&mut mine).unwrap();
                // The reports: size, 8-byte iterations, three doubles.
                for v in [64u64, 300, 1.5f64.to_bits(), 1.25f64.to_bits(), 0.5f64.to_bits()] {
                    peer.write_all(&v.to_be_bytes()).unwrap();
                    peer.read_exact(&mut [0u8; 8]).unwrap();
                }
                (String::from_utf8_lossy(&theirs).trim_end_matches('\0').to_string(), mine)
            });
            assert_eq!(me.preamble(false, 4096, 64, 5).unwrap(), (8192, 128, 3), "peer {version}");
            assert_eq!(me.rem_version, version);
            let mine = Dest { qpn: 0x22, gid: Some([1; 16]), ..Dest::default() };
            let d = me.handshake(&mine).unwrap();
            assert_eq!((d.out_reads, d.qpn, d.psn, d.rkey, d.vaddr), (16, 0x11, 0xabcdef, 0x1234, 0x7f00_0000_1000));
            assert_eq!(d.gid.unwrap()[10..], [0xff, 0xff, 0x7f, 0, 0, 1]);
            let r = me.reports(&BwReport::default()).unwrap();
            assert_eq!(r, BwReport { size: 64, iters: 300, bw_peak: 1.5, bw_avg: 1.25, msg_rate: 0.5 });
            let (sent_version, sent) = t.join().unwrap();
            assert_eq!(sent_version, VERSION);
            assert_eq!(Dest::decode(&sent, true).unwrap(), mine);
        }
    }

    /// The exchanges around each size: SEND as perftest 4.5 and 25.01 run
    /// it (none before the first size), WRITE with immediate data as
    /// perftest 25.01 runs it (one before every size, the first too; after
    /// each in bandwidth sweeps), none for the others.
    #[test]
    fn exchanges_around_each_size_follow_perftest() {
        use crate::args::{Test, Verb};
        let s = |before, after| SizeSync { before, after };
        assert_eq!(size_sync(Verb::Send, Test::Bw, false, false, 0), s(false, false));
        assert_eq!(size_sync(Verb::Send, Test::Bw, true, true, 0), s(false, true));
        assert_eq!(size_sync(Verb::Send, Test::Bw, false, true, 3), s(true, true));
        assert_eq!(size_sync(Verb::Send, Test::Lat, true, false, 0), s(false, false));
        assert_eq!(size_sync(Verb::Send, Test::Lat, false, true, 1), s(true, false));
        assert_eq!(size_sync(Verb::Write, Test::Bw, true, false, 0), s(true, false));
        assert_eq!(size_sync(Verb::Write, Test::Bw, true, true, 2), s(true, true));
        assert_eq!(size_sync(Verb::Write, Test::Lat, true, false, 0), s(true, false));
        assert_eq!(size_sync(Verb::Write, Test::Lat, true, true, 5), s(true, false));
        assert_eq!(size_sync(Verb::Write, Test::Bw, false, true, 1), s(false, false));
        assert_eq!(size_sync(Verb::Write, Test::Lat, false, false, 0), s(false, false));
        assert_eq!(size_sync(Verb::Read, Test::Bw, false, true, 1), s(false, false));
    }

    /// A connected pair over loopback TCP: (this side as server, the peer's raw stream).
    fn pair(limits: Limits) -> (Oob, TcpStream) {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (Oob::over_tcp(s, false, limits), peer)
    }

    /// The peer's preamble up to the sizes: version "6.06", then `cycle` and `line`.
    fn peer_preamble(peer: &mut TcpStream, cycle: u32, line: u32) {
        let mut v = [0u8; VERSION_LEN];
        v[..4].copy_from_slice(b"6.06");
        peer.write_all(&v).unwrap();
        peer.read_exact(&mut [0u8; VERSION_LEN]).unwrap();
        peer.write_all(&cycle.to_be_bytes()).unwrap();
        // The line is answered only if the cycle buffer was taken.
        if peer.read_exact(&mut [0u8; 4]).is_ok() {
            peer.write_all(&line.to_be_bytes()).unwrap();
            let _ = peer.read_exact(&mut [0u8; 4]);
        }
    }

    #[test]
    fn regression_peer_cycle_buffer_beyond_the_limit_is_refused_before_sizing() {
        let (mut me, mut peer) = pair(Limits::default());
        let t = std::thread::spawn(move || peer_preamble(&mut peer, 0xffff_ffff, 64));
        let e = me.preamble(false, 4096, 64, 5).unwrap_err();
        drop(me);
        t.join().unwrap();
        assert!(e.contains("cycle buffer of 4294967295 bytes"), "names the value: {e}");
        assert!(e.contains(&format!("at most {MAX_CYCLE_BUFFER} bytes")), "names the limit: {e}");

        // A cache line out of range and a size that is no power of two are refused too.
        let (mut me, mut peer) = pair(Limits::default());
        let t = std::thread::spawn(move || peer_preamble(&mut peer, 4096, 1 << 20));
        let e = me.preamble(false, 4096, 64, 5).unwrap_err();
        t.join().unwrap();
        assert!(e.contains("cache line of 1048576 bytes") && e.contains("at most 4096"), "{e}");
        assert!(check_peer_size("cycle buffer", 12288, MAX_CYCLE_BUFFER).is_err());
        assert!(check_peer_size("cycle buffer", 0, MAX_CYCLE_BUFFER).is_err());

        // perftest's own values, up to a huge page, are taken (the larger side's wins).
        let (mut me, mut peer) = pair(Limits::default());
        let t = std::thread::spawn(move || {
            peer_preamble(&mut peer, MAX_CYCLE_BUFFER, 128);
            let mut mtu = [0u8; 2];
            peer.write_all(b"3\0").unwrap();
            peer.read_exact(&mut mtu).unwrap();
        });
        assert_eq!(me.preamble(false, 4096, 64, 5).unwrap(), (MAX_CYCLE_BUFFER, 128, 3));
        t.join().unwrap();
    }

    #[test]
    fn a_peer_gone_before_the_closing_handshake_is_named_with_perftests_reason() {
        // A server whose perftest client exited at its report step: the
        // connection closes with nothing sent.
        let (mut me, peer) = pair(Limits::default());
        drop(peer);
        let e = me.close(&Dest::default()).unwrap_err();
        assert!(
            e.contains("closed the connection while this side waited for the closing handshake's QP message"),
            "{e}"
        );
        assert!(e.contains("Can't produce a report") && e.contains("-F"), "{e}");
        // Also at the end of a bandwidth run, where a server waits for
        // its client's sweep.
        let (mut me, peer) = pair(Limits::default());
        drop(peer);
        let e = me.end_of_run(&Dest::default()).unwrap_err();
        assert!(e.contains("waited for the end-of-run QP message") && e.contains("Can't produce a report"), "{e}");
        // Elsewhere the reason is not offered.
        let (mut me, peer) = pair(Limits::default());
        drop(peer);
        let e = me.handshake(&Dest::default()).unwrap_err();
        assert!(e.contains("waited for a QP message") && !e.contains("-F"), "{e}");
    }

    #[test]
    fn regression_silent_exchange_peer_times_out_naming_the_step() {
        // The same knob as RRDDMMA_PERF_XCHG_SECS=1, parsed the same way.
        let limits = Limits::parse(Some("1"), None).unwrap();
        assert_eq!(limits.step, Duration::from_secs(1));
        // A server whose client connects and says nothing.
        let (mut me, peer) = pair(limits);
        let start = Instant::now();
        let e = me.preamble(false, 4096, 64, 5).unwrap_err();
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(10), "took {took:?}");
        assert!(e.contains("nothing from the peer for 1 s while waiting for the version string"), "{e}");
        assert!(e.contains("RRDDMMA_PERF_XCHG_SECS"), "says how to wait longer: {e}");

        // A client whose server accepts and says nothing, mid-way through a message:
        // the limit covers the whole message, not each read.
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let mut c = Oob::over_tcp(TcpStream::connect(l.local_addr().unwrap()).unwrap(), true, limits);
        let (mut srv, _) = l.accept().unwrap();
        let dribble = std::thread::spawn(move || {
            let mut v = [0u8; VERSION_LEN];
            let _ = srv.read_exact(&mut v);
            for _ in 0..6 {
                if srv.write_all(b"6").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(400));
            }
        });
        let start = Instant::now();
        let e = c.preamble(false, 4096, 64, 5).unwrap_err();
        assert!(start.elapsed() < Duration::from_millis(1900), "one limit for the message: {:?}", start.elapsed());
        assert!(e.contains("waiting for the version string"), "{e}");
        dribble.join().unwrap();
        drop(peer);

        // After the set-up the run limit applies, and names its own knob.
        let limits = Limits::parse(Some("60"), Some("1")).unwrap();
        let (mut me, _peer) = pair(limits);
        me.run_waits();
        let e = me.handshake(&Dest::default()).unwrap_err();
        assert!(e.contains("for 1 s while waiting for a QP message") && e.contains("RRDDMMA_PERF_RUN_SECS"), "{e}");

        // Bad values of the knobs are refused, naming them.
        let e = Limits::parse(Some("soon"), None).unwrap_err();
        assert!(e.contains("RRDDMMA_PERF_XCHG_SECS=\"soon\""), "{e}");
        assert!(Limits::parse(None, Some("0")).is_err());
    }
}
