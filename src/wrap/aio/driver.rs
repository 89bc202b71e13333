//! The completion driver: one task per endpoint, polling its CQ and waking
//! the operations whose requests completed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{oneshot, watch, Notify};

use super::pool::LocalMr;
use crate::prim::{CompChannel, Cq, Qp, QpAttr, QpState, Wc};

/// What a request in flight keeps alive until its completion.
pub(crate) struct Pending {
    pub tx: oneshot::Sender<(Wc, Option<LocalMr>)>,
    /// The buffer the device may access until the completion.
    pub buf: Option<LocalMr>,
    /// A send-queue request (it may touch the peer's memory), not a receive.
    pub sq: bool,
}

/// The requests in flight, and whether the driver has stopped taking them.
#[derive(Default)]
pub(crate) struct Table {
    pub map: HashMap<u64, Pending, std::hash::BuildHasherDefault<IdHash>>,
    /// Set (under the lock) when the driver has exited or failed: nothing
    /// inserted afterwards would ever be answered, so nothing is.
    pub stopped: bool,
}

/// Completions of the control QP's receives go to `on_control`.
pub(crate) const CONTROL_BIT: u64 = 1 << 63;

/// What the driver and the endpoint share.
///
/// Field order is drop order: the QPs go first (after `ibv_destroy_qp` the
/// device touches none of their requests' memory), then the table that
/// holds that memory.
pub(crate) struct Shared {
    pub data: Qp,
    pub ctrl: Qp,
    pub cq: Cq,
    pub table: Mutex<Table>,
    pub next_id: AtomicU64,
    pub closing: AtomicBool,
    pub wake: Notify,
    /// Notified (all waiters) whenever the driver retires requests.
    pub progress: Notify,
    /// `true` once the endpoint is closing: every waiting call watches it.
    pub closed: watch::Sender<bool>,
    /// Why the endpoint was closed, when the peer broke the protocol.
    pub fault: OnceLock<String>,
    pub busy_poll: bool,
    /// Most empty polls (each after yielding to the runtime) before the
    /// driver arms the CQ and sleeps ([`Spin`]).
    pub spin_polls: u32,
    /// Memory the control protocol owns (posted receives, regions lent or
    /// granted to the peer): dropped with this, after the QPs.
    pub keep: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

impl Shared {
    /// A fresh `wr_id` (never `CONTROL_BIT`-tagged).
    pub fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) & !CONTROL_BIT
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a request before it is posted; the receiver resolves with
    /// its completion and buffer. Refused (the buffer given back) once the
    /// endpoint is closing: checked under the table's lock, which the
    /// driver holds when it decides to exit, so a request in the table is
    /// always one the driver will answer.
    pub fn expect(
        &self,
        id: u64,
        buf: Option<LocalMr>,
        sq: bool,
    ) -> Result<oneshot::Receiver<(Wc, Option<LocalMr>)>, Option<LocalMr>> {
        let mut t = self.lock();
        if t.stopped || self.closing.load(Ordering::Acquire) {
            return Err(buf);
        }
        let (tx, rx) = oneshot::channel();
        t.map.insert(id, Pending { tx, buf, sq });
        Ok(rx)
    }

    /// Takes back a request whose post failed (the device never saw it).
    pub fn forget(&self, id: u64) -> Option<LocalMr> {
        self.lock().map.remove(&id).and_then(|p| p.buf)
    }

    /// Whether a send-queue request with a `wr_id` below `mark` is in flight.
    pub fn sq_before(&self, mark: u64) -> bool {
        self.lock().map.iter().any(|(id, p)| p.sq && *id < mark)
    }

    /// The error a closed endpoint's calls return: the peer's protocol
    /// violation if that closed it, else [`Error::Closed`](super::Error::Closed).
    pub fn close_error(&self) -> super::Error {
        match self.fault.get() {
            Some(why) => super::Error::Protocol(why.clone()),
            None => super::Error::Closed,
        }
    }

    /// Resolves once the endpoint is closing.
    pub async fn closed(&self) {
        let mut rx = self.closed.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Resolves once the driver has stopped (after the endpoint closed and
    /// every request was answered): every completion that was in the CQ has
    /// been handed over by then.
    pub async fn stopped(&self) {
        loop {
            let progress = self.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            if self.lock().stopped {
                return;
            }
            progress.await;
        }
    }

    /// Closes the endpoint because the peer broke the protocol (`why`).
    pub fn violated(&self, why: String) {
        let _ = self.fault.set(why);
        self.shut_down();
    }

    /// Moves both QPs to ERR: the device flushes every outstanding request
    /// with `WR_FLUSH_ERR`, so each waiting operation gets an answer; every
    /// call waiting on the control protocol is told.
    pub fn shut_down(&self) {
        if !self.closing.swap(true, Ordering::AcqRel) {
            let _ = self.data.modify(&QpAttr::new(QpState::ERR));
            let _ = self.ctrl.modify(&QpAttr::new(QpState::ERR));
        }
        self.closed.send_replace(true);
        self.wake.notify_one();
    }
}

/// Runs until the endpoint is closed and every request it posted has
/// completed. `on_control` gets each control-QP completion.
pub(crate) async fn run(shared: Arc<Shared>, channel: CompChannel, mut on_control: impl FnMut(&Shared, Wc)) {
    // SAFETY: the channel owns its descriptor, which stays open while the
    // channel (moved into the `AsyncFd`) lives, and `as_raw_fd` always
    // returns that descriptor.
    let fd = match unsafe { AsyncFd::register_with_interest(channel, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(_) => return fail_all(&shared),
    };
    let mut wcs = [Wc::default(); 32];
    let mut armed = false;
    let mut spin = Spin::new(shared.spin_polls);
    loop {
        let n = match shared.cq.poll(&mut wcs) {
            Ok(n) => n,
            Err(_) => return fail_all(&shared),
        };
        for wc in &wcs[..n] {
            if wc.wr_id() & CONTROL_BIT != 0 {
                on_control(&shared, *wc);
                continue;
            }
            let entry = shared.lock().map.remove(&wc.wr_id());
            if let Some(p) = entry {
                // A dropped future: the buffer is dropped here, after its completion.
                let _ = p.tx.send((*wc, p.buf));
            }
        }
        if n > 0 {
            shared.progress.notify_waiters();
            spin.found();
            continue;
        }
        if shared.closing.load(Ordering::Acquire) {
            let mut t = shared.lock();
            if t.map.is_empty() {
                t.stopped = true;
                drop(t);
                shared.progress.notify_waiters();
                return;
            }
        }
        if shared.busy_poll {
            tokio::task::yield_now().await;
            continue;
        }
        // Completions have been arriving: let the woken operations run
        // (and post their next requests), then poll again before paying
        // for the arm, the reactor and the channel read.
        // `yield_now` (not a self-wake): on a current-thread runtime the
        // future `block_on` runs is polled only between rounds of the run
        // queue, which a self-waking task would keep busy.
        if !armed && spin.empty() {
            tokio::task::yield_now().await;
            continue;
        }
        if !armed {
            if shared.cq.req_notify(false).is_err() {
                return fail_all(&shared);
            }
            // A completion between the poll and the arm raises no event:
            // poll once more before sleeping.
            armed = true;
            continue;
        }
        tokio::select! {
            ready = fd.readable() => {
                let Ok(mut guard) = ready else { return fail_all(&shared) };
                match shared.cq.try_event() {
                    Ok(()) => armed = false,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => guard.clear_ready(),
                    Err(_) => return fail_all(&shared),
                }
            }
            _ = shared.wake.notified() => {}
        }
    }
}

/// The `wr_id`s keying the table are a counter: a multiply spreads them
/// over hashbrown's groups at a fraction of SipHash's cost, and no peer
/// chooses them.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHash(u64);

impl std::hash::Hasher for IdHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The adaptive spin before arming: after a poll that found completions the
/// driver polls again, yielding to the runtime in between, up to `budget`
/// times; a spin that runs out finds the CQ idle and halves the next
/// budget, a spin that finds a completion doubles it (never past `max`).
/// A busy endpoint therefore rarely arms; an idle one arms after a few
/// polls, and the bound keeps the cost of a wrong guess at `max` polls.
#[derive(Debug)]
pub(crate) struct Spin {
    max: u32,
    budget: u32,
    /// Empty polls left before arming.
    left: u32,
    /// Empty polls so far in this spin.
    spun: u32,
}

impl Spin {
    pub(crate) fn new(max: u32) -> Spin {
        Spin { max, budget: max, left: 0, spun: 0 }
    }

    /// A poll found completions: spin again after it, with twice the
    /// budget if empty polls came before it (a completion that arming
    /// would have paid a wake-up for).
    pub(crate) fn found(&mut self) {
        if self.spun > 0 {
            self.budget = self.budget.saturating_mul(2).clamp(1, self.max);
        }
        self.spun = 0;
        self.left = self.budget;
    }

    /// A poll found nothing: `true` to yield and poll again, `false` to arm.
    pub(crate) fn empty(&mut self) -> bool {
        if self.left == 0 {
            self.spun = 0;
            return false;
        }
        self.left -= 1;
        self.spun += 1;
        if self.left == 0 {
            // The whole budget in vain: the CQ went idle.
            self.budget = (self.budget / 2).max(self.max.min(1));
        }
        true
    }
}

/// The CQ or its channel failed: every waiting operation is told (its
/// sender dropped, which it reads as a closed endpoint), and the buffers
/// are kept until the QPs are destroyed with the shared state.
fn fail_all(shared: &Shared) {
    shared.closing.store(true, Ordering::Release);
    shared.closed.send_replace(true);
    let mut table = shared.lock();
    table.stopped = true;
    for (_, p) in table.map.iter_mut() {
        // Keep the buffer in the table (the device may still own it); drop
        // the sender by replacing it with a closed one.
        let (tx, _) = oneshot::channel();
        drop(std::mem::replace(&mut p.tx, tx));
    }
    drop(table);
    shared.progress.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::Spin;

    /// Empty polls a spin allows before arming, starting from a found
    /// completion.
    fn spins(s: &mut Spin) -> u32 {
        s.found();
        let mut n = 0;
        while s.empty() {
            n += 1;
        }
        n
    }

    #[test]
    fn spin_is_bounded_and_adapts() {
        let mut s = Spin::new(16);
        // Idle: each vain spin halves the next one, down to one poll.
        assert_eq!([spins(&mut s), spins(&mut s), spins(&mut s)], [16, 8, 4]);
        for _ in 0..5 {
            spins(&mut s);
        }
        assert_eq!(spins(&mut s), 1);
        // Completions found after empty polls double it, never past the bound.
        for _ in 0..10 {
            s.found();
            assert!(s.empty());
            s.found();
        }
        assert_eq!(spins(&mut s), 16);
        // Zero turns the spin off: the driver arms at the first empty poll.
        let mut off = Spin::new(0);
        assert_eq!(spins(&mut off), 0);
        off.found();
        assert!(!off.empty());
    }
}
