//! Idempotent installation of what the tasks need: Debian packages and virtme-ng.

use std::process::Command;

use crate::{run, Result};

/// Debian packages: the SoftRoCE VM, rdma-core, the source-build tools (rdma-core's, perftest's), libclang,
/// the launchers (Open MPI, Slurm with munge).
pub const APT_PACKAGES: &[&str] = &[
    "qemu-system-x86",
    "linux-image-amd64",
    "busybox-static",
    "kmod",
    "iproute2",
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "rdmacm-utils",
    "perftest",
    "libibverbs-dev",
    "librdmacm-dev",
    // perftest 25.01's source build (`perftest_src`): its configure wants
    // libibumad's and pciutils' headers.
    "libibumad-dev",
    "libpci-dev",
    "pkg-config",
    "cmake",
    "ninja-build",
    "python3",
    "curl",
    "libclang-dev",
    "valgrind",
    "openmpi-bin",
    "slurm-wlm",
    "munge",
];

fn missing_packages() -> Vec<&'static str> {
    APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            let out = Command::new("dpkg-query").args(["-W", "-f=${Status}", p]).output();
            !matches!(out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect()
}

/// Whether `vng` (virtme-ng) is on the PATH.
pub fn have_vng() -> bool {
    Command::new("vng").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Installs whatever is missing; does nothing when all is there.
pub fn ensure() -> Result<()> {
    let missing = missing_packages();
    if !missing.is_empty() {
        eprintln!("deps: installing {}", missing.join(" "));
        run(Command::new("apt-get").args(["update", "-q"]))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    if !have_vng() {
        eprintln!("deps: installing virtme-ng");
        run(Command::new("python3").args(["-m", "pip", "install", "-q", "virtme-ng"]))?;
        if !have_vng() {
            return Err("virtme-ng installed but `vng` is not on the PATH".into());
        }
    }
    Ok(())
}
