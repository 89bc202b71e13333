//! Connection management through librdmacm (feature `cm`): peers addressed by
//! IP address and port, connections set up by the kernel's RDMA CM.
//!
//! - [`EventChannel`]: where CM events arrive (a file descriptor: [`AsFd`](std::os::fd::AsFd),
//!   [`EventChannel::wait`] with a deadline, non-blocking [`EventChannel::get`]).
//! - [`CmId`]: one CM identifier (RC or UD port space): address and route
//!   resolution, `listen`, `connect` / `accept` / `reject` / `disconnect`,
//!   multicast join and leave on UD.
//! - [`CmEvent`]: an event, copied out of librdmacm and acknowledged at once,
//!   so that no event pins a [`CmId`].
//!
//! QPs stay ordinary [`Qp`]s, built with [`super::QpBuilder`] on a
//! [`super::Context`] of the device the `CmId` resolved to
//! ([`CmId::device_name`]); the `CmId` moves them through their states with
//! the attributes `rdma_init_qp_attr` gives ([`CmId::modify_qp`]), except
//! remote access: none unless [`CmId::set_access`] grants it. The data
//! path is the same as for any other QP, and the QP's lifetime is its own.
//!
//! Ids may share an [`EventChannel`]: [`CmId::expect`] takes its own id's
//! events and queues the others for their ids. `CmId` is `Send + Sync`:
//! librdmacm writes into an id while it reads the id's events, so every
//! call on an id, every event read and every accessor runs under the
//! channel's lock. See `docs/cm.md`.

use std::fmt;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::bindings as ffi;
use crate::bindings::cm as cmffi;

use super::handle::{Destroy, Owned};
use super::{AccessFlags, Error, Qp, QpAttr, QpState, Result};

mod channel;
mod ece;
mod event;
pub(crate) mod kind;
pub use channel::{EventChannel, QUEUED_REQUESTS_MAX};
pub use event::{CmEvent, UdParam};
pub use kind::CmEventType;

/// Largest private data, in bytes, that each CM message carries for the
/// application (the IB CM message's field less librdmacm's 36-byte header
/// where it adds one): RC `CONNECT` (REQ) 56, `accept` (REP) 196, `reject`
/// (REJ) 148; UD `connect` (SIDR REQ) 180, `accept` and `reject` (SIDR REP) 136.
pub mod private_data_max {
    /// RC connect request (REQ: 92 less the 36-byte CM header).
    pub const RC_CONNECT: usize = 56;
    /// RC accept (REP).
    pub const RC_ACCEPT: usize = 196;
    /// RC reject (REJ).
    pub const RC_REJECT: usize = 148;
    /// UD connect (SIDR REQ: 216 less the 36-byte CM header).
    pub const UD_CONNECT: usize = 180;
    /// UD accept or reject (SIDR REP).
    pub const UD_REPLY: usize = 136;
}

/// The transport of a [`CmId`], which picks the RDMA CM port space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// Reliable connected (`RDMA_PS_TCP`).
    Rc,
    /// Unreliable datagram (`RDMA_PS_UDP`), connections set up by SIDR.
    Ud,
    /// Unreliable connected (`RDMA_PS_IB` with a UC QP type): connected as RC
    /// is (REQ, REP, RTU), with the same private-data limits. librdmacm makes
    /// such ids only bound, so they come from [`CmId::bound`].
    Uc,
}

impl PortSpace {
    fn raw(self) -> cmffi::rdma_port_space {
        match self {
            PortSpace::Rc => cmffi::rdma_port_space::RDMA_PS_TCP,
            PortSpace::Ud => cmffi::rdma_port_space::RDMA_PS_UDP,
            PortSpace::Uc => cmffi::rdma_port_space::RDMA_PS_IB,
        }
    }

    /// The port space of a live id, from its `ps` and QP type.
    ///
    /// # Safety
    /// `id` points to a live `rdma_cm_id`.
    pub(super) unsafe fn of(id: *const cmffi::rdma_cm_id) -> PortSpace {
        use cmffi::rdma_port_space as ps_;
        // SAFETY: caller: live id; plain fields.
        let (ps, qp_type) = unsafe { ((*id).ps, (*id).qp_type) };
        if ps == ps_::RDMA_PS_UDP || ps == ps_::RDMA_PS_IPOIB {
            PortSpace::Ud
        } else if ps == ps_::RDMA_PS_IB && qp_type == ffi::ibv_qp_type::IBV_QPT_UC {
            PortSpace::Uc
        } else {
            PortSpace::Rc
        }
    }

    fn limits(self) -> (usize, usize, usize) {
        use private_data_max::*;
        match self {
            PortSpace::Rc | PortSpace::Uc => (RC_CONNECT, RC_ACCEPT, RC_REJECT),
            PortSpace::Ud => (UD_CONNECT, UD_REPLY, UD_REPLY),
        }
    }
}

/// Connection parameters of [`CmId::connect`] and [`CmId::accept`].
#[derive(Clone, Debug)]
pub struct ConnParam<'a> {
    /// Private data for the peer (at most the message's limit, see
    /// [`private_data_max`]; a longer slice panics).
    pub private_data: &'a [u8],
    /// RDMA reads and atomics the peer may have outstanding at this side.
    pub responder_resources: u8,
    /// RDMA reads and atomics this side may have outstanding at the peer.
    pub initiator_depth: u8,
    /// Transport retries (connect only; default 6: SoftRoCE retries
    /// forever at 7, see [`ConnectOpts::retry_cnt`](crate::prim::ConnectOpts::retry_cnt)).
    pub retry_count: u8,
    /// RNR retries (7: infinite).
    pub rnr_retry_count: u8,
}

impl Default for ConnParam<'_> {
    fn default() -> Self {
        ConnParam { private_data: &[], responder_resources: 1, initiator_depth: 1, retry_count: 6, rnr_retry_count: 7 }
    }
}

/// An RDMA CM identifier (`rdma_cm_id`) of one port space, on an
/// [`EventChannel`] it holds by `Arc`. Destroyed on drop (`rdma_destroy_id`),
/// which for a connected id tells the peer.
///
/// `Send` and `Sync`: librdmacm writes into the id (its addresses, device
/// and port) during the calls on it and while reading its events from the
/// channel; this crate makes each of those calls, and each read of
/// [`local_addr`](Self::local_addr), [`peer_addr`](Self::peer_addr),
/// [`device_name`](Self::device_name) and [`port_num`](Self::port_num),
/// under the channel's lock.
pub struct CmId {
    /// The id and its channel: the id is destroyed first.
    raw: Owned<CmIdHandle>,
    ps: PortSpace,
    /// The remote access the QP gets in the CM's INIT attributes
    /// ([`CmId::set_access`]), as `AccessFlags` bits.
    access: AtomicU32,
}

impl fmt::Debug for CmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CmId")
            .field("ps", &self.ps)
            .field("local", &self.local_addr())
            .field("peer", &self.peer_addr())
            .finish()
    }
}

/// What [`Owned`] needs to destroy a CM id: the channel its events arrive
/// on, which outlives it.
pub(crate) struct CmIdHandle {
    channel: EventChannel,
}

// SAFETY: `rdma_destroy_id` releases what `rdma_create_id` (or a connect
// request, or `rdma_create_ep`) made; librdmacm's id calls take the id's own
// lock, and every `&self` method of `CmId` that calls librdmacm on the id or
// reads its fields does so under the channel's lock (see `CmId`).
unsafe impl Destroy for CmIdHandle {
    type Raw = cmffi::rdma_cm_id;
    const VERB: &'static str = "rdma_destroy_id";
    unsafe fn destroy(&mut self, raw: NonNull<cmffi::rdma_cm_id>) -> i32 {
        let mut q = self.channel.lock();
        // Events queued for the id go with it (a queued connect request
        // for a listener is rejected): none may outlive it, as its address
        // may be reused by a later id.
        let elsewhere = q.forget(raw.as_ptr());
        // SAFETY: the caller's contract; its events were acked when read
        // (RawEvent::read), so the call does not block; no QP was created on
        // it by librdmacm.
        let rc = unsafe { cmffi::rdma_destroy_id(raw.as_ptr()) };
        drop(q);
        for e in elsewhere {
            e.forget();
        }
        rc
    }
}

/// A socket address as librdmacm takes it.
fn to_sockaddr(a: SocketAddr) -> cmffi::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut st: cmffi::sockaddr_storage = unsafe { mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { ptr::write(ptr::addr_of_mut!(st).cast::<libc::sockaddr_in>(), sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo().to_be(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { ptr::write(ptr::addr_of_mut!(st).cast::<libc::sockaddr_in6>(), sin6) };
        }
    }
    st
}

/// A socket address from librdmacm (`None` for an unset or non-IP one).
///
/// # Safety
/// `sa` is null or points to a sockaddr of at least its family's size.
unsafe fn from_sockaddr(sa: *const cmffi::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: caller: `sa` points to a sockaddr, so its family field is readable.
    match i32::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: AF_INET: the storage holds a sockaddr_in.
            let sin = unsafe { ptr::read_unaligned(sa.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: AF_INET6: the storage holds a sockaddr_in6.
            let s = unsafe { ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(s.sin6_port), s.sin6_flowinfo, s.sin6_scope_id)))
        }
        _ => None,
    }
}

/// The string in a fixed-size C character array: up to its first NUL, or
/// the whole array when it has none (never read past its end).
fn c_array_str(raw: &[core::ffi::c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|c| *c as u8).take_while(|b| *b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Private data's length for the CM message, which carries at most `max`
/// bytes (see [`private_data_max`]).
///
/// # Panics
/// If `data` is longer than `max`: the limits are fixed per message and port
/// space, so a longer slice is a programming error.
fn check_len(op: &'static str, data: &[u8], max: usize) -> u8 {
    assert!(
        data.len() <= max,
        "{op}: {} bytes of private data, but the CM message carries at most {max} \
         (prim::cm::private_data_max); send the rest over the connection",
        data.len()
    );
    data.len() as u8
}

/// A CM timeout in milliseconds.
///
/// # Panics
/// If `t` is below 1 ms or above `i32::MAX` ms.
fn timeout_ms(op: &'static str, t: Duration) -> i32 {
    i32::try_from(t.as_millis()).ok().filter(|ms| *ms > 0).unwrap_or_else(|| {
        panic!("{op}: timeout {t:?} is outside 1 ms..=i32::MAX ms; pass a timeout of at least 1 ms (2 s is usual)")
    })
}

/// Checks the exponent of [`CmId::set_ack_timeout`].
///
/// # Panics
/// If `timeout` is above 31.
fn check_ack_timeout(timeout: u8) {
    assert!(
        timeout <= 31,
        "CmId::set_ack_timeout: timeout {timeout} is an exponent of 4.096 µs and must be 0..=31 (14 is 67 ms)"
    );
}

/// Checks the port space of [`CmId::create`].
///
/// # Panics
/// For [`PortSpace::Uc`], which `rdma_create_id` cannot make unbound.
fn check_unbound_port_space(ps: PortSpace) {
    assert!(
        ps != PortSpace::Uc,
        "CmId::create: port space Uc needs a bound id: use CmId::bound(channel, PortSpace::Uc, addr), with port 0 \
         (and the unspecified address on the active side) for any"
    );
}

impl CmId {
    /// A new, unbound id in port space `ps` on `channel` (`rdma_create_id`).
    ///
    /// # Panics
    /// For [`PortSpace::Uc`]: UC ids cannot be made unbound (`rdma_create_id`
    /// gives RC or UD ids only); use [`CmId::bound`].
    ///
    /// # References
    /// `rdma_create_id(3)`
    #[doc(alias = "rdma_create_id")]
    pub fn create(channel: &EventChannel, ps: PortSpace) -> Result<CmId> {
        check_unbound_port_space(ps);
        let mut raw = ptr::null_mut();
        // SAFETY: live channel; `raw` receives the id.
        let rc = unsafe { cmffi::rdma_create_id(channel.as_ptr(), &mut raw, ptr::null_mut(), ps.raw()) };
        if rc != 0 {
            return Err(Error::last("rdma_create_id"));
        }
        let raw = NonNull::new(raw).ok_or(Error::Verbs { op: "rdma_create_id", errno: libc::EINVAL })?;
        // SAFETY: made by `rdma_create_id` just now, owned by nothing else.
        Ok(unsafe { CmId::own(raw, channel, ps) })
    }

    /// A new id in port space `ps` on `channel`, bound to `addr` (port 0:
    /// any). The passive side binds to the address it listens on; the
    /// active side may bind to the unspecified address of the peer's family
    /// (`0.0.0.0:0`) and then [`resolve_addr`](Self::resolve_addr).
    ///
    /// RC and UD ids are `rdma_create_id` then `rdma_bind_addr`. UC ids are
    /// made by `rdma_create_ep` (passive, with no QP), the only librdmacm
    /// call that creates an id of another QP type, then moved onto `channel`.
    pub fn bound(channel: &EventChannel, ps: PortSpace, addr: SocketAddr) -> Result<CmId> {
        if ps != PortSpace::Uc {
            let id = CmId::create(channel, ps)?;
            id.bind(addr)?;
            return Ok(id);
        }
        let mut sa = to_sockaddr(addr);
        let len = match addr {
            SocketAddr::V4(_) => mem::size_of::<libc::sockaddr_in>(),
            SocketAddr::V6(_) => mem::size_of::<libc::sockaddr_in6>(),
        };
        // SAFETY: all-zero is a valid rdma_addrinfo (null pointers, zero lengths).
        let mut hints: cmffi::rdma_addrinfo = unsafe { mem::zeroed() };
        hints.ai_flags = cmffi::RAI_PASSIVE as i32;
        hints.ai_family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        hints.ai_qp_type = ffi::ibv_qp_type::IBV_QPT_UC.0 as i32;
        hints.ai_port_space = cmffi::rdma_port_space::RDMA_PS_IB.0 as i32;
        hints.ai_src_len = len as libc::socklen_t;
        hints.ai_src_addr = ptr::addr_of_mut!(sa).cast();
        let mut raw = ptr::null_mut();
        // SAFETY: `hints` is a valid passive rdma_addrinfo whose source
        // address lives through the call (rdma_bind_addr copies it); no PD
        // and no QP attributes, so librdmacm keeps no pointer into them.
        let rc = unsafe { cmffi::rdma_create_ep(&mut raw, &mut hints, ptr::null_mut(), ptr::null_mut()) };
        if rc != 0 {
            return Err(Error::last("rdma_create_ep"));
        }
        // SAFETY: `rdma_create_ep` made `raw`, a bound id on its own
        // synchronous channel, owned by no one else.
        let mut id = unsafe { CmId::from_request(raw, channel, PortSpace::Uc) };
        // The id's events must arrive on `channel`; librdmacm destroys the
        // synchronous channel it made when the id leaves it.
        id.migrate(channel)?;
        Ok(id)
    }

    /// Takes ownership of an id librdmacm created for a connect request.
    ///
    /// # Safety
    /// `raw` is a live id on `channel`, owned by no one else.
    pub(crate) unsafe fn from_request(raw: *mut cmffi::rdma_cm_id, channel: &EventChannel, ps: PortSpace) -> CmId {
        let raw = NonNull::new(raw).expect("CmId::from_request: a null id");
        // SAFETY: the caller's contract.
        unsafe { CmId::own(raw, channel, ps) }
    }

    /// Takes ownership of `raw`, with no remote access for its QP.
    ///
    /// # Safety
    /// `raw` is a live id on `channel`, owned by no one else.
    unsafe fn own(raw: NonNull<cmffi::rdma_cm_id>, channel: &EventChannel, ps: PortSpace) -> CmId {
        // SAFETY: the caller's contract.
        let raw = unsafe { Owned::new(raw, CmIdHandle { channel: channel.clone() }) };
        CmId { raw, ps, access: AtomicU32::new(0) }
    }

    /// Runs `f` on the raw id under the channel's lock (see [`CmId`]).
    fn locked<R>(&self, f: impl FnOnce(*mut cmffi::rdma_cm_id) -> R) -> R {
        let _q = self.channel().lock();
        f(self.raw.as_ptr())
    }

    /// A librdmacm call on the id, under the channel's lock; its C return
    /// code becomes [`Error::Verbs`] with `errno`.
    fn call(&self, op: &'static str, f: impl FnOnce(*mut cmffi::rdma_cm_id) -> i32) -> Result<()> {
        if self.locked(f) != 0 {
            return Err(Error::last(op));
        }
        Ok(())
    }

    /// The raw id, for librdmacm calls of your own.
    pub fn as_ptr(&self) -> *mut cmffi::rdma_cm_id {
        self.raw.as_ptr()
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        self.ps
    }

    /// The channel its events arrive on.
    pub fn channel(&self) -> &EventChannel {
        &self.raw.channel
    }

    /// Moves the id, its future events and those queued for it on its
    /// channel, to another channel (`rdma_migrate_id`).
    pub fn migrate(&mut self, channel: &EventChannel) -> Result<()> {
        let old = self.channel().clone();
        let id = self.raw.as_ptr();
        if old.same(channel) {
            // SAFETY: owned id, live channel; events of the id were acked when read.
            return self.call("rdma_migrate_id", |id| unsafe { cmffi::rdma_migrate_id(id, channel.as_ptr()) });
        }
        // Both channels locked (in address order, so that two migrations
        // the other way round cannot deadlock): the id's queued events move
        // ahead of any that arrive on the new channel.
        let (mut q_old, mut q_new) = if old.as_ptr() < channel.as_ptr() {
            let a = old.lock();
            (a, channel.lock())
        } else {
            let b = channel.lock();
            (old.lock(), b)
        };
        // SAFETY: owned id, live channel; events of the id were acked when
        // read; both channels' locks are held.
        let rc = unsafe { cmffi::rdma_migrate_id(id, channel.as_ptr()) };
        if rc != 0 {
            return Err(Error::last("rdma_migrate_id"));
        }
        channel::Queue::migrate(&mut q_old, &old, &mut q_new, channel, id);
        drop((q_old, q_new));
        self.raw.data_mut().channel = channel.clone();
        Ok(())
    }

    /// The remote access (`REMOTE_WRITE`, `REMOTE_READ`, `REMOTE_ATOMIC`)
    /// the QP gets when the id moves it to INIT ([`qp_attr`](Self::qp_attr),
    /// [`connect`](Self::connect), [`accept`](Self::accept),
    /// [`establish`](Self::establish)), in place of the flags the CM would
    /// give (remote write, and read and atomics with responder resources).
    /// Default empty, as [`ConnectOpts::access`](crate::prim::ConnectOpts::access):
    /// a peer gets no RDMA access to this side's memory unless granted here.
    /// Set it before `connect` or `accept`.
    pub fn set_access(&self, access: AccessFlags) {
        self.access.store(access.bits(), Ordering::Relaxed);
    }

    /// The remote access set with [`set_access`](Self::set_access).
    pub fn access(&self) -> AccessFlags {
        AccessFlags::from_bits_retain(self.access.load(Ordering::Relaxed))
    }

    /// Binds to a local address (port 0: any); needed before [`listen`](Self::listen).
    pub fn bind(&self, addr: SocketAddr) -> Result<()> {
        let mut sa = to_sockaddr(addr);
        // SAFETY: owned id; `sa` is a valid sockaddr for the call.
        self.call("rdma_bind_addr", |id| unsafe { cmffi::rdma_bind_addr(id, ptr::addr_of_mut!(sa).cast()) })
    }

    /// Sets the local ACK timeout the CM gives the QP for RTS
    /// (`RDMA_OPTION_ID_ACK_TIMEOUT`): 4.096 µs × 2^`timeout`, 0..=31. Without
    /// it the CM derives one from the path, which on RoCE can leave a
    /// request to a vanished peer unanswered for minutes. Set it before
    /// [`connect`](Self::connect) or [`accept`](Self::accept).
    ///
    /// # Panics
    /// If `timeout` is above 31.
    pub fn set_ack_timeout(&self, timeout: u8) -> Result<()> {
        check_ack_timeout(timeout);
        let mut v = timeout;
        // SAFETY: owned id; the option value is one byte, copied by the call.
        self.call("rdma_set_option(ACK_TIMEOUT)", |id| unsafe {
            cmffi::rdma_set_option(
                id,
                cmffi::RDMA_OPTION_ID.0 as i32,
                cmffi::RDMA_OPTION_ID_ACK_TIMEOUT.0 as i32,
                ptr::addr_of_mut!(v).cast(),
                1,
            )
        })
    }

    /// Starts resolving `dst` (and binding to a device); completes with an
    /// `ADDR_RESOLVED` or `ADDR_ERROR` event within `timeout`.
    ///
    /// # Panics
    /// If `timeout` is below 1 ms or above `i32::MAX` ms.
    pub fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout: Duration) -> Result<()> {
        let ms = timeout_ms("rdma_resolve_addr", timeout);
        let mut s = src.map(to_sockaddr);
        let mut d = to_sockaddr(dst);
        let sp = s.as_mut().map_or(ptr::null_mut(), |s| ptr::addr_of_mut!(*s).cast());
        // SAFETY: owned id; the addresses are valid for the call (copied by librdmacm).
        self.call("rdma_resolve_addr", |id| unsafe {
            cmffi::rdma_resolve_addr(id, sp, ptr::addr_of_mut!(d).cast(), ms)
        })
    }

    /// Starts resolving the route; completes with `ROUTE_RESOLVED` or `ROUTE_ERROR` within `timeout`.
    ///
    /// # Panics
    /// If `timeout` is below 1 ms or above `i32::MAX` ms.
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        let ms = timeout_ms("rdma_resolve_route", timeout);
        // SAFETY: owned id.
        self.call("rdma_resolve_route", |id| unsafe { cmffi::rdma_resolve_route(id, ms) })
    }

    /// Listens for connect requests (`rdma_listen`); they arrive as
    /// `CONNECT_REQUEST` events carrying a new [`CmId`].
    pub fn listen(&self, backlog: i32) -> Result<()> {
        // SAFETY: owned, bound id.
        self.call("rdma_listen", |id| unsafe { cmffi::rdma_listen(id, backlog) })
    }

    /// Waits (until `deadline`) for the next event for this id (for a
    /// listening id: the next connect request) and checks that it is of
    /// kind `want`; see [`CmEvent::expect`]. Events for other ids on the
    /// channel stay queued for them (see [`EventChannel`]).
    pub fn expect(&self, want: CmEventType, deadline: Instant) -> Result<CmEvent> {
        self.channel().next_for(self.raw.as_ptr(), deadline, want.waiting_for())?.expect(want)
    }

    /// The name of the device the id is bound to (after address resolution or
    /// on a connect request); open a [`super::Context`] with it for the QP.
    pub fn device_name(&self) -> Option<String> {
        self.locked(|id| {
            // SAFETY: owned id, read under the channel's lock; `verbs` is
            // null or a live context librdmacm keeps open while the id is
            // bound to it.
            let verbs = unsafe { (*id).verbs };
            if verbs.is_null() {
                return None;
            }
            // SAFETY: live context, whose `device` librdmacm's libibverbs
            // set at open and keeps while the context lives.
            let dev = unsafe { (*verbs).device };
            if dev.is_null() {
                return None;
            }
            // The name is read from the device itself, which is what
            // `ibv_get_device_name` returns: the context is librdmacm's,
            // opened by the libibverbs librdmacm loaded, which under the
            // `dlopen` linkage need not be the one this crate loaded (that
            // one may be absent, its function then returning null).
            // SAFETY: live device; `name` is an array inside it, read by
            // value.
            let raw = unsafe { ptr::addr_of!((*dev).name).read() };
            Some(c_array_str(&raw))
        })
    }

    /// The port of the device the id is bound to (0 before binding).
    pub fn port_num(&self) -> u8 {
        // SAFETY: owned id, read under the channel's lock; plain field.
        self.locked(|id| unsafe { (*id).port_num })
    }

    /// The local address, once bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        // SAFETY: owned id, read under the channel's lock;
        // `route.addr.src_addr` is a sockaddr inside a sockaddr_storage-sized union.
        self.locked(|id| unsafe { from_sockaddr(ptr::addr_of!((*id).route.addr.__bindgen_anon_1).cast()) })
    }

    /// The peer's address, once resolved or connected.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        // SAFETY: as for `local_addr`.
        self.locked(|id| unsafe { from_sockaddr(ptr::addr_of!((*id).route.addr.__bindgen_anon_2).cast()) })
    }

    /// The QP attributes the CM gives for moving a QP of this connection to
    /// `state` (`rdma_init_qp_attr`), except the remote access flags: the
    /// id's own ([`set_access`](Self::set_access), default none) replace
    /// the CM's wherever the CM sets them.
    pub fn qp_attr(&self, state: QpState) -> Result<QpAttr> {
        let mut raw = ffi::ibv_qp_attr { qp_state: state.into(), ..Default::default() };
        let mut mask = 0;
        // SAFETY: owned id; `raw` and `mask` are valid out-parameters.
        self.call("rdma_init_qp_attr", |id| unsafe { cmffi::rdma_init_qp_attr(id, &mut raw, &mut mask) })?;
        let attr = QpAttr::from_raw(raw, super::AttrMask::from_bits_retain(mask as u32));
        Ok(if attr.mask().contains(super::AttrMask::ACCESS_FLAGS) { attr.access(self.access()) } else { attr })
    }

    /// Moves `qp` to `state` with the CM's attributes ([`qp_attr`](Self::qp_attr)).
    pub fn modify_qp(&self, qp: &Qp, state: QpState) -> Result<()> {
        qp.modify(&self.qp_attr(state)?)
    }

    fn conn_param(&self, op: &'static str, qp: &Qp, p: &ConnParam<'_>, max: usize) -> cmffi::rdma_conn_param {
        let len = check_len(op, p.private_data, max);
        cmffi::rdma_conn_param {
            private_data: if len == 0 { ptr::null() } else { p.private_data.as_ptr().cast() },
            private_data_len: len,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: 1,
            retry_count: p.retry_count.min(7),
            rnr_retry_count: p.rnr_retry_count.min(7),
            srq: 0,
            qp_num: qp.qpn(),
        }
    }

    /// Sends a connect request (RC and UC: REQ; UD: SIDR REQ) for `qp`, after moving
    /// it to INIT. The route must be resolved. RC continues with a
    /// `CONNECT_RESPONSE` event, then [`establish`](Self::establish); UD ends
    /// with `ESTABLISHED` carrying the peer's [`UdParam`].
    ///
    /// # Panics
    /// If the private data is longer than the message carries
    /// ([`private_data_max`]).
    pub fn connect(&self, qp: &Qp, p: &ConnParam<'_>) -> Result<()> {
        let mut param = self.conn_param("rdma_connect", qp, p, self.ps.limits().0);
        self.modify_qp(qp, QpState::INIT)?;
        if self.ps == PortSpace::Ud {
            self.ud_ready(qp)?;
        }
        // SAFETY: owned id; `param` and its private data live through the call (copied).
        self.call("rdma_connect", |id| unsafe { cmffi::rdma_connect(id, &mut param) })
    }

    /// RC and UC, active side, after `CONNECT_RESPONSE`: moves `qp` to INIT (again), RTR and RTS
    /// and tells the peer (`rdma_establish`). The connection is up on return.
    pub fn establish(&self, qp: &Qp) -> Result<()> {
        // INIT again: before the request the CM knew no responder resources,
        // so the access flags it gave then leave out remote read and atomics.
        self.modify_qp(qp, QpState::INIT)?;
        self.modify_qp(qp, QpState::RTR)?;
        self.modify_qp(qp, QpState::RTS)?;
        // SAFETY: owned id in the connect state.
        self.call("rdma_establish", |id| unsafe { cmffi::rdma_establish(id) })
    }

    /// Accepts the connect request this id came with: moves `qp` to INIT,
    /// RTR and RTS (RC, UC) or INIT, RTR, RTS (UD) and replies. RC and UC end with an
    /// `ESTABLISHED` event.
    ///
    /// # Panics
    /// If the private data is longer than the message carries
    /// ([`private_data_max`]).
    pub fn accept(&self, qp: &Qp, p: &ConnParam<'_>) -> Result<()> {
        let mut param = self.conn_param("rdma_accept", qp, p, self.ps.limits().1);
        self.modify_qp(qp, QpState::INIT)?;
        match self.ps {
            PortSpace::Rc | PortSpace::Uc => {
                self.modify_qp(qp, QpState::RTR)?;
                self.modify_qp(qp, QpState::RTS)?;
            }
            PortSpace::Ud => self.ud_ready(qp)?,
        }
        // SAFETY: owned id from a connect request; `param` lives through the call.
        self.call("rdma_accept", |id| unsafe { cmffi::rdma_accept(id, &mut param) })
    }

    /// UD: RTR and RTS need no peer, as `rdma_init_qp_attr` does not give them.
    fn ud_ready(&self, qp: &Qp) -> Result<()> {
        qp.modify(&QpAttr::new(QpState::RTR))?;
        qp.modify(&QpAttr::new(QpState::RTS).sq_psn(0))
    }

    /// Rejects the connect request this id came with, with private data for
    /// the peer (surfaced there by [`Error::CmEvent`]).
    ///
    /// # Panics
    /// If the private data is longer than the message carries
    /// ([`private_data_max`]).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        let len = check_len("rdma_reject", private_data, self.ps.limits().2);
        let p = if len == 0 { ptr::null() } else { private_data.as_ptr().cast() };
        // SAFETY: owned id from a connect request; the data is copied.
        self.call("rdma_reject", |id| unsafe { cmffi::rdma_reject(id, p, len) })
    }

    /// Disconnects (`rdma_disconnect`); both sides get `DISCONNECTED`. Move
    /// the QP to ERR yourself to flush its work requests.
    pub fn disconnect(&self) -> Result<()> {
        // SAFETY: owned id.
        self.call("rdma_disconnect", |id| unsafe { cmffi::rdma_disconnect(id) })
    }

    /// UD: joins the multicast group `group`; completes with `MULTICAST_JOIN`
    /// (its [`UdParam`] addresses the group) or `MULTICAST_ERROR`.
    pub fn join_multicast(&self, group: IpAddr) -> Result<()> {
        let mut sa = to_sockaddr(SocketAddr::new(group, 0));
        // SAFETY: owned id; the address is copied.
        self.call("rdma_join_multicast", |id| unsafe {
            cmffi::rdma_join_multicast(id, ptr::addr_of_mut!(sa).cast(), ptr::null_mut())
        })
    }

    /// UD: leaves a group joined with [`join_multicast`](Self::join_multicast).
    pub fn leave_multicast(&self, group: IpAddr) -> Result<()> {
        let mut sa = to_sockaddr(SocketAddr::new(group, 0));
        // SAFETY: owned id; the address is copied.
        self.call("rdma_leave_multicast", |id| unsafe { cmffi::rdma_leave_multicast(id, ptr::addr_of_mut!(sa).cast()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panic message of `f`, which must panic.
    fn panic_of(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let p = std::panic::catch_unwind(f).expect_err("must panic");
        p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
    }

    /// Issue 22: `CmId` is `Sync`, yet its accessors read fields librdmacm
    /// writes while it reads the id's events from the channel. They read
    /// under the channel's lock, the lock held while events are read: with
    /// the lock held elsewhere, no accessor returns.
    #[test]
    #[ignore = "device test: needs /dev/infiniband/rdma_cm (cargo xtask vm)"]
    fn regression_cm_id_accessors_wait_for_the_channel_lock() {
        let ch = EventChannel::create().unwrap();
        let id = std::sync::Arc::new(CmId::create(&ch, PortSpace::Rc).unwrap());
        type Read = (Option<SocketAddr>, Option<SocketAddr>, Option<String>, u8);
        let reader = |f: fn(&CmId) -> Read| {
            let (tx, rx) = std::sync::mpsc::channel();
            let id = id.clone();
            std::thread::spawn(move || tx.send(f(&id)).unwrap());
            rx
        };
        let all: fn(&CmId) -> Read = |id| (id.local_addr(), id.peer_addr(), id.device_name(), id.port_num());
        let each: [fn(&CmId) -> Read; 4] = [
            |id| (id.local_addr(), None, None, 0),
            |id| (None, id.peer_addr(), None, 0),
            |id| (None, None, id.device_name(), 0),
            |id| (None, None, None, id.port_num()),
        ];
        let held = ch.lock();
        let waiting: Vec<_> = each.into_iter().chain([all]).map(reader).collect();
        for rx in &waiting {
            assert!(
                rx.recv_timeout(Duration::from_millis(200)).is_err(),
                "an accessor read the id while the channel's lock was held elsewhere"
            );
        }
        drop(held);
        for rx in waiting {
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), (None, None, None, 0));
        }
    }

    /// D3: a connect request queued for a listener that then migrated
    /// keeps its new id on the channel it came on, where that id's events
    /// are queued. Dropping the listener forgets those events and destroys
    /// the id under that channel's lock, so that no event of the id is left
    /// queued once its address is free: with the lock held elsewhere, the
    /// id is not destroyed (the connecting peer hears no rejection) until
    /// the lock is released.
    #[test]
    #[ignore = "device test: needs the harness's CM device, RRDDMMA_CM_ADDR (cargo xtask vm)"]
    fn d3_queued_request_events_forgotten_before_its_id_is_destroyed() {
        use crate::prim::{Context, Cq, Pd, QpType};
        let ip: IpAddr = std::env::var("RRDDMMA_CM_ADDR").expect("RRDDMMA_CM_ADDR").parse().unwrap();
        let (a, b, c) =
            (EventChannel::create().unwrap(), EventChannel::create().unwrap(), EventChannel::create().unwrap());
        let mut listener = CmId::create(&a, PortSpace::Rc).unwrap();
        listener.bind(SocketAddr::new(ip, 0)).unwrap();
        listener.listen(4).unwrap();
        let addr = listener.local_addr().unwrap();
        let bystander = CmId::create(&a, PortSpace::Rc).unwrap();

        let client = CmId::create(&c, PortSpace::Rc).unwrap();
        client.resolve_addr(None, addr, Duration::from_secs(5)).unwrap();
        client.expect(CmEventType::ADDR_RESOLVED, Instant::now() + Duration::from_secs(10)).unwrap();
        client.resolve_route(Duration::from_secs(5)).unwrap();
        client.expect(CmEventType::ROUTE_RESOLVED, Instant::now() + Duration::from_secs(10)).unwrap();
        let ctx = Context::open(&client.device_name().unwrap()).unwrap();
        let pd = Pd::alloc(&ctx).unwrap();
        let cq = Cq::create(&ctx, 4).unwrap();
        let qp = Qp::builder(&pd, QpType::RC, &cq, &cq).build().unwrap();
        client.connect(&qp, &ConnParam::default()).unwrap();

        // The bystander reads the request from `a` and queues it for the
        // listener; the listener then moves to `b`, the request with it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while a.lock().events.is_empty() {
            assert!(Instant::now() < deadline, "no connect request arrived on the listener's channel");
            let _ = bystander.expect(CmEventType::ESTABLISHED, Instant::now() + Duration::from_millis(200));
        }
        listener.migrate(&b).unwrap();
        {
            let q = b.lock();
            assert_eq!(q.events.len(), 1, "the request moved with the listener");
            assert!(q.events[0].origin.as_ref().is_some_and(|o| o.same(&a)), "its id stays on `a`");
        }

        let held = a.lock();
        let dropper = std::thread::spawn(move || drop(listener));
        let early = c.wait(Instant::now() + Duration::from_millis(1500));
        assert!(
            matches!(early, Err(Error::Timeout { .. })),
            "the request's id was destroyed while its origin's queue was locked elsewhere: {early:?}"
        );
        drop(held);
        dropper.join().unwrap();
        let ev = client.expect(CmEventType::REJECTED, Instant::now() + Duration::from_secs(10));
        assert!(matches!(ev, Ok(_) | Err(Error::CmEvent { .. })), "the peer hears the rejection: {ev:?}");
        assert!(a.lock().events.is_empty() && b.lock().events.is_empty(), "nothing left queued");
    }

    /// D2: `CmId::expect` checks its deadline while it reads events for
    /// other ids, not only once the descriptor runs dry: with many events
    /// for others pending and the deadline already past, it returns
    /// `Timeout` having read one of them, not all.
    #[test]
    #[ignore = "device test: needs the harness's CM device, RRDDMMA_CM_ADDR (cargo xtask vm)"]
    fn d2_expect_checks_its_deadline_while_events_keep_coming() {
        const OTHERS: usize = 40;
        let ip: IpAddr = std::env::var("RRDDMMA_CM_ADDR").expect("RRDDMMA_CM_ADDR").parse().unwrap();
        let ch = EventChannel::create().unwrap();
        let waiting = CmId::create(&ch, PortSpace::Rc).unwrap();
        let others: Vec<CmId> = (0..OTHERS).map(|_| CmId::create(&ch, PortSpace::Rc).unwrap()).collect();
        for id in &others {
            id.resolve_addr(None, SocketAddr::new(ip, 7471), Duration::from_secs(5)).unwrap();
        }
        // Let every ADDR_RESOLVED reach the descriptor, unread.
        std::thread::sleep(Duration::from_secs(2));
        let r = waiting.expect(CmEventType::ESTABLISHED, Instant::now());
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        let read = ch.lock().events.len();
        assert!(read < OTHERS, "expect past its deadline read {read} of {OTHERS} events for other ids");
        // The rest are still there, each for its id.
        for id in &others {
            id.expect(CmEventType::ADDR_RESOLVED, Instant::now() + Duration::from_secs(10)).unwrap();
        }
    }

    /// A1: the device name is read from the device's own array, bounded
    /// by it whether or not it holds a NUL.
    #[test]
    fn a1_device_name_array_read_within_its_bounds() {
        let mut raw = [0 as core::ffi::c_char; 8];
        for (d, s) in raw.iter_mut().zip(b"rxe0") {
            *d = *s as core::ffi::c_char;
        }
        assert_eq!(c_array_str(&raw), "rxe0");
        let full = [b'm' as core::ffi::c_char; 8];
        assert_eq!(c_array_str(&full), "mmmmmmmm");
        assert_eq!(c_array_str(&[0; 4]), "");
    }

    /// Arguments the program wrote are checked before any call, and a bad
    /// one panics saying what to fix (the error policy in `lib.rs`).
    #[test]
    fn argument_checks_panic_with_the_fix() {
        assert_eq!(check_len("rdma_connect", &[0; 56], private_data_max::RC_CONNECT), 56);
        assert_eq!(check_len("rdma_connect", &[], private_data_max::RC_CONNECT), 0);
        let m = panic_of(|| {
            check_len("rdma_connect", &[0; 57], private_data_max::RC_CONNECT);
        });
        assert!(m.starts_with("rdma_connect: 57 bytes of private data") && m.contains("at most 56"), "{m}");

        assert_eq!(timeout_ms("rdma_resolve_addr", Duration::from_secs(2)), 2000);
        assert_eq!(timeout_ms("rdma_resolve_addr", Duration::from_millis(1)), 1);
        for bad in [Duration::ZERO, Duration::from_micros(999), Duration::from_millis(i32::MAX as u64 + 1)] {
            let m = panic_of(move || {
                timeout_ms("rdma_resolve_route", bad);
            });
            assert!(m.starts_with(&format!("rdma_resolve_route: timeout {bad:?} is outside")), "{m}");
        }

        check_ack_timeout(0);
        check_ack_timeout(31);
        let m = panic_of(|| check_ack_timeout(32));
        assert!(m.contains("timeout 32") && m.contains("0..=31"), "{m}");

        check_unbound_port_space(PortSpace::Rc);
        check_unbound_port_space(PortSpace::Ud);
        let m = panic_of(|| check_unbound_port_space(PortSpace::Uc));
        assert!(m.contains("CmId::bound"), "{m}");
    }
}
