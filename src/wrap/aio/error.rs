//! Errors of the async layer.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::prim::WcError;

/// Result of an async operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Why an async operation failed.
///
/// The crate's one chaining convention: `Verbs`, `Ctrl` and `Completion`
/// wrap another layer's error whole and are transparent (they print as the
/// inner error, and `source()` is the inner error's source); `Io` and `Alloc`
/// print their context and leave the OS error to `source()`. So `{e}` with a
/// walk of `source()` (or `anyhow`'s `{:#}`) shows every message exactly
/// once, and a caller matches the inner error directly:
///
/// ```
/// use rrddmma::ctrl;
/// use rrddmma::wrap::aio::Error;
/// fn peer_gone(e: &Error) -> bool {
///     matches!(e, Error::Ctrl(ctrl::Error::PeerLost { .. }))
///         || matches!(e, Error::Completion(wc) if wc.status == rrddmma::prim::WcStatus::RETRY_EXC_ERR)
/// }
/// # assert!(peer_gone(&Error::Ctrl(ctrl::Error::PeerLost { rank: 1 })));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Setting up or posting failed (the verbs layer's error, transparent).
    Verbs(crate::prim::Error),
    /// The control plane failed (its error, transparent).
    Ctrl(crate::ctrl::Error),
    /// The device completed the request with an error status (a vanished
    /// peer gives `RETRY_EXC_ERR`, the requests after it `WR_FLUSH_ERR`);
    /// transparent.
    Completion(WcError),
    /// Memory could not be allocated (as `wrap::Error::Alloc`).
    Alloc {
        /// Bytes asked for.
        len: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// A socket operation of the set-up (the TCP exchange, or the RDMA CM's
    /// event channel) failed.
    Io {
        /// What was being done.
        op: &'static str,
        /// The peer or local address involved, if known.
        addr: Option<SocketAddr>,
        /// The OS error.
        source: std::io::Error,
    },
    /// A set-up step ended at its deadline ([`AioOpts::setup_timeout`](super::AioOpts::setup_timeout)).
    /// The same shape and `Display` as `prim::Error::Timeout`.
    Timeout {
        /// What was being awaited, as a phrase.
        op: &'static str,
        /// How long was allowed.
        after: Duration,
    },
    /// The peer broke the memory-region protocol or the set-up exchange
    /// (what it did, in words). A violation after set-up closes the
    /// endpoint, and every later call returns this error.
    Protocol(String),
    /// The endpoint is closed: it was dropped, its driver stopped, or the
    /// peer is gone (its TCP connection ended, the CM reported
    /// `DISCONNECTED`, or it acknowledged no keepalive for
    /// [`AioOpts::peer_timeout`](super::AioOpts::peer_timeout)).
    Closed,
    /// The peer refused a [`request_remote_mr`](super::RcEndpoint::request_remote_mr):
    /// its reason (pool exhausted, quota, ...).
    Denied {
        /// Bytes asked for.
        size: usize,
        /// The peer's reason.
        why: super::Denial,
    },
    /// The memory pool has no free piece of that size and alignment.
    PoolExhausted {
        /// Bytes asked for.
        size: usize,
        /// Bytes free in the pool (possibly fragmented).
        free: usize,
    },
}

impl Error {
    /// An [`Error::Io`] maker for `map_err`: `op` with the address, if known.
    pub(crate) fn io(op: &'static str, addr: Option<SocketAddr>) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { op, addr, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Verbs(e) => e.fmt(f),
            Error::Ctrl(e) => e.fmt(f),
            Error::Completion(e) => e.fmt(f),
            // The OS error is the `source()`: printed by whoever walks the chain.
            Error::Alloc { len, .. } => write!(f, "cannot map {len} bytes for the endpoint's memory pool"),
            Error::Io { op, addr: Some(a), .. } => write!(f, "{op} ({a})"),
            Error::Io { op, addr: None, .. } => write!(f, "{op}"),
            Error::Timeout { op, after } => write!(f, "{op}: timed out after {after:?}"),
            Error::Protocol(what) => write!(f, "protocol violation by the peer: {what}"),
            Error::Denied { size, why } => write!(f, "the peer refused a region of {size} bytes: {why}"),
            Error::Closed => f.write_str("the endpoint is closed (its QP is gone or its driver stopped)"),
            Error::PoolExhausted { size, free } => write!(
                f,
                "the memory pool has no free piece of {size} bytes ({free} bytes free in all; \
                 raise AioOpts::pool_size or drop LocalMrs sooner)"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the chain goes on with the inner error's source.
            Error::Verbs(e) => e.source(),
            Error::Ctrl(e) => e.source(),
            Error::Completion(e) => std::error::Error::source(e),
            Error::Alloc { source, .. } | Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<crate::prim::Error> for Error {
    fn from(e: crate::prim::Error) -> Error {
        Error::Verbs(e)
    }
}

impl From<crate::ctrl::Error> for Error {
    fn from(e: crate::ctrl::Error) -> Error {
        Error::Ctrl(e)
    }
}

/// Each of `wrap::Error`'s variants has its own here: nothing is erased.
impl From<crate::wrap::Error> for Error {
    fn from(e: crate::wrap::Error) -> Error {
        match e {
            crate::wrap::Error::Verbs(v) => Error::Verbs(v),
            crate::wrap::Error::Ctrl(c) => Error::Ctrl(c),
            crate::wrap::Error::Alloc { len, source } => Error::Alloc { len, source },
        }
    }
}

impl From<WcError> for Error {
    fn from(e: WcError) -> Error {
        Error::Completion(e)
    }
}
