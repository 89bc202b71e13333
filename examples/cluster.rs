//! Every rank writes to every other rank, then a barrier, then each checks
//! what it received.
//!
//! The cluster comes from the environment ([`ClusterConfig::from_env`]):
//! under `mpirun` or `srun` the rank and size come from the launcher, and
//! `RRDDMMA_COORDINATOR` says where rank 0 listens; or list every rank in
//! `RRDDMMA_HOSTS` and let each find itself by its local address.
//! `RRDDMMA_DEVICES` names each rank's device (default: the first device).
//!
//! ```text
//! mpirun -np 3 -x RRDDMMA_COORDINATOR=node0:18650 target/release/examples/cluster
//! RRDDMMA_HOSTS=10.0.0.1,10.0.0.2,10.0.0.3 target/release/examples/cluster   # on each host
//! ```

use std::process::ExitCode;
use std::time::Instant;

use rrddmma::ctrl::{ClusterConfig, Session};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Pd, QpCaps, SendWr, Wc, WcStatus};
use rrddmma::wrap::{connect_rc_mesh, MeshOpts, RegisteredMem};

/// Bytes each rank owns in every other rank's memory.
const SLOT: usize = 64;

fn message(from: u32, to: u32) -> String {
    format!("rank {from} wrote this to rank {to}")
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let cfg = ClusterConfig::from_env()?;
    let start = Instant::now();
    let mut s = Session::join(&cfg)?;
    let (rank, size) = (s.rank(), s.size());
    let ctx = match s.device() {
        Some(name) => Context::open(name)?,
        None => Context::open_first()?,
    };
    let port = 1;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 2 * size)?;
    let mut mem = RegisteredMem::new(&pd, 2 * SLOT * size as usize)?;
    let connect = ConnectOpts::default().port(port).access(AccessFlags::REMOTE_WRITE);
    let qps = connect_rc_mesh(
        &mut s,
        &pd,
        &cq,
        &cq,
        &MeshOpts::default().caps(QpCaps::default()).connect(connect).psn(rrddmma::prim::random_psn()),
    )?;
    let tokens = s.exchange_mrs(&mem.remote())?;

    // Write our message into slot `rank` of every peer; the second half of
    // our memory stages what we send.
    let staging = SLOT * size as usize;
    let mut posted = 0;
    for (peer, qp) in qps.iter().enumerate() {
        let Some(qp) = qp else { continue };
        let msg = message(rank, peer as u32);
        let at = staging + SLOT * peer;
        mem.write(at, msg.as_bytes());
        let sge = [mem.sge(at..at + msg.len())];
        let remote = tokens[peer].addr_at(SLOT * rank as usize);
        // SAFETY: `mem` outlives the completions polled below.
        unsafe { qp.post_send(&mut [SendWr::write(&sge, remote).wr_id(peer as u64).signaled()]) }?;
        posted += 1;
    }
    let mut wc = [Wc::default(); 8];
    let mut done = 0;
    while done < posted {
        let n = cq.poll(&mut wc)?;
        for c in &wc[..n] {
            if c.status() != WcStatus::SUCCESS {
                return Err(format!("rank {rank}: write to rank {} failed: {c:?}", c.wr_id()).into());
            }
            done += 1;
        }
    }
    s.barrier()?;
    for from in (0..size).filter(|&f| f != rank) {
        let want = message(from, rank);
        let mut got = vec![0u8; want.len()];
        mem.read(SLOT * from as usize, &mut got);
        if got != want.as_bytes() {
            return Err(format!("rank {rank}: slot of rank {from} holds {:?}", String::from_utf8_lossy(&got)).into());
        }
    }
    // Nobody tears down its QPs while a peer may still be checking.
    s.barrier()?;
    Ok(format!(
        "rank {rank}/{size} on {} ({:?}): verified writes from {} peers in {:.1} ms",
        ctx.name(),
        cfg.resolve(&|k| std::env::var(k).ok()).map(|r| r.rank_source)?,
        size - 1,
        start.elapsed().as_secs_f64() * 1e3
    ))
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Each error prints its own message; its causes follow.
            let mut line = format!("cluster: {e}");
            let mut cause = e.source();
            while let Some(c) = cause {
                line += &format!(": {c}");
                cause = c.source();
            }
            eprintln!("{line}");
            ExitCode::FAILURE
        }
    }
}
