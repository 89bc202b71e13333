//! ConnectX direct verbs (not built yet).
//!
//! Will hold: `mlx5dv_query_device` capabilities and clock conversion, raw
//! SQ/RQ/CQ/SRQ ring views from `mlx5dv_init_obj`, `#[repr(C)]` WQE segments
//! with big-endian fields, an SQ writer with the doorbell/BlueFlame sequence
//! behind an MMIO trait, a CQE decoder and direct poller, and DC transport.
//! The raw mlx5dv functions and structs are already in [`crate::bindings`].
