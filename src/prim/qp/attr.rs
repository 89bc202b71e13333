//! QP attributes for `ibv_modify_qp`, with the mask kept in step.

use std::fmt;

use super::super::ah::AhAttr;
use crate::bindings as ffi;
use crate::prim::cvalue::c_type;
use crate::prim::{AccessFlags, MigState, Mtu, QpState};

c_type! {
    /// A set of QP attributes (`enum ibv_qp_attr_mask`, `IBV_QP_*` mask bits).
    ///
    /// Prints by Rust name (`STATE | PORT`); [`AttrMask::field_names`] gives
    /// the `struct ibv_qp_attr` field names (`path_mtu`) for messages.
    #[doc(alias = "ibv_qp_attr_mask")]
    pub flags AttrMask: u32, from enum ffi::ibv_qp_attr_mask {
        STATE = IBV_QP_STATE "IBV_QP_STATE",
        CUR_STATE = IBV_QP_CUR_STATE "IBV_QP_CUR_STATE",
        EN_SQD_ASYNC_NOTIFY = IBV_QP_EN_SQD_ASYNC_NOTIFY "IBV_QP_EN_SQD_ASYNC_NOTIFY",
        ACCESS_FLAGS = IBV_QP_ACCESS_FLAGS "IBV_QP_ACCESS_FLAGS",
        PKEY_INDEX = IBV_QP_PKEY_INDEX "IBV_QP_PKEY_INDEX",
        PORT = IBV_QP_PORT "IBV_QP_PORT",
        QKEY = IBV_QP_QKEY "IBV_QP_QKEY",
        AV = IBV_QP_AV "IBV_QP_AV",
        PATH_MTU = IBV_QP_PATH_MTU "IBV_QP_PATH_MTU",
        TIMEOUT = IBV_QP_TIMEOUT "IBV_QP_TIMEOUT",
        RETRY_CNT = IBV_QP_RETRY_CNT "IBV_QP_RETRY_CNT",
        RNR_RETRY = IBV_QP_RNR_RETRY "IBV_QP_RNR_RETRY",
        RQ_PSN = IBV_QP_RQ_PSN "IBV_QP_RQ_PSN",
        MAX_QP_RD_ATOMIC = IBV_QP_MAX_QP_RD_ATOMIC "IBV_QP_MAX_QP_RD_ATOMIC",
        ALT_PATH = IBV_QP_ALT_PATH "IBV_QP_ALT_PATH",
        MIN_RNR_TIMER = IBV_QP_MIN_RNR_TIMER "IBV_QP_MIN_RNR_TIMER",
        SQ_PSN = IBV_QP_SQ_PSN "IBV_QP_SQ_PSN",
        MAX_DEST_RD_ATOMIC = IBV_QP_MAX_DEST_RD_ATOMIC "IBV_QP_MAX_DEST_RD_ATOMIC",
        PATH_MIG_STATE = IBV_QP_PATH_MIG_STATE "IBV_QP_PATH_MIG_STATE",
        CAP = IBV_QP_CAP "IBV_QP_CAP",
        DEST_QPN = IBV_QP_DEST_QPN "IBV_QP_DEST_QPN",
        RATE_LIMIT = IBV_QP_RATE_LIMIT "IBV_QP_RATE_LIMIT",
    }
}

/// Each named attribute with its `struct ibv_qp_attr` field name, in mask order.
const FIELDS: &[(AttrMask, &str)] = &[
    (AttrMask::STATE, "state"),
    (AttrMask::CUR_STATE, "cur_state"),
    (AttrMask::EN_SQD_ASYNC_NOTIFY, "en_sqd_async_notify"),
    (AttrMask::ACCESS_FLAGS, "access_flags"),
    (AttrMask::PKEY_INDEX, "pkey_index"),
    (AttrMask::PORT, "port"),
    (AttrMask::QKEY, "qkey"),
    (AttrMask::AV, "av"),
    (AttrMask::PATH_MTU, "path_mtu"),
    (AttrMask::TIMEOUT, "timeout"),
    (AttrMask::RETRY_CNT, "retry_cnt"),
    (AttrMask::RNR_RETRY, "rnr_retry"),
    (AttrMask::RQ_PSN, "rq_psn"),
    (AttrMask::MAX_QP_RD_ATOMIC, "max_rd_atomic"),
    (AttrMask::ALT_PATH, "alt_path"),
    (AttrMask::MIN_RNR_TIMER, "min_rnr_timer"),
    (AttrMask::SQ_PSN, "sq_psn"),
    (AttrMask::MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic"),
    (AttrMask::PATH_MIG_STATE, "path_mig_state"),
    (AttrMask::CAP, "cap"),
    (AttrMask::DEST_QPN, "dest_qpn"),
    (AttrMask::RATE_LIMIT, "rate_limit"),
];

impl AttrMask {
    /// The `struct ibv_qp_attr` field names of the attributes set, for
    /// messages: `av, dest_qpn`; unknown bits as hex.
    pub fn field_names(self) -> impl fmt::Display {
        FieldNames(self)
    }
}

/// What [`AttrMask::field_names`] returns.
struct FieldNames(AttrMask);

impl fmt::Display for FieldNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        let mut first = true;
        for &(m, name) in FIELDS {
            if rest.contains(m) {
                f.write_str(if first { "" } else { ", " })?;
                f.write_str(name)?;
                rest -= m;
                first = false;
            }
        }
        if !rest.is_empty() {
            f.write_str(if first { "" } else { ", " })?;
            write!(f, "{:#x}", rest.bits())?;
        }
        Ok(())
    }
}

/// Attributes for [`super::Qp::modify`]: each setter sets the value and its mask bit.
///
/// ```
/// use rrddmma::prim::{AttrMask, QpAttr, QpState};
/// let a = QpAttr::new(QpState::INIT).pkey_index(0).port(1).qkey(0x1111);
/// assert_eq!(a.mask(), AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY);
/// ```
#[derive(Clone, Copy)]
pub struct QpAttr {
    raw: ffi::ibv_qp_attr,
    mask: AttrMask,
}

impl fmt::Debug for QpAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QpAttr").field("state", &QpState::from(self.raw.qp_state)).field("mask", &self.mask).finish()
    }
}

impl QpAttr {
    /// Attributes moving the QP to `state`.
    pub fn new(state: QpState) -> QpAttr {
        QpAttr { raw: ffi::ibv_qp_attr { qp_state: state.into(), ..Default::default() }, mask: AttrMask::STATE }
    }

    /// Attributes as C gives them (e.g. `rdma_init_qp_attr`): the raw
    /// struct and its mask. [`super::Qp::modify`] checks them like any other.
    pub fn from_raw(raw: ffi::ibv_qp_attr, mask: AttrMask) -> QpAttr {
        QpAttr { raw, mask }
    }

    /// The attribute mask.
    pub fn mask(&self) -> AttrMask {
        self.mask
    }

    /// The target state.
    pub fn state(&self) -> QpState {
        self.raw.qp_state.into()
    }

    /// The raw attributes.
    pub fn as_raw(&self) -> &ffi::ibv_qp_attr {
        &self.raw
    }

    setters! {
        /// Current state the caller asserts (`IBV_QP_CUR_STATE`).
        cur_state(QpState) => cur_qp_state | CUR_STATE;
        /// P_Key table index.
        pkey_index(u16) => pkey_index | PKEY_INDEX;
        /// Physical port number.
        port(u8) => port_num | PORT;
        /// Q_Key (UD).
        qkey(u32) => qkey | QKEY;
        /// Path MTU.
        path_mtu(Mtu) => path_mtu | PATH_MTU;
        /// Local ACK timeout exponent: 4.096 µs × 2^timeout (0 = infinite).
        timeout(u8) => timeout | TIMEOUT;
        /// Transport retries (0..=7).
        retry_cnt(u8) => retry_cnt | RETRY_CNT;
        /// RNR retries (0..=7, 7 = infinite).
        rnr_retry(u8) => rnr_retry | RNR_RETRY;
        /// Expected first PSN of the receive queue (24 bits).
        rq_psn(u32) => rq_psn | RQ_PSN;
        /// First PSN of the send queue (24 bits).
        sq_psn(u32) => sq_psn | SQ_PSN;
        /// Outstanding RDMA READ / atomics as initiator.
        max_rd_atomic(u8) => max_rd_atomic | MAX_QP_RD_ATOMIC;
        /// Outstanding RDMA READ / atomics as responder.
        max_dest_rd_atomic(u8) => max_dest_rd_atomic | MAX_DEST_RD_ATOMIC;
        /// Minimum RNR NAK timer code.
        min_rnr_timer(u8) => min_rnr_timer | MIN_RNR_TIMER;
        /// Remote QP number.
        dest_qpn(u32) => dest_qp_num | DEST_QPN;
        /// Packet pacing rate limit, kbps.
        rate_limit(u32) => rate_limit | RATE_LIMIT;
    }

    /// Remote access rights (`IBV_ACCESS_REMOTE_*`).
    #[inline]
    pub fn access(mut self, access: AccessFlags) -> QpAttr {
        self.raw.qp_access_flags = access.bits();
        self.mask |= AttrMask::ACCESS_FLAGS;
        self
    }

    /// Path migration state (`IBV_QP_PATH_MIG_STATE`).
    #[inline]
    pub fn path_mig_state(mut self, state: MigState) -> QpAttr {
        self.raw.path_mig_state = state.into();
        self.mask |= AttrMask::PATH_MIG_STATE;
        self
    }

    /// Asks for an event when the send queue has drained (`IBV_QP_EN_SQD_ASYNC_NOTIFY`).
    #[inline]
    pub fn en_sqd_async_notify(mut self, yes: bool) -> QpAttr {
        self.raw.en_sqd_async_notify = u8::from(yes);
        self.mask |= AttrMask::EN_SQD_ASYNC_NOTIFY;
        self
    }

    /// New queue capacities (`IBV_QP_CAP`), where the provider can resize.
    #[inline]
    pub fn cap(mut self, cap: ffi::ibv_qp_cap) -> QpAttr {
        self.raw.cap = cap;
        self.mask |= AttrMask::CAP;
        self
    }

    /// Alternate path for automatic path migration (`IBV_QP_ALT_PATH`): its
    /// address vector, P_Key index, port and ACK timeout.
    #[inline]
    pub fn alt_path(mut self, av: &AhAttr, pkey_index: u16, port: u8, timeout: u8) -> QpAttr {
        self.raw.alt_ah_attr = *av.as_raw();
        self.raw.alt_pkey_index = pkey_index;
        self.raw.alt_port_num = port;
        self.raw.alt_timeout = timeout;
        self.mask |= AttrMask::ALT_PATH;
        self
    }

    /// Primary path address vector (`IBV_QP_AV`).
    #[inline]
    pub fn av(mut self, av: &AhAttr) -> QpAttr {
        self.raw.ah_attr = *av.as_raw();
        self.mask |= AttrMask::AV;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_print_rust_names_and_messages_get_field_names() {
        let m = AttrMask::STATE | AttrMask::PATH_MTU | AttrMask::MAX_QP_RD_ATOMIC;
        assert_eq!(format!("{m:?}"), "STATE | PATH_MTU | MAX_QP_RD_ATOMIC");
        assert_eq!(m.to_string(), "STATE | PATH_MTU | MAX_QP_RD_ATOMIC");
        assert_eq!(m.field_names().to_string(), "state, path_mtu, max_rd_atomic");
        let odd = AttrMask::PORT | AttrMask::from_bits_retain(1 << 30);
        assert_eq!(format!("{odd:?}"), "PORT | 0x40000000");
        assert_eq!(odd.field_names().to_string(), "port, 0x40000000");
        assert_eq!(AttrMask::empty().field_names().to_string(), "");
        assert_eq!(format!("{:?}", AttrMask::empty()), "(empty)");
        assert_eq!(FIELDS.len(), AttrMask::NAMED.len(), "a field name for every attribute");
    }
}
