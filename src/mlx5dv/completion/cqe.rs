//! 64-byte CQEs: layout, the `op_own` byte, and decoding into completion fields.
//!
//! Layout and helpers follow `mlx5dv.h`; `tests/mlx5_oracle.rs` checks every
//! `op_own` value against the header's `mlx5dv_get_cqe_*` helpers.

use std::fmt;

use crate::bindings as ffi;
use crate::mlx5dv::queue::be::{Be16, Be32, Be64};
use crate::mlx5dv::queue::seg::WqeOpcode;
use crate::prim::cvalue::c_type;
use crate::prim::WcStatus;

c_type! {
    /// CQE opcode (`MLX5_CQE_*`), the high nibble of `op_own`.
    #[doc(alias = "mlx5dv_get_cqe_opcode")]
    pub value CqeOpcode: u8, from consts ffi {
        /// Requester completion.
        REQ = MLX5_CQE_REQ "MLX5_CQE_REQ",
        /// Responder: RDMA WRITE with immediate.
        RESP_WR_IMM = MLX5_CQE_RESP_WR_IMM "MLX5_CQE_RESP_WR_IMM",
        /// Responder: SEND.
        RESP_SEND = MLX5_CQE_RESP_SEND "MLX5_CQE_RESP_SEND",
        /// Responder: SEND with immediate.
        RESP_SEND_IMM = MLX5_CQE_RESP_SEND_IMM "MLX5_CQE_RESP_SEND_IMM",
        /// Responder: SEND with invalidate.
        RESP_SEND_INV = MLX5_CQE_RESP_SEND_INV "MLX5_CQE_RESP_SEND_INV",
        /// CQ resize marker.
        RESIZE_CQ = MLX5_CQE_RESIZE_CQ "MLX5_CQE_RESIZE_CQ",
        /// No packet (tag matching).
        NO_PACKET = MLX5_CQE_NO_PACKET "MLX5_CQE_NO_PACKET",
        /// Signature error.
        SIG_ERR = MLX5_CQE_SIG_ERR "MLX5_CQE_SIG_ERR",
        /// Requester error.
        REQ_ERR = MLX5_CQE_REQ_ERR "MLX5_CQE_REQ_ERR",
        /// Responder error.
        RESP_ERR = MLX5_CQE_RESP_ERR "MLX5_CQE_RESP_ERR",
        /// Not yet written by hardware.
        INVALID = MLX5_CQE_INVALID "MLX5_CQE_INVALID",
    }
}

c_type! {
    /// Error syndrome of an error CQE (`MLX5_CQE_SYNDROME_*`), byte 55.
    #[doc(alias = "MLX5_CQE_SYNDROME")]
    pub value Syndrome: u8, from consts ffi {
        LOCAL_LENGTH_ERR = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR",
        LOCAL_QP_OP_ERR = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR",
        LOCAL_PROT_ERR = MLX5_CQE_SYNDROME_LOCAL_PROT_ERR "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR",
        WR_FLUSH_ERR = MLX5_CQE_SYNDROME_WR_FLUSH_ERR "MLX5_CQE_SYNDROME_WR_FLUSH_ERR",
        MW_BIND_ERR = MLX5_CQE_SYNDROME_MW_BIND_ERR "MLX5_CQE_SYNDROME_MW_BIND_ERR",
        BAD_RESP_ERR = MLX5_CQE_SYNDROME_BAD_RESP_ERR "MLX5_CQE_SYNDROME_BAD_RESP_ERR",
        LOCAL_ACCESS_ERR = MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR",
        REMOTE_INVAL_REQ_ERR = MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR",
        REMOTE_ACCESS_ERR = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR",
        REMOTE_OP_ERR = MLX5_CQE_SYNDROME_REMOTE_OP_ERR "MLX5_CQE_SYNDROME_REMOTE_OP_ERR",
        TRANSPORT_RETRY_EXC_ERR = MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR",
        RNR_RETRY_EXC_ERR = MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR",
        REMOTE_ABORTED_ERR = MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR",
    }
}

/// A 64-byte CQE (`struct mlx5_cqe64`), error fields included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Cqe64 {
    /// Bytes 0..32: receive-side fields (`wqe_id` at 2, `ml_path` at 17,
    /// `slid` at 22, `flags_rqpn` at 24, ...), decoded into [`Completion`].
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
    assert!(size_of::<Cqe64>() == 64 && std::mem::align_of::<Cqe64>() == 8);
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
pub fn syndrome_status(syndrome: Syndrome) -> WcStatus {
    use Syndrome as Y;
    use WcStatus as S;
    match syndrome {
        Y::LOCAL_LENGTH_ERR => S::LOC_LEN_ERR,
        Y::LOCAL_QP_OP_ERR => S::LOC_QP_OP_ERR,
        Y::LOCAL_PROT_ERR => S::LOC_PROT_ERR,
        Y::WR_FLUSH_ERR => S::WR_FLUSH_ERR,
        Y::MW_BIND_ERR => S::MW_BIND_ERR,
        Y::BAD_RESP_ERR => S::BAD_RESP_ERR,
        Y::LOCAL_ACCESS_ERR => S::LOC_ACCESS_ERR,
        Y::REMOTE_INVAL_REQ_ERR => S::REM_INV_REQ_ERR,
        Y::REMOTE_ACCESS_ERR => S::REM_ACCESS_ERR,
        Y::REMOTE_OP_ERR => S::REM_OP_ERR,
        Y::TRANSPORT_RETRY_EXC_ERR => S::RETRY_EXC_ERR,
        Y::RNR_RETRY_EXC_ERR => S::RNR_RETRY_EXC_ERR,
        Y::REMOTE_ABORTED_ERR => S::REM_ABORT_ERR,
        _ => S::GENERAL_ERR,
    }
}

/// A polled CQE: what a direct poller reports, read through its accessors.
///
/// A completion keeps the CQE's bytes 8 to 63 as the device wrote them (or
/// as the poller expanded them from a mini-CQE) and decodes a field only
/// when its accessor is called: polling copies 56 bytes and decodes
/// nothing, so a requester poll pays for the fields it reads.
///
/// [`SqRing::retire`](crate::mlx5dv::queue::sq::SqRing::retire) takes only
/// completions a ring polled: the poller stamps each with which CQ view took
/// it and its position there, which no public API can set. A completion
/// made up by hand (`Completion::default()`) or decoded with
/// [`Cqe64::decode`] frees nothing, and none can be written field by field
/// outside the crate:
///
/// ```compile_fail,E0451
/// use rrddmma::mlx5dv::cqe::Completion;
/// let forged = Completion { cq: 1, seq: 0, ..Completion::default() };
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// Bytes 8..64 of the CQE.
    pub(crate) tail: Tail,
    /// The CQ view that polled it (a process-unique number); 0: not polled.
    cq: u64,
    /// Its position in that view (free-running from 0), and in bit 63
    /// ([`EXPANDED`]) whether the poller expanded it from a mini-CQE.
    seq: u64,
}

/// The bit of [`Completion`]'s `seq` that marks a completion expanded from
/// a mini-CQE (positions stay below it: 2^63 CQEs).
const EXPANDED: u64 = 1 << 63;

/// Bytes 8..64 of a CQE (the part a completion keeps) as seven 8-byte
/// words in memory order (each word's bytes in native order: byte `k` of
/// the CQE is `w[k / 8 - 1].to_ne_bytes()[k % 8]`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail(pub(crate) [u64; 7]);

const _: () = assert!(std::mem::size_of::<Tail>() == 56);

/// Where a polled CQE came from, recorded by the poller and read only by
/// the crate: the CQ view (`cq`, a process-unique number, 0 for none), the
/// CQE's position in that view (`seq`, free-running from 0), the QPN,
/// requester flag and WQE counter it carried, and whether the poller
/// expanded it from a compressed session's mini-CQE (`expanded`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) cq: u64,
    pub(crate) seq: u64,
    pub(crate) qpn: u32,
    pub(crate) counter: u16,
    pub(crate) requester: bool,
    pub(crate) expanded: bool,
}

impl Default for Completion {
    /// No CQE: opcode `INVALID`, every other field 0; not polled.
    fn default() -> Completion {
        let mut last = [0u8; 8];
        last[7] = CqeOpcode::INVALID.to_raw() << 4;
        Completion { tail: Tail([0, 0, 0, 0, 0, 0, u64::from_ne_bytes(last)]), cq: 0, seq: 0 }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("opcode", &self.opcode())
            .field("status", &self.status())
            .field("vendor_err", &self.vendor_err())
            .field("qpn", &self.qpn())
            .field("wqe_counter", &self.wqe_counter())
            .field("byte_len", &self.byte_len())
            .field("imm", &self.imm())
            .field("timestamp", &self.timestamp())
            .field("inline_scatter", &self.inline_scatter())
            .field("solicited", &self.solicited())
            .field("src_qp", &self.src_qp())
            .field("slid", &self.slid())
            .field("sl", &self.sl())
            .field("dlid_path_bits", &self.dlid_path_bits())
            .field("pkey_index", &self.pkey_index())
            .field("grh", &self.grh())
            .field("rss_hash", &self.rss_hash())
            .field("rss_hash_type", &self.rss_hash_type())
            .field("wqe_opcode", &self.wqe_opcode())
            .field("expanded", &self.expanded())
            .finish()
    }
}

impl Completion {
    /// A completion of the CQE bytes 8..64 in `tail`, stamped by CQ view
    /// `cq` (0: none) at position `seq`.
    #[inline(always)]
    pub(crate) const fn from_tail(tail: Tail, cq: u64, seq: u64, expanded: bool) -> Completion {
        Completion { tail, cq, seq: seq | if expanded { EXPANDED } else { 0 } }
    }

    /// Position `seq` as [`Completion::from_tagged`] takes it: with the
    /// expanded mark when `expanded`.
    #[inline(always)]
    pub(crate) const fn tagged_seq(seq: u64, expanded: bool) -> u64 {
        seq | if expanded { EXPANDED } else { 0 }
    }

    /// [`Completion::from_tail`] with the position already tagged
    /// ([`Completion::tagged_seq`]).
    #[inline(always)]
    pub(crate) const fn from_tagged(tail: Tail, cq: u64, tagged: u64) -> Completion {
        Completion { tail, cq, seq: tagged }
    }

    /// The bytes of the 8-byte word at CQE offset `off` (8..64, a multiple of 8).
    #[inline(always)]
    const fn word(&self, off: usize) -> [u8; 8] {
        self.tail.0[off / 8 - 1].to_ne_bytes()
    }

    /// Byte `off` of the CQE (8..64).
    #[inline(always)]
    const fn byte(&self, off: usize) -> u8 {
        self.word(off & !7)[off % 8]
    }

    /// The big-endian 32-bit field at CQE offset `off` (a multiple of 4).
    #[inline(always)]
    const fn be32(&self, off: usize) -> u32 {
        let w = self.word(off & !7);
        let k = off % 8;
        u32::from_be_bytes([w[k], w[k + 1], w[k + 2], w[k + 3]])
    }

    /// What the poller recorded, for `retire` and `stream_of`.
    #[inline(always)]
    pub(crate) fn ticket(&self) -> Ticket {
        let op = self.opcode();
        Ticket {
            cq: self.cq,
            seq: self.seq & !EXPANDED,
            qpn: self.qpn(),
            counter: self.wqe_counter(),
            requester: op == CqeOpcode::REQ || op == CqeOpcode::REQ_ERR,
            expanded: self.expanded(),
        }
    }

    /// CQE opcode.
    #[inline]
    pub fn opcode(&self) -> CqeOpcode {
        CqeOpcode::from_raw(cqe_opcode(self.byte(63)))
    }

    /// Whether the CQE is an error CQE (`REQ_ERR` or `RESP_ERR`).
    #[inline]
    fn is_error(&self) -> bool {
        let op = self.opcode();
        op == CqeOpcode::REQ_ERR || op == CqeOpcode::RESP_ERR
    }

    /// Status: success, or mapped from the error syndrome (byte 55 of an
    /// error CQE).
    #[inline]
    pub fn status(&self) -> WcStatus {
        if self.is_error() {
            syndrome_status(Syndrome::from_raw(self.byte(55)))
        } else {
            WcStatus::SUCCESS
        }
    }

    /// Vendor error syndrome (byte 54 of an error CQE; 0 on others).
    #[inline]
    pub fn vendor_err(&self) -> u8 {
        if self.is_error() {
            self.byte(54)
        } else {
            0
        }
    }

    /// QP number.
    #[inline]
    pub fn qpn(&self) -> u32 {
        self.be32(56) & 0xff_ffff
    }

    /// Index of the completed WQE (requester) or receive (responder).
    #[inline]
    pub fn wqe_counter(&self) -> u16 {
        u16::from_be_bytes([self.byte(60), self.byte(61)])
    }

    /// Bytes received (responder).
    #[inline]
    pub fn byte_len(&self) -> u32 {
        self.be32(44)
    }

    /// Immediate data in network order, as stored.
    #[inline]
    pub fn imm(&self) -> u32 {
        u32::from_ne_bytes([self.byte(36), self.byte(37), self.byte(38), self.byte(39)])
    }

    /// Raw hardware timestamp (bytes 48-55; in an error CQE its last two
    /// bytes are the vendor syndrome and the syndrome).
    #[inline]
    pub fn timestamp(&self) -> u64 {
        u64::from_be_bytes(self.word(48))
    }

    /// Whether the payload was scattered into the CQE: 32 or 64 (bytes), else 0.
    #[inline]
    pub fn inline_scatter(&self) -> u8 {
        match format(self.byte(63)) {
            1 => 32,
            2 => 64,
            _ => 0,
        }
    }

    /// Solicited-event bit.
    #[inline]
    pub fn solicited(&self) -> bool {
        se(self.byte(63)) == 1
    }

    /// `flags_rqpn` (bytes 24-27).
    #[inline(always)]
    fn flags_rqpn(&self) -> u32 {
        self.be32(24)
    }

    /// The sender's QP number (responder CQEs; `flags_rqpn`, bytes 25-27):
    /// the QP a UD responder answers.
    #[inline]
    pub fn src_qp(&self) -> u32 {
        self.flags_rqpn() & 0xff_ffff
    }

    /// The sender's LID (responder CQEs, bytes 22-23; InfiniBand).
    #[inline]
    pub fn slid(&self) -> u16 {
        u16::from_be_bytes([self.byte(22), self.byte(23)])
    }

    /// The packet's service level (responder CQEs; `flags_rqpn` bits 24-27).
    #[inline]
    pub fn sl(&self) -> u8 {
        ((self.flags_rqpn() >> 24) & 0xf) as u8
    }

    /// The destination LID's path bits (responder CQEs; `ml_path & 0x7f`, byte 17).
    #[inline]
    pub fn dlid_path_bits(&self) -> u8 {
        self.byte(17) & 0x7f
    }

    /// The P_Key index (responder CQEs of GSI QPs: the low 16 bits of
    /// bytes 36-39, which hold the immediate in other CQEs).
    #[inline]
    pub fn pkey_index(&self) -> u16 {
        u16::from_be_bytes([self.byte(38), self.byte(39)])
    }

    /// Whether the packet came with a GRH (responder CQEs; `flags_rqpn`
    /// bits 28-29 nonzero, libibverbs' `IBV_WC_GRH`): on UD the first 40
    /// bytes of the receive buffer hold it.
    #[inline]
    pub fn grh(&self) -> bool {
        (self.flags_rqpn() >> 28) & 3 != 0
    }

    /// The packet's RSS hash (responder CQEs of raw packet QPs spreading
    /// over an indirection table; `rss_hash_result`, bytes 12-15): the
    /// Toeplitz hash the device computed, 0 where it computed none.
    #[inline]
    pub fn rss_hash(&self) -> u32 {
        self.be32(12)
    }

    /// What [`rss_hash`](Completion::rss_hash) covered (`rss_hash_type`,
    /// byte 16: bits 2-3 the L3 and bits 6-7 the L4 protocol hashed, as the
    /// kernel's mlx5e reads them); 0 for no hash.
    #[inline]
    pub fn rss_hash_type(&self) -> u8 {
        self.byte(16)
    }

    /// The opcode of the WQE this requester CQE completes (byte 56, e.g.
    /// [`WqeOpcode::RDMA_READ`]); on responder CQEs byte 56 as written.
    #[inline]
    pub fn wqe_opcode(&self) -> WqeOpcode {
        WqeOpcode::from_raw(self.byte(56))
    }

    /// Whether the poller expanded this completion from a mini-CQE of a
    /// compressed session ([`CqRing::set_compression`](crate::mlx5dv::completion::cq::CqRing::set_compression))
    /// rather than reading a CQE the device wrote whole. False for
    /// completions not polled. [`SqRing::retire`](crate::mlx5dv::queue::sq::SqRing::retire)
    /// refuses expanded requester completions.
    #[inline]
    pub fn expanded(&self) -> bool {
        self.seq & EXPANDED != 0
    }
}

impl Cqe64 {
    /// The CQE for reading through [`Completion`]'s accessors (valid ones;
    /// see [`Cqe64::is_valid_for`]). Only a completion from
    /// [`CqRing::poll`](crate::mlx5dv::completion::cq::CqRing::poll) can be retired.
    #[inline]
    pub fn decode(&self) -> Completion {
        Completion::from_tail(self.tail(), 0, 0, false)
    }

    /// Bytes 8..64.
    #[inline(always)]
    pub(crate) fn tail(&self) -> Tail {
        // SAFETY: `Cqe64` is 64 bytes of plain integers aligned to 8, so
        // bytes 8..64 are seven initialised words, aligned.
        Tail(unsafe { std::ptr::read(std::ptr::from_ref(self).cast::<u64>().add(1).cast::<[u64; 7]>()) })
    }

    /// Whether hardware has written this CQE for consumer index `ci` of a
    /// CQ of `cqe_cnt` entries (a power of two): the opcode is not INVALID
    /// and the owner bit equals the lap parity `!!(ci & cqe_cnt)`.
    #[inline(always)]
    pub fn is_valid_for(op_own: u8, ci: u32, cqe_cnt: u32) -> bool {
        cqe_opcode(op_own) != CqeOpcode::INVALID.to_raw() && owner(op_own) == u8::from(ci & cqe_cnt != 0)
    }
}

/// Old `u8` constants of the CQE opcodes, now [`CqeOpcode`] values.
#[doc(hidden)]
#[deprecated(note = "typed now: use `cqe::CqeOpcode::X` (`.to_raw()` for the nibble); see docs/upgrading.md")]
pub mod opcode {
    use super::CqeOpcode;
    /// Old name of [`CqeOpcode::REQ`].
    pub const REQ: CqeOpcode = CqeOpcode::REQ;
    /// Old name of [`CqeOpcode::RESP_WR_IMM`].
    pub const RESP_WR_IMM: CqeOpcode = CqeOpcode::RESP_WR_IMM;
    /// Old name of [`CqeOpcode::RESP_SEND`].
    pub const RESP_SEND: CqeOpcode = CqeOpcode::RESP_SEND;
    /// Old name of [`CqeOpcode::RESP_SEND_IMM`].
    pub const RESP_SEND_IMM: CqeOpcode = CqeOpcode::RESP_SEND_IMM;
    /// Old name of [`CqeOpcode::RESP_SEND_INV`].
    pub const RESP_SEND_INV: CqeOpcode = CqeOpcode::RESP_SEND_INV;
    /// Old name of [`CqeOpcode::REQ_ERR`].
    pub const REQ_ERR: CqeOpcode = CqeOpcode::REQ_ERR;
    /// Old name of [`CqeOpcode::RESP_ERR`].
    pub const RESP_ERR: CqeOpcode = CqeOpcode::RESP_ERR;
    /// Old name of [`CqeOpcode::INVALID`].
    pub const INVALID: CqeOpcode = CqeOpcode::INVALID;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw packet receive's RSS hash and hash type are decoded from
    /// bytes 12-15 (big-endian) and 16; the neighbours stay out of them.
    #[test]
    fn rss_hash_and_type_are_decoded_from_bytes_12_to_16() {
        let mut c = Cqe64::default();
        c.rsvd0[11] = 0xee;
        c.rsvd0[12..17].copy_from_slice(&[0x12, 0x34, 0x56, 0x78, 0xcc]);
        c.rsvd0[17] = 0x55;
        c.op_own = (CqeOpcode::RESP_SEND.to_raw()) << 4;
        let d = c.decode();
        assert_eq!((d.rss_hash(), d.rss_hash_type()), (0x1234_5678, 0xcc));
        assert_eq!(d.dlid_path_bits(), 0x55, "ml_path, the byte after the hash type");
        assert_eq!(Cqe64::default().decode().rss_hash(), 0, "no hash: 0");
    }
}
