//! Names of C enum values for messages; unknown values print as numbers.

use crate::bindings::{ibv_qp_state as S, ibv_qp_type as T};
use std::borrow::Cow;

/// `RESET`, `INIT`, ... or `state(N)`.
pub fn qp_state(s: S) -> Cow<'static, str> {
    Cow::Borrowed(match s {
        S::IBV_QPS_RESET => "RESET",
        S::IBV_QPS_INIT => "INIT",
        S::IBV_QPS_RTR => "RTR",
        S::IBV_QPS_RTS => "RTS",
        S::IBV_QPS_SQD => "SQD",
        S::IBV_QPS_SQE => "SQE",
        S::IBV_QPS_ERR => "ERR",
        S::IBV_QPS_UNKNOWN => "UNKNOWN",
        other => return Cow::Owned(format!("state({})", other.0)),
    })
}

/// `RC`, `UC`, `UD`, ... or `type(N)`.
pub fn qp_type(t: T) -> Cow<'static, str> {
    Cow::Borrowed(match t {
        T::IBV_QPT_RC => "RC",
        T::IBV_QPT_UC => "UC",
        T::IBV_QPT_UD => "UD",
        T::IBV_QPT_RAW_PACKET => "RAW_PACKET",
        T::IBV_QPT_XRC_SEND => "XRC_SEND",
        T::IBV_QPT_XRC_RECV => "XRC_RECV",
        T::IBV_QPT_DRIVER => "DRIVER",
        other => return Cow::Owned(format!("type({})", other.0)),
    })
}
