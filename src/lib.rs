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
// docs.rs builds with `--cfg docsrs`: gated items say which feature (or
// linkage) they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
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

/// Setters (and, where a reader is needed, `get_` readers) of an option
/// struct, or of a C attribute struct with a mask: the one way this crate
/// writes them. Inside an `impl` block:
///
/// - `const name: T;`: `pub const fn name(mut self, v: T) -> Self` storing `v`
///   in the field `name` (for fields whose type has no destructor);
/// - `name: T;`: the same, not `const` (a `Vec`, a `String`, an `Option<Srq>`);
/// - either form with `, get_name` after the type also writes
///   `pub const fn get_name(&self) -> T` (only for `Copy` fields, and only
///   where programs need to read the value back);
/// - `name(T) => raw_field | MASK_BIT;`: `pub fn name(mut self, v: T) -> Self`
///   storing `v.into()` in `self.raw.raw_field` and setting
///   `AttrMask::MASK_BIT` in `self.mask` (`QpAttr`).
///
/// Each entry's doc comment says what it sets, its default and the C field
/// it maps to.
macro_rules! setters {
    () => {};
    ($(#[$m:meta])* const $name:ident: $t:ty $(, $get:ident)?; $($rest:tt)*) => {
        $(#[$m])*
        #[inline]
        #[must_use]
        pub const fn $name(mut self, v: $t) -> Self {
            self.$name = v;
            self
        }
        $(setters!(@get $name $get $t);)?
        setters!($($rest)*);
    };
    ($(#[$m:meta])* $name:ident: $t:ty $(, $get:ident)?; $($rest:tt)*) => {
        $(#[$m])*
        #[inline]
        #[must_use]
        pub fn $name(mut self, v: $t) -> Self {
            self.$name = v;
            self
        }
        $(setters!(@get $name $get $t);)?
        setters!($($rest)*);
    };
    ($(#[$m:meta])* $name:ident($t:ty) => $field:ident | $bit:ident; $($rest:tt)*) => {
        $(#[$m])*
        #[inline]
        #[must_use]
        pub fn $name(mut self, v: $t) -> Self {
            self.raw.$field = v.into();
            self.mask |= $crate::prim::AttrMask::$bit;
            self
        }
        setters!($($rest)*);
    };
    (@get $name:ident $get:ident $t:ty) => {
        #[doc = concat!("The value set by [`", stringify!($name), "`](Self::", stringify!($name), ").")]
        #[inline]
        pub const fn $get(&self) -> $t {
            self.$name
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
