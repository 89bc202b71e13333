//! The 16-byte translation entries that follow `CREATE_MKEY`'s fixed
//! structure (and a UMR's translation list) for the KLM and KSM access
//! modes. Neither `mlx5_ifc.h` defines them: their layout is the Linux
//! kernel's `struct mlx5_klm` / `struct mlx5_ksm` (`include/linux/mlx5/qp.h`,
//! big-endian members), whose member names they take; `tests/mlx5_prm_oracle.rs`
//! checks them against those structures. The same convention as the
//! `mlx5_ifc.h` structures applies (a `MLX5_GET` on them reads what the
//! kernel's members hold).

use crate::mlx5dv::prm::field::layout;

layout! {
    /// A KLM entry: `bcount` bytes of the memory key `key` from address `va`
    /// (rdma-core's `struct mlx5_wqe_umr_klm_seg`: `byte_count`, `mkey`,
    /// `address`). Not in `mlx5_ifc.h`: the kernel's `struct mlx5_klm`.
    Klm = "klm", bits 0x80, kernel_bits 0x0;
    fields {
        "bcount" bcount set_bcount 0x0 32 u32;
        "key" key set_key 0x20 32 u32;
        "va" va set_va 0x40 64 u64;
    }
    subs {
    }
    rdma_core []
}

layout! {
    /// A KSM entry: fixed-size ranges, one per entry, of the memory key `key`
    /// from address `va` (the first dword is reserved). Not in `mlx5_ifc.h`:
    /// the kernel's `struct mlx5_ksm`.
    Ksm = "ksm", bits 0x80, kernel_bits 0x0;
    fields {
        "key" key set_key 0x20 32 u32;
        "va" va set_va 0x40 64 u64;
    }
    subs {
    }
    rdma_core []
}
