//! async-rdma's front-page exchange on rrddmma's `wrap::aio`: the client
//! asks the server for a region, writes into half of it and gives it back;
//! the server gets its region back and checks the bytes.
//!
//! ```text
//! aio_hello DEVICE server PORT        # waits for one client
//! aio_hello DEVICE client HOST:PORT
//! aio_hello - cm-server IP:PORT       # the same through the RDMA CM, by the
//! aio_hello - cm-client IP:PORT       # IP address of an RDMA netdev
//! ```

mod cli;

use std::alloc::Layout;

use rrddmma::wrap::aio::{AioOpts, Listener, RcEndpoint};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const LEN: usize = 8;

async fn server(listener: Listener) -> Result<()> {
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

async fn client(ep: RcEndpoint) -> Result<()> {
    let mut lmr = ep.alloc_local_mr(Layout::new::<[u8; LEN]>())?;
    let rmr = ep.request_remote_mr(Layout::new::<[u8; LEN]>()).await?;
    lmr.write(0, &[1u8; LEN / 2]);
    // Write the first half of the local region into the first half of the remote one.
    let half = rmr.checked_addr_at(0, LEN / 2)?; // a RangeError names the bound if it is too small
    let _lmr = ep.write(lmr, 0..LEN / 2, half).await?;
    ep.send_remote_mr(rmr).await?;
    println!("client: wrote {} bytes and gave the region back", LEN / 2);
    // Keep the connection until the server has read its region.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    Ok(())
}

fn main() {
    const USAGE: &str = "Usage: aio_hello DEVICE server PORT | aio_hello DEVICE client HOST:PORT | \
                         aio_hello - cm-server IP:PORT | aio_hello - cm-client IP:PORT";
    let args = cli::operands(USAGE);
    let (Some(dev), Some(role), Some(target)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let opts = AioOpts::new(dev);
    let r = rt.block_on(async {
        match role.as_str() {
            "server" => server(Listener::bind(("0.0.0.0", target.parse::<u16>()?), opts).await?).await,
            "client" => client(RcEndpoint::connect(target.as_str(), &opts).await?).await,
            "cm-server" => server(Listener::bind_cm(target.parse()?, opts).await?).await,
            "cm-client" => client(RcEndpoint::connect_cm(target.parse()?, &opts).await?).await,
            other => Err(format!("unknown role {other:?}: server, client, cm-server or cm-client").into()),
        }
    });
    if let Err(e) = r {
        eprintln!("aio_hello {role}: {e}");
        std::process::exit(1);
    }
}
