//! The optional shared-secret handshake of the TCP set-up
//! ([`AioOpts::secret`](super::AioOpts::secret)), run before either side
//! opens a device or registers memory.
//!
//! ```text
//! connector → listener: "rAIa" ‖ connector nonce
//! listener → connector: listener nonce ‖ HMAC(secret, "rrddmma-aio accept" ‖ connector nonce ‖ listener nonce)
//! connector → listener: HMAC(secret, "rrddmma-aio connect" ‖ listener nonce ‖ connector nonce ‖ its QP numbers) ‖ its QP numbers
//! ```
//!
//! Each side proves it knows the secret over the other's fresh nonce, so a
//! recorded handshake does not replay and the secret never crosses the
//! wire; the connector's QP numbers are covered by its MAC. The MACs are
//! `ctrl`'s HMAC-SHA-256. What follows the handshake is not authenticated:
//! the secret keeps strangers out, it does not defend against an attacker
//! on the path.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::error::{Error, Result};
use crate::ctrl::auth::{hmac, mac_eq, nonce};
use crate::ctrl::wire::{MAC_LEN, NONCE_LEN};

/// The connector's tag when it authenticates.
pub(super) const TAG: &[u8; 4] = b"rAIa";

/// A shared secret; `Debug` never prints it.
#[derive(Clone)]
pub(crate) struct Secret(pub Arc<[u8]>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

fn fresh() -> Result<[u8; NONCE_LEN]> {
    nonce().map_err(Error::io("read a nonce from the kernel's random source", None))
}

fn accept_mac(s: &[u8], c: &[u8], l: &[u8]) -> [u8; MAC_LEN] {
    hmac(s, &[b"rrddmma-aio accept", c, l])
}

fn connect_mac(s: &[u8], l: &[u8], c: &[u8], info: &[u8]) -> [u8; MAC_LEN] {
    hmac(s, &[b"rrddmma-aio connect", l, c, info])
}

/// The connector's side: proves itself with `info` (its QP numbers), after
/// checking the listener's proof.
pub(super) async fn connect(tcp: &mut TcpStream, s: &Secret, info: &[u8], peer: Option<SocketAddr>) -> Result<()> {
    let c = fresh()?;
    tcp.write_all(&[&TAG[..], &c].concat()).await.map_err(Error::io("send the authentication hello", peer))?;
    let mut answer = [0u8; NONCE_LEN + MAC_LEN];
    tcp.read_exact(&mut answer).await.map_err(Error::io("read the listener's authentication answer", peer))?;
    let (l, mac) = answer.split_at(NONCE_LEN);
    if !mac_eq(mac.try_into().expect("MAC_LEN"), &accept_mac(&s.0, &c, l)) {
        return Err(Error::Protocol(
            "the listener's proof of the shared secret is wrong: is AioOpts::secret the same on both sides?".into(),
        ));
    }
    let mac = connect_mac(&s.0, l, &c, info);
    tcp.write_all(&[&mac[..], info].concat()).await.map_err(Error::io("send the authenticated QP numbers", peer))
}

/// The listener's side: `info` is filled with the connector's QP numbers,
/// returned only when its proof is right.
pub(super) async fn accept(tcp: &mut TcpStream, s: &Secret, info: &mut [u8], peer: Option<SocketAddr>) -> Result<()> {
    let mut hello = [0u8; 4 + NONCE_LEN];
    tcp.read_exact(&mut hello).await.map_err(Error::io("read the client's authentication hello", peer))?;
    if hello[..4] != TAG[..] {
        return Err(Error::Protocol(
            "the client did not authenticate, and this listener requires AioOpts::secret: set the same secret \
             on the client"
                .into(),
        ));
    }
    let c = &hello[4..];
    let l = fresh()?;
    let mac = accept_mac(&s.0, c, &l);
    tcp.write_all(&[&l[..], &mac].concat()).await.map_err(Error::io("send the authentication answer", peer))?;
    let mut proof = [0u8; MAC_LEN];
    tcp.read_exact(&mut proof).await.map_err(Error::io("read the client's proof", peer))?;
    tcp.read_exact(info).await.map_err(Error::io("read the peer's QP numbers", peer))?;
    if !mac_eq(&proof, &connect_mac(&s.0, &l, c, info)) {
        return Err(Error::Protocol(
            "the client's proof of the shared secret is wrong: is AioOpts::secret the same on both sides?".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides of the handshake over a real TCP pair: the right secret
    /// passes with the QP numbers intact; a wrong one is refused by both
    /// sides before any QP number is taken; a client without one is refused.
    #[tokio::test(flavor = "current_thread")]
    async fn regression_aio_shared_secret_handshake_refuses_a_wrong_secret() {
        async fn run(server: &'static [u8], client: Option<&'static [u8]>) -> (Result<Vec<u8>>, Result<()>) {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let srv = async {
                let (mut t, _) = l.accept().await.unwrap();
                let mut info = vec![0u8; 58];
                accept(&mut t, &Secret(server.into()), &mut info, None).await.map(|()| info)
            };
            let cli = async {
                let mut t = TcpStream::connect(addr).await.unwrap();
                match client {
                    Some(c) => connect(&mut t, &Secret(c.into()), &[7u8; 58], None).await,
                    None => t.write_all(&[1u8; 58]).await.map_err(Error::io("send", None)),
                }
            };
            tokio::join!(srv, cli)
        }
        let (s, c) = run(b"experiment-42", Some(b"experiment-42")).await;
        assert_eq!(s.unwrap(), vec![7u8; 58]);
        c.unwrap();
        let (s, c) = run(b"experiment-42", Some(b"experiment-43")).await;
        assert!(matches!(&c, Err(Error::Protocol(w)) if w.contains("listener's proof")), "{c:?}");
        assert!(s.is_err(), "the listener sees the client hang up or refuse: {s:?}");
        let (s, _) = run(b"experiment-42", None).await;
        assert!(matches!(&s, Err(Error::Protocol(w)) if w.contains("did not authenticate")), "{s:?}");
        assert_eq!(format!("{:?}", Secret(b"x".as_slice().into())), "<redacted>");
        // A client that ignores the listener's proof and sends a forged one.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let srv = async {
            let (mut t, _) = l.accept().await.unwrap();
            let mut info = vec![0u8; 58];
            accept(&mut t, &Secret(b"experiment-42".as_slice().into()), &mut info, None).await
        };
        let forger = async {
            let mut t = TcpStream::connect(addr).await.unwrap();
            t.write_all(&[&TAG[..], &[0u8; NONCE_LEN]].concat()).await.unwrap();
            let mut answer = [0u8; NONCE_LEN + MAC_LEN];
            t.read_exact(&mut answer).await.unwrap();
            t.write_all(&[0u8; MAC_LEN + 58]).await.unwrap();
            t
        };
        let (s, _t) = tokio::join!(srv, forger);
        assert!(matches!(&s, Err(Error::Protocol(w)) if w.contains("client's proof")), "{s:?}");
    }
}
