//! The kind of a CM event, a value type of its own so that the error type
//! can name it without reaching the rest of the CM layer.

use crate::bindings::cm as cmffi;
use crate::prim::cvalue::c_type;

c_type! {
    /// The kind of a CM event (`enum rdma_cm_event_type`): a newtype, so a value
    /// this build does not know is kept, never a panic.
    #[doc(alias = "rdma_cm_event_type")]
    pub value CmEventType: u32, from enum cmffi::rdma_cm_event_type {
        ADDR_RESOLVED = RDMA_CM_EVENT_ADDR_RESOLVED "RDMA_CM_EVENT_ADDR_RESOLVED",
        ADDR_ERROR = RDMA_CM_EVENT_ADDR_ERROR "RDMA_CM_EVENT_ADDR_ERROR",
        ROUTE_RESOLVED = RDMA_CM_EVENT_ROUTE_RESOLVED "RDMA_CM_EVENT_ROUTE_RESOLVED",
        ROUTE_ERROR = RDMA_CM_EVENT_ROUTE_ERROR "RDMA_CM_EVENT_ROUTE_ERROR",
        CONNECT_REQUEST = RDMA_CM_EVENT_CONNECT_REQUEST "RDMA_CM_EVENT_CONNECT_REQUEST",
        CONNECT_RESPONSE = RDMA_CM_EVENT_CONNECT_RESPONSE "RDMA_CM_EVENT_CONNECT_RESPONSE",
        CONNECT_ERROR = RDMA_CM_EVENT_CONNECT_ERROR "RDMA_CM_EVENT_CONNECT_ERROR",
        UNREACHABLE = RDMA_CM_EVENT_UNREACHABLE "RDMA_CM_EVENT_UNREACHABLE",
        REJECTED = RDMA_CM_EVENT_REJECTED "RDMA_CM_EVENT_REJECTED",
        ESTABLISHED = RDMA_CM_EVENT_ESTABLISHED "RDMA_CM_EVENT_ESTABLISHED",
        DISCONNECTED = RDMA_CM_EVENT_DISCONNECTED "RDMA_CM_EVENT_DISCONNECTED",
        DEVICE_REMOVAL = RDMA_CM_EVENT_DEVICE_REMOVAL "RDMA_CM_EVENT_DEVICE_REMOVAL",
        MULTICAST_JOIN = RDMA_CM_EVENT_MULTICAST_JOIN "RDMA_CM_EVENT_MULTICAST_JOIN",
        MULTICAST_ERROR = RDMA_CM_EVENT_MULTICAST_ERROR "RDMA_CM_EVENT_MULTICAST_ERROR",
        ADDR_CHANGE = RDMA_CM_EVENT_ADDR_CHANGE "RDMA_CM_EVENT_ADDR_CHANGE",
        TIMEWAIT_EXIT = RDMA_CM_EVENT_TIMEWAIT_EXIT "RDMA_CM_EVENT_TIMEWAIT_EXIT",
    }
}

impl CmEventType {
    /// What a wait for this kind is, for messages.
    pub(crate) fn waiting_for(self) -> &'static str {
        match self {
            CmEventType::ADDR_RESOLVED => "resolving the address (rdma_resolve_addr)",
            CmEventType::ROUTE_RESOLVED => "resolving the route (rdma_resolve_route)",
            CmEventType::CONNECT_REQUEST => "waiting for a connect request",
            CmEventType::CONNECT_RESPONSE => "waiting for the connect response (rdma_connect)",
            CmEventType::ESTABLISHED => "waiting for the connection to be established",
            CmEventType::DISCONNECTED => "waiting for the disconnect",
            CmEventType::MULTICAST_JOIN => "joining the multicast group (rdma_join_multicast)",
            _ => "waiting for a CM event",
        }
    }
}
