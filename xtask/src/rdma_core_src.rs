//! The pinned rdma-core release the harnesses build from: downloaded once
//! into `target/xtask/rdma-core-src`, checked against its SHA-256.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, Result};

/// The pinned rdma-core v59.0 release (the `pyverbs` sdist on PyPI, which
/// is the whole rdma-core tree) and its SHA-256: the same file the
/// library's source build downloads (build/source.rs).
const PINNED_URL: &str = "https://files.pythonhosted.org/packages/98/f5/\
c7f7425c53b313492f35cea6785fefe5d9b98040ce94a66a6f6354fc91ab/pyverbs-59.0.tar.gz";
const PINNED_SHA256: &str = "b30d56bb620b3d3b4301876f9a04c964be1c76cc6553a451e1465f1c6ac9f20e";

/// Fetches the pinned rdma-core tree (cached under target/xtask) with curl
/// and checks its SHA-256. (`pip download` of the sdist also builds its
/// metadata, which took six minutes on a fresh machine.)
pub(crate) fn tarball() -> Result<PathBuf> {
    let dir = root().join("target/xtask/rdma-core-src");
    let tarball = dir.join("pyverbs-59.0.tar.gz");
    let sha = |p: &Path| -> Result<String> {
        let out = Command::new("sha256sum").arg(p).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string())
    };
    if !tarball.exists() || sha(&tarball)? != PINNED_SHA256 {
        std::fs::create_dir_all(&dir)?;
        let part = dir.join("pyverbs-59.0.tar.gz.part");
        crate::run(Command::new("curl").args(["-fsSL", "--retry", "3", "-o"]).arg(&part).arg(PINNED_URL))?;
        let got = sha(&part)?;
        if got != PINNED_SHA256 {
            return Err(format!("{PINNED_URL} has SHA-256 {got}, expected {PINNED_SHA256}").into());
        }
        std::fs::rename(&part, &tarball)?;
    }
    Ok(tarball)
}
