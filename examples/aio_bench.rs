//! Round-trip cost of one 64-byte RDMA WRITE (post, completion, wake-up)
//! through the async layer beside the synchronous paths, on one device in
//! one run: `aio_bench DEVICE [ITERS] [ROUNDS]`.
//!
//! Paths: `sync-spin` (post, `Cq::spin_one`), `sync-event` (post,
//! `Cq::wait_one` sleeping on the channel), `async-event` (`write().await`,
//! the driver sleeping on the channel), `async-busy` (the driver
//! busy-polling), and `async-32` (32 writes in flight, ops/s). The rounds
//! alternate the paths; the table gives each path's median over the
//! rounds, its spread (min-max) and its ratio to `sync-spin`.

mod cli;

use std::alloc::Layout;
use std::time::{Duration, Instant};

use rrddmma::prim::{AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, QpCaps, SendWr};
use rrddmma::wrap::aio::{AioOpts, Listener, RcEndpoint};
use rrddmma::wrap::{connected_rc_pair, RegisteredMem};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Microseconds per operation of the synchronous path.
fn sync_path(dev: &str, iters: usize, sleep: bool) -> Result<f64> {
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let ch = CompChannel::create(&ctx)?;
    let cq: Cq = if sleep { Cq::builder(&ctx, 64).channel(&ch).build()? } else { Cq::create(&ctx, 64)? };
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE);
    let (a, _b) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0, &opts)?;
    let mem = RegisteredMem::new(&pd, 128)?;
    let src = [mem.sge(0..64)];
    let dst = mem.remote().addr_at(64);
    let t = Instant::now();
    for i in 0..iters {
        // SAFETY: `mem` outlives every completion awaited below.
        unsafe { a.post_send(&mut [SendWr::write(&src, dst).wr_id(i as u64).signaled()])? };
        let wc = if sleep { cq.wait_one(Duration::from_secs(10))? } else { cq.spin_one(Duration::from_secs(10))? };
        wc.ok_or("no completion")?.ok()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / iters as f64)
}

/// Microseconds per operation of the async path (`inflight` at a time).
async fn async_path(dev: &str, iters: usize, busy: bool, inflight: usize) -> Result<f64> {
    let o = AioOpts::new(dev).busy_poll(busy);
    let l = Listener::bind("127.0.0.1:0", o.clone()).await?;
    let addr = l.local_addr()?;
    let (server, client) = tokio::join!(l.accept(), RcEndpoint::connect(addr, &o));
    let (server, client) = (server?, client?);
    let target = server.alloc_local_mr(Layout::from_size_align(64 * inflight, 64)?)?;
    let len = target.len() as u64;
    server.send_local_mr(target).await?;
    let remote = client.receive_remote_mr().await?;
    assert_eq!(remote.len, len);
    let mut bufs: Vec<_> = (0..inflight)
        .map(|_| client.alloc_local_mr(Layout::from_size_align(64, 64).unwrap()))
        .collect::<std::result::Result<_, _>>()?;
    let t = Instant::now();
    for _ in 0..iters / inflight {
        let futs = bufs.drain(..).enumerate().map(|(j, b)| client.write(b, 0..64, remote.addr_at(64 * j)));
        let mut out = Vec::with_capacity(inflight);
        for f in futs.collect::<Vec<_>>() {
            out.push(f);
        }
        // Await all of this batch together.
        let done = join_all(out).await;
        for d in done {
            bufs.push(d?);
        }
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / (iters / inflight * inflight) as f64)
}

/// Awaits every future of `v` (polled together), in order.
async fn join_all<F: std::future::Future>(v: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<_> = v.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..futs.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("every future finished")).collect()
}

fn main() -> Result<()> {
    const USAGE: &str = "Usage: aio_bench DEVICE [ITERS] [ROUNDS]";
    let a = cli::operands(USAGE);
    let dev = a.first().ok_or(USAGE)?;
    let iters: usize = a.get(1).map_or(Ok(2000), |s| s.parse())?;
    let rounds: usize = a.get(2).map_or(Ok(5), |s| s.parse())?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let names = ["sync-spin", "sync-event", "async-event", "async-busy", "async-32"];
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for r in 0..rounds {
        // Alternate the order from round to round.
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.rotate_left(r % names.len());
        for i in order {
            let v = match i {
                0 => sync_path(dev, iters, false)?,
                1 => sync_path(dev, iters, true)?,
                2 => rt.block_on(async_path(dev, iters, false, 1))?,
                3 => rt.block_on(async_path(dev, iters, true, 1))?,
                _ => rt.block_on(async_path(dev, iters, false, 32))?,
            };
            us[i].push(v);
        }
    }
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    };
    let base = median(&us[0]);
    println!("| path | median µs/op | spread (min-max) µs | ops/s | ratio to sync-spin |");
    println!("|---|---|---|---|---|");
    for (i, n) in names.iter().enumerate() {
        let m = median(&us[i]);
        let (lo, hi) = us[i].iter().fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        println!("| {n} | {m:.2} | {lo:.2}-{hi:.2} | {:.0} | {:.2}x |", 1e6 / m, m / base);
    }
    Ok(())
}
