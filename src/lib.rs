//! rrddmma: RDMA verbs for Rust, specialised for NVIDIA/Mellanox ConnectX NICs.
//!
//! Layers, each a module, arrows pointing down only:
//!
//! | module | what it holds |
//! |---|---|
//! | [`ctrl`] | cluster control plane: configuration, rendezvous, endpoint exchange |
//! | [`wrap`] | convenience set-ups over [`prim`] |
//! | [`prim`] | thin, zero-cost verbs objects: devices, PD, MR, CQ, QP, work requests |
//! | [`mlx5dv`] | ConnectX direct verbs |
//! | [`bindings`] | FFI to libibverbs and mlx5dv, static inlines in Rust |
//!
//! How the crate links to libibverbs is decided at build time by a probe
//! (MLNX_OFED, pkg-config, or a static rdma-core build); [`build_info`] tells
//! which one a binary carries. See `docs/linkage.md`.
//!
//! # Error policy
//! A broken contract (a programming error) panics with a message saying what
//! to fix. A runtime failure (the kernel, the library or the device says no)
//! returns a typed [`prim::Error`]. Values that come from the kernel or the
//! device never panic.
//!
//! Argument checks: a value the program wrote and can check without asking
//! the device (a zero length, an alignment not a power of two, a range
//! outside a buffer, a slice too long for its count field, a timeout outside
//! its C range) panics before any call, naming the value and the fix (see
//! each function's `# Panics`). A value only the device or kernel can judge,
//! or one from outside the program (files, the environment, a peer), returns
//! a typed `Err`.
//!
//! Errors chain one way in every layer: a variant wrapping another layer's
//! error is transparent (its `Display` and `source()` are the inner
//! error's), and a variant giving context to an OS error prints the context
//! and returns the OS error from `source()` only, so `anyhow`'s `{:#}` shows
//! each message once. `Timeout` has the same fields (`op`, `after`) and
//! message in [`prim::Error`], [`ctrl::Error`] and `wrap::aio::Error`.

#![deny(missing_docs)]
#![deny(unsafe_code)]

/// A set-up, control-plane or fault event, through the `log` facade when the
/// `log` feature is on (never used on the data path). Without the feature
/// the arguments are type-checked and nothing is formatted.
#[cfg(feature = "log")]
macro_rules! event {
    ($level:ident, $($arg:tt)+) => { ::log::$level!($($arg)+) };
}
#[cfg(not(feature = "log"))]
macro_rules! event {
    ($level:ident, $($arg:tt)+) => {
        if false {
            let _ = format_args!($($arg)+);
        }
    };
}

#[allow(unsafe_code)]
pub mod bindings;
pub mod ctrl;
#[allow(unsafe_code)]
pub mod mlx5dv;
#[allow(unsafe_code)]
pub mod prim;
pub mod wrap;

mod build_info;
pub use build_info::{build_info, BuildInfo};

/// The README's code samples, compiled by `cargo test --doc`.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
