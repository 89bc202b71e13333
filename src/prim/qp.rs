//! Queue pairs: creation, state transitions, posting.

use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use super::cq::Cq;
use super::device::Gid;
use super::error::{Error, Result};
use super::pd::Pd;
use crate::bindings as ffi;

/// Queue sizes of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> QpCaps {
        QpCaps { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
    }
}

/// What a peer needs to connect to a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// First packet sequence number the QP sends (24 bits).
    pub psn: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Port GID (RoCE; routes InfiniBand across subnets).
    pub gid: Gid,
}

/// Connection parameters for an RC QP: every knob, with common defaults.
#[derive(Clone, Copy, Debug)]
pub struct ConnectOpts {
    /// Local port number.
    pub port: u8,
    /// Local GID index (RoCE: see [`super::Context::roce_v2_gid_index`]).
    pub gid_index: u8,
    /// Path MTU.
    pub mtu: ffi::ibv_mtu,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout.
    pub timeout: u8,
    /// Transport retries before an error completion (0..=7).
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Outstanding RDMA READ / atomic operations as initiator.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READ / atomic operations as responder.
    pub max_dest_rd_atomic: u8,
    /// Service level.
    pub sl: u8,
    /// Traffic class (RoCE: DSCP/ECN byte).
    pub traffic_class: u8,
    /// Hop limit of the GRH.
    pub hop_limit: u8,
    /// Remote access allowed on this QP.
    pub access: ffi::ibv_access_flags,
}

impl Default for ConnectOpts {
    fn default() -> ConnectOpts {
        ConnectOpts {
            port: 1,
            gid_index: 0,
            mtu: ffi::ibv_mtu::IBV_MTU_1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            sl: 0,
            traffic_class: 0,
            hop_limit: 64,
            access: ffi::ibv_access_flags(0),
        }
    }
}

/// A queue pair. Destroyed on drop; keeps its PD and CQs alive.
///
/// # References
/// `ibv_create_qp(3)`, `ibv_modify_qp(3)`, `ibv_post_send(3)`, `ibv_post_recv(3)`
pub struct Qp {
    qp: NonNull<ffi::ibv_qp>,
    pd: Pd,
    _send_cq: Cq,
    _recv_cq: Cq,
}

// SAFETY: posting is thread-safe in libibverbs providers; destroy happens once.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl fmt::Debug for Qp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qp").field("qpn", &self.qpn()).finish()
    }
}

impl Qp {
    /// Creates a reliable-connected QP.
    pub fn new_rc(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<Qp> {
        let mut attr = ffi::ibv_qp_init_attr {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap: ffi::ibv_qp_cap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                max_send_sge: caps.max_send_sge,
                max_recv_sge: caps.max_recv_sge,
                max_inline_data: caps.max_inline_data,
            },
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            ..Default::default()
        };
        // SAFETY: live PD and CQs of the same device; `attr` is valid.
        let qp = unsafe { ffi::ibv_create_qp(pd.as_ptr(), &mut attr) };
        let qp = NonNull::new(qp).ok_or_else(|| Error::last("ibv_create_qp"))?;
        Ok(Qp { qp, pd: pd.clone(), _send_cq: send_cq.clone(), _recv_cq: recv_cq.clone() })
    }

    /// The raw QP.
    pub fn as_ptr(&self) -> *mut ffi::ibv_qp {
        self.qp.as_ptr()
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: live QP.
        unsafe { self.qp.as_ref() }.qp_num
    }

    /// This QP's endpoint on `port` with the GID at `gid_index`, sending from `psn`.
    pub fn endpoint(&self, port: u8, gid_index: u8, psn: u32) -> Result<Endpoint> {
        let ctx = self.pd.context();
        let attr = ctx.query_port(port)?;
        let gid = ctx.query_gid(port, u32::from(gid_index))?;
        Ok(Endpoint { qpn: self.qpn(), psn: psn & 0xff_ffff, lid: attr.lid, gid })
    }

    fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: ffi::ibv_qp_attr_mask) -> Result<()> {
        let mask = i32::try_from(mask.0).expect("QP attribute masks fit in 31 bits");
        // SAFETY: live QP; `attr` is valid.
        let rc = unsafe { ffi::ibv_modify_qp(self.as_ptr(), attr, mask) };
        if rc != 0 {
            return Err(Error::code("ibv_modify_qp", rc));
        }
        Ok(())
    }

    /// Brings the QP from RESET through INIT and RTR to RTS, connected to `remote`.
    /// `local_psn` is the PSN this QP sends from (its [`Endpoint::psn`]).
    pub fn connect(&self, remote: &Endpoint, local_psn: u32, o: &ConnectOpts) -> Result<()> {
        use ffi::ibv_qp_attr_mask as M;
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: o.port,
            qp_access_flags: o.access.0,
            ..Default::default()
        };
        self.modify(&mut a, M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS)?;

        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_RTR,
            path_mtu: o.mtu,
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn,
            max_dest_rd_atomic: o.max_dest_rd_atomic,
            min_rnr_timer: o.min_rnr_timer,
            ah_attr: ffi::ibv_ah_attr {
                dlid: remote.lid,
                sl: o.sl,
                port_num: o.port,
                is_global: u8::from(!remote.gid.is_zero()),
                grh: ffi::ibv_global_route {
                    dgid: remote.gid.to_raw(),
                    sgid_index: o.gid_index,
                    hop_limit: o.hop_limit,
                    traffic_class: o.traffic_class,
                    flow_label: 0,
                },
                ..Default::default()
            },
            ..Default::default()
        };
        self.modify(
            &mut a,
            M::IBV_QP_STATE
                | M::IBV_QP_AV
                | M::IBV_QP_PATH_MTU
                | M::IBV_QP_DEST_QPN
                | M::IBV_QP_RQ_PSN
                | M::IBV_QP_MAX_DEST_RD_ATOMIC
                | M::IBV_QP_MIN_RNR_TIMER,
        )?;

        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state::IBV_QPS_RTS,
            sq_psn: local_psn & 0xff_ffff,
            timeout: o.timeout,
            retry_cnt: o.retry_cnt,
            rnr_retry: o.rnr_retry,
            max_rd_atomic: o.max_rd_atomic,
            ..Default::default()
        };
        self.modify(
            &mut a,
            M::IBV_QP_STATE
                | M::IBV_QP_SQ_PSN
                | M::IBV_QP_TIMEOUT
                | M::IBV_QP_RETRY_CNT
                | M::IBV_QP_RNR_RETRY
                | M::IBV_QP_MAX_QP_RD_ATOMIC,
        )
    }

    /// The QP's current state, queried from the device.
    pub fn state(&self) -> Result<ffi::ibv_qp_state> {
        let mut attr = MaybeUninit::<ffi::ibv_qp_attr>::zeroed();
        let mut init = MaybeUninit::<ffi::ibv_qp_init_attr>::zeroed();
        let mask = i32::try_from(ffi::ibv_qp_attr_mask::IBV_QP_STATE.0).unwrap_or(1);
        // SAFETY: live QP; both outputs are valid for writes.
        let rc = unsafe { ffi::ibv_query_qp(self.as_ptr(), attr.as_mut_ptr(), mask, init.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::code("ibv_query_qp", rc));
        }
        // SAFETY: zero-initialised, then filled by the provider; zero is valid.
        Ok(unsafe { attr.assume_init() }.qp_state)
    }

    /// Posts a linked list of send work requests.
    ///
    /// # Safety
    /// `wr` must be a valid list; every buffer it names must lie in a memory
    /// region registered on this QP's PD with the needed access, and stay
    /// alive and untouched until the request's completion (inline data is
    /// copied at the call and is exempt).
    #[inline]
    pub unsafe fn post_send(&self, wr: &mut ffi::ibv_send_wr) -> Result<()> {
        let mut bad = ptr::null_mut();
        // SAFETY: live QP; the list contract is the caller's.
        let rc = unsafe { ffi::ibv_post_send(self.as_ptr(), wr, &mut bad) };
        if rc != 0 {
            return Err(Error::code("ibv_post_send", rc));
        }
        Ok(())
    }

    /// Posts a linked list of receive work requests.
    ///
    /// # Safety
    /// As [`Qp::post_send`], for receive buffers (written by the device).
    #[inline]
    pub unsafe fn post_recv(&self, wr: &mut ffi::ibv_recv_wr) -> Result<()> {
        let mut bad = ptr::null_mut();
        // SAFETY: live QP; the list contract is the caller's.
        let rc = unsafe { ffi::ibv_post_recv(self.as_ptr(), wr, &mut bad) };
        if rc != 0 {
            return Err(Error::code("ibv_post_recv", rc));
        }
        Ok(())
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_qp`, destroyed once.
        unsafe { ffi::ibv_destroy_qp(self.qp.as_ptr()) };
    }
}
