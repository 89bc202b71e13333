//! perftest 25.01 for the kernel matrix's interop checks of the flags
//! Debian bookworm's perftest (4.5) lacks (`--write_with_imm`,
//! `--send_with_imm`, `--flow_label`). Debian trixie's perftest
//! 25.01.0+0.80 binaries need trixie's glibc, so the pinned Debian orig
//! tarball is built here from source (its `configure` is in the tarball: no
//! autotools needed, only `make` and a C compiler) against the pinned
//! rdma-core v59 (`userspace`): headers from its `build/include`, libraries
//! from its `build/lib`, which the binaries find by their run path. Only the
//! four tools the checks run are built. The tarball is cached under
//! `target/xtask/perftest-src`, the build under `target/xtask/perftest-25.01`
//! and reused while the tarball's checksum and the v59 library folder are
//! unchanged.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::userspace::V59;
use crate::{root, Result};

/// Debian's orig tarball of perftest 25.01.0 (source package
/// 25.01.0+0.80-1, trixie) and its SHA-256.
const PINNED_URL: &str = "https://deb.debian.org/debian/pool/main/p/perftest/perftest_25.01.0+0.80.orig.tar.gz";
const PINNED_SHA256: &str = "54e86b131f0b06862b8b9cd692739737295463cfef467bdda5f5aa3dae8c5b05";
const TARBALL: &str = "perftest_25.01.0+0.80.orig.tar.gz";

/// The tools built (Automake program targets).
pub const TOOLS: &[&str] = &["ib_write_bw", "ib_write_lat", "ib_send_bw", "ib_send_lat"];

/// The perftest 25.01 tools, built.
pub struct Perftest25 {
    /// The folder holding [`TOOLS`].
    pub bin: PathBuf,
    /// The v59 libraries they (and a peer run beside them) load.
    pub lib: PathBuf,
}

impl Perftest25 {
    /// The quoted path of `tool` (one of [`TOOLS`]).
    pub fn tool(&self, tool: &str) -> String {
        assert!(TOOLS.contains(&tool), "perftest 25.01: {tool} is not built (built: {TOOLS:?})");
        format!("'{}'", self.bin.join(tool).display())
    }

    /// The shell prefix that runs a dynamically linked verbs program on
    /// the v59 libraries (its libibverbs.so.1 and librdmacm.so.1 found
    /// before the system's; libibverbs finds its providers in v59's
    /// `build/etc/libibverbs.d`). An `env` command, so that it also works
    /// after `timeout`.
    pub fn env(&self) -> String {
        format!("env LD_LIBRARY_PATH='{}'", self.lib.display())
    }
}

fn sha256(p: &Path) -> Result<String> {
    let out = Command::new("sha256sum").arg(p).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string())
}

/// Fetches the pinned tarball (cached) with curl and checks its SHA-256.
pub fn tarball() -> Result<PathBuf> {
    let dir = root().join("target/xtask/perftest-src");
    let tarball = dir.join(TARBALL);
    if !tarball.exists() || sha256(&tarball)? != PINNED_SHA256 {
        fs::create_dir_all(&dir)?;
        let part = dir.join(format!("{TARBALL}.part"));
        crate::run(Command::new("curl").args(["-fsSL", "--retry", "3", "-o"]).arg(&part).arg(PINNED_URL))?;
        let got = sha256(&part)?;
        if got != PINNED_SHA256 {
            let _ = fs::remove_file(&part);
            return Err(format!(
                "{PINNED_URL} has SHA-256 {got}, expected {PINNED_SHA256} (xtask/src/perftest_src.rs pins it)"
            )
            .into());
        }
        fs::rename(&part, &tarball)?;
    }
    Ok(tarball)
}

/// The stamp that says a build is current: the tarball's checksum, the
/// libraries' folder, the tools.
fn stamp_of(sha: &str, lib: &Path) -> String {
    format!("{sha} {} {}\n", lib.display(), TOOLS.join(","))
}

/// Builds (or reuses) the perftest 25.01 tools against `v59`.
pub fn build(v59: &V59) -> Result<Perftest25> {
    let tarball = tarball()?;
    let base = root().join("target/xtask/perftest-25.01");
    let (bin, stamp) = (base.join("bin"), base.join("built"));
    let lib = v59.lib.clone();
    let want = stamp_of(&sha256(&tarball)?, &lib);
    let complete = TOOLS.iter().all(|t| bin.join(t).is_file());
    if complete && fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        println!("perftest 25.01: reused from {}", bin.display());
        return Ok(Perftest25 { bin, lib });
    }
    let start = Instant::now();
    let _ = fs::remove_dir_all(&base);
    let unpack = base.join("unpack");
    fs::create_dir_all(&unpack)?;
    crate::run(Command::new("tar").arg("xzf").arg(&tarball).arg("-C").arg(&unpack))?;
    let src = unpack.join("perftest-25.01.0");
    if !src.join("configure").is_file() {
        return Err(format!("{}: no perftest-25.01.0/configure inside", tarball.display()).into());
    }
    let include = lib.parent().map(|b| b.join("include")).unwrap_or_default();
    if !include.join("infiniband/verbs.h").is_file() {
        return Err(format!(
            "perftest 25.01: no rdma-core v59 headers at {} (`cargo xtask userspace` builds them)",
            include.display()
        )
        .into());
    }
    crate::run(
        Command::new("./configure")
            .current_dir(&src)
            .arg("--disable-dependency-tracking")
            .arg("--disable-silent-rules")
            .env("CPPFLAGS", format!("-I{}", include.display()))
            .env("LDFLAGS", format!("-L{0} -Wl,-rpath,{0}", lib.display()))
            .env("CFLAGS", "-O2 -g0")
            .stdout(Stdio::null()),
    )?;
    crate::run(Command::new("make").current_dir(&src).arg("-j2").args(TOOLS).stdout(Stdio::null()))?;
    fs::create_dir_all(&bin)?;
    for t in TOOLS {
        fs::copy(src.join(t), bin.join(t))?;
    }
    let _ = fs::remove_dir_all(&unpack);
    fs::write(&stamp, want)?;
    println!(
        "perftest 25.01: built {} in {:.0} s at {}",
        TOOLS.join(", "),
        start.elapsed().as_secs_f64(),
        bin.display()
    );
    Ok(Perftest25 { bin, lib })
}

/// `cargo xtask perftest25`: builds (or reuses) the tools and prints where.
pub fn run() -> Result<()> {
    let v59 = crate::userspace::build(&crate::rdma_core_src::tarball()?)?;
    let p = build(&v59)?;
    for t in TOOLS {
        println!("{} {}", p.env(), p.tool(t));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_and_environment_name_the_built_paths() {
        let p = Perftest25 { bin: PathBuf::from("/t/bin"), lib: PathBuf::from("/v/lib") };
        assert_eq!(p.tool("ib_write_bw"), "'/t/bin/ib_write_bw'");
        assert_eq!(p.env(), "env LD_LIBRARY_PATH='/v/lib'");
        let s = stamp_of("abc", Path::new("/v/lib"));
        assert_eq!(s, "abc /v/lib ib_write_bw,ib_write_lat,ib_send_bw,ib_send_lat\n");
        assert_ne!(s, stamp_of("abd", Path::new("/v/lib")));
    }

    #[test]
    #[should_panic(expected = "ib_read_bw is not built")]
    fn a_tool_not_built_is_a_programming_error() {
        Perftest25 { bin: PathBuf::new(), lib: PathBuf::new() }.tool("ib_read_bw");
    }
}
