//! Errors of the convenience layer: the verbs' or the control plane's.

use std::fmt;

/// A failure in a convenience call.
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
            Error::Alloc { len, source } => write!(f, "cannot allocate {len} bytes: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Verbs(e) => Some(e),
            Error::Ctrl(e) => Some(e),
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
