//! DC target + indirect memory key across two processes: rank 0 owns three
//! separate regions, lays one indirect key over a 16-byte range of each
//! (`wrap::dc::indirect_mkey`: one call, no QP of its own) and hands the
//! key's token to rank 1 with its DC target (`DcMesh`, which exchanges the
//! `DctInfo`s through `ctrl::Session`); rank 1 WRITEs 48 bytes through the
//! key with one DC request, and rank 0 checks that each region got its 16
//! bytes, in order, and nothing else.
//!
//! On a device without DC or indirect keys (not mlx5, e.g. SoftRoCE) both
//! refusals are printed (`unsupported: ...`) and the RC fallback runs:
//! `DcMesh` connects RC QPs, and rank 1 WRITEs each range through its own
//! region's token (three requests, the refusal's way out); the same check.
//! Exit status 0 when the check passes.
//!
//! ```text
//! cargo run --example dc_mkey -- [DEVICE]
//! ```

mod cli;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use rrddmma::ctrl::{ClusterConfig, RankSource, Resolved, Session};
use rrddmma::mlx5dv::umr::{MkeyConf, MkeyLayout, MrRange};
use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Pd, RemoteMr, SendWr, Srq};
use rrddmma::wrap::dc::{indirect_mkey, DcMesh, DcMeshOpts, DciPoolOpts, PostError};
use rrddmma::wrap::RegisteredMem;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "usage: dc_mkey [DEVICE]";
/// Bytes of each region the key covers, from `OFFSET`.
const RANGE: usize = 16;
const OFFSET: usize = 8;

fn main() {
    let ops = cli::operands(USAGE);
    let dev = match ops.first() {
        Some(d) => d.clone(),
        None => match Context::open_first() {
            Ok(c) => c.name().to_string(),
            Err(e) => {
                eprintln!("dc_mkey: {e}");
                std::process::exit(1)
            }
        },
    };
    let r = match ops.get(1).map(String::as_str) {
        // The second process: `dc_mkey DEVICE rank1 COORDINATOR`.
        Some("rank1") => ops.get(2).ok_or("rank1: no coordinator").map_err(Into::into).and_then(|c| {
            let coordinator: SocketAddr = c.parse()?;
            rank(&dev, 1, coordinator)
        }),
        Some(other) => {
            eprintln!("dc_mkey: unexpected operand {other:?}\n{USAGE}");
            std::process::exit(2)
        }
        None => parent(&dev),
    };
    if let Err(e) = r {
        eprintln!("dc_mkey: {e}");
        std::process::exit(1);
    }
}

/// Rank 0 here, rank 1 as a second process of this program.
fn parent(dev: &str) -> Result<()> {
    let coordinator = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut child =
        std::process::Command::new(std::env::current_exe()?).args([dev, "rank1", &coordinator.to_string()]).spawn()?;
    let r = rank(dev, 0, coordinator);
    let status = child.wait()?;
    r?;
    if !status.success() {
        return Err(format!("rank 1 failed ({status})").into());
    }
    println!("dc_mkey: ok");
    Ok(())
}

/// The 48 bytes rank 1 writes.
fn payload() -> Vec<u8> {
    (0..3 * RANGE as u8).map(|i| i.wrapping_mul(7) ^ 0x5a).collect()
}

fn rank(dev: &str, rank: u32, coordinator: SocketAddr) -> Result<()> {
    let mut cfg = ClusterConfig::default();
    cfg.op_timeout = Duration::from_secs(20);
    let place = Resolved { rank, size: 2, coordinator, rank_source: RankSource::Config, device: None };
    let mut s = Session::join_as(&cfg, &place)?;
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let (send_cq, recv_cq) = (Cq::create(&ctx, 64)?, Cq::create(&ctx, 64)?);
    let srq = Srq::builder(&pd).max_wr(8).build()?;
    let opts = DcMeshOpts::default()
        .pool(DciPoolOpts::default().dcis(1))
        .key(0x0dc0_0000 + u64::from(rank))
        .access(AccessFlags::REMOTE_WRITE);
    // The DCT directory through the session; RC where a rank lacks DC.
    let mut mesh = DcMesh::connect(&mut s, &pd, &send_cq, &recv_cq, &srq, &opts)?;
    if let Some(why) = mesh.refusal() {
        println!("rank {rank}: unsupported: {why}");
        println!("rank {rank}: RC fallback ({} QP)", mesh.qps());
    } else {
        println!("rank {rank}: DC: {} QPs (one DCI, one DCT)", mesh.qps());
    }
    if rank == 0 {
        target(&mut s, &pd, &mesh)
    } else {
        writer(&mut s, &pd, &mut mesh)
    }
}

/// Rank 0: three regions, one key over them (or, without indirect keys,
/// a token per region), then the check.
fn target(s: &mut Session, pd: &Pd, mesh: &DcMesh) -> Result<()> {
    let regions = [RegisteredMem::new(pd, 64)?, RegisteredMem::new(pd, 64)?, RegisteredMem::new(pd, 64)?];
    let ranges: Vec<MrRange<'_>> = regions.iter().map(|m| MrRange { mr: m.mr(), offset: OFFSET, len: RANGE }).collect();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let conf = MkeyConf { access: Some(access), layout: Some(MkeyLayout::List(&ranges)) };
    // One call: the key created and laid out, no QP of ours.
    let key = match indirect_mkey(pd, 4, conf, &ConnectOpts::default()) {
        Ok(k) => {
            println!("rank 0: indirect key {:#x} over {} regions", k.rkey(), k.held_regions());
            Some(k)
        }
        Err(e) => {
            println!("rank 0: unsupported: {e}");
            None
        }
    };
    // Both ranks learn the mode from round 0: a token of 48 bytes is the
    // key's; else one round per region.
    match &key {
        Some(k) => {
            let at = k.addr_at(0);
            s.exchange_mrs(&RemoteMr { addr: at.addr, len: (3 * RANGE) as u64, rkey: at.rkey })?;
        }
        None => {
            for m in &regions {
                s.exchange_mrs(&m.remote())?;
            }
        }
    }
    s.barrier()?; // rank 1's WRITEs have completed
    let want = payload();
    for (i, m) in regions.iter().enumerate() {
        let mut got = [0u8; 64];
        m.read(0, &mut got);
        if got[OFFSET..OFFSET + RANGE] != want[i * RANGE..(i + 1) * RANGE] {
            return Err(format!("region {i}: {:?}, not its 16 bytes", &got[OFFSET..OFFSET + RANGE]).into());
        }
        if got[..OFFSET].iter().chain(&got[OFFSET + RANGE..]).any(|&b| b != 0) {
            return Err(format!("region {i}: bytes outside its range were written").into());
        }
    }
    let how = if key.is_some() { "one DC WRITE through the indirect key" } else { "three RC WRITEs, a token each" };
    println!("rank 0: 3 regions x {RANGE} bytes checked ({how}, mesh over {})", if mesh.is_dc() { "DC" } else { "RC" });
    s.barrier()?;
    Ok(())
}

/// Rank 1: WRITEs the payload through the key (one request), or through
/// the three regions' tokens.
fn writer(s: &mut Session, pd: &Pd, mesh: &mut DcMesh) -> Result<()> {
    let mut src = RegisteredMem::new(pd, 64)?;
    src.write(0, &payload());
    let first = s.exchange_mrs(&src.remote())?[0];
    let tokens = if first.len == (3 * RANGE) as u64 {
        vec![(first, 0, 3 * RANGE)]
    } else {
        let mut t = vec![(first, OFFSET, RANGE)];
        for _ in 1..3 {
            t.push((s.exchange_mrs(&src.remote())?[0], OFFSET, RANGE));
        }
        t
    };
    let mut from = 0;
    for (i, (tok, at, len)) in tokens.iter().enumerate() {
        let sge = [src.sge(from..from + len)];
        let wr = SendWr::write(&sge, tok.checked_addr_at(*at, *len)?);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: `src` outlives the completion polled below.
            match unsafe { mesh.post(0, &wr, i as u64) } {
                Ok(()) => break,
                Err(PostError::Busy(_)) if Instant::now() < deadline => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut out = [None; 4];
        let c = loop {
            if mesh.poll(&mut out)? > 0 {
                break out[0].ok_or("a completion")?;
            }
            if Instant::now() > deadline {
                return Err("no completion of the WRITE within 10 s".into());
            }
        };
        if !c.status.is_success() {
            return Err(format!("WRITE {i} completed with {}", c.status).into());
        }
        from += len;
    }
    println!("rank 1: wrote {from} bytes in {} request(s)", tokens.len());
    s.barrier()?;
    s.barrier()?;
    Ok(())
}
