//! Errors of the async layer.

use std::fmt;

use crate::prim::WcError;

/// Result of an async operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Why an async operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Setting up or posting failed (the verbs layer's error).
    Verbs(crate::prim::Error),
    /// The device completed the request with an error status (a vanished
    /// peer gives `RETRY_EXC_ERR`, the requests after it `WR_FLUSH_ERR`).
    Completion(WcError),
    /// The TCP exchange that sets a connection up failed.
    Io(std::io::Error),
    /// The peer broke the memory-region protocol or the set-up exchange.
    Protocol(String),
    /// The endpoint is closed: its QP is gone or its driver stopped.
    Closed,
    /// The memory pool has no free piece of that size and alignment.
    PoolExhausted {
        /// Bytes asked for.
        size: usize,
        /// Bytes free in the pool (possibly fragmented).
        free: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Verbs(_) => f.write_str("verbs call failed"),
            Error::Completion(_) => f.write_str("RDMA request failed"),
            Error::Io(_) => f.write_str("connection set-up over TCP failed"),
            Error::Protocol(what) => write!(f, "protocol violation by the peer: {what}"),
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
            Error::Verbs(e) => Some(e),
            Error::Completion(e) => Some(e),
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::prim::Error> for Error {
    fn from(e: crate::prim::Error) -> Error {
        Error::Verbs(e)
    }
}

impl From<crate::wrap::Error> for Error {
    fn from(e: crate::wrap::Error) -> Error {
        match e {
            crate::wrap::Error::Verbs(v) => Error::Verbs(v),
            // Kept whole (not its text), so its own source stays in the chain.
            other => Error::Io(std::io::Error::other(other)),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<WcError> for Error {
    fn from(e: WcError) -> Error {
        Error::Completion(e)
    }
}
