//! The kernel matrix in `cargo xtask test`: after the full device session
//! under Debian stable's kernel, a second VM boots Debian's newest kernel
//! (see `kernels`) and runs a subset of the device suite there: the rows a
//! newer rxe changes (ODP, ATOMIC WRITE) and a smoke of loopback, ops,
//! features, the CM, the SRQ limit and type-2 windows; then `rrddmma-perf
//! --odp` against perftest's `--odp`.

use std::path::Path;

use crate::device::{self, Check, Place};
use crate::kernels::{self, Kernel};
use crate::tally::Tally;
use crate::Result;

/// The device tests run under the newest kernel: libtest filters (any matches).
pub const NEWEST_SUBSET: &[&str] = &[
    "newer_kernel::",
    "iwarp::",
    "loopback::",
    "ops::",
    "features::",
    "cm::",
    "srq_limit::",
    "mw2::",
    "hw_verbs::",
    "cm_ece::",
];

/// Runs the subset of the device suite `device_tests` under Debian's newest
/// kernel, each check named with that kernel.
pub fn newest(device_tests: &Path, tally: &mut Tally) -> Result<()> {
    let image = Kernel::Newest.image()?;
    let release = kernels::release_of(&image);
    let place = Place::Vm { kernel: image };
    println!("kernel matrix: device tests on {}", place.describe());
    let want = release.clone();
    let filters = NEWEST_SUBSET.join(" ");
    let mut checks = vec![
        Check::verdict(&format!("kernel {release}: the VM runs it"), "uname -r".into(), move |d| {
            d.code == Some(0) && d.output.lines().any(|l| l.trim() == want)
        }),
        Check::libtest(
            &format!("device tests under kernel {release} (ODP, ATOMIC WRITE, iWARP-or-not, loopback, ops, features, CM, SRQ limit, MW type 2)"),
            format!("'{}' --ignored --test-threads=1 --skip cm::thousand {filters}", device_tests.display()),
        ),
    ];
    // rrddmma-perf --odp against perftest --odp, both roles (rxe's RC ODP).
    checks.extend(crate::perf_checks::odp_checks(&release)?);
    device::run_checks(&place, &checks, tally)
}
