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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message of `e`'s chain, outermost first.
    fn chain(e: &dyn std::error::Error) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut cur = e.source();
        while let Some(s) = cur {
            out.push(s.to_string());
            cur = s.source();
        }
        out
    }

    /// Asserts that no message of the chain repeats an inner one, as
    /// `anyhow`'s `{:#}` would show it.
    fn prints_each_message_once(e: &dyn std::error::Error, levels: usize) {
        let c = chain(e);
        assert_eq!(c.len(), levels, "{c:?}");
        for (i, outer) in c.iter().enumerate() {
            for inner in &c[i + 1..] {
                assert!(!outer.contains(inner.as_str()), "{outer:?} repeats {inner:?} in {c:?}");
            }
        }
    }

    #[test]
    fn chains_print_each_message_once() {
        let refused = || std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        let addr = Some("127.0.0.1:9".parse().unwrap());
        let io = crate::ctrl::Error::Io { op: "connect to the coordinator", addr, source: refused() };
        prints_each_message_once(&io, 2);
        let wrapped = Error::Ctrl(crate::ctrl::Error::Io { op: "connect", addr: None, source: refused() });
        prints_each_message_once(&wrapped, 2);
        assert_eq!(chain(&wrapped), ["connect", &refused().to_string()]);
        prints_each_message_once(&Error::Alloc { len: 4096, source: refused() }, 2);
        prints_each_message_once(&Error::Ctrl(crate::ctrl::Error::PeerLost { rank: 3 }), 1);
        prints_each_message_once(&Error::Verbs(crate::prim::Error::from_errno("ibv_create_qp", libc::ENOMEM)), 1);
    }
}
