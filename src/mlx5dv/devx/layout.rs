//! The PRM layouts the DEVX commands use: fields named as in `mlx5_ifc.h`,
//! each a bit offset (counted from the most significant bit of the first
//! big-endian dword, as the header's `u8 name[bits]` arrays lay them out)
//! and a width. A private stand-in for the crate's PRM layer: the offsets
//! come from rdma-core v59's `providers/mlx5/mlx5_ifc.h` and, for the
//! Ethernet offload capabilities it lacks, the Linux 6.1
//! `include/linux/mlx5/mlx5_ifc.h`.

/// A field: `bit_off` bits from the start of its structure, `bits` wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) bit_off: usize,
    pub(crate) bits: usize,
}

const fn f(bit_off: usize, bits: usize) -> Field {
    Field { bit_off, bits }
}

impl Field {
    /// The same field inside a structure that sits `base` bits into another.
    pub(crate) const fn at(self, base: usize) -> Field {
        Field { bit_off: base + self.bit_off, bits: self.bits }
    }

    /// Writes `v` (its low `bits` bits) into `buf`, as `DEVX_SET` /
    /// `DEVX_SET64` do. Panics if the field is not inside `buf` (a layout
    /// error of this module, never a device value).
    pub(crate) fn set(self, buf: &mut [u8], v: u64) {
        if self.bits == 64 {
            debug_assert_eq!(self.bit_off % 32, 0);
            let b = self.bit_off / 8;
            buf[b..b + 8].copy_from_slice(&v.to_be_bytes());
            return;
        }
        assert!(self.bits <= 32 && (self.bit_off % 32) + self.bits <= 32, "field crosses a dword: {self:?}");
        let dw = self.bit_off / 32 * 4;
        let shift = 32 - self.bits - self.bit_off % 32;
        let mask: u32 = if self.bits == 32 { u32::MAX } else { ((1u32 << self.bits) - 1) << shift };
        let mut word = u32::from_be_bytes(buf[dw..dw + 4].try_into().expect("four bytes"));
        word = (word & !mask) | (((v as u32) << shift) & mask);
        buf[dw..dw + 4].copy_from_slice(&word.to_be_bytes());
    }

    /// Reads the field from `buf` (`DEVX_GET` / `DEVX_GET64`); a field past
    /// the end of `buf` reads as 0 (a short buffer from the device is not a
    /// reason to panic).
    pub(crate) fn get(self, buf: &[u8]) -> u64 {
        if self.bits == 64 {
            let b = self.bit_off / 8;
            return buf.get(b..b + 8).map_or(0, |s| u64::from_be_bytes(s.try_into().expect("eight bytes")));
        }
        let dw = self.bit_off / 32 * 4;
        let Some(s) = buf.get(dw..dw + 4) else { return 0 };
        let word = u32::from_be_bytes(s.try_into().expect("four bytes"));
        let shift = 32 - self.bits - self.bit_off % 32;
        let mask: u32 = if self.bits == 32 { u32::MAX } else { (1u32 << self.bits) - 1 };
        u64::from((word >> shift) & mask)
    }
}

/// Command opcodes (`MLX5_CMD_OP_*`).
pub(crate) mod op {
    pub(crate) const QUERY_HCA_CAP: u16 = 0x100;
    pub(crate) const CREATE_MKEY: u16 = 0x200;
    pub(crate) const RTS2RTS_QP: u16 = 0x505;
    pub(crate) const QUERY_QP: u16 = 0x50b;
    pub(crate) const QUERY_LAG: u16 = 0x842;
}

/// The command input header (every `*_in_bits`).
pub(crate) mod hdr {
    use super::{f, Field};
    pub(crate) const OPCODE: Field = f(0, 16);
    pub(crate) const OP_MOD: Field = f(48, 16);
    /// Output header: `status`, `syndrome`.
    pub(crate) const STATUS: Field = f(0, 8);
    pub(crate) const SYNDROME: Field = f(32, 32);
    /// Bytes of a command header, and of the smallest commands' in and out.
    pub(crate) const BYTES: usize = 16;
}

/// `struct mlx5_ifc_rts2rts_qp_in_bits` (464 bytes; out 16).
pub(crate) mod rts2rts {
    use super::{f, Field};
    pub(crate) const IN_BYTES: usize = 3712 / 8;
    pub(crate) const QPC_EXT: Field = f(64, 1);
    pub(crate) const QPN: Field = f(72, 24);
    pub(crate) const OPT_PARAM_MASK: Field = f(128, 32);
    /// The QP context's start.
    pub(crate) const QPC: usize = 192;
    pub(crate) const OPT_PARAM_MASK_95_32: Field = f(2112, 64);
    /// `qpc_data_ext`: the QP context extension's start.
    pub(crate) const QPC_EXT_DATA: usize = 2176;
}

/// `struct mlx5_ifc_qpc_bits` fields (offsets inside the QP context).
pub(crate) mod qpc {
    use super::{f, Field};
    pub(crate) const LAG_TX_PORT_AFFINITY: Field = f(4, 4);
    /// `primary_address_path.udp_sport`.
    pub(crate) const UDP_SPORT: Field = f(464, 16);
    /// `qpc_ext.dci_stream_channel_id`.
    pub(crate) const EXT_DCI_STREAM_CHANNEL_ID: Field = f(16, 16);
    /// `MLX5_QPC_OPT_MASK_RTS2RTS_LAG_TX_PORT_AFFINITY`.
    pub(crate) const OPT_LAG_TX_PORT_AFFINITY: u64 = 1 << 15;
    /// `MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID` (in `opt_param_mask_95_32`).
    pub(crate) const OPT32_DCI_STREAM_CHANNEL_ID: u64 = 1 << 0;
    /// `MLX5_QPC_OPT_MASK_32_UDP_SPORT` (in `opt_param_mask_95_32`).
    pub(crate) const OPT32_UDP_SPORT: u64 = 1 << 2;
}

/// `query_qp_in` (16 bytes) / `query_qp_out` (272 bytes).
pub(crate) mod query_qp {
    use super::{f, Field};
    pub(crate) const QPN: Field = f(72, 24);
    pub(crate) const OUT_BYTES: usize = 2176 / 8;
    pub(crate) const OUT_QPC: usize = 192;
}

/// `query_lag_out` (16 bytes): the LAG context's fields.
pub(crate) mod query_lag {
    use super::{f, Field};
    pub(crate) const LAG_STATE: Field = f(93, 3);
    pub(crate) const TX_REMAP_AFFINITY_1: Field = f(124, 4);
    pub(crate) const TX_REMAP_AFFINITY_2: Field = f(116, 4);
}

/// `create_mkey_in` (272 bytes before the translation entries) and its
/// `struct mlx5_ifc_mkc_bits` at bit 128.
pub(crate) mod mkey {
    use super::{f, Field};
    pub(crate) const IN_BYTES: usize = 2176 / 8;
    pub(crate) const PG_ACCESS: Field = f(96, 1);
    pub(crate) const MKEY_UMEM_VALID: Field = f(97, 1);
    pub(crate) const MKC: usize = 128;
    pub(crate) const TRANSLATIONS_OCTWORD_ACTUAL_SIZE: Field = f(768, 32);
    /// Not in rdma-core v59's or Linux 6.1's `mlx5_ifc.h` (reserved there);
    /// from DPDK's `mlx5_prm.h` (`mkey_umem_id`, `mkey_umem_offset`).
    pub(crate) const MKEY_UMEM_ID: Field = f(800, 32);
    pub(crate) const MKEY_UMEM_OFFSET: Field = f(832, 64);
    /// `create_mkey_out.mkey_index`.
    pub(crate) const OUT_MKEY_INDEX: Field = f(72, 24);

    // mkc, offsets inside it.
    pub(crate) const FREE: Field = f(1, 1);
    pub(crate) const ACCESS_MODE_4_2: Field = f(3, 3);
    pub(crate) const UMR_EN: Field = f(16, 1);
    pub(crate) const A: Field = f(17, 1);
    pub(crate) const RW: Field = f(18, 1);
    pub(crate) const RR: Field = f(19, 1);
    pub(crate) const LW: Field = f(20, 1);
    pub(crate) const LR: Field = f(21, 1);
    pub(crate) const ACCESS_MODE_1_0: Field = f(22, 2);
    pub(crate) const QPN: Field = f(32, 24);
    pub(crate) const MKEY_7_0: Field = f(56, 8);
    pub(crate) const LENGTH64: Field = f(96, 1);
    pub(crate) const EN_RINVAL: Field = f(103, 1);
    pub(crate) const PD: Field = f(104, 24);
    pub(crate) const START_ADDR: Field = f(128, 64);
    pub(crate) const LEN: Field = f(192, 64);
    pub(crate) const TRANSLATIONS_OCTWORD_SIZE: Field = f(416, 32);
    pub(crate) const LOG_PAGE_SIZE: Field = f(475, 5);
}

/// `query_hca_cap_in` / `_out`: the capability block at bit 128 (4096 bytes).
pub(crate) mod hca_cap {
    pub(crate) const OUT_BYTES: usize = 32896 / 8;
    pub(crate) const CAPABILITY_BYTE: usize = 16;
    pub(crate) const CAPABILITY_BYTES: usize = 4096;
}

/// `struct mlx5_ifc_cmd_hca_cap_bits` (general device capabilities).
pub(crate) mod general {
    use super::{f, Field};
    pub(crate) const VHCA_ID: Field = f(48, 16);
    pub(crate) const LOG_MAX_QP: Field = f(155, 5);
    pub(crate) const LOG_MAX_SRQ: Field = f(171, 5);
    pub(crate) const LOG_MAX_CQ: Field = f(219, 5);
    pub(crate) const LOG_MAX_MKEY: Field = f(234, 6);
    pub(crate) const LOG_MAX_KLM_LIST_SIZE: Field = f(282, 6);
    pub(crate) const QPC_EXTENSION: Field = f(290, 1);
    pub(crate) const LOG_MAX_RA_REQ_QP: Field = f(330, 6);
    pub(crate) const RTS2RTS_QP_UDP_SPORT: Field = f(337, 1);
    pub(crate) const RTS2RTS_LAG_TX_PORT_AFFINITY: Field = f(338, 1);
    pub(crate) const LOG_MAX_RA_RES_QP: Field = f(346, 6);
    pub(crate) const PORT_TYPE: Field = f(438, 2);
    pub(crate) const LOG_MAX_MSG: Field = f(451, 5);
    pub(crate) const DCT: Field = f(538, 1);
    pub(crate) const QOS: Field = f(539, 1);
    pub(crate) const ROCE: Field = f(541, 1);
    pub(crate) const ATOMIC: Field = f(542, 1);
    pub(crate) const LAG_TX_PORT_AFFINITY: Field = f(632, 1);
    pub(crate) const NUM_LAG_PORTS: Field = f(636, 4);
    pub(crate) const LOG_MAX_PD: Field = f(811, 5);
    pub(crate) const DEVICE_FREQUENCY_KHZ: Field = f(1248, 32);
    /// Linux 6.1's header (rdma-core v59's has these bits reserved).
    pub(crate) const LOG_MAX_DCI_STREAM_CHANNELS: Field = f(1419, 5);
    pub(crate) const LOG_MAX_DCI_ERRORED_STREAMS: Field = f(1427, 5);
    pub(crate) const TAG_MATCHING: Field = f(1520, 1);
    pub(crate) const LOG_TAG_MATCHING_LIST_SZ: Field = f(1523, 5);
}

/// `struct mlx5_ifc_atomic_caps_bits`.
pub(crate) mod atomic {
    use super::{f, Field};
    pub(crate) const ATOMIC_REQ_8B_ENDIANNESS_MODE: Field = f(64, 2);
    pub(crate) const ATOMIC_OPERATIONS: Field = f(144, 16);
    pub(crate) const ATOMIC_SIZE_QP: Field = f(176, 16);
    pub(crate) const ATOMIC_SIZE_DC: Field = f(208, 16);
}

/// `struct mlx5_ifc_per_protocol_networking_offload_caps_bits` (Linux 6.1's
/// header; rdma-core v59's has none).
pub(crate) mod eth {
    use super::{f, Field};
    pub(crate) const CSUM_CAP: Field = f(0, 1);
    pub(crate) const VLAN_CAP: Field = f(1, 1);
    pub(crate) const LRO_CAP: Field = f(2, 1);
    pub(crate) const WQE_VLAN_INSERT: Field = f(7, 1);
    pub(crate) const MAX_LSO_CAP: Field = f(11, 5);
    pub(crate) const WQE_INLINE_MODE: Field = f(18, 2);
    pub(crate) const SWP: Field = f(32, 1);
}

/// `struct mlx5_ifc_odp_cap_bits`: one 32-bit group per transport.
pub(crate) mod odp {
    pub(crate) const RC: usize = 128;
    pub(crate) const UC: usize = 160;
    pub(crate) const UD: usize = 192;
    pub(crate) const XRC: usize = 224;
    pub(crate) const DC: usize = 256;
}

/// `struct mlx5_ifc_roce_cap_bits` (Linux 6.1's header).
pub(crate) mod roce {
    use super::{f, Field};
    pub(crate) const ROCE_APM: Field = f(0, 1);
    pub(crate) const SW_R_ROCE_SRC_UDP_PORT: Field = f(4, 1);
    pub(crate) const QP_TS_FORMAT: Field = f(30, 2);
    pub(crate) const R_ROCE_MAX_SRC_UDP_PORT: Field = f(192, 16);
    pub(crate) const R_ROCE_MIN_SRC_UDP_PORT: Field = f(208, 16);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `DEVX_SET`'s placement: bit 0 is the most significant bit of the
    /// first big-endian dword.
    #[test]
    fn set_and_get_place_fields_as_devx_set() {
        let mut b = [0u8; 16];
        hdr::OPCODE.set(&mut b, 0x505);
        assert_eq!(&b[..2], &[0x05, 0x05]);
        rts2rts::QPN.set(&mut b, 0xabcdef);
        assert_eq!(&b[8..12], &[0x00, 0xab, 0xcd, 0xef]);
        rts2rts::QPC_EXT.set(&mut b, 1);
        assert_eq!(b[8], 0x80);
        assert_eq!(rts2rts::QPN.get(&b), 0xabcdef);
        let mut m = [0u8; 8];
        qpc::LAG_TX_PORT_AFFINITY.set(&mut m, 2);
        assert_eq!(m[0], 0x02);
        assert_eq!(Field { bit_off: 200, bits: 8 }.get(&m), 0, "past the end reads 0");
    }
}
