//! Records what the report's testbed needs from the build: the rrddmma
//! library's version (read from the workspace's Cargo.toml, whose package
//! is the library) and the git revision when built from a git checkout.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = root.join("Cargo.toml");
    println!("cargo:rerun-if-changed={}", manifest.display());
    let text = std::fs::read_to_string(&manifest).unwrap_or_default();
    // The first `version = "..."` of the [package] table.
    let version = text
        .split("\n[")
        .find(|t| t.starts_with("package]") || t.starts_with("[package]"))
        .and_then(|t| t.lines().find_map(|l| l.trim().strip_prefix("version = ")))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RRDDMMA_PERF_LIB_VERSION={version}");
    // The revision, "-dirty" when tracked files differed from it at build
    // time; rebuilt when HEAD moves (a commit, a checkout) or sources change.
    let rev = match git(&["rev-parse", "HEAD"]) {
        Some(rev) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
            format!("{rev}{}", if dirty { "-dirty" } else { "" })
        }
        None => "none (not built from a git checkout)".into(),
    };
    println!("cargo:rustc-env=RRDDMMA_PERF_GIT_REVISION={rev}");
    if let Some(p) = git(&["rev-parse", "--git-path", "logs/HEAD"]) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(p);
        println!("cargo:rerun-if-changed={}", p.display());
    }
    println!("cargo:rerun-if-changed={}", root.join("src").display());
    println!("cargo:rerun-if-changed={}", Path::new(env!("CARGO_MANIFEST_DIR")).join("src").display());
}
