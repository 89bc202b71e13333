//! [`RcEndpoint`]: an RC connection whose operations are futures, and the
//! memory-region protocol on its control QP.

use std::alloc::Layout;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::mpsc;

use super::auth::{self, Secret};
use super::control::{Ctrl, Inbox, Kind, Limits, Msg, Returned, CTRL_RECVS, CTRL_SENDS, MSG};
use super::driver::{self, Completion, Shared};
use super::error::{Error, Result};
use super::pool::{LocalMr, MrPool};
use crate::ctrl::QpInfo;
use crate::prim::{
    AccessFlags, CompChannel, ConnectOpts, Context, Cq, Pd, Qp, QpCaps, QpType, RecvWr, RemoteAddr, RemoteMr, SendWr,
    Sge, Wc, WcOpcode,
};

/// Settings of an async endpoint: [`AioOpts::new`] with the device (no
/// default can name it), then the setters.
///
/// | field | default ([`AioOpts::new`]) |
/// |---|---|
/// | `port` | 1 |
/// | `pool_size` | 16 MiB: the registered pool `alloc_local_mr` and the peer's requests take from |
/// | `caps` | 1,024 send and 1,024 receive requests, one entry each |
/// | `cq_size` | 4,096 |
/// | `connect` | [`ConnectOpts::default`] with remote read, write and atomic access granted (atomic only where the device has atomics: [`Context::atomics`]) |
/// | `busy_poll` | `false`: the driver sleeps on the completion channel |
/// | `spin_polls` | 16: most empty polls before the driver arms the CQ and sleeps (adaptive, see [`AioOpts::spin_polls`]) |
/// | `setup_timeout` | 10 s: bound on the TCP exchange of [`RcEndpoint::connect`] and [`Listener::accept`](super::Listener::accept), and on each RDMA CM step of [`RcEndpoint::connect_cm`] and [`Listener::bind_cm`](super::Listener::bind_cm)'s accept |
/// | `peer_timeout` | 10 s: a peer that acknowledges no keepalive for this long is lost; also bounds `send_remote_mr`'s wait for earlier requests |
/// | `grant_quota_bytes` | 4 MiB: bytes the peer may hold at once on its `request_remote_mr`s (a piece it gave back counts until `receive_local_mr` takes it) |
/// | `grant_quota_count` | 64: pieces the peer may hold at once on its `request_remote_mr`s (likewise) |
/// | `lend_backlog` | 64: regions the peer may lend that `receive_remote_mr` has not taken yet |
/// | `secret` | none: the TCP listener accepts anyone who reaches it (see [`AioOpts::secret`]) |
///
/// ```
/// use rrddmma::wrap::aio::AioOpts;
/// let o = AioOpts::new("mlx5_0").pool_size(32 << 20).busy_poll(true);
/// # let _ = o;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AioOpts {
    pub(crate) device: String,
    pub(crate) port: u8,
    pub(crate) pool_size: usize,
    pub(crate) caps: QpCaps,
    pub(crate) cq_size: u32,
    pub(crate) connect: ConnectOpts,
    pub(crate) busy_poll: bool,
    pub(crate) spin_polls: u32,
    pub(crate) setup_timeout: std::time::Duration,
    pub(crate) peer_timeout: std::time::Duration,
    pub(crate) grant_quota_bytes: usize,
    pub(crate) grant_quota_count: usize,
    pub(crate) lend_backlog: usize,
    pub(crate) secret: Option<Secret>,
}

impl AioOpts {
    /// Defaults for `device` (as `ibv_devices` lists it; `""` with
    /// [`RcEndpoint::connect_cm`] and [`Listener::bind_cm`](super::Listener::bind_cm), where the RDMA
    /// CM picks the device of the address).
    pub fn new(device: &str) -> AioOpts {
        let access = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        AioOpts {
            device: device.to_string(),
            port: 1,
            pool_size: 16 << 20,
            caps: QpCaps::default().max_send_wr(1024).max_recv_wr(1024),
            cq_size: 4096,
            connect: ConnectOpts::default().access(access),
            busy_poll: false,
            spin_polls: 16,
            setup_timeout: std::time::Duration::from_secs(10),
            peer_timeout: std::time::Duration::from_secs(10),
            grant_quota_bytes: 4 << 20,
            grant_quota_count: 64,
            lend_backlog: 64,
            secret: None,
        }
    }

    setters! {
        /// The RDMA device (as `ibv_devices` lists it). Set by [`AioOpts::new`].
        device: String;
        /// Local port. Default 1.
        const port: u8;
        /// Bytes of the registered memory pool that `alloc_local_mr` and the
        /// peer's requests take from. Default 16 MiB.
        const pool_size: usize;
        /// Queue sizes of the data QP. Default 1,024 send and 1,024 receive
        /// requests, one entry each.
        const caps: QpCaps;
        /// Completion queue entries (data and control QPs share the CQ).
        /// Default 4,096.
        const cq_size: u32;
        /// Connection parameters (GID, MTU, timeouts, access). Default
        /// [`ConnectOpts::default`] with remote read, write and atomic access
        /// granted (atomic only where the device has atomics).
        const connect: ConnectOpts;
        /// Spin on the CQ instead of sleeping on its channel: lower latency,
        /// a busy core. Default `false`.
        const busy_poll: bool;
        /// Most empty polls the driver makes, yielding to the runtime
        /// before each, after a poll that found completions and before it
        /// arms the CQ and sleeps on the channel. While completions keep
        /// arriving within the spin, the operations they wake post the next
        /// requests and the driver takes their completions without the arm,
        /// the reactor's wake-up and the channel read. Adaptive within this
        /// bound: a spin that ends with nothing found halves the next one (to
        /// one poll), a completion found after empty polls doubles it. 0
        /// arms at the first empty poll. Ignored with `busy_poll`. Default 16.
        const spin_polls: u32;
        /// Bound on the whole TCP exchange of [`RcEndpoint::connect`] and of
        /// [`Listener::accept`](super::Listener::accept) (a client that says
        /// nothing is dropped after it), and on each step of a connection
        /// through the RDMA CM (address, route, connect, establish) in
        /// [`RcEndpoint::connect_cm`] and [`Listener::bind_cm`](super::Listener::bind_cm)'s
        /// accept. Default 10 s.
        const setup_timeout: std::time::Duration;
        /// How long a peer may go without acknowledging a keepalive before
        /// it is lost: the endpoint sends one on its control QP every quarter
        /// of this, and closes when one stays unacknowledged this long or
        /// fails. Every waiting call then ends with [`Error::Closed`]. It
        /// also bounds how long [`RcEndpoint::send_remote_mr`] waits for the
        /// data QP's earlier requests. Default 10 s.
        const peer_timeout: std::time::Duration;
        /// Bytes of this endpoint's pool the peer may hold at once on its
        /// [`RcEndpoint::request_remote_mr`]s; a request beyond it is denied
        /// ([`Denial::QuotaBytes`](super::Denial::QuotaBytes)). A piece the
        /// peer gave back counts until [`RcEndpoint::receive_local_mr`]
        /// takes it. Default 4 MiB.
        const grant_quota_bytes: usize;
        /// Pieces the peer may hold at once on its requests (one it gave back
        /// counts until [`RcEndpoint::receive_local_mr`] takes it); beyond
        /// it, [`Denial::QuotaCount`](super::Denial::QuotaCount). Default 64.
        const grant_quota_count: usize;
        /// Regions the peer may lend that [`RcEndpoint::receive_remote_mr`]
        /// has not taken yet; one more is a protocol violation that closes
        /// the endpoint with [`Error::Protocol`]. Default 64.
        const lend_backlog: usize;
    }

    /// Requires a shared secret in the TCP set-up ([`RcEndpoint::connect`],
    /// [`Listener::accept`](super::Listener::accept)): each side proves it
    /// knows the secret over the other's fresh nonce (HMAC-SHA-256, as
    /// `ctrl` does) before either opens a device; a wrong or missing secret
    /// is [`Error::Protocol`] at both ends. Both sides must set the same
    /// one. It keeps strangers out; it does not protect the connection from
    /// an attacker on the path. The RDMA CM path has no such handshake:
    /// [`RcEndpoint::connect_cm`] and [`Listener::bind_cm`](super::Listener::bind_cm)
    /// refuse an `AioOpts` with a secret. Default: none.
    ///
    /// # Panics
    /// If `secret` is empty (no secret at all is the default; an empty one
    /// would look like protection and give none).
    #[must_use]
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> AioOpts {
        let s = secret.as_ref();
        assert!(!s.is_empty(), "AioOpts::secret: the secret is empty; leave it unset to run without one");
        self.secret = Some(Secret(s.into()));
        self
    }

    /// Refuses a secret on the RDMA CM path, which has no handshake for it.
    #[cfg(feature = "cm")]
    pub(super) fn check_no_secret(&self, op: &'static str, device: &str) -> Result<()> {
        match self.secret {
            Some(_) => Err(Error::Verbs(crate::prim::Error::unsupported(
                op,
                &crate::prim::unsupported::AIO_CM_SECRET,
                device,
                "a secret set",
            ))),
            None => Ok(()),
        }
    }
}

/// A received message: its length and immediate data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes received.
    pub len: usize,
    /// Immediate data, if the sender attached any.
    pub imm: Option<u32>,
}

/// What ends an endpoint from the side of its transport: the TCP
/// connection's end, or the RDMA CM's `DISCONNECTED`. Built by each way of
/// connecting; it owns what it watches (the socket, the CM id).
pub(super) type Watch = Pin<Box<dyn Future<Output = Gone> + Send>>;

/// How the transport ended.
pub(super) enum Gone {
    /// The peer went away (EOF, reset, disconnect).
    Lost,
    /// The peer broke the set-up protocol after the fact (bytes on the TCP
    /// connection after set-up).
    Violation(String),
}

/// An RC connection whose operations are futures (see the module docs).
#[derive(Debug)]
pub struct RcEndpoint {
    shared: Arc<Shared>,
    ctrl: Arc<Ctrl>,
    pool: MrPool,
    returned: tokio::sync::Mutex<mpsc::UnboundedReceiver<Returned>>,
    lent_in: tokio::sync::Mutex<mpsc::Receiver<RemoteMr>>,
    /// [`AioOpts::peer_timeout`], which also bounds `send_remote_mr`'s wait.
    peer_timeout: Duration,
    _ctx: Context,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("data", &self.data).field("ctrl", &self.ctrl).finish_non_exhaustive()
    }
}

/// An endpoint's objects before its driver starts: built by both ways of
/// connecting (TCP exchange, RDMA CM).
/// The remote access the data QP gets: `access`, less `REMOTE_ATOMIC` on a
/// device without atomics (iWARP), whose QPs refuse it
/// ([`Context::atomics`]); there [`RcEndpoint::fetch_add`] and
/// [`RcEndpoint::compare_swap`] fail with the typed
/// [`prim::Error::Unsupported`](crate::prim::Error::Unsupported) of the post.
pub(super) fn granted(ctx: &Context, access: AccessFlags) -> AccessFlags {
    if ctx.atomics() {
        access
    } else {
        access.difference(AccessFlags::REMOTE_ATOMIC)
    }
}

pub(super) struct Parts {
    pub ctx: Context,
    channel: CompChannel,
    cq: crate::prim::Cq,
    pub data: Qp,
    pub ctrl_qp: Qp,
    pool: MrPool,
    pub ctrl: Arc<Ctrl>,
    inbox: Inbox,
}

impl Parts {
    /// The PD, CQ, data and control QPs (RESET), pool and control buffers on `ctx`.
    pub fn new(ctx: Context, o: &AioOpts) -> Result<Parts> {
        let pd = Pd::alloc(&ctx)?;
        let channel = CompChannel::create(&ctx)?;
        let cq = Cq::builder(&ctx, o.cq_size).channel(&channel).build()?;
        let data = Qp::builder(&pd, crate::prim::QpType::RC, &cq, &cq).caps(o.caps).build()?;
        let ctrl_caps = QpCaps {
            max_send_wr: CTRL_SENDS,
            max_recv_wr: CTRL_RECVS,
            max_inline_data: MSG as u32,
            ..QpCaps::default()
        };
        let ctrl_qp = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(ctrl_caps).build()?;
        let pool = MrPool::new(&pd, o.pool_size)?;
        let limits =
            Limits { grant_bytes: o.grant_quota_bytes, grant_count: o.grant_quota_count, lend_backlog: o.lend_backlog };
        let (ctrl, inbox) = Ctrl::new(&pool, limits)?;
        Ok(Parts { ctx, channel, cq, data, ctrl_qp, pool, ctrl: Arc::new(ctrl), inbox })
    }

    /// Posts the control QP's receives (it must be in INIT or later).
    pub fn post_ctrl_recvs(&self) -> Result<()> {
        for i in 0..CTRL_RECVS as usize {
            self.ctrl.repost(&self.ctrl_qp, i)?;
        }
        Ok(())
    }

    /// Starts the driver task and the watch task (keepalives, and `gone`,
    /// the transport's end): the endpoint is ready.
    pub fn start(self, o: &AioOpts, gone: Watch) -> RcEndpoint {
        let shared = Arc::new(Shared::new(self.data, self.ctrl_qp, self.cq, o.busy_poll, o.spin_polls));
        let c = Arc::clone(&self.ctrl);
        let _ = shared.on_control.set(Box::new(move |s, wc| c.on_completion(s, wc)));
        tokio::spawn(driver::run(Arc::clone(&shared), self.channel));
        tokio::spawn(watch(Arc::clone(&shared), Arc::clone(&self.ctrl), gone, o.peer_timeout));
        RcEndpoint {
            shared,
            ctrl: self.ctrl,
            pool: self.pool,
            returned: tokio::sync::Mutex::new(self.inbox.returned),
            lent_in: tokio::sync::Mutex::new(self.inbox.lent_in),
            peer_timeout: o.peer_timeout,
            _ctx: self.ctx,
        }
    }
}

impl RcEndpoint {
    /// The capacities a control QP needs for [`RcEndpoint::new`]: 256 send
    /// and 64 receive requests, one entry each, 32 bytes inline (the
    /// protocol's messages are sent inline). Build it with
    /// `Qp::builder(&pd, QpType::RC, &cq, &cq).caps(RcEndpoint::control_caps())`.
    pub fn control_caps() -> QpCaps {
        QpCaps { max_send_wr: CTRL_SENDS, max_recv_wr: CTRL_RECVS, max_inline_data: MSG as u32, ..QpCaps::default() }
    }

    /// An endpoint over an RC connection and memory the caller already
    /// has, as [`LocalEndpoint::new`](super::LocalEndpoint::new) takes
    /// them: `data`, the connected QP the operations run on; `ctrl`, a
    /// second connected RC QP to the same peer, for the memory-region
    /// protocol and the keepalive (capacities at least
    /// [`RcEndpoint::control_caps`]); `cq`, which both QPs' send and
    /// receive queues complete to; and `pool`, registered on the QPs'
    /// protection domain. The peer runs the same over its ends of the two
    /// connections (or speaks the protocol, docs/aio.md). A
    /// [`LocalEndpoint`](super::LocalEndpoint) gives its QP, CQ and pool
    /// back with [`LocalEndpoint::into_parts`](super::LocalEndpoint::into_parts),
    /// so one program can run the same operations through both endpoints
    /// over one connection and one pool.
    ///
    /// `opts` gives the driver's and the protocol's settings (`busy_poll`,
    /// `spin_polls`, `peer_timeout`, the grant quotas, `lend_backlog`);
    /// what it says of the device, the port, the QPs, the CQ, the pool and
    /// the connection is the caller's already and is not used.
    ///
    /// The isolation rules are those of a connected endpoint: the pool is
    /// registered for local access only ([`MrPool::new`]), a piece lent or
    /// granted gets a registration of its own over exactly its bytes, the
    /// quotas bound what the peer can make the endpoint hold, and the
    /// control QP grants no remote access (checked here, read back from the
    /// device). The data QP keeps the access the caller connected it with;
    /// the endpoint adds none, so what else the peer may reach is what the
    /// caller registered with remote access on the protection domain. With
    /// no TCP connection or CM id to watch, a peer that goes away is found
    /// by the keepalive ([`AioOpts::peer_timeout`]) and by the data QP's
    /// transport timeout.
    ///
    /// Until the peer's endpoint has posted its control receives, this
    /// side's first control message (a keepalive after a quarter of
    /// `peer_timeout`, or a request) waits in the device's RNR retries:
    /// connect the control QPs with `rnr_retry` 7 (the [`ConnectOpts`]
    /// default, retrying for as long as it takes), or start both sides
    /// within the retries' time.
    ///
    /// Call it inside a tokio runtime (it starts the endpoint's driver and
    /// keepalive tasks).
    ///
    /// # Errors
    /// What the device answers to the QPs' queries, and the pool's
    /// exhaustion ([`Error::PoolExhausted`]) for the control protocol's 64
    /// receive buffers of 32 bytes (taken from `pool`).
    ///
    /// # Panics
    /// Outside a tokio runtime; if a QP is not an RC QP in the ready-to-send
    /// state (connected), completes to another CQ than `cq`, receives
    /// through an SRQ, or is or was driven through an mlx5dv view; if
    /// `ctrl` is smaller than [`RcEndpoint::control_caps`] or grants remote
    /// access; if the QPs and the pool are not on one protection domain; if
    /// any handle to `cq` lives besides `cq` and the two QPs; if `cq` has no
    /// completion channel ([`CqBuilder::channel`](crate::prim::CqBuilder::channel)),
    /// compresses its CQEs or serves tag matching. All are programming
    /// errors, as for `LocalEndpoint::new`.
    pub fn new(data: Qp, ctrl: Qp, cq: Cq, pool: MrPool, opts: &AioOpts) -> Result<RcEndpoint> {
        assert!(
            tokio::runtime::Handle::try_current().is_ok(),
            "RcEndpoint::new: called outside a tokio runtime, and the endpoint's driver is a task: call it from \
             inside the runtime (an async fn, or Runtime::enter)"
        );
        for (qp, role) in [(&data, "data"), (&ctrl, "control")] {
            let qpn = qp.qpn();
            assert!(
                qp.qp_type() == QpType::RC,
                "RcEndpoint::new: the {role} QP {qpn:#x} is {:?}, not RC: build it with QpType::RC",
                qp.qp_type()
            );
            let (send_cq, recv_cq) = qp.cqs();
            assert!(
                send_cq.as_ptr() == cq.as_ptr() && recv_cq.as_ptr() == cq.as_ptr(),
                "RcEndpoint::new: the {role} QP {qpn:#x} does not complete to the CQ given (both QPs' send and \
                 receive queues must use it): build them with Qp::builder(pd, QpType::RC, &cq, &cq)"
            );
            assert!(
                !qp.has_srq(),
                "RcEndpoint::new: the {role} QP {qpn:#x} receives through an SRQ, and the endpoint posts its own \
                 receives: build it without QpBuilder::srq"
            );
            assert!(
                !qp.direct.ever_viewed(),
                "RcEndpoint::new: the send queue of the {role} QP {qpn:#x} is or was driven through an mlx5dv \
                 view, and libibverbs' producer index no longer matches the device's: give the endpoint a QP \
                 never viewed"
            );
            assert!(
                qp.pd().as_ptr() == pool.pd().as_ptr(),
                "RcEndpoint::new: the {role} QP {qpn:#x} and the pool are on different protection domains: \
                 make the pool with MrPool::new(qp.pd(), len)"
            );
            let state = qp.query_state()?;
            assert!(
                state == crate::prim::QpState::RTS,
                "RcEndpoint::new: the {role} QP {qpn:#x} is in state {state:?}, not connected (RTS): connect it \
                 first (Qp::connect, wrap::connected_rc_pair, or the RDMA CM)"
            );
        }
        let need = RcEndpoint::control_caps();
        let caps = ctrl.caps();
        assert!(
            caps.max_send_wr >= need.max_send_wr
                && caps.max_recv_wr >= need.max_recv_wr
                && caps.max_inline_data >= need.max_inline_data,
            "RcEndpoint::new: the control QP {:#x} has room for {} sends, {} receives and {} inline bytes; the \
             protocol needs {}, {} and {}: build it with QpBuilder::caps(RcEndpoint::control_caps())",
            ctrl.qpn(),
            caps.max_send_wr,
            caps.max_recv_wr,
            caps.max_inline_data,
            need.max_send_wr,
            need.max_recv_wr,
            need.max_inline_data
        );
        let access = ctrl.query_access()?;
        let remote = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
        assert!(
            !access.intersects(remote),
            "RcEndpoint::new: the control QP {:#x} grants remote access ({access:?}), and the control QP of an \
             endpoint takes only SENDs: connect it with ConnectOpts::access(AccessFlags::empty())",
            ctrl.qpn()
        );
        // `cq` and the two QPs' two each.
        let others = cq.handles().saturating_sub(5);
        assert!(
            others == 0,
            "RcEndpoint::new: the CQ of QP {:#x} has {others} other handle(s) (Cq clones, or other QPs, SRQs, \
             WQs or views made on it), and the endpoint must be its CQ's only poller: give it a CQ of its own, \
             and drop the clones and the other objects made on that CQ first",
            data.qpn()
        );
        assert!(
            cq.compression().is_none() && !cq.is_tag_matching(),
            "RcEndpoint::new: the CQ compresses its CQEs or serves tag matching, and the endpoint polls with \
             Cq::poll, which refuses such a CQ: build it without CqBuilder::mlx5_compression and \
             CqBuilder::tag_matching"
        );
        let channel = cq.channel().cloned().unwrap_or_else(|| {
            panic!(
                "RcEndpoint::new: the CQ has no completion channel, which the endpoint's driver sleeps on: build \
                 it with CqBuilder::channel"
            )
        });
        let limits = Limits {
            grant_bytes: opts.grant_quota_bytes,
            grant_count: opts.grant_quota_count,
            lend_backlog: opts.lend_backlog,
        };
        let (c, inbox) = Ctrl::new(&pool, limits)?;
        let p = Parts {
            ctx: data.pd().context().clone(),
            channel,
            cq,
            data,
            ctrl_qp: ctrl,
            pool,
            ctrl: Arc::new(c),
            inbox,
        };
        p.post_ctrl_recvs()?;
        // No transport to watch: the keepalive finds a peer that is gone.
        Ok(p.start(opts, Box::pin(std::future::pending())))
    }
}

/// The watch task: sends a keepalive on the control QP every quarter of
/// `peer_timeout` and closes the endpoint when one stays unacknowledged for
/// `peer_timeout` (a failed one closes it at once, in the driver), or when
/// the transport ends (`gone`). Exits when the endpoint closes, dropping
/// what `gone` owns (the TCP socket, the CM id: the peer sees the end).
async fn watch(shared: Arc<Shared>, ctrl: Arc<Ctrl>, gone: Watch, peer_timeout: Duration) {
    let mut gone = gone;
    let mut tick = tokio::time::interval((peer_timeout / 4).max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut sent, mut sent_at) = (0u64, tokio::time::Instant::now());
    loop {
        tokio::select! {
            _ = shared.closed() => return,
            g = &mut gone => {
                match g {
                    Gone::Lost => shared.shut_down(),
                    Gone::Violation(why) => shared.violated(why),
                }
                return;
            }
            _ = tick.tick() => {
                if ctrl.pings_acked.load(Ordering::Acquire) < sent {
                    if sent_at.elapsed() >= peer_timeout {
                        shared.shut_down();
                        return;
                    }
                } else if !shared.closing.load(Ordering::Acquire) && ctrl.ping(&shared.ctrl).is_ok() {
                    sent += 1;
                    sent_at = tokio::time::Instant::now();
                }
            }
        }
    }
}

/// The TCP connection's end as a [`Watch`]: EOF or an error is a lost
/// peer; bytes after the set-up are a protocol violation.
fn watch_tcp(mut tcp: TcpStream) -> Watch {
    Box::pin(async move {
        let mut b = [0u8; 1];
        match tcp.read(&mut b).await {
            Ok(0) | Err(_) => Gone::Lost,
            Ok(_) => Gone::Violation("it sent bytes on the TCP connection after the set-up".into()),
        }
    })
}

impl RcEndpoint {
    /// Connects to a [`Listener`](super::Listener) at `addr`. The whole
    /// exchange is bounded by [`AioOpts::setup_timeout`].
    pub async fn connect(addr: impl ToSocketAddrs, opts: &AioOpts) -> Result<RcEndpoint> {
        let stream = TcpStream::connect(addr).await.map_err(Error::io("connect to an RcEndpoint listener", None))?;
        RcEndpoint::establish(stream, opts, false).await
    }

    /// The TCP exchange, bounded by `setup_timeout`. The accepting side
    /// reads and checks the peer's QP numbers before it builds anything
    /// (no pool is registered for a client that says nothing valid).
    pub(super) async fn establish(tcp: TcpStream, o: &AioOpts, accepting: bool) -> Result<RcEndpoint> {
        let after = o.setup_timeout;
        tokio::time::timeout(after, RcEndpoint::exchange(tcp, o, accepting))
            .await
            .map_err(|_| Error::Timeout { op: "the TCP set-up exchange with the peer", after })?
    }

    async fn exchange(mut tcp: TcpStream, o: &AioOpts, accepting: bool) -> Result<RcEndpoint> {
        let peer = tcp.peer_addr().ok();
        let mut theirs = [0u8; 2 * QpInfo::WIRE_LEN];
        let parse = |b: &[u8]| {
            QpInfo::from_bytes(b.try_into().expect("QpInfo::WIRE_LEN bytes"))
                .map_err(|e| Error::Protocol(e.to_string()))
        };
        if accepting {
            match &o.secret {
                Some(s) => auth::accept(&mut tcp, s, &mut theirs, peer).await?,
                None => {
                    tcp.read_exact(&mut theirs).await.map_err(Error::io("read the peer's QP numbers", peer))?;
                }
            }
            parse(&theirs[..QpInfo::WIRE_LEN])?;
            parse(&theirs[QpInfo::WIRE_LEN..])?;
        }
        let p = Parts::new(Context::open(&o.device)?, o)?;
        let gid = o.connect.gid_index_on(&p.ctx)?;
        let active = p.ctx.query_port(o.port)?.active_mtu();
        let mtu = o.connect.mtu.min(active);
        let psn = crate::prim::random_psn();
        // The data QP offers the device's depths (or those set); the peer's
        // offer clamps them below.
        let depths = o.connect.with_device_rd_atomic(&p.ctx)?;
        let (init, dest) = depths.rd_atomic();
        let mine = [
            QpInfo::new(&p.data.endpoint(o.port, gid, psn)?, gid, o.port, mtu).with_rd_atomic(init, dest),
            QpInfo::new(&p.ctrl_qp.endpoint(o.port, gid, psn.wrapping_add(1))?, gid, o.port, mtu),
        ];
        let mut out = Vec::with_capacity(2 * QpInfo::WIRE_LEN);
        for m in &mine {
            out.extend_from_slice(&m.to_bytes());
        }
        match (&o.secret, accepting) {
            (Some(s), false) => auth::connect(&mut tcp, s, &out, peer).await?,
            _ => tcp.write_all(&out).await.map_err(Error::io("send the QP numbers to the peer", peer))?,
        }
        if !accepting {
            tcp.read_exact(&mut theirs).await.map_err(Error::io("read the peer's QP numbers", peer))?;
        }
        let (peer_data, peer_ctrl) = (parse(&theirs[..QpInfo::WIRE_LEN])?, parse(&theirs[QpInfo::WIRE_LEN..])?);
        let copts = ConnectOpts {
            gid_index: Some(gid),
            port: o.port,
            mtu: mtu.min(peer_data.mtu),
            access: granted(&p.ctx, o.connect.access),
            ..depths.clamp_rd_atomic(peer_data.rd_atomic, peer_data.dest_rd_atomic)
        };
        p.data.connect(&peer_data.endpoint(), mine[0].psn, &copts)?;
        // The control QP takes only SENDs: no remote access at all.
        let ctrl_opts = ConnectOpts { access: AccessFlags::empty(), ..copts };
        p.ctrl_qp.connect(&peer_ctrl.endpoint(), mine[1].psn, &ctrl_opts)?;
        p.post_ctrl_recvs()?;
        // Both sides' receives are posted: either may send from now on.
        tcp.write_all(b"R").await.map_err(Error::io("send the ready byte to the peer", peer))?;
        let mut ready = [0u8; 1];
        tcp.read_exact(&mut ready).await.map_err(Error::io("read the peer's ready byte", peer))?;
        if ready != *b"R" {
            return Err(Error::Protocol("the peer's ready byte is wrong".into()));
        }
        Ok(p.start(o, watch_tcp(tcp)))
    }

    /// The data QP's number.
    pub fn qpn(&self) -> u32 {
        self.shared.data.qpn()
    }

    /// The data QP's READ and atomic depths, read back from the device
    /// ([`Qp::query_rd_atomic`](crate::prim::Qp::query_rd_atomic)): how many
    /// READs and atomics it keeps outstanding as initiator, and how many of
    /// the peer's it takes as responder.
    pub fn rd_atomic(&self) -> Result<(u8, u8)> {
        Ok(self.shared.data.query_rd_atomic()?)
    }

    /// The endpoint's registered memory pool.
    pub fn pool(&self) -> &MrPool {
        &self.pool
    }

    /// A zeroed piece of the pool ([`MrPool::alloc`]).
    pub fn alloc_local_mr(&self, layout: Layout) -> Result<LocalMr> {
        self.pool.alloc(layout).ok_or(Error::PoolExhausted { size: layout.size(), free: self.pool.free_bytes() })
    }

    /// One send-queue request (signaled), `wr` over `range` of `buf`: the
    /// future that posts it at its first poll and resolves with `output`
    /// of its completion and buffer. An operation returns this future
    /// itself, not an `async fn` around it: a smaller future, moved and
    /// polled for less.
    #[inline]
    fn post_send_op<'s, T>(
        &'s self,
        buf: LocalMr,
        range: Range<usize>,
        wr: impl for<'a> Fn(&'a [Sge; 1]) -> SendWr<'a> + 's,
        output: impl Fn(&Wc, LocalMr) -> T + 's,
    ) -> Completion<'s, impl Fn(&Qp, u64) -> crate::prim::Result<()> + 's, impl Fn(&Wc, LocalMr) -> T + 's> {
        let sge = [buf.sge(range)];
        // SAFETY: every entry lies in `buf`, which the operation holds from
        // before the post; it keeps it until this request's completion,
        // and if dropped before, hands it to the table of requests in
        // flight, which keeps it until the completion or until the QP is
        // destroyed.
        let post = move |qp: &Qp, id| unsafe { qp.post_send(&mut [wr(&sge).wr_id(id).signaled()]) };
        self.shared.operation(true, buf, post, output)
    }

    /// One receive into the whole of `buf`, as [`RcEndpoint::post_send_op`].
    #[inline]
    fn post_recv_op<T>(
        &self,
        buf: LocalMr,
        output: impl Fn(&Wc, LocalMr) -> T,
    ) -> Completion<'_, impl Fn(&Qp, u64) -> crate::prim::Result<()>, impl Fn(&Wc, LocalMr) -> T> {
        let sge = [buf.sge(0..buf.len())];
        // SAFETY: as in `post_send_op`: the operation, then the table,
        // holds the buffer until the completion or the QP's destruction.
        let post = move |qp: &Qp, id| unsafe { qp.post_recv(&mut [RecvWr::new(&sge, id)]) };
        self.shared.operation(false, buf, post, output)
    }

    /// RDMA WRITE of `range` of `src` to `dst`; gives `src` back.
    #[inline]
    pub fn write(
        &self,
        src: LocalMr,
        range: Range<usize>,
        dst: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.post_send_op(src, range, move |s| SendWr::write(s, dst), |_, buf| buf)
    }

    /// RDMA WRITE with immediate data (consumes a receive at the peer).
    #[inline]
    pub fn write_with_imm(
        &self,
        src: LocalMr,
        range: Range<usize>,
        dst: RemoteAddr,
        imm: u32,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.post_send_op(src, range, move |s| SendWr::write_imm(s, dst, imm), |_, buf| buf)
    }

    /// RDMA READ from `src` into `range` of `dst`; gives `dst` back.
    #[inline]
    pub fn read(
        &self,
        dst: LocalMr,
        range: Range<usize>,
        src: RemoteAddr,
    ) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.post_send_op(dst, range, move |s| SendWr::read(s, src), |_, buf| buf)
    }

    /// SEND of `range` of `src` (consumes a receive at the peer).
    ///
    /// It completes once the peer has a receive posted (`recv`): with the
    /// default `connect.rnr_retry` of 7 the device retries a peer that has
    /// none for as long as it takes, and the requests posted after it wait
    /// behind it. Where the peer may never receive, give the `connect`
    /// options of [`AioOpts`] an `rnr_retry` below 7 (the SEND then fails
    /// with `RNR_RETRY_EXC_ERR` after that many of the peer's RNR waits, and
    /// the endpoint closes), or bound the call with `tokio::time::timeout`
    /// and drop the endpoint.
    #[inline]
    pub fn send(&self, src: LocalMr, range: Range<usize>) -> impl Future<Output = Result<LocalMr>> + '_ {
        self.post_send_op(src, range, |s| SendWr::send(s), |_, buf| buf)
    }

    /// 8-byte fetch-and-add at `dst` (8-byte aligned); the old value.
    pub async fn fetch_add(&self, dst: RemoteAddr, add: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.post_send_op(old, 0..8, move |s| SendWr::fetch_add(s, dst, add), |_, old| read_u64(&old)).await
    }

    /// 8-byte compare-and-swap at `dst` (8-byte aligned); the old value
    /// (equal to `compare` when the swap happened).
    pub async fn compare_swap(&self, dst: RemoteAddr, compare: u64, swap: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        self.post_send_op(old, 0..8, move |s| SendWr::compare_swap(s, dst, compare, swap), |_, old| read_u64(&old))
            .await
    }

    /// Receives one message (a SEND or a WRITE with immediate) into `dst`.
    #[inline]
    pub fn recv(&self, dst: LocalMr) -> impl Future<Output = Result<(Received, LocalMr)>> + '_ {
        self.post_recv_op(dst, |wc, buf| {
            let imm = if wc.opcode() == WcOpcode::RECV_RDMA_WITH_IMM || wc.imm().is_some() { wc.imm() } else { None };
            (Received { len: wc.byte_len() as usize, imm }, buf)
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(self.shared.close_error());
        }
        Ok(())
    }

    /// Asks the peer for a region of `layout` from its pool; its token.
    ///
    /// At most 16 requests of one endpoint await answers at once (later
    /// ones wait for a slot). A refusal is [`Error::Denied`] with the peer's
    /// reason; a closed or lost endpoint, [`Error::Closed`]. If this future
    /// is dropped before the answer, a grant that arrives later is given
    /// straight back to the peer.
    pub async fn request_remote_mr(&self, layout: Layout) -> Result<RemoteMr> {
        self.check_open()?;
        let (id, rx) = tokio::select! {
            r = self.ctrl.begin_request() => r,
            _ = self.shared.closed() => return Err(self.shared.close_error()),
        };
        let ask = RemoteMr { addr: layout.size() as u64, len: layout.align() as u64, rkey: 0 };
        if let Err(e) = self.ctrl.send(&self.shared.ctrl, &Msg::new(Kind::Request, id, ask)) {
            self.ctrl.abandon_request(id);
            return Err(e);
        }
        let mut rx = rx;
        let answer = tokio::select! {
            biased;
            answer = &mut rx => answer.ok(),
            _ = self.shared.closed() => {
                // An answer already in the CQ is still handed over.
                self.shared.stopped().await;
                rx.try_recv().ok()
            }
        };
        match answer {
            Some(Ok(token)) => Ok(token),
            Some(Err(why)) => Err(Error::Denied { size: layout.size(), why }),
            None => Err(self.shared.close_error()),
        }
    }

    /// [`RcEndpoint::request_remote_mr`] bounded by `timeout`
    /// ([`Error::Timeout`] after it; a grant that arrives later is given back).
    pub async fn request_remote_mr_with_timeout(&self, layout: Layout, timeout: Duration) -> Result<RemoteMr> {
        tokio::time::timeout(timeout, self.request_remote_mr(layout))
            .await
            .map_err(|_| Error::Timeout { op: "waiting for the peer's answer to request_remote_mr", after: timeout })?
    }

    /// Gives a region the peer granted (or lent) back to it; the peer gets
    /// it from [`RcEndpoint::receive_local_mr`].
    ///
    /// The return is sent only after every data-QP request posted before
    /// this call has completed (dropped futures' included), so no WRITE or
    /// READ of ours reaches the region after the peer has reused it. That
    /// wait is bounded by [`AioOpts::peer_timeout`]: a request the peer
    /// holds up longer (a SEND it answers with RNR NAKs while it posts no
    /// receive, which the default `rnr_retry` of 7 retries forever) ends the
    /// call with [`Error::Timeout`], the region not given back (call again
    /// once those requests have completed).
    pub async fn send_remote_mr(&self, mr: RemoteMr) -> Result<()> {
        self.check_open()?;
        let bound = self.peer_timeout;
        tokio::time::timeout(bound, self.after_earlier_requests()).await.map_err(|_| Error::Timeout {
            op: "send_remote_mr: waiting for the data QP's earlier requests to complete",
            after: bound,
        })??;
        self.ctrl.send(&self.shared.ctrl, &Msg::new(Kind::Return, 0, mr))
    }

    /// Resolves once every data-QP request posted before the call has
    /// completed; [`Error::Closed`] if the endpoint closes first.
    async fn after_earlier_requests(&self) -> Result<()> {
        let mark = self.shared.mark();
        let _watch = self.shared.watch_progress();
        loop {
            let progress = self.shared.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            self.check_open()?;
            if !self.shared.sq_before(mark) {
                break;
            }
            tokio::select! {
                _ = progress => {}
                _ = self.shared.closed() => return Err(self.shared.close_error()),
            }
        }
        Ok(())
    }

    /// The next region of this side's pool that the peer gave back
    /// (deregistered: the peer can no longer reach it). Ends with
    /// [`Error::Closed`] when the endpoint closes or the peer is lost
    /// (within [`AioOpts::peer_timeout`]).
    pub async fn receive_local_mr(&self) -> Result<LocalMr> {
        let mut returned = self.returned.lock().await;
        tokio::select! {
            biased;
            r = returned.recv() => {
                return r.map(|r| self.ctrl.take_returned(r)).ok_or_else(|| self.shared.close_error())
            }
            _ = self.shared.closed() => {}
        }
        // Closed: a return that was already in the CQ is still handed over.
        self.shared.stopped().await;
        returned.try_recv().map(|r| self.ctrl.take_returned(r)).map_err(|_| self.shared.close_error())
    }

    /// [`RcEndpoint::receive_local_mr`] bounded by `timeout` ([`Error::Timeout`] after it).
    pub async fn receive_local_mr_with_timeout(&self, timeout: Duration) -> Result<LocalMr> {
        tokio::time::timeout(timeout, self.receive_local_mr())
            .await
            .map_err(|_| Error::Timeout { op: "waiting for the peer to give a region back", after: timeout })?
    }

    /// Lends `mr` to the peer: it gets a registration of its own over
    /// exactly its bytes (the peer reaches this piece and nothing else) and
    /// stays owned by this endpoint until the peer gives it back
    /// ([`RcEndpoint::receive_local_mr`]), when that registration is
    /// removed.
    pub async fn send_local_mr(&self, mr: LocalMr) -> Result<()> {
        self.check_open()?;
        let token = self.ctrl.lend(mr)?;
        if let Err(e) = self.ctrl.send(&self.shared.ctrl, &Msg::new(Kind::Lend, 0, token)) {
            drop(self.ctrl.unlend(&token));
            return Err(e);
        }
        Ok(())
    }

    /// The next region the peer lent. Ends with [`Error::Closed`] when the
    /// endpoint closes or the peer is lost (within [`AioOpts::peer_timeout`]).
    pub async fn receive_remote_mr(&self) -> Result<RemoteMr> {
        let mut lent_in = self.lent_in.lock().await;
        tokio::select! {
            biased;
            t = lent_in.recv() => return t.ok_or_else(|| self.shared.close_error()),
            _ = self.shared.closed() => {}
        }
        // Closed: a lend that was already in the CQ is still handed over.
        self.shared.stopped().await;
        lent_in.try_recv().map_err(|_| self.shared.close_error())
    }

    /// [`RcEndpoint::receive_remote_mr`] bounded by `timeout` ([`Error::Timeout`] after it).
    pub async fn receive_remote_mr_with_timeout(&self, timeout: Duration) -> Result<RemoteMr> {
        tokio::time::timeout(timeout, self.receive_remote_mr())
            .await
            .map_err(|_| Error::Timeout { op: "waiting for the peer to lend a region", after: timeout })?
    }

    /// Bytes and pieces of this endpoint's pool the peer holds on its
    /// requests, with those it gave back that
    /// [`receive_local_mr`](Self::receive_local_mr) has not taken yet: what
    /// counts against [`AioOpts::grant_quota_bytes`] and
    /// [`AioOpts::grant_quota_count`]. A returned piece leaves the quota
    /// when the application takes it, so an endpoint that only serves
    /// requests and never takes returns grants at most the quota in all.
    pub fn granted_to_peer(&self) -> (usize, usize) {
        self.ctrl.granted()
    }

    /// Whether the endpoint is closed (dropped by the peer, lost, or shut
    /// down after a protocol violation); the reason, as the error its calls return.
    pub fn closed_reason(&self) -> Option<Error> {
        self.shared.closing.load(Ordering::Acquire).then(|| self.shared.close_error())
    }

    /// The data and control QPs (for the crate's own tests).
    #[cfg(test)]
    pub(super) fn qps(&self) -> (&Qp, &Qp) {
        (&self.shared.data, &self.shared.ctrl)
    }

    /// Requests posted and not yet completed (the memory they hold included).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight()
    }
}

fn read_u64(mr: &LocalMr) -> u64 {
    let mut b = [0u8; 8];
    mr.read(0, &mut b);
    u64::from_ne_bytes(b)
}

impl Drop for RcEndpoint {
    /// Moves the QPs to the error state: every request still in flight
    /// completes with `WR_FLUSH_ERR`, the driver hands the buffers back to
    /// the pool as they do, and exits; the QPs are destroyed after that.
    fn drop(&mut self) {
        self.shared.shut_down();
    }
}

#[cfg(test)]
mod future_size {
    use super::*;

    /// The size of the future an operation of this signature returns.
    fn size<'a, F, Fut>(_: F) -> usize
    where
        F: FnOnce(&'a RcEndpoint, LocalMr, Range<usize>, RemoteAddr) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// An operation's future is its completion alone (the post's entry
    /// and remote address, the buffer, the `wr_id`), not an `async fn`
    /// around it, nor a future of the post nested in it: every operation
    /// moves it at least once, and each step down in size took
    /// instructions off an awaited WRITE (336 bytes with a nested post, 160
    /// with the request and the QP held in an `async fn`, 80 now).
    #[test]
    fn an_operations_future_is_its_completion() {
        let held = std::mem::size_of::<Completion<'static, (Sge, RemoteAddr), ()>>();
        for (op, n) in [("write", size(RcEndpoint::write)), ("read", size(RcEndpoint::read))] {
            assert!(n <= held, "{op}: a future of {n} bytes (its completion: {held})");
        }
    }
}
