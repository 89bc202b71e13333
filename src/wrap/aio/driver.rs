//! The completion driver: one task per endpoint, polling its CQ and waking
//! the operations whose requests completed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{oneshot, Notify};

use super::pool::LocalMr;
use crate::prim::{CompChannel, Cq, Qp, QpAttr, QpState, Wc};

/// What a request in flight keeps alive until its completion.
pub(crate) struct Pending {
    pub tx: oneshot::Sender<(Wc, Option<LocalMr>)>,
    /// The buffer the device may access until the completion.
    pub buf: Option<LocalMr>,
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
    pub table: Mutex<HashMap<u64, Pending>>,
    pub next_id: AtomicU64,
    pub closing: AtomicBool,
    pub wake: Notify,
    pub busy_poll: bool,
    /// Memory the control protocol owns (posted receives, regions lent or
    /// granted to the peer): dropped with this, after the QPs.
    pub keep: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

impl Shared {
    /// A fresh `wr_id` (never `CONTROL_BIT`-tagged).
    pub fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) & !CONTROL_BIT
    }

    /// Registers a request before it is posted; the receiver resolves with
    /// its completion and buffer.
    pub fn expect(&self, id: u64, buf: Option<LocalMr>) -> oneshot::Receiver<(Wc, Option<LocalMr>)> {
        let (tx, rx) = oneshot::channel();
        self.table.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Pending { tx, buf });
        rx
    }

    /// Takes back a request whose post failed (the device never saw it).
    pub fn forget(&self, id: u64) -> Option<LocalMr> {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).remove(&id).and_then(|p| p.buf)
    }

    fn pending(&self) -> usize {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Moves both QPs to ERR: the device flushes every outstanding request
    /// with `WR_FLUSH_ERR`, so each waiting operation gets an answer.
    pub fn shut_down(&self) {
        if !self.closing.swap(true, Ordering::AcqRel) {
            let _ = self.data.modify(&QpAttr::new(QpState::ERR));
            let _ = self.ctrl.modify(&QpAttr::new(QpState::ERR));
        }
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
            let entry = shared.table.lock().unwrap_or_else(|e| e.into_inner()).remove(&wc.wr_id());
            if let Some(p) = entry {
                // A dropped future: the buffer is dropped here, after its completion.
                let _ = p.tx.send((*wc, p.buf));
            }
        }
        if n > 0 {
            continue;
        }
        if shared.closing.load(Ordering::Acquire) && shared.pending() == 0 {
            return;
        }
        if shared.busy_poll {
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

/// The CQ or its channel failed: every waiting operation is told (its
/// sender dropped, which it reads as a closed endpoint), and the buffers
/// are kept until the QPs are destroyed with the shared state.
fn fail_all(shared: &Shared) {
    shared.closing.store(true, Ordering::Release);
    let mut table = shared.table.lock().unwrap_or_else(|e| e.into_inner());
    for (_, p) in table.iter_mut() {
        // Keep the buffer in the table (the device may still own it); drop
        // the sender by replacing it with a closed one.
        let (tx, _) = oneshot::channel();
        drop(std::mem::replace(&mut p.tx, tx));
    }
}
