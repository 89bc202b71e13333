//! async-rdma's front-page exchange on rrddmma's `wrap::aio`: the client
//! asks the server for a region, writes into half of it and gives it back;
//! the server gets its region back and checks the bytes.
//!
//! ```text
//! aio_hello DEVICE server PORT        # waits for one client
//! aio_hello DEVICE client HOST:PORT
//! ```

mod cli;

use std::alloc::Layout;

use rrddmma::wrap::aio::{AioOpts, Listener, RcEndpoint};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const LEN: usize = 8;

async fn server(opts: AioOpts, port: u16) -> Result<()> {
    let listener = Listener::bind(("0.0.0.0", port), opts).await?;
    let ep = listener.accept().await?;
    // The client requested a region of this side's pool and wrote into it;
    // it comes back here once the client gives it back.
    let lmr = ep.receive_local_mr().await?;
    let mut data = [0u8; LEN];
    lmr.read(0, &mut data);
    assert_eq!(data, [1, 1, 1, 1, 0, 0, 0, 0], "the client wrote the first half");
    println!("server: received the region back, data {data:?}");
    Ok(())
}

async fn client(opts: AioOpts, addr: &str) -> Result<()> {
    let ep = RcEndpoint::connect(addr, &opts).await?;
    let mut lmr = ep.alloc_local_mr(Layout::new::<[u8; LEN]>())?;
    let rmr = ep.request_remote_mr(Layout::new::<[u8; LEN]>()).await?;
    lmr.write(0, &[1u8; LEN / 2]);
    // Write the first half of the local region into the first half of the remote one.
    let half = rmr.checked_at(0, (LEN / 2) as u64).ok_or("remote region too small")?;
    let _lmr = ep.write(lmr, 0..LEN / 2, half).await?;
    ep.send_remote_mr(rmr).await?;
    println!("client: wrote {} bytes and gave the region back", LEN / 2);
    // Keep the connection until the server has read its region.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    Ok(())
}

fn main() {
    let args = cli::operands("Usage: aio_hello DEVICE server PORT | aio_hello DEVICE client HOST:PORT");
    let (Some(dev), Some(role), Some(target)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("Usage: aio_hello DEVICE server PORT | aio_hello DEVICE client HOST:PORT");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let opts = AioOpts::new(dev);
    let r = rt.block_on(async {
        match role.as_str() {
            "server" => server(opts, target.parse()?).await,
            "client" => client(opts, target).await,
            other => Err(format!("unknown role {other:?}: server or client").into()),
        }
    });
    if let Err(e) = r {
        eprintln!("aio_hello {role}: {e}");
        std::process::exit(1);
    }
}
