//! Debian's kernel source, `linux-source-<series>` (the version apt gives),
//! downloaded once and unpacked once for everything that reads it: soft-iWARP's
//! directory (built as a module, [`crate::siw`]) and the mlx5 files of the
//! kernel mlx5e CQE-decompression oracle (tests/mlx5_kernel_oracle.rs, run
//! by [`crate::mlx5_provider`]). Both parts come out of the package's big
//! `.tar.xz` in one decompression pass, into
//! `target/xtask/linux-source/<series>/linux-source-<series>/`; `unpacked.txt`
//! beside it names the version and the parts, so a later call reuses them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, run, Result};

/// The series of Debian stable's kernel (bookworm), whose source the oracle reads.
pub const ORACLE_SERIES: &str = "6.1";

/// What is unpacked from the tarball: siw's directory and the files the
/// oracle cuts definitions from.
const PARTS: &[&str] = &[
    "drivers/infiniband/sw/siw/*",
    "drivers/net/ethernet/mellanox/mlx5/core/en_rx.c",
    "drivers/net/ethernet/mellanox/mlx5/core/en.h",
    "drivers/net/ethernet/mellanox/mlx5/core/wq.h",
    "include/linux/mlx5/cq.h",
    "include/linux/mlx5/device.h",
    "include/linux/mlx5/driver.h",
    "include/linux/mlx5/mlx5_ifc.h",
    "include/linux/mlx5/qp.h",
];

/// An unpacked kernel source.
pub struct LinuxSource {
    /// The tree's root (`.../linux-source-<series>`).
    pub tree: PathBuf,
    /// The package, `linux-source-6.1`.
    pub package: String,
    /// Its Debian version, `6.1.192-3`.
    pub version: String,
}

/// Downloads (once) `linux-source-<series>` and unpacks (once) [`PARTS`].
pub fn unpacked(series: &str) -> Result<LinuxSource> {
    unpacked_with(series, &[])
}

/// The source of Debian's newest kernel (trixie-backports, the series the
/// `newest` VM kernel is of), for the PRM members only its `mlx5_ifc.h`
/// has (tests/mlx5_prm_oracle.rs): fetched with the private apt
/// configuration of [`crate::kernels`], unpacked as [`unpacked`] does.
pub fn newest() -> Result<LinuxSource> {
    let (series, opts) = crate::kernels::newest_series()?;
    unpacked_with(&series, &opts)
}

fn unpacked_with(series: &str, apt_opts: &[String]) -> Result<LinuxSource> {
    let package = format!("linux-source-{series}");
    let dir = root().join("target/xtask/linux-source").join(series);
    let tree = dir.join(&package);
    let note = dir.join("unpacked.txt");
    let want = |version: &str| format!("{package} {version}\n{}\n", PARTS.join("\n"));
    if let Ok(text) = fs::read_to_string(&note) {
        let version = text.lines().next().and_then(|l| l.split(' ').nth(1)).unwrap_or("").to_string();
        if text == want(&version) && tree.is_dir() {
            return Ok(LinuxSource { tree, package, version });
        }
    }
    fs::create_dir_all(&dir)?;
    let deb = |d: &Path| {
        fs::read_dir(d).ok().and_then(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{package}_"))))
        })
    };
    if deb(&dir).is_none() {
        run(Command::new("apt-get")
            .args(apt_opts)
            .args(["download", "-q", "-oAPT::Sandbox::User=root", &package])
            .current_dir(&dir))?;
    }
    let deb = deb(&dir).ok_or_else(|| format!("apt-get download {package} left no .deb in {}", dir.display()))?;
    let version = Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version").output()?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    if tree.exists() {
        fs::remove_dir_all(&tree)?;
    }
    let parts: Vec<String> = PARTS.iter().map(|p| format!("'{package}/{p}'")).collect();
    run(Command::new("bash").current_dir(&dir).arg("-c").arg(format!(
        "set -o pipefail; dpkg-deb --fsys-tarfile '{}' | tar -xO ./usr/src/{package}.tar.xz | tar -xJ --wildcards {}",
        deb.display(),
        parts.join(" ")
    )))?;
    fs::write(&note, want(&version))?;
    Ok(LinuxSource { tree, package, version })
}
