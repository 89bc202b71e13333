//! Device tests: they need a real RDMA device, named by `RRDDMMA_TEST_DEVICE`.
//!
//! They are `#[ignore]`d so that a plain `cargo test` on a machine without a
//! device reports them as ignored rather than passed. `cargo xtask test` runs
//! them with `--ignored` on SoftRoCE (in a VM when the host has none); on
//! hardware: `RRDDMMA_TEST_DEVICE=mlx5_0 cargo test --test device -- --ignored`.
//! When the variable names a device that is not there, every test fails.

#[cfg(all(feature = "cm", feature = "tokio"))]
mod aio_cm;
mod alloc;
#[cfg(feature = "cm")]
mod cm;
#[cfg(feature = "cm")]
mod cm_ece;
mod common;
mod cq;
mod cx_bf;
mod cx_cq;
mod cx_dc;
mod cx_odp;
mod cx_raw;
#[cfg(feature = "tokio")]
mod dc_aio;
mod dc_mesh;
mod dc_mkey;
mod device;
#[cfg(not(rrddmma_mlnx_ofed4))]
mod devx;
mod domains;
mod errors;
mod eth;
mod event_loop;
mod events;
mod ex_post;
mod features;
mod flush;
mod hw_verbs;
mod iwarp;
mod liveness;
mod loopback;
mod mkey;
mod mlx5dv;
mod mprq;
mod mw2;
mod newer_kernel;
mod ops;
mod prim_regressions;
mod resources;
mod srq_limit;
mod stress;
mod tm;
mod ud_srq;
mod upgrade;
mod userspace;
mod v59_verbs;
mod wrap;
mod xrc_open;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;
