//! Raw Ethernet: packet send WQEs, striding receive queues and their rings.
//!
//! Each module is public at [`crate::mlx5dv`]; this folder groups them.

pub mod eth;
pub mod mprq;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod mprq_wq;
