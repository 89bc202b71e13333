//! How a UD QP reaches its peer, made by the session's exchange or by
//! rdma_cm (`-R`).

use rrddmma::prim::Ah;

/// How a UD QP reaches its peer: the address handle, the peer's QPN and the
/// Q_Key to send with.
pub struct UdPeer {
    pub ah: Ah,
    pub qpn: u32,
    pub qkey: u32,
}
