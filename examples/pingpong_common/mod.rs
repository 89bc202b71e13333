//! What `rc_pingpong` and `ud_pingpong` share: the command line (the flags of
//! rdma-core's `ibv_rc_pingpong` / `ibv_ud_pingpong`), the out-of-band TCP
//! exchange of QP addresses, and the ping-pong loop.
//!
//! The exchange is the one the rdma-core tools speak, so either side can be
//! the C tool: each side sends one NUL-terminated 52-byte message
//! `LLLL:QQQQQQ:PPPPPP:GGGG…` (LID, QP number, PSN in hex, then the 16 GID
//! bytes in network order as 32 hex digits). The client connects and sends
//! first; the server reads it, readies its QP, answers with its own message,
//! and the client ends the exchange with the 5 bytes `"done\0"`.

// Each example uses its own part of this module.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rrddmma::bindings as ffi;
use rrddmma::prim::Mtu;
use rrddmma::prim::{Context, Cq, Gid, Wc};

/// Any failure after the command line was accepted (exit code 1).
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `wr_id` of receives.
pub const RECV_WRID: u64 = 1;
/// `wr_id` of sends.
pub const SEND_WRID: u64 = 2;

/// Bytes of one address message, the terminating NUL included.
pub const MSG_LEN: usize = "0000:000000:000000:00000000000000000000000000000000".len() + 1;
/// The client's closing message, NUL included.
pub const DONE: &[u8; 5] = b"done\0";

/// Which of the two tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `rc_pingpong`: has `-m` and `-o`.
    Rc,
    /// `ud_pingpong`: message size bounded by the port MTU.
    Ud,
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// TCP port of the exchange (`-p`).
    pub port: u16,
    /// RDMA device (`-d`); the first one listed when absent.
    pub ib_dev: Option<String>,
    /// Port of the device (`-i`).
    pub ib_port: u8,
    /// Message size in bytes (`-s`).
    pub size: u32,
    /// Path MTU (`-m`, RC only).
    pub mtu: Mtu,
    /// Receives kept posted (`-r`).
    pub rx_depth: u32,
    /// Exchanges (`-n`).
    pub iters: u32,
    /// Service level (`-l`).
    pub sl: u8,
    /// Sleep on completion events instead of polling (`-e`).
    pub events: bool,
    /// Local GID index (`-g`); no GID (InfiniBand LID routing) when absent.
    pub gid_idx: Option<u8>,
    /// Check the received buffer (`-c`).
    pub chk: bool,
    /// Register the buffer with on-demand paging (`-o`, RC only).
    pub odp: bool,
    /// The server to connect to; none: be the server.
    pub server: Option<String>,
}

/// Why the command line was refused (exit code 2), or a request for help.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgError {
    /// `-h` / `--help`: print the usage, exit 0.
    Help,
    /// A bad flag or value, with what is wrong.
    Usage(String),
}

struct Flag {
    short: char,
    long: &'static str,
    arg: bool,
    rc_only: bool,
}

const FLAGS: &[Flag] = &[
    Flag { short: 'p', long: "port", arg: true, rc_only: false },
    Flag { short: 'd', long: "ib-dev", arg: true, rc_only: false },
    Flag { short: 'i', long: "ib-port", arg: true, rc_only: false },
    Flag { short: 's', long: "size", arg: true, rc_only: false },
    Flag { short: 'm', long: "mtu", arg: true, rc_only: true },
    Flag { short: 'r', long: "rx-depth", arg: true, rc_only: false },
    Flag { short: 'n', long: "iters", arg: true, rc_only: false },
    Flag { short: 'l', long: "sl", arg: true, rc_only: false },
    Flag { short: 'e', long: "events", arg: false, rc_only: false },
    Flag { short: 'g', long: "gid-idx", arg: true, rc_only: false },
    Flag { short: 'c', long: "chk", arg: false, rc_only: false },
    Flag { short: 'o', long: "odp", arg: false, rc_only: true },
    Flag { short: 'h', long: "help", arg: false, rc_only: false },
];

/// The usage text.
pub fn usage(prog: &str, kind: Kind) -> String {
    let size = match kind {
        Kind::Rc => "4096",
        Kind::Ud => "1024; at most the port's active MTU",
    };
    let mut s = format!(
        "Usage:\n  {prog}            start a server and wait for connection\n  \
         {prog} <host>     connect to server at <host>\n\nOptions:\n  \
         -p, --port=<port>      listen on/connect to port <port> (default 18515)\n  \
         -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n  \
         -i, --ib-port=<port>   use port <port> of IB device (default 1)\n  \
         -s, --size=<size>      size of message to exchange (default {size})\n"
    );
    if kind == Kind::Rc {
        s.push_str("  -m, --mtu=<size>       path MTU: 256, 512, 1024, 2048 or 4096 (default 1024)\n");
    }
    s.push_str(
        "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n  \
         -n, --iters=<iters>    number of exchanges (default 1000)\n  \
         -l, --sl=<sl>          service level value (default 0)\n  \
         -e, --events           sleep on CQ events (default poll)\n  \
         -g, --gid-idx=<gid index> local port gid index\n  \
         -c, --chk              validate received buffer\n",
    );
    if kind == Kind::Rc {
        s.push_str("  -o, --odp              use on demand paging\n");
    }
    s.push_str("  -h, --help             print this text\n");
    s
}

/// A number as C's `strtoul(s, NULL, 0)` reads it (decimal, `0x` hex, `0`
/// octal), but the whole string must be a number.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn number<T: TryFrom<u64>>(flag: char, v: &str, min: u64, max: u64) -> Result<T, ArgError> {
    let bad = || ArgError::Usage(format!("invalid value {v:?} for -{flag}: expected a number in {min}..={max}"));
    let n = parse_num(v).ok_or_else(bad)?;
    if n < min || n > max {
        return Err(bad());
    }
    T::try_from(n).map_err(|_| bad())
}

/// The path MTU for a size in bytes.
pub fn mtu_from_bytes(n: u64) -> Option<Mtu> {
    Some(match n {
        256 => Mtu::MTU_256,
        512 => Mtu::MTU_512,
        1024 => Mtu::MTU_1024,
        2048 => Mtu::MTU_2048,
        4096 => Mtu::MTU_4096,
        _ => return None,
    })
}

/// Parses the arguments after the program name, getopt-style (`lexopt`):
/// short flags clustered or with the value attached or next (`-ec`, `-s64`,
/// `-n 100`), `--long=value` / `--long value`, `--` ending the flags, and
/// operands anywhere. An argument that is not UTF-8 is a usage error.
pub fn parse_args<I>(args: I, kind: Kind) -> Result<Config, ArgError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    use lexopt::prelude::*;
    let mut c = Config {
        port: 18515,
        ib_dev: None,
        ib_port: 1,
        size: if kind == Kind::Rc { 4096 } else { 1024 },
        mtu: Mtu::MTU_1024,
        rx_depth: 500,
        iters: 1000,
        sl: 0,
        events: false,
        gid_idx: None,
        chk: false,
        odp: false,
        server: None,
    };
    let known = |f: &&Flag| kind == Kind::Rc || !f.rc_only;
    let bad = |e: lexopt::Error| ArgError::Usage(e.to_string());
    let mut operands = Vec::new();
    let mut p = lexopt::Parser::from_args(args);
    while let Some(arg) = p.next().map_err(bad)? {
        let f = match arg {
            Short(ch) => FLAGS.iter().find(|f| f.short == ch).filter(known),
            Long(name) => FLAGS.iter().find(|f| f.long == name).filter(known),
            Value(v) => {
                operands.push(v.string().map_err(bad)?);
                continue;
            }
        };
        let Some(f) = f else { return Err(bad(arg.unexpected())) };
        let value = if f.arg { p.value().map_err(bad)?.string().map_err(bad)? } else { String::new() };
        let (flag, v) = (f.short, value.as_str());
        match flag {
            'p' => c.port = number(flag, v, 0, 65535)?,
            'd' => c.ib_dev = Some(value),
            'i' => c.ib_port = number(flag, v, 1, 255)?,
            's' => c.size = number(flag, v, 1, u64::from(u32::MAX) - 40)?,
            'm' => {
                c.mtu = parse_num(v).and_then(mtu_from_bytes).ok_or_else(|| {
                    ArgError::Usage(format!("invalid value {v:?} for -m: expected 256, 512, 1024, 2048 or 4096"))
                })?
            }
            'r' => c.rx_depth = number(flag, v, 1, u64::from(u32::MAX - 1))?,
            'n' => c.iters = number(flag, v, 1, u64::from(u32::MAX))?,
            'l' => c.sl = number(flag, v, 0, 15)?,
            'e' => c.events = true,
            'g' => c.gid_idx = Some(number(flag, v, 0, 255)?),
            'c' => c.chk = true,
            'o' => c.odp = true,
            'h' => return Err(ArgError::Help),
            _ => unreachable!("every flag of FLAGS is handled"),
        }
    }
    match operands.len() {
        0 => {}
        1 => c.server = operands.pop(),
        _ => return Err(ArgError::Usage(format!("at most one server name, got {operands:?}"))),
    }
    Ok(c)
}

/// A pingpong tool's `main`: parse the flags, run, exit 0 on success, 1 on a
/// run-time failure (printed), 2 on a usage error.
pub fn tool_main(kind: Kind, run: fn(&Config) -> Res<()>) -> ExitCode {
    let c = match config_or_exit(kind) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match run(&c) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

/// Parses `std::env::args()`; on a usage error prints it with the usage text
/// and gives exit code 2 (help: exit 0).
pub fn config_or_exit(kind: Kind) -> Result<Config, ExitCode> {
    let mut args = std::env::args_os();
    let prog = args.next().map_or_else(|| "pingpong".into(), |p| p.to_string_lossy().into_owned());
    match parse_args(args, kind) {
        Ok(c) => Ok(c),
        Err(ArgError::Help) => {
            print!("{}", usage(&prog, kind));
            Err(ExitCode::SUCCESS)
        }
        Err(ArgError::Usage(msg)) => {
            eprintln!("{prog}: {msg}");
            eprint!("{}", usage(&prog, kind));
            Err(ExitCode::from(2))
        }
    }
}

/// Opens the device of `-d`, or the first one.
pub fn open(c: &Config) -> Res<Context> {
    Ok(match &c.ib_dev {
        Some(name) => Context::open(name).map_err(|e| format!("IB device {name} not found: {e}"))?,
        None => Context::open_first().map_err(|e| format!("No IB devices found: {e}"))?,
    })
}

/// A random 24-bit packet sequence number, from the kernel's random source.
pub fn random_psn() -> u32 {
    rrddmma::prim::random_psn()
}

/// One side's QP address, as exchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// GID (zero when no GID index was given).
    pub gid: Gid,
}

impl Dest {
    /// The message: `%04x:%06x:%06x:` then the GID in wire form, NUL-terminated.
    pub fn to_wire(self) -> [u8; MSG_LEN] {
        let hex: String = self.gid.0.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{:04x}:{:06x}:{:06x}:{hex}", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        let mut msg = [0u8; MSG_LEN];
        msg[..text.len()].copy_from_slice(text.as_bytes());
        msg
    }

    /// Reads a peer's message.
    pub fn from_wire(msg: &[u8]) -> Result<Dest, String> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end]).map_err(|_| "address message is not text".to_string())?;
        let bad = || format!("malformed address message {text:?}");
        let parts: Vec<&str> = text.split(':').collect();
        let [lid, qpn, psn, gid] = parts[..] else { return Err(bad()) };
        let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
        if gid.len() != 32 {
            return Err(bad());
        }
        let mut g = [0u8; 16];
        for (k, b) in g.iter_mut().enumerate() {
            *b = u8::from_str_radix(&gid[2 * k..2 * k + 2], 16).map_err(|_| bad())?;
        }
        Ok(Dest { lid: u16::try_from(hex(lid)?).map_err(|_| bad())?, qpn: hex(qpn)?, psn: hex(psn)?, gid: Gid(g) })
    }

    /// The GID to route to: the peer's GID when its interface ID (the low 8
    /// bytes) is set, else none (LID routing), as the rdma-core tools decide.
    pub fn route_gid(&self) -> Option<Gid> {
        self.gid.0[8..].iter().any(|&b| b != 0).then_some(self.gid)
    }
}

/// Prints `  local address:` / `  remote address:` lines as the C tools do
/// (`sep` is `,` for RC and `:` for UD's local line).
pub fn print_dest(what: &str, d: &Dest, sep: char) {
    println!(
        "  {:<16}LID {:#06x}, QPN {:#08x}, PSN {:#08x}{sep} GID {}",
        format!("{what} address:"),
        d.lid,
        d.qpn,
        d.psn,
        std::net::Ipv6Addr::from(d.gid.0)
    );
}

/// Client side of the exchange: send ours, read theirs, say done.
pub fn client_exchange(host: &str, port: u16, me: &Dest) -> Res<Dest> {
    let mut s = TcpStream::connect((host, port)).map_err(|e| format!("Couldn't connect to {host}:{port}: {e}"))?;
    s.write_all(&me.to_wire()).map_err(|e| format!("Couldn't send local address: {e}"))?;
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg).map_err(|e| format!("Couldn't read remote address: {e}"))?;
    s.write_all(DONE).map_err(|e| format!("Couldn't write done: {e}"))?;
    Ok(Dest::from_wire(&msg)?)
}

/// Server side: wait for one client, read its address, `ready` our QP for
/// it, answer with ours, and wait for its done.
pub fn server_exchange(port: u16, me: &Dest, ready: impl FnOnce(&Dest) -> Res<()>) -> Res<Dest> {
    let listener = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| format!("Couldn't listen to port {port}: {e}"))?;
    let (mut s, _) = listener.accept().map_err(|e| format!("accept() failed: {e}"))?;
    drop(listener);
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg).map_err(|e| format!("Couldn't read remote address: {e}"))?;
    let remote = Dest::from_wire(&msg)?;
    ready(&remote).map_err(|e| format!("Couldn't connect to remote QP: {e}"))?;
    s.write_all(&me.to_wire()).map_err(|e| format!("Couldn't send local address: {e}"))?;
    let mut done = [0u8; DONE.len()];
    s.read_exact(&mut done).map_err(|e| format!("Couldn't read done: {e}"))?;
    if &done != DONE {
        return Err(format!("expected \"done\" from the client, got {done:?}").into());
    }
    Ok(remote)
}

/// Counters of the ping-pong loop.
#[derive(Debug, Default)]
pub struct Counts {
    /// Sends completed.
    pub sent: u32,
    /// Receives completed.
    pub received: u32,
    /// Completion events taken (with `-e`).
    pub events: u32,
}

/// The ping-pong: each side sends its next message once its previous send
/// completed and the peer's message arrived; the client sends first.
/// `post_send` posts one signalled send with `SEND_WRID`; `post_recv(n)`
/// posts up to `n` receives with `RECV_WRID` and says how many it posted;
/// `posted` receives are outstanding at the start. Returns the time from the
/// first send to the last completion.
pub fn ping_pong(
    c: &Config,
    cq: &Cq,
    mut posted: u32,
    mut post_send: impl FnMut() -> Res<()>,
    mut post_recv: impl FnMut(u32) -> u32,
) -> Res<(Duration, Counts)> {
    let mut pending = RECV_WRID;
    if c.server.is_some() {
        post_send().map_err(|e| format!("Couldn't post send: {e}"))?;
        pending |= SEND_WRID;
    }
    let start = Instant::now();
    let mut n = Counts::default();
    let mut wcs = [Wc::default(); 2];
    while n.received < c.iters || n.sent < c.iters {
        if c.events {
            if !cq.wait(None)? {
                continue;
            }
            n.events += 1;
            cq.req_notify(false)?;
        }
        // Polling: spin until something completes, handle it, go round.
        // Events: drain everything queued (the event was for the first).
        loop {
            let got = cq.poll(&mut wcs)?;
            if got == 0 {
                if c.events {
                    break;
                }
                continue;
            }
            for wc in &wcs[..got] {
                if !wc.is_success() {
                    let st = wc.status();
                    return Err(
                        format!("Failed status {} ({}) for wr_id {}", status_str(st), st.to_raw(), wc.wr_id()).into()
                    );
                }
                match wc.wr_id() {
                    SEND_WRID => n.sent += 1,
                    RECV_WRID => {
                        posted -= 1;
                        if posted <= 1 {
                            posted += post_recv(c.rx_depth - posted);
                            if posted < c.rx_depth {
                                return Err(format!("Couldn't post receive ({posted})").into());
                            }
                        }
                        n.received += 1;
                    }
                    other => return Err(format!("Completion for unknown wr_id {other}").into()),
                }
                pending &= !wc.wr_id();
                if n.sent < c.iters && pending == 0 {
                    post_send().map_err(|e| format!("Couldn't post send: {e}"))?;
                    pending = RECV_WRID | SEND_WRID;
                }
            }
            if !c.events {
                break;
            }
        }
    }
    Ok((start.elapsed(), n))
}

/// libibverbs' name of a completion status.
pub fn status_str(st: rrddmma::prim::WcStatus) -> String {
    // SAFETY: `ibv_wc_status_str` takes any value and returns a static,
    // NUL-terminated string.
    let p = unsafe { ffi::ibv_wc_status_str(st.into()) };
    if p.is_null() {
        return format!("status {}", st.to_raw());
    }
    // SAFETY: non-null and NUL-terminated, as above.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Prints the two result lines of the C tools.
pub fn report(c: &Config, t: Duration) {
    let usec = t.as_secs_f64() * 1e6;
    let bytes = u64::from(c.size) * u64::from(c.iters) * 2;
    println!("{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec", usec / 1e6, bytes as f64 * 8.0 / usec);
    println!("{} iters in {:.2} seconds = {:.2} usec/iter", c.iters, usec / 1e6, usec / f64::from(c.iters));
}

/// Page size, for `-c`.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// The `-c` pattern: the first byte of every page of the message is 0 (the
/// buffer is otherwise filled with 0x7b).
pub fn mark_pages(buf: *mut u8, size: usize) {
    for i in (0..size).step_by(page_size()) {
        // SAFETY: `i < size`, and the caller's buffer holds `size` bytes no
        // work request is using at this point.
        unsafe { buf.add(i).write_volatile(0) };
    }
}

/// Checks the `-c` pattern; prints `invalid data in page N` for each page
/// that lacks it and says whether all had it.
pub fn check_pages(buf: *const u8, size: usize) -> bool {
    let ps = page_size();
    let mut ok = true;
    for i in (0..size).step_by(ps) {
        // SAFETY: `i < size` within the caller's buffer; every message was
        // received (its completion polled), so nothing writes here any more.
        if unsafe { buf.add(i).read_volatile() } != 0 {
            println!("invalid data in page {}", i / ps);
            ok = false;
        }
    }
    ok
}

/// The message buffer: `len` bytes of 0x7b, page-aligned, reached only
/// through its raw pointer once the device may write it.
#[derive(Debug)]
pub struct Buf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Buf {
    /// Allocates and fills the buffer; an error when memory is short.
    pub fn new(len: usize) -> Res<Buf> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), page_size())
            .map_err(|_| format!("Couldn't allocate work buf of {len} bytes"))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(format!("Couldn't allocate work buf of {len} bytes").into());
        }
        // SAFETY: `ptr` holds `layout.size()` bytes just allocated.
        unsafe { ptr.write_bytes(0x7b, layout.size()) };
        Ok(Buf { ptr, layout })
    }

    /// The start of the buffer.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the memory region over
        // it is deregistered first (declared after the buffer).
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn address_message_matches_the_c_format() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[127, 0, 0, 1]);
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: Gid(gid) };
        let msg = d.to_wire();
        assert_eq!(msg.len(), 52);
        assert_eq!(&msg[..51], b"0000:000011:abcdef:00000000000000000000ffff7f000001");
        assert_eq!(msg[51], 0);
        assert_eq!(Dest::from_wire(&msg), Ok(d));
        assert_eq!(d.route_gid(), Some(Gid(gid)));
        assert_eq!(Dest { gid: Gid::default(), ..d }.route_gid(), None);
        assert!(Dest::from_wire(b"0000:000011:abcdef:0000\0").is_err());
        assert!(Dest::from_wire(b"zz").is_err());
    }

    #[test]
    fn flags_parse_like_getopt() {
        let c = parse_args(args("-p 9000 -d rxe0 -g1 -n 10 -ec -s 0x100 -m 2048 host"), Kind::Rc).unwrap();
        assert_eq!((c.port, c.ib_dev.as_deref(), c.gid_idx, c.iters), (9000, Some("rxe0"), Some(1), 10));
        assert!(c.events && c.chk);
        assert_eq!((c.size, c.mtu, c.server.as_deref()), (256, Mtu::MTU_2048, Some("host")));
        let c = parse_args(args("host --iters=5 --rx-depth 7"), Kind::Ud).unwrap();
        assert_eq!((c.iters, c.rx_depth, c.size, c.server.as_deref()), (5, 7, 1024, Some("host")));
        let usage = |s: &str, k| matches!(parse_args(args(s), k), Err(ArgError::Usage(_)));
        assert!(usage("-s abc", Kind::Rc));
        assert!(usage("-s 0", Kind::Rc));
        assert!(usage("-x", Kind::Rc));
        assert!(usage("-m 1000", Kind::Rc));
        assert!(usage("-m 1024", Kind::Ud), "UD has no -m");
        assert!(usage("-p 70000", Kind::Rc));
        assert!(usage("-n", Kind::Rc));
        assert!(usage("a b", Kind::Rc));
        assert!(usage("--bogus", Kind::Rc));
        assert_eq!(parse_args(args("--help"), Kind::Rc), Err(ArgError::Help));
        // perftest's and getopt's forms of one value.
        for form in ["-s64", "-s 64", "--size=64", "--size 64", "-cs64", "-s=64"] {
            let c = parse_args(args(form), Kind::Rc).unwrap_or_else(|e| panic!("{form}: {e:?}"));
            assert_eq!(c.size, 64, "{form}");
        }
        assert!(usage("--events=yes", Kind::Rc));
        // Not UTF-8: an error, never a panic.
        use std::os::unix::ffi::OsStringExt;
        let bad = vec![OsString::from("-d"), OsString::from_vec(vec![b'm', 0xff, b'x'])];
        assert!(matches!(parse_args(bad, Kind::Rc), Err(ArgError::Usage(m)) if m.contains("unicode")));
        let bad = vec![OsString::from_vec(vec![0xfe])];
        assert!(matches!(parse_args(bad, Kind::Rc), Err(ArgError::Usage(_))));
        assert_eq!(parse_num("010"), Some(8));
        assert_eq!(parse_num("12x"), None);
    }
}
