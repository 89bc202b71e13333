//! Tag matching: the TM CQE and the tag operations on the SRQ's command QP.
//!
//! Each module is public at [`crate::mlx5dv`]; this folder groups them.

pub mod tm;
pub mod tm_wqe;
