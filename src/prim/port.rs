//! Port attributes, with link speed and width as values safe for any number
//! the kernel reports.

use std::fmt;

use crate::bindings as ffi;
use crate::prim::{Mtu, PortState};

/// Port attributes as the device reports them (`struct ibv_port_attr`), plus
/// `active_speed_ex` when the installed libibverbs fills it (rdma-core ≥ 47).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct PortAttr {
    /// The C attributes of the bound rdma-core release.
    pub raw: ffi::ibv_port_attr,
    /// `active_speed_ex` of newer releases (XDR and beyond); 0 when not filled.
    pub active_speed_ex: u32,
}

// rdma-core 47 appended `active_speed_ex` right after the fields bound here.
const _: () = assert!(
    std::mem::offset_of!(PortAttr, active_speed_ex) == 52 && std::mem::size_of::<PortAttr>() == 56,
    "PortAttr must match rdma-core >= 47's struct ibv_port_attr"
);

impl PortAttr {
    /// Port state (`IBV_PORT_ACTIVE`, ...).
    pub fn state(&self) -> PortState {
        self.raw.state.into()
    }

    /// Whether the port is ACTIVE.
    pub fn is_active(&self) -> bool {
        self.state() == PortState::ACTIVE
    }

    /// Active MTU.
    pub fn active_mtu(&self) -> Mtu {
        self.raw.active_mtu.into()
    }

    /// LID (0 on RoCE).
    pub fn lid(&self) -> u16 {
        self.raw.lid
    }

    /// Whether the link layer is Ethernet (RoCE).
    pub fn is_ethernet(&self) -> bool {
        u32::from(self.raw.link_layer) == ffi::IBV_LINK_LAYER_ETHERNET.0
    }

    /// Number of entries in the GID table.
    pub fn gid_table_len(&self) -> u32 {
        u32::try_from(self.raw.gid_tbl_len).unwrap_or(0)
    }

    /// Per-lane signalling speed.
    pub fn speed(&self) -> Speed {
        if self.active_speed_ex != 0 {
            Speed(self.active_speed_ex)
        } else {
            Speed(u32::from(self.raw.active_speed))
        }
    }

    /// Lane count.
    pub fn width(&self) -> Width {
        Width(self.raw.active_width)
    }

    /// Link rate in Gb/s (data rate, after encoding), if speed and width are known.
    pub fn gbps(&self) -> Option<f64> {
        Some(self.speed().lane_gbps()? * f64::from(self.width().lanes()?))
    }
}

impl fmt::Debug for PortAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortAttr")
            .field("state", &self.raw.state)
            .field("lid", &self.raw.lid)
            .field("active_mtu", &self.raw.active_mtu)
            .field("speed", &self.speed())
            .field("width", &self.width())
            .finish()
    }
}

/// Lane speed code (`IB_SPEED_*`); any value is representable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Speed(pub u32);

impl Speed {
    /// 2.5 Gb/s.
    pub const SDR: Speed = Speed(1);
    /// 5 Gb/s.
    pub const DDR: Speed = Speed(2);
    /// 10 Gb/s.
    pub const QDR: Speed = Speed(4);
    /// 10.3125 Gb/s, 64b/66b.
    pub const FDR10: Speed = Speed(8);
    /// 14.0625 Gb/s.
    pub const FDR: Speed = Speed(16);
    /// 25.78125 Gb/s.
    pub const EDR: Speed = Speed(32);
    /// 50 Gb/s.
    pub const HDR: Speed = Speed(64);
    /// 100 Gb/s.
    pub const NDR: Speed = Speed(128);
    /// 200 Gb/s (reported through `active_speed_ex`).
    pub const XDR: Speed = Speed(256);

    /// Name, if the code is known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Speed::SDR => "SDR",
            Speed::DDR => "DDR",
            Speed::QDR => "QDR",
            Speed::FDR10 => "FDR10",
            Speed::FDR => "FDR",
            Speed::EDR => "EDR",
            Speed::HDR => "HDR",
            Speed::NDR => "NDR",
            Speed::XDR => "XDR",
            _ => return None,
        })
    }

    /// Data rate of one lane in Gb/s, if the code is known.
    pub fn lane_gbps(self) -> Option<f64> {
        Some(match self {
            Speed::SDR => 2.0,
            Speed::DDR => 4.0,
            Speed::QDR => 8.0,
            Speed::FDR10 => 10.0,
            Speed::FDR => 13.64,
            Speed::EDR => 25.0,
            Speed::HDR => 50.0,
            Speed::NDR => 100.0,
            Speed::XDR => 200.0,
            _ => return None,
        })
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "unknown speed {}", self.0),
        }
    }
}

impl fmt::Debug for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Speed({self})")
    }
}

/// Lane-count code (`IB_WIDTH_*`); any value is representable.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Width(pub u8);

impl Width {
    /// Number of lanes, if the code is known (1x, 2x, 4x, 8x, 12x).
    pub fn lanes(self) -> Option<u8> {
        Some(match self.0 {
            1 => 1,
            2 => 4,
            4 => 8,
            8 => 12,
            16 => 2,
            _ => return None,
        })
    }
}

impl fmt::Display for Width {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.lanes() {
            Some(n) => write!(f, "{n}x"),
            None => write!(f, "unknown width {}", self.0),
        }
    }
}

impl fmt::Debug for Width {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Width({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_speed_and_width_code_is_safe() {
        for code in 0..=u16::MAX as u32 {
            let s = Speed(code);
            let _ = s.to_string();
            assert_eq!(s.name().is_some(), s.lane_gbps().is_some());
        }
        for code in 0..=u8::MAX {
            let _ = Width(code).to_string();
        }
        let mut p = PortAttr::default();
        p.raw.active_speed = 128;
        p.raw.active_width = 2;
        assert_eq!((p.speed().to_string(), p.width().to_string(), p.gbps()), ("NDR".into(), "4x".into(), Some(400.0)));
        p.active_speed_ex = 256;
        assert_eq!((p.speed(), p.gbps()), (Speed::XDR, Some(800.0)));
        p.active_speed_ex = 4096;
        assert_eq!((p.speed().to_string(), p.gbps()), ("unknown speed 4096".into(), None));
        p.raw.active_width = 3;
        assert_eq!(p.width().to_string(), "unknown width 3");
    }
}
