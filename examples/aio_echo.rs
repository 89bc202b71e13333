//! An async echo service on `wrap::aio`: the server serves many clients at
//! once, a task per client, each echoing every message it receives; the
//! client side runs many clients at once, each checking every echo.
//!
//! ```text
//! aio_echo DEVICE server PORT CLIENTS           # serves CLIENTS clients, then exits
//! aio_echo DEVICE client HOST:PORT CLIENTS ROUNDS
//! ```

mod cli;

use std::alloc::Layout;

use rrddmma::wrap::aio::{AioOpts, Listener, RcEndpoint};
use tokio::task::JoinSet;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const MSG: usize = 64;

async fn serve_one(ep: RcEndpoint) -> Result<u64> {
    let mut served = 0;
    loop {
        let buf = ep.alloc_local_mr(Layout::new::<[u8; MSG]>())?;
        let (got, buf) = ep.recv(buf).await?;
        if got.len == 1 {
            return Ok(served); // the client's one-byte goodbye
        }
        ep.send(buf, 0..got.len).await?;
        served += 1;
    }
}

async fn server(opts: AioOpts, port: u16, clients: usize) -> Result<()> {
    let listener = Listener::bind(("0.0.0.0", port), opts).await?;
    let mut set = JoinSet::new();
    for _ in 0..clients {
        let ep = listener.accept().await?;
        set.spawn(serve_one(ep));
    }
    let mut total = 0;
    while let Some(r) = set.join_next().await {
        total += r??;
    }
    println!("server: served {clients} clients, {total} echoes");
    Ok(())
}

async fn one_client(opts: AioOpts, addr: String, id: usize, rounds: usize) -> Result<()> {
    let ep = RcEndpoint::connect(addr.as_str(), &opts).await?;
    for r in 0..rounds {
        let mut out = ep.alloc_local_mr(Layout::new::<[u8; MSG]>())?;
        let text = format!("client {id} round {r}");
        out.write(0, text.as_bytes());
        // Post the receive for the echo before sending.
        let back = ep.alloc_local_mr(Layout::new::<[u8; MSG]>())?;
        let (echo, _) = tokio::join!(ep.recv(back), ep.send(out, 0..text.len()));
        let (got, back) = echo?;
        let mut b = vec![0u8; got.len];
        back.read(0, &mut b);
        if b != text.as_bytes() {
            return Err(format!("client {id}: echo {:?} for {text:?}", String::from_utf8_lossy(&b)).into());
        }
    }
    let bye = ep.alloc_local_mr(Layout::new::<u8>())?;
    ep.send(bye, 0..1).await?;
    Ok(())
}

async fn clients(opts: AioOpts, addr: &str, n: usize, rounds: usize) -> Result<()> {
    let mut set = JoinSet::new();
    for id in 0..n {
        set.spawn(one_client(opts.clone(), addr.to_string(), id, rounds));
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    println!("client: {n} clients x {rounds} echoes checked");
    Ok(())
}

fn main() {
    const USAGE: &str = "Usage: aio_echo DEVICE server PORT CLIENTS | aio_echo DEVICE client HOST:PORT CLIENTS ROUNDS";
    // `a[0]` stands for the program name, so the indices below are argv's.
    let a: Vec<String> = std::iter::once(String::new()).chain(cli::operands(USAGE)).collect();
    let usage = || -> ! {
        eprintln!("{USAGE}");
        std::process::exit(2)
    };
    if a.len() < 5 {
        usage();
    }
    let num = |i: usize| a.get(i).and_then(|s| s.parse::<usize>().ok()).unwrap_or_else(|| usage());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let opts = AioOpts::new(&a[1]);
    let r = rt.block_on(async {
        match a[2].as_str() {
            "server" => server(opts, num(3) as u16, num(4)).await,
            "client" => clients(opts, &a[3], num(4), num(5)).await,
            _ => usage(),
        }
    });
    if let Err(e) = r {
        eprintln!("aio_echo {}: {e}", a[2]);
        std::process::exit(1);
    }
}
