//! WQE segments (`#[repr(C)]`, big-endian fields) and their encoders.
//!
//! Layouts and encoders follow `mlx5dv.h`; `tests/mlx5_oracle.rs` compares
//! them byte for byte with the header's own helpers on random inputs.

use crate::bindings as ffi;
use crate::mlx5dv::queue::be::{Be16, Be32, Be64};
use crate::prim::cvalue::c_type;

/// Size of a WQE basic block.
pub const SEND_WQE_BB: usize = 64;
/// Bytes per DS unit (octoword).
pub const DS_BYTES: usize = 16;

c_type! {
    /// The `fm_ce_se` bits of the control segment (`MLX5_WQE_CTRL_*`).
    #[doc(alias = "fm_ce_se")]
    pub flags CtrlFlags: u8, from consts ffi {
        /// Generate a CQE.
        CQ_UPDATE = MLX5_WQE_CTRL_CQ_UPDATE "MLX5_WQE_CTRL_CQ_UPDATE",
        /// Solicited event.
        SOLICITED = MLX5_WQE_CTRL_SOLICITED "MLX5_WQE_CTRL_SOLICITED",
        /// Strong fence: wait for earlier WQEs to complete.
        FENCE = MLX5_WQE_CTRL_FENCE "MLX5_WQE_CTRL_FENCE",
        /// Small fence: wait for earlier RDMA READs and atomics.
        INITIATOR_SMALL_FENCE = MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE",
    }
}

c_type! {
    /// Send WQE opcode (`MLX5_OPCODE_*`), the low byte of the control
    /// segment's `opmod_idx_opcode`.
    #[doc(alias = "MLX5_OPCODE")]
    pub value WqeOpcode: u8, from consts ffi {
        /// NOP.
        NOP = MLX5_OPCODE_NOP "MLX5_OPCODE_NOP",
        /// SEND with invalidate.
        SEND_INVAL = MLX5_OPCODE_SEND_INVAL "MLX5_OPCODE_SEND_INVAL",
        /// RDMA WRITE.
        RDMA_WRITE = MLX5_OPCODE_RDMA_WRITE "MLX5_OPCODE_RDMA_WRITE",
        /// RDMA WRITE with immediate.
        RDMA_WRITE_IMM = MLX5_OPCODE_RDMA_WRITE_IMM "MLX5_OPCODE_RDMA_WRITE_IMM",
        /// SEND.
        SEND = MLX5_OPCODE_SEND "MLX5_OPCODE_SEND",
        /// SEND with immediate.
        SEND_IMM = MLX5_OPCODE_SEND_IMM "MLX5_OPCODE_SEND_IMM",
        /// TCP segmentation offload (raw packet QPs).
        TSO = MLX5_OPCODE_TSO "MLX5_OPCODE_TSO",
        /// RDMA READ.
        RDMA_READ = MLX5_OPCODE_RDMA_READ "MLX5_OPCODE_RDMA_READ",
        /// Compare-and-swap.
        ATOMIC_CS = MLX5_OPCODE_ATOMIC_CS "MLX5_OPCODE_ATOMIC_CS",
        /// Fetch-and-add.
        ATOMIC_FA = MLX5_OPCODE_ATOMIC_FA "MLX5_OPCODE_ATOMIC_FA",
        /// Masked compare-and-swap (extended atomics).
        ATOMIC_MASKED_CS = MLX5_OPCODE_ATOMIC_MASKED_CS "MLX5_OPCODE_ATOMIC_MASKED_CS",
        /// Masked fetch-and-add (extended atomics).
        ATOMIC_MASKED_FA = MLX5_OPCODE_ATOMIC_MASKED_FA "MLX5_OPCODE_ATOMIC_MASKED_FA",
        /// Fast memory registration.
        FMR = MLX5_OPCODE_FMR "MLX5_OPCODE_FMR",
        /// Local invalidate.
        LOCAL_INVAL = MLX5_OPCODE_LOCAL_INVAL "MLX5_OPCODE_LOCAL_INVAL",
        /// Configuration command.
        CONFIG_CMD = MLX5_OPCODE_CONFIG_CMD "MLX5_OPCODE_CONFIG_CMD",
        /// Set protection-signature value.
        SET_PSV = MLX5_OPCODE_SET_PSV "MLX5_OPCODE_SET_PSV",
        /// User-mode memory registration.
        UMR = MLX5_OPCODE_UMR "MLX5_OPCODE_UMR",
        /// Tag matching.
        TAG_MATCHING = MLX5_OPCODE_TAG_MATCHING "MLX5_OPCODE_TAG_MATCHING",
        /// Flow table access.
        FLOW_TBL_ACCESS = MLX5_OPCODE_FLOW_TBL_ACCESS "MLX5_OPCODE_FLOW_TBL_ACCESS",
        /// Memory-to-memory offload.
        MMO = MLX5_OPCODE_MMO "MLX5_OPCODE_MMO",
    }
}

/// The control segment's opmod for masked (extended) atomics on arguments of
/// `2^log_arg_bytes` bytes: `0x08 | (log_arg_bytes - 2)` (0x08 for 4 bytes,
/// 0x09 for 8). Checked against public mlx5 code, not on hardware.
pub const fn ext_atomic_opmod(log_arg_bytes: u8) -> u8 {
    0x08 | (log_arg_bytes - 2)
}

/// Control segment (`struct mlx5_wqe_ctrl_seg`, packed, 4-aligned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(4))]
pub struct CtrlSeg {
    /// `opmod << 24 | wqe_index << 8 | opcode`.
    pub opmod_idx_opcode: Be32,
    /// `qpn << 8 | ds`.
    pub qpn_ds: Be32,
    /// WQE signature.
    pub signature: u8,
    /// DCI stream channel (big-endian, unaligned in the C layout).
    pub dci_stream_channel_id: [u8; 2],
    /// Fence mode, completion and solicited-event bits.
    pub fm_ce_se: u8,
    /// Immediate data / invalidation key, stored as given.
    pub imm: u32,
}

impl CtrlSeg {
    /// What `mlx5dv_set_ctrl_seg` writes: `imm` is stored as given (already
    /// in network order for immediates); bytes 9-10 are left untouched.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn set(&mut self, pi: u16, opcode: u8, opmod: u8, qpn: u32, fm_ce_se: u8, ds: u8, signature: u8, imm: u32) {
        self.opmod_idx_opcode = Be32::new((u32::from(opmod) << 24) | (u32::from(pi) << 8) | u32::from(opcode));
        self.qpn_ds = Be32::new((qpn << 8) | u32::from(ds));
        self.fm_ce_se = fm_ce_se;
        self.signature = signature;
        self.imm = imm;
    }

    /// The opcode.
    pub fn opcode(&self) -> u8 {
        self.opmod_idx_opcode.get() as u8
    }

    /// The WQE index (`pi` at post time).
    pub fn wqe_index(&self) -> u16 {
        (self.opmod_idx_opcode.get() >> 8) as u16
    }

    /// The DS count.
    pub fn ds(&self) -> u8 {
        self.qpn_ds.get() as u8
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn_ds.get() >> 8
    }
}

/// Remote address segment (`struct mlx5_wqe_raddr_seg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RaddrSeg {
    /// Remote address.
    pub raddr: Be64,
    /// Remote key.
    pub rkey: Be32,
    /// Reserved (zero).
    pub reserved: u32,
}

impl RaddrSeg {
    /// Sets address and key.
    #[inline(always)]
    pub fn set(&mut self, raddr: u64, rkey: u32) {
        self.raddr = Be64::new(raddr);
        self.rkey = Be32::new(rkey);
        self.reserved = 0;
    }
}

/// Data (scatter/gather) segment (`struct mlx5_wqe_data_seg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DataSeg {
    /// Length in bytes.
    pub byte_count: Be32,
    /// Local key.
    pub lkey: Be32,
    /// Address.
    pub addr: Be64,
}

impl DataSeg {
    /// What `mlx5dv_set_data_seg` writes.
    #[inline(always)]
    pub fn set(&mut self, length: u32, lkey: u32, addr: u64) {
        self.byte_count = Be32::new(length);
        self.lkey = Be32::new(lkey);
        self.addr = Be64::new(addr);
    }
}

/// Atomic segment (`struct mlx5_wqe_atomic_seg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct AtomicSeg {
    /// Swap value (CAS) or addend (FAA).
    pub swap_add: Be64,
    /// Compare value (CAS).
    pub compare: Be64,
}

/// Masked 8-byte atomic segment for compare-and-swap: swap, compare and
/// their masks (32 bytes; `log_arg_sz` 3 in the opmod).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MaskedCasSeg {
    /// Swap value.
    pub swap: Be64,
    /// Compare value.
    pub compare: Be64,
    /// Bits of `swap` to write.
    pub swap_mask: Be64,
    /// Bits to compare.
    pub compare_mask: Be64,
}

/// Masked 8-byte atomic segment for fetch-and-add: addend and the mask of
/// field boundaries (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MaskedFaSeg {
    /// Addend.
    pub add: Be64,
    /// Bits where a carry stops (field boundaries).
    pub field_boundary: Be64,
}

/// Inline data header (`struct mlx5_wqe_inl_data_seg`); the data follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct InlineSeg {
    /// `BE32(len | MLX5_INLINE_SEG)`.
    pub byte_count: Be32,
}

/// `MLX5_INLINE_SEG`.
pub const INLINE_SEG: u32 = 0x8000_0000;

/// `MLX5_INVALID_LKEY`: the key of a data segment that ends a scatter list.
pub const INVALID_LKEY: u32 = 0x100;

/// Address vector / datagram segment (`struct mlx5_wqe_av`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DatagramSeg {
    /// Q_Key in the high half (UD), or the DC access key.
    pub key: Be64,
    /// `ext << 31 | dest QPN (UD) or DCT number (DC)`.
    pub dqp_dct: Be32,
    /// Static rate and SL.
    pub stat_rate_sl: u8,
    /// Force loopback and source LID bits.
    pub fl_mlid: u8,
    /// Remote LID.
    pub rlid: Be16,
    /// Reserved.
    pub reserved0: [u8; 4],
    /// Remote MAC (RoCE).
    pub rmac: [u8; 6],
    /// Traffic class.
    pub tclass: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// GRH flag, source GID index, flow label.
    pub grh_gid_fl: Be32,
    /// Remote GID.
    pub rgid: [u8; 16],
}

impl DatagramSeg {
    /// What `mlx5dv_set_dgram_seg` writes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn set(
        &mut self,
        key: u64,
        dqp_dct: u32,
        ext: u8,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: &[u8; 6],
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: &[u8; 16],
    ) {
        self.key = Be64::new(key);
        self.dqp_dct = Be32::new((u32::from(ext) << 31) | dqp_dct);
        self.stat_rate_sl = stat_rate_sl;
        self.fl_mlid = fl_mlid;
        self.rlid = Be16::new(rlid);
        self.rmac = *rmac;
        self.tclass = tclass;
        self.hop_limit = hop_limit;
        self.grh_gid_fl = Be32::new(grh_gid_fl);
        self.rgid = *rgid;
    }
}

/// Ethernet segment (`struct mlx5_wqe_eth_seg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct EthSeg {
    /// Reserved.
    pub rsvd0: u32,
    /// Checksum offload flags.
    pub cs_flags: u8,
    /// Reserved.
    pub rsvd1: u8,
    /// TSO maximum segment size.
    pub mss: Be16,
    /// Reserved.
    pub rsvd2: u32,
    /// Length of the inlined headers.
    pub inline_hdr_sz: Be16,
    /// First two bytes of the inlined headers.
    pub inline_hdr_start: [u8; 2],
    /// Next sixteen bytes of the inlined headers.
    pub inline_hdr: [u8; 16],
}

impl EthSeg {
    /// What `mlx5dv_set_eth_seg` writes: `hdr` is copied from
    /// `inline_hdr_start` on (into `inline_hdr` beyond two bytes).
    ///
    /// # Panics
    /// If `hdr` is longer than the 18 bytes the segment holds (a programming
    /// error: longer headers continue in the following segments).
    #[inline(always)]
    pub fn set(&mut self, cs_flags: u8, mss: u16, hdr: &[u8]) {
        assert!(hdr.len() <= 18, "an Ethernet segment holds 18 inline header bytes, not {}", hdr.len());
        self.cs_flags = cs_flags;
        self.mss = Be16::new(mss);
        self.inline_hdr_sz = Be16::new(hdr.len() as u16);
        let (a, b) = hdr.split_at(hdr.len().min(2));
        self.inline_hdr_start[..a.len()].copy_from_slice(a);
        self.inline_hdr[..b.len()].copy_from_slice(b);
    }
}

/// Tag-matching segment (`struct mlx5_wqe_tm_seg`): one tag-list
/// operation on a tag-matching SRQ's command QP, after a control segment of
/// opcode [`WqeOpcode::TAG_MATCHING`]. [`crate::mlx5dv::tags::tm_wqe::TmRing`] writes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TmSeg {
    /// The list operation in the high nibble ([`TmOpcode`] `<< 4`; [`TmSeg::op`]).
    pub opcode: u8,
    /// [`TmFlags`] bits (`TmFlags::SW_CNT`, `TmFlags::CQE_REQ`).
    pub flags: u8,
    /// Append: the list entry that follows the new one; remove: the entry removed.
    pub index: Be16,
    /// Reserved.
    pub rsvd0: [u8; 2],
    /// Unexpected messages software has handled (with [`TmFlags::SW_CNT`]).
    pub sw_cnt: Be16,
    /// Reserved.
    pub rsvd1: [u8; 8],
    /// Append: the tag.
    pub append_tag: Be64,
    /// Append: the bits of the tag that must match.
    pub append_mask: Be64,
}

/// libmlx5's tag-matching constants (rdma-core's `providers/mlx5/wqe.h`
/// and `mlx5.h`), which no installed header carries; the libmlx5 harness
/// checks the WQEs they make against `mlx5_post_srq_ops`'s.
mod tm_c {
    // Written as bindgen writes the others (one type per C enum, `c_type!`
    // reads `.0`), so prim::cvalue's test checks them the same way.
    pub struct Op(pub u8);
    pub struct Flag(pub u8);
    pub const MLX5_TM_OPCODE_NOP: Op = Op(0);
    pub const MLX5_TM_OPCODE_APPEND: Op = Op(1);
    pub const MLX5_TM_OPCODE_REMOVE: Op = Op(2);
    pub const MLX5_SRQ_FLAG_TM_SW_CNT: Flag = Flag(64);
    pub const MLX5_SRQ_FLAG_TM_CQE_REQ: Flag = Flag(128);
}

c_type! {
    /// A tag-list operation (`MLX5_TM_OPCODE_*`), written to
    /// [`TmSeg::opcode`]'s high nibble ([`TmSeg::with_op`]).
    #[doc(alias = "MLX5_TM_OPCODE")]
    pub value TmOpcode: u8, from consts tm_c {
        /// A sync, no list change.
        NOP = MLX5_TM_OPCODE_NOP "MLX5_TM_OPCODE_NOP",
        /// A tag added.
        APPEND = MLX5_TM_OPCODE_APPEND "MLX5_TM_OPCODE_APPEND",
        /// A tag removed.
        REMOVE = MLX5_TM_OPCODE_REMOVE "MLX5_TM_OPCODE_REMOVE",
    }
}

c_type! {
    /// The flags of a tag-matching segment ([`TmSeg::flags`],
    /// `MLX5_SRQ_FLAG_TM_*`).
    #[doc(alias = "MLX5_SRQ_FLAG_TM")]
    pub flags TmFlags: u8, from consts tm_c {
        /// `sw_cnt` is valid (a sync).
        SW_CNT = MLX5_SRQ_FLAG_TM_SW_CNT "MLX5_SRQ_FLAG_TM_SW_CNT",
        /// The operation completes with a CQE.
        CQE_REQ = MLX5_SRQ_FLAG_TM_CQE_REQ "MLX5_SRQ_FLAG_TM_CQE_REQ",
    }
}

impl TmSeg {
    /// A segment of operation `op` (in `opcode`'s high nibble), the rest zero.
    pub const fn with_op(op: TmOpcode) -> TmSeg {
        TmSeg {
            opcode: op.to_raw() << 4,
            flags: 0,
            index: Be16::new(0),
            rsvd0: [0; 2],
            sw_cnt: Be16::new(0),
            rsvd1: [0; 8],
            append_tag: Be64::new(0),
            append_mask: Be64::new(0),
        }
    }

    /// The operation in `opcode`'s high nibble.
    pub const fn op(&self) -> TmOpcode {
        TmOpcode::from_raw(self.opcode >> 4)
    }

    /// The segment's 32 bytes as two 16-byte units, each two 8-byte words
    /// in memory order (for a WQE written a word at a time).
    #[inline(always)]
    pub(crate) fn units(&self) -> [[u64; 2]; 2] {
        let (i, c, r) = (self.index.raw().to_ne_bytes(), self.sw_cnt.raw().to_ne_bytes(), self.rsvd0);
        let w0 = u64::from_ne_bytes([self.opcode, self.flags, i[0], i[1], r[0], r[1], c[0], c[1]]);
        [[w0, u64::from_ne_bytes(self.rsvd1)], [self.append_tag.raw(), self.append_mask.raw()]]
    }
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<CtrlSeg>() == 16 && align_of::<CtrlSeg>() == 4);
    assert!(offset_of!(CtrlSeg, signature) == 8 && offset_of!(CtrlSeg, dci_stream_channel_id) == 9);
    assert!(offset_of!(CtrlSeg, fm_ce_se) == 11 && offset_of!(CtrlSeg, imm) == 12);
    assert!(size_of::<RaddrSeg>() == 16 && size_of::<DataSeg>() == 16 && size_of::<AtomicSeg>() == 16);
    assert!(size_of::<MaskedCasSeg>() == 32 && size_of::<MaskedFaSeg>() == 16 && size_of::<InlineSeg>() == 4);
    assert!(size_of::<DatagramSeg>() == 48 && offset_of!(DatagramSeg, rgid) == 32);
    assert!(offset_of!(DatagramSeg, rmac) == 20 && offset_of!(DatagramSeg, grh_gid_fl) == 28);
    assert!(size_of::<EthSeg>() == 32 && offset_of!(EthSeg, inline_hdr_sz) == 12);
    assert!(size_of::<TmSeg>() == 32 && offset_of!(TmSeg, sw_cnt) == 6 && offset_of!(TmSeg, append_tag) == 16);
};

/// Old `u8` constants of the WQE opcodes, now [`WqeOpcode`] values (the
/// argument type of the raw writer `wqe`).
#[doc(hidden)]
#[deprecated(note = "typed now: use `seg::WqeOpcode::X` (`.to_raw()` for the byte); see docs/upgrading.md")]
pub mod opcode {
    use super::WqeOpcode;
    /// Old name of [`WqeOpcode::NOP`].
    pub const NOP: WqeOpcode = WqeOpcode::NOP;
    /// Old name of [`WqeOpcode::RDMA_WRITE`].
    pub const RDMA_WRITE: WqeOpcode = WqeOpcode::RDMA_WRITE;
    /// Old name of [`WqeOpcode::RDMA_WRITE_IMM`].
    pub const RDMA_WRITE_IMM: WqeOpcode = WqeOpcode::RDMA_WRITE_IMM;
    /// Old name of [`WqeOpcode::SEND`].
    pub const SEND: WqeOpcode = WqeOpcode::SEND;
    /// Old name of [`WqeOpcode::SEND_IMM`].
    pub const SEND_IMM: WqeOpcode = WqeOpcode::SEND_IMM;
    /// Old name of [`WqeOpcode::RDMA_READ`].
    pub const RDMA_READ: WqeOpcode = WqeOpcode::RDMA_READ;
    /// Old name of [`WqeOpcode::ATOMIC_CS`].
    pub const ATOMIC_CS: WqeOpcode = WqeOpcode::ATOMIC_CS;
    /// Old name of [`WqeOpcode::ATOMIC_FA`].
    pub const ATOMIC_FA: WqeOpcode = WqeOpcode::ATOMIC_FA;
    /// Old name of [`WqeOpcode::ATOMIC_MASKED_CS`].
    pub const ATOMIC_MASKED_CS: WqeOpcode = WqeOpcode::ATOMIC_MASKED_CS;
    /// Old name of [`WqeOpcode::ATOMIC_MASKED_FA`].
    pub const ATOMIC_MASKED_FA: WqeOpcode = WqeOpcode::ATOMIC_MASKED_FA;
}

/// Old `u8` constants of the control segment's `fm_ce_se`, now [`CtrlFlags`].
#[doc(hidden)]
#[deprecated(note = "typed now: use `seg::CtrlFlags::X` (`.bits()` for the byte); see docs/upgrading.md")]
pub mod fm_ce_se {
    use super::CtrlFlags;
    /// Old name of [`CtrlFlags::CQ_UPDATE`].
    pub const CQ_UPDATE: CtrlFlags = CtrlFlags::CQ_UPDATE;
    /// Old name of [`CtrlFlags::SOLICITED`].
    pub const SOLICITED: CtrlFlags = CtrlFlags::SOLICITED;
    /// Old name of [`CtrlFlags::FENCE`].
    pub const FENCE: CtrlFlags = CtrlFlags::FENCE;
    /// Old name of [`CtrlFlags::INITIATOR_SMALL_FENCE`].
    pub const SMALL_FENCE: CtrlFlags = CtrlFlags::INITIATOR_SMALL_FENCE;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operation sits in the high nibble, read back by `op`; the flags
    /// are libmlx5's bits 6 and 7; an unknown operation is kept, not lost.
    #[test]
    fn tm_seg_operations_and_flags_are_typed() {
        for (op, byte) in [(TmOpcode::NOP, 0x00), (TmOpcode::APPEND, 0x10), (TmOpcode::REMOVE, 0x20)] {
            let s = TmSeg::with_op(op);
            assert_eq!((s.opcode, s.op()), (byte, op));
            assert_eq!(s, TmSeg { opcode: byte, ..TmSeg::default() });
        }
        assert_eq!((TmFlags::SW_CNT | TmFlags::CQE_REQ).bits(), 0xc0);
        assert_eq!(format!("{:?}", TmSeg { opcode: 0x70, ..TmSeg::default() }.op()), "TmOpcode(7)");
    }
}
