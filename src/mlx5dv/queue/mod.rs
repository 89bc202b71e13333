//! The rings and their segments: big-endian fields, doorbells, WQE segments and typed WQEs, the send ring, address vectors and the views of verbs objects.
//!
//! Each module is public at [`crate::mlx5dv`]; this folder groups them.

pub mod av;
pub mod be;
pub mod mmio;
#[cfg(not(rrddmma_mlnx_ofed4))]
pub mod obj;
pub mod seg;
pub mod sq;
#[cfg(test)]
pub(crate) mod test_ring;
pub mod wqe;
