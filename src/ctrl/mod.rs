//! Cluster control plane: who the ranks are, and a rendezvous to exchange
//! what RDMA needs out of band.
//!
//! - [`ClusterConfig`]: hosts, coordinator, rank and size from a TOML file,
//!   the environment, or the launcher (`srun`, `mpirun`, PMI), or found from
//!   this machine's addresses.
//! - [`Session`]: a star rendezvous over TCP with rank 0 as coordinator:
//!   [`Session::all_gather`], [`Session::barrier`], and the typed exchanges
//!   [`Session::exchange_endpoints`], [`Session::exchange_mrs`] and the DCT
//!   directory [`Session::exchange_dcts`] ([`DctInfo`]). Every wait
//!   has a deadline; a shared secret keeps strangers out; garbage, oversize
//!   frames, other versions and vanished peers give typed [`Error`]s.
//! - [`proto`]: the protocol itself as state machines free of I/O, which the
//!   session drives over sockets and tests drive in memory; [`wire`]: its
//!   frame format.
//!
//! ```no_run
//! use rrddmma::ctrl::{ClusterConfig, Session};
//! # fn main() -> Result<(), rrddmma::ctrl::Error> {
//! // Rank and size from srun/mpirun, or RRDDMMA_RANK; hosts from RRDDMMA_HOSTS.
//! let mut s = Session::join(&ClusterConfig::from_env()?)?;
//! let all = s.all_gather(format!("hello from {}", s.rank()).as_bytes())?;
//! assert_eq!(all.len(), s.size() as usize);
//! s.barrier()?;
//! # Ok(()) }
//! ```

pub(crate) mod auth;
mod config;
mod dct;
mod error;
mod exchange;
mod hostlist;
#[allow(unsafe_code)]
mod poll;
pub mod proto;
mod session;
pub mod wire;

pub use config::{resolve_addr, ClusterConfig, RankSource, Resolved, DEFAULT_PORT};
pub use dct::DctInfo;
pub use error::{Error, RejectCode, Result};
pub use exchange::QpInfo;
pub use session::Session;
