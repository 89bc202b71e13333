//! Async RDMA on tokio (feature `tokio`): connect by address, then await
//! one-sided and two-sided operations, with memory the async-rdma way.
//!
//! - [`RcEndpoint::connect`] / [`Listener::accept`]: an RC connection set up
//!   over TCP (the peers swap [`QpInfo`](crate::ctrl::QpInfo)s), carrying a
//!   data QP and a control QP for the memory-region protocol.
//!   [`RcEndpoint::connect_cm`] / [`Listener::bind_cm`] (feature `cm`, on by
//!   default) connect the same pair of QPs through the RDMA CM, by IP
//!   address with no TCP side channel.
//! - Operations are futures: [`RcEndpoint::write`], [`RcEndpoint::read`],
//!   [`RcEndpoint::write_with_imm`], [`RcEndpoint::send`],
//!   [`RcEndpoint::recv`], [`RcEndpoint::fetch_add`],
//!   [`RcEndpoint::compare_swap`]; any number may be in flight on one QP.
//! - Memory: [`RcEndpoint::alloc_local_mr`] hands out pieces of a registered
//!   pool ([`LocalMr`]); [`RcEndpoint::request_remote_mr`] asks the peer for
//!   a region of its own; [`RcEndpoint::send_local_mr`] /
//!   [`RcEndpoint::receive_remote_mr`] lend a region's token;
//!   [`RcEndpoint::send_remote_mr`] / [`RcEndpoint::receive_local_mr`] give a
//!   granted region back to its owner. `docs/aio.md` has the wire protocol.
//!
//! # Cancellation
//! Operations take their buffers by value and give them back with the
//! result. While the device may access a buffer, the endpoint's table of
//! requests in flight owns it: dropping a future drops only the receiving
//! half of its answer, and the buffer returns to the pool when its
//! completion arrives (or when the QP is destroyed, after which the device
//! touches nothing). No memory is freed or reused before that.
//!
//! # Completions
//! One driver task per endpoint polls the shared CQ, hands each completion
//! to the operation waiting for it, and otherwise sleeps on the completion
//! channel (arm, poll again, await readability: no busy polling), unless
//! [`AioOpts::busy_poll`] asks it to spin for latency.

mod auth;
#[cfg(feature = "cm")]
mod cm;
mod control;
mod driver;
mod endpoint;
mod error;
mod listener;
mod pool;

pub use control::Denial;
pub use endpoint::{AioOpts, RcEndpoint, Received};
pub use error::{Error, Result};
pub use listener::Listener;
pub use pool::{LocalMr, MrPool};
