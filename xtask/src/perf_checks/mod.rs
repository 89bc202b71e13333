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
mod perftest25;
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

/// The kernel matrix's checks against perftest 25.01 built from source
/// (`perftest_src`) on the rdma-core v59 libraries, named with `release`.
pub fn perftest25_checks(release: &str, pt: &crate::perftest_src::Perftest25) -> Result<Vec<Check>> {
    let exe = crate::pairs::binary()?;
    Ok(perftest25::checks(release, &format!("'{}'", exe.display()), pt))
}

/// `perf-checks matrix`: the kernel matrix's perf checks alone (the ODP
/// ones and those against perftest 25.01) in the VM under Debian's newest
/// kernel.
fn matrix(only: Option<&String>) -> Result<()> {
    let image = crate::kernels::Kernel::Newest.image()?;
    let release = crate::kernels::release_of(&image);
    let v59 = crate::userspace::build(&crate::rdma_core_src::tarball()?)?;
    let pt = crate::perftest_src::build(&v59)?;
    let mut checks = odp_checks(&release)?;
    checks.extend(perftest25_checks(&release, &pt)?);
    if let Some(text) = only {
        checks.retain(|c| c.step.name.contains(text.as_str()));
        if checks.is_empty() {
            return Err(format!("perf-checks matrix --only {text:?}: no check's name contains it").into());
        }
    }
    let place = device::Place::Vm { kernel: image };
    eprintln!("perf checks on {}", place.describe());
    let mut tally = crate::tally::Tally::default();
    device::run_checks(&place, &checks, &mut tally)?;
    tally.finish()
}

/// `cargo xtask perf-checks [pair|cluster|rdma_cm|matrix] [--only TEXT]`:
/// rrddmma-perf's device checks alone, the pairwise ones, the cluster-mode
/// ones (last: they set up the namespace hosts), the `-R` ones or the
/// kernel matrix's; with `--only`, those whose name contains TEXT.
pub fn run_checks(args: &[String]) -> Result<()> {
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1));
    let which = args.first().map(String::as_str).filter(|w| *w != "--only");
    if which == Some("matrix") {
        return matrix(only);
    }
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
