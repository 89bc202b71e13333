//! The memory-region protocol on the control QP: its messages, and the
//! state both sides keep (regions handed to the peer, requests awaiting an
//! answer, regions the peer lent). Everything the peer sends is checked
//! here; a message that breaks the protocol closes the endpoint.

use std::alloc::Layout;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};

use super::driver::{Shared, CONTROL_BIT};
use super::error::Result;
use super::pool::{Exposed, LocalMr, MrPool};
use crate::prim::{Qp, RecvWr, RemoteMr, SendWr, Sge, Wc};

/// Control receives kept posted.
pub(super) const CTRL_RECVS: u32 = 64;
/// Control send queue entries.
pub(super) const CTRL_SENDS: u32 = 256;
/// Requests of ours awaiting the peer's answer, at most.
pub(super) const REQUESTS_IN_FLIGHT: usize = 16;
/// Size of a control message.
pub(super) const MSG: usize = 32;
/// wr_id of control sends (their completions are only acknowledged).
const CTRL_SEND: u64 = CONTROL_BIT | (1 << 62);
/// wr_id of keepalive sends.
const CTRL_PING: u64 = CTRL_SEND | 1;
/// A keepalive.
const PING: Msg = Msg { kind: Kind::Ping, reason: 0, id: 0, token: RemoteMr { addr: 0, len: 0, rkey: 0 } };

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Kind {
    Request = 1,
    Grant = 2,
    Deny = 3,
    Lend = 4,
    Return = 5,
    Ping = 6,
}

/// Why the peer refused a [`request_remote_mr`](super::RcEndpoint::request_remote_mr)
/// (carried in its deny message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// The peer's pool has no free piece of that size and alignment.
    PoolExhausted,
    /// The request would take the peer's grants past its byte quota
    /// (its `AioOpts::grant_quota_bytes`).
    QuotaBytes,
    /// The request would take the peer's grants past its count quota
    /// (its `AioOpts::grant_quota_count`).
    QuotaCount,
    /// The size and alignment are not a valid layout.
    BadLayout,
    /// The peer could not register the piece for remote access.
    Registration,
    /// A reason code this version does not know.
    Other(u8),
}

impl Denial {
    fn code(self) -> u8 {
        match self {
            Denial::PoolExhausted => 1,
            Denial::QuotaBytes => 2,
            Denial::QuotaCount => 3,
            Denial::BadLayout => 4,
            Denial::Registration => 5,
            Denial::Other(c) => c,
        }
    }

    fn from_code(c: u8) -> Denial {
        match c {
            1 => Denial::PoolExhausted,
            2 => Denial::QuotaBytes,
            3 => Denial::QuotaCount,
            4 => Denial::BadLayout,
            5 => Denial::Registration,
            c => Denial::Other(c),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denial::PoolExhausted => f.write_str("its pool has no free piece of that size (its AioOpts::pool_size)"),
            Denial::QuotaBytes => f.write_str("the grant would exceed its AioOpts::grant_quota_bytes"),
            Denial::QuotaCount => f.write_str("the grant would exceed its AioOpts::grant_quota_count"),
            Denial::BadLayout => f.write_str("the size and alignment are not a valid layout"),
            Denial::Registration => f.write_str("it could not register the piece for remote access"),
            Denial::Other(c) => write!(f, "reason code {c}"),
        }
    }
}

/// A control message: kind, a reason (deny), id, and a token (or, for a
/// request, size and alignment in `addr` and `len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Msg {
    pub kind: Kind,
    pub reason: u8,
    pub id: u32,
    pub token: RemoteMr,
}

impl Msg {
    pub fn new(kind: Kind, id: u32, token: RemoteMr) -> Msg {
        Msg { kind, reason: 0, id, token }
    }

    pub fn encode(&self) -> [u8; MSG] {
        let mut b = [0u8; MSG];
        b[0] = self.kind as u8;
        b[1] = self.reason;
        b[4..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.token.addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.token.len.to_le_bytes());
        b[24..28].copy_from_slice(&self.token.rkey.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; MSG]) -> std::result::Result<Msg, String> {
        let kind = match b[0] {
            1 => Kind::Request,
            2 => Kind::Grant,
            3 => Kind::Deny,
            4 => Kind::Lend,
            5 => Kind::Return,
            6 => Kind::Ping,
            k => return Err(format!("a control message of unknown kind {k}")),
        };
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let token = RemoteMr { addr: u64_at(8), len: u64_at(16), rkey: u32_at(24) };
        Ok(Msg { kind, reason: b[1], id: u32_at(4), token })
    }
}

/// The peer's answer to one of our requests.
pub(super) type Answer = std::result::Result<RemoteMr, Denial>;

/// Limits on what the peer may hold or queue here.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub grant_bytes: usize,
    pub grant_count: usize,
    pub lend_backlog: usize,
}

/// Pieces handed to the peer.
#[derive(Default)]
struct Out {
    /// Each with `true` when granted on the peer's request (counted against
    /// its quota), `false` when lent by us.
    pieces: Vec<(Exposed, bool)>,
    granted_bytes: usize,
    granted_count: usize,
}

/// The memory-region protocol's state, shared with the driver.
pub(super) struct Ctrl {
    pool: MrPool,
    limits: Limits,
    /// Posted control receive buffers, by index.
    bufs: Vec<LocalMr>,
    /// Our requests awaiting an answer, each with its slot (a permit of
    /// `slots`), kept until answered even when the caller stopped waiting.
    requests: Mutex<HashMap<u32, (oneshot::Sender<Answer>, OwnedSemaphorePermit)>>,
    next_request: AtomicU32,
    slots: Arc<Semaphore>,
    out: Mutex<Out>,
    /// Pieces the peer gave back, until the application takes them. Its
    /// length is bounded: a granted piece stays counted against the peer's
    /// quota while it waits here ([`Returned`]), and a lent one was lent by
    /// the application.
    returned: mpsc::UnboundedSender<Returned>,
    lent_in: mpsc::Sender<RemoteMr>,
    /// Keepalives the peer acknowledged.
    pub pings_acked: AtomicU64,
    /// Set while this side must not send before the peer's first message
    /// ([`Ctrl::wait_for_peer`]); cleared by that message.
    waiting: AtomicBool,
    /// The gate behind `waiting`: whether the peer was heard, and whether a
    /// keepalive was held back meanwhile.
    gate: Mutex<Gate>,
    heard: Notify,
}

/// See [`Ctrl::wait_for_peer`].
#[derive(Default)]
struct Gate {
    heard: bool,
    held_ping: bool,
}

impl fmt::Debug for Ctrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctrl").field("pool", &self.pool).field("limits", &self.limits).finish_non_exhaustive()
    }
}

/// A piece the peer gave back, on its way to
/// [`RcEndpoint::receive_local_mr`](super::RcEndpoint::receive_local_mr):
/// one granted on the peer's request still counts against the peer's quota
/// (its `charged` bytes) until the application takes it
/// ([`Ctrl::take_returned`]), so that returning cannot free quota faster
/// than the application frees pieces.
pub(super) struct Returned {
    piece: LocalMr,
    /// The bytes counted against the quota (with one piece); `None` for a
    /// piece lent by this side.
    charged: Option<usize>,
}

/// The receiving ends of what the control protocol delivers.
pub(super) struct Inbox {
    pub returned: mpsc::UnboundedReceiver<Returned>,
    pub lent_in: mpsc::Receiver<RemoteMr>,
}

impl Ctrl {
    /// The protocol's state on `pool`, with its receive buffers taken from it.
    pub fn new(pool: &MrPool, limits: Limits) -> Result<(Ctrl, Inbox)> {
        let (returned_tx, returned) = mpsc::unbounded_channel();
        let (lent_tx, lent_in) = mpsc::channel(limits.lend_backlog.max(1));
        let bufs = (0..CTRL_RECVS)
            .map(|_| {
                pool.alloc(Layout::new::<[u64; MSG / 8]>())
                    .ok_or(super::Error::PoolExhausted { size: MSG, free: pool.free_bytes() })
            })
            .collect::<Result<Vec<_>>>()?;
        let ctrl = Ctrl {
            pool: pool.clone(),
            limits,
            bufs,
            requests: Mutex::new(HashMap::new()),
            next_request: AtomicU32::new(1),
            slots: Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT)),
            out: Mutex::new(Out::default()),
            returned: returned_tx,
            lent_in: lent_tx,
            pings_acked: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            gate: Mutex::new(Gate::default()),
            heard: Notify::new(),
        };
        Ok((ctrl, Inbox { returned, lent_in }))
    }

    /// Sends a control message inline on the control QP (no buffer to keep).
    pub fn send(&self, qp: &Qp, msg: &Msg) -> Result<()> {
        self.send_as(qp, msg, CTRL_SEND)
    }

    fn send_as(&self, qp: &Qp, msg: &Msg, wr_id: u64) -> Result<()> {
        let bytes = msg.encode();
        let sge = [Sge::from_raw(bytes.as_ptr() as u64, MSG as u32, 0)];
        // SAFETY: an inline send: the provider copies the 32 bytes during the
        // call; nothing is read from `bytes` afterwards.
        unsafe { qp.post_send(&mut [SendWr::send(&sge).inline().wr_id(wr_id).signaled()])? };
        Ok(())
    }

    /// Sends a keepalive; its acknowledgement counts in `pings_acked`. Before
    /// the peer's first message on a side that [waits for it](Ctrl::wait_for_peer),
    /// the keepalive is held back and sent when that message arrives.
    pub fn ping(&self, qp: &Qp) -> Result<()> {
        if self.waiting.load(Ordering::Acquire) {
            let mut g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
            if !g.heard {
                g.held_ping = true;
                return Ok(());
            }
        }
        self.send_as(qp, &PING, CTRL_PING)
    }

    /// The first message of the side that connected (through the RDMA CM):
    /// a keepalive whose acknowledgement is not counted. It tells the
    /// listener's side, which [waits for it](Ctrl::wait_for_peer), that this
    /// side has both connections established.
    pub fn greet(&self, qp: &Qp) -> Result<()> {
        self.send(qp, &PING)
    }

    /// Makes this side send nothing until the peer's first message has
    /// arrived (call before the driver starts). The side that accepts a
    /// connection through the RDMA CM does this: on iWARP the accepting side
    /// must not send until the connecting side, which speaks first, has
    /// taken the CM's reply (siw's connecting side ends a connection on whose
    /// stream data follows the reply before it has processed the reply).
    pub fn wait_for_peer(&self) {
        self.waiting.store(true, Ordering::Release);
    }

    /// Resolves once the peer's first message has arrived (at once on a side
    /// that does not [wait for it](Ctrl::wait_for_peer)).
    pub async fn heard(&self) {
        loop {
            let notified = self.heard.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.waiting.load(Ordering::Acquire) || self.gate.lock().unwrap_or_else(|e| e.into_inner()).heard {
                return;
            }
            notified.await;
        }
    }

    /// The peer's message arrived: opens the gate, sending the keepalive
    /// held back meanwhile.
    fn peer_heard(&self, qp: &Qp) -> Result<()> {
        let held = {
            let mut g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
            if g.heard {
                return Ok(());
            }
            g.heard = true;
            self.waiting.store(false, Ordering::Release);
            std::mem::take(&mut g.held_ping)
        };
        self.heard.notify_waiters();
        if held {
            self.send_as(qp, &PING, CTRL_PING)?;
        }
        Ok(())
    }

    /// Posts control receive `i`.
    pub fn repost(&self, qp: &Qp, i: usize) -> Result<()> {
        let sge = [self.bufs[i].sge(0..MSG)];
        // SAFETY: the buffer is owned by `self`, which the driver keeps until
        // the QP is destroyed.
        unsafe { qp.post_recv(&mut [RecvWr::new(&sge, CONTROL_BIT | i as u64)])? };
        Ok(())
    }

    /// A slot for one request of ours (at most [`REQUESTS_IN_FLIGHT`] await
    /// answers at once), its id, and the receiver of the answer.
    pub async fn begin_request(&self) -> (u32, oneshot::Receiver<Answer>) {
        let permit = Arc::clone(&self.slots).acquire_owned().await.expect("the semaphore is never closed");
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).insert(id, (tx, permit));
        (id, rx)
    }

    /// Drops a request whose message was never sent.
    pub fn abandon_request(&self, id: u32) {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// Hands `piece` to the peer with a registration of its own; its token.
    pub fn lend(&self, piece: LocalMr) -> Result<RemoteMr> {
        let ex = piece.expose().map_err(|(_, e)| e)?;
        let token = ex.token();
        self.out.lock().unwrap_or_else(|e| e.into_inner()).pieces.push((ex, false));
        Ok(token)
    }

    /// Takes a piece back from the peer's hands (deregistered); `None` if
    /// none has that token, or if its deregistration failed. A granted
    /// piece stays counted against the peer's quota when `keep_charge`
    /// (the bytes are returned with it), and always when its
    /// deregistration failed and the peer may still reach it.
    fn take_back(&self, token: &RemoteMr, keep_charge: bool) -> std::result::Result<Option<Returned>, ()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let i = out.pieces.iter().position(|(ex, _)| ex.is(token)).ok_or(())?;
        let (ex, granted) = out.pieces.swap_remove(i);
        drop(out);
        let len = ex.len();
        let Some(piece) = ex.withdraw() else { return Ok(None) };
        let charged = granted.then_some(len);
        if let (Some(len), false) = (charged, keep_charge) {
            self.uncharge(len);
        }
        Ok(Some(Returned { piece, charged: charged.filter(|_| keep_charge) }))
    }

    /// Removes one piece of `len` bytes from the peer's quota.
    fn uncharge(&self, len: usize) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.granted_bytes -= len;
        out.granted_count -= 1;
    }

    /// The piece of a return, for the application: a granted one leaves the
    /// peer's quota now.
    pub fn take_returned(&self, r: Returned) -> LocalMr {
        if let Some(len) = r.charged {
            self.uncharge(len);
        }
        r.piece
    }

    /// Takes back a lent piece whose lend message could not be sent.
    pub fn unlend(&self, token: &RemoteMr) -> Option<LocalMr> {
        self.take_back(token, false).ok().flatten().map(|r| r.piece)
    }

    /// Bytes and pieces the peer holds on its requests, with those it gave
    /// back that the application has not taken yet.
    pub fn granted(&self) -> (usize, usize) {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        (out.granted_bytes, out.granted_count)
    }

    /// A control completion, in the driver.
    pub fn on_completion(&self, shared: &Shared, wc: Wc) {
        if wc.wr_id() & CTRL_SEND == CTRL_SEND {
            if !wc.is_success() {
                // The peer did not take a control message (it vanished, or
                // keeps no receives posted): the endpoint cannot go on.
                shared.shut_down();
            } else if wc.wr_id() == CTRL_PING {
                self.pings_acked.fetch_add(1, Ordering::Release);
            }
            return;
        }
        if !wc.is_success() {
            // Flushed or failed: the QP is going away; do not repost.
            shared.shut_down();
            return;
        }
        let i = (wc.wr_id() & !CONTROL_BIT) as usize;
        let Some(buf) = self.bufs.get(i) else {
            // Not a receive of ours: the provider reported an id we never
            // posted.
            return shared
                .violated(format!("a control completion with wr_id {:#x}, not one this endpoint posted", wc.wr_id()));
        };
        if wc.byte_len() as usize != MSG {
            return shared.violated(format!(
                "a control message of {} bytes on the control QP (every control message is {MSG} bytes)",
                wc.byte_len()
            ));
        }
        if self.waiting.load(Ordering::Acquire) && self.peer_heard(&shared.ctrl).is_err() {
            shared.shut_down();
            return;
        }
        let mut b = [0u8; MSG];
        buf.read(0, &mut b);
        let handled = Msg::decode(&b).and_then(|m| self.handle(shared, m));
        if let Err(why) = handled {
            return shared.violated(why);
        }
        if self.repost(&shared.ctrl, i).is_err() {
            shared.shut_down();
        }
    }

    /// A grant of `size` bytes aligned to `align` for the peer, within its quota.
    fn grant(&self, size: u64, align: u64) -> Answer {
        let layout = usize::try_from(size)
            .ok()
            .zip(usize::try_from(align).ok())
            .and_then(|(s, a)| Layout::from_size_align(s, a.max(1)).ok())
            .ok_or(Denial::BadLayout)?;
        let len = layout.size().max(1);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if out.granted_count >= self.limits.grant_count {
            return Err(Denial::QuotaCount);
        }
        if out.granted_bytes.saturating_add(len) > self.limits.grant_bytes {
            return Err(Denial::QuotaBytes);
        }
        let piece = self.pool.alloc(layout).ok_or(Denial::PoolExhausted)?;
        let ex = piece.expose().map_err(|_| Denial::Registration)?;
        let token = ex.token();
        out.granted_bytes += ex.len();
        out.granted_count += 1;
        out.pieces.push((ex, true));
        Ok(token)
    }

    fn handle(&self, shared: &Shared, m: Msg) -> std::result::Result<(), String> {
        match m.kind {
            Kind::Request => {
                let answer = match self.grant(m.token.addr, m.token.len) {
                    Ok(token) => Msg::new(Kind::Grant, m.id, token),
                    Err(why) => Msg { reason: why.code(), ..Msg::new(Kind::Deny, m.id, m.token) },
                };
                if let Err(e) = self.send(&shared.ctrl, &answer) {
                    if answer.kind == Kind::Grant {
                        drop(self.take_back(&answer.token, false));
                    }
                    return Err(format!(
                        "cannot answer its request {}: {e} (the peer sent more requests than the control QP's \
                         {CTRL_SENDS} send entries hold before taking the answers)",
                        m.id
                    ));
                }
            }
            Kind::Grant | Kind::Deny => {
                let waiting = self.requests.lock().unwrap_or_else(|e| e.into_inner()).remove(&m.id);
                let Some((tx, _slot)) = waiting else {
                    return Err(format!("an answer to request {}, which is not awaiting one", m.id));
                };
                let answer = if m.kind == Kind::Grant { Ok(m.token) } else { Err(Denial::from_code(m.reason)) };
                if let Err(Ok(token)) = tx.send(answer) {
                    // The caller stopped waiting: give the grant straight back,
                    // so the peer's piece is not held forever.
                    let _ = self.send(&shared.ctrl, &Msg::new(Kind::Return, 0, token));
                }
            }
            Kind::Lend => match self.lent_in.try_send(m.token) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    return Err(format!(
                        "it lent more than {} regions not yet taken by receive_remote_mr (AioOpts::lend_backlog)",
                        self.limits.lend_backlog
                    ))
                }
            },
            Kind::Return => match self.take_back(&m.token, true) {
                Ok(Some(r)) => {
                    // Sent only if the endpoint is still there to take it;
                    // dropped otherwise (back to the pool).
                    if let Err(mpsc::error::SendError(r)) = self.returned.send(r) {
                        drop(self.take_returned(r));
                    }
                }
                Ok(None) => {}
                Err(()) => {
                    return Err(format!(
                        "it returned a region it does not hold (addr {:#x}, {} bytes, rkey {:#x})",
                        m.token.addr, m.token.len, m.token.rkey
                    ))
                }
            },
            Kind::Ping => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_unknown_kinds_are_refused() {
        let m = Msg::new(Kind::Grant, 7, RemoteMr { addr: 0x7f00_1000, len: 4096, rkey: 0x55 });
        assert_eq!(Msg::decode(&m.encode()), Ok(m));
        let d = Msg { reason: Denial::QuotaBytes.code(), ..Msg::new(Kind::Deny, 8, m.token) };
        assert_eq!(Denial::from_code(Msg::decode(&d.encode()).unwrap().reason), Denial::QuotaBytes);
        let mut b = m.encode();
        b[0] = 9;
        assert_eq!(Msg::decode(&b), Err("a control message of unknown kind 9".to_string()));
    }
}
