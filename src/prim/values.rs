//! Rust names for the values and flag sets of the verbs API.
//!
//! Each C enum is a `#[repr(transparent)]` newtype over its integer, with the
//! C constants as Rust-named associated constants (`WcStatus::REM_ACCESS_ERR`
//! for `IBV_WC_REM_ACCESS_ERR`). `Debug` and `Display` print the name; a
//! value this build does not know (a newer provider's) is kept as it is and
//! printed as a number, never a panic. Flag sets print as `A | B`. The C
//! types stay in [`crate::bindings`]; `From` converts both ways at no cost.
//!
//! ```
//! use rrddmma::prim::{AccessFlags, WcStatus};
//! let a = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ;
//! assert_eq!(format!("{a:?}"), "LOCAL_WRITE | REMOTE_READ");
//! assert!(a.contains(AccessFlags::REMOTE_READ));
//! assert_eq!(WcStatus::REM_ACCESS_ERR.to_string(), "REM_ACCESS_ERR");
//! assert_eq!(format!("{:?}", WcStatus(99)), "WcStatus(99)");
//! ```

use std::fmt;

use crate::bindings as ffi;

/// A C enum as a newtype with named constants.
macro_rules! c_values {
    ($(#[$m:meta])* $name:ident = ffi::$raw:ident { $($c:ident = $cc:ident,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[repr(transparent)]
        pub struct $name(pub u32);

        impl $name {
            $(
                #[doc = concat!("`", stringify!($cc), "`")]
                pub const $c: $name = $name(ffi::$raw::$cc.0);
            )*

            /// The Rust name of the value; `None` for a value this build does not know.
            pub fn name(self) -> Option<&'static str> {
                $(
                    if self.0 == ffi::$raw::$cc.0 {
                        return Some(stringify!($c));
                    }
                )*
                None
            }

            /// The C value.
            #[inline(always)]
            pub const fn to_raw(self) -> ffi::$raw {
                ffi::$raw(self.0)
            }

            /// From the C value (any value, known or not).
            #[inline(always)]
            pub const fn from_raw(raw: ffi::$raw) -> $name {
                $name(raw.0)
            }
        }

        impl From<ffi::$raw> for $name {
            #[inline(always)]
            fn from(raw: ffi::$raw) -> $name {
                $name(raw.0)
            }
        }

        impl From<$name> for ffi::$raw {
            #[inline(always)]
            fn from(v: $name) -> ffi::$raw {
                ffi::$raw(v.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!("unknown ", stringify!($name), " {}"), self.0),
                }
            }
        }
    };
}

/// A C flag set as a newtype with named flags (bitflags-style).
macro_rules! c_flags {
    ($(#[$m:meta])* $name:ident = ffi::$raw:ident { $($c:ident = $cc:ident,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[repr(transparent)]
        pub struct $name(pub u32);

        impl $name {
            $(
                #[doc = concat!("`", stringify!($cc), "`")]
                pub const $c: $name = $name(ffi::$raw::$cc.0);
            )*

            const NAMED: &'static [(&'static str, u32)] = &[$((stringify!($c), ffi::$raw::$cc.0)),*];

            /// No flag.
            #[inline(always)]
            pub const fn empty() -> $name {
                $name(0)
            }

            /// Every flag this build names.
            pub const fn all() -> $name {
                $name(0 $(| ffi::$raw::$cc.0)*)
            }

            /// The bits.
            #[inline(always)]
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// From bits, unknown ones kept.
            #[inline(always)]
            pub const fn from_bits_retain(bits: u32) -> $name {
                $name(bits)
            }

            /// Whether no flag is set.
            #[inline(always)]
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// Whether every flag of `other` is set.
            #[inline(always)]
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any flag of `other` is set.
            #[inline(always)]
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// `self` without the flags of `other`.
            #[inline(always)]
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }

            /// The C value.
            #[inline(always)]
            pub const fn to_raw(self) -> ffi::$raw {
                ffi::$raw(self.0)
            }
        }

        impl From<ffi::$raw> for $name {
            #[inline(always)]
            fn from(raw: ffi::$raw) -> $name {
                $name(raw.0)
            }
        }

        impl From<$name> for ffi::$raw {
            #[inline(always)]
            fn from(v: $name) -> ffi::$raw {
                ffi::$raw(v.0)
            }
        }

        impl std::ops::BitOr for $name {
            type Output = $name;
            #[inline(always)]
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl std::ops::BitOrAssign for $name {
            #[inline(always)]
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }

        impl std::ops::BitAnd for $name {
            type Output = $name;
            #[inline(always)]
            fn bitand(self, rhs: $name) -> $name {
                $name(self.0 & rhs.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_flags(f, self.0, Self::NAMED)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_flags(f, self.0, Self::NAMED)
            }
        }
    };
}

/// `A | B | 0x100`, or `(empty)`.
fn write_flags(f: &mut fmt::Formatter<'_>, bits: u32, named: &[(&str, u32)]) -> fmt::Result {
    if bits == 0 {
        return f.write_str("(empty)");
    }
    let mut rest = bits;
    let mut first = true;
    for &(name, bit) in named {
        if bit != 0 && rest & bit == bit {
            if !first {
                f.write_str(" | ")?;
            }
            f.write_str(name)?;
            rest &= !bit;
            first = false;
        }
    }
    if rest != 0 {
        if !first {
            f.write_str(" | ")?;
        }
        write!(f, "{rest:#x}")?;
    }
    Ok(())
}

c_values! {
    /// Completion status (`enum ibv_wc_status`).
    WcStatus = ffi::ibv_wc_status {
        SUCCESS = IBV_WC_SUCCESS,
        LOC_LEN_ERR = IBV_WC_LOC_LEN_ERR,
        LOC_QP_OP_ERR = IBV_WC_LOC_QP_OP_ERR,
        LOC_EEC_OP_ERR = IBV_WC_LOC_EEC_OP_ERR,
        LOC_PROT_ERR = IBV_WC_LOC_PROT_ERR,
        WR_FLUSH_ERR = IBV_WC_WR_FLUSH_ERR,
        MW_BIND_ERR = IBV_WC_MW_BIND_ERR,
        BAD_RESP_ERR = IBV_WC_BAD_RESP_ERR,
        LOC_ACCESS_ERR = IBV_WC_LOC_ACCESS_ERR,
        REM_INV_REQ_ERR = IBV_WC_REM_INV_REQ_ERR,
        REM_ACCESS_ERR = IBV_WC_REM_ACCESS_ERR,
        REM_OP_ERR = IBV_WC_REM_OP_ERR,
        RETRY_EXC_ERR = IBV_WC_RETRY_EXC_ERR,
        RNR_RETRY_EXC_ERR = IBV_WC_RNR_RETRY_EXC_ERR,
        LOC_RDD_VIOL_ERR = IBV_WC_LOC_RDD_VIOL_ERR,
        REM_INV_RD_REQ_ERR = IBV_WC_REM_INV_RD_REQ_ERR,
        REM_ABORT_ERR = IBV_WC_REM_ABORT_ERR,
        INV_EECN_ERR = IBV_WC_INV_EECN_ERR,
        INV_EEC_STATE_ERR = IBV_WC_INV_EEC_STATE_ERR,
        FATAL_ERR = IBV_WC_FATAL_ERR,
        RESP_TIMEOUT_ERR = IBV_WC_RESP_TIMEOUT_ERR,
        GENERAL_ERR = IBV_WC_GENERAL_ERR,
        TM_ERR = IBV_WC_TM_ERR,
        TM_RNDV_INCOMPLETE = IBV_WC_TM_RNDV_INCOMPLETE,
    }
}

c_values! {
    /// Completion opcode (`enum ibv_wc_opcode`).
    WcOpcode = ffi::ibv_wc_opcode {
        SEND = IBV_WC_SEND,
        RDMA_WRITE = IBV_WC_RDMA_WRITE,
        RDMA_READ = IBV_WC_RDMA_READ,
        COMP_SWAP = IBV_WC_COMP_SWAP,
        FETCH_ADD = IBV_WC_FETCH_ADD,
        BIND_MW = IBV_WC_BIND_MW,
        LOCAL_INV = IBV_WC_LOCAL_INV,
        TSO = IBV_WC_TSO,
        ATOMIC_WRITE = IBV_WC_ATOMIC_WRITE,
        RECV = IBV_WC_RECV,
        RECV_RDMA_WITH_IMM = IBV_WC_RECV_RDMA_WITH_IMM,
        TM_ADD = IBV_WC_TM_ADD,
        TM_DEL = IBV_WC_TM_DEL,
        TM_SYNC = IBV_WC_TM_SYNC,
        TM_RECV = IBV_WC_TM_RECV,
        TM_NO_TAG = IBV_WC_TM_NO_TAG,
        DRIVER1 = IBV_WC_DRIVER1,
        DRIVER2 = IBV_WC_DRIVER2,
        DRIVER3 = IBV_WC_DRIVER3,
    }
}

c_values! {
    /// Work-request opcode (`enum ibv_wr_opcode`).
    WrOpcode = ffi::ibv_wr_opcode {
        RDMA_WRITE = IBV_WR_RDMA_WRITE,
        RDMA_WRITE_WITH_IMM = IBV_WR_RDMA_WRITE_WITH_IMM,
        SEND = IBV_WR_SEND,
        SEND_WITH_IMM = IBV_WR_SEND_WITH_IMM,
        RDMA_READ = IBV_WR_RDMA_READ,
        ATOMIC_CMP_AND_SWP = IBV_WR_ATOMIC_CMP_AND_SWP,
        ATOMIC_FETCH_AND_ADD = IBV_WR_ATOMIC_FETCH_AND_ADD,
        LOCAL_INV = IBV_WR_LOCAL_INV,
        BIND_MW = IBV_WR_BIND_MW,
        SEND_WITH_INV = IBV_WR_SEND_WITH_INV,
        TSO = IBV_WR_TSO,
        DRIVER1 = IBV_WR_DRIVER1,
        ATOMIC_WRITE = IBV_WR_ATOMIC_WRITE,
    }
}

c_values! {
    /// QP transport type (`enum ibv_qp_type`).
    QpType = ffi::ibv_qp_type {
        RC = IBV_QPT_RC,
        UC = IBV_QPT_UC,
        UD = IBV_QPT_UD,
        RAW_PACKET = IBV_QPT_RAW_PACKET,
        XRC_SEND = IBV_QPT_XRC_SEND,
        XRC_RECV = IBV_QPT_XRC_RECV,
        DRIVER = IBV_QPT_DRIVER,
    }
}

c_values! {
    /// QP state (`enum ibv_qp_state`).
    QpState = ffi::ibv_qp_state {
        RESET = IBV_QPS_RESET,
        INIT = IBV_QPS_INIT,
        RTR = IBV_QPS_RTR,
        RTS = IBV_QPS_RTS,
        SQD = IBV_QPS_SQD,
        SQE = IBV_QPS_SQE,
        ERR = IBV_QPS_ERR,
        UNKNOWN = IBV_QPS_UNKNOWN,
    }
}

c_values! {
    /// Path MTU (`enum ibv_mtu`).
    Mtu = ffi::ibv_mtu {
        MTU_256 = IBV_MTU_256,
        MTU_512 = IBV_MTU_512,
        MTU_1024 = IBV_MTU_1024,
        MTU_2048 = IBV_MTU_2048,
        MTU_4096 = IBV_MTU_4096,
    }
}

c_values! {
    /// Port state (`enum ibv_port_state`).
    PortState = ffi::ibv_port_state {
        NOP = IBV_PORT_NOP,
        DOWN = IBV_PORT_DOWN,
        INIT = IBV_PORT_INIT,
        ARMED = IBV_PORT_ARMED,
        ACTIVE = IBV_PORT_ACTIVE,
        ACTIVE_DEFER = IBV_PORT_ACTIVE_DEFER,
    }
}

c_values! {
    /// Asynchronous event type (`enum ibv_event_type`).
    EventType = ffi::ibv_event_type {
        CQ_ERR = IBV_EVENT_CQ_ERR,
        QP_FATAL = IBV_EVENT_QP_FATAL,
        QP_REQ_ERR = IBV_EVENT_QP_REQ_ERR,
        QP_ACCESS_ERR = IBV_EVENT_QP_ACCESS_ERR,
        COMM_EST = IBV_EVENT_COMM_EST,
        SQ_DRAINED = IBV_EVENT_SQ_DRAINED,
        PATH_MIG = IBV_EVENT_PATH_MIG,
        PATH_MIG_ERR = IBV_EVENT_PATH_MIG_ERR,
        DEVICE_FATAL = IBV_EVENT_DEVICE_FATAL,
        PORT_ACTIVE = IBV_EVENT_PORT_ACTIVE,
        PORT_ERR = IBV_EVENT_PORT_ERR,
        LID_CHANGE = IBV_EVENT_LID_CHANGE,
        PKEY_CHANGE = IBV_EVENT_PKEY_CHANGE,
        SM_CHANGE = IBV_EVENT_SM_CHANGE,
        SRQ_ERR = IBV_EVENT_SRQ_ERR,
        SRQ_LIMIT_REACHED = IBV_EVENT_SRQ_LIMIT_REACHED,
        QP_LAST_WQE_REACHED = IBV_EVENT_QP_LAST_WQE_REACHED,
        CLIENT_REREGISTER = IBV_EVENT_CLIENT_REREGISTER,
        GID_CHANGE = IBV_EVENT_GID_CHANGE,
        WQ_FATAL = IBV_EVENT_WQ_FATAL,
    }
}

c_values! {
    /// Memory window type (`enum ibv_mw_type`).
    MwType = ffi::ibv_mw_type {
        TYPE_1 = IBV_MW_TYPE_1,
        TYPE_2 = IBV_MW_TYPE_2,
    }
}

c_values! {
    /// Path migration state (`enum ibv_mig_state`).
    MigState = ffi::ibv_mig_state {
        MIGRATED = IBV_MIG_MIGRATED,
        REARM = IBV_MIG_REARM,
        ARMED = IBV_MIG_ARMED,
    }
}

c_flags! {
    /// Access rights of a memory region, window or QP (`enum ibv_access_flags`).
    AccessFlags = ffi::ibv_access_flags {
        LOCAL_WRITE = IBV_ACCESS_LOCAL_WRITE,
        REMOTE_WRITE = IBV_ACCESS_REMOTE_WRITE,
        REMOTE_READ = IBV_ACCESS_REMOTE_READ,
        REMOTE_ATOMIC = IBV_ACCESS_REMOTE_ATOMIC,
        MW_BIND = IBV_ACCESS_MW_BIND,
        ZERO_BASED = IBV_ACCESS_ZERO_BASED,
        ON_DEMAND = IBV_ACCESS_ON_DEMAND,
        HUGETLB = IBV_ACCESS_HUGETLB,
        RELAXED_ORDERING = IBV_ACCESS_RELAXED_ORDERING,
    }
}

c_flags! {
    /// Send flags of a work request (`enum ibv_send_flags`).
    SendFlags = ffi::ibv_send_flags {
        FENCE = IBV_SEND_FENCE,
        SIGNALED = IBV_SEND_SIGNALED,
        SOLICITED = IBV_SEND_SOLICITED,
        INLINE = IBV_SEND_INLINE,
        IP_CSUM = IBV_SEND_IP_CSUM,
    }
}

c_flags! {
    /// Flags of a completion (`enum ibv_wc_flags`).
    WcFlags = ffi::ibv_wc_flags {
        GRH = IBV_WC_GRH,
        WITH_IMM = IBV_WC_WITH_IMM,
        IP_CSUM_OK = IBV_WC_IP_CSUM_OK,
        WITH_INV = IBV_WC_WITH_INV,
        TM_SYNC_REQ = IBV_WC_TM_SYNC_REQ,
        TM_MATCH = IBV_WC_TM_MATCH,
        TM_DATA_VALID = IBV_WC_TM_DATA_VALID,
    }
}

impl Mtu {
    /// The MTU in bytes (256 to 4096); 0 for a value this build does not know.
    pub const fn bytes(self) -> u32 {
        match self.0 {
            1..=5 => 128 << self.0,
            _ => 0,
        }
    }

    /// The MTU of `bytes` (256, 512, 1024, 2048 or 4096), `None` otherwise.
    pub const fn from_bytes(bytes: u32) -> Option<Mtu> {
        match bytes {
            256 => Some(Mtu::MTU_256),
            512 => Some(Mtu::MTU_512),
            1024 => Some(Mtu::MTU_1024),
            2048 => Some(Mtu::MTU_2048),
            4096 => Some(Mtu::MTU_4096),
            _ => None,
        }
    }
}

impl WcStatus {
    /// Whether this is `SUCCESS`.
    #[inline(always)]
    pub const fn is_success(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_their_names_and_unknown_ones_their_number() {
        assert_eq!(format!("{:?}", WcStatus::REM_ACCESS_ERR), "REM_ACCESS_ERR");
        assert_eq!(WcStatus::RETRY_EXC_ERR.to_string(), "RETRY_EXC_ERR");
        assert_eq!(format!("{:?}", WcStatus(1000)), "WcStatus(1000)");
        assert_eq!(WcStatus(1000).to_string(), "unknown WcStatus 1000");
        assert_eq!(WcStatus(1000).name(), None);
        assert_eq!(format!("{:?}", WcOpcode::RECV_RDMA_WITH_IMM), "RECV_RDMA_WITH_IMM");
        assert_eq!(format!("{:?}", QpState::RTS), "RTS");
        assert_eq!(format!("{:?}", QpType::UD), "UD");
        assert_eq!(format!("{:?}", Mtu::MTU_4096), "MTU_4096");
        assert_eq!(EventType::PORT_ERR.to_string(), "PORT_ERR");
        assert_eq!(WcStatus::from(ffi::ibv_wc_status::IBV_WC_REM_ACCESS_ERR), WcStatus::REM_ACCESS_ERR);
        assert_eq!(ffi::ibv_qp_state::from(QpState::RTR), ffi::ibv_qp_state::IBV_QPS_RTR);
    }

    #[test]
    fn flags_print_as_a_set() {
        let a = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        assert_eq!(format!("{a:?}"), "LOCAL_WRITE | REMOTE_WRITE");
        assert_eq!(format!("{:?}", AccessFlags::empty()), "(empty)");
        assert_eq!(format!("{:?}", AccessFlags(0x1 | 0x4000_0000)), "LOCAL_WRITE | 0x40000000");
        assert_eq!(format!("{}", SendFlags::SIGNALED | SendFlags::INLINE), "SIGNALED | INLINE");
        assert!(a.contains(AccessFlags::REMOTE_WRITE) && !a.contains(AccessFlags::REMOTE_READ));
        assert!(a.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ));
        assert_eq!(a.difference(AccessFlags::LOCAL_WRITE), AccessFlags::REMOTE_WRITE);
        assert_eq!(AccessFlags::all().bits() & 0x10_0000, 0x10_0000);
    }

    #[test]
    fn mtu_bytes() {
        for (m, b) in [(Mtu::MTU_256, 256), (Mtu::MTU_1024, 1024), (Mtu::MTU_4096, 4096)] {
            assert_eq!(m.bytes(), b);
            assert_eq!(Mtu::from_bytes(b), Some(m));
        }
        assert_eq!(Mtu(9).bytes(), 0);
        assert_eq!(Mtu::from_bytes(1500), None);
    }
}
