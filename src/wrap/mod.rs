//! Convenience set-ups over [`crate::prim`] and [`crate::ctrl`]: the common
//! case in one call, with every knob still reachable.
//!
//! - [`RegisteredMem`]: aligned, zeroed, optionally huge-page memory,
//!   registered with the access flags chosen.
//! - [`connected_rc_pair`]: two RC QPs of one device connected to each other.
//! - [`connect_rc_mesh`]: one RC QP to every other rank of a
//!   [`crate::ctrl::Session`], connected through its endpoint exchange.
//! - [`UdEndpoint`]: a UD QP brought up, with an address-handle cache keyed by
//!   the peer's port address.
//! - [`connect_rc_cm`] / [`accept_rc_cm`] (feature `cm`): RC QPs connected
//!   by IP address through librdmacm.
//! - [`RcKeepalive`]: an idle RC connection's vanished peer as a typed
//!   error within a stated bound, driven by the loop that polls its CQ.
//! - [`dc::DciPool`]: DC initiators pooled under UCX's policies (`dcs`,
//!   `dcs_quota`, `hw_dcs`, `rand`).
//! - MR tokens: [`crate::ctrl::Session::exchange_mrs`] with
//!   [`RegisteredMem::remote`].

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
#[allow(unsafe_code)]
pub mod aio;
#[cfg(feature = "cm")]
mod cm;
#[allow(unsafe_code)]
pub mod dc;
mod error;
#[allow(unsafe_code)]
mod keepalive;
#[allow(unsafe_code)]
mod mem;
mod rc;
mod ud;

#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
pub use cm::{accept_rc_cm, connect_rc_cm, CmConn, CmListener, CmOpts, CmRequest};
pub use error::{Error, Result};
pub use keepalive::{LostCause, PeerLost, RcKeepalive};
pub use mem::{HugePages, MemOpts, RegisteredMem};
pub use rc::{connect_rc_mesh, connected_rc_pair, MeshOpts};
pub use ud::{UdEndpoint, UdOpts};
