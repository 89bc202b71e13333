//! Resources, connection set-up, and the measured loops: the session
//! ([`session`]), waiting for completions ([`completion`]), and the
//! bandwidth ([`bw`](mod@bw)) and latency ([`lat`](mod@lat)) loops.

mod bw;
mod completion;
mod lat;
mod session;

pub use bw::{bw_bidir, bw_client, send_bw_receiver, verify_bw};
pub use completion::{completion_events, imm_seen};
pub use lat::lat;
pub use session::setup;

use crate::args::Opts;
use crate::oob::BwReport;

pub(crate) type Res<T> = Result<T, String>;

pub(crate) fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// One measured size.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Message size.
    pub size: usize,
    /// Operations completed (bandwidth) or samples taken (latency).
    pub iters: u64,
    /// Bytes per second (bandwidth tests).
    pub bytes_per_sec: f64,
    /// Operations per second (bandwidth tests).
    pub ops_per_sec: f64,
    /// Latency samples in nanoseconds, sorted (latency tests).
    pub lat_ns: Vec<f64>,
    /// The same samples in the order taken (with `-U` only).
    pub unsorted_ns: Vec<f64>,
    /// Heap allocations inside the measured loop.
    pub allocs: u64,
}

/// The bandwidth report this side sends at the end.
pub fn report_of(o: &Opts, r: &Outcome) -> BwReport {
    let unit = if o.gbits { 1.25e8 } else { 1048576.0 };
    BwReport {
        size: r.size as u64,
        iters: r.iters,
        bw_peak: r.bytes_per_sec / unit,
        bw_avg: r.bytes_per_sec / unit,
        msg_rate: r.ops_per_sec / 1e6,
    }
}
