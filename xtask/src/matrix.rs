//! The kernel matrix in `cargo xtask test`: after the full device session
//! under Debian stable's kernel, a second VM boots Debian's newest kernel
//! (see `kernels`) and runs the device suite there (all but the thousand CM
//! cycles), with Debian's rdma-core 44 userspace; then, in the same VM, the
//! rows a newer userspace changes (ODP prefetch, FLUSH, XRC open) with the
//! `dlopen` build of the device tests pointed at the pinned rdma-core v59
//! (`userspace`); `rrddmma-perf --odp` against perftest's `--odp`; and
//! rrddmma-perf's `--write_with_imm`, `--send_with_imm` and `--flow_label`
//! against perftest 25.01 built from Debian's pinned source on the v59
//! libraries (`perftest_src`, `perf_checks::perftest25_checks`).

use std::path::Path;

use crate::device::{self, Check, Place};
use crate::kernels::{self, Kernel};
use crate::tally::Tally;
use crate::Result;

/// The device tests run under the newest kernel with rdma-core v59.
pub const V59_SUBSET: &[&str] =
    &["newer_kernel::", "flush::", "xrc_open::", "loopback::", "ops::", "userspace::", "v59_verbs::"];

/// Runs the subset of the device suite `device_tests` under Debian's newest
/// kernel, each check named with that kernel and the userspace; with `v59`
/// (the device tests on the `dlopen` linkage, and the pinned rdma-core
/// tarball), also the v59 subset and the checks against perftest 25.01
/// built on the v59 libraries.
pub fn newest(device_tests: &Path, v59: Option<(&Path, &Path)>, tally: &mut Tally) -> Result<()> {
    let image = Kernel::Newest.image()?;
    let release = kernels::release_of(&image);
    let place = Place::Vm { kernel: image };
    println!("kernel matrix: device tests on {}", place.describe());
    let want = release.clone();
    let mut checks = vec![
        Check::verdict(&format!("kernel {release}: the VM runs it"), "uname -r".into(), move |d| {
            d.code == Some(0) && d.output.lines().any(|l| l.trim() == want)
        }),
        Check::libtest(
            &format!("device tests under kernel {release} + rdma-core 44 (the whole suite but the thousand CM cycles)"),
            format!(
                "RRDDMMA_EXPECT_USERSPACE=44 '{}' --ignored --test-threads=1 --skip cm::thousand",
                device_tests.display()
            ),
        ),
    ];
    let mut built = None;
    match v59.map(|(tests, tarball)| crate::userspace::build(tarball).map(|v| (tests, v))) {
        None => println!(
            "kernel matrix: rdma-core v59 step and the perftest 25.01 checks not run (the dlopen build failed)"
        ),
        Some(Err(e)) => tally.check(&format!("rdma-core v59 userspace built ({e})"), false),
        Some(Ok((tests, v59))) => built = Some((tests, v59)),
    }
    if let Some((tests, v59)) = &built {
        checks.push(Check::libtest(
            &format!("device tests under kernel {release} + rdma-core v59 (dlopen linkage; ODP prefetch, FLUSH, XRC open, loopback, ops, the v59 verbs, the mapped libibverbs)"),
            format!(
                "RRDDMMA_EXPECT_LINKAGE=dlopen RRDDMMA_EXPECT_USERSPACE=59 {} '{}' --ignored --test-threads=1 {}",
                v59.env(),
                tests.display(),
                V59_SUBSET.join(" ")
            ),
        ));
    }
    // rrddmma-perf --odp against perftest --odp, both roles (rxe's RC ODP).
    checks.extend(crate::perf_checks::odp_checks(&release)?);
    // The flags Debian's perftest 4.5 lacks, against perftest 25.01 built
    // from source on the v59 libraries (both sides run on them).
    if let Some((_, v59)) = &built {
        match crate::perftest_src::build(v59) {
            Ok(pt) => checks.extend(crate::perf_checks::perftest25_checks(&release, &pt)?),
            Err(e) => tally.check(&format!("perftest 25.01 built from source against rdma-core v59 ({e})"), false),
        }
    }
    device::run_checks(&place, &checks, tally)
}
