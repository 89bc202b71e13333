//! Control-plane errors.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a peer refused or ended a session, as carried by a reject frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RejectCode {
    /// The protocol versions differ (`detail`: the sender's version).
    Version = 1,
    /// The shared secret did not match, or one side has none.
    Auth = 2,
    /// The cluster sizes differ (`detail`: the sender's size).
    Size = 3,
    /// The rank is out of range or is the coordinator's (`detail`: the rank).
    Rank = 4,
    /// Another member already holds the rank (`detail`: the rank).
    Duplicate = 5,
    /// A member vanished during the session (`detail`: its rank).
    PeerLost = 6,
    /// A message broke the protocol.
    Protocol = 7,
    /// A deadline passed at the coordinator.
    Timeout = 8,
    /// The coordinator had too many connections in the handshake and let
    /// this one go (`detail`: its `max_pending`). A member retries within
    /// its join deadline.
    Busy = 9,
    /// A code this build does not know (from a newer peer).
    Unknown = 255,
}

impl RejectCode {
    /// The code for a wire byte; unknown bytes map to [`RejectCode::Unknown`].
    pub fn from_u8(v: u8) -> RejectCode {
        match v {
            1 => RejectCode::Version,
            2 => RejectCode::Auth,
            3 => RejectCode::Size,
            4 => RejectCode::Rank,
            5 => RejectCode::Duplicate,
            6 => RejectCode::PeerLost,
            7 => RejectCode::Protocol,
            8 => RejectCode::Timeout,
            9 => RejectCode::Busy,
            _ => RejectCode::Unknown,
        }
    }
}

/// A control-plane failure. Every variant says what failed and, where known,
/// which peer.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A socket operation failed.
    Io {
        /// What was being done.
        op: &'static str,
        /// The peer or local address involved, if known.
        addr: Option<SocketAddr>,
        /// The OS error.
        source: std::io::Error,
    },
    /// A deadline passed. The same shape as `prim::Error::Timeout` and
    /// `wrap::aio::Error::Timeout` (`op`, `after`, the same `Display`), with
    /// one addition: the ranks that had not answered.
    Timeout {
        /// What was being awaited, as a phrase (`waiting for members to join`).
        op: &'static str,
        /// How long was allowed (the `ClusterConfig` timeout that expired).
        after: Duration,
        /// Ranks that had not answered, when known (empty otherwise).
        missing: Vec<u32>,
    },
    /// A frame announced a payload above the cap.
    FrameTooLarge {
        /// Announced length.
        len: u32,
        /// The cap.
        cap: u32,
    },
    /// The bytes are not this protocol (wrong magic).
    BadMagic,
    /// A frame of this protocol could not be parsed.
    Malformed(&'static str),
    /// The peer speaks another protocol version.
    VersionMismatch {
        /// This build's version.
        ours: u8,
        /// The peer's version.
        theirs: u8,
    },
    /// The peer failed to prove the shared secret, or the secrets are configured
    /// on one side only.
    AuthFailed(&'static str),
    /// The peer refused us or ended the session, saying why.
    Rejected {
        /// The peer's rank (0 for the coordinator).
        by: u32,
        /// Its reason code.
        code: RejectCode,
        /// The number qualifying the code.
        detail: u32,
        /// Its words.
        reason: String,
    },
    /// A peer closed its connection or stopped answering mid-session.
    PeerLost {
        /// Its rank.
        rank: u32,
    },
    /// A message arrived that the protocol does not allow at this point.
    Protocol(String),
    /// The cluster description is incomplete or inconsistent.
    Config(String),
    /// A cluster file is not valid TOML or not a valid description.
    ConfigFile {
        /// The file, when read from one.
        path: Option<std::path::PathBuf>,
        /// 1-based line of the offending text (0 if the parser gave no place).
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The coordinator already had `max_pending` connections in the
    /// handshake, and let this one go to make room: the one that had waited
    /// longest, from the source with the most connections waiting.
    HandshakeFull {
        /// The bound (`proto::Params::max_pending`).
        max_pending: usize,
    },
    /// A contribution larger than the frame cap allows.
    TooLarge {
        /// Bytes offered.
        len: usize,
        /// Most bytes one rank may contribute.
        max: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The OS error is the `source()`: printed by whoever walks the chain.
            Error::Io { op, addr: Some(a), .. } => write!(f, "{op} ({a})"),
            Error::Io { op, addr: None, .. } => write!(f, "{op}"),
            Error::Timeout { op, after, missing } if missing.is_empty() => write!(f, "{op}: timed out after {after:?}"),
            Error::Timeout { op, after, missing } => {
                write!(f, "{op}: timed out after {after:?}; ranks {missing:?} had not answered")
            }
            Error::FrameTooLarge { len, cap } => write!(
                f,
                "a control frame of {len} bytes exceeds the {cap}-byte limit in force (max_frame once a rank is \
                 admitted; before that, the handshake's own frame size): if an admitted rank sent it, raise \
                 max_frame on every rank; before admission the sender is no rank of this session"
            ),
            Error::BadMagic => write!(f, "the peer does not speak the rrddmma control protocol (bad magic)"),
            Error::Malformed(what) => write!(f, "malformed control frame: {what}"),
            Error::VersionMismatch { ours, theirs } => {
                write!(
                    f,
                    "control protocol version mismatch: we speak {ours}, the peer {theirs}; \
                     run the same rrddmma version on every rank"
                )
            }
            Error::AuthFailed(why) => {
                write!(f, "authentication failed: {why}; configure the same secret on every rank (or on none)")
            }
            Error::Rejected { by, code, detail, reason } => {
                write!(f, "rank {by} ended the session ({code:?}, {detail}): {reason}")
            }
            Error::PeerLost { rank } => write!(f, "rank {rank} closed its connection or vanished mid-session"),
            Error::Protocol(what) => write!(f, "control protocol violation: {what}"),
            Error::Config(what) => write!(f, "cluster configuration: {what}"),
            Error::ConfigFile { path, line, column, message } => {
                match path {
                    Some(p) => write!(f, "cluster file {}", p.display())?,
                    None => write!(f, "cluster file")?,
                }
                write!(f, ", line {line}, column {column}: {message}")
            }
            Error::HandshakeFull { max_pending } => write!(
                f,
                "let go to make room: {max_pending} connections were in the handshake (max_pending), \
                 and this one had waited longest from the busiest source; a member retries, \
                 raise max_pending if honest ranks keep meeting this"
            ),
            Error::TooLarge { len, max } => {
                write!(f, "contribution of {len} bytes exceeds the {max} bytes one rank may send (raise max_frame)")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result with the control-plane [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
