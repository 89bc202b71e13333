//! Errors of the convenience layer: the verbs' or the control plane's.

use std::fmt;

/// A failure in a convenience call.
///
/// `Display` prints each message of the chain once: `Verbs` and `Ctrl` print
/// as the error they carry, and an OS error is left to `source()`, so
/// `anyhow`'s `{:#}` or a walk of `source()` shows every message exactly once.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A verbs call failed.
    Verbs(crate::prim::Error),
    /// The control plane failed.
    Ctrl(crate::ctrl::Error),
    /// Memory could not be allocated.
    Alloc {
        /// Bytes asked for.
        len: usize,
        /// The OS error.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Verbs(e) => e.fmt(f),
            Error::Ctrl(e) => e.fmt(f),
            // The OS error is the `source()`: printed by whoever walks the chain.
            Error::Alloc { len, .. } => write!(f, "cannot allocate {len} bytes"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // `Verbs` and `Ctrl` are transparent: they print as the inner
            // error, so the chain goes on with the inner error's source.
            Error::Verbs(e) => e.source(),
            Error::Ctrl(e) => e.source(),
            Error::Alloc { source, .. } => Some(source),
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

/// Result with the convenience layer's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
