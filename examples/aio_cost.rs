//! The async rows of `cargo xtask bench-verbs`: one 64-byte RDMA WRITE per
//! operation, BATCH in flight, each signaled and awaited, through
//!
//! - `event`: the synchronous event path (`prim` on a CQ with a completion
//!   channel: one `Qp::post_send` per request, then `Cq::wait_one` per
//!   completion: poll; when empty, arm, poll, sleep on the channel);
//! - `local`: `wrap::aio::LocalEndpoint::write` awaited (BATCH futures
//!   joined) under [`LocalEndpoint::block_on`], which posts the requests
//!   queued in a pass as one list and sleeps on the same channel; a request
//!   polled while nothing is in flight is posted at once and the CQ polled
//!   in the same poll (`post_when_idle`, the default);
//! - `local-queue`: `local` with `post_when_idle(false)`: every request
//!   joins the queue (one doorbell per pass);
//! - `local-tokio`: the `local` endpoint under tokio's current-thread
//!   `block_on` (each operation posts, drains and wakes itself);
//! - `rc`: the `Sync` endpoint, `wrap::aio::RcEndpoint::write` under
//!   tokio's current-thread `block_on` (its driver task, which polls the
//!   CQ and hands completions over, runs on the same thread and is
//!   counted), connected to a second `RcEndpoint` over loopback TCP.
//!
//! callgrind counts only the functions named `verbs_cost_*`, each of which
//! runs the whole measured loop; the per-operation figure is the
//! difference of two runs over the difference of their operations.
//!
//! ```text
//! cargo run --release --features tokio --example aio_cost -- DEVICE event|local|local-queue|local-tokio|rc BATCH ITERATIONS
//! ```

mod cli;

use std::alloc::Layout;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use rrddmma::prim::{AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, RemoteAddr, SendWr};
use rrddmma::wrap::aio::{AioOpts, Listener, LocalEndpoint, LocalMr, MrPool, RcEndpoint};
use rrddmma::wrap::RegisteredMem;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "Usage: aio_cost DEVICE event|local|local-queue|local-tokio|rc BATCH ITERATIONS";

/// Bytes per operation.
const SIZE: usize = 64;

#[cold]
#[inline(never)]
fn die(what: &str, e: impl std::fmt::Debug) -> ! {
    eprintln!("{what}: {e:?}");
    std::process::exit(1)
}

/// The synchronous event path: ITERATIONS batches of BATCH WRITEs.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_event(qp: &Qp, cq: &Cq, mem: &RegisteredMem, remote: RemoteAddr, batch: usize, iters: usize) {
    for _ in 0..iters {
        for j in 0..batch {
            let sge = [mem.sge(j * SIZE..(j + 1) * SIZE)];
            let at = RemoteAddr { addr: remote.addr + (j * SIZE) as u64, rkey: remote.rkey };
            // SAFETY: `mem` outlives every completion awaited below.
            if let Err(e) = unsafe { qp.post_send(&mut [SendWr::write(&sge, at).wr_id(j as u64).signaled()]) } {
                die("post_send", e)
            }
        }
        for _ in 0..batch {
            match cq.wait_one(Duration::from_secs(10)) {
                Ok(Some(wc)) if wc.is_success() => {}
                other => die("wait_one", other.map(|w| w.map(|w| w.status()))),
            }
        }
    }
}

/// ITERATIONS batches of BATCH awaited WRITEs, `write(buffer, j)` writing
/// buffer `j` to its place, as one future.
async fn rounds<W, F>(write: W, bufs: &mut [Option<LocalMr>], iters: usize)
where
    W: Fn(LocalMr, usize) -> F,
    F: Future<Output = rrddmma::wrap::aio::Result<LocalMr>>,
{
    if bufs.len() == 1 {
        for _ in 0..iters {
            let b = bufs[0].take().expect("buffer");
            bufs[0] = Some(write(b, 0).await.unwrap_or_else(|e| die("write", e)));
        }
        return;
    }
    // The futures' `Vec` is reused: no allocation per batch. An operation
    // is done when its buffer is back.
    let mut futs = Vec::with_capacity(bufs.len());
    for _ in 0..iters {
        futs.extend(bufs.iter_mut().enumerate().map(|(j, b)| write(b.take().expect("buffer"), j)));
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, b) in futs.iter_mut().zip(bufs.iter_mut()) {
                if b.is_some() {
                    continue;
                }
                // SAFETY: the futures stay in the `Vec`'s buffer, which is
                // neither moved nor resized until they are all finished.
                match unsafe { Pin::new_unchecked(f) }.poll(cx) {
                    Poll::Ready(r) => *b = Some(r.unwrap_or_else(|e| die("write", e))),
                    Poll::Pending => pending = true,
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        futs.clear();
    }
}

/// `LocalEndpoint` under its own `block_on`.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_local(ep: &LocalEndpoint, bufs: &mut [Option<LocalMr>], remote: RemoteAddr, iters: usize) {
    ep.block_on(rounds(|b, j| ep.write(b, 0..SIZE, at(remote, j)), bufs, iters));
}

/// `LocalEndpoint` under tokio's current-thread `block_on`.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_local_tokio(
    rt: &tokio::runtime::Runtime,
    ep: &LocalEndpoint,
    bufs: &mut [Option<LocalMr>],
    remote: RemoteAddr,
    iters: usize,
) {
    rt.block_on(rounds(|b, j| ep.write(b, 0..SIZE, at(remote, j)), bufs, iters));
}

/// `RcEndpoint` under tokio's current-thread `block_on`.
#[no_mangle]
#[inline(never)]
pub fn verbs_cost_rc(
    rt: &tokio::runtime::Runtime,
    ep: &RcEndpoint,
    bufs: &mut [Option<LocalMr>],
    remote: RemoteAddr,
    iters: usize,
) {
    rt.block_on(rounds(|b, j| ep.write(b, 0..SIZE, at(remote, j)), bufs, iters));
}

/// Where buffer `j`'s WRITE goes.
#[inline]
fn at(remote: RemoteAddr, j: usize) -> RemoteAddr {
    RemoteAddr { addr: remote.addr + (j * SIZE) as u64, rkey: remote.rkey }
}

/// The `rc` side: two `RcEndpoint`s over loopback TCP, the client's WRITEs
/// into a region of the server's.
fn rc(dev: &str, batch: usize, warm: usize, iters: usize) -> Res<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // A wide set-up bound: under callgrind in the emulated VM on a loaded
    // machine the handshake (a 16 MiB pool registered on each side) can
    // take longer than the default 10 s, and the listener then drops the
    // client.
    let o = AioOpts::new(dev).setup_timeout(Duration::from_secs(120));
    let (server, client, remote, mut bufs) = rt.block_on(async {
        let l = Listener::bind("127.0.0.1:0", o.clone()).await?;
        let addr = l.local_addr()?;
        let (s, c) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
        let (s, c) = (s?, c?);
        let target = s.alloc_local_mr(Layout::from_size_align(SIZE * batch, 64)?)?;
        s.send_local_mr(target).await?;
        let remote = c.receive_remote_mr().await?.addr_at(0);
        let one = Layout::from_size_align(SIZE, 64)?;
        let bufs: Vec<_> = (0..batch).map(|_| c.alloc_local_mr(one).map(Some)).collect::<Result<_, _>>()?;
        Ok::<_, Box<dyn std::error::Error>>((s, c, remote, bufs))
    })?;
    verbs_cost_rc(&rt, &client, &mut bufs, remote, warm);
    verbs_cost_rc(&rt, &client, &mut bufs, remote, iters);
    drop((server, client));
    Ok(())
}

fn main() -> Res<()> {
    let args = cli::operands(USAGE);
    let [dev, kind, batch, iters] = &args[..] else {
        return Err(USAGE.into());
    };
    let batch: usize = batch.parse()?;
    let iters: usize = iters.parse()?;
    if !["event", "local", "local-queue", "local-tokio", "rc"].contains(&kind.as_str()) || !(1..=32).contains(&batch) {
        return Err(USAGE.into());
    }
    // A warm-up of 64 operations through the same function: counted too,
    // and cancelled by the difference of two runs.
    let warm = 64usize.div_ceil(batch);
    if kind == "rc" {
        return rc(dev, batch, warm, iters);
    }
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let ch = CompChannel::create(&ctx)?;
    let cq = Cq::builder(&ctx, 128).channel(&ch).build()?;
    let peer_cq = Cq::create(&ctx, 128)?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    let caps = QpCaps::default().max_send_wr(64).max_recv_wr(64);
    // The QP completes to `cq` alone (a `LocalEndpoint` is its CQ's only
    // poller), its peer to `peer_cq`.
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(caps).build()?;
    let peer = Qp::builder(&pd, QpType::RC, &peer_cq, &peer_cq).caps(caps).build()?;
    let gid = opts.gid_index_on(&ctx)?;
    let opts = opts.gid_index(Some(gid));
    let (e, pe) = (qp.endpoint(opts.get_port(), gid, 1)?, peer.endpoint(opts.get_port(), gid, 2)?);
    qp.connect(&pe, e.psn, &opts)?;
    peer.connect(&e, pe.psn, &opts)?;
    let target = RegisteredMem::new(&pd, SIZE * batch)?;
    let remote = target.remote().addr_at(0);
    if kind == "event" {
        let mem = RegisteredMem::new(&pd, SIZE * batch)?;
        verbs_cost_event(&qp, &cq, &mem, remote, batch, warm);
        verbs_cost_event(&qp, &cq, &mem, remote, batch, iters);
        return Ok(());
    }
    let ep =
        LocalEndpoint::new(qp, cq, MrPool::new(&pd, 64 * SIZE * batch + 4096)?).post_when_idle(kind != "local-queue");
    let one = Layout::from_size_align(SIZE, 64)?;
    let mut bufs: Vec<_> = (0..batch).map(|_| ep.alloc_local_mr(one).map(Some)).collect::<Result<_, _>>()?;
    if kind != "local-tokio" {
        verbs_cost_local(&ep, &mut bufs, remote, warm);
        verbs_cost_local(&ep, &mut bufs, remote, iters);
    } else {
        let rt = tokio::runtime::Builder::new_current_thread().build()?;
        verbs_cost_local_tokio(&rt, &ep, &mut bufs, remote, warm);
        verbs_cost_local_tokio(&rt, &ep, &mut bufs, remote, iters);
    }
    Ok(())
}
