//! Tag-matching CQEs of an mlx5 tag-matching SRQ, decoded from the raw
//! 64-byte CQE ([`Cqe64`]).
//!
//! A CQE belongs to tag matching when its `app` byte (offset 40) is 1; its
//! `app_op` (41) says what happened and `app_info` (42, big-endian) is the
//! tag list index of an expected message. On a match the device scatters
//! the message's tag-matching header (`struct ibv_tmh`: opcode, application
//! context, tag) into the CQE's first 16 bytes; a list operation's CQE
//! carries there instead its success bit and the hardware phase count.
//! [`crate::mlx5dv::tags::tm_wqe::TmRing::complete`] reads it through [`TmCqe::of`] and
//! keeps the tag list the CQEs report on.

use crate::mlx5dv::completion::cqe::Cqe64;

/// What a tag-matching CQE reports (`app_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmCqeOp {
    /// A matched message's first completion; its data completes later (0x1).
    Consumed,
    /// A matched message, complete (0x2).
    Expected,
    /// A message that matched no tag, received into an ordinary SRQ receive (0x3).
    Unexpected,
    /// A message without a tag, received into an ordinary SRQ receive (0x4).
    NoTag,
    /// A tag add completed (0x5).
    Append,
    /// A tag remove completed (0x6).
    Remove,
    /// A sync (no-op) completed (0x7).
    Noop,
    /// A matched rendezvous left to software, first completion (0x9).
    ConsumedSwRndv,
    /// A matched message consumed in one completion (0xA).
    ConsumedMsg,
    /// A matched rendezvous left to software, in one completion (0xB).
    ConsumedMsgSwRndv,
    /// A matched message whose completion the device canceled (0xC).
    MsgCompletionCanceled,
    /// Any other value, kept as read.
    Other(u8),
}

impl TmCqeOp {
    /// From the raw `app_op` byte; any value is representable.
    pub const fn from_raw(op: u8) -> TmCqeOp {
        match op {
            0x1 => TmCqeOp::Consumed,
            0x2 => TmCqeOp::Expected,
            0x3 => TmCqeOp::Unexpected,
            0x4 => TmCqeOp::NoTag,
            0x5 => TmCqeOp::Append,
            0x6 => TmCqeOp::Remove,
            0x7 => TmCqeOp::Noop,
            0x9 => TmCqeOp::ConsumedSwRndv,
            0xA => TmCqeOp::ConsumedMsg,
            0xB => TmCqeOp::ConsumedMsgSwRndv,
            0xC => TmCqeOp::MsgCompletionCanceled,
            x => TmCqeOp::Other(x),
        }
    }

    /// A match reported on a tag-list entry (the entry named by `app_info`).
    pub const fn is_match(self) -> bool {
        matches!(
            self,
            TmCqeOp::Consumed
                | TmCqeOp::Expected
                | TmCqeOp::ConsumedSwRndv
                | TmCqeOp::ConsumedMsg
                | TmCqeOp::ConsumedMsgSwRndv
                | TmCqeOp::MsgCompletionCanceled
        )
    }

    /// The last completion of its tag entry: false for the first of the
    /// two a large or rendezvous match makes (`Consumed`, `ConsumedSwRndv`).
    pub const fn is_complete(self) -> bool {
        !matches!(self, TmCqeOp::Consumed | TmCqeOp::ConsumedSwRndv)
    }

    /// A rendezvous the device left to software to finish (libmlx5 reports
    /// these with `IBV_WC_TM_RNDV_INCOMPLETE`).
    pub const fn is_rndv_incomplete(self) -> bool {
        matches!(self, TmCqeOp::ConsumedSwRndv | TmCqeOp::ConsumedMsgSwRndv | TmCqeOp::MsgCompletionCanceled)
    }
}

/// The tag-matching fields of a CQE ([`TmCqe::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmCqe {
    /// What happened.
    pub op: TmCqeOp,
    /// `app_info`: the tag list index of a match.
    pub list_index: u16,
    /// The header's opcode (`ibv_tmh::opcode`), meaningful on a match.
    pub tmh_opcode: u8,
    /// The header's application context (`ibv_tmh::app_ctx`), meaningful on a match.
    pub app_ctx: u32,
    /// The header's tag (`ibv_tmh::tag`), meaningful on a match.
    pub tag: u64,
    /// A list operation's success bit (`mlx5_tm_cqe::success` bit 31);
    /// libmlx5 reports a remove without it as `IBV_WC_TM_ERR`.
    pub success: bool,
    /// A list operation's hardware phase count (`mlx5_tm_cqe::hw_phase_cnt`).
    pub hw_phase_cnt: u16,
}

impl TmCqe {
    /// The tag-matching fields of `cqe`, or `None` when its `app` byte is
    /// not tag matching (1). Reads bytes only: any CQE is accepted.
    pub fn of(cqe: &Cqe64) -> Option<TmCqe> {
        if cqe.app[0] != 1 {
            return None;
        }
        let b = &cqe.rsvd0;
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(TmCqe {
            op: TmCqeOp::from_raw(cqe.app[1]),
            list_index: u16::from_be_bytes([cqe.app[2], cqe.app[3]]),
            tmh_opcode: b[0],
            app_ctx: be32(4),
            tag: (u64::from(be32(8)) << 32) | u64::from(be32(12)),
            success: be32(0) & 0x8000_0000 != 0,
            hw_phase_cnt: u16::from_be_bytes([b[4], b[5]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_matched_header_and_a_list_operation() {
        let mut c = Cqe64::default();
        assert_eq!(TmCqe::of(&c), None, "app 0 is not tag matching");
        c.app = [1, 0x2, 0x01, 0x23];
        c.rsvd0[..16]
            .copy_from_slice(&[0x01, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        let t = TmCqe::of(&c).unwrap();
        assert_eq!((t.op, t.list_index, t.tmh_opcode), (TmCqeOp::Expected, 0x123, 1));
        assert_eq!((t.app_ctx, t.tag), (0xdead_beef, 0x1122_3344_5566_7788));
        assert!(t.op.is_match() && t.op.is_complete() && !t.op.is_rndv_incomplete());
        c.app[1] = 0x6;
        c.rsvd0[..6].copy_from_slice(&[0x80, 0, 0, 0, 0x00, 0x07]);
        let t = TmCqe::of(&c).unwrap();
        assert_eq!((t.op, t.success, t.hw_phase_cnt), (TmCqeOp::Remove, true, 7));
        assert!(!t.op.is_match());
        for (raw, complete, rndv) in [(0x1, false, false), (0x9, false, true), (0xB, true, true), (0xC, true, true)] {
            let op = TmCqeOp::from_raw(raw);
            assert_eq!((op.is_complete(), op.is_rndv_incomplete()), (complete, rndv), "{op:?}");
        }
        assert_eq!(TmCqeOp::from_raw(0x8), TmCqeOp::Other(0x8));
    }
}
