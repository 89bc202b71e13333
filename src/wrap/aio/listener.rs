//! [`Listener`]: accepts [`RcEndpoint`]s, on a TCP address or through the
//! RDMA CM. It sits above both ways of connecting (`endpoint`'s TCP
//! exchange, `cm`'s CM events), which therefore never name it.

use std::net::SocketAddr;

use tokio::net::{TcpListener, ToSocketAddrs};

#[cfg(feature = "cm")]
use super::cm::CmListen;
use super::endpoint::{AioOpts, RcEndpoint};
use super::error::{Error, Result};

/// Accepts [`RcEndpoint`]s on a TCP address ([`Listener::bind`]) or
/// through the RDMA CM ([`Listener::bind_cm`], feature `cm`).
#[derive(Debug)]
pub struct Listener {
    how: How,
    opts: AioOpts,
}

#[derive(Debug)]
enum How {
    Tcp(TcpListener),
    #[cfg(feature = "cm")]
    Cm(CmListen),
}

impl Listener {
    /// Listens on `addr` for peers' [`RcEndpoint::connect`].
    pub async fn bind(addr: impl ToSocketAddrs, opts: AioOpts) -> Result<Listener> {
        let l = TcpListener::bind(addr).await.map_err(Error::io("listen for RcEndpoint connections over TCP", None))?;
        Ok(Listener { how: How::Tcp(l), opts })
    }

    #[cfg(feature = "cm")]
    pub(super) fn from_cm(l: CmListen, opts: AioOpts) -> Listener {
        Listener { how: How::Cm(l), opts }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        match &self.how {
            How::Tcp(t) => t.local_addr().map_err(Error::io("read the listener's address", None)),
            #[cfg(feature = "cm")]
            How::Cm(c) => c.local_addr(),
        }
    }

    /// The next connection. Each accepted endpoint has its own QPs, CQ,
    /// pool and driver task; accept in a loop and spawn a task per client
    /// to serve many at once.
    pub async fn accept(&self) -> Result<RcEndpoint> {
        match &self.how {
            How::Tcp(t) => {
                let (stream, _) =
                    t.accept().await.map_err(Error::io("accept an RcEndpoint connection", t.local_addr().ok()))?;
                RcEndpoint::establish(stream, &self.opts, true).await
            }
            #[cfg(feature = "cm")]
            How::Cm(c) => c.accept(&self.opts).await,
        }
    }
}

#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
impl Listener {
    /// Listens on `addr` (port 0: any) for peers' [`RcEndpoint::connect_cm`],
    /// through the RDMA CM: the address must be on an RDMA device's netdev
    /// (RoCE) or IPoIB interface. The device is the one the address
    /// is on; `opts.device`, `opts.port` and the GID and MTU of
    /// `opts.connect` are not used (the CM chooses them).
    ///
    /// Each client makes two connections (data and control QP), which
    /// `accept` pairs by the token in their private data before it opens
    /// the device. A connection whose other half does not come within
    /// [`AioOpts::setup_timeout`] is rejected then; at most 64 wait at once
    /// (one more is rejected at once); a request that is not an endpoint's
    /// is rejected at once. Each rejection carries its reason, and `accept`
    /// goes on to the next client. Once both connections are established,
    /// `accept` returns the endpoint when the client's first control message
    /// (its greeting) has arrived, and [`Error::Timeout`] if it has not
    /// within `setup_timeout`.
    pub async fn bind_cm(addr: SocketAddr, opts: AioOpts) -> Result<Listener> {
        opts.check_no_secret("Listener::bind_cm", &format!("any device (the RDMA CM listener at {addr})"))?;
        Ok(Listener::from_cm(CmListen::bind(addr)?, opts))
    }
}
