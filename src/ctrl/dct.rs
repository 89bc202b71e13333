//! A DCT directory through a [`Session`]: each rank's DC target (its port
//! address, DCT number and access key) as a [`DctInfo`], all-gathered in
//! one call ([`Session::exchange_dcts`]).

use std::time::Duration;

use super::error::{Error, Result};
use super::session::Session;
use crate::prim::{AhAttr, Gid, Mtu};

/// What a peer needs to send to one of this rank's DC targets: the port's
/// address (LID, GID), the DCT number and its access key. A rank without a
/// DC target (a device without DC: rxe, siw) sends one with
/// [`DctInfo::has_dc`] false, so every rank learns that DC is not for the
/// whole group ([`crate::wrap::dc::DcMesh`] falls back to RC then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DctInfo {
    /// Whether the rank has a DC target (`false`: `dctn` and `key` are 0).
    pub has_dc: bool,
    /// DCT number (24 bits).
    pub dctn: u32,
    /// DC access key the target checks.
    pub key: u64,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Port GID.
    pub gid: Gid,
    /// Index of `gid` in the sender's port table.
    pub gid_index: u8,
    /// Port number of the target.
    pub port: u8,
    /// Path MTU of the target.
    pub mtu: Mtu,
}

impl DctInfo {
    /// Size of the wire form.
    pub const WIRE_LEN: usize = 34;

    /// A rank's DC target `dctn` with key `key`, on the port whose LID is
    /// `lid` and GID `gid` (at `gid_index` of `port`).
    pub fn new(dctn: u32, key: u64, lid: u16, gid: Gid, gid_index: u8, port: u8, mtu: Mtu) -> DctInfo {
        DctInfo { has_dc: true, dctn, key, lid, gid, gid_index, port, mtu }
    }

    /// The entry of a rank without a DC target, with its port's address.
    pub fn without_dc(lid: u16, gid: Gid, gid_index: u8, port: u8, mtu: Mtu) -> DctInfo {
        DctInfo { has_dc: false, dctn: 0, key: 0, lid, gid, gid_index, port, mtu }
    }

    /// The address vector from this host's `port` (its GID at
    /// `sgid_index`) to the target: a GRH path to its GID, or a LID path
    /// when it has none (InfiniBand). An [`Ah`](crate::prim::Ah) of it, with
    /// [`DctInfo::dctn`] and [`DctInfo::key`], is the target's
    /// [`DctAddr`](crate::mlx5dv::dc::DctAddr).
    pub fn ah_attr(&self, port: u8, sgid_index: u8) -> AhAttr {
        if self.gid.is_zero() {
            AhAttr::lid(port, self.lid)
        } else {
            AhAttr::global(port, sgid_index, self.gid).dlid(self.lid)
        }
    }

    /// Wire form, big-endian: flags (bit 0: has DC), DCT number, key, LID,
    /// GID, GID index, port, MTU.
    pub fn to_bytes(&self) -> [u8; Self::WIRE_LEN] {
        let mut b = [0u8; Self::WIRE_LEN];
        b[0] = u8::from(self.has_dc);
        b[1..5].copy_from_slice(&self.dctn.to_be_bytes());
        b[5..13].copy_from_slice(&self.key.to_be_bytes());
        b[13..15].copy_from_slice(&self.lid.to_be_bytes());
        b[15..31].copy_from_slice(&self.gid.0);
        b[31] = self.gid_index;
        b[32] = self.port;
        b[33] = self.mtu.to_raw() as u8;
        b
    }

    /// Parses a peer's [`DctInfo::to_bytes`]: the length must be
    /// [`DctInfo::WIRE_LEN`] exactly (a peer is not trusted), and values no
    /// target can have are refused.
    pub fn from_bytes(b: &[u8]) -> Result<DctInfo> {
        let b: &[u8; Self::WIRE_LEN] =
            b.try_into().map_err(|_| Error::Malformed("DCT entry is not 34 bytes (DctInfo::WIRE_LEN)"))?;
        if b[0] > 1 {
            return Err(Error::Malformed("DCT entry flags other than bit 0 (has DC)"));
        }
        let dctn = u32::from_be_bytes(b[1..5].try_into().expect("4 bytes"));
        if dctn > 0xff_ffff {
            return Err(Error::Malformed("DCT number above 24 bits"));
        }
        if !(1..=5).contains(&b[33]) {
            return Err(Error::Malformed("DCT entry MTU is not one of 256..4096"));
        }
        let has_dc = b[0] == 1;
        let key = u64::from_be_bytes(b[5..13].try_into().expect("8 bytes"));
        if !has_dc && (dctn != 0 || key != 0) {
            return Err(Error::Malformed("DCT entry without DC carries a DCT number or key"));
        }
        Ok(DctInfo {
            has_dc,
            dctn,
            key,
            lid: u16::from_be_bytes([b[13], b[14]]),
            gid: Gid(b[15..31].try_into().expect("16 bytes")),
            gid_index: b[31],
            port: b[32],
            mtu: Mtu::from_raw(u32::from(b[33])),
        })
    }
}

impl Session {
    /// All-gathers one DC target entry per rank, in rank order (this
    /// rank's own at `result[self.rank()]`): the DCT directory.
    pub fn exchange_dcts(&mut self, mine: &DctInfo) -> Result<Vec<DctInfo>> {
        self.exchange_dcts_within(mine, self.op_timeout())
    }

    /// [`Session::exchange_dcts`] with its own deadline.
    pub fn exchange_dcts_within(&mut self, mine: &DctInfo, allowed: Duration) -> Result<Vec<DctInfo>> {
        self.all_gather_within(&mine.to_bytes(), allowed)?.iter().map(|p| DctInfo::from_bytes(p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DctInfo {
        DctInfo::new(0xab_cdef, 0x1122_3344_5566_7788, 7, Gid([9; 16]), 3, 1, Mtu::MTU_4096)
    }

    #[test]
    fn dct_info_round_trips() {
        let d = sample();
        assert_eq!(DctInfo::from_bytes(&d.to_bytes()).unwrap(), d);
        let n = DctInfo::without_dc(0, Gid([1; 16]), 1, 1, Mtu::MTU_1024);
        assert_eq!(DctInfo::from_bytes(&n.to_bytes()).unwrap(), n);
        assert_eq!(d.to_bytes()[1..5], [0, 0xab, 0xcd, 0xef]);
    }

    #[test]
    fn dct_info_from_a_hostile_peer_is_refused() {
        let d = sample().to_bytes();
        let refused = |b: &[u8], what: &str| {
            let e = DctInfo::from_bytes(b).unwrap_err();
            assert!(e.to_string().contains(what), "{e}");
        };
        // Every wrong length: shorter, longer, empty.
        for len in [0, 1, 33, 35, 68] {
            let mut v = d.to_vec();
            v.resize(len, 0);
            refused(&v, "not 34 bytes");
        }
        let mut b = d;
        b[0] = 2;
        refused(&b, "flags");
        let mut b = d;
        b[1] = 1;
        refused(&b, "24 bits");
        let mut b = d;
        b[33] = 0;
        refused(&b, "MTU");
        let mut b = d;
        b[33] = 6;
        refused(&b, "MTU");
        let mut b = d;
        b[0] = 0;
        refused(&b, "without DC carries");
    }

    #[test]
    fn dct_info_address_vector() {
        let d = sample();
        let a = d.ah_attr(1, 4);
        let r = a.as_raw();
        assert_eq!((r.is_global, r.grh.sgid_index, r.dlid, r.port_num, a.dgid()), (1, 4, 7, 1, Gid([9; 16])));
        let ib = DctInfo { gid: Gid::default(), ..d }.ah_attr(2, 0);
        let r = ib.as_raw();
        assert_eq!((r.is_global, r.dlid, r.port_num), (0, 7, 2));
    }
}
