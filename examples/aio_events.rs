//! Awaiting a device's asynchronous events on tokio: the context's event
//! descriptor is registered with the reactor and read with
//! `Context::try_async_event` (which reports `WouldBlock` when none is
//! pending). The program takes the device's network interface down and up
//! and awaits `PORT_ERR`, then `PORT_ACTIVE`.
//!
//! ```text
//! aio_events DEVICE NETDEV      # e.g. a SoftRoCE device on a veth of its own
//! ```

mod cli;

use std::os::fd::{AsRawFd, RawFd};
use std::process::Command;
use std::time::Duration;

use rrddmma::prim::{AsyncEvent, Context, EventType};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The context, as a descriptor the reactor can watch.
struct Events(Context);

impl AsRawFd for Events {
    fn as_raw_fd(&self) -> RawFd {
        self.0.async_fd()
    }
}

async fn next(fd: &AsyncFd<Events>) -> std::io::Result<AsyncEvent> {
    loop {
        let mut guard = fd.readable().await?;
        match guard.try_io(|inner| inner.get_ref().0.try_async_event()) {
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

async fn until(fd: &AsyncFd<Events>, want: EventType) -> Result<AsyncEvent, String> {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), next(fd))
            .await
            .map_err(|_| format!("no {want} event within 10 s"))?
            .map_err(|e| e.to_string())?;
        println!("event {} on {:?}", ev.event_type, ev.element);
        if ev.event_type == want {
            return Ok(ev);
        }
    }
}

fn ip_link(netdev: &str, state: &str) -> Result<(), String> {
    let ok = Command::new("ip").args(["link", "set", netdev, state]).status().is_ok_and(|s| s.success());
    ok.then_some(()).ok_or_else(|| format!("ip link set {netdev} {state} failed"))
}

fn main() {
    let a = cli::operands("Usage: aio_events DEVICE NETDEV");
    let (Some(dev), Some(netdev)) = (a.first(), a.get(1)) else {
        eprintln!("Usage: aio_events DEVICE NETDEV");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let r = rt.block_on(async {
        let ctx = Context::open(dev).map_err(|e| e.to_string())?;
        // SAFETY: the context owns its event descriptor, open for as long as
        // the context (moved into the `AsyncFd`) lives; `as_raw_fd` always
        // returns that descriptor.
        let fd =
            unsafe { AsyncFd::register_with_interest(Events(ctx), Interest::READABLE) }.map_err(|e| e.to_string())?;
        // Drain what came before.
        while tokio::time::timeout(Duration::from_millis(200), next(&fd)).await.is_ok() {}
        ip_link(netdev, "down")?;
        until(&fd, EventType::PORT_ERR).await?;
        ip_link(netdev, "up")?;
        until(&fd, EventType::PORT_ACTIVE).await?;
        Ok::<(), String>(())
    });
    match r {
        Ok(()) => println!("port went down and came back up: PORT_ERR, then PORT_ACTIVE"),
        Err(e) => {
            eprintln!("aio_events: {e}");
            std::process::exit(1);
        }
    }
}
