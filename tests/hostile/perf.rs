//! Hostile-peer tests against the perf victim: the `rrddmma-perf` server
//! (the built binary, `RRDDMMA_PERF_BIN`, run as a child), attacked by a
//! client that speaks its out-of-band exchange badly on purpose.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::table;

const VICTIM: &str = "rrddmma-perf server";

/// The `rrddmma-perf` binary `cargo xtask test` built.
fn perf_bin() -> String {
    std::env::var("RRDDMMA_PERF_BIN").expect(
        "RRDDMMA_PERF_BIN names the rrddmma-perf binary (cargo xtask test sets it; or `cargo build -p rrddmma-perf`)",
    )
}

/// Starts `rrddmma-perf ARGS` with exchange steps bounded at `xchg_secs`.
fn server(args: &[&str], xchg_secs: u32) -> Child {
    Command::new(perf_bin())
        .args(args)
        .env("RRDDMMA_PERF_XCHG_SECS", xchg_secs.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting rrddmma-perf")
}

/// Waits up to `within` for `c` to exit (killing it after): its output and
/// how long it took.
fn finish(mut c: Child, within: Duration) -> (Output, Duration, bool) {
    let t = Instant::now();
    let mut in_time = true;
    while c.try_wait().unwrap().is_none() {
        if t.elapsed() > within {
            in_time = false;
            let _ = c.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (c.wait_with_output().unwrap(), t.elapsed(), in_time)
}

/// Connects to the server's exchange port, retrying while it starts.
fn connect(port: u16) -> TcpStream {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "rrddmma-perf never listened on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The version message of perftest's exchange.
fn version() -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(b"6.06");
    v
}

/// Largest resident set of any waited-for child, in KiB.
fn children_max_rss_kib() -> u64 {
    // SAFETY: `getrusage` fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a local.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) }, 0);
    u.ru_maxrss as u64
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A TCP-exchange write-bandwidth server on `port` over the test device.
fn tcp_server(port: u16, xchg_secs: u32) -> Child {
    let dev = table::device();
    server(&["write", "bw", "-d", &dev, "-p", &port.to_string(), "-n", "10"], xchg_secs)
}

fn assert_refused(o: &Output, took: Duration, in_time: bool, limit: Duration, what: &str) -> String {
    let e = stderr(o);
    assert!(in_time, "{what}: the server did not end within {limit:?}; stderr: {e}");
    assert!(!o.status.success(), "{what}: the server must refuse, not pass: {e}");
    assert_eq!(o.status.code(), Some(1), "{what}: an error exit, not a signal or a panic: {e}");
    assert!(!e.contains("panicked"), "{what}: no panic on peer input: {e}");
    assert!(took <= limit, "{what}: {took:?}");
    e
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_PERF_BIN (cargo xtask test)"]
fn perf_server_refuses_a_huge_cycle_buffer_before_sizing_anything() {
    let objects = table::kernel_objects(None);
    let port = 18620;
    let srv = tcp_server(port, 5);
    let mut s = connect(port);
    s.write_all(&version()).unwrap();
    let mut theirs = [0u8; 16];
    s.read_exact(&mut theirs).unwrap();
    assert!(theirs.starts_with(b"6.06"));
    s.write_all(&0xffff_ffffu32.to_be_bytes()).unwrap();
    let (o, took, in_time) = finish(srv, Duration::from_secs(20));
    let e = assert_refused(&o, took, in_time, Duration::from_secs(20), "cycle buffer 0xffffffff");
    assert!(e.contains("cycle buffer of 4294967295 bytes"), "names the value: {e}");
    assert!(e.contains("at most 2097152 bytes"), "names the limit: {e}");
    let rss = children_max_rss_kib();
    assert!(rss < 256 << 10, "the server's peak resident memory was {rss} KiB");
    assert_eq!(table::kernel_objects(None), objects, "no qp, cq, mr or pd left behind");
    table::hostile(
        "cycle buffer 0xffffffff (≈ 8 GiB per QP)",
        VICTIM,
        &format!("refused before sizing (names value and 2 MiB limit), exit 1 in {:.1} s; peak RSS {} MiB; 0 kernel objects left", took.as_secs_f64(), rss >> 10),
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_PERF_BIN (cargo xtask test)"]
fn perf_server_ends_a_silent_client_at_its_step_deadline() {
    let port = 18621;
    let srv = tcp_server(port, 2);
    let s = connect(port);
    let (o, took, in_time) = finish(srv, Duration::from_secs(15));
    drop(s);
    let e = assert_refused(&o, took, in_time, Duration::from_secs(15), "silent client");
    assert!(e.contains("nothing from the peer for 2 s while waiting for the version string"), "{e}");
    table::hostile(
        "client connects and says nothing",
        VICTIM,
        &format!(
            "error naming the step (version string) after the 2 s step limit; exit 1 in {:.1} s",
            took.as_secs_f64()
        ),
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_PERF_BIN (cargo xtask test)"]
fn perf_server_refuses_a_garbage_exchange() {
    let port = 18622;
    let srv = tcp_server(port, 2);
    let mut s = connect(port);
    s.write_all(&[0xff; 200]).unwrap();
    let (o, took, in_time) = finish(srv, Duration::from_secs(15));
    drop(s);
    let e = assert_refused(&o, took, in_time, Duration::from_secs(15), "garbage");
    assert!(e.contains("version"), "says what it could not take: {e}");
    table::hostile(
        "200 bytes of 0xff as the exchange",
        VICTIM,
        &format!("typed refusal of the version, exit 1 in {:.1} s", took.as_secs_f64()),
    );
}

#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE and RRDDMMA_PERF_BIN (cargo xtask test)"]
fn perf_server_reports_a_disconnect_mid_exchange() {
    let objects = table::kernel_objects(None);
    let port = 18623;
    let srv = tcp_server(port, 5);
    let mut s = connect(port);
    s.write_all(&version()).unwrap();
    let mut theirs = [0u8; 16];
    s.read_exact(&mut theirs).unwrap();
    s.write_all(&[0, 0]).unwrap();
    drop(s);
    let (o, took, in_time) = finish(srv, Duration::from_secs(15));
    let e = assert_refused(&o, took, in_time, Duration::from_secs(15), "disconnect");
    assert!(
        e.contains("closed the connection while this side waited for the cycle-buffer size (2 of 4 bytes read)"),
        "{e}"
    );
    assert_eq!(table::kernel_objects(None), objects, "no qp, cq, mr or pd left behind");
    table::hostile(
        "client leaves 2 bytes into the cycle-buffer size",
        VICTIM,
        &format!("error naming the step and bytes read, exit 1 in {:.1} s; 0 kernel objects left", took.as_secs_f64()),
    );
}

/// The CM device and address of the harness (`RRDDMMA_CM_DEVICE`, `RRDDMMA_CM_ADDR`).
fn cm_env() -> (String, String) {
    let get = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is set by the harness (cargo xtask test)"));
    (get("RRDDMMA_CM_DEVICE"), get("RRDDMMA_CM_ADDR"))
}

/// A connection request to `addr` that takes the server's answer and never
/// completes the handshake (no RTU): the CM id and its QP, to keep alive.
fn half_open(addr: SocketAddr) -> Option<impl Sized> {
    use rrddmma::prim::cm::{CmEventType, CmId, ConnParam, EventChannel, PortSpace};
    use rrddmma::prim::{Context, Cq, Pd, Qp, QpCaps, QpType};
    let ch = EventChannel::create().unwrap();
    let id = CmId::create(&ch, PortSpace::Rc).unwrap();
    let step = Duration::from_secs(5);
    id.resolve_addr(None, addr, step).unwrap();
    id.expect(CmEventType::ADDR_RESOLVED, Instant::now() + step).unwrap();
    id.resolve_route(step).unwrap();
    id.expect(CmEventType::ROUTE_RESOLVED, Instant::now() + step).unwrap();
    let ctx = Context::open(&id.device_name().unwrap()).unwrap();
    let pd = Pd::alloc(&ctx).unwrap();
    let cq = Cq::create(&ctx, 4).unwrap();
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(QpCaps::default()).build().unwrap();
    id.connect(&qp, &ConnParam { responder_resources: 1, initiator_depth: 1, ..ConnParam::default() }).unwrap();
    // The server's reply; then silence.
    let answered = id.expect(CmEventType::CONNECT_RESPONSE, Instant::now() + Duration::from_secs(15)).is_ok();
    answered.then_some((qp, cq, pd, ctx, id, ch))
}

#[test]
#[ignore = "device test: needs RRDDMMA_CM_DEVICE, RRDDMMA_CM_ADDR and RRDDMMA_PERF_BIN (cargo xtask test)"]
fn regression_perf_rdma_cm_server_drops_a_handshake_that_never_completes_and_serves_the_client() {
    let (dev, ip) = cm_env();
    let port = 18624u16;
    let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
    let srv = server(&["write", "bw", "-d", &dev, "-R", "-p", &port.to_string(), "-n", "20"], 3);
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    // The attacker: a request the server answers, then silence, holding
    // its id (a flood of more requests queues at most one behind it).
    let held = (|| loop {
        if let Some(h) = half_open(addr) {
            return h;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the server never answered a connect request");
        std::thread::sleep(Duration::from_millis(200));
    })();
    let flood: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let _ = std::panic::catch_unwind(|| half_open(addr).is_some());
            })
        })
        .collect();
    // The honest client, while the attacker holds its half-open connection.
    let client = Command::new(perf_bin())
        .args(["write", "bw", "-d", &dev, "-R", "-p", &port.to_string(), "-n", "20", &ip])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (co, ctook, c_in_time) = finish(client, Duration::from_secs(60));
    let (so, stook, s_in_time) = finish(srv, Duration::from_secs(30));
    for f in flood {
        f.join().unwrap();
    }
    drop(held);
    let (ce, se) = (stderr(&co), stderr(&so));
    assert!(c_in_time && co.status.success(), "the honest client is served: {ce}\nserver: {se}");
    assert!(s_in_time && so.status.success(), "the server completes its run: {se}");
    assert!(se.contains("did not complete its handshake within 3 s"), "the server says what it dropped: {se}");
    table::hostile(
        "-R: connect request answered, handshake never completed (and 4 more requests)",
        VICTIM,
        &format!(
            "dropped after the 3 s handshake limit, next request taken; honest client served in {:.1} s; server exit 0 in {:.1} s",
            ctook.as_secs_f64(),
            stook.as_secs_f64()
        ),
    );
}
