//! The newer rdma-core userspace for the kernel matrix: the pinned rdma-core
//! v59 tree (the tarball `cargo xtask test` fetches, `rdma_core_src::tarball`)
//! built as shared libraries under `target/xtask/rdma-core-v59/build`, run in
//! place by a `dlopen` binary pointed at it (`RRDDMMA_LIB*`).
//!
//! How it runs in place (rdma-core's own mechanisms): configured with
//! `IN_PLACE=1`, libibverbs looks for its provider list in
//! `build/etc/libibverbs.d` (compiled in as `IBV_CONFIG_DIR`), whose
//! `.driver` files name each provider by its absolute path in `build/lib`
//! (`lib<name>-rdmav59.so`). The providers need libibverbs' private ABI
//! (`IBVERBS_PRIVATE_59`) and find the libibverbs already loaded by its
//! soname. Only libibverbs, librdmacm and the rxe, siw and mlx5 providers are
//! built; the `.driver` files of the providers not built are removed, so that
//! libibverbs does not warn about them. The build is kept and reused while
//! the tarball's checksum is unchanged.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{root, Result};

/// The Ninja targets built.
const TARGETS: &[&str] = &["ibverbs", "rdmacm", "rxe-rdmav59", "siw-rdmav59", "mlx5"];

/// The v59 shared libraries, built.
pub struct V59 {
    /// `build/lib`: libibverbs.so.1, librdmacm.so.1, libmlx5.so.1 and the providers.
    pub lib: PathBuf,
}

impl V59 {
    /// The environment that points a `dlopen` binary at these libraries.
    pub fn env(&self) -> String {
        let l = self.lib.display();
        format!(
            "RRDDMMA_LIBIBVERBS='{l}/libibverbs.so.1' RRDDMMA_LIBRDMACM='{l}/librdmacm.so.1' \
             RRDDMMA_LIBMLX5='{l}/libmlx5.so.1'"
        )
    }
}

fn sha256(p: &Path) -> Result<String> {
    let out = Command::new("sha256sum").arg(p).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string())
}

/// The folder holding the rdma-core tree inside an unpacked tarball: the
/// top, or one or two levels down (the `pyverbs` sdist has it under
/// `pyverbs-59.0/rdma-core`).
fn tree_in(dir: &Path) -> Option<PathBuf> {
    let is_tree = |d: &Path| d.join("CMakeLists.txt").is_file() && d.join("libibverbs").is_dir();
    if is_tree(dir) {
        return Some(dir.to_path_buf());
    }
    for e in fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if is_tree(&p) {
            return Some(p);
        }
        if let Some(t) = fs::read_dir(&p).ok().and_then(|rd| rd.flatten().map(|e| e.path()).find(|p| is_tree(p))) {
            return Some(t);
        }
    }
    None
}

/// Builds (or reuses) the v59 shared libraries from `tarball`.
pub fn build(tarball: &Path) -> Result<V59> {
    let base = root().join("target/xtask/rdma-core-v59");
    let (build, stamp) = (base.join("build"), base.join("built"));
    let lib = build.join("lib");
    let want = format!("{} {}\n", sha256(tarball)?, TARGETS.join(","));
    let complete = ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1", "librxe-rdmav59.so", "libsiw-rdmav59.so"]
        .iter()
        .all(|f| lib.join(f).exists());
    if complete && fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        println!("rdma-core v59 userspace: reused from {}", lib.display());
        return Ok(V59 { lib });
    }
    let start = Instant::now();
    let _ = fs::remove_dir_all(&base);
    let unpack = base.join("unpack");
    fs::create_dir_all(&unpack)?;
    crate::run(Command::new("tar").arg("xzf").arg(tarball).arg("-C").arg(&unpack))?;
    let src = tree_in(&unpack).ok_or_else(|| format!("no rdma-core tree in {}", tarball.display()))?;
    crate::run(
        Command::new("cmake")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(&build)
            .args(["-GNinja", "-DIN_PLACE=1", "-DNO_MAN_PAGES=1", "-DNO_PYVERBS=1", "-DENABLE_RESOLVE_NEIGH=0"])
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .stdout(std::process::Stdio::null()),
    )?;
    crate::run(Command::new("ninja").arg("-C").arg(&build).args(TARGETS).stdout(std::process::Stdio::null()))?;
    // The provider list names every provider; keep the ones built.
    for e in fs::read_dir(build.join("etc/libibverbs.d"))?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(p) = name.strip_suffix(".driver") {
            if !lib.join(format!("lib{p}-rdmav59.so")).exists() {
                fs::remove_file(e.path())?;
            }
        }
    }
    fs::write(&stamp, want)?;
    println!(
        "rdma-core v59 userspace: built {} in {:.1} min at {}",
        TARGETS.join(", "),
        start.elapsed().as_secs_f64() / 60.0,
        lib.display()
    );
    Ok(V59 { lib })
}

/// `cargo xtask userspace`: builds (or reuses) the v59 libraries and prints
/// the settings that point a `dlopen` binary at them.
pub fn run() -> Result<()> {
    let v59 = build(&crate::rdma_core_src::tarball()?)?;
    println!("{}", v59.env());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_found_in_the_sdist_layout() {
        let d = std::env::temp_dir().join(format!("rrddmma-userspace-{}", std::process::id()));
        let tree = d.join("pyverbs-59.0/rdma-core");
        fs::create_dir_all(tree.join("libibverbs")).unwrap();
        fs::write(tree.join("CMakeLists.txt"), "").unwrap();
        assert_eq!(tree_in(&d), Some(tree));
        fs::remove_dir_all(&d).unwrap();
        let v = V59 { lib: PathBuf::from("/x/lib") };
        assert!(v.env().contains("RRDDMMA_LIBIBVERBS='/x/lib/libibverbs.so.1'"));
    }
}
