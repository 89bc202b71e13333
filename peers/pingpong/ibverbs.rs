//! RC ping-pong with the ibverbs crate, as its loopback example: a loopback
//! pair, 10 rounds of a 64-byte message each way, every payload checked.
//! `pingpong-ibverbs DEVICE [GID_INDEX]`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = std::env::args().nth(1).ok_or("usage: pingpong-ibverbs DEVICE [GID_INDEX]")?;
    let gid_index: u32 = std::env::args().nth(2).map(|g| g.parse()).transpose()?.unwrap_or(1);
    let list = ibverbs::devices()?;
    let ctx = list
        .iter()
        .find(|d| d.name().is_some_and(|n| n.to_bytes() == dev.as_bytes()))
        .ok_or("no such device")?
        .open()?;
    let cq = ctx.create_cq(16, 0)?;
    let pd = ctx.alloc_pd()?;
    let pa = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC).set_gid_index(gid_index).build()?;
    let pb = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC).set_gid_index(gid_index).build()?;
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let (mut a, mut b) = (pa.handshake(eb)?, pb.handshake(ea)?);
    let mut mr = pd.allocate::<u8>(256)?;
    let mut wcs = [ibverbs::ibv_wc::default(); 2];
    for round in 0..10u8 {
        for (at, a_sends) in [(0, true), (128, false)] {
            mr[at..at + 64].fill(round);
            let (from, to) = if a_sends { (&mut a, &mut b) } else { (&mut b, &mut a) };
            // SAFETY: both ranges lie in `mr`, untouched until both complete.
            unsafe {
                to.post_receive(&mut mr, at + 64..at + 128, 1)?;
                from.post_send(&mut mr, at..at + 64, 0)?;
            }
            let mut got = 0;
            while got < 2 {
                for wc in cq.poll(&mut wcs)?.iter() {
                    if let Some(e) = wc.error() {
                        return Err(format!("completion failed: {e:?}").into());
                    }
                    got += 1;
                }
            }
            if mr[at + 64..at + 128] != [round; 64] {
                return Err(format!("round {round}: wrong payload").into());
            }
        }
    }
    println!("pingpong ok: 10 rounds");
    Ok(())
}
