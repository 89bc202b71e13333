//! Memory keys: mlx5 mkeys, their UMR configuration, and the memory-key WQE entries.
//!
//! Each module is public at [`crate::mlx5dv`]; this folder groups them.

#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod mkey;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod mkey_wr;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod umr;
