//! 64-byte CQEs: layout, the `op_own` byte, and decoding into completion fields.
//!
//! Layout and helpers follow `mlx5dv.h`; `tests/mlx5_oracle.rs` checks every
//! `op_own` value against the header's `mlx5dv_get_cqe_*` helpers.

use super::be::{Be16, Be32, Be64};
use crate::prim::WcStatus;

/// CQE opcodes (high nibble of `op_own`).
pub mod opcode {
    /// Requester completion.
    pub const REQ: u8 = 0;
    /// Responder: RDMA WRITE with immediate.
    pub const RESP_WR_IMM: u8 = 1;
    /// Responder: SEND.
    pub const RESP_SEND: u8 = 2;
    /// Responder: SEND with immediate.
    pub const RESP_SEND_IMM: u8 = 3;
    /// Responder: SEND with invalidate.
    pub const RESP_SEND_INV: u8 = 4;
    /// Requester error.
    pub const REQ_ERR: u8 = 13;
    /// Responder error.
    pub const RESP_ERR: u8 = 14;
    /// Not yet written by hardware.
    pub const INVALID: u8 = 15;
}

/// A 64-byte CQE (`struct mlx5_cqe64`), error fields included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Cqe64 {
    /// Bytes 0..32: receive-side fields (`wqe_id`, `slid`, `flags_rqpn`, ...).
    pub rsvd0: [u8; 32],
    /// SRQ number / user index.
    pub srqn_uidx: Be32,
    /// Immediate data, invalidated rkey, or P_Key.
    pub imm_inval_pkey: Be32,
    /// Application bytes.
    pub app: [u8; 4],
    /// Byte count (responder).
    pub byte_cnt: Be32,
    /// Hardware timestamp; in an error CQE its last two bytes (54, 55) are
    /// `vendor_err_synd` and `syndrome`.
    pub timestamp: Be64,
    /// `opcode << 24 | qpn` (on error CQEs: the failed WQE's opcode and QPN).
    pub sop_drop_qpn: Be32,
    /// Index of the completed WQE.
    pub wqe_counter: Be16,
    /// Signature.
    pub signature: u8,
    /// `opcode << 4 | format << 2 | se << 1 | owner`.
    pub op_own: u8,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Cqe64>() == 64);
    assert!(offset_of!(Cqe64, imm_inval_pkey) == 36 && offset_of!(Cqe64, byte_cnt) == 44);
    assert!(offset_of!(Cqe64, timestamp) == 48 && offset_of!(Cqe64, sop_drop_qpn) == 56);
    assert!(offset_of!(Cqe64, wqe_counter) == 60 && offset_of!(Cqe64, op_own) == 63);
};

/// Owner bit of `op_own` (`mlx5dv_get_cqe_owner`).
#[inline(always)]
pub const fn owner(op_own: u8) -> u8 {
    op_own & 1
}

/// Solicited-event bit (`mlx5dv_get_cqe_se`).
#[inline(always)]
pub const fn se(op_own: u8) -> u8 {
    (op_own >> 1) & 1
}

/// Format bits (`mlx5dv_get_cqe_format`): inline scatter of 32 or 64 bytes, ...
#[inline(always)]
pub const fn format(op_own: u8) -> u8 {
    (op_own >> 2) & 3
}

/// CQE opcode (`mlx5dv_get_cqe_opcode`).
#[inline(always)]
pub const fn cqe_opcode(op_own: u8) -> u8 {
    op_own >> 4
}

/// Completion status from an error CQE's syndrome (as libmlx5 maps it).
/// Unknown syndromes map to `GENERAL_ERR`.
pub fn syndrome_status(syndrome: u8) -> WcStatus {
    use WcStatus as S;
    match syndrome {
        0x01 => S::LOC_LEN_ERR,
        0x02 => S::LOC_QP_OP_ERR,
        0x04 => S::LOC_PROT_ERR,
        0x05 => S::WR_FLUSH_ERR,
        0x06 => S::MW_BIND_ERR,
        0x10 => S::BAD_RESP_ERR,
        0x11 => S::LOC_ACCESS_ERR,
        0x12 => S::REM_INV_REQ_ERR,
        0x13 => S::REM_ACCESS_ERR,
        0x14 => S::REM_OP_ERR,
        0x15 => S::RETRY_EXC_ERR,
        0x16 => S::RNR_RETRY_EXC_ERR,
        0x22 => S::REM_ABORT_ERR,
        _ => S::GENERAL_ERR,
    }
}

/// A decoded CQE: what a direct poller reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// CQE opcode (see [`opcode`]).
    pub opcode: u8,
    /// Status: success, or mapped from the error syndrome.
    pub status: WcStatus,
    /// Vendor error syndrome (error CQEs).
    pub vendor_err: u8,
    /// QP number.
    pub qpn: u32,
    /// Index of the completed WQE (requester) or receive (responder).
    pub wqe_counter: u16,
    /// Bytes received (responder).
    pub byte_len: u32,
    /// Immediate data in network order, as stored.
    pub imm: u32,
    /// Raw hardware timestamp.
    pub timestamp: u64,
    /// Whether the payload was scattered into the CQE (32 or 64 bytes).
    pub inline_scatter: u8,
    /// Solicited-event bit.
    pub solicited: bool,
}

impl Default for Completion {
    fn default() -> Completion {
        Completion {
            opcode: opcode::INVALID,
            status: WcStatus::SUCCESS,
            vendor_err: 0,
            qpn: 0,
            wqe_counter: 0,
            byte_len: 0,
            imm: 0,
            timestamp: 0,
            inline_scatter: 0,
            solicited: false,
        }
    }
}

impl Cqe64 {
    /// Decodes the CQE (valid ones; see [`Cqe64::is_valid_for`]).
    #[inline]
    pub fn decode(&self) -> Completion {
        let op = cqe_opcode(self.op_own);
        let err = op == opcode::REQ_ERR || op == opcode::RESP_ERR;
        let bc = self.byte_cnt.get();
        let ts = self.timestamp.get();
        let (status, vendor_err) = if err {
            // In an error CQE, byte 54 is vendor_err_synd and byte 55 the syndrome.
            (syndrome_status(ts as u8), (ts >> 8) as u8)
        } else {
            (WcStatus::SUCCESS, 0)
        };
        let fmt = format(self.op_own);
        Completion {
            opcode: op,
            status,
            vendor_err,
            qpn: self.sop_drop_qpn.get() & 0xff_ffff,
            wqe_counter: self.wqe_counter.get(),
            byte_len: bc,
            imm: self.imm_inval_pkey.raw(),
            timestamp: ts,
            inline_scatter: match fmt {
                1 => 32,
                2 => 64,
                _ => 0,
            },
            solicited: se(self.op_own) == 1,
        }
    }

    /// Whether hardware has written this CQE for consumer index `ci` of a
    /// CQ of `cqe_cnt` entries (a power of two): the opcode is not INVALID
    /// and the owner bit equals the lap parity `!!(ci & cqe_cnt)`.
    #[inline(always)]
    pub fn is_valid_for(op_own: u8, ci: u32, cqe_cnt: u32) -> bool {
        cqe_opcode(op_own) != opcode::INVALID && owner(op_own) == u8::from(ci & cqe_cnt != 0)
    }
}
