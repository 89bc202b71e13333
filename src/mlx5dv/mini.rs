//! Compressed CQEs: the mini-CQE layout (`struct mlx5_mini_cqe8`), its
//! three formats (`MLX5DV_CQE_RES_FORMAT_*`) and the expansion of one mini-CQE
//! into the full CQE it stands for.
//!
//! A CQ created with a compression format may write a *session* in place of
//! `n` CQEs that differ only in a few fields: at the session's first entry a
//! title CQE (format bits 3, `byte_cnt` = `n`, the fields the `n` CQEs
//! share), then arrays of eight 8-byte mini-CQEs, one per CQE: the first
//! array in the entry after the title, array `k >= 1` in the entry of CQE
//! `8k`. The other entries of the session are not written. CQE `i` of the
//! session is the title with its byte count, WQE counter and the format's
//! field taken from mini-CQE `i` ([`expand`]). [`CqRing`](super::cq::CqRing)
//! expands sessions when told the format
//! ([`CqRing::set_compression`](super::cq::CqRing::set_compression)).

use super::be::{Be16, Be32};
use super::cqe::Cqe64;

/// `MLX5_COMPRESSED`: the format bits (`op_own` bits 2-3) of a title CQE.
pub const COMPRESSED: u8 = 3;

/// Mini-CQEs in one array (one 64-byte entry).
pub const PER_ARRAY: u32 = 8;

pub use crate::prim::mlx5::CqeResFormat;

/// One mini-CQE (`struct mlx5_mini_cqe8`): four bytes whose meaning the
/// format decides (RSS hash; or checksum and stride index), then the byte
/// count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MiniCqe {
    /// `rx_hash_result` ([`CqeResFormat::Hash`]), or `checksum` (bytes 0-1)
    /// and `stridx` (bytes 2-3).
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

/// CQE `i` of the session under `title`, from its mini-CQE `m`: the title
/// with `byte_cnt` from `m`, the format's field from `m` (`format`), the WQE
/// counter the title's plus `i` (the stride index of `m` for
/// [`CqeResFormat::CsumStridx`]), format bits 0 and the owner bit `owner`
/// of the entry the CQE occupies. With `format` `None` only byte count and
/// WQE counter are taken (the rest of `m` is left out).
///
/// Past the session's first CQE, unless the format is
/// [`CqeResFormat::Hash`], the RSS hash result and hash type (bytes 12-16)
/// are 0 ("no hash"): the title's hash is the first CQE's, and the others'
/// is not in the session. The Linux kernel's mlx5e driver reports the same
/// (`mlx5e_decompress_cqe_no_hash`), and DPDK's mlx5 documentation gives the
/// RSS hash only in the HASH format.
#[inline]
pub fn expand(title: &Cqe64, m: &MiniCqe, i: u32, format: Option<CqeResFormat>, owner: u8) -> Cqe64 {
    let mut c = *title;
    c.byte_cnt = m.byte_cnt;
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
    c.op_own = (title.op_own & 0xf2) | (owner & 1);
    c
}

#[cfg(all(test, not(rrddmma_mlnx_ofed4)))]
mod tests {
    use super::*;

    #[test]
    fn the_hash_past_a_sessions_first_cqe_is_the_minis_or_none() {
        let mut title = Cqe64::default();
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
