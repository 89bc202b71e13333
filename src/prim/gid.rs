//! GIDs and GID table entries.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bindings as ffi;
use crate::prim::cvalue::c_type;

/// A 128-bit global identifier (IPv6 format).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Whether every byte is zero (an unused table entry).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// As the C union.
    pub fn to_raw(self) -> ffi::ibv_gid {
        ffi::ibv_gid { raw: self.0 }
    }

    /// From the C union.
    pub fn from_raw(raw: ffi::ibv_gid) -> Gid {
        // SAFETY: every bit pattern of the 16-byte union is a valid byte array.
        Gid(unsafe { raw.raw })
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

c_type! {
    /// GID type (`enum ibv_gid_type`); any value is representable.
    #[doc(alias = "ibv_gid_type")]
    pub value GidType: u32, from enum ffi::ibv_gid_type {
        /// InfiniBand.
        IB = IBV_GID_TYPE_IB "IBV_GID_TYPE_IB",
        /// RoCE v1 (Ethernet, no IP header).
        ROCE_V1 = IBV_GID_TYPE_ROCE_V1 "IBV_GID_TYPE_ROCE_V1",
        /// RoCE v2 (UDP/IP).
        ROCE_V2 = IBV_GID_TYPE_ROCE_V2 "IBV_GID_TYPE_ROCE_V2",
    }
}

/// One entry of a port's GID table (`struct ibv_gid_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Its index in the table.
    pub index: u32,
    /// The port.
    pub port: u32,
    /// IB, RoCE v1 or RoCE v2.
    pub gid_type: GidType,
    /// Interface index of the network device (RoCE), 0 if none.
    pub netdev_ifindex: u32,
}

impl GidEntry {
    /// From the C entry.
    pub fn from_raw(e: &ffi::ibv_gid_entry) -> GidEntry {
        GidEntry {
            gid: Gid::from_raw(e.gid),
            index: e.gid_index,
            port: e.port_num,
            gid_type: GidType::from_raw(e.gid_type),
            netdev_ifindex: e.ndev_ifindex,
        }
    }

    /// Name of the network device (e.g. `eth0`), if any.
    pub fn netdev(&self) -> Option<String> {
        if self.netdev_ifindex == 0 {
            return None;
        }
        let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: `buf` holds IF_NAMESIZE bytes, as `if_indextoname` requires.
        let p = unsafe { libc::if_indextoname(self.netdev_ifindex, buf.as_mut_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: on success the buffer holds a NUL-terminated name.
        Some(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// The IPv4 address of an IPv4-mapped RoCE GID.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.gid.ipv4()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_formats_and_maps_ipv4() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[127, 0, 0, 1]);
        let gid = Gid(raw);
        assert_eq!(gid.to_string(), "::ffff:127.0.0.1");
        assert_eq!(gid.ipv4(), Some(Ipv4Addr::LOCALHOST));
        assert!(!gid.is_zero() && Gid::default().is_zero());
        let link_local = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]);
        assert_eq!(link_local.to_string(), "fe80::200:ff:fe00:1");
        assert_eq!(link_local.ipv4(), None);
        assert_eq!(Gid::from_raw(gid.to_raw()), gid);
    }

    #[test]
    fn gid_types_of_any_value_print() {
        assert_eq!(GidType::ROCE_V2.to_string(), "ROCE_V2");
        assert_eq!(format!("{:?}", GidType::from_raw(9)), "GidType(9)");
        assert_eq!(GidType::from(ffi::ibv_gid_type::IBV_GID_TYPE_ROCE_V1), GidType::ROCE_V1);
        let e = GidEntry { gid: Gid::default(), index: 0, port: 1, gid_type: GidType::IB, netdev_ifindex: 0 };
        assert_eq!(e.netdev(), None);
    }
}
