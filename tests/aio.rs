//! Device tests of `wrap::aio` (feature `tokio`): many operations in flight
//! on one QP, futures dropped mid-flight, a peer that vanishes. Ignored
//! unless run with `--ignored` on the device `RRDDMMA_TEST_DEVICE` names.

use std::alloc::Layout;
use std::sync::Arc;
use std::time::Duration;

use rrddmma::prim::{AccessFlags, ConnectOpts, WcStatus};
use rrddmma::wrap::aio::{AioOpts, Error, Listener, LocalMr, RcEndpoint};
use tokio::task::JoinSet;

#[path = "aio/both.rs"]
mod both;
#[path = "aio/local.rs"]
mod local;

fn opts() -> AioOpts {
    let dev = std::env::var("RRDDMMA_TEST_DEVICE").expect("RRDDMMA_TEST_DEVICE names the device for device tests");
    // Wide set-up bound: under emulation on a busy machine registering the
    // 16 MiB pool alone can take seconds.
    AioOpts::new(&dev).setup_timeout(Duration::from_secs(60))
}

/// A connected pair in this process: (server, client).
async fn pair(o: &AioOpts) -> (RcEndpoint, RcEndpoint) {
    let l = Listener::bind("127.0.0.1:0", o.clone()).await.expect("listen");
    let addr = l.local_addr().unwrap();
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, o));
    (server.expect("accept"), client.expect("connect"))
}

fn layout(n: usize) -> Layout {
    Layout::from_size_align(n, 8).unwrap()
}

/// The first `n` bytes of `mr`.
fn bytes(mr: &LocalMr, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    mr.read(0, &mut b);
    b
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn a_thousand_operations_in_flight_on_one_qp() {
    const N: usize = 1000;
    let o = opts();
    let (server, client) = pair(&o).await;
    let (server, client) = (Arc::new(server), Arc::new(client));
    // The server lends a table of N 16-byte slots.
    let table = server.alloc_local_mr(layout(N * 16)).unwrap();
    server.send_local_mr(table).await.unwrap();
    let remote = client.receive_remote_mr().await.unwrap();
    assert_eq!(remote.len, (N * 16) as u64);

    // N writes at once, each from its own buffer.
    let mut set = JoinSet::new();
    for i in 0..N {
        let c = Arc::clone(&client);
        set.spawn(async move {
            let mut src = c.alloc_local_mr(layout(16)).unwrap();
            src.write(0, &(i as u64).to_le_bytes());
            src.write(8, &(!(i as u64)).to_le_bytes());
            let at = remote.checked_addr_at(i * 16, 16).unwrap();
            c.write(src, 0..16, at).await.map(drop)
        });
    }
    let mut done = 0;
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
        done += 1;
    }
    assert_eq!(done, N);
    // N reads at once, each checking its slot.
    for i in 0..N {
        let c = Arc::clone(&client);
        set.spawn(async move {
            let dst = c.alloc_local_mr(layout(16)).unwrap();
            let dst = c.read(dst, 0..16, remote.checked_addr_at(i * 16, 16).unwrap()).await.unwrap();
            let mut b = [0u8; 16];
            dst.read(0, &mut b);
            assert_eq!(u64::from_le_bytes(b[..8].try_into().unwrap()), i as u64, "slot {i}");
            assert_eq!(u64::from_le_bytes(b[8..].try_into().unwrap()), !(i as u64), "slot {i}");
            Ok::<(), Error>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
    }
    // 200 fetch-and-adds on one counter at once: every old value distinct.
    let counter = remote.checked_addr_at(0, 8).unwrap();
    client.write(client.alloc_local_mr(layout(8)).unwrap(), 0..8, counter).await.unwrap();
    let mut adds = JoinSet::new();
    for _ in 0..200 {
        let c = Arc::clone(&client);
        adds.spawn(async move { c.fetch_add(counter, 1).await });
    }
    let mut olds = Vec::new();
    while let Some(r) = adds.join_next().await {
        olds.push(r.unwrap().unwrap());
    }
    olds.sort_unstable();
    assert_eq!(olds, (0..200).collect::<Vec<u64>>(), "no lost or repeated atomic");
    assert_eq!(client.compare_swap(counter, 200, 7).await.unwrap(), 200);
    // The server gets its table back and sees the last writes.
    client.send_remote_mr(remote).await.unwrap();
    let back = server.receive_local_mr().await.unwrap();
    let mut b = [0u8; 16];
    back.read(16 * 5, &mut b);
    assert_eq!(u64::from_le_bytes(b[..8].try_into().unwrap()), 5);
    let mut c = [0u8; 8];
    back.read(0, &mut c);
    assert_eq!(u64::from_ne_bytes(c), 7, "the compare-and-swap landed");
    assert_eq!(client.in_flight(), 0);
}

/// The depths default to the device's, clamped by the peer's offer: the
/// data QPs of a pair built with default options keep 32 READs outstanding
/// (read back through `ibv_query_qp` on both sides), and 32 READs posted at
/// once on one QP all complete with their slot's bytes.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn rd_atomic_default_keeps_32_reads_in_flight_on_one_qp() {
    const N: usize = 32;
    let o = opts();
    let (server, client) = pair(&o).await;
    let (init, dest) = client.rd_atomic().unwrap();
    let (s_init, s_dest) = server.rd_atomic().unwrap();
    assert!(init as usize >= N && s_dest as usize >= N, "READ depths: client {init}, server {s_dest} as responder");
    assert!(s_init as usize >= N && dest as usize >= N, "READ depths: server {s_init}, client {dest} as responder");
    // Each side sends no more than the other takes.
    assert!(init <= s_dest && s_init <= dest, "clamped by the peer: {init} <= {s_dest}, {s_init} <= {dest}");
    // The explicit setters stay: a depth set is the depth used.
    let one = o.clone().connect(ConnectOpts::default().max_rd_atomic(1).max_dest_rd_atomic(1));
    let (s1, c1) = pair(&one).await;
    assert_eq!((c1.rd_atomic().unwrap(), s1.rd_atomic().unwrap()), ((1, 1), (1, 1)));
    drop((s1, c1));

    let (server, client) = (Arc::new(server), Arc::new(client));
    let mut table = server.alloc_local_mr(layout(N * 8)).unwrap();
    for i in 0..N {
        table.write(i * 8, &(i as u64 * 3 + 1).to_le_bytes());
    }
    server.send_local_mr(table).await.unwrap();
    let remote = client.receive_remote_mr().await.unwrap();
    let mut set = JoinSet::new();
    for i in 0..N {
        let c = Arc::clone(&client);
        let dst = c.alloc_local_mr(layout(8)).unwrap();
        set.spawn(async move {
            let dst = c.read(dst, 0..8, remote.checked_addr_at(i * 8, 8).unwrap()).await?;
            let mut b = [0u8; 8];
            dst.read(0, &mut b);
            Ok::<(usize, u64), Error>((i, u64::from_le_bytes(b)))
        });
    }
    let mut seen = 0;
    while let Some(r) = set.join_next().await {
        let (i, v) = r.unwrap().unwrap();
        assert_eq!(v, i as u64 * 3 + 1, "READ {i} read its own slot");
        seen += 1;
    }
    assert_eq!(seen, N);
    assert_eq!(client.in_flight(), 0);
}

/// The "window of N operations" pattern of docs/aio.md: at most N in
/// flight at any time, every operation done, every byte where it belongs.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn a_window_of_n_operations_stays_at_most_n_in_flight() {
    const N: usize = 8;
    const TOTAL: usize = 200;
    let o = opts();
    let (server, client) = pair(&o).await;
    let table = server.alloc_local_mr(layout(TOTAL * 8)).unwrap();
    server.send_local_mr(table).await.unwrap();
    let remote = client.receive_remote_mr().await.unwrap();
    let ep = Arc::new(client);
    let mut window: JoinSet<Result<(), Error>> = JoinSet::new();
    let mut most = 0;
    for i in 0..TOTAL {
        if window.len() == N {
            window.join_next().await.expect("a task").unwrap().unwrap();
        }
        let (c, at) = (Arc::clone(&ep), remote.checked_addr_at(i * 8, 8).unwrap());
        window.spawn(async move {
            let mut src = c.alloc_local_mr(layout(8)).unwrap();
            src.write(0, &(i as u64 + 1).to_le_bytes());
            c.write(src, 0..8, at).await.map(drop)
        });
        if window.len() == N {
            // A full window: let the spawned tasks post, then count.
            tokio::task::yield_now().await;
            most = most.max(ep.in_flight());
        }
        assert!(ep.in_flight() <= N, "{} in flight with a window of {N}", ep.in_flight());
    }
    while let Some(done) = window.join_next().await {
        done.unwrap().unwrap();
    }
    // How many were in flight at once depends on the device: an operation
    // takes a completion that is already there at its first poll, and
    // rxe's loopback often completes a small WRITE within the post.
    eprintln!("at most {most} of a window of {N} in flight at once");
    assert_eq!(ep.in_flight(), 0);
    // Every slot holds its operation's value, read back through the device.
    for i in 0..TOTAL {
        let dst = ep.alloc_local_mr(layout(8)).unwrap();
        let dst = ep.read(dst, 0..8, remote.checked_addr_at(i * 8, 8).unwrap()).await.unwrap();
        let mut b = [0u8; 8];
        dst.read(0, &mut b);
        assert_eq!(u64::from_le_bytes(b), i as u64 + 1, "slot {i}");
    }
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn dropped_futures_keep_their_memory_until_completion() {
    const N: usize = 100;
    const LEN: usize = 64 << 10;
    let o = opts().pool_size(32 << 20);
    let (server, client) = pair(&o).await;
    let target = server.alloc_local_mr(layout(LEN)).unwrap();
    server.send_local_mr(target).await.unwrap();
    let remote = client.receive_remote_mr().await.unwrap();
    let free_before = client.pool().free_bytes();

    // A future dropped before its first poll has posted nothing: its
    // buffer is back at once.
    let never = client.write(client.alloc_local_mr(layout(LEN)).unwrap(), 0..LEN, remote.addr_at(0));
    assert_eq!(client.pool().free_bytes(), free_before - LEN);
    drop(never);
    assert_eq!((client.in_flight(), client.pool().free_bytes()), (0, free_before), "a write never polled");

    // Start N large writes and drop each future right after its first poll.
    let mut addrs = Vec::new();
    for i in 0..N {
        let mut src = client.alloc_local_mr(layout(LEN)).unwrap();
        src.write(0, &[i as u8; 8]);
        addrs.push(src.addr());
        let fut = client.write(src, 0..LEN, remote.checked_addr_at(0, LEN).unwrap());
        tokio::pin!(fut);
        tokio::select! {
            biased;
            _ = &mut fut => {}
            _ = std::future::ready(()) => {}
        }
        // `fut` is dropped here, its request posted and (probably) in flight.
    }
    let in_flight = client.in_flight();
    let held = free_before - client.pool().free_bytes();
    eprintln!("{in_flight} of {N} dropped writes still in flight, {held} bytes held");
    assert_eq!(held, in_flight * LEN, "exactly the in-flight requests' buffers are held");
    // While they are, new pieces never overlap a held one.
    let fresh = client.alloc_local_mr(layout(LEN)).unwrap();
    if in_flight > 0 {
        assert!(client.pool().free_bytes() + LEN <= free_before - in_flight * LEN);
    }
    drop(fresh);
    // Every buffer comes back once its completion arrives.
    let t = std::time::Instant::now();
    while client.in_flight() > 0 {
        assert!(t.elapsed() < Duration::from_secs(30), "completions of dropped futures never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.pool().free_bytes(), free_before, "all memory back in the pool");
    // The endpoint still works.
    let mut src = client.alloc_local_mr(layout(8)).unwrap();
    src.write(0, b"after!!!");
    client.write(src, 0..8, remote.checked_addr_at(0, 8).unwrap()).await.unwrap();
    let dst = client.read(client.alloc_local_mr(layout(8)).unwrap(), 0..8, remote.checked_addr_at(0, 8).unwrap()).await;
    let mut b = [0u8; 8];
    dst.unwrap().read(0, &mut b);
    assert_eq!(&b, b"after!!!");
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn a_vanished_peer_fails_every_waiting_operation() {
    let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    // 16.8 ms per try, 3 tries.
    let o = opts().connect(ConnectOpts::default().access(access).timeout(12).retry_cnt(2));
    let (server, client) = pair(&o).await;
    let client = Arc::new(client);
    let table = server.alloc_local_mr(layout(1 << 20)).unwrap();
    server.send_local_mr(table).await.unwrap();
    let remote = client.receive_remote_mr().await.unwrap();
    client.read(client.alloc_local_mr(layout(64)).unwrap(), 0..64, remote.addr_at(0)).await.unwrap();

    drop(server); // its QPs go to the error state and are destroyed
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut set = JoinSet::new();
    for i in 0..20usize {
        let c = Arc::clone(&client);
        set.spawn(async move {
            let dst = c.alloc_local_mr(layout(4096)).unwrap();
            c.read(dst, 0..4096, remote.checked_addr_at(i * 4096, 4096).unwrap()).await.map(drop)
        });
    }
    let outcomes = tokio::time::timeout(Duration::from_secs(10), async {
        let mut v = Vec::new();
        while let Some(r) = set.join_next().await {
            v.push(r.unwrap());
        }
        v
    })
    .await
    .expect("every waiting future answered within 10 s");
    assert_eq!(outcomes.len(), 20);
    for r in &outcomes {
        match r {
            Err(Error::Completion(e)) => {
                assert!(matches!(e.status, WcStatus::RETRY_EXC_ERR | WcStatus::WR_FLUSH_ERR), "{e}")
            }
            // The peer's TCP connection ended: the endpoint closed itself.
            Err(Error::Closed) => {}
            other => panic!("expected a completion error or Closed, got {other:?}"),
        }
    }
}

/// The harness's CM device address (an rxe device on a veth end).
fn cm_addr() -> std::net::SocketAddr {
    let ip: std::net::IpAddr = std::env::var("RRDDMMA_CM_ADDR")
        .expect("RRDDMMA_CM_ADDR is set by the harness (an rxe device on a veth end)")
        .parse()
        .expect("an IP address");
    std::net::SocketAddr::new(ip, 0)
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_CM_ADDR (cargo xtask test)"]
async fn connected_through_the_rdma_cm_by_ip_address() {
    use rrddmma::prim::cm::CmEventType;
    let o = opts();
    let l = Listener::bind_cm(cm_addr(), o.clone()).await.expect("listen through the CM");
    let addr = l.local_addr().unwrap();
    assert_ne!(addr.port(), 0);
    let server = tokio::spawn(async move {
        let ep = l.accept().await.expect("accept");
        // The server gets a message, then lends a region the client writes.
        let (got, buf) = ep.recv(ep.alloc_local_mr(layout(64)).unwrap()).await.unwrap();
        let mut b = vec![0u8; got.len];
        buf.read(0, &mut b);
        assert_eq!(b, b"hello through rdmacm");
        ep.send_local_mr(ep.alloc_local_mr(layout(4096)).unwrap()).await.unwrap();
        let back = ep.receive_local_mr().await.unwrap();
        let mut w = [0u8; 5];
        back.read(100, &mut w);
        assert_eq!(&w, b"wrote");
        ep
    });

    // A foreign client (plain rdmacm, not an endpoint's hello) is refused
    // with a reason, and the listener goes on serving.
    let foreign = tokio::task::spawn_blocking(move || {
        rrddmma::wrap::connect_rc_cm(addr, &rrddmma::wrap::CmOpts::default().private_data(b"not a hello".to_vec()))
    })
    .await
    .unwrap();
    match foreign {
        Err(rrddmma::prim::Error::CmEvent { got, private_data, .. }) => {
            assert_eq!(got, CmEventType::REJECTED);
            let why = String::from_utf8_lossy(&private_data);
            assert!(why.contains("not an RcEndpoint hello"), "{why}");
        }
        other => panic!("a foreign client must be rejected: {other:?}"),
    }

    let client = RcEndpoint::connect_cm(addr, &o).await.expect("connect through the CM");
    let mut msg = client.alloc_local_mr(layout(64)).unwrap();
    msg.write(0, b"hello through rdmacm");
    client.send(msg, 0..20).await.unwrap();
    let lent = client.receive_remote_mr().await.unwrap();
    let mut src = client.alloc_local_mr(layout(8)).unwrap();
    src.write(0, b"wrote");
    let src = client.write(src, 0..5, lent.checked_addr_at(100, 5).unwrap()).await.unwrap();
    let src = client.read(src, 0..5, lent.checked_addr_at(100, 5).unwrap()).await.unwrap();
    let mut r = [0u8; 5];
    src.read(0, &mut r);
    assert_eq!(&r, b"wrote");
    assert_eq!(client.fetch_add(lent.checked_addr_at(0, 8).unwrap(), 3).await.unwrap(), 0);
    assert_eq!(client.compare_swap(lent.checked_addr_at(0, 8).unwrap(), 3, 9).await.unwrap(), 3);
    client.send_remote_mr(lent).await.unwrap();
    let server = server.await.expect("server checks passed");

    // The peer vanishing (its CM id destroyed, its QPs gone): the server's
    // next operation fails within the retries, nothing hangs.
    drop(client);
    let t0 = std::time::Instant::now();
    let err =
        tokio::time::timeout(Duration::from_secs(20), server.send(server.alloc_local_mr(layout(8)).unwrap(), 0..8))
            .await
            .expect("no hang")
            .expect_err("the peer is gone");
    assert!(t0.elapsed() < Duration::from_secs(10), "answered within the retries ({:?})", t0.elapsed());
    // DISCONNECTED closed it (Closed, or the send posted just before was
    // flushed), or the send timed out first (with the default retry count,
    // 6: rxe would retry forever at 7).
    assert!(
        matches!(&err, Error::Closed)
            || matches!(&err, Error::Completion(e)
                if matches!(e.status, WcStatus::RETRY_EXC_ERR | WcStatus::WR_FLUSH_ERR)),
        "{err:?}"
    );
    // Every waiting call on the control protocol ends too.
    let r = tokio::time::timeout(Duration::from_secs(5), server.receive_local_mr()).await.expect("no hang");
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");

    // Nobody at a port: the CM's REJECTED, as a typed error.
    let none = std::net::SocketAddr::new(addr.ip(), addr.port().wrapping_add(1));
    match RcEndpoint::connect_cm(none, &o).await {
        Err(Error::Verbs(rrddmma::prim::Error::CmEvent { got, .. })) => assert_eq!(got, CmEventType::REJECTED),
        other => panic!("no listener: {other:?}"),
    }
}

/// Operations poll the CQ themselves (one poller at a time), beside the
/// driver: operations of one endpoint awaited on two threads at once (the
/// test's runtime and a second current-thread runtime on its own thread)
/// take each other's completions, and operations dropped right after their
/// first poll leave their buffers in the table until a poll (theirs never)
/// finds their completions. Every byte lands, no completion is lost and
/// every buffer comes back.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn operations_poll_the_cq_themselves_across_threads() {
    const TASKS: usize = 8;
    const EACH: usize = 50;
    const LEN: usize = 4096;
    let o = opts().pool_size(32 << 20);
    let (server, client) = pair(&o).await;
    let client = Arc::new(client);
    let table = server.alloc_local_mr(layout(TASKS * EACH * 8)).unwrap();
    server.send_local_mr(table).await.unwrap();
    let remote = client.receive_remote_mr().await.unwrap();
    let big = server.alloc_local_mr(layout(LEN)).unwrap();
    server.send_local_mr(big).await.unwrap();
    let big = client.receive_remote_mr().await.unwrap();
    let free_before = client.pool().free_bytes();

    // Task `t`: EACH writes of its own slots, each after a write dropped
    // after its first poll.
    let task = move |c: Arc<RcEndpoint>, t: usize| async move {
        for k in 0..EACH {
            let i = t * EACH + k;
            let mut junk = c.alloc_local_mr(layout(LEN)).unwrap();
            junk.write(0, &[0xee; 8]);
            let fut = c.write(junk, 0..LEN, big.checked_addr_at(0, LEN).unwrap());
            tokio::pin!(fut);
            tokio::select! {
                biased;
                _ = &mut fut => {}
                _ = std::future::ready(()) => {}
            }
            let mut src = c.alloc_local_mr(layout(8)).unwrap();
            src.write(0, &(i as u64 + 1).to_le_bytes());
            c.write(src, 0..8, remote.checked_addr_at(i * 8, 8).unwrap()).await?;
        }
        Ok::<(), Error>(())
    };
    // Half the tasks on a second thread with a runtime of its own.
    let c2 = Arc::clone(&client);
    let other = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut set = JoinSet::new();
            for t in TASKS / 2..TASKS {
                set.spawn(task(Arc::clone(&c2), t));
            }
            while let Some(r) = set.join_next().await {
                r.unwrap().unwrap();
            }
        })
    });
    let mut set = JoinSet::new();
    for t in 0..TASKS / 2 {
        set.spawn(task(Arc::clone(&client), t));
    }
    let outcome = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = set.join_next().await {
            r.unwrap().unwrap();
        }
    })
    .await;
    outcome.expect("every operation answered within 60 s");
    tokio::task::spawn_blocking(move || other.join())
        .await
        .unwrap()
        .expect("the second thread's operations all succeeded");
    let t0 = std::time::Instant::now();
    while client.in_flight() > 0 {
        assert!(t0.elapsed() < Duration::from_secs(30), "completions of dropped writes never came");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.pool().free_bytes(), free_before, "every buffer, dropped operations' too, back in the pool");
    for i in 0..TASKS * EACH {
        let dst = client.alloc_local_mr(layout(8)).unwrap();
        let dst = client.read(dst, 0..8, remote.checked_addr_at(i * 8, 8).unwrap()).await.unwrap();
        let mut b = [0u8; 8];
        dst.read(0, &mut b);
        assert_eq!(u64::from_le_bytes(b), i as u64 + 1, "slot {i}");
    }
}

/// A waiting operation that nothing else polls for is woken by the driver
/// when its completion arrives, however the driver waits: armed on the
/// completion channel and asleep (`spin_polls(0)`), after its adaptive spin
/// (the default), or spinning (`busy_poll`). Two receives wait, one in a
/// task of the endpoint's runtime and one on another thread with a runtime
/// of its own; the peer sends only once both have long been pending. Then
/// both endpoints are dropped and their tasks (driver, watch) end.
#[tokio::test(flavor = "current_thread")]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
async fn a_lone_waiting_operation_is_woken_and_the_driver_exits() {
    let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    for (name, o) in
        [("armed and asleep", opts().spin_polls(0)), ("adaptive spin", opts()), ("busy poll", opts().busy_poll(true))]
    {
        let before = tasks();
        let (server, client) = pair(&o).await;
        let client = Arc::new(client);
        let c = Arc::clone(&client);
        let here = tokio::spawn(async move {
            let (got, buf) = c.recv(c.alloc_local_mr(layout(64)).unwrap()).await?;
            Ok::<_, Error>((got, bytes(&buf, got.len)))
        });
        let c = Arc::clone(&client);
        let there = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let (got, buf) = c.recv(c.alloc_local_mr(layout(64)).unwrap()).await?;
                Ok::<_, Error>((got, bytes(&buf, got.len)))
            })
        });
        // Both receives are posted and pending, and the driver has gone
        // idle (armed and asleep, unless it busy-polls).
        let t0 = std::time::Instant::now();
        while client.in_flight() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(10), "{name}: the receives were never posted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!here.is_finished() && !there.is_finished(), "{name}: nothing was sent yet");
        for m in [b"late one", b"late two"] {
            let mut src = server.alloc_local_mr(layout(8)).unwrap();
            src.write(0, m);
            server.send(src, 0..8).await.unwrap();
        }
        let here = tokio::time::timeout(Duration::from_secs(10), here)
            .await
            .unwrap_or_else(|_| panic!("{name}: the task's receive was never woken"))
            .unwrap()
            .unwrap();
        let there = tokio::task::spawn_blocking(move || there.join()).await.unwrap().unwrap().unwrap();
        let mut got = [here.1, there.1];
        got.sort();
        assert_eq!(got, [b"late one".to_vec(), b"late two".to_vec()], "{name}");
        assert_eq!((here.0.len, here.0.imm, there.0.len), (8, None, 8), "{name}");
        assert_eq!(client.in_flight(), 0, "{name}");

        // Dropped: the driver and watch tasks of both endpoints exit.
        drop((server, client));
        let t0 = std::time::Instant::now();
        while tasks() > before {
            assert!(t0.elapsed() < Duration::from_secs(10), "{name}: {} tasks still alive", tasks() - before);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A task looping on operations whose completions are there at their
/// first poll (64-byte WRITEs on loopback) still yields to the runtime
/// (each poll spends tokio's task budget): on a current-thread runtime a
/// timer fires and the awaiting code runs beside the loop. The runtime
/// runs on a thread of its own, so a starved one fails the test (after
/// 120 s) instead of hanging it.
#[test]
#[ignore = "device test: needs RRDDMMA_TEST_DEVICE (cargo xtask test)"]
fn a_loop_of_operations_completing_at_once_yields_to_the_runtime() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let r = rt.block_on(async {
            let (server, client) = pair(&opts()).await;
            server.send_local_mr(server.alloc_local_mr(layout(64)).unwrap()).await.unwrap();
            let remote = client.receive_remote_mr().await.unwrap();
            let client = Arc::new(client);
            let stop = Arc::new(AtomicBool::new(false));
            let (c, s) = (Arc::clone(&client), Arc::clone(&stop));
            let looping = tokio::spawn(async move {
                let mut src = c.alloc_local_mr(layout(64)).unwrap();
                let mut n = 0u64;
                while !s.load(Ordering::Relaxed) {
                    src = c.write(src, 0..64, remote.addr_at(0)).await?;
                    n += 1;
                }
                Ok::<_, Error>(n)
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            let early = looping.is_finished();
            stop.store(true, Ordering::Relaxed);
            (early, looping.await.unwrap())
        });
        let _ = tx.send(r);
    });
    let (early, n) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the runtime was starved: the timer never fired while the loop of writes ran");
    assert!(!early, "the loop ended before it was told to: {n:?}");
    let n = n.expect("every write succeeded");
    assert!(n > 0, "the loop ran");
    eprintln!("{n} writes in the loop while the timer ran");
}
