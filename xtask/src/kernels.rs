//! The kernel matrix: which kernel the SoftRoCE VM boots.
//!
//! - `stable`: the newest kernel installed under `/boot` that has `rdma_rxe`
//!   (Debian stable's, from `cargo xtask deps`).
//! - `newest`: Debian's newest packaged kernel (trixie-backports'
//!   `linux-image-amd64`), fetched with a private apt configuration under
//!   `target/xtask/apt` (the system's sources are left alone) and unpacked,
//!   image and modules, under `target/xtask/kernels/<abi>/usr/lib/modules/<abi>`.
//!   virtme-ng finds the modules beside the image and links them into the
//!   guest's `/lib/modules`; nothing is installed on the host.
//!   `RRDDMMA_NEWEST_KERNEL=<abi>` (e.g. `7.3.4+deb13-amd64`) pins a version.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{root, run, Result};

/// The suite Debian's newest kernels come from.
const SUITE: &str = "trixie-backports";
const MIRROR: &str = "http://deb.debian.org/debian";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Which kernel a VM boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Debian stable's kernel, installed under `/boot`.
    Stable,
    /// Debian's newest kernel (trixie-backports), fetched and unpacked under target/xtask.
    Newest,
}

impl Kernel {
    /// Parses `stable` / `newest`.
    pub fn parse(name: &str) -> Result<Kernel> {
        match name {
            "stable" => Ok(Kernel::Stable),
            "newest" => Ok(Kernel::Newest),
            other => Err(format!("unknown kernel `{other}`: use `stable` or `newest`").into()),
        }
    }

    /// The kernel image to boot, fetched first if needed.
    pub fn image(self) -> Result<PathBuf> {
        match self {
            Kernel::Stable => stable_image(),
            Kernel::Newest => newest_image(),
        }
    }
}

/// The kernel release a Debian image path names (`vmlinuz-<abi>` or
/// `.../modules/<abi>/vmlinuz`).
pub fn release_of(image: &Path) -> String {
    let name = image.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.strip_prefix("vmlinuz-") {
        Some(v) => v.to_string(),
        None => image.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or(name),
    }
}

/// The newest installed kernel image that has the rdma_rxe module.
fn stable_image() -> Result<PathBuf> {
    let mut found: Vec<(String, PathBuf)> = fs::read_dir("/boot")?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("vmlinuz-")?.to_string();
            let rxe = Path::new("/lib/modules").join(&version).join("kernel/drivers/infiniband/sw/rxe");
            rxe.is_dir().then(|| (version, e.path()))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p).ok_or_else(|| {
        "no kernel with rdma_rxe in /boot (the host kernel has none either); \
         `cargo xtask deps` installs Debian's linux-image-amd64"
            .into()
    })
}

/// The private apt configuration: its own sources, lists and cache.
fn apt_options() -> Result<Vec<String>> {
    let dir = root().join("target/xtask/apt");
    for sub in ["lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d"] {
        fs::create_dir_all(dir.join(sub))?;
    }
    let sources = dir.join("etc/sources.list");
    fs::write(&sources, format!("deb [signed-by={KEYRING}] {MIRROR} {SUITE} main\n"))?;
    let d = dir.display();
    Ok(vec![
        format!("-oDir::Etc::SourceList={}", sources.display()),
        format!("-oDir::Etc::SourceParts={d}/etc/sources.list.d"),
        format!("-oDir::Etc::Preferences={d}/etc/preferences"),
        format!("-oDir::Etc::PreferencesParts={d}/etc/preferences.d"),
        format!("-oDir::State::Lists={d}/lists"),
        format!("-oDir::Cache={d}/cache"),
        "-oDir::State::status=/dev/null".into(),
        "-oAPT::Architecture=amd64".into(),
        "-oAPT::Sandbox::User=root".into(),
        "-oDebug::NoLocking=1".into(),
    ])
}

fn apt(program: &str, opts: &[String]) -> Command {
    let mut c = Command::new(program);
    c.args(opts);
    c
}

/// The series (`7.3`) of Debian's newest kernel and the private apt
/// options its packages (`linux-source-7.3` among them) are fetched with.
pub(crate) fn newest_series() -> Result<(String, Vec<String>)> {
    let opts = apt_options()?;
    let abi = newest_abi(&opts)?;
    let series: Vec<&str> = abi.split(['.', '-', '+']).take(2).collect();
    Ok((series.join("."), opts))
}

/// The ABI (`7.3.4+deb13-amd64`) that the suite's `linux-image-amd64` depends on.
fn newest_abi(opts: &[String]) -> Result<String> {
    run(apt("apt-get", opts).args(["update", "-q"]))?;
    if let Ok(pinned) = std::env::var("RRDDMMA_NEWEST_KERNEL") {
        return Ok(pinned);
    }
    let out = apt("apt-cache", opts).args(["show", "linux-image-amd64"]).output()?;
    parse_abi(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| format!("{SUITE} names no linux-image-<abi>-amd64 for linux-image-amd64").into())
}

/// Reads `linux-image-<abi> (= ...)` out of `apt-cache show linux-image-amd64`.
fn parse_abi(show: &str) -> Option<String> {
    let depends = show.lines().find_map(|l| l.strip_prefix("Depends: "))?;
    depends.split(',').map(str::trim).find_map(|d| {
        let name = d.split_whitespace().next()?;
        let abi = name.strip_prefix("linux-image-")?;
        (abi.ends_with("-amd64") && abi.chars().next()?.is_ascii_digit()).then(|| abi.to_string())
    })
}

/// Fetches (once) and returns the image of Debian's newest kernel.
fn newest_image() -> Result<PathBuf> {
    let base = root().join("target/xtask/kernels");
    // A kernel unpacked before serves (no network) unless a pin names another.
    if std::env::var_os("RRDDMMA_NEWEST_KERNEL").is_none() {
        if let Some(ready) = unpacked(&base)?.pop() {
            return Ok(ready);
        }
    }
    let opts = apt_options()?;
    let abi = newest_abi(&opts)?;
    let tree = base.join(&abi);
    let moddir = tree.join("usr/lib/modules").join(&abi);
    let image = moddir.join("vmlinuz");
    if moddir.join("modules.dep").exists() && image.exists() {
        return Ok(image);
    }
    let debs = base.join("debs");
    fs::create_dir_all(&debs)?;
    let packages = ["binary", "modules", "base"].map(|p| format!("linux-{p}-{abi}"));
    eprintln!("kernels: fetching {} from {SUITE}", packages.join(" "));
    run(apt("apt-get", &opts).args(["download", "-q"]).args(&packages).current_dir(&debs))?;
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(&tree)?;
    for entry in fs::read_dir(&debs)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if packages.iter().any(|p| name.starts_with(&format!("{p}_"))) {
            run(Command::new("dpkg-deb").arg("-x").arg(&path).arg(&tree))?;
        }
    }
    // The packages ship no modules.dep (their postinst makes it): make it here.
    run(Command::new("depmod").arg("-a").arg("-b").arg(tree.join("usr")).arg(&abi))?;
    if !image.exists() {
        return Err(format!("no kernel image at {} after unpacking {}", image.display(), packages.join(" ")).into());
    }
    Ok(image)
}

/// Kernels unpacked earlier and complete (image and modules.dep), oldest first.
fn unpacked(base: &Path) -> Result<Vec<PathBuf>> {
    let mut ready: Vec<PathBuf> = match fs::read_dir(base) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| {
                let abi = e.file_name();
                e.path().join("usr/lib/modules").join(abi)
            })
            .filter(|m| m.join("modules.dep").exists() && m.join("vmlinuz").exists())
            .map(|m| m.join("vmlinuz"))
            .collect(),
        Err(_) => Vec::new(),
    };
    ready.sort_by_key(|p| version_key(&release_of(p)));
    Ok(ready)
}

/// Whether SoftRoCE under kernel `release` has on-demand paging (rxe gained
/// ODP in Linux 6.14).
pub fn rxe_has_odp(release: &str) -> bool {
    version_key(release) >= vec![6, 14]
}

/// `7.3.4+deb13-amd64` → [7, 3, 4]: numeric order of releases.
fn version_key(release: &str) -> Vec<u64> {
    release.split(['+', '-']).next().unwrap_or("").split('.').map(|n| n.parse().unwrap_or(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_comes_from_the_image_dependency() {
        let show = "Package: linux-image-amd64\nVersion: 7.3.4-1~bpo13+1\n\
                    Depends: linux-base-amd64 (= 7.3.4-1~bpo13+1), linux-image-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), \
                    linux-modules-amd64 (= 7.3.4-1~bpo13+1)\n";
        assert_eq!(parse_abi(show).as_deref(), Some("7.3.4+deb13-amd64"));
        assert_eq!(parse_abi("Package: x\nDepends: linux-image-amd64-signed\n"), None);
    }

    #[test]
    fn releases_are_read_from_either_layout_and_ordered_by_number() {
        assert_eq!(release_of(Path::new("/boot/vmlinuz-6.1.0-56-amd64")), "6.1.0-56-amd64");
        assert_eq!(release_of(Path::new("/x/usr/lib/modules/7.3.4+deb13-amd64/vmlinuz")), "7.3.4+deb13-amd64");
        assert!(version_key("7.10.1+deb13-amd64") > version_key("7.3.4+deb13-amd64"));
        assert!(rxe_has_odp("7.3.4+deb13-amd64") && rxe_has_odp("6.14.0-1-amd64"));
        assert!(!rxe_has_odp("6.1.0-56-amd64") && !rxe_has_odp("6.13.9+deb13-amd64"));
        assert_eq!(Kernel::parse("newest").unwrap(), Kernel::Newest);
        assert!(Kernel::parse("7.3").unwrap_err().to_string().contains("`stable` or `newest`"));
    }
}
