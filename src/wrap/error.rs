//! Errors of the convenience layer: the verbs' or the control plane's.

use std::fmt;

/// A failure in a convenience call.
///
/// The crate's one chaining convention: `Verbs` and `Ctrl` wrap another
/// layer's error whole and are transparent (they print as the inner error,
/// and `source()` is the inner error's source); `Alloc` prints its context
/// and leaves the OS error to `source()`. So `anyhow`'s `{:#}` or a walk of
/// `source()` shows every message exactly once.
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
            Error::Alloc { len, .. } => write!(
                f,
                "RegisteredMem: cannot map {len} bytes (with HugePages::Explicit, reserve huge pages: vm.nr_hugepages)"
            ),
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
    use std::time::Duration;

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

    /// The chain as `anyhow`'s `{:#}` prints it: the messages joined by ": ".
    fn alternate(e: &dyn std::error::Error) -> String {
        chain(e).join(": ")
    }

    /// Every layer chains the same way: wrapping variants print as the
    /// inner error (and hand on its source), context variants print their
    /// context and leave the OS error to `source()`.
    #[test]
    fn chains_print_each_message_once() {
        let refused = || std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        let os = refused().to_string();
        let addr = Some("127.0.0.1:9".parse().unwrap());
        let ctrl_io = || crate::ctrl::Error::Io { op: "connect to the coordinator", addr, source: refused() };
        let verbs = || crate::prim::Error::from_errno("ibv_create_qp", libc::ENOMEM);
        let verbs_text = verbs().to_string();

        // prim and ctrl: context variants and leaves.
        prints_each_message_once(&verbs(), 1);
        prints_each_message_once(&ctrl_io(), 2);
        assert_eq!(alternate(&ctrl_io()), format!("connect to the coordinator (127.0.0.1:9): {os}"));
        let timeout = crate::ctrl::Error::Timeout {
            op: "waiting for members to join",
            after: Duration::from_secs(2),
            missing: vec![2],
        };
        prints_each_message_once(&timeout, 1);
        prints_each_message_once(&crate::ctrl::Error::PeerLost { rank: 3 }, 1);

        // wrap: Verbs and Ctrl transparent, Alloc context.
        let wrapped = Error::Ctrl(ctrl_io());
        prints_each_message_once(&wrapped, 2);
        assert_eq!(alternate(&wrapped), alternate(&ctrl_io()));
        prints_each_message_once(&Error::Ctrl(crate::ctrl::Error::PeerLost { rank: 3 }), 1);
        prints_each_message_once(&Error::Verbs(verbs()), 1);
        assert_eq!(alternate(&Error::Verbs(verbs())), verbs_text);
        let alloc = Error::Alloc { len: 4096, source: std::io::Error::from_raw_os_error(libc::ENOMEM) };
        prints_each_message_once(&alloc, 2);
        assert!(alternate(&alloc).starts_with("RegisteredMem: cannot map 4096 bytes"), "{alloc}");

        #[cfg(feature = "tokio")]
        {
            use crate::wrap::aio::Error as Aio;
            // Wrapping variants, straight and through wrap::Error: transparent.
            for e in [Aio::Ctrl(ctrl_io()), Aio::from(Error::Ctrl(ctrl_io()))] {
                prints_each_message_once(&e, 2);
                assert_eq!(alternate(&e), alternate(&ctrl_io()));
            }
            let lost = Aio::from(Error::Ctrl(crate::ctrl::Error::PeerLost { rank: 3 }));
            assert!(matches!(lost, Aio::Ctrl(crate::ctrl::Error::PeerLost { rank: 3 })), "{lost:?}");
            for e in [Aio::Verbs(verbs()), Aio::from(Error::Verbs(verbs()))] {
                prints_each_message_once(&e, 1);
                assert_eq!(e.to_string(), verbs_text);
            }
            let wc = crate::prim::WcError {
                wr_id: 7,
                qp_num: 0x11,
                status: crate::prim::WcStatus::RETRY_EXC_ERR,
                opcode: None,
                vendor_err: 0,
            };
            let e = Aio::Completion(wc);
            prints_each_message_once(&e, 1);
            assert_eq!(e.to_string(), wc.to_string());
            // Context variants: the context, then the OS error once.
            let alloc = Aio::from(Error::Alloc { len: 64, source: std::io::Error::from_raw_os_error(libc::ENOMEM) });
            prints_each_message_once(&alloc, 2);
            let io = Aio::Io { op: "read the peer's QP numbers", addr, source: refused() };
            prints_each_message_once(&io, 2);
            assert_eq!(alternate(&io), format!("read the peer's QP numbers (127.0.0.1:9): {os}"));
            let t =
                Aio::Timeout { op: "waiting for the connect response (rdma_connect)", after: Duration::from_secs(2) };
            prints_each_message_once(&t, 1);
        }
    }

    /// The three layers' `Timeout`s print alike.
    #[test]
    fn timeouts_print_alike() {
        let after = Duration::from_millis(1500);
        let op = "waiting for a handshake";
        let want = "waiting for a handshake: timed out after 1.5s";
        assert_eq!(crate::prim::Error::Timeout { op, after }.to_string(), want);
        assert_eq!(crate::ctrl::Error::Timeout { op, after, missing: vec![] }.to_string(), want);
        assert_eq!(
            crate::ctrl::Error::Timeout { op, after, missing: vec![2, 3] }.to_string(),
            format!("{want}; ranks [2, 3] had not answered")
        );
        #[cfg(feature = "tokio")]
        assert_eq!(crate::wrap::aio::Error::Timeout { op, after }.to_string(), want);
        let io = std::io::Error::from(crate::prim::Error::Timeout { op, after });
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    }
}
