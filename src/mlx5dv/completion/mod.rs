//! Completions: the CQE formats, the CQ ring, compressed sessions and their mini-CQEs, and the completion clock.
//!
//! Each module is public at [`crate::mlx5dv`]; this folder groups them.

pub mod clock;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod comp;
pub mod cq;
pub mod cqe;
pub mod mini;
