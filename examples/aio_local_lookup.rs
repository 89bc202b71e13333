//! Coroutine-style one-sided reads on one thread: 32 lookups in flight in a
//! remote hash table through `wrap::aio::LocalEndpoint`.
//!
//! The "remote" table is a registered region of a second QP of the same
//! device (connected to the first, as two machines would be): 1,024
//! buckets of 16 bytes (key, value), filled with open addressing. Each
//! lookup is a coroutine that READs the bucket its key hashes to and
//! probes on until it finds the key; 32 run at once, all polled by the
//! endpoint's own `block_on` on one thread: the READs of one pass are
//! posted as one list (one doorbell), and the thread sleeps on the CQ's
//! completion channel while none has completed.
//!
//! ```text
//! aio_local_lookup DEVICE
//! ```

use std::alloc::Layout;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use rrddmma::prim::{AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpType, RemoteMr};
use rrddmma::wrap::aio::{LocalEndpoint, MrPool};
use rrddmma::wrap::RegisteredMem;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const BUCKETS: usize = 1024;
const BUCKET: usize = 16;
const IN_FLIGHT: u64 = 32;

/// The bucket of `key`: an index, so a `usize`, which the local and the
/// remote offsets take alike (`BUCKET * i`).
fn hash(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) as usize
}

/// One lookup: READ the bucket `key` hashes to, probe on until the key.
async fn lookup(ep: &LocalEndpoint, table: RemoteMr, key: u64) -> Result<u64> {
    let mut buf = ep.alloc_local_mr(Layout::from_size_align(BUCKET, 8)?)?;
    let mut i = hash(key);
    for _ in 0..BUCKETS {
        buf = ep.read(buf, 0..BUCKET, table.addr_at(i * BUCKET)).await?;
        let mut b = [0u8; BUCKET];
        buf.read(0, &mut b);
        let (k, v) = (u64::from_le_bytes(b[..8].try_into()?), u64::from_le_bytes(b[8..].try_into()?));
        if k == key {
            return Ok(v);
        }
        i = (i + 1) % BUCKETS;
    }
    Err(format!("key {key} not in the table").into())
}

fn main() -> Result<()> {
    let dev = std::env::args().nth(1).ok_or("usage: aio_local_lookup DEVICE")?;
    let ctx = Context::open(&dev)?;
    let pd = Pd::alloc(&ctx)?;
    let ch = CompChannel::create(&ctx)?;
    let (cq, peer_cq) = (Cq::builder(&ctx, 256).channel(&ch).build()?, Cq::create(&ctx, 256)?);
    // Many READs in flight on one QP: the READ depths (how many the QP keeps
    // outstanding, and how many of the peer's it serves at once) are the
    // device's, not `Qp::connect`'s default of 1, under which every READ
    // waits for the one before it at the responder.
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_READ).with_device_rd_atomic(&ctx)?;
    // The QP completes to `cq` alone (the endpoint is its CQ's only
    // poller), the peer to `peer_cq`.
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build()?;
    let peer = Qp::builder(&pd, QpType::RC, &peer_cq, &peer_cq).build()?;
    let gid = opts.gid_index_on(&ctx)?;
    let opts = opts.gid_index(Some(gid));
    let (e, pe) = (qp.endpoint(opts.get_port(), gid, 1)?, peer.endpoint(opts.get_port(), gid, 2)?);
    qp.connect(&pe, e.psn, &opts)?;
    peer.connect(&e, pe.psn, &opts)?;
    // The table, on the peer's side: key k + 1 holds value k * 3.
    let mut table = RegisteredMem::new(&pd, BUCKETS * BUCKET)?;
    for k in 1..=512u64 {
        let mut i = hash(k);
        let taken = |t: &RegisteredMem, i: usize| {
            let mut key = [0u8; 8];
            t.read(i * BUCKET, &mut key);
            key != [0u8; 8]
        };
        while taken(&table, i) {
            i = (i + 1) % BUCKETS;
        }
        let at = i * BUCKET;
        table.write(at, &k.to_le_bytes());
        table.write(at + 8, &(k * 3).to_le_bytes());
    }
    let remote = table.remote();
    let ep = LocalEndpoint::new(qp, cq, MrPool::new(&pd, 1 << 16)?);
    let mut found = 0;
    for round in 0..4u64 {
        let mut lookups: Vec<Pin<Box<dyn Future<Output = Result<u64>> + '_>>> =
            (0..IN_FLIGHT).map(|j| Box::pin(lookup(&ep, remote, round * IN_FLIGHT + j + 1)) as _).collect();
        let mut out: Vec<Option<Result<u64>>> = lookups.iter().map(|_| None).collect();
        ep.block_on(std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, o) in lookups.iter_mut().zip(out.iter_mut()) {
                if o.is_none() {
                    match f.as_mut().poll(cx) {
                        Poll::Ready(r) => *o = Some(r),
                        Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }));
        for (j, r) in out.into_iter().enumerate() {
            let key = round * IN_FLIGHT + j as u64 + 1;
            let v = r.expect("every lookup finished")?;
            assert_eq!(v, key * 3, "lookup of {key}");
            found += 1;
        }
    }
    println!("{found} lookups, {IN_FLIGHT} in flight on one thread, every value checked");
    Ok(())
}
