//! Typed exchanges over a [`Session`]: QP endpoints and MR tokens.

use super::error::{Error, Result};
use std::time::Duration;

use super::session::Session;
use crate::prim::{AhAttr, Endpoint, Gid, Mtu, RemoteMr};

/// What a peer needs to connect to one of this rank's QPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QpInfo {
    /// QP number.
    pub qpn: u32,
    /// First PSN the QP sends (24 bits).
    pub psn: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Port GID.
    pub gid: Gid,
    /// Index of `gid` in the port's table.
    pub gid_index: u8,
    /// Port number.
    pub port: u8,
    /// Path MTU this side will use.
    pub mtu: Mtu,
    /// READs and atomics this QP will have outstanding as initiator
    /// (its `max_rd_atomic`); the peer keeps no more responder resources.
    pub rd_atomic: u8,
    /// READs and atomics this QP accepts outstanding as responder (its
    /// `max_dest_rd_atomic`); the peer initiates no more.
    pub dest_rd_atomic: u8,
}

impl QpInfo {
    /// Size of the wire form.
    pub const WIRE_LEN: usize = 31;

    /// A QP's endpoint with the port facts around it, offering READ and
    /// atomic depths of 1 each ([`QpInfo::with_rd_atomic`] sets others).
    pub fn new(e: &Endpoint, gid_index: u8, port: u8, mtu: Mtu) -> QpInfo {
        QpInfo { qpn: e.qpn, psn: e.psn, lid: e.lid, gid: e.gid, gid_index, port, mtu, rd_atomic: 1, dest_rd_atomic: 1 }
    }

    /// This info offering depth `init` as initiator and `dest` as responder
    /// (`ConnectOpts::rd_atomic` of the options the QP connects with).
    #[must_use]
    pub fn with_rd_atomic(self, init: u8, dest: u8) -> QpInfo {
        QpInfo { rd_atomic: init, dest_rd_atomic: dest, ..self }
    }

    /// The address vector from this host's `port` (with its GID at
    /// `sgid_index`) to the peer this describes: a GRH path to the peer's
    /// GID, or a LID path when the peer has no GID (InfiniBand).
    pub fn ah_attr(&self, port: u8, sgid_index: u8) -> AhAttr {
        if self.gid.is_zero() {
            AhAttr::lid(port, self.lid)
        } else {
            AhAttr::global(port, sgid_index, self.gid).dlid(self.lid)
        }
    }

    /// The endpoint to pass to [`crate::prim::Qp::connect`].
    pub fn endpoint(&self) -> Endpoint {
        Endpoint { qpn: self.qpn, psn: self.psn, lid: self.lid, gid: self.gid }
    }

    /// Wire form, big-endian: QPN, PSN, LID, GID, GID index, port, MTU,
    /// initiator depth, responder depth.
    pub fn to_bytes(&self) -> [u8; Self::WIRE_LEN] {
        let mut b = [0u8; Self::WIRE_LEN];
        b[0..4].copy_from_slice(&self.qpn.to_be_bytes());
        b[4..8].copy_from_slice(&self.psn.to_be_bytes());
        b[8..10].copy_from_slice(&self.lid.to_be_bytes());
        b[10..26].copy_from_slice(&self.gid.0);
        b[26] = self.gid_index;
        b[27] = self.port;
        b[28] = self.mtu.to_raw() as u8;
        b[29] = self.rd_atomic;
        b[30] = self.dest_rd_atomic;
        b
    }

    /// Parses [`QpInfo::to_bytes`]; refuses values no port can have.
    pub fn from_bytes(b: &[u8; Self::WIRE_LEN]) -> Result<QpInfo> {
        let be32 = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let psn = be32(4);
        if psn > 0xff_ffff {
            return Err(Error::Malformed("QP endpoint PSN above 24 bits"));
        }
        if !(1..=5).contains(&b[28]) {
            return Err(Error::Malformed("QP endpoint MTU is not one of 256..4096"));
        }
        Ok(QpInfo {
            qpn: be32(0),
            psn,
            lid: u16::from_be_bytes([b[8], b[9]]),
            gid: Gid(b[10..26].try_into().expect("16 bytes")),
            gid_index: b[26],
            port: b[27],
            mtu: Mtu::from_raw(u32::from(b[28])),
            rd_atomic: b[29],
            dest_rd_atomic: b[30],
        })
    }
}

fn parse_list<T, const N: usize>(part: &[u8], what: &'static str, f: impl Fn(&[u8; N]) -> Result<T>) -> Result<Vec<T>> {
    if part.len() % N != 0 {
        return Err(Error::Malformed(what));
    }
    part.chunks_exact(N).map(|c| f(c.try_into().expect("chunk of N"))).collect()
}

impl Session {
    /// All-gathers QP endpoints: this rank offers `mine` (typically one per
    /// peer, indexed by the peer's rank), and gets every rank's list back, in
    /// rank order. Rank `j`'s QP for this rank is then `result[j][self.rank()]`.
    ///
    /// Every rank's list has an entry at its own index too, which nobody
    /// reads: put a placeholder there (an endpoint of zeros) to keep the
    /// indices aligned, as `wrap::connect_rc_mesh` does; likewise for a peer
    /// a rank has no QP for. `result[self.rank()]` is this rank's own list.
    pub fn exchange_endpoints(&mut self, mine: &[QpInfo]) -> Result<Vec<Vec<QpInfo>>> {
        self.exchange_endpoints_within(mine, self.op_timeout())
    }

    /// [`Session::exchange_endpoints`] with its own deadline.
    pub fn exchange_endpoints_within(&mut self, mine: &[QpInfo], allowed: Duration) -> Result<Vec<Vec<QpInfo>>> {
        let bytes: Vec<u8> = mine.iter().flat_map(QpInfo::to_bytes).collect();
        self.all_gather_within(&bytes, allowed)?
            .iter()
            .map(|p| parse_list(p, "QP endpoint list length is not a multiple of 31", QpInfo::from_bytes))
            .collect()
    }

    /// All-gathers one MR token per rank, in rank order.
    pub fn exchange_mrs(&mut self, mine: &RemoteMr) -> Result<Vec<RemoteMr>> {
        self.exchange_mrs_within(mine, self.op_timeout())
    }

    /// [`Session::exchange_mrs`] with its own deadline.
    pub fn exchange_mrs_within(&mut self, mine: &RemoteMr, allowed: Duration) -> Result<Vec<RemoteMr>> {
        self.all_gather_within(&mine.to_bytes(), allowed)?.iter().map(|p| parse_mr(p)).collect()
    }
}

/// A peer's MR token: 20 bytes whose address range fits in 64 bits.
fn parse_mr(p: &[u8]) -> Result<RemoteMr> {
    let b: &[u8; RemoteMr::WIRE_LEN] = p.try_into().map_err(|_| Error::Malformed("MR token is not 20 bytes"))?;
    let mr = RemoteMr::from_bytes(b);
    match mr.end() {
        Some(_) => Ok(mr),
        None => Err(Error::Malformed("MR token's address plus length exceeds 64 bits")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_info_round_trip_and_checks() {
        let q = QpInfo {
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            lid: 7,
            gid: Gid([9; 16]),
            gid_index: 3,
            port: 1,
            mtu: Mtu::MTU_4096,
            rd_atomic: 16,
            dest_rd_atomic: 128,
        };
        assert_eq!(QpInfo::from_bytes(&q.to_bytes()).unwrap(), q);
        assert_eq!(q.to_bytes()[29..], [16, 128], "the depths are the last two bytes");
        let mut b = q.to_bytes();
        b[28] = 6;
        assert!(QpInfo::from_bytes(&b).is_err());
        let mut b = q.to_bytes();
        b[4] = 1;
        assert!(QpInfo::from_bytes(&b).is_err());
        assert!(parse_list(&[0u8; 32], "bad", QpInfo::from_bytes).is_err());
    }

    #[test]
    fn mr_token_that_wraps_is_malformed() {
        let ok = RemoteMr { addr: 0x1000, len: 64, rkey: 5 };
        assert_eq!(parse_mr(&ok.to_bytes()).unwrap(), ok);
        let bad = RemoteMr { addr: u64::MAX - 8, len: 64, rkey: 5 };
        let e = parse_mr(&bad.to_bytes()).unwrap_err();
        assert!(e.to_string().contains("exceeds 64 bits"), "{e}");
        assert!(parse_mr(&[0; 19]).is_err());
    }
}
