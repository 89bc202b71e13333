//! Rust names for the values and flag sets of the verbs API.
//!
//! Each C enum is a `#[repr(transparent)]` newtype over its integer, with the
//! C constants as Rust-named associated constants (`WcStatus::REM_ACCESS_ERR`
//! for `IBV_WC_REM_ACCESS_ERR`). `Debug` and `Display` print the name; a
//! value this build does not know (a newer provider's) is kept as it is and
//! printed as `WcStatus(99)`, never a panic. Flag sets print as `A | B`. The C
//! types stay in [`crate::bindings`]; `From` converts both ways at no cost,
//! `from_raw`/`to_raw` (values) and `from_bits_retain`/`bits` (flag sets)
//! take and give the integer. All are made by one macro (`prim::cvalue`).
//!
//! ```
//! use rrddmma::prim::{AccessFlags, WcStatus};
//! let a = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ;
//! assert_eq!(format!("{a:?}"), "LOCAL_WRITE | REMOTE_READ");
//! assert!(a.contains(AccessFlags::REMOTE_READ));
//! assert_eq!(WcStatus::REM_ACCESS_ERR.to_string(), "REM_ACCESS_ERR");
//! assert_eq!(format!("{:?}", WcStatus::from_raw(99)), "WcStatus(99)");
//! ```

use crate::bindings as ffi;
use crate::prim::cvalue::c_type;

c_type! {
    /// Completion status (`enum ibv_wc_status`).
    #[doc(alias = "ibv_wc_status")]
    pub value WcStatus: u32, from enum ffi::ibv_wc_status {
        SUCCESS = IBV_WC_SUCCESS "IBV_WC_SUCCESS",
        LOC_LEN_ERR = IBV_WC_LOC_LEN_ERR "IBV_WC_LOC_LEN_ERR",
        LOC_QP_OP_ERR = IBV_WC_LOC_QP_OP_ERR "IBV_WC_LOC_QP_OP_ERR",
        LOC_EEC_OP_ERR = IBV_WC_LOC_EEC_OP_ERR "IBV_WC_LOC_EEC_OP_ERR",
        LOC_PROT_ERR = IBV_WC_LOC_PROT_ERR "IBV_WC_LOC_PROT_ERR",
        WR_FLUSH_ERR = IBV_WC_WR_FLUSH_ERR "IBV_WC_WR_FLUSH_ERR",
        MW_BIND_ERR = IBV_WC_MW_BIND_ERR "IBV_WC_MW_BIND_ERR",
        BAD_RESP_ERR = IBV_WC_BAD_RESP_ERR "IBV_WC_BAD_RESP_ERR",
        LOC_ACCESS_ERR = IBV_WC_LOC_ACCESS_ERR "IBV_WC_LOC_ACCESS_ERR",
        REM_INV_REQ_ERR = IBV_WC_REM_INV_REQ_ERR "IBV_WC_REM_INV_REQ_ERR",
        REM_ACCESS_ERR = IBV_WC_REM_ACCESS_ERR "IBV_WC_REM_ACCESS_ERR",
        REM_OP_ERR = IBV_WC_REM_OP_ERR "IBV_WC_REM_OP_ERR",
        RETRY_EXC_ERR = IBV_WC_RETRY_EXC_ERR "IBV_WC_RETRY_EXC_ERR",
        RNR_RETRY_EXC_ERR = IBV_WC_RNR_RETRY_EXC_ERR "IBV_WC_RNR_RETRY_EXC_ERR",
        LOC_RDD_VIOL_ERR = IBV_WC_LOC_RDD_VIOL_ERR "IBV_WC_LOC_RDD_VIOL_ERR",
        REM_INV_RD_REQ_ERR = IBV_WC_REM_INV_RD_REQ_ERR "IBV_WC_REM_INV_RD_REQ_ERR",
        REM_ABORT_ERR = IBV_WC_REM_ABORT_ERR "IBV_WC_REM_ABORT_ERR",
        INV_EECN_ERR = IBV_WC_INV_EECN_ERR "IBV_WC_INV_EECN_ERR",
        INV_EEC_STATE_ERR = IBV_WC_INV_EEC_STATE_ERR "IBV_WC_INV_EEC_STATE_ERR",
        FATAL_ERR = IBV_WC_FATAL_ERR "IBV_WC_FATAL_ERR",
        RESP_TIMEOUT_ERR = IBV_WC_RESP_TIMEOUT_ERR "IBV_WC_RESP_TIMEOUT_ERR",
        GENERAL_ERR = IBV_WC_GENERAL_ERR "IBV_WC_GENERAL_ERR",
        TM_ERR = IBV_WC_TM_ERR "IBV_WC_TM_ERR",
        TM_RNDV_INCOMPLETE = IBV_WC_TM_RNDV_INCOMPLETE "IBV_WC_TM_RNDV_INCOMPLETE",
    }
}

c_type! {
    /// Completion opcode (`enum ibv_wc_opcode`).
    #[doc(alias = "ibv_wc_opcode")]
    pub value WcOpcode: u32, from enum ffi::ibv_wc_opcode {
        SEND = IBV_WC_SEND "IBV_WC_SEND",
        RDMA_WRITE = IBV_WC_RDMA_WRITE "IBV_WC_RDMA_WRITE",
        RDMA_READ = IBV_WC_RDMA_READ "IBV_WC_RDMA_READ",
        COMP_SWAP = IBV_WC_COMP_SWAP "IBV_WC_COMP_SWAP",
        FETCH_ADD = IBV_WC_FETCH_ADD "IBV_WC_FETCH_ADD",
        BIND_MW = IBV_WC_BIND_MW "IBV_WC_BIND_MW",
        LOCAL_INV = IBV_WC_LOCAL_INV "IBV_WC_LOCAL_INV",
        TSO = IBV_WC_TSO "IBV_WC_TSO",
        FLUSH = IBV_WC_FLUSH "IBV_WC_FLUSH",
        ATOMIC_WRITE = IBV_WC_ATOMIC_WRITE "IBV_WC_ATOMIC_WRITE",
        RECV = IBV_WC_RECV "IBV_WC_RECV",
        RECV_RDMA_WITH_IMM = IBV_WC_RECV_RDMA_WITH_IMM "IBV_WC_RECV_RDMA_WITH_IMM",
        TM_ADD = IBV_WC_TM_ADD "IBV_WC_TM_ADD",
        TM_DEL = IBV_WC_TM_DEL "IBV_WC_TM_DEL",
        TM_SYNC = IBV_WC_TM_SYNC "IBV_WC_TM_SYNC",
        TM_RECV = IBV_WC_TM_RECV "IBV_WC_TM_RECV",
        TM_NO_TAG = IBV_WC_TM_NO_TAG "IBV_WC_TM_NO_TAG",
        DRIVER1 = IBV_WC_DRIVER1 "IBV_WC_DRIVER1",
        DRIVER2 = IBV_WC_DRIVER2 "IBV_WC_DRIVER2",
        DRIVER3 = IBV_WC_DRIVER3 "IBV_WC_DRIVER3",
    }
}

c_type! {
    /// Work-request opcode (`enum ibv_wr_opcode`).
    #[doc(alias = "ibv_wr_opcode")]
    pub value WrOpcode: u32, from enum ffi::ibv_wr_opcode {
        RDMA_WRITE = IBV_WR_RDMA_WRITE "IBV_WR_RDMA_WRITE",
        RDMA_WRITE_WITH_IMM = IBV_WR_RDMA_WRITE_WITH_IMM "IBV_WR_RDMA_WRITE_WITH_IMM",
        SEND = IBV_WR_SEND "IBV_WR_SEND",
        SEND_WITH_IMM = IBV_WR_SEND_WITH_IMM "IBV_WR_SEND_WITH_IMM",
        RDMA_READ = IBV_WR_RDMA_READ "IBV_WR_RDMA_READ",
        ATOMIC_CMP_AND_SWP = IBV_WR_ATOMIC_CMP_AND_SWP "IBV_WR_ATOMIC_CMP_AND_SWP",
        ATOMIC_FETCH_AND_ADD = IBV_WR_ATOMIC_FETCH_AND_ADD "IBV_WR_ATOMIC_FETCH_AND_ADD",
        LOCAL_INV = IBV_WR_LOCAL_INV "IBV_WR_LOCAL_INV",
        BIND_MW = IBV_WR_BIND_MW "IBV_WR_BIND_MW",
        SEND_WITH_INV = IBV_WR_SEND_WITH_INV "IBV_WR_SEND_WITH_INV",
        TSO = IBV_WR_TSO "IBV_WR_TSO",
        DRIVER1 = IBV_WR_DRIVER1 "IBV_WR_DRIVER1",
        FLUSH = IBV_WR_FLUSH "IBV_WR_FLUSH",
        ATOMIC_WRITE = IBV_WR_ATOMIC_WRITE "IBV_WR_ATOMIC_WRITE",
    }
}

c_type! {
    /// QP transport type (`enum ibv_qp_type`).
    #[doc(alias = "ibv_qp_type")]
    pub value QpType: u32, from enum ffi::ibv_qp_type {
        RC = IBV_QPT_RC "IBV_QPT_RC",
        UC = IBV_QPT_UC "IBV_QPT_UC",
        UD = IBV_QPT_UD "IBV_QPT_UD",
        RAW_PACKET = IBV_QPT_RAW_PACKET "IBV_QPT_RAW_PACKET",
        XRC_SEND = IBV_QPT_XRC_SEND "IBV_QPT_XRC_SEND",
        XRC_RECV = IBV_QPT_XRC_RECV "IBV_QPT_XRC_RECV",
        DRIVER = IBV_QPT_DRIVER "IBV_QPT_DRIVER",
    }
}

c_type! {
    /// QP state (`enum ibv_qp_state`).
    #[doc(alias = "ibv_qp_state")]
    pub value QpState: u32, from enum ffi::ibv_qp_state {
        RESET = IBV_QPS_RESET "IBV_QPS_RESET",
        INIT = IBV_QPS_INIT "IBV_QPS_INIT",
        RTR = IBV_QPS_RTR "IBV_QPS_RTR",
        RTS = IBV_QPS_RTS "IBV_QPS_RTS",
        SQD = IBV_QPS_SQD "IBV_QPS_SQD",
        SQE = IBV_QPS_SQE "IBV_QPS_SQE",
        ERR = IBV_QPS_ERR "IBV_QPS_ERR",
        UNKNOWN = IBV_QPS_UNKNOWN "IBV_QPS_UNKNOWN",
    }
}

c_type! {
    /// Path MTU (`enum ibv_mtu`).
    #[doc(alias = "ibv_mtu")]
    pub value Mtu: u32, from enum ffi::ibv_mtu {
        MTU_256 = IBV_MTU_256 "IBV_MTU_256",
        MTU_512 = IBV_MTU_512 "IBV_MTU_512",
        MTU_1024 = IBV_MTU_1024 "IBV_MTU_1024",
        MTU_2048 = IBV_MTU_2048 "IBV_MTU_2048",
        MTU_4096 = IBV_MTU_4096 "IBV_MTU_4096",
    }
}

c_type! {
    /// Port state (`enum ibv_port_state`).
    #[doc(alias = "ibv_port_state")]
    pub value PortState: u32, from enum ffi::ibv_port_state {
        NOP = IBV_PORT_NOP "IBV_PORT_NOP",
        DOWN = IBV_PORT_DOWN "IBV_PORT_DOWN",
        INIT = IBV_PORT_INIT "IBV_PORT_INIT",
        ARMED = IBV_PORT_ARMED "IBV_PORT_ARMED",
        ACTIVE = IBV_PORT_ACTIVE "IBV_PORT_ACTIVE",
        ACTIVE_DEFER = IBV_PORT_ACTIVE_DEFER "IBV_PORT_ACTIVE_DEFER",
    }
}

c_type! {
    /// Asynchronous event type (`enum ibv_event_type`).
    #[doc(alias = "ibv_event_type")]
    pub value EventType: u32, from enum ffi::ibv_event_type {
        CQ_ERR = IBV_EVENT_CQ_ERR "IBV_EVENT_CQ_ERR",
        QP_FATAL = IBV_EVENT_QP_FATAL "IBV_EVENT_QP_FATAL",
        QP_REQ_ERR = IBV_EVENT_QP_REQ_ERR "IBV_EVENT_QP_REQ_ERR",
        QP_ACCESS_ERR = IBV_EVENT_QP_ACCESS_ERR "IBV_EVENT_QP_ACCESS_ERR",
        COMM_EST = IBV_EVENT_COMM_EST "IBV_EVENT_COMM_EST",
        SQ_DRAINED = IBV_EVENT_SQ_DRAINED "IBV_EVENT_SQ_DRAINED",
        PATH_MIG = IBV_EVENT_PATH_MIG "IBV_EVENT_PATH_MIG",
        PATH_MIG_ERR = IBV_EVENT_PATH_MIG_ERR "IBV_EVENT_PATH_MIG_ERR",
        DEVICE_FATAL = IBV_EVENT_DEVICE_FATAL "IBV_EVENT_DEVICE_FATAL",
        PORT_ACTIVE = IBV_EVENT_PORT_ACTIVE "IBV_EVENT_PORT_ACTIVE",
        PORT_ERR = IBV_EVENT_PORT_ERR "IBV_EVENT_PORT_ERR",
        LID_CHANGE = IBV_EVENT_LID_CHANGE "IBV_EVENT_LID_CHANGE",
        PKEY_CHANGE = IBV_EVENT_PKEY_CHANGE "IBV_EVENT_PKEY_CHANGE",
        SM_CHANGE = IBV_EVENT_SM_CHANGE "IBV_EVENT_SM_CHANGE",
        SRQ_ERR = IBV_EVENT_SRQ_ERR "IBV_EVENT_SRQ_ERR",
        SRQ_LIMIT_REACHED = IBV_EVENT_SRQ_LIMIT_REACHED "IBV_EVENT_SRQ_LIMIT_REACHED",
        QP_LAST_WQE_REACHED = IBV_EVENT_QP_LAST_WQE_REACHED "IBV_EVENT_QP_LAST_WQE_REACHED",
        CLIENT_REREGISTER = IBV_EVENT_CLIENT_REREGISTER "IBV_EVENT_CLIENT_REREGISTER",
        GID_CHANGE = IBV_EVENT_GID_CHANGE "IBV_EVENT_GID_CHANGE",
        WQ_FATAL = IBV_EVENT_WQ_FATAL "IBV_EVENT_WQ_FATAL",
    }
}

c_type! {
    /// Memory window type (`enum ibv_mw_type`).
    #[doc(alias = "ibv_mw_type")]
    pub value MwType: u32, from enum ffi::ibv_mw_type {
        TYPE_1 = IBV_MW_TYPE_1 "IBV_MW_TYPE_1",
        TYPE_2 = IBV_MW_TYPE_2 "IBV_MW_TYPE_2",
    }
}

c_type! {
    /// Path migration state (`enum ibv_mig_state`).
    #[doc(alias = "ibv_mig_state")]
    pub value MigState: u32, from enum ffi::ibv_mig_state {
        MIGRATED = IBV_MIG_MIGRATED "IBV_MIG_MIGRATED",
        REARM = IBV_MIG_REARM "IBV_MIG_REARM",
        ARMED = IBV_MIG_ARMED "IBV_MIG_ARMED",
    }
}

c_type! {
    /// Access rights of a memory region, window or QP (`enum ibv_access_flags`).
    #[doc(alias = "ibv_access_flags")]
    pub flags AccessFlags: u32, from enum ffi::ibv_access_flags {
        LOCAL_WRITE = IBV_ACCESS_LOCAL_WRITE "IBV_ACCESS_LOCAL_WRITE",
        REMOTE_WRITE = IBV_ACCESS_REMOTE_WRITE "IBV_ACCESS_REMOTE_WRITE",
        REMOTE_READ = IBV_ACCESS_REMOTE_READ "IBV_ACCESS_REMOTE_READ",
        REMOTE_ATOMIC = IBV_ACCESS_REMOTE_ATOMIC "IBV_ACCESS_REMOTE_ATOMIC",
        MW_BIND = IBV_ACCESS_MW_BIND "IBV_ACCESS_MW_BIND",
        ZERO_BASED = IBV_ACCESS_ZERO_BASED "IBV_ACCESS_ZERO_BASED",
        ON_DEMAND = IBV_ACCESS_ON_DEMAND "IBV_ACCESS_ON_DEMAND",
        HUGETLB = IBV_ACCESS_HUGETLB "IBV_ACCESS_HUGETLB",
        RELAXED_ORDERING = IBV_ACCESS_RELAXED_ORDERING "IBV_ACCESS_RELAXED_ORDERING",
        FLUSH_GLOBAL = IBV_ACCESS_FLUSH_GLOBAL "IBV_ACCESS_FLUSH_GLOBAL",
        FLUSH_PERSISTENT = IBV_ACCESS_FLUSH_PERSISTENT "IBV_ACCESS_FLUSH_PERSISTENT",
    }
}

c_type! {
    /// Send flags of a work request (`enum ibv_send_flags`).
    #[doc(alias = "ibv_send_flags")]
    pub flags SendFlags: u32, from enum ffi::ibv_send_flags {
        FENCE = IBV_SEND_FENCE "IBV_SEND_FENCE",
        SIGNALED = IBV_SEND_SIGNALED "IBV_SEND_SIGNALED",
        SOLICITED = IBV_SEND_SOLICITED "IBV_SEND_SOLICITED",
        INLINE = IBV_SEND_INLINE "IBV_SEND_INLINE",
        IP_CSUM = IBV_SEND_IP_CSUM "IBV_SEND_IP_CSUM",
    }
}

c_type! {
    /// Flags of a completion (`enum ibv_wc_flags`).
    #[doc(alias = "ibv_wc_flags")]
    pub flags WcFlags: u32, from enum ffi::ibv_wc_flags {
        GRH = IBV_WC_GRH "IBV_WC_GRH",
        WITH_IMM = IBV_WC_WITH_IMM "IBV_WC_WITH_IMM",
        IP_CSUM_OK = IBV_WC_IP_CSUM_OK "IBV_WC_IP_CSUM_OK",
        WITH_INV = IBV_WC_WITH_INV "IBV_WC_WITH_INV",
        TM_SYNC_REQ = IBV_WC_TM_SYNC_REQ "IBV_WC_TM_SYNC_REQ",
        TM_MATCH = IBV_WC_TM_MATCH "IBV_WC_TM_MATCH",
        TM_DATA_VALID = IBV_WC_TM_DATA_VALID "IBV_WC_TM_DATA_VALID",
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
        let unknown = WcStatus::from_raw(1000);
        assert_eq!(format!("{unknown:?}"), "WcStatus(1000)");
        assert_eq!(unknown.to_string(), "WcStatus(1000)");
        assert_eq!((unknown.name(), unknown.to_raw()), (None, 1000));
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
        assert_eq!(format!("{:?}", AccessFlags::from_bits_retain(0x1 | 0x4000_0000)), "LOCAL_WRITE | 0x40000000");
        assert_eq!(format!("{}", SendFlags::SIGNALED | SendFlags::INLINE), "SIGNALED | INLINE");
        assert!(a.contains(AccessFlags::REMOTE_WRITE) && !a.contains(AccessFlags::REMOTE_READ));
        assert!(a.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ));
        assert_eq!(a.difference(AccessFlags::LOCAL_WRITE), AccessFlags::REMOTE_WRITE);
        assert_eq!(AccessFlags::all().bits() & 0x10_0000, 0x10_0000);
        assert_eq!(a - AccessFlags::LOCAL_WRITE, AccessFlags::REMOTE_WRITE);
        assert_eq!(a & AccessFlags::LOCAL_WRITE, AccessFlags::LOCAL_WRITE);
        let mut b = a;
        b -= AccessFlags::REMOTE_WRITE;
        assert_eq!(b, AccessFlags::LOCAL_WRITE);
        b |= AccessFlags::REMOTE_ATOMIC;
        b &= AccessFlags::REMOTE_ATOMIC | AccessFlags::MW_BIND;
        assert_eq!((b, b.bits()), (AccessFlags::REMOTE_ATOMIC, ffi::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0));
        assert!(AccessFlags::empty().is_empty() && !b.is_empty());
        assert!(!b.intersects(AccessFlags::MW_BIND));
        assert_eq!(AccessFlags::default(), AccessFlags::empty());
    }

    #[test]
    fn mtu_bytes() {
        for (m, b) in [(Mtu::MTU_256, 256), (Mtu::MTU_1024, 1024), (Mtu::MTU_4096, 4096)] {
            assert_eq!(m.bytes(), b);
            assert_eq!(Mtu::from_bytes(b), Some(m));
        }
        assert_eq!(Mtu::from_raw(9).bytes(), 0);
        assert_eq!(Mtu::from_bytes(1500), None);
    }
}
