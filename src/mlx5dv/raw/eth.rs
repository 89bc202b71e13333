//! Raw packet (Ethernet) send WQEs (`struct mlx5_wqe_eth_seg`).
//!
//! A SEND on a raw packet QP is the control segment, the Ethernet segment
//! (checksum offload flags and the packet's first bytes inline), then the
//! rest of the packet: data segments, or an inline segment. The device
//! needs at least its minimum inline header bytes in the Ethernet segment
//! (the Ethernet header and a VLAN tag, [`L2_INLINE_HEADER`] bytes, on
//! devices that do not offer a smaller mode); [`SqRing::send_eth`] writes
//! headers of up to [`ETH_SEG_INLINE_MAX`] bytes.
//!
//! # VLAN tags
//! [`SqRing::send_eth_vlan`] and [`SqRing::send_tso_vlan`] insert an 802.1Q
//! tag ([`Vlan`]) in software: the tag goes into the inline headers after
//! the two MAC addresses, so the packet in memory stays untagged and the
//! gather after the headers starts 4 bytes earlier in it than for a tagged
//! packet. The WQE is the one libmlx5's `ibv_post_send` writes for the
//! tagged packet (tests/provider/eth.rs); it works on every ConnectX whose
//! headers are inline. [`SqRing::send_eth_hw_vlan`] asks the device to
//! insert the tag instead (`insert.type` `MLX5_ETH_WQE_INSERT_VLAN`), which
//! needs a capability only DevX reports (`wqe_vlan_insert`), hence unsafe.

use crate::mlx5dv::queue::mmio::Mmio;
use crate::mlx5dv::queue::seg::{CtrlFlags, WqeOpcode};
use crate::mlx5dv::queue::sq::{SqRing, SqTransport, WqeWriter};

/// Bytes of inline headers the Ethernet segment itself holds.
pub const ETH_SEG_INLINE_MAX: usize = 18;

/// The shortest TSO headers: an Ethernet header (`MLX5_ETH_L2_MIN_HEADER_SIZE`).
pub const L2_MIN_HEADER: usize = 14;

/// The L2 minimum inline mode: an Ethernet header and one VLAN tag
/// (`MLX5_ETH_L2_INLINE_HEADER_SIZE`).
pub const L2_INLINE_HEADER: usize = 18;

/// Checksum offload requests of an Ethernet segment (`cs_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CsumFlags(u8);

impl CsumFlags {
    /// No checksum offload.
    pub const NONE: CsumFlags = CsumFlags(0);
    /// The device computes the IPv4 header checksum (`MLX5_ETH_WQE_L3_CSUM`).
    pub const L3: CsumFlags = CsumFlags(1 << 6);
    /// The device computes the TCP or UDP checksum (`MLX5_ETH_WQE_L4_CSUM`).
    pub const L4: CsumFlags = CsumFlags(1 << 7);

    /// Both sets of requests.
    pub const fn union(self, other: CsumFlags) -> CsumFlags {
        CsumFlags(self.0 | other.0)
    }

    /// The `cs_flags` byte.
    pub const fn bits(self) -> u8 {
        self.0
    }
}

/// An 802.1Q VLAN tag's control information (TCI): priority (PCP, 3 bits),
/// drop eligible indicator (DEI, 1 bit) and VLAN ID (VID, 12 bits). Its
/// tag on the wire is [`Vlan::TPID`] then the TCI, big-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vlan(u16);

impl Vlan {
    /// The 802.1Q tag protocol identifier the tag starts with.
    pub const TPID: u16 = 0x8100;

    /// The tag of VLAN `vid` with priority `pcp` and drop eligibility `dei`.
    ///
    /// # Panics
    /// If `vid` is 4095 or more (4095 is reserved; 12 bits) or `pcp` above
    /// 7 (3 bits): programming errors.
    pub fn new(vid: u16, pcp: u8, dei: bool) -> Vlan {
        assert!(vid < 0xfff, "Vlan::new: VLAN ID {vid} is outside 0..=4094 (12 bits, 4095 reserved)");
        assert!(pcp <= 7, "Vlan::new: priority (PCP) {pcp} is outside 0..=7 (3 bits)");
        Vlan((u16::from(pcp) << 13) | (u16::from(dei) << 12) | vid)
    }

    /// The tag of a TCI as it stands (any 16 bits, e.g. one read off a packet).
    pub const fn from_tci(tci: u16) -> Vlan {
        Vlan(tci)
    }

    /// The TCI.
    pub const fn tci(self) -> u16 {
        self.0
    }

    /// The VLAN ID (12 bits).
    pub const fn vid(self) -> u16 {
        self.0 & 0xfff
    }

    /// The priority (PCP, 3 bits).
    pub const fn pcp(self) -> u8 {
        (self.0 >> 13) as u8
    }

    /// The drop eligible indicator.
    pub const fn dei(self) -> bool {
        self.0 & (1 << 12) != 0
    }

    /// The 4 bytes of the tag on the wire: TPID, TCI.
    pub const fn bytes(self) -> [u8; 4] {
        let t = Vlan::TPID.to_be_bytes();
        let c = self.0.to_be_bytes();
        [t[0], t[1], c[0], c[1]]
    }
}

/// Bytes of a VLAN tag.
pub const VLAN_TAG: usize = 4;

/// Bytes of the two MAC addresses, after which a tag goes.
const MACS: usize = 12;

/// `MLX5_ETH_WQE_INSERT_VLAN`: bit 15 of the Ethernet segment's `insert.type`.
pub const INSERT_VLAN: u16 = 1 << 15;

/// A raw packet SEND with its Ethernet segment written: add the rest of the
/// packet, then [`EthWqe::finish`] or [`EthWqe::post`].
#[derive(Debug)]
#[must_use = "a WQE is published only by finish or post"]
pub struct EthWqe<'s> {
    w: WqeWriter<'s>,
}

/// Proof that the device inserts VLAN tags from the WQE and needs no
/// inline header: its current `wqe_vlan_insert` capability is set and its
/// `wqe_inline_mode` is "not required". [`SqRing::send_eth_hw_vlan`] takes
/// it; `devx::HcaCaps::hw_vlan_insert` (rdma-core builds) gives it from the
/// device's answer to `QUERY_HCA_CAP`. Zero-sized: copying it costs nothing.
#[derive(Clone, Copy, Debug)]
pub struct HwVlanInsert(());

impl HwVlanInsert {
    /// The proof without asking the device (MLNX_OFED 4.x builds, which
    /// have no DEVX, or a device whose capabilities are known otherwise).
    ///
    /// # Safety
    /// The device the rings are used on reports `wqe_vlan_insert` and a
    /// minimum inline mode of none (`eth_min_inline` 0): otherwise it reads
    /// the WQE's insert field as an inline header size and the WQE is malformed.
    pub const unsafe fn assume() -> HwVlanInsert {
        HwVlanInsert(())
    }

    /// The proof from the device's capabilities (`devx::HcaCaps`).
    #[cfg(not(rrddmma_mlnx_ofed4))]
    pub(crate) const fn from_caps() -> HwVlanInsert {
        HwVlanInsert(())
    }
}

impl SqRing {
    /// A SEND on a raw packet QP whose packet starts with `hdr` (copied into
    /// the Ethernet segment now), with the checksum offloads `csum`; add the
    /// rest of the packet with [`EthWqe::data`] or [`EthWqe::inline`].
    ///
    /// `hdr` is the device's minimum inline headers: [`L2_INLINE_HEADER`]
    /// bytes, or none on devices whose minimum inline mode is none (the
    /// segment is then one 16-byte unit). The WQE is the one libmlx5's
    /// `ibv_post_send` writes for the same packet (tests/provider/eth.rs).
    ///
    /// # Panics
    /// On a ring that is not [`SqTransport::RawPacket`], or if `hdr` is
    /// longer than [`ETH_SEG_INLINE_MAX`] bytes (programming errors).
    #[inline(always)]
    pub fn send_eth(&mut self, flags: CtrlFlags, csum: CsumFlags, hdr: &[u8]) -> EthWqe<'_> {
        assert!(
            hdr.len() <= ETH_SEG_INLINE_MAX,
            "send_eth on QP {:#x}: {} inline header bytes, the Ethernet segment holds {ETH_SEG_INLINE_MAX}; pass \
             at most {ETH_SEG_INLINE_MAX} and the rest of the packet as data",
            self.qpn(),
            hdr.len()
        );
        // `struct mlx5_wqe_eth_seg`: cs_flags at 4, mss (0) at 6,
        // inline_hdr_sz at 12, the headers from 14 on.
        let mut eth = [0u8; 32];
        eth[4] = csum.bits();
        eth[12..14].copy_from_slice(&(hdr.len() as u16).to_be_bytes());
        eth[14..14 + hdr.len()].copy_from_slice(hdr);
        self.eth_wqe("send_eth", flags, &eth, hdr.len())
    }

    /// [`SqRing::send_eth`] of the packet whose first bytes are `hdr` with
    /// the 802.1Q tag `vlan` inserted after its MAC addresses (software
    /// insertion): the Ethernet segment holds `hdr`'s 12 MAC bytes, the tag,
    /// then the rest of `hdr`, `hdr.len() + 4` bytes in all. Add the rest of
    /// the untagged packet, from `hdr.len()` on, with [`EthWqe::data`] or
    /// [`EthWqe::inline`]: the gather after the headers starts 4 bytes
    /// earlier in the packet than for a tagged one.
    ///
    /// `hdr` is the untagged packet's first 14 bytes (MACs and EtherType)
    /// where the device's minimum inline headers are [`L2_INLINE_HEADER`]
    /// bytes; 12 to 14 bytes otherwise. The WQE is the one libmlx5's
    /// `ibv_post_send` writes for the tagged packet (tests/provider/eth.rs).
    ///
    /// # Panics
    /// On a ring that is not [`SqTransport::RawPacket`], or if `hdr` is
    /// shorter than the two MAC addresses (12 bytes) or longer than 14
    /// (programming errors).
    #[inline(always)]
    pub fn send_eth_vlan(&mut self, flags: CtrlFlags, csum: CsumFlags, vlan: Vlan, hdr: &[u8]) -> EthWqe<'_> {
        assert!(
            (MACS..=ETH_SEG_INLINE_MAX - VLAN_TAG).contains(&hdr.len()),
            "send_eth_vlan on QP {:#x}: {} header bytes; pass the untagged packet's first 12 to 14 bytes (its MAC \
             addresses and EtherType), which the tag joins in the Ethernet segment's {ETH_SEG_INLINE_MAX}",
            self.qpn(),
            hdr.len()
        );
        let len = hdr.len() + VLAN_TAG;
        let mut eth = [0u8; 32];
        eth[4] = csum.bits();
        eth[12..14].copy_from_slice(&(len as u16).to_be_bytes());
        eth[14..14 + MACS].copy_from_slice(&hdr[..MACS]);
        eth[14 + MACS..14 + MACS + VLAN_TAG].copy_from_slice(&vlan.bytes());
        eth[14 + MACS + VLAN_TAG..14 + len].copy_from_slice(&hdr[MACS..]);
        self.eth_wqe("send_eth_vlan", flags, &eth, len)
    }

    /// A SEND on a raw packet QP whose 802.1Q tag `vlan` the device inserts
    /// (hardware insertion: the Ethernet segment's `insert.type` with
    /// `MLX5_ETH_WQE_INSERT_VLAN` and `insert.vlan_tci`, which take the
    /// place of the inline header size and first bytes). No header is
    /// inline; add the whole untagged packet with [`EthWqe::data`] or
    /// [`EthWqe::inline`]. `csum` as for [`SqRing::send_eth`].
    ///
    /// The layout follows the kernel's `struct mlx5_wqe_eth_seg`
    /// (`include/linux/mlx5/qp.h`, the `insert` union) and is checked
    /// against it only: libmlx5 has no VLAN insertion to compare with.
    ///
    /// `proof` says the device inserts VLAN tags from the WQE and needs no
    /// inline header: `devx::HcaCaps::hw_vlan_insert` (rdma-core builds)
    /// gives it where the current capabilities have `wqe_vlan_insert` and
    /// a minimum inline mode of none (elsewhere the device would read
    /// `insert` as an inline header size of 32768 or more). It is a
    /// zero-sized value: nothing is checked per WQE.
    ///
    /// # Panics
    /// On a ring that is not [`SqTransport::RawPacket`] (a programming error).
    #[inline(always)]
    pub fn send_eth_hw_vlan(
        &mut self,
        proof: HwVlanInsert,
        flags: CtrlFlags,
        csum: CsumFlags,
        vlan: Vlan,
    ) -> EthWqe<'_> {
        let _ = proof;
        // `insert.type` at 12, `insert.vlan_tci` at 14.
        let mut eth = [0u8; 32];
        eth[4] = csum.bits();
        eth[12..14].copy_from_slice(&INSERT_VLAN.to_be_bytes());
        eth[14..16].copy_from_slice(&vlan.tci().to_be_bytes());
        self.eth_wqe("send_eth_hw_vlan", flags, &eth, 0)
    }

    /// The SEND WQE of the Ethernet segment `eth` with `inline` header
    /// bytes: the whole 32 bytes, or its first 16 when at most two header
    /// bytes are inline.
    #[inline(always)]
    fn eth_wqe(&mut self, builder: &'static str, flags: CtrlFlags, eth: &[u8; 32], inline: usize) -> EthWqe<'_> {
        // Headers of at most two bytes (devices whose minimum inline mode is
        // none: libmlx5 then inlines nothing) fit the segment's first 16
        // bytes, and the segment is one 16-byte unit, as libmlx5 sizes it.
        let header = 16 + if inline <= 2 { 16 } else { 32 };
        // SAFETY: a raw packet SEND on a raw packet QP (the family checked
        // with the full check) is the control segment, the Ethernet segment
        // written here, then the payload, whose only address writer is the
        // unsafe `EthWqe::data`.
        let w = unsafe { self.typed_wqe(SqTransport::RawPacket, builder, header, WqeOpcode::SEND, 0, flags, 0) };
        let w = if inline <= 2 {
            let short: &[u8; 16] = eth[..16].try_into().expect("16 bytes");
            w.operands(&[short])
        } else {
            w.operands(&[eth])
        };
        EthWqe { w }
    }
}

impl SqRing {
    /// A TSO (large send offload) on a raw packet QP: the device cuts the
    /// payload added after (data or inline) into segments of `mss` bytes
    /// and sends each behind a copy of `hdr`, the packet's headers
    /// (Ethernet, IP, TCP), which the WQE carries inline in its Ethernet
    /// segment and the 16-byte units after it (across the ring's end where
    /// it wraps); `csum` as for [`SqRing::send_eth`].
    ///
    /// # Panics
    /// On a ring that is not [`SqTransport::RawPacket`], or if `hdr` is
    /// shorter than an Ethernet header ([`L2_MIN_HEADER`] bytes) or longer
    /// than 65,535 bytes (programming errors); at `finish` if the WQE is
    /// larger than the QP's largest.
    #[inline(always)]
    pub fn send_tso(&mut self, flags: CtrlFlags, csum: CsumFlags, mss: u16, hdr: &[u8]) -> EthWqe<'_> {
        self.tso_wqe(flags, csum, mss, hdr, None, "send_tso")
    }

    /// [`SqRing::send_tso`] of headers `hdr` with the 802.1Q tag `vlan`
    /// inserted after their MAC addresses (software insertion, as
    /// [`SqRing::send_eth_vlan`]): the WQE carries `hdr.len() + 4` header
    /// bytes, and every segment the device sends is tagged. The WQE is the
    /// one libmlx5's `ibv_post_send` writes for the tagged headers.
    ///
    /// # Panics
    /// As [`SqRing::send_tso`], the limit being 65,531 bytes.
    #[inline(always)]
    pub fn send_tso_vlan(&mut self, flags: CtrlFlags, csum: CsumFlags, mss: u16, vlan: Vlan, hdr: &[u8]) -> EthWqe<'_> {
        self.tso_wqe(flags, csum, mss, hdr, Some(vlan), "send_tso_vlan")
    }

    /// The TSO WQE of headers `hdr`, `vlan`'s tag after their MACs if set.
    #[inline(always)]
    fn tso_wqe(
        &mut self,
        flags: CtrlFlags,
        csum: CsumFlags,
        mss: u16,
        hdr: &[u8],
        vlan: Option<Vlan>,
        op: &'static str,
    ) -> EthWqe<'_> {
        let tag = if vlan.is_some() { VLAN_TAG } else { 0 };
        assert!(
            hdr.len() >= L2_MIN_HEADER && hdr.len() + tag <= usize::from(u16::MAX),
            "{op} on QP {:#x}: {} header bytes; TSO headers are at least an Ethernet header \
             ({L2_MIN_HEADER} bytes) and at most the QP's max_tso_header",
            self.qpn(),
            hdr.len()
        );
        // The Ethernet segment's first 16 bytes: cs_flags at 4, mss at 6,
        // inline_hdr_sz at 12, the headers' first two bytes at 14.
        let mut first = [0u8; 16];
        first[4] = csum.bits();
        first[6..8].copy_from_slice(&mss.to_be_bytes());
        first[12..14].copy_from_slice(&((hdr.len() + tag) as u16).to_be_bytes());
        first[14..16].copy_from_slice(&hdr[..2]);
        // Control, the segment's first 16 bytes, the tagged unit, the rest
        // of the headers in whole units.
        let rest_len = if vlan.is_some() { hdr.len() - L2_MIN_HEADER } else { hdr.len() - 2 };
        let header = 16 + 16 + if vlan.is_some() { 16 } else { 0 } + rest_len.next_multiple_of(16);
        // SAFETY: a TSO on a raw packet QP (the family checked with the
        // full check) is the control segment, the Ethernet segment with its
        // headers written here, then the payload, whose only address writer
        // is the unsafe `EthWqe::data`.
        let mut w = unsafe { self.typed_wqe(SqTransport::RawPacket, op, header, WqeOpcode::TSO, 0, flags, 0) }
            .operands(&[&first]);
        let rest = match vlan {
            // The first unit after the segment's 16 bytes is the rest of the
            // MACs (10 bytes), the tag and the EtherType: 16 bytes exactly.
            Some(v) => {
                let mut unit = [0u8; 16];
                unit[..MACS - 2].copy_from_slice(&hdr[2..MACS]);
                unit[MACS - 2..MACS - 2 + VLAN_TAG].copy_from_slice(&v.bytes());
                unit[MACS - 2 + VLAN_TAG..].copy_from_slice(&hdr[MACS..L2_MIN_HEADER]);
                w = w.operands(&[&unit]);
                &hdr[L2_MIN_HEADER..]
            }
            None => &hdr[2..],
        };
        // The rest of the headers in whole 16-byte units, the last padded
        // with zeros, stored in place.
        let mut chunks = rest.chunks(16);
        let w = w.units_with(rest.len().div_ceil(16), |_| {
            let mut unit = [0u8; 16];
            if let Some(c) = chunks.next() {
                unit[..c.len()].copy_from_slice(c);
            }
            [
                u64::from_ne_bytes(unit[..8].try_into().expect("8 bytes")),
                u64::from_ne_bytes(unit[8..].try_into().expect("8 bytes")),
            ]
        });
        EthWqe { w }
    }
}

impl<'s> EthWqe<'s> {
    /// Data segment: `len` bytes of the packet at `addr` of a region with `lkey`.
    ///
    /// # Safety
    /// As [`WqeWriter::data`]: the range lies in memory of this process
    /// registered with `lkey`, alive and untouched until the WQE's completion.
    ///
    /// # Panics
    /// Past the QP's `max_send_sge` data segments.
    #[inline(always)]
    pub unsafe fn data(self, len: u32, lkey: u32, addr: u64) -> EthWqe<'s> {
        // SAFETY: forwarded contract; data segments follow the Ethernet segment.
        EthWqe { w: unsafe { self.w.data(len, lkey, addr) } }
    }

    /// The rest of the packet inline ([`WqeWriter::inline`]).
    ///
    /// # Panics
    /// If `data` is longer than the QP's `max_inline_data`.
    #[inline(always)]
    pub fn inline(self, data: &[u8]) -> EthWqe<'s> {
        EthWqe { w: self.w.inline(data) }
    }

    /// Writes the control segment and advances the producer index; returns
    /// the WQE index.
    #[inline(always)]
    pub fn finish(self) -> u16 {
        self.w.finish()
    }

    /// Finishes the WQE and rings the doorbell ([`WqeWriter::post`]).
    #[inline(always)]
    pub fn post<M: Mmio>(self, mmio: &mut M) -> u16 {
        self.w.post(mmio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Buf([u8; 4 * 64]);

    fn ring(buf: &mut Buf, dbrec: &mut crate::mlx5dv::queue::be::Be32) -> SqRing {
        // SAFETY: four 64-byte basic blocks aligned to 64 and a doorbell
        // record, alive for the test; no BlueFlame register (finish only).
        let mut sq = unsafe { SqRing::from_raw(buf.0.as_mut_ptr(), 4, dbrec, std::ptr::null_mut(), 0, 0x42) };
        // SAFETY: the test reads the WQE as a raw packet SEND.
        unsafe { sq.set_transport(SqTransport::RawPacket) };
        sq
    }

    #[test]
    fn send_eth_layout() {
        let mut buf = Buf([0xee; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let hdr: Vec<u8> = (1..=18).collect();
        // SAFETY: nothing reads the address: the test never rings a doorbell.
        let idx =
            unsafe { sq.send_eth(CtrlFlags::empty(), CsumFlags::L3.union(CsumFlags::L4), &hdr).data(100, 7, 0x1000) }
                .finish();
        assert_eq!(idx, 0);
        assert_eq!(sq.cur_post(), 1);
        let b = &buf.0;
        // Control: opcode SEND (0x0a) at byte 3, qpn << 8 | ds (1 + 2 + 1 = 4).
        assert_eq!(b[3], 0x0a);
        assert_eq!(&b[4..8], &[0, 0, 0x42, 4]);
        // Ethernet segment at 16: cs_flags, inline size 18, the header.
        assert_eq!(b[16 + 4], 0xc0);
        assert_eq!(&b[16 + 12..16 + 14], &[0, 18]);
        assert_eq!(&b[16 + 14..16 + 32], &hdr[..]);
        // Data segment at 48: byte count, lkey, address.
        assert_eq!(&b[48..52], &100u32.to_be_bytes());
        assert_eq!(&b[52..56], &7u32.to_be_bytes());
        assert_eq!(&b[56..64], &0x1000u64.to_be_bytes());
    }

    #[test]
    fn send_eth_without_inline_headers_is_one_unit() {
        let mut buf = Buf([0xee; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        sq.send_eth(CtrlFlags::empty(), CsumFlags::L4, &[]).inline(&[1, 2, 3]).finish();
        let b = &buf.0;
        // ds: control, the 16-byte Ethernet segment, the inline segment.
        assert_eq!(b[7], 3);
        assert_eq!(b[16 + 4], 0x80);
        assert_eq!(&b[16 + 12..16 + 14], &[0, 0]);
        // The inline segment right after: byte count with the inline bit.
        assert_eq!(&b[32..36], &(0x8000_0000u32 | 3).to_be_bytes());
        assert_eq!(&b[36..39], &[1, 2, 3]);
    }

    #[test]
    fn send_tso_headers_wrap_the_ring_and_the_data_follows_them() {
        let mut buf = Buf([0xee; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        // The ring starts at its last block.
        sq.start_at(3);
        let hdr: Vec<u8> = (1..=40).collect();
        // SAFETY: nothing reads the address: the test never rings a doorbell.
        let idx = unsafe { sq.send_tso(CtrlFlags::empty(), CsumFlags::L4, 1400, &hdr).data(9000, 7, 0x1000) }.finish();
        assert_eq!(idx, 3);
        let b = &buf.0;
        // Control at block 3: TSO (0x0e), ds = 1 + 1 + 3 (38 more header bytes) + 1.
        assert_eq!((b[192 + 3], b[192 + 7]), (0x0e, 6));
        // Ethernet segment: cs_flags, mss, inline_hdr_sz, the first 2 + 16 header bytes up to the ring's end.
        assert_eq!(b[208 + 4], 0x80);
        assert_eq!(&b[208 + 6..208 + 8], &1400u16.to_be_bytes());
        assert_eq!(&b[208 + 12..208 + 14], &[0, 40]);
        assert_eq!(&b[208 + 14..256], &hdr[..34]);
        // The other 6 header bytes at the ring's start, padded to 16, then the data segment.
        assert_eq!(&b[0..6], &hdr[34..]);
        assert_eq!(&b[6..16], &[0; 10]);
        assert_eq!(&b[16..20], &9000u32.to_be_bytes());
        assert_eq!(&b[24..32], &0x1000u64.to_be_bytes());
    }

    #[test]
    #[should_panic(expected = "13 header bytes")]
    fn send_tso_short_header_panics() {
        let mut buf = Buf([0; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let _ = sq.send_tso(CtrlFlags::empty(), CsumFlags::NONE, 1000, &[0; 13]);
    }

    #[test]
    #[should_panic(expected = "send_eth")]
    fn send_eth_on_connected_ring_panics() {
        let mut buf = Buf([0; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        // SAFETY: the test reads nothing.
        unsafe { sq.set_transport(SqTransport::Connected) };
        let _ = sq.send_eth(CtrlFlags::empty(), CsumFlags::NONE, &[0; 14]);
    }

    /// The TSO builder's family check, folded into the full check.
    #[test]
    #[should_panic(expected = "send_tso")]
    fn send_tso_on_connected_ring_panics() {
        let mut buf = Buf([0; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        // SAFETY: the test reads nothing.
        unsafe { sq.set_transport(SqTransport::Connected) };
        let _ = sq.send_tso(CtrlFlags::empty(), CsumFlags::NONE, 1000, &[0; 54]);
    }

    #[test]
    #[should_panic(expected = "19 inline header bytes")]
    fn send_eth_long_header_panics() {
        let mut buf = Buf([0; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let _ = sq.send_eth(CtrlFlags::empty(), CsumFlags::NONE, &[0; 19]);
    }

    #[test]
    fn vlan_tag_bytes() {
        let v = Vlan::new(0x123, 5, true);
        assert_eq!(v.tci(), (5 << 13) | (1 << 12) | 0x123);
        assert_eq!((v.vid(), v.pcp(), v.dei()), (0x123, 5, true));
        assert_eq!(v.bytes(), [0x81, 0x00, 0xb1, 0x23]);
        assert_eq!(Vlan::from_tci(v.tci()), v);
    }

    #[test]
    #[should_panic(expected = "VLAN ID 4095")]
    fn vlan_id_4095_panics() {
        let _ = Vlan::new(4095, 0, false);
    }

    #[test]
    #[should_panic(expected = "priority (PCP) 8")]
    fn vlan_pcp_8_panics() {
        let _ = Vlan::new(1, 8, false);
    }

    /// The tag sits after the MACs; 18 inline bytes from 14 untagged ones.
    #[test]
    fn send_eth_vlan_splices_the_tag_after_the_macs() {
        let mut buf = Buf([0xee; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let hdr: Vec<u8> = (1..=14).collect();
        let v = Vlan::new(100, 3, false);
        // SAFETY: nothing reads the address: the test never rings a doorbell.
        unsafe { sq.send_eth_vlan(CtrlFlags::empty(), CsumFlags::L4, v, &hdr).data(50, 7, 0x1000) }.finish();
        let b = &buf.0;
        assert_eq!(b[7], 4, "control, a 32-byte Ethernet segment, one data segment");
        assert_eq!(&b[16 + 12..16 + 14], &[0, 18]);
        assert_eq!(&b[30..42], &hdr[..12]);
        assert_eq!(&b[42..46], &v.bytes());
        assert_eq!(&b[46..48], &hdr[12..]);
        assert_eq!(&b[48..52], &50u32.to_be_bytes());
    }

    #[test]
    #[should_panic(expected = "11 header bytes")]
    fn send_eth_vlan_without_the_macs_panics() {
        let mut buf = Buf([0; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let _ = sq.send_eth_vlan(CtrlFlags::empty(), CsumFlags::NONE, Vlan::new(1, 0, false), &[0; 11]);
    }

    /// TSO headers with the tag: the first unit after the segment's 16
    /// bytes is MACs 2..12, the tag and the EtherType.
    #[test]
    fn send_tso_vlan_headers() {
        let mut buf = Buf([0xee; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let hdr: Vec<u8> = (1..=54).collect();
        let v = Vlan::new(7, 0, false);
        sq.send_tso_vlan(CtrlFlags::empty(), CsumFlags::NONE, 1400, v, &hdr).finish();
        let b = &buf.0;
        // ds: control, 16 bytes of segment, 56 more header bytes in 4 units.
        assert_eq!((b[3], b[7]), (0x0e, 6));
        assert_eq!(&b[16 + 12..16 + 14], &[0, 58]);
        let mut tagged = hdr[..12].to_vec();
        tagged.extend_from_slice(&v.bytes());
        tagged.extend_from_slice(&hdr[12..]);
        assert_eq!(&b[30..30 + 58], &tagged[..]);
        assert_eq!(&b[30 + 58..96], &[0; 8], "the last unit padded with zeros");
    }

    /// Hardware insertion: `struct mlx5_wqe_eth_seg` of the kernel's
    /// include/linux/mlx5/qp.h: cs_flags at 4, then at 12 the `insert`
    /// union's `__be16 type` (`MLX5_ETH_WQE_INSERT_VLAN`, `1 << 15`) and
    /// `__be16 vlan_tci`; no inline header; the segment one 16-byte unit.
    #[test]
    fn send_eth_hw_vlan_matches_the_kernel_header() {
        let mut buf = Buf([0xee; 256]);
        let mut dbrec = crate::mlx5dv::queue::be::Be32::new(0);
        let mut sq = ring(&mut buf, &mut dbrec);
        let v = Vlan::new(0xabc, 6, false);
        // SAFETY: the test reads the bytes only; no device.
        let proof = unsafe { HwVlanInsert::assume() };
        // SAFETY: the test reads the bytes only; no device.
        unsafe { sq.send_eth_hw_vlan(proof, CtrlFlags::empty(), CsumFlags::L3, v).data(64, 7, 0x2000) }.finish();
        let b = &buf.0;
        assert_eq!(b[7], 3, "control, a 16-byte Ethernet segment, one data segment");
        assert_eq!(&b[16..20], &[0; 4], "swp offsets");
        assert_eq!(b[20], 0x40, "cs_flags");
        assert_eq!(&b[21..28], &[0; 7], "swp_flags, mss, flow_table_metadata");
        assert_eq!(&b[28..30], &[0x80, 0x00], "insert.type: MLX5_ETH_WQE_INSERT_VLAN");
        assert_eq!(&b[30..32], &[0xca, 0xbc], "insert.vlan_tci: PCP 6, DEI 0, VID 0xabc");
        assert_eq!(&b[32..36], &64u32.to_be_bytes());
    }
}
