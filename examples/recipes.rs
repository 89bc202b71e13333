//! The recipes of `docs/recipes.md`, run end to end: `recipes DEVICE`.
//!
//! Each recipe is a function between `// recipe: NAME` and `// end recipe`;
//! docs/recipes.md quotes those lines verbatim (a host test keeps the two
//! equal) and `cargo xtask test` runs this program on SoftRoCE.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use rrddmma::ctrl::QpInfo;
use rrddmma::prim::{
    AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, RecvWr, SendWr, Srq, WcStatus, GRH_LEN,
};
use rrddmma::wrap::{connected_rc_pair, RegisteredMem, UdEndpoint, UdOpts};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A recipe: a name and what runs it on a device.
type Recipe = (&'static str, fn(&str) -> Result<()>);

// recipe: two_processes
/// Two processes on one host: each creates an RC QP, they swap `QpInfo` over
/// TCP, connect, and the client writes into the server's memory.
fn two_processes(dev: &str) -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    // The peer: this same program, started as a second process.
    let mut child =
        std::process::Command::new(std::env::current_exe()?).args([dev, "--client", &port.to_string()]).spawn()?;
    let (mut tcp, _) = listener.accept()?;

    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 16)?;
    let mem = RegisteredMem::new(&pd, 4096)?;
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build()?;
    let gid_index = ctx.roce_v2_gid_index(1)?;
    let me = QpInfo::new(&qp.endpoint(1, gid_index, 100)?, gid_index, 1, ctx.query_port(1)?.active_mtu());
    tcp.write_all(&me.to_bytes())?;
    tcp.write_all(&mem.remote().to_bytes())?;
    let mut peer = [0u8; QpInfo::WIRE_LEN];
    tcp.read_exact(&mut peer)?;
    let peer = QpInfo::from_bytes(&peer)?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE);
    qp.connect(&peer.endpoint(), me.psn, &opts)?;
    tcp.write_all(b"R")?; // ready: the client may write now
    let mut done = [0u8; 1];
    tcp.read_exact(&mut done)?; // the client's write has completed
    let mut got = [0u8; 13];
    mem.read(0, &mut got);
    assert_eq!(&got, b"hello, server", "the client's RDMA WRITE landed");
    assert!(child.wait()?.success(), "the client process failed");
    Ok(())
}

/// The client process of [`two_processes`].
fn two_processes_client(dev: &str, port: u16) -> Result<()> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port))?;
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 16)?;
    let mut mem = RegisteredMem::new(&pd, 4096)?;
    let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build()?;
    let gid_index = ctx.roce_v2_gid_index(1)?;
    let me = QpInfo::new(&qp.endpoint(1, gid_index, 200)?, gid_index, 1, ctx.query_port(1)?.active_mtu());
    let mut peer = [0u8; QpInfo::WIRE_LEN];
    tcp.read_exact(&mut peer)?;
    let peer = QpInfo::from_bytes(&peer)?;
    let mut token = [0u8; rrddmma::prim::RemoteMr::WIRE_LEN];
    tcp.read_exact(&mut token)?;
    let token = rrddmma::prim::RemoteMr::from_bytes(&token);
    tcp.write_all(&me.to_bytes())?;
    qp.connect(&peer.endpoint(), me.psn, &ConnectOpts::default())?;
    let mut ready = [0u8; 1];
    tcp.read_exact(&mut ready)?;
    mem.write(0, b"hello, server");
    let src = [mem.sge(0..13)];
    // A region too small is a RangeError naming the bound.
    let dst = token.checked_addr_at(0, 13)?;
    // SAFETY: `mem` outlives the completion awaited below.
    unsafe { qp.post_send(&mut [SendWr::write(&src, dst).signaled()])? };
    cq.spin_one(Duration::from_secs(10))?.ok_or("no completion")?.ok()?;
    tcp.write_all(b"D")?;
    Ok(())
}
// end recipe

// recipe: remote_table
/// One-sided lookups in a peer's table: the owner registers the table and
/// hands out its token; the reader fetches entries with RDMA READ, the
/// owner's CPU never involved.
fn remote_table(dev: &str) -> Result<()> {
    const ENTRY: usize = 64;
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 64)?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_READ);
    let (reader, _owner_qp) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0, &opts)?;

    // The owner's side: 1,000 entries, key i at slot i.
    let mut table = RegisteredMem::new(&pd, 1000 * ENTRY)?;
    for i in 0..1000u64 {
        table.write(i as usize * ENTRY, &i.to_le_bytes());
    }
    let token = table.remote(); // sent to the reader out of band

    // The reader's side.
    let local = RegisteredMem::new(&pd, ENTRY)?;
    for key in [0usize, 7, 999] {
        let at = token.checked_addr_at(key * ENTRY, ENTRY)?; // same usize offsets as `local.sge`
        let dst = [local.sge(0..ENTRY)];
        // SAFETY: `local` outlives the completion awaited below.
        unsafe { reader.post_send(&mut [SendWr::read(&dst, at).wr_id(key as u64).signaled()])? };
        let wc = cq.spin_one(Duration::from_secs(10))?.ok_or("no completion")?;
        wc.ok()?;
        let mut entry = [0u8; 8];
        local.read(0, &mut entry);
        assert_eq!(u64::from_le_bytes(entry), key as u64, "entry {key}");
    }
    // A key past the table is refused before anything is posted.
    assert!(token.checked_addr_at(1000 * ENTRY, ENTRY).is_err());
    Ok(())
}
// end recipe

// recipe: ud_srq
/// UD request/response with a shared receive queue: the server takes
/// requests from an SRQ and answers each sender through an address handle
/// built from the request's completion. Receive slots leave room for the
/// 40-byte GRH.
fn ud_srq(dev: &str) -> Result<()> {
    const SLOT: usize = GRH_LEN + 64;
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 64)?;
    let srq = Srq::builder(&pd).max_wr(16).build()?;
    let mut server = UdEndpoint::with_opts(&pd, &cq, &cq, &UdOpts::default().srq(Some(srq.clone())))?;
    let mut client = UdEndpoint::with_opts(&pd, &cq, &cq, &UdOpts::default())?;
    let mut smem = RegisteredMem::new(&pd, 16 * SLOT)?;
    let mut cmem = RegisteredMem::new(&pd, 2 * SLOT)?;
    let slots: Vec<_> = (0..16).map(|i| [smem.sge(i * SLOT..(i + 1) * SLOT)]).collect();
    let mut recvs: Vec<RecvWr> = slots.iter().enumerate().map(|(i, s)| RecvWr::new(s, i as u64)).collect();
    // SAFETY: the slots lie in `smem`, which outlives every receive.
    unsafe { srq.post_recv(&mut recvs)? };
    let reply_slot = [cmem.sge(SLOT..2 * SLOT)];
    // SAFETY: as above, in `cmem`.
    unsafe { client.qp().post_recv(&mut [RecvWr::new(&reply_slot, 100)])? };

    // The client sends a request.
    let server_info = server.info(ctx.query_port(1)?.active_mtu())?;
    cmem.write(0, b"ping");
    let req = [cmem.sge(0..4)];
    let (qp, ah) = client.route(&server_info, 0)?;
    // SAFETY: `cmem` and the address handle outlive the completion.
    unsafe { qp.post_send(&mut [SendWr::send(&req).ud(ah, server_info.qpn, server.qkey()).signaled()])? };

    // The server takes it from the SRQ and answers whoever sent it.
    let mut got_request = None;
    while got_request.is_none() {
        let wc = *cq.spin_one(Duration::from_secs(10))?.ok_or("no completion")?.ok()?;
        if wc.opcode() == rrddmma::prim::WcOpcode::RECV {
            got_request = Some(wc);
        }
    }
    let wc = got_request.expect("a request");
    let at = wc.wr_id() as usize * SLOT;
    let mut grh = [0u8; GRH_LEN];
    smem.read(at, &mut grh);
    let mut body = [0u8; 4];
    smem.read(at + GRH_LEN, &mut body);
    assert_eq!(&body, b"ping");
    smem.write(at + GRH_LEN, b"pong");
    let answer = [smem.sge(at + GRH_LEN..at + GRH_LEN + 4)];
    let qkey = server.qkey();
    let (qp, ah) = server.reply_route(&wc, &grh)?;
    // SAFETY: `smem` and the handle outlive the completion.
    unsafe { qp.post_send(&mut [SendWr::send(&answer).ud(ah, wc.src_qp(), qkey).signaled()])? };

    // The client gets the answer after the GRH.
    loop {
        let wc = *cq.spin_one(Duration::from_secs(10))?.ok_or("no completion")?.ok()?;
        if wc.wr_id() == 100 {
            assert_eq!(wc.byte_len() as usize, GRH_LEN + 4, "the GRH counts in byte_len");
            break;
        }
    }
    let mut reply = [0u8; 4];
    cmem.read(SLOT + GRH_LEN, &mut reply);
    assert_eq!(&reply, b"pong");
    Ok(())
}
// end recipe

// recipe: wait_without_spinning
/// Waiting for completions without spinning: a CQ with a completion
/// channel; `wait_one` polls, arms, and sleeps until the event.
fn wait_without_spinning(dev: &str) -> Result<()> {
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let channel = CompChannel::create(&ctx)?;
    let cq = Cq::builder(&ctx, 16).channel(&channel).build()?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE);
    let (a, _b) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0, &opts)?;
    let mem = RegisteredMem::new(&pd, 128)?;
    let src = [mem.sge(0..64)];
    // SAFETY: `mem` outlives the completion awaited below.
    unsafe { a.post_send(&mut [SendWr::write(&src, mem.remote().addr_at(64)).wr_id(1).signaled()])? };
    let wc = cq.wait_one(Duration::from_secs(10))?.ok_or("no completion within 10 s")?;
    wc.ok()?;
    // The CQ's file descriptor (`channel.as_fd()`) also works with any
    // reactor: poll it for readability, then `cq.wait(Some(Duration::ZERO))`.
    assert!(cq.wait_one(Duration::from_millis(50))?.is_none(), "nothing more to come");
    Ok(())
}
// end recipe

// recipe: gid_and_mtu
/// Choosing the GID and the MTU: `ConnectOpts::default()` takes the port's
/// RoCE v2 GID; the path MTU is at most the port's active MTU, and both
/// ends should agree on it (the smaller of the two).
fn gid_and_mtu(dev: &str) -> Result<()> {
    let ctx = Context::open(dev)?;
    let port = ctx.query_port(1)?;
    for e in ctx.gid_table(1)? {
        println!("  GID {} {} {} (netdev {:?})", e.index, e.gid, e.gid_type, e.netdev());
    }
    let gid = ctx.roce_v2_gid_index(1)?;
    println!("  RoCE v2 GID index {gid}; active MTU {} bytes", port.active_mtu().bytes());
    let peer_mtu = rrddmma::prim::Mtu::MTU_4096; // what the peer's QpInfo says
    let mtu = port.active_mtu().min(peer_mtu);
    let opts = ConnectOpts::default().mtu(mtu);
    assert_eq!(opts.gid_index_on(&ctx)?, gid);
    Ok(())
}
// end recipe

// recipe: error_completions
/// Reading error completions: `Wc::ok()` turns a failed completion into a
/// `WcError` that names the status and its usual cause. Here a READ of a
/// region registered without REMOTE_READ.
fn error_completions(dev: &str) -> Result<()> {
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 16)?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_READ);
    let (a, _b) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0, &opts)?;
    let local = RegisteredMem::new(&pd, 64)?;
    let write_only = rrddmma::wrap::MemOpts::default().access(AccessFlags::LOCAL_WRITE);
    let target = RegisteredMem::with(&pd, 64, &write_only)?;
    let dst = [local.sge(0..8)];
    // SAFETY: both regions outlive the completion awaited below.
    unsafe { a.post_send(&mut [SendWr::read(&dst, target.remote().addr_at(0)).wr_id(9).signaled()])? };
    let wc = cq.spin_one(Duration::from_secs(10))?.ok_or("no completion")?;
    match wc.ok() {
        Ok(_) => return Err("the READ should have been refused".into()),
        Err(e) => {
            println!("  {e}");
            assert_eq!(e.status, WcStatus::REM_ACCESS_ERR);
            assert!(e.to_string().contains("REMOTE_READ"));
        }
    }
    Ok(())
}
// end recipe

// recipe: message_ring
/// A FaRM-style message ring: the sender RDMA-WRITEs each message into the
/// next slot of the receiver's ring, a sequence number in the slot's first
/// and last words; the receiver polls the last word of the slot it expects
/// (no receive posted, no completion on its side) and takes the message
/// when both words carry the sequence number it waits for.
fn message_ring(dev: &str) -> Result<()> {
    const SLOTS: usize = 8;
    const SLOT: usize = 64; // header word, 48 bytes of payload, trailer word
    let ctx = Context::open(dev)?;
    let pd = Pd::alloc(&ctx)?;
    let cq = Cq::create(&ctx, 64)?;
    let opts = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE);
    let (sender, _receiver_qp) = connected_rc_pair(&pd, &cq, &cq, QpCaps::default(), 0, &opts)?;
    let ring = RegisteredMem::new(&pd, SLOTS * SLOT)?; // the receiver's
    let ring_token = ring.remote(); // sent to the sender out of band
    let mut staging = RegisteredMem::new(&pd, SLOT)?; // the sender's

    for seq in 1..=3 * SLOTS as u64 {
        // The sender: sequence number, payload, sequence number; one WRITE.
        let slot = (seq as usize - 1) % SLOTS * SLOT;
        let text = format!("message {seq}");
        staging.write(0, &seq.to_le_bytes());
        staging.write(8, &[0; 48]);
        staging.write(8, text.as_bytes());
        staging.write(SLOT - 8, &seq.to_le_bytes());
        let src = [staging.sge(0..SLOT)];
        let at = ring_token.checked_addr_at(slot, SLOT)?;
        // SAFETY: `staging` is not written again before this WRITE completes (below).
        unsafe { sender.post_send(&mut [SendWr::write(&src, at).wr_id(seq).signaled()])? };

        // The receiver: wait for the trailer, then check the header (a torn
        // slot shows two different numbers) and take the payload.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ring.load_acquire_u64(slot + SLOT - 8) != seq {
            if std::time::Instant::now() > deadline {
                return Err(format!("message {seq} did not arrive").into());
            }
            std::hint::spin_loop();
        }
        assert_eq!(ring.load_acquire_u64(slot), seq, "header and trailer of slot {slot} agree");
        let mut payload = [0u8; 48];
        ring.read(slot + 8, &mut payload);
        assert_eq!(&payload[..text.len()], text.as_bytes(), "message {seq}");

        // The sender reuses its staging buffer once the WRITE has completed.
        cq.spin_one(Duration::from_secs(10))?.ok_or("no completion")?.ok()?;
    }
    Ok(())
}
// end recipe

/// `DEVICE [--client PORT]`, read with `lexopt` as every binary here.
fn parse_args() -> std::result::Result<(Option<String>, Option<u16>), lexopt::Error> {
    use lexopt::prelude::*;
    let (mut dev, mut client) = (None, None);
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("client") => client = Some(p.value()?.parse()?),
            Value(v) if dev.is_none() => dev = Some(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok((dev, client))
}

fn main() {
    let (dev, client) = match parse_args() {
        Ok((Some(dev), client)) => (dev, client),
        other => {
            if let Err(e) = other {
                eprintln!("recipes: {e}");
            }
            eprintln!("Usage: recipes DEVICE [--client PORT]");
            std::process::exit(2);
        }
    };
    let dev = &dev;
    if let Some(port) = client {
        if let Err(e) = two_processes_client(dev, port) {
            eprintln!("client: {e}");
            std::process::exit(1);
        }
        return;
    }
    let recipes: [Recipe; 7] = [
        ("two_processes", two_processes),
        ("remote_table", remote_table),
        ("ud_srq", ud_srq),
        ("wait_without_spinning", wait_without_spinning),
        ("gid_and_mtu", gid_and_mtu),
        ("error_completions", error_completions),
        ("message_ring", message_ring),
    ];
    let mut failed = 0;
    for (name, f) in recipes {
        match f(dev) {
            Ok(()) => println!("recipe {name}: ok"),
            Err(e) => {
                println!("recipe {name}: FAILED: {e}");
                failed += 1;
            }
        }
    }
    std::process::exit(i32::from(failed > 0));
}
