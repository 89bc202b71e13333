//! The static rdma-core build from source (`RRDDMMA_LINKAGE=source`).
//!
//! Source: `RRDDMMA_RDMA_CORE_SRC` (a directory or a `.tar.gz`), else the pinned
//! rdma-core v59.0 release tree as published inside the `pyverbs==59.0` source
//! distribution on PyPI, downloaded with curl and checked against its SHA-256.
//! Only libibverbs, the chosen providers' static archives and (with the `cm`
//! feature) librdmacm's are built.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The pinned release download.
const PINNED_URL: &str = "https://files.pythonhosted.org/packages/98/f5/\
c7f7425c53b313492f35cea6785fefe5d9b98040ce94a66a6f6354fc91ab/pyverbs-59.0.tar.gz";
/// SHA-256 of [`PINNED_URL`].
const PINNED_SHA256: &str = "b30d56bb620b3d3b4301876f9a04c964be1c76cc6553a451e1465f1c6ac9f20e";

const TOOLS_HINT: &str = "the source build needs cmake, ninja, python3 and pkg-config:
    Debian/Ubuntu:  apt-get install cmake ninja-build python3 pkg-config
    RHEL/Fedora:    dnf install cmake ninja-build python3 pkgconf-pkg-config
or install rdma-core's development packages and let the probe use pkg-config:
    Debian/Ubuntu:  apt-get install libibverbs-dev ibverbs-providers
    RHEL/Fedora:    dnf install rdma-core-devel libibverbs";

/// What the source build produced.
pub struct Built {
    /// Provider archives in the order asked, then `libibverbs.a` and rdma-core's
    /// internal helper archives.
    pub archives: Vec<PathBuf>,
    /// The rdma-core version from the tree's `CMakeLists.txt`.
    pub version: String,
}

/// Builds libibverbs, `providers` and (when `with_rdmacm`) librdmacm statically under `out_dir`.
pub fn build(out_dir: &Path, providers: &[String], with_rdmacm: bool) -> Result<Built, String> {
    let tree = source_tree(out_dir)?;
    println!("cargo:rerun-if-changed={}", tree.join("CMakeLists.txt").display());
    let cmakelists = fs::read_to_string(tree.join("CMakeLists.txt"))
        .map_err(|e| format!("reading {}: {e}", tree.join("CMakeLists.txt").display()))?;
    let version = super::probe::rdma_core_version_from_cmake(&cmakelists)
        .ok_or_else(|| format!("{} has no PACKAGE_VERSION; is it rdma-core?", tree.display()))?;

    let build_dir = out_dir.join("rdma-core-build");
    fs::create_dir_all(&build_dir).map_err(|e| format!("creating {}: {e}", build_dir.display()))?;
    let mut configure = Command::new("cmake");
    configure
        .current_dir(&build_dir)
        .arg("-GNinja")
        .arg("-DENABLE_STATIC=1")
        .arg("-DNO_MAN_PAGES=1")
        .arg("-DNO_PYVERBS=1")
        .arg("-DENABLE_RESOLVE_NEIGH=0")
        .arg("-DCMAKE_BUILD_TYPE=Release")
        .arg("-DCMAKE_POSITION_INDEPENDENT_CODE=ON")
        .arg("-DIN_PLACE=1")
        // Runtime paths (librdmacm's ibacm socket) are the system's, not the
        // build directory's: a socket path must fit `sun_path` (108 bytes),
        // which a deep build directory does not.
        .arg("-DCMAKE_INSTALL_RUNDIR=/run")
        .arg(&tree);
    run(&mut configure, "cmake (configure rdma-core)")?;

    // Ask ninja for the archive outputs so that only they (and what they need) get built.
    let targets =
        capture(Command::new("ninja").current_dir(&build_dir).args(["-t", "targets", "all"]), "ninja -t targets")?;
    let outputs: Vec<&str> = targets
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|o| o.starts_with("lib/statics/") && o.ends_with(".a"))
        .collect();
    let mut wanted = Vec::new();
    for p in providers {
        let name = outputs
            .iter()
            .find(|o| archive_matches(o.trim_start_matches("lib/statics/"), p))
            .ok_or_else(|| format!("rdma-core {version} builds no static archive for provider {p:?}"))?;
        wanted.push(name.to_string());
    }
    if with_rdmacm {
        // librdmacm calls into libibverbs: it comes first.
        if !outputs_all(&targets, "lib/statics/librdmacm.a") {
            return Err(format!("rdma-core {version} has no lib/statics/librdmacm.a target"));
        }
        wanted.push("lib/statics/librdmacm.a".to_string());
    }
    wanted.push("lib/statics/libibverbs.a".to_string());
    // The archives under lib/statics leave rdma-core's internal helpers
    // (util, ccan) unresolved; rdma-core merges them only into its
    // "distributable" copies, which need every provider built. Link them directly.
    for internal in ["util/librdma_util_pic.a", "ccan/libccan_pic.a"] {
        if !outputs_all(&targets, internal) {
            return Err(format!("rdma-core {version} has no {internal} target"));
        }
        wanted.push(internal.to_string());
    }
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".into());
    run(Command::new("ninja").current_dir(&build_dir).arg("-j").arg(jobs).args(&wanted), "ninja (build rdma-core)")?;
    Ok(Built { archives: wanted.iter().map(|w| build_dir.join(w)).collect(), version })
}

fn outputs_all(targets: &str, output: &str) -> bool {
    targets.lines().any(|l| l.split(':').next() == Some(output))
}

/// `lib<provider>.a` or `lib<provider>-rdmav<N>.a`.
fn archive_matches(file: &str, provider: &str) -> bool {
    let Some(rest) = file.strip_prefix("lib").and_then(|f| f.strip_prefix(provider)) else {
        return false;
    };
    rest == ".a"
        || rest
            .strip_prefix("-rdmav")
            .and_then(|r| r.strip_suffix(".a"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Finds a provider's static archive in an installed library directory.
pub fn find_provider_archive(libdir: &Path, provider: &str) -> Result<PathBuf, String> {
    let entries = fs::read_dir(libdir).map_err(|e| format!("reading {}: {e}", libdir.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| archive_matches(n, provider)))
        .map(|e| e.path())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        format!(
            "no static archive for provider {provider:?} in {} (looked for lib{provider}.a and \
             lib{provider}-rdmav*.a); Debian ships them in libibverbs-dev, or set RRDDMMA_STATIC_LIBDIR",
            libdir.display()
        )
    })
}

/// The rdma-core tree: the given directory or archive, else the pinned download.
fn source_tree(out_dir: &Path) -> Result<PathBuf, String> {
    let given = env::var_os("RRDDMMA_RDMA_CORE_SRC").map(PathBuf::from);
    let archive = match given {
        Some(p) if p.is_dir() => return find_root(&p),
        Some(p) if p.is_file() => {
            println!("cargo:rerun-if-changed={}", p.display());
            p
        }
        Some(p) => return Err(format!("RRDDMMA_RDMA_CORE_SRC={} does not exist", p.display())),
        None => download(out_dir)?,
    };
    let dest = out_dir.join("rdma-core-src");
    if dest.exists() {
        fs::remove_dir_all(&dest).map_err(|e| format!("removing {}: {e}", dest.display()))?;
    }
    fs::create_dir_all(&dest).map_err(|e| format!("creating {}: {e}", dest.display()))?;
    run(Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(&dest), "tar (unpack rdma-core)")?;
    find_root(&dest)
}

/// The folder holding rdma-core's top `CMakeLists.txt`: the folder itself, its
/// `rdma-core/`, or the same one or two levels down (a release tarball or an sdist).
fn find_root(dir: &Path) -> Result<PathBuf, String> {
    let is_root = |d: &Path| d.join("CMakeLists.txt").is_file() && d.join("libibverbs").is_dir();
    let mut queue = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = queue.pop() {
        if is_root(&d) {
            return Ok(d);
        }
        if depth < 2 {
            if let Ok(rd) = fs::read_dir(&d) {
                queue
                    .extend(rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).map(|p| (p, depth + 1)));
            }
        }
    }
    Err(format!("{} holds no rdma-core tree (CMakeLists.txt beside libibverbs/)", dir.display()))
}

/// Downloads the pinned release and checks its SHA-256.
fn download(out_dir: &Path) -> Result<PathBuf, String> {
    let dest = out_dir.join("pyverbs-59.0.tar.gz");
    if !dest.exists() || sha256_file(&dest)? != PINNED_SHA256 {
        run(
            Command::new("curl").args(["-fsSL", "--retry", "3", "-o"]).arg(&dest).arg(PINNED_URL),
            "curl (download rdma-core v59.0)",
        )
        .map_err(|e| format!("{e}; without network, set RRDDMMA_RDMA_CORE_SRC to an rdma-core tree or .tar.gz"))?;
    }
    let got = sha256_file(&dest)?;
    if got != PINNED_SHA256 {
        return Err(format!("{PINNED_URL} has SHA-256 {got}, expected {PINNED_SHA256}; refusing to build it"));
    }
    Ok(dest)
}

fn sha256_file(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{what}: cannot run ({e}); {TOOLS_HINT}"))?;
    if out.status.success() {
        return Ok(());
    }
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    Err(format!("{what} failed ({}):\n{}\n{}", out.status, tail(&out.stdout), tail(&out.stderr)))
}

fn capture(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{what}: cannot run ({e}); {TOOLS_HINT}"))?;
    if !out.status.success() {
        return Err(format!("{what} failed ({})", out.status));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("{what}: output is not UTF-8: {e}"))
}
