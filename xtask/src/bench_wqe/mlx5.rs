//! The libmlx5 column: benches/wqe_cost/wqe_cost_mlx5.c linked with the
//! pinned rdma-core v59 build's `libmlx5.a` and the libmlx5 harness's
//! object factory (tests/provider/mlx5_provider.c, library build).

use std::path::PathBuf;

use crate::Result;

/// Builds the libmlx5 program; an error says why there is none.
pub fn build() -> Result<PathBuf> {
    Err("not written yet".into())
}
