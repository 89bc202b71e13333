//! RC ping-pong with rrddmma: a loopback pair, 10 rounds of a 64-byte
//! message each way, every payload checked. `pingpong-rrddmma DEVICE`.

use rrddmma::prim::{AccessFlags, ConnectOpts, Context, Cq, Pd, QpCaps, RecvWr, SendWr, Wc};
use rrddmma::wrap::{connected_rc_pair, RegisteredMem};

fn wait(cq: &Cq, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let (mut wcs, mut got) = ([Wc::default(); 2], 0);
    while got < n {
        let k = cq.poll(&mut wcs)?;
        if let Some(bad) = wcs[..k].iter().find(|wc| !wc.is_success()) {
            return Err(format!("completion failed: {bad:?}").into());
        }
        got += k;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = std::env::args().nth(1).ok_or("usage: pingpong-rrddmma DEVICE")?;
    let ctx = Context::open(&dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 16)?;
    let opts = ConnectOpts::default().access(AccessFlags::LOCAL_WRITE);
    let (a, b) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0, &opts)?;
    let mut mem = RegisteredMem::new(&pd, 256)?;
    for round in 0..10u8 {
        for (from, to, at) in [(&a, &b, 0), (&b, &a, 128)] {
            mem.write(at, &[round; 64]);
            let (src, dst) = ([mem.sge(at..at + 64)], [mem.sge(at + 64..at + 128)]);
            // SAFETY: both entries lie in `mem`, which outlives the requests;
            // `wait` takes both completions before `mem` is touched again.
            unsafe {
                to.post_recv(&mut [RecvWr::new(&dst, 1)])?;
                from.post_send(&mut [SendWr::send(&src).signaled()])?;
            }
            wait(&cq, 2)?;
            let mut got = [0u8; 64];
            mem.read(at + 64, &mut got);
            if got != [round; 64] {
                return Err(format!("round {round}: wrong payload {got:?}").into());
            }
        }
    }
    println!("pingpong ok: 10 rounds");
    Ok(())
}
