//! `cargo xtask perf-checks`: rrddmma-perf's device checks (perftest
//! interoperability in both directions, zero allocations in measured loops,
//! cluster mode); `cargo xtask test` runs them too.

mod cluster;
mod cluster_dc;
mod cluster_load;
mod dc;
mod flags;
mod knobs;
mod pair;
mod testbed;
mod verdict;

pub use cluster::{cluster_checks, srun_check};
pub use flags::odp_checks;

use crate::device::{self, Check};
use crate::Result;

/// The pairwise checks for `cargo xtask test`: interoperability, outputs
/// and refusals, then the SRQ, rate-limit, ODP and XRC flags, then the QP
/// attribute, immediate-data, counter, limit, v59 and GPU flags, then DC
/// against perftest (mlx5 only: skipped elsewhere).
pub fn checks() -> Result<Vec<Check>> {
    let mut v = pair::checks()?;
    v.extend(flags::checks()?);
    v.extend(knobs::checks()?);
    v.extend(dc::checks()?);
    Ok(v)
}

/// `cargo xtask perf-checks [pair|cluster|rdma_cm] [--only TEXT]`:
/// rrddmma-perf's device checks alone, the pairwise ones, the cluster-mode
/// ones (last: they set up the namespace hosts) or the `-R` ones; with
/// `--only`, those whose name contains TEXT.
pub fn run_checks(args: &[String]) -> Result<()> {
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1));
    let which = args.first().map(String::as_str).filter(|w| *w != "--only");
    let mut checks = if which == Some("cluster") { Vec::new() } else { checks()? };
    if which == Some("rdma_cm") {
        checks.retain(|c| c.step.name.starts_with("perf -R "));
    } else if which != Some("pair") {
        checks.extend(cluster_checks()?);
    }
    if let Some(text) = only {
        checks.retain(|c| c.step.name.contains(text.as_str()));
        if checks.is_empty() {
            return Err(format!("perf-checks --only {text:?}: no check's name contains it").into());
        }
    }
    let place = device::locate(None)?;
    eprintln!("perf checks on {}", place.describe());
    let mut tally = crate::tally::Tally::default();
    device::run_checks(&place, &checks, &mut tally)?;
    tally.finish()
}
