//! rrddmma: RDMA verbs for Rust, specialised for NVIDIA/Mellanox ConnectX NICs.
//!
//! Layers, each a module; a module imports only the ones it builds on:
//!
//! | module | what it holds | builds on |
//! |---|---|---|
//! | [`wrap`] | convenience set-ups over [`prim`], meshes over [`ctrl`]'s session | [`ctrl`], [`prim`] |
//! | [`ctrl`] | cluster control plane: configuration, rendezvous, endpoint exchange | [`prim`] |
//! | [`mlx5dv`] | ConnectX direct verbs on [`prim`]'s objects | [`prim`], [`bindings`] |
//! | [`prim`] | thin, zero-cost verbs objects: devices, PD, MR, CQ, QP, work requests | [`bindings`] |
//! | [`bindings`] | FFI to libibverbs and mlx5dv, static inlines in Rust | |
//!
//! [`mlx5dv`] sits beside [`ctrl`] and [`wrap`], above [`prim`]: it takes a
//! [`prim::Qp`] or [`prim::Cq`] and reaches into its queues; [`prim`] never
//! imports it. Within each layer no two files import each other (`cargo
//! xtask test` checks it).
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
