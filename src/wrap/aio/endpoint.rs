//! [`RcEndpoint`]: an RC connection whose operations are futures, and the
//! memory-region protocol on its control QP.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{mpsc, oneshot};

use super::driver::{self, Shared, CONTROL_BIT};
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
/// | `connect` | [`ConnectOpts::default`] with remote read, write and atomic access granted |
/// | `busy_poll` | `false`: the driver sleeps on the completion channel |
/// | `setup_timeout` | 10 s: bound on each RDMA CM step of [`RcEndpoint::connect_cm`] and [`Listener::bind_cm`](super::Listener::bind_cm)'s accept |
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
    pub(crate) setup_timeout: std::time::Duration,
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
            setup_timeout: std::time::Duration::from_secs(10),
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
        /// [`ConnectOpts::default`] with remote read, write and atomic access granted.
        const connect: ConnectOpts;
        /// Spin on the CQ instead of sleeping on its channel: lower latency,
        /// a busy core. Default `false`.
        const busy_poll: bool;
        /// Bound on each step of a connection through the RDMA CM (address,
        /// route, connect, establish) in [`RcEndpoint::connect_cm`] and
        /// [`Listener::bind_cm`](super::Listener::bind_cm)'s accept. Default 10 s.
        const setup_timeout: std::time::Duration;
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

/// Control receives kept posted.
const CTRL_RECVS: u32 = 64;
/// Size of a control message.
const MSG: usize = 32;
/// wr_id of control sends (their completions are only acknowledged).
const CTRL_SEND: u64 = CONTROL_BIT | (1 << 62);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Request = 1,
    Grant = 2,
    Deny = 3,
    Lend = 4,
    Return = 5,
}

/// A control message: kind, id, and a token (or, for a request, size and
/// alignment in `addr` and `len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Msg {
    kind: Kind,
    id: u32,
    token: RemoteMr,
}

impl Msg {
    fn encode(&self) -> [u8; MSG] {
        let mut b = [0u8; MSG];
        b[0] = self.kind as u8;
        b[4..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.token.addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.token.len.to_le_bytes());
        b[24..28].copy_from_slice(&self.token.rkey.to_le_bytes());
        b
    }

    fn decode(b: &[u8; MSG]) -> Option<Msg> {
        let kind = match b[0] {
            1 => Kind::Request,
            2 => Kind::Grant,
            3 => Kind::Deny,
            4 => Kind::Lend,
            5 => Kind::Return,
            _ => return None,
        };
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Some(Msg { kind, id: u32_at(4), token: RemoteMr { addr: u64_at(8), len: u64_at(16), rkey: u32_at(24) } })
    }
}

/// The memory-region protocol's state, shared with the driver.
struct Ctrl {
    pool: MrPool,
    /// Posted control receive buffers, by index.
    bufs: Vec<LocalMr>,
    requests: Mutex<HashMap<u32, oneshot::Sender<Option<RemoteMr>>>>,
    next_request: AtomicU32,
    /// Regions granted to or lent to the peer: registered and owned here
    /// until given back (or until the endpoint is gone).
    out: Mutex<Vec<LocalMr>>,
    returned: mpsc::UnboundedSender<LocalMr>,
    lent_in: mpsc::UnboundedSender<RemoteMr>,
    broken: AtomicBool,
}

impl Ctrl {
    /// Sends a control message inline on the control QP (no buffer to keep).
    fn send(&self, qp: &Qp, msg: &Msg) -> Result<()> {
        let bytes = msg.encode();
        let sge = [Sge::from_raw(bytes.as_ptr() as u64, MSG as u32, 0)];
        // SAFETY: an inline send: the provider copies the 32 bytes during the
        // call; nothing is read from `bytes` afterwards.
        unsafe { qp.post_send(&mut [SendWr::send(&sge).inline().wr_id(CTRL_SEND).signaled()])? };
        Ok(())
    }

    /// Posts control receive `i`.
    fn repost(&self, qp: &Qp, i: usize) -> Result<()> {
        let sge = [self.bufs[i].sge(0..MSG)];
        // SAFETY: the buffer is owned by `self`, which the driver keeps until
        // the QP is destroyed.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sge, CONTROL_BIT | i as u64)])? };
        Ok(())
    }

    /// A control completion, in the driver.
    fn on_completion(&self, shared: &Shared, wc: Wc) {
        if wc.wr_id() == CTRL_SEND {
            if !wc.is_success() {
                self.broken.store(true, Ordering::Release);
            }
            return;
        }
        if !wc.is_success() {
            // Flushed or failed: the QP is going away; do not repost.
            self.broken.store(true, Ordering::Release);
            self.requests.lock().unwrap_or_else(|e| e.into_inner()).clear();
            return;
        }
        let i = (wc.wr_id() & !CONTROL_BIT) as usize;
        let mut b = [0u8; MSG];
        self.bufs[i].read(0, &mut b);
        if let Some(m) = Msg::decode(&b) {
            self.handle(shared, m);
        }
        if self.repost(&shared.ctrl, i).is_err() {
            self.broken.store(true, Ordering::Release);
        }
    }

    fn handle(&self, shared: &Shared, m: Msg) {
        match m.kind {
            Kind::Request => {
                let (size, align) = (m.token.addr as usize, m.token.len as usize);
                let layout = Layout::from_size_align(size, align.max(1)).ok();
                let answer = match layout.and_then(|l| self.pool.alloc(l)) {
                    Some(mr) => {
                        let token = mr.token();
                        self.out.lock().unwrap_or_else(|e| e.into_inner()).push(mr);
                        Msg { kind: Kind::Grant, id: m.id, token }
                    }
                    None => Msg { kind: Kind::Deny, id: m.id, token: m.token },
                };
                let _ = self.send(&shared.ctrl, &answer);
            }
            Kind::Grant | Kind::Deny => {
                let tx = self.requests.lock().unwrap_or_else(|e| e.into_inner()).remove(&m.id);
                if let Some(tx) = tx {
                    let _ = tx.send((m.kind == Kind::Grant).then_some(m.token));
                }
            }
            Kind::Lend => {
                let _ = self.lent_in.send(m.token);
            }
            Kind::Return => {
                let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(i) = out.iter().position(|mr| mr.is(&m.token)) {
                    let mr = out.swap_remove(i);
                    let _ = self.returned.send(mr);
                }
            }
        }
    }
}

/// An RC connection whose operations are futures (see the module docs).
#[derive(Debug)]
pub struct RcEndpoint {
    shared: Arc<Shared>,
    ctrl: Arc<Ctrl>,
    pool: MrPool,
    returned: tokio::sync::Mutex<mpsc::UnboundedReceiver<LocalMr>>,
    lent_in: tokio::sync::Mutex<mpsc::UnboundedReceiver<RemoteMr>>,
    /// The RDMA CM id of an endpoint connected through it: dropping it
    /// disconnects (the peer sees `DISCONNECTED`).
    #[cfg(feature = "cm")]
    _cm: Option<crate::prim::cm::CmId>,
    _ctx: Context,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("data", &self.data).field("ctrl", &self.ctrl).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Ctrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctrl").field("pool", &self.pool).finish_non_exhaustive()
    }
}

/// An endpoint's objects before its driver starts: built by both ways of
/// connecting (TCP exchange, RDMA CM).
pub(super) struct Parts {
    pub ctx: Context,
    channel: CompChannel,
    cq: crate::prim::Cq,
    pub data: Qp,
    pub ctrl_qp: Qp,
    pool: MrPool,
    ctrl: Arc<Ctrl>,
    returned: mpsc::UnboundedReceiver<LocalMr>,
    lent_in: mpsc::UnboundedReceiver<RemoteMr>,
    #[cfg(feature = "cm")]
    pub cm: Option<crate::prim::cm::CmId>,
}

impl Parts {
    /// The PD, CQ, data and control QPs (RESET), pool and control buffers on `ctx`.
    pub fn new(ctx: Context, o: &AioOpts) -> Result<Parts> {
        let pd = Pd::alloc(&ctx)?;
        let channel = CompChannel::create(&ctx)?;
        let cq = Cq::builder(&ctx, o.cq_size).channel(&channel).build()?;
        let data = Qp::builder(&pd, crate::prim::QpType::RC, &cq, &cq).caps(o.caps).build()?;
        let ctrl_caps =
            QpCaps { max_send_wr: 128, max_recv_wr: CTRL_RECVS, max_inline_data: MSG as u32, ..QpCaps::default() };
        let ctrl_qp = Qp::builder(&pd, QpType::RC, &cq, &cq).caps(ctrl_caps).build()?;
        let pool = MrPool::new(&pd, o.pool_size)?;
        let (returned_tx, returned) = mpsc::unbounded_channel();
        let (lent_tx, lent_in) = mpsc::unbounded_channel();
        let bufs = (0..CTRL_RECVS)
            .map(|_| {
                pool.alloc(Layout::new::<[u64; MSG / 8]>())
                    .ok_or(Error::PoolExhausted { size: MSG, free: pool.free_bytes() })
            })
            .collect::<Result<Vec<_>>>()?;
        let ctrl = Arc::new(Ctrl {
            pool: pool.clone(),
            bufs,
            requests: Mutex::new(HashMap::new()),
            next_request: AtomicU32::new(1),
            out: Mutex::new(Vec::new()),
            returned: returned_tx,
            lent_in: lent_tx,
            broken: AtomicBool::new(false),
        });
        Ok(Parts {
            ctx,
            channel,
            cq,
            data,
            ctrl_qp,
            pool,
            ctrl,
            returned,
            lent_in,
            #[cfg(feature = "cm")]
            cm: None,
        })
    }

    /// Posts the control QP's receives (it must be in INIT or later).
    pub fn post_ctrl_recvs(&self) -> Result<()> {
        for i in 0..CTRL_RECVS as usize {
            self.ctrl.repost(&self.ctrl_qp, i)?;
        }
        Ok(())
    }

    /// Starts the driver task: the endpoint is ready.
    pub fn start(self, o: &AioOpts) -> RcEndpoint {
        let shared = Arc::new(Shared {
            data: self.data,
            ctrl: self.ctrl_qp,
            cq: self.cq,
            table: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closing: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            busy_poll: o.busy_poll,
            keep: std::sync::OnceLock::new(),
        });
        let _ = shared.keep.set(Box::new(Arc::clone(&self.ctrl)));
        let c = Arc::clone(&self.ctrl);
        tokio::spawn(driver::run(Arc::clone(&shared), self.channel, move |s, wc| c.on_completion(s, wc)));
        RcEndpoint {
            shared,
            ctrl: self.ctrl,
            pool: self.pool,
            returned: tokio::sync::Mutex::new(self.returned),
            lent_in: tokio::sync::Mutex::new(self.lent_in),
            #[cfg(feature = "cm")]
            _cm: self.cm,
            _ctx: self.ctx,
        }
    }
}

impl RcEndpoint {
    /// Connects to a [`Listener`](super::Listener) at `addr`.
    pub async fn connect(addr: impl ToSocketAddrs, opts: &AioOpts) -> Result<RcEndpoint> {
        let stream = TcpStream::connect(addr).await.map_err(Error::io("connect to an RcEndpoint listener", None))?;
        RcEndpoint::establish(stream, opts).await
    }

    pub(super) async fn establish(mut tcp: TcpStream, o: &AioOpts) -> Result<RcEndpoint> {
        let peer = tcp.peer_addr().ok();
        let p = Parts::new(Context::open(&o.device)?, o)?;
        let gid = o.connect.gid_index_on(&p.ctx)?;
        let active = p.ctx.query_port(o.port)?.active_mtu();
        let mtu = o.connect.mtu.min(active);
        let psn = crate::prim::random_psn();
        let mine = [
            QpInfo::new(&p.data.endpoint(o.port, gid, psn)?, gid, o.port, mtu),
            QpInfo::new(&p.ctrl_qp.endpoint(o.port, gid, psn.wrapping_add(1))?, gid, o.port, mtu),
        ];
        let mut out = Vec::with_capacity(2 * QpInfo::WIRE_LEN);
        for m in &mine {
            out.extend_from_slice(&m.to_bytes());
        }
        tcp.write_all(&out).await.map_err(Error::io("send the QP numbers to the peer", peer))?;
        let mut theirs = [0u8; 2 * QpInfo::WIRE_LEN];
        tcp.read_exact(&mut theirs).await.map_err(Error::io("read the peer's QP numbers", peer))?;
        let parse =
            |b: &[u8]| QpInfo::from_bytes(b.try_into().expect("29 bytes")).map_err(|e| Error::Protocol(e.to_string()));
        let (peer_data, peer_ctrl) = (parse(&theirs[..QpInfo::WIRE_LEN])?, parse(&theirs[QpInfo::WIRE_LEN..])?);
        let copts = ConnectOpts { gid_index: Some(gid), port: o.port, mtu: mtu.min(peer_data.mtu), ..o.connect };
        p.data.connect(&peer_data.endpoint(), mine[0].psn, &copts)?;
        p.ctrl_qp.connect(&peer_ctrl.endpoint(), mine[1].psn, &copts)?;
        p.post_ctrl_recvs()?;
        // Both sides' receives are posted: either may send from now on.
        tcp.write_all(b"R").await.map_err(Error::io("send the ready byte to the peer", peer))?;
        let mut ready = [0u8; 1];
        tcp.read_exact(&mut ready).await.map_err(Error::io("read the peer's ready byte", peer))?;
        if ready != *b"R" {
            return Err(Error::Protocol("the peer's ready byte is wrong".into()));
        }
        Ok(p.start(o))
    }

    /// The data QP's number.
    pub fn qpn(&self) -> u32 {
        self.shared.data.qpn()
    }

    /// The endpoint's registered memory pool.
    pub fn pool(&self) -> &MrPool {
        &self.pool
    }

    /// A zeroed piece of the pool ([`MrPool::alloc`]).
    pub fn alloc_local_mr(&self, layout: Layout) -> Result<LocalMr> {
        self.pool.alloc(layout).ok_or(Error::PoolExhausted { size: layout.size(), free: self.pool.free_bytes() })
    }

    /// Posts one send-queue request (built by `wr` with the `wr_id` it is
    /// given) whose memory is `buf`, and awaits its completion.
    async fn send_op(
        &self,
        buf: Option<LocalMr>,
        wr: impl FnOnce(u64, &mut dyn FnMut(SendWr<'_>) -> crate::prim::Result<()>) -> crate::prim::Result<()>,
    ) -> Result<(Wc, Option<LocalMr>)> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let id = self.shared.id();
        let rx = self.shared.expect(id, buf);
        let qp = &self.shared.data;
        let mut post = |w: SendWr<'_>| {
            // SAFETY: every entry lies in the buffer now held by the table
            // of requests in flight until this request's completion (or
            // until the QP is destroyed): a dropped future cannot free it.
            unsafe { qp.post_send(&mut [w]) }
        };
        if let Err(e) = wr(id, &mut post) {
            drop(self.shared.forget(id));
            return Err(e.into());
        }
        let (wc, buf) = rx.await.map_err(|_| Error::Closed)?;
        wc.ok()?;
        Ok((wc, buf))
    }

    /// RDMA WRITE of `range` of `src` to `dst`; gives `src` back.
    pub async fn write(&self, src: LocalMr, range: Range<usize>, dst: RemoteAddr) -> Result<LocalMr> {
        let sge = [src.sge(range)];
        let (_, buf) = self.send_op(Some(src), |id, post| post(SendWr::write(&sge, dst).wr_id(id).signaled())).await?;
        Ok(buf.expect("the table gives the buffer back"))
    }

    /// RDMA WRITE with immediate data (consumes a receive at the peer).
    pub async fn write_with_imm(
        &self,
        src: LocalMr,
        range: Range<usize>,
        dst: RemoteAddr,
        imm: u32,
    ) -> Result<LocalMr> {
        let sge = [src.sge(range)];
        let (_, buf) =
            self.send_op(Some(src), |id, post| post(SendWr::write_imm(&sge, dst, imm).wr_id(id).signaled())).await?;
        Ok(buf.expect("the table gives the buffer back"))
    }

    /// RDMA READ from `src` into `range` of `dst`; gives `dst` back.
    pub async fn read(&self, dst: LocalMr, range: Range<usize>, src: RemoteAddr) -> Result<LocalMr> {
        let sge = [dst.sge(range)];
        let (_, buf) = self.send_op(Some(dst), |id, post| post(SendWr::read(&sge, src).wr_id(id).signaled())).await?;
        Ok(buf.expect("the table gives the buffer back"))
    }

    /// SEND of `range` of `src` (consumes a receive at the peer).
    pub async fn send(&self, src: LocalMr, range: Range<usize>) -> Result<LocalMr> {
        let sge = [src.sge(range)];
        let (_, buf) = self.send_op(Some(src), |id, post| post(SendWr::send(&sge).wr_id(id).signaled())).await?;
        Ok(buf.expect("the table gives the buffer back"))
    }

    /// 8-byte fetch-and-add at `dst` (8-byte aligned); the old value.
    pub async fn fetch_add(&self, dst: RemoteAddr, add: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        let sge = [old.sge(0..8)];
        let (_, buf) =
            self.send_op(Some(old), |id, post| post(SendWr::fetch_add(&sge, dst, add).wr_id(id).signaled())).await?;
        Ok(read_u64(&buf.expect("the table gives the buffer back")))
    }

    /// 8-byte compare-and-swap at `dst` (8-byte aligned); the old value
    /// (equal to `compare` when the swap happened).
    pub async fn compare_swap(&self, dst: RemoteAddr, compare: u64, swap: u64) -> Result<u64> {
        let old = self.alloc_local_mr(Layout::new::<u64>())?;
        let sge = [old.sge(0..8)];
        let (_, buf) = self
            .send_op(Some(old), |id, post| post(SendWr::compare_swap(&sge, dst, compare, swap).wr_id(id).signaled()))
            .await?;
        Ok(read_u64(&buf.expect("the table gives the buffer back")))
    }

    /// Receives one message (a SEND or a WRITE with immediate) into `dst`.
    pub async fn recv(&self, dst: LocalMr) -> Result<(Received, LocalMr)> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let sge = [dst.sge(0..dst.len())];
        let id = self.shared.id();
        let rx = self.shared.expect(id, Some(dst));
        // SAFETY: the buffer is held by the table of requests in flight
        // until the completion or the QP's destruction.
        if let Err(e) = unsafe { self.shared.data.post_recv(&mut [RecvWr::new(&sge, id)]) } {
            drop(self.shared.forget(id));
            return Err(e.into());
        }
        let (wc, buf) = rx.await.map_err(|_| Error::Closed)?;
        wc.ok()?;
        let imm = if wc.opcode() == WcOpcode::RECV_RDMA_WITH_IMM || wc.imm().is_some() { wc.imm() } else { None };
        Ok((Received { len: wc.byte_len() as usize, imm }, buf.expect("the table gives the buffer back")))
    }

    fn check_ctrl(&self) -> Result<()> {
        if self.ctrl.broken.load(Ordering::Acquire) || self.shared.closing.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Asks the peer for a region of `layout` from its pool; its token.
    pub async fn request_remote_mr(&self, layout: Layout) -> Result<RemoteMr> {
        self.check_ctrl()?;
        let id = self.ctrl.next_request.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.ctrl.requests.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        let ask = RemoteMr { addr: layout.size() as u64, len: layout.align() as u64, rkey: 0 };
        self.ctrl.send(&self.shared.ctrl, &Msg { kind: Kind::Request, id, token: ask })?;
        match rx.await {
            Ok(Some(token)) => Ok(token),
            Ok(None) => Err(Error::Protocol(format!("the peer has no free region of {} bytes", layout.size()))),
            Err(_) => Err(Error::Closed),
        }
    }

    /// Gives a region the peer granted (or lent) back to it; the peer gets
    /// it from [`RcEndpoint::receive_local_mr`].
    pub async fn send_remote_mr(&self, mr: RemoteMr) -> Result<()> {
        self.check_ctrl()?;
        self.ctrl.send(&self.shared.ctrl, &Msg { kind: Kind::Return, id: 0, token: mr })
    }

    /// The next region of this side's pool that the peer gave back.
    pub async fn receive_local_mr(&self) -> Result<LocalMr> {
        self.returned.lock().await.recv().await.ok_or(Error::Closed)
    }

    /// Lends `mr` to the peer: it stays registered and owned by this
    /// endpoint until the peer gives it back ([`RcEndpoint::receive_local_mr`]).
    pub async fn send_local_mr(&self, mr: LocalMr) -> Result<()> {
        self.check_ctrl()?;
        let token = mr.token();
        self.ctrl.out.lock().unwrap_or_else(|e| e.into_inner()).push(mr);
        self.ctrl.send(&self.shared.ctrl, &Msg { kind: Kind::Lend, id: 0, token })
    }

    /// The next region the peer lent.
    pub async fn receive_remote_mr(&self) -> Result<RemoteMr> {
        self.lent_in.lock().await.recv().await.ok_or(Error::Closed)
    }

    /// Requests posted and not yet completed (the memory they hold included).
    pub fn in_flight(&self) -> usize {
        self.shared.table.lock().unwrap_or_else(|e| e.into_inner()).len()
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
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_unknown_kinds_are_ignored() {
        let m = Msg { kind: Kind::Grant, id: 7, token: RemoteMr { addr: 0x7f00_1000, len: 4096, rkey: 0x55 } };
        assert_eq!(Msg::decode(&m.encode()), Some(m));
        let mut b = m.encode();
        b[0] = 9;
        assert_eq!(Msg::decode(&b), None);
    }
}
