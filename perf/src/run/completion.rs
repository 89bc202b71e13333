//! Waiting for completions: polling, completion events (`-e`), and the
//! stall limits that end a run whose peer stopped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rrddmma::prim::{Cq, Wc};

use crate::args::Conn;

use super::{err, Res};

/// Completion events taken by every thread (`-e`), reported at the end so
/// that a run shows it slept on events.
pub(crate) static EVENTS: AtomicU64 = AtomicU64::new(0);

/// Completion events taken so far (`-e`).
pub fn completion_events() -> u64 {
    EVENTS.load(Ordering::Relaxed)
}

/// Completions polled at once.
pub(crate) const POLL_BATCH: usize = 16;

/// Bits of a `wr_id` that count requests; the QP index sits above them.
pub(crate) const COUNT_BITS: u32 = 40;

/// perftest's `-e` wait: sleeps until the CQ's channel has an event (read
/// with `ibv_get_cq_event`; acknowledged in batches by `Cq::wait`), re-arms
/// the CQ, then polls once into `wcs`. The CQ is armed again before the poll,
/// so a completion the poll misses raises the next event. `timeout`: `Ok(0)`
/// once it passes.
#[inline]
pub(crate) fn event_poll(cq: &Cq, wcs: &mut [Wc], timeout: Option<Duration>) -> Res<usize> {
    if !cq.wait(timeout).map_err(err("ibv_get_cq_event"))? {
        return Ok(0);
    }
    EVENTS.fetch_add(1, Ordering::Relaxed);
    cq.req_notify(false).map_err(err("ibv_req_notify_cq"))?;
    cq.poll(wcs).map_err(err("ibv_poll_cq"))
}

/// Receive completions that carried immediate data (`--write_with_imm`,
/// `--send_with_imm`), and the last value, reported at the end.
static IMM_SEEN: AtomicU64 = AtomicU64::new(0);
static IMM_LAST: AtomicU64 = AtomicU64::new(0);

/// The immediate data seen so far: (completions that carried it, last value).
pub fn imm_seen() -> (u64, u32) {
    (IMM_SEEN.load(Ordering::Relaxed), IMM_LAST.load(Ordering::Relaxed) as u32)
}

/// A receive completion: successful and, with `imm`, carrying immediate
/// data (perftest fails a run whose receive lacks it the same way).
#[inline]
pub(crate) fn check_recv(wc: &Wc, imm: bool) -> Res<()> {
    check(wc)?;
    if imm {
        let Some(v) = wc.imm() else {
            return Err(format!(
                "receive {:#x} completed without immediate data (IBV_WC_WITH_IMM clear) although the requests carry                  it (--write_with_imm / --send_with_imm: give the flag on both sides)",
                wc.wr_id()
            ));
        };
        IMM_SEEN.fetch_add(1, Ordering::Relaxed);
        IMM_LAST.store(u64::from(v), Ordering::Relaxed);
    }
    Ok(())
}

pub(crate) fn check(wc: &Wc) -> Res<()> {
    if wc.is_success() {
        Ok(())
    } else {
        Err(format!(
            "work request {:#x} completed with status {:?} (vendor error {:#x})",
            wc.wr_id(),
            wc.status(),
            wc.vendor_err()
        ))
    }
}

/// How long a SEND bandwidth receiver waits for the next message before it
/// gives up (perftest's server checks every 60 s that messages still come):
/// UC and UD drop what finds no receive, and a lost message must end the
/// run rather than leave it waiting. `RRDDMMA_PERF_STALL_SECS` overrides it.
pub(crate) fn stall_limit() -> Duration {
    let secs = std::env::var("RRDDMMA_PERF_STALL_SECS").ok().and_then(|v| v.parse::<u64>().ok());
    Duration::from_secs(secs.unwrap_or(60).max(1))
}

#[cold]
pub(crate) fn stalled(got: u64, want: u64, stall: Duration, conn: Conn) -> String {
    format!(
        "no message for {} s: received {got} of {want} ({}; do both sides run the same -n? \
         RRDDMMA_PERF_STALL_SECS=N waits longer)",
        stall.as_secs(),
        stall_cause(conn)
    )
}

/// Why a run that expects a message can wait in vain.
pub(crate) fn stall_cause(conn: Conn) -> &'static str {
    if conn == Conn::Rc {
        "the peer stopped"
    } else {
        "the peer stopped, or a message was lost: UC and UD do not retransmit, and drop what arrives without a \
         posted receive"
    }
}

/// Busy-wait bookkeeping of a latency test: every 4096 empty polls, whether
/// the wait has lasted [`stall_limit`] (checked from the first such poll).
pub(crate) struct Spin {
    spins: u32,
    since: Option<Instant>,
}

impl Spin {
    pub(crate) fn new() -> Spin {
        Spin { spins: 0, since: None }
    }

    /// One more empty poll; an error once the wait has stalled.
    #[inline]
    pub(crate) fn spun(&mut self, stall: Duration, conn: Conn, what: &str) -> Res<()> {
        self.spins = self.spins.wrapping_add(1);
        if self.spins % 4096 == 0 && self.since.get_or_insert_with(Instant::now).elapsed() >= stall {
            return Err(lat_stalled(stall, conn, what));
        }
        Ok(())
    }
}

#[cold]
pub(crate) fn lat_stalled(stall: Duration, conn: Conn, what: &str) -> String {
    format!(
        "no {what} for {} s ({}; do both sides run the same -n? RRDDMMA_PERF_STALL_SECS=N waits longer)",
        stall.as_secs(),
        stall_cause(conn)
    )
}
