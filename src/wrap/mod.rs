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
//! - MR tokens: [`crate::ctrl::Session::exchange_mrs`] with
//!   [`RegisteredMem::remote`].

#[cfg(feature = "tokio")]
#[allow(unsafe_code)]
pub mod aio;
mod error;
#[allow(unsafe_code)]
mod mem;
mod rc;
mod ud;

pub use error::{Error, Result};
pub use mem::{HugePages, MemOpts, RegisteredMem};
pub use rc::{connect_rc_mesh, connected_rc_pair, MeshOpts};
pub use ud::{UdEndpoint, UdOpts};
