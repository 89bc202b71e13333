//! Async RDMA on tokio (feature `tokio`): connect by address, then await
//! one-sided and two-sided operations, with memory the async-rdma way.
//!
//! - [`RcEndpoint::connect`] / [`Listener::accept`]: an RC connection set up
//!   over TCP (the peers swap [`QpInfo`](crate::ctrl::QpInfo)s), carrying a
//!   data QP and a control QP for the memory-region protocol.
//!   [`RcEndpoint::connect_cm`] / [`Listener::bind_cm`] (feature `cm`, on by
//!   default) connect the same pair of QPs through the RDMA CM, by IP
//!   address with no TCP side channel (a CM connection for each QP,
//!   paired by a token). [`RcEndpoint::new`] takes a connection and a
//!   pool the caller already has (a data QP, a control QP, their CQ), as
//!   [`LocalEndpoint::new`] does; [`LocalEndpoint::into_parts`] gives them
//!   back, so both endpoints can run over one connection in turn.
//! - [`DcLocalEndpoint`]: the per-thread endpoint over a DCI pool
//!   ([`DciPool`](crate::wrap::dc::DciPool)), one request per target
//!   routed by the pool's policy.
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
//! # The peer
//! The pool is registered for local access only; a piece lent or granted
//! to the peer gets a registration of its own over exactly its bytes,
//! removed when the peer gives it back, so a peer reaches what it was
//! given and nothing else. What a peer can make an endpoint hold is bounded
//! ([`AioOpts::grant_quota_bytes`], [`AioOpts::grant_quota_count`],
//! [`AioOpts::lend_backlog`]); a message that breaks the control protocol
//! closes the endpoint with [`Error::Protocol`]; a peer that goes away (its
//! TCP connection or CM connection ends, or it acknowledges no keepalive
//! for [`AioOpts::peer_timeout`]) ends every waiting call with
//! [`Error::Closed`]. [`AioOpts::secret`] requires a shared secret on the
//! TCP set-up. `docs/aio.md` says exactly what holds.
//!
//! # Cancellation
//! Operations take their buffers by value and give them back with the
//! result. While the device may access a buffer, the operation's future
//! holds it, and a future dropped before its completion hands it to the
//! endpoint's table of requests in flight: the buffer returns to the pool
//! when its completion arrives (or when the QP is destroyed, after which
//! the device touches nothing). No memory is freed or reused before that.
//!
//! # Completions
//! An operation's future posts its request and polls the shared CQ at its
//! first poll, under one lock, and enters the request in the table of
//! requests in flight only if its completion was not there; later polls
//! poll the CQ again (one poller at a time), handing every completion
//! found to its request: a completion that is already there costs no task
//! switch, no wake-up and no allocation. The requests in flight are a
//! slab indexed by `wr_id`. One driver task per endpoint polls when no operation does: it hands each
//! completion over and wakes the operation waiting for it, polls a few more
//! times while completions keep arriving (a bounded, adaptive spin:
//! [`AioOpts::spin_polls`]), and otherwise sleeps on the completion channel
//! (arm, poll again, await readability), unless [`AioOpts::busy_poll`] asks
//! it to spin for latency.

mod auth;
#[cfg(feature = "cm")]
mod cm;
mod control;
mod dc_local;
mod driver;
mod endpoint;
mod error;
mod listener;
mod local;
mod pool;

pub use control::Denial;
pub use dc_local::{DcLocalEndpoint, DcTarget};
pub use endpoint::{AioOpts, RcEndpoint, Received};
pub use error::{Error, Result};
pub use listener::Listener;
pub use local::LocalEndpoint;
pub use pool::{LocalMr, MrPool};
