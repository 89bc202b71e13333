//! Bringing RC and UC QPs up to a peer: [`ConnectOpts`], [`Qp::connect`],
//! and the diagnosis of a refused transition.

use super::{Endpoint, Qp, QpAttr};
use crate::prim::{AccessFlags, AhAttr, Context, Error, GidType, Mtu, QpState, QpType, Result};

/// Connection parameters for RC and UC QPs: every knob, with defaults that
/// work on InfiniBand and RoCE alike. Start from [`ConnectOpts::default`] and
/// chain the setters:
///
/// ```
/// use rrddmma::prim::{AccessFlags, ConnectOpts, Mtu};
/// let o = ConnectOpts::default().access(AccessFlags::REMOTE_WRITE).mtu(Mtu::MTU_4096);
/// assert_eq!(o.get_mtu(), Mtu::MTU_4096);
/// ```
///
/// Each setter's documentation gives its default and the C attribute it
/// becomes; the port, GID index and MTU can be read back (`get_port`,
/// `get_gid_index`, `get_mtu`) for code that builds its own endpoints.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ConnectOpts {
    pub(crate) port: u8,
    pub(crate) gid_index: Option<u8>,
    pub(crate) pkey_index: u16,
    pub(crate) mtu: Mtu,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) max_rd_atomic: Option<u8>,
    pub(crate) max_dest_rd_atomic: Option<u8>,
    pub(crate) sl: u8,
    pub(crate) traffic_class: u8,
    pub(crate) hop_limit: u8,
    pub(crate) access: AccessFlags,
}

impl Default for ConnectOpts {
    fn default() -> ConnectOpts {
        ConnectOpts {
            port: 1,
            gid_index: None,
            pkey_index: 0,
            mtu: Mtu::MTU_1024,
            timeout: 14,
            retry_cnt: 6,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: None,
            max_dest_rd_atomic: None,
            sl: 0,
            traffic_class: 0,
            hop_limit: 64,
            access: AccessFlags::empty(),
        }
    }
}

impl ConnectOpts {
    setters! {
        /// Local port number (`ibv_qp_attr::port_num`, and the port of the
        /// address vector). Default 1.
        const port: u8, get_port;
        /// Local GID index (`ibv_global_route::sgid_index`). Default `None`:
        /// chosen per port, the RoCE v2 GID of the port's IPv4 address, else
        /// the first RoCE v2 GID, else 0 (InfiniBand); see
        /// [`Context::roce_v2_gid_index`].
        const gid_index: Option<u8>, get_gid_index;
        /// P_Key index (`ibv_qp_attr::pkey_index`). Default 0.
        const pkey_index: u16;
        /// Path MTU (`ibv_qp_attr::path_mtu`). Default [`Mtu::MTU_1024`],
        /// what every RoCE and InfiniBand port carries; raise it to the
        /// port's active MTU for bandwidth.
        const mtu: Mtu, get_mtu;
        /// Local ACK timeout exponent, 4.096 µs × 2^timeout (RC;
        /// `ibv_qp_attr::timeout`). Default 14, about 67 ms per try.
        const timeout: u8;
        /// Transport retries before an error completion, 0..=7 (RC;
        /// `ibv_qp_attr::retry_cnt`). Default 6: a vanished peer fails the
        /// request after 7 tries (about 0.5 s); 7 would do the same on
        /// hardware, but SoftRoCE (rxe) reads 7 as "retry forever".
        const retry_cnt: u8;
        /// RNR retries, 7 = infinite (RC; `ibv_qp_attr::rnr_retry`). Default 7:
        /// retry forever while the peer has no receive posted.
        const rnr_retry: u8;
        /// Minimum RNR NAK timer code (RC; `ibv_qp_attr::min_rnr_timer`).
        /// Default 12 (0.64 ms).
        const min_rnr_timer: u8;
        /// Service level (`ibv_ah_attr::sl`). Default 0.
        const sl: u8;
        /// Traffic class, on RoCE the DSCP/ECN byte
        /// (`ibv_global_route::traffic_class`). Default 0.
        const traffic_class: u8;
        /// Hop limit of the GRH (`ibv_global_route::hop_limit`). Default 64.
        const hop_limit: u8;
        /// Remote access allowed on this QP (`ibv_qp_attr::qp_access_flags`).
        /// Default empty: grant `REMOTE_WRITE`, `REMOTE_READ`,
        /// `REMOTE_ATOMIC` as the peer needs.
        const access: AccessFlags;
    }

    /// RDMA READ / atomic operations outstanding as initiator (RC;
    /// `ibv_qp_attr::max_rd_atomic`, the CM's initiator depth). Default:
    /// 1 for [`Qp::connect`]; the device's `max_qp_init_rd_atom` for the
    /// layers built for many operations in flight (`wrap::aio`, the
    /// one-call connects of `wrap`), clamped there by what the peer accepts.
    #[inline]
    #[must_use]
    pub const fn max_rd_atomic(mut self, v: u8) -> Self {
        self.max_rd_atomic = Some(v);
        self
    }

    /// RDMA READ / atomic operations outstanding as responder (RC;
    /// `ibv_qp_attr::max_dest_rd_atomic`, the CM's responder resources).
    /// Default: 1 for [`Qp::connect`]; the device's `max_qp_rd_atom` for the
    /// layers built for many operations in flight, clamped there by what
    /// the peer initiates.
    #[inline]
    #[must_use]
    pub const fn max_dest_rd_atomic(mut self, v: u8) -> Self {
        self.max_dest_rd_atomic = Some(v);
        self
    }

    /// The depths [`Qp::connect`] uses: (initiator, responder), the values
    /// set, else 1 each.
    pub const fn rd_atomic(&self) -> (u8, u8) {
        let init = match self.max_rd_atomic {
            Some(v) => v,
            None => 1,
        };
        let dest = match self.max_dest_rd_atomic {
            Some(v) => v,
            None => 1,
        };
        (init, dest)
    }

    /// These options with each depth not set taken from `ctx`
    /// (`max_qp_init_rd_atom` as initiator, `max_qp_rd_atom` as responder,
    /// at most 255): the default of the layers built for many operations in
    /// flight.
    pub fn with_device_rd_atomic(self, ctx: &Context) -> Result<ConnectOpts> {
        if self.max_rd_atomic.is_some() && self.max_dest_rd_atomic.is_some() {
            return Ok(self);
        }
        let d = ctx.query_device()?;
        let cap = |v: i32| u8::try_from(v.max(0)).unwrap_or(u8::MAX);
        Ok(ConnectOpts {
            max_rd_atomic: Some(self.max_rd_atomic.unwrap_or(cap(d.max_qp_init_rd_atom))),
            max_dest_rd_atomic: Some(self.max_dest_rd_atomic.unwrap_or(cap(d.max_qp_rd_atom))),
            ..self
        })
    }

    /// These options with their depths clamped by a peer that initiates at
    /// most `peer_init` and accepts at most `peer_dest` (its
    /// `QpInfo::rd_atomic` and `QpInfo::dest_rd_atomic`): this side sends no
    /// more than the peer takes, and keeps no more resources than it sends.
    /// Never below 1: a peer offering 0 gets its READs refused by the
    /// responder (a `REM_INV_REQ` completion), not requests that never leave.
    pub fn clamp_rd_atomic(self, peer_init: u8, peer_dest: u8) -> ConnectOpts {
        let (init, dest) = self.rd_atomic();
        let (init, dest) = (init.min(peer_dest).max(1), dest.min(peer_init).max(1));
        ConnectOpts { max_rd_atomic: Some(init), max_dest_rd_atomic: Some(dest), ..self }
    }

    /// The GID index these options use on `ctx`: the one set, else the
    /// port's RoCE v2 GID ([`Context::roce_v2_gid_index`]).
    pub fn gid_index_on(&self, ctx: &Context) -> Result<u8> {
        match self.gid_index {
            Some(i) => Ok(i),
            None => ctx.roce_v2_gid_index(self.port),
        }
    }
}

impl Qp {
    /// Brings an RC or UC QP from RESET through INIT and RTR to RTS, connected
    /// to `remote`. `local_psn` is the PSN this QP sends from.
    ///
    /// A transition the device refuses gives [`Error::Connect`], naming this
    /// QP, the transition, the peer's address and the local GID index and
    /// MTU, with a hint when the cause is a usual one (a GID index that is not
    /// the port's RoCE v2 GID, an MTU above the port's, access flags).
    pub fn connect(&self, remote: &Endpoint, local_psn: u32, o: &ConnectOpts) -> Result<()> {
        let ctx = self.pd().context();
        let gid_index = o.gid_index_on(ctx)?;
        let rc = self.qp_type() == QpType::RC;
        let step = |attr: &QpAttr| {
            self.modify(attr).map_err(|e| match e {
                Error::Verbs { op: "ibv_modify_qp", errno } => Error::Connect {
                    qpn: self.qpn(),
                    to: attr.state(),
                    errno,
                    remote: *remote,
                    gid_index,
                    mtu: o.mtu,
                    hint: diagnose(ctx, o, gid_index, attr.state(), remote),
                },
                other => other,
            })
        };
        step(&QpAttr::new(QpState::INIT).pkey_index(o.pkey_index).port(o.port).access(o.access))?;
        let av = if remote.gid.is_zero() {
            AhAttr::lid(o.port, remote.lid)
        } else {
            AhAttr::global(o.port, gid_index, remote.gid)
                .dlid(remote.lid)
                .hop_limit(o.hop_limit)
                .traffic_class(o.traffic_class)
        }
        .sl(o.sl);
        let mut rtr =
            QpAttr::new(QpState::RTR).av(&av).path_mtu(o.mtu).dest_qpn(remote.qpn).rq_psn(remote.psn & 0xff_ffff);
        if rc {
            rtr = rtr.max_dest_rd_atomic(o.rd_atomic().1).min_rnr_timer(o.min_rnr_timer);
        }
        step(&rtr)?;
        let mut rts = QpAttr::new(QpState::RTS).sq_psn(local_psn & 0xff_ffff);
        if rc {
            rts = rts.timeout(o.timeout).retry_cnt(o.retry_cnt).rnr_retry(o.rnr_retry).max_rd_atomic(o.rd_atomic().0);
        }
        step(&rts)
    }
}

/// The usual cause of a refused transition to `to`, from what the device
/// says about its port and GID table (read only on this error path).
fn diagnose(ctx: &Context, o: &ConnectOpts, gid_index: u8, to: QpState, remote: &Endpoint) -> Option<String> {
    let port = ctx.query_port(o.port).ok()?;
    if to == QpState::INIT {
        let remote = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        let extra = o.access.difference(remote);
        if !extra.is_empty() {
            return Some(format!(
                "ConnectOpts::access holds {extra}, which a QP does not take: only REMOTE_WRITE, \
                 REMOTE_READ and REMOTE_ATOMIC (local rights belong to memory regions)"
            ));
        }
        return None;
    }
    if to != QpState::RTR {
        return None;
    }
    let active = port.active_mtu();
    if o.mtu.to_raw() > active.to_raw() {
        return Some(format!(
            "path MTU {} is above port {}'s active MTU {} (set ConnectOpts::mtu to at most {})",
            o.mtu.bytes(),
            o.port,
            active.bytes(),
            active.bytes()
        ));
    }
    if port.is_ethernet() {
        let table = ctx.gid_table(o.port).ok()?;
        let best = ctx.roce_v2_gid_index(o.port).ok();
        let entry = table.iter().find(|e| e.index == u32::from(gid_index));
        let use_best = match best {
            Some(b) if b != gid_index => {
                format!(" (the port's RoCE v2 GID is index {b}: leave ConnectOpts::gid_index as None to choose it)")
            }
            _ => String::new(),
        };
        return match entry {
            None => Some(format!("GID index {gid_index} is empty on port {} of {}{use_best}", o.port, ctx.name())),
            Some(e) if e.gid_type != GidType::ROCE_V2 => Some(format!(
                "GID index {gid_index} is a {} GID; RoCE v2 peers need the port's RoCE v2 GID{use_best}",
                e.gid_type
            )),
            Some(e) => {
                let family = |g: &crate::prim::Gid| if g.ipv4().is_some() { "IPv4" } else { "IPv6" };
                let mismatch = if family(&e.gid) != family(&remote.gid) {
                    format!(
                        "local GID {} (index {gid_index}) is {} and the peer's {} is {}: both ends need GIDs of one IP family; ",
                        e.gid,
                        family(&e.gid),
                        remote.gid,
                        family(&remote.gid)
                    )
                } else {
                    String::new()
                };
                Some(format!(
                    "{mismatch}check the peer's address (QPN, GID) and the route to it from GID index {gid_index}{use_best}"
                ))
            }
        };
    }
    None
}

/// A random packet sequence number (24 bits) from the operating system
/// (`getrandom(2)`); falls back to the clock's nanoseconds if that fails.
pub fn random_psn() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: `b` is valid for 4 bytes of writes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let v = if n == 4 {
        u32::from_ne_bytes(b)
    } else {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
    };
    v & 0xff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setter_sets_its_own_field_and_nothing_else() {
        let d = ConnectOpts::default();
        let o = d.port(2).gid_index(Some(3)).mtu(Mtu::MTU_4096).retry_cnt(2).access(AccessFlags::REMOTE_READ);
        assert_eq!((o.get_port(), o.get_gid_index(), o.get_mtu()), (2, Some(3), Mtu::MTU_4096));
        assert_eq!((o.retry_cnt, o.access), (2, AccessFlags::REMOTE_READ));
        assert_eq!((o.timeout, o.rnr_retry, o.hop_limit, o.pkey_index), (d.timeout, d.rnr_retry, d.hop_limit, 0));
        // The defaults the setters' documentation states.
        assert_eq!((d.port, d.gid_index, d.mtu, d.timeout, d.retry_cnt), (1, None, Mtu::MTU_1024, 14, 6));
        let caps = crate::prim::QpCaps::default().max_send_wr(5).max_inline_data(7);
        assert_eq!((caps.get_max_send_wr(), caps.get_max_recv_wr(), caps.get_max_inline_data()), (5, 64, 7));
    }

    #[test]
    fn rd_atomic_depths_default_to_one_and_clamp_to_the_peer() {
        let o = ConnectOpts::default();
        assert_eq!(o.rd_atomic(), (1, 1), "Qp::connect's default");
        let set = o.max_rd_atomic(16).max_dest_rd_atomic(64);
        assert_eq!(set.rd_atomic(), (16, 64));
        // The peer initiates 8 and accepts 4: this side sends 4, keeps 8.
        assert_eq!(set.clamp_rd_atomic(8, 4).rd_atomic(), (4, 8));
        // A larger offer changes nothing; an offer of 0 leaves 1.
        assert_eq!(set.clamp_rd_atomic(255, 255).rd_atomic(), (16, 64));
        assert_eq!(set.clamp_rd_atomic(0, 0).rd_atomic(), (1, 1));
    }
}
