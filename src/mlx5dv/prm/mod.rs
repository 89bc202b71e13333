//! The PRM layer: the firmware command and context layouts of ConnectX
//! (`mlx5_ifc.h`), as typed field accessors. Off the data path: these are
//! the bytes of DEVX commands (`QUERY_HCA_CAP`, QP modify, `CREATE_MKEY`, ...)
//! and of what they return.
//!
//! Every structure is named as in the Linux kernel's
//! `include/linux/mlx5/mlx5_ifc.h` (`struct mlx5_ifc_qpc_bits` is [`Qpc`],
//! `struct mlx5_ifc_rst2init_qp_in_bits` is [`Rst2initQpIn`]) and is a
//! `#[repr(transparent)]` byte array of `MLX5_ST_SZ_BYTES` bytes with one
//! getter and one `set_` setter per field, named as the field
//! (`Qpc::lag_tx_port_affinity`, `Ads::set_udp_sport`), an accessor per
//! embedded structure (`Rts2rtsQpIn::qpc_mut`, `QueryHcaCapOut::atomic_caps`),
//! and `FIELDS` / `INFO`, the table it was generated from.
//!
//! # The convention
//! A field is `bits` wide at bit offset `bit_off` from the structure's start
//! ([`Field`]). The structure is a sequence of big-endian 32-bit dwords, bit
//! offset 0 being the most significant bit of the first; a field of up to 32
//! bits lies inside one dword, and a 64-bit field is two whole dwords, high
//! half first. This is `MLX5_SET` / `MLX5_GET` / `MLX5_SET64` / `MLX5_GET64`
//! of the kernel's `include/linux/mlx5/device.h` (and libmlx5's `DEVX_SET`).
//! One difference: a value wider than its field is a programming error here,
//! and the setter panics naming the structure, the field, the value and the
//! width, where `MLX5_SET` silently drops the high bits ([`Field::fits`]
//! checks first). Fields wider than 32 bits other than aligned 64-bit ones
//! (GIDs, MAC addresses, arrays) and reserved fields are not exposed.
//!
//! # Where the layouts come from, and how they are checked
//! The tables were written from Linux 6.1's `mlx5_ifc.h` (Debian's
//! `linux-source-6.1`). Where libmlx5 v59 writes a field that header lacks
//! (the DCI stream reset's `qpc_ext` and `opt_param_mask_95_32` in
//! [`Rts2rtsQpIn`], [`QpcExt`], capability bits such as
//! `cmd_hca_cap.qpc_extension`), the layout is rdma-core v59's
//! `providers/mlx5/mlx5_ifc.h`, and [`Info::rdma_core`] names it.
//!
//! `tests/mlx5_prm_oracle.rs` (run by `cargo xtask mlx5-harness`) compiles
//! the kernel's header with the kernel's own macros and compares, for every
//! field of every structure, `MLX5_SET` into a zeroed buffer against the
//! setter and `MLX5_GET` against the getter on random values and buffers,
//! the sizes against `MLX5_ST_SZ_BYTES`, each offset and width against
//! `__mlx5_bit_off` / `__mlx5_bit_sz`, and the constants against their C
//! values; the rdma-core members against rdma-core's header likewise.

mod caps;
mod consts;
mod entries;
mod field;
mod mkey;
mod objects;
mod qp;

pub use caps::*;
pub use consts::*;
pub use entries::{Klm, Ksm};
pub use field::{Field, Info, Sub};
pub use mkey::*;
pub use objects::*;
pub use qp::*;

/// The translation entries ([`Klm`], [`Ksm`]): in neither `mlx5_ifc.h`,
/// they follow the kernel's `struct mlx5_klm` / `struct mlx5_ksm`.
pub const ENTRIES: &[&Info] = &[&Klm::INFO, &Ksm::INFO];

/// Every `mlx5_ifc.h` structure of this module, for tools that walk them (the
/// oracle); the translation entries are in [`ENTRIES`].
pub const LAYOUTS: &[&Info] = &[
    &QueryHcaCapIn::INFO,
    &QueryHcaCapOut::INFO,
    &CmdHcaCap::INFO,
    &CmdHcaCap2::INFO,
    &AtomicCaps::INFO,
    &PerProtocolNetworkingOffloadCaps::INFO,
    &OdpPerTransportServiceCap::INFO,
    &OdpCap::INFO,
    &RoceCap::INFO,
    &QosCap::INFO,
    &Ads::INFO,
    &Qpc::INFO,
    &QpcExt::INFO,
    &Rst2initQpIn::INFO,
    &Rst2initQpOut::INFO,
    &Init2rtrQpIn::INFO,
    &Init2rtrQpOut::INFO,
    &Rtr2rtsQpIn::INFO,
    &Rtr2rtsQpOut::INFO,
    &Rts2rtsQpIn::INFO,
    &Rts2rtsQpOut::INFO,
    &QueryQpIn::INFO,
    &QueryQpOut::INFO,
    &Mkc::INFO,
    &CreateMkeyIn::INFO,
    &CreateMkeyOut::INFO,
    &Mtt::INFO,
    &Umem::INFO,
    &CreateUmemIn::INFO,
    &CreateUmemOut::INFO,
    &AllocUarIn::INFO,
    &AllocUarOut::INFO,
    &DeallocUarIn::INFO,
    &GeneralObjInCmdHdr::INFO,
    &GeneralObjOutCmdHdr::INFO,
    &SetPpRateLimitContext::INFO,
    &SetPpRateLimitIn::INFO,
    &SetPpRateLimitOut::INFO,
    &SchedulingContext::INFO,
    &CreateSchedulingElementIn::INFO,
    &CreateSchedulingElementOut::INFO,
    &Tisc::INFO,
    &CreateTisIn::INFO,
    &ModifyTisIn::INFO,
    &Lagc::INFO,
    &CreateLagIn::INFO,
    &ModifyLagIn::INFO,
    &CompEvent::INFO,
    &QpEvents::INFO,
    &AffiliatedEventHeader::INFO,
];
