//! `rping` of librdmacm, over rrddmma: the same flags and the same wire
//! protocol, so either side can be the C tool.
//!
//! ```text
//! rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
//! rping -c [-vVd] [-S size] [-C count] -a addr [-p port]
//! ```
//!
//! Each ping: the client fills its source buffer with `rdma-ping-N: ` and a
//! rolling `A`..`z` pattern (NUL-terminated), SENDs its address, rkey and
//! length (16 bytes: big-endian u64, u32, u32); the server RDMA READs it and
//! SENDs a go-ahead; the client SENDs its sink buffer's address; the server
//! RDMA WRITEs the string back and SENDs a go-ahead. `-V` makes the client
//! compare source and sink; `-v` prints the data. The client disconnects
//! after `-C` pings (0: forever); the server serves one client and exits when
//! it disconnects. Bad flags print the usage and exit 2; a failure exits 1.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rrddmma::prim::cm::CmEventType;
use rrddmma::prim::{AccessFlags, Pd, Qp, QpAttr, QpCaps, QpState, RecvWr, RemoteAddr, SendWr, Wc, WcStatus};
use rrddmma::wrap::{connect_rc_cm, CmConn, CmListener, CmOpts, MemOpts, RegisteredMem};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n\
rping -c [-vVd] [-S size] [-C count] -a addr [-p port]\n\
\t-c\t\tclient side\n\
\t-s\t\tserver side\n\
\t-v\t\tdisplay ping data to stdout\n\
\t-V\t\tvalidate ping data\n\
\t-d\t\tdebug printfs\n\
\t-S size \tping data size\n\
\t-C count\tping count times\n\
\t-a addr\t\taddress\n\
\t-p port\t\tport\n";

/// Smallest `-S`: room for `rdma-ping-2147483647: ` as the C tool computes it.
const MIN_SIZE: usize = 26;
/// Largest `-S` (the C tool's 64 KiB buffer less one).
const MAX_SIZE: usize = 64 * 1024 - 1;
/// The 16-byte buffer advertisement.
const INFO_LEN: usize = 16;

#[derive(Debug)]
struct Opts {
    server: bool,
    verbose: bool,
    validate: bool,
    debug: bool,
    size: usize,
    count: u64,
    addr: Option<IpAddr>,
    port: u16,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        server: false,
        verbose: false,
        validate: false,
        debug: false,
        size: 64,
        count: 0,
        addr: None,
        port: 7174,
    };
    let mut role = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
            return Err(format!("unexpected argument {a:?}"));
        };
        let mut chars = flags.chars();
        while let Some(c) = chars.next() {
            match c {
                's' => role = Some(true),
                'c' => role = Some(false),
                'v' => o.verbose = true,
                'V' => o.validate = true,
                'd' => o.debug = true,
                'S' | 'C' | 'a' | 'p' => {
                    let rest: String = chars.by_ref().collect();
                    let v =
                        if rest.is_empty() { it.next().cloned().ok_or(format!("-{c} needs a value"))? } else { rest };
                    match c {
                        'S' => {
                            o.size = v.parse().map_err(|_| format!("invalid size {v:?}"))?;
                            if !(MIN_SIZE..=MAX_SIZE).contains(&o.size) {
                                return Err(format!(
                                    "Invalid size {} (valid range is {MIN_SIZE} to {MAX_SIZE})",
                                    o.size
                                ));
                            }
                        }
                        'C' => o.count = v.parse().map_err(|_| format!("Invalid count {v:?}"))?,
                        'a' => o.addr = Some(v.parse().map_err(|_| format!("invalid IP address {v:?}"))?),
                        _ => o.port = v.parse().map_err(|_| format!("invalid port {v:?}"))?,
                    }
                }
                _ => return Err(format!("unknown flag -{c}")),
            }
        }
    }
    o.server = role.ok_or("one of -s and -c is required")?;
    if !o.server && o.addr.is_none() {
        return Err("the client needs -a addr".into());
    }
    Ok(o)
}

/// The buffers of one side, registered on the connection's PD.
struct Bufs {
    recv: RegisteredMem,
    send: RegisteredMem,
    rdma: RegisteredMem,
}

impl Bufs {
    fn new(pd: &Pd, size: usize) -> Res<Bufs> {
        let local = MemOpts::default().access(AccessFlags::LOCAL_WRITE);
        let remote =
            MemOpts::default().access(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE);
        Ok(Bufs {
            recv: RegisteredMem::with(pd, INFO_LEN, &local)?,
            send: RegisteredMem::with(pd, INFO_LEN, &local)?,
            rdma: RegisteredMem::with(pd, size, &remote)?,
        })
    }

    fn post_recv(&self, qp: &Qp) -> Res<()> {
        let sge = [self.recv.sge(0..INFO_LEN)];
        // SAFETY: `recv` is registered on the QP's PD and lives as long as the
        // connection: the callers drop the connection first.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sge, 1)]) }?;
        Ok(())
    }

    /// SENDs the 16-byte advertisement of `mem` (its first `len` bytes).
    fn advertise(&mut self, c: &CmConn, addr: u64, rkey: u32, len: u32) -> Res<()> {
        let mut info = [0u8; INFO_LEN];
        info[..8].copy_from_slice(&addr.to_be_bytes());
        info[8..12].copy_from_slice(&rkey.to_be_bytes());
        info[12..].copy_from_slice(&len.to_be_bytes());
        self.send.write(0, &info);
        self.post_send_own(c)
    }

    /// SENDs the send buffer as it is (the server's go-ahead).
    fn post_send_own(&self, c: &CmConn) -> Res<()> {
        let sge = [self.send.sge(0..INFO_LEN)];
        // SAFETY: `send` is registered on the QP's PD; its completion is
        // polled (wait_send) before it is written again.
        unsafe { c.qp.post_send(&mut [SendWr::send(&sge).wr_id(2).signaled()]) }?;
        wait_send(c)
    }
}

/// Polls one completion of `cq`; `Ok(None)` once the peer has disconnected.
fn wait_cq(c: &CmConn, send: bool) -> Res<Option<Wc>> {
    let cq = if send { &c.send_cq } else { &c.recv_cq };
    let mut wc = [Wc::default()];
    let mut spins = 0u32;
    loop {
        if cq.poll(&mut wc)? == 1 {
            if wc[0].status() == WcStatus::WR_FLUSH_ERR {
                return Ok(None);
            }
            if wc[0].status() != WcStatus::SUCCESS {
                return Err(format!("cq completion failed status {}", wc[0].status()).into());
            }
            return Ok(Some(wc[0]));
        }
        spins += 1;
        if spins % 256 == 0 {
            match c.id.channel().get() {
                Ok(ev) if ev.kind() == CmEventType::DISCONNECTED => return Ok(None),
                Ok(ev) => eprintln!("unhandled event: {}, ignoring", ev.kind()),
                Err(e) if e.is_would_block() => {}
                Err(e) => return Err(e.into()),
            }
            std::thread::yield_now();
        }
    }
}

fn wait_send(c: &CmConn) -> Res<()> {
    wait_cq(c, true)?.ok_or("the peer disconnected")?;
    Ok(())
}

/// One 16-byte advertisement: (addr, rkey, len); `None` on disconnect.
fn recv_info(c: &CmConn, b: &Bufs) -> Res<Option<(u64, u32, u32)>> {
    let Some(wc) = wait_cq(c, false)? else { return Ok(None) };
    if wc.byte_len() as usize != INFO_LEN {
        return Err(format!("Received bogus data, size {}", wc.byte_len()).into());
    }
    let mut info = [0u8; INFO_LEN];
    b.recv.read(0, &mut info);
    b.post_recv(&c.qp)?;
    let addr = u64::from_be_bytes(info[..8].try_into().expect("8 bytes"));
    let rkey = u32::from_be_bytes(info[8..12].try_into().expect("4 bytes"));
    let len = u32::from_be_bytes(info[12..].try_into().expect("4 bytes"));
    Ok(Some((addr, rkey, len)))
}

fn cstr(mem: &RegisteredMem) -> String {
    let mut all = vec![0; mem.len()];
    mem.read(0, &mut all);
    let end = all.iter().position(|b| *b == 0).unwrap_or(all.len());
    String::from_utf8_lossy(&all[..end]).into_owned()
}

fn cm_opts() -> CmOpts {
    CmOpts::default()
        .caps(QpCaps::default().max_send_wr(16).max_recv_wr(2).max_send_sge(1).max_recv_sge(1).max_inline_data(0))
        .cq_depth(32)
        .timeout(Duration::from_secs(5))
        // The server READs the client's start buffer and WRITEs the echo.
        .access(AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE)
}

fn server(o: &Opts) -> Res<()> {
    let ip = o.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let l = CmListener::bind(SocketAddr::new(ip, o.port), 3)?;
    // The receive for the client's first SEND is posted before the accept:
    // on iWARP the client sends at once, and a SEND that finds no receive
    // ends the connection.
    let opts = cm_opts().timeout(Duration::from_secs(3600));
    let req = l.next_request(Instant::now() + Duration::from_secs(3600))?;
    // `b` before `c`: the connection (its QP holds the receive) is dropped
    // first.
    let (b, c) = req.accept_with(&opts, |pd, qp| -> Res<Bufs> {
        let b = Bufs::new(pd, o.size)?;
        b.post_recv(qp)?;
        Ok(b)
    })?;
    let remote_read = |b: &Bufs, read: bool, addr: u64, rkey: u32, len: usize| -> Res<()> {
        let sge = [b.rdma.sge(0..len)];
        let remote = RemoteAddr { addr, rkey };
        let wr = if read { SendWr::read(&sge, remote) } else { SendWr::write(&sge, remote) };
        // SAFETY: `rdma` is registered on the QP's PD with local write; the
        // completion is polled below before the buffer is touched.
        unsafe { c.qp.post_send(&mut [wr.wr_id(3).signaled()]) }?;
        wait_send(&c)
    };
    loop {
        let Some((addr, rkey, len)) = recv_info(&c, &b)? else { break };
        if o.debug {
            println!("Received rkey {rkey:x} addr {addr:x} len {len} from peer");
        }
        if len as usize > o.size {
            return Err(format!("the client's buffer ({len} bytes) is larger than -S {}", o.size).into());
        }
        remote_read(&b, true, addr, rkey, len as usize)?;
        let text = cstr(&b.rdma);
        if o.verbose {
            println!("server ping data: {text}");
        }
        b.post_send_own(&c)?;
        let Some((addr, rkey, _)) = recv_info(&c, &b)? else { break };
        remote_read(&b, false, addr, rkey, (text.len() + 1).min(o.size))?;
        b.post_send_own(&c)?;
    }
    eprintln!("server DISCONNECT EVENT...");
    let _ = c.qp.modify(&QpAttr::new(QpState::ERR));
    let _ = c.id.disconnect();
    Ok(())
}

fn client(o: &Opts) -> Res<()> {
    let addr = SocketAddr::new(o.addr.expect("checked by parse"), o.port);
    let c = connect_rc_cm(addr, &cm_opts())?;
    let mut b = Bufs::new(&c.pd, o.size)?;
    let remote =
        MemOpts::default().access(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE);
    let mut start_buf = RegisteredMem::with(&c.pd, o.size, &remote)?;
    // Moved into a binding declared after the buffers, so that it is
    // dropped (its QP destroyed) before them on every return.
    let c = c;
    b.post_recv(&c.qp)?;
    let mut start = b'A';
    let mut ping = 0u64;
    while o.count == 0 || ping < o.count {
        let mut data = format!("rdma-ping-{ping}: ").into_bytes();
        data.truncate(o.size);
        let mut ch = start;
        while data.len() < o.size {
            data.push(ch);
            ch = if ch >= b'z' { b'A' } else { ch + 1 };
        }
        start = if start >= b'z' { b'A' } else { start + 1 };
        data[o.size - 1] = 0;
        start_buf.write(0, &data);
        b.advertise(&c, start_buf.as_ptr() as u64, start_buf.mr().rkey(), o.size as u32)?;
        recv_info(&c, &b)?.ok_or("the server disconnected")?;
        let (addr, rkey) = (b.rdma.as_ptr() as u64, b.rdma.mr().rkey());
        b.advertise(&c, addr, rkey, o.size as u32)?;
        recv_info(&c, &b)?.ok_or("the server disconnected")?;
        let mut echo = vec![0; o.size];
        b.rdma.read(0, &mut echo);
        if o.validate && echo != data {
            return Err("data mismatch!".into());
        }
        if o.verbose {
            println!("ping data: {}", cstr(&b.rdma));
        }
        ping += 1;
    }
    let _ = c.qp.modify(&QpAttr::new(QpState::ERR));
    c.disconnect(Instant::now() + Duration::from_secs(5))?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rping: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r = if o.server { server(&o) } else { client(&o) };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rping {}: {e}", if o.server { "server" } else { "client" });
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Opts, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn flags_as_the_c_tool_takes_them() {
        let o = p("-c -vV -S 100 -C 5 -a 10.0.0.1 -p 9000").unwrap();
        assert!(!o.server && o.verbose && o.validate);
        assert_eq!((o.size, o.count, o.port), (100, 5, 9000));
        assert_eq!(o.addr, Some("10.0.0.1".parse().unwrap()));
        let o = p("-s -S64 -p7000").unwrap();
        assert!(o.server);
        assert_eq!((o.size, o.port, o.count), (64, 7000, 0));
        assert!(p("-c").unwrap_err().contains("-a"));
        assert!(p("-s -S 25").unwrap_err().contains("valid range is 26"));
        assert!(p("-s -S 65536").is_err());
        assert!(p("-s -S 65535").is_ok());
        assert!(p("-v").unwrap_err().contains("-s and -c"));
        assert!(p("-s -x").unwrap_err().contains("-x"));
    }
}
