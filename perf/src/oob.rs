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

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rrddmma::prim::cm::CmEventType;
use rrddmma::prim::{RecvWr, SendWr, Wc};
use rrddmma::wrap::{accept_rc_cm, connect_rc_cm, CmConn, CmListener, CmOpts, RegisteredMem};

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
    /// The peer's version string (empty when not exchanged).
    pub rem_version: String,
}

fn ctx<T>(what: &str, r: io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("out-of-band {what}: {e}"))
}

impl Oob {
    /// Connects to `server` (retrying for up to `wait`), or, without a
    /// server name, waits for one client on `port`.
    pub fn open(server: Option<&str>, port: u16, wait: Duration) -> Result<Oob, String> {
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
        let _ = s.set_nodelay(true);
        Ok(Oob { link: Link::Tcp(s), client: server.is_some(), rem_version: String::new() })
    }

    /// perftest's `-R`: connects through rdma_cm to `server` on `port`
    /// (retrying for up to `wait` while nobody listens), or, without a
    /// server name, listens on every address and accepts one client. One
    /// receive is kept posted, as perftest keeps one.
    pub fn open_cm(server: Option<&str>, port: u16, wait: Duration) -> Result<Oob, String> {
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
                let l = CmListener::bind(any, 1).map_err(|e| format!("rdma_cm: cannot listen on port {port}: {e}"))?;
                // perftest's server waits for its client without a limit.
                loop {
                    match accept_rc_cm(&l, &opts.clone().timeout(Duration::from_secs(3600))) {
                        Ok(c) => break c,
                        Err(rrddmma::prim::Error::Timeout { .. }) => continue,
                        Err(e) => return Err(format!("rdma_cm: accepting the exchange connection: {e}")),
                    }
                }
                // The listener goes here: the test's QPs listen on the same port next.
            }
        };
        let mem = RegisteredMem::new(&conn.pd, 2 * SLOT).map_err(|e| format!("rdma_cm exchange memory: {e}"))?;
        let link = CmLink { conn, mem, stash: Mutex::new(None) };
        link.post_recv()?;
        Ok(Oob { link: Link::Cm(Box::new(link)), client: server.is_some(), rem_version: String::new() })
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

    fn write_all(&mut self, b: &[u8]) -> Result<(), String> {
        match &mut self.link {
            Link::Tcp(s) => ctx("write", s.write_all(b)),
            Link::Cm(l) => l.send(b),
        }
    }

    fn read_exact(&mut self, b: &mut [u8]) -> Result<(), String> {
        match &mut self.link {
            Link::Tcp(s) => ctx("read", s.read_exact(b)),
            Link::Cm(l) => l.recv(b),
        }
    }

    /// Whether this side is the client.
    pub fn is_client(&self) -> bool {
        self.client
    }

    /// perftest's `ctx_xchg_data`: the client writes then reads, the server
    /// reads then writes; both buffers have the same length.
    pub fn xchg(&mut self, mine: &[u8], theirs: &mut [u8]) -> Result<(), String> {
        if self.client {
            self.write_all(mine)?;
            self.read_exact(theirs)
        } else {
            self.read_exact(theirs)?;
            self.write_all(mine)
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
        self.xchg(&mine, &mut theirs)?;
        let end = theirs.iter().position(|&b| b == 0).unwrap_or(VERSION_LEN);
        self.rem_version = String::from_utf8_lossy(&theirs[..end]).into_owned();
        let rv = self.rem_version_f();
        if rv < 5.70 {
            return Err(format!("peer speaks version {:?}; versions before 5.70 are not supported", self.rem_version));
        }
        let (mut cycle, mut line) = (cycle, line);
        if rv >= 5.32 {
            let mut b = [0u8; 4];
            self.xchg(&cycle.to_be_bytes(), &mut b)?;
            cycle = cycle.max(u32::from_be_bytes(b));
            self.xchg(&line.to_be_bytes(), &mut b)?;
            line = line.max(u32::from_be_bytes(b));
        }
        let mut mtu = mtu;
        if rv >= 5.1 {
            // "%d" of the MTU enum, in a 2-byte buffer (one digit and a NUL).
            let mine = [b'0' + (mtu.min(9) as u8), 0];
            let mut b = [0u8; 2];
            self.xchg(&mine, &mut b)?;
            let rem = u32::from(b[0].wrapping_sub(b'0'));
            if (1..=5).contains(&rem) && rem < mtu {
                mtu = rem;
            }
        }
        Ok((cycle, line, mtu))
    }

    /// One QP message each way (perftest's `ctx_hand_shake`).
    pub fn handshake(&mut self, mine: &Dest) -> Result<Dest, String> {
        if self.is_cm() {
            let mut theirs = [0u8; KEY_LEN_CM];
            self.xchg(&mine.encode_cm(), &mut theirs)?;
            return Ok(Dest::decode_cm(&theirs, mine.gid.is_some()));
        }
        let msg = mine.encode();
        debug_assert_eq!(msg.len(), if mine.gid.is_some() { KEY_LEN_GID } else { KEY_LEN });
        let mut theirs = [0u8; KEY_LEN_GID];
        let theirs = &mut theirs[..msg.len()];
        self.xchg(&msg, theirs)?;
        Dest::decode(theirs, mine.gid.is_some())
    }

    /// The bandwidth report exchange (`xchg_bw_reports`): size, iterations,
    /// peak and average bandwidth, message rate, each big-endian.
    pub fn reports(&mut self, mine: &BwReport) -> Result<BwReport, String> {
        let mut b8 = [0u8; 8];
        self.xchg(&mine.size.to_be_bytes(), &mut b8)?;
        let size = u64::from_be_bytes(b8);
        let iters = if self.rem_version_f() >= 5.33 || self.rem_version.is_empty() {
            self.xchg(&mine.iters.to_be_bytes(), &mut b8)?;
            u64::from_be_bytes(b8)
        } else {
            let mut b4 = [0u8; 4];
            self.xchg(&(mine.iters as u32).to_be_bytes(), &mut b4)?;
            u64::from(u32::from_be_bytes(b4))
        };
        let mut f = |v: f64| -> Result<f64, String> {
            self.xchg(&v.to_bits().to_be_bytes(), &mut b8)?;
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
        self.handshake(mine)?;
        match &mut self.link {
            Link::Tcp(s) => ctx("write", s.write_all(b"done\0")),
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
                let _ = l.send(&[0]);
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
    /// fails when the peer disconnects.
    fn wait(&self, recv: bool) -> Result<Wc, String> {
        let cq = if recv { &self.conn.recv_cq } else { &self.conn.send_cq };
        loop {
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

    fn send(&mut self, b: &[u8]) -> Result<(), String> {
        assert!(b.len() <= SLOT, "an exchange message is at most {SLOT} bytes, not {}", b.len());
        self.mem.write(SLOT, b);
        let sges = [self.mem.sge(SLOT..SLOT + b.len())];
        // SAFETY: the slot lies in `mem` and is not written again before the
        // completion below.
        unsafe { self.conn.qp.post_send(&mut [SendWr::send(&sges).signaled()]) }
            .map_err(|e| format!("rdma_cm exchange: ibv_post_send: {e}"))?;
        let wc = self.wait(false)?;
        if !wc.is_success() {
            return Err(format!("rdma_cm exchange: SEND completed with status {:?}", wc.status()));
        }
        Ok(())
    }

    fn recv(&mut self, b: &mut [u8]) -> Result<(), String> {
        let wc = self.wait(true)?;
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
            let mut o = Oob::open(None, port, Duration::ZERO).unwrap();
            let p = o.preamble(false, 4096, 64, 5).unwrap();
            let d = o.handshake(&Dest { qpn: 2, gid: Some([2; 16]), ..Dest::default() }).unwrap();
            let r = o.reports(&BwReport::default()).unwrap();
            (p, d, r)
        });
        let mut c = Oob::open(Some("127.0.0.1"), port, Duration::from_secs(5)).unwrap();
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
}
