//! Compressed CQEs: the mini-CQE layout (`struct mlx5_mini_cqe8`), its
//! three formats (`MLX5DV_CQE_RES_FORMAT_*`) and the expansion of one mini-CQE
//! into the full CQE it stands for.
//!
//! A CQ created with a compression format may write a *session* in place of
//! `n` CQEs that differ only in a few fields: at the session's first entry a
//! title CQE (format bits 3, `byte_cnt` = `n`, the fields the `n` CQEs
//! share), then arrays of eight 8-byte mini-CQEs, one per CQE: the first
//! array in the entry after the title, array `k >= 1` in the entry of CQE
//! `8k`. The other entries of the session are not written. CQE `i` of a
//! receive session is the title with its byte count, WQE counter and the
//! format's field taken from mini-CQE `i`; CQE `i` of a requester session
//! (title opcode `REQ`) is the title with the byte count, the WQE counter and
//! the WQE opcode of mini-CQE `i` (`s_wqe_info`) ([`expand`]).
//! [`CqRing`](crate::mlx5dv::completion::cq::CqRing) expands sessions when told the format
//! ([`CqRing::set_compression`](crate::mlx5dv::completion::cq::CqRing::set_compression)).

use crate::mlx5dv::completion::cqe::{cqe_opcode, Cqe64, CqeOpcode};
use crate::mlx5dv::queue::be::{Be16, Be32};
use crate::prim::cvalue::c_type;

mod zip_c {
    // Written as bindgen writes the others (one type per C enum, `c_type!`
    // reads `.0`): libmlx5's mlx5.h and the kernel's mlx5/device.h define
    // it, mlx5dv.h does not.
    pub struct Format(pub u8);
    pub const MLX5_COMPRESSED: Format = Format(3);
}

c_type! {
    /// The format bits of a CQE (`op_own` bits 2-3, `mlx5dv_get_cqe_format`)
    /// that mark a compressed session's title (`MLX5_COMPRESSED`); the other
    /// values (1, 2) are the inline scatter sizes
    /// ([`Completion::inline_scatter`](crate::mlx5dv::completion::cqe::Completion::inline_scatter)).
    #[doc(alias = "MLX5_COMPRESSED")]
    pub value CqeFormat: u8, from consts zip_c {
        /// A title CQE: a compressed session starts here.
        COMPRESSED = MLX5_COMPRESSED "MLX5_COMPRESSED",
    }
}

/// Mini-CQEs in one array (one 64-byte entry).
pub const PER_ARRAY: u32 = 8;

pub use crate::prim::mlx5::CqeResFormat;

/// One mini-CQE (`struct mlx5_mini_cqe8`): four bytes whose meaning the
/// session's kind and the format decide, then the byte count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MiniCqe {
    /// In a receive session: `rx_hash_result` ([`CqeResFormat::Hash`]), or
    /// `checksum` (bytes 0-1) and `stridx` (bytes 2-3). In a requester
    /// session, whatever the format: `s_wqe_info`, the WQE counter
    /// (bytes 0-1, big-endian) and the WQE opcode (byte 2) of the WQE this
    /// CQE completes.
    pub info: [u8; 4],
    /// `byte_cnt`.
    pub byte_cnt: Be32,
}

const _: () = assert!(std::mem::size_of::<MiniCqe>() == 8);

/// Where mini-CQE `i` of a session lies: the entry (counted from the
/// title's) holding its array, and its place in that array.
#[inline]
pub const fn position(i: u32) -> (u32, u32) {
    if i < PER_ARRAY {
        (1, i)
    } else {
        (i - i % PER_ARRAY, i % PER_ARRAY)
    }
}

/// Whether `title` heads a requester session (opcode `REQ` or `REQ_ERR`):
/// its mini-CQEs hold `s_wqe_info`, whatever the CQ's format.
#[inline]
pub fn is_requester(title: &Cqe64) -> bool {
    let op = CqeOpcode::from_raw(cqe_opcode(title.op_own));
    op == CqeOpcode::REQ || op == CqeOpcode::REQ_ERR
}

/// CQE `i` of the session under `title`, from its mini-CQE `m`, with format
/// bits 0 and the owner bit `owner` of the entry the CQE occupies.
///
/// A requester session ([`is_requester`]): the title with `byte_cnt`, the
/// WQE counter (`s_wqe_info.wqe_counter`) and the WQE opcode (byte 56,
/// `s_wqe_info.s_wqe_opcode`) from `m`, whatever `format` says. Each
/// mini-CQE names the WQE it completes: with selective signalling the
/// counters of a session are not consecutive. (MLNX_OFED 4.x's libmlx5,
/// which expanded sessions itself, read requester mini-CQEs this way.)
///
/// A receive session: the title with `byte_cnt` from `m`, the format's
/// field from `m` (`format`), the WQE counter the title's plus `i` (the
/// stride index of `m` for [`CqeResFormat::CsumStridx`]). With `format`
/// `None` only byte count and WQE counter are taken (the rest of `m` is
/// left out). Past the session's first CQE, unless the format is
/// [`CqeResFormat::Hash`], the RSS hash result and hash type (bytes 12-16)
/// are 0 ("no hash"): the title's hash is the first CQE's, and the others'
/// is not in the session. The Linux kernel's mlx5e driver reports the same
/// (`mlx5e_decompress_cqe_no_hash`), and DPDK's mlx5 documentation gives the
/// RSS hash only in the HASH format.
#[inline]
pub fn expand(title: &Cqe64, m: &MiniCqe, i: u32, format: Option<CqeResFormat>, owner: u8) -> Cqe64 {
    let mut c = *title;
    c.byte_cnt = m.byte_cnt;
    c.op_own = (title.op_own & 0xf2) | (owner & 1);
    if is_requester(title) {
        c.wqe_counter = Be16::new(u16::from_be_bytes([m.info[0], m.info[1]]));
        let sop = title.sop_drop_qpn.get();
        c.sop_drop_qpn = Be32::new((sop & 0x00ff_ffff) | (u32::from(m.info[2]) << 24));
        return c;
    }
    c.wqe_counter = Be16::new(title.wqe_counter.get().wrapping_add(i as u16));
    match format {
        Some(CqeResFormat::Hash) => c.rsvd0[12..16].copy_from_slice(&m.info),
        Some(CqeResFormat::Csum) => c.rsvd0[20..22].copy_from_slice(&m.info[..2]),
        Some(CqeResFormat::CsumStridx) => {
            c.rsvd0[20..22].copy_from_slice(&m.info[..2]);
            c.wqe_counter = Be16::new(u16::from_be_bytes([m.info[2], m.info[3]]));
        }
        None => {}
    }
    if i > 0 && format != Some(CqeResFormat::Hash) {
        c.rsvd0[12..17].fill(0);
    }
    c
}

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod tests {
    use super::*;

    #[test]
    fn the_hash_past_a_sessions_first_cqe_is_the_minis_or_none() {
        let mut title = Cqe64 {
            op_own: CqeOpcode::RESP_SEND.to_raw() << 4 | (CqeFormat::COMPRESSED.to_raw() << 2),
            ..Cqe64::default()
        };
        title.rsvd0[12..17].copy_from_slice(&[1, 2, 3, 4, 5]);
        let m = MiniCqe { info: [9, 8, 7, 6], byte_cnt: Be32::new(64) };
        for f in [None, Some(CqeResFormat::Csum), Some(CqeResFormat::CsumStridx)] {
            assert_eq!(
                expand(&title, &m, 0, f, 0).rsvd0[12..17],
                [1, 2, 3, 4, 5],
                "{f:?}: the first keeps the title's"
            );
            assert_eq!(expand(&title, &m, 1, f, 0).rsvd0[12..17], [0; 5], "{f:?}: the others have none");
        }
        for i in [0, 1, 9] {
            assert_eq!(expand(&title, &m, i, Some(CqeResFormat::Hash), 0).rsvd0[12..17], [9, 8, 7, 6, 5]);
        }
    }

    /// B-3: a requester session's CQEs name each mini-CQE's own WQE
    /// (counter and opcode), not the title's counter plus the index: with
    /// selective signalling the counters of a session have gaps.
    #[test]
    fn b3_requester_minis_carry_their_own_counter_and_opcode() {
        let title = Cqe64 {
            rsvd0: [0x5a; 32],
            app: [1, 2, 3, 4],
            sop_drop_qpn: Be32::new(0x0a00_1234),
            wqe_counter: Be16::new(3),
            op_own: (CqeOpcode::REQ.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2) | 1,
            ..Cqe64::default()
        };
        assert!(is_requester(&title));
        // WQEs 3, 7 and 0xfffe were signalled; the ones between were not.
        for (i, (counter, opcode)) in [(3u16, 0x0a), (7, 0x08), (0xfffe, 0x10)].into_iter().enumerate() {
            let [hi, lo] = counter.to_be_bytes();
            let m = MiniCqe { info: [hi, lo, opcode, 0xee], byte_cnt: Be32::new(100 + i as u32) };
            for f in [None, Some(CqeResFormat::Hash), Some(CqeResFormat::Csum), Some(CqeResFormat::CsumStridx)] {
                let c = expand(&title, &m, i as u32, f, 0);
                assert_eq!(c.wqe_counter.get(), counter, "{f:?}: CQE {i}'s counter is its mini-CQE's");
                assert_eq!(c.sop_drop_qpn.get(), (u32::from(opcode) << 24) | 0x1234, "{f:?}: opcode and QPN");
                assert_eq!(c.byte_cnt.get(), 100 + i as u32);
                assert_eq!((c.rsvd0, c.app), ([0x5a; 32], [1, 2, 3, 4]), "{f:?}: the rest is the title's");
                assert_eq!(c.op_own, CqeOpcode::REQ.to_raw() << 4, "{f:?}: format 0, the entry's owner");
            }
        }
        // A receive title keeps the title + i rule.
        let rx = Cqe64 { op_own: CqeOpcode::RESP_SEND.to_raw() << 4 | (CqeFormat::COMPRESSED.to_raw() << 2), ..title };
        assert!(!is_requester(&rx));
        let m = MiniCqe { info: [0, 9, 0, 0], byte_cnt: Be32::new(1) };
        assert_eq!(expand(&rx, &m, 2, Some(CqeResFormat::Hash), 0).wqe_counter.get(), 5);
    }

    #[test]
    fn arrays_sit_after_the_title_then_at_every_eighth_entry() {
        assert_eq!(position(0), (1, 0));
        assert_eq!(position(7), (1, 7));
        assert_eq!(position(8), (8, 0));
        assert_eq!(position(15), (8, 7));
        assert_eq!(position(16), (16, 0));
        assert_eq!(position(61), (56, 5));
    }
}
