//! Keeps `rust-version` true: the library builds with the toolchain it
//! names (when that toolchain is installed), clippy's `incompatible_msrv`
//! finds no newer standard-library item, and no dependency asks for a newer
//! Rust than ours.

use std::collections::BTreeSet;
use std::process::Command;

use crate::capture::capture;
use crate::root;
use crate::tally::Tally;

/// `major.minor` of a version string such as `1.82` or `1.82.0`.
fn minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.trim().split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The library's declared minimum, from its manifest.
fn declared() -> Option<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).ok()?;
    let line = manifest.lines().find(|l| l.trim_start().starts_with("rust-version"))?;
    Some(line.split('"').nth(1)?.to_string())
}

/// Packages the library builds with (normal and build dependencies, every
/// feature on, as `cargo tree` resolves them) whose `rust-version` is above `ours`.
fn newer_dependencies(ours: (u32, u32)) -> Result<Vec<String>, String> {
    let tree = Command::new(env!("CARGO"))
        .args(["tree", "-p", "rrddmma", "-e", "normal,build", "--all-features", "--prefix", "none", "--format", "{p}"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("cargo tree: {e}"))?;
    let used: BTreeSet<(String, String)> = String::from_utf8_lossy(&tree.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.trim_start_matches('v').to_string()))
        })
        .collect();
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--all-features"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let empty = Vec::new();
    let mut newer = Vec::new();
    for p in meta["packages"].as_array().unwrap_or(&empty) {
        let (Some(name), Some(version)) = (p["name"].as_str(), p["version"].as_str()) else { continue };
        if !used.contains(&(name.to_string(), version.to_string())) {
            continue;
        }
        if let Some(rv) = p["rust_version"].as_str() {
            if minor(rv).is_some_and(|v| v > ours) {
                newer.push(format!("{name} {version} needs Rust {rv}"));
            }
        }
    }
    if used.len() < 5 {
        return Err(format!("cargo tree listed only {} packages", used.len()));
    }
    Ok(newer)
}

/// The MSRV checks of `cargo xtask test`.
pub fn check(tally: &mut Tally) {
    let Some(v) = declared() else {
        tally.check("MSRV: rust-version is declared", false);
        return;
    };
    let ours = minor(&v).unwrap_or((0, 0));
    match newer_dependencies(ours) {
        Ok(newer) => {
            for n in &newer {
                println!("{n}, above rrddmma's rust-version {v}");
            }
            tally.check(&format!("MSRV {v}: no dependency needs a newer Rust"), newer.is_empty());
        }
        Err(e) => {
            println!("{e}");
            tally.check(&format!("MSRV {v}: no dependency needs a newer Rust"), false);
        }
    }
    // Clippy reads rust-version: `incompatible_msrv` flags any standard
    // library item stabilised after it. Denied by name so no config hides it.
    let (ok, _) = capture(Command::new(env!("CARGO")).args([
        "clippy",
        "--quiet",
        "-p",
        "rrddmma",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "clippy::incompatible_msrv",
    ]));
    tally.check(&format!("MSRV {v}: clippy's incompatible_msrv finds nothing newer"), ok);
    // The real thing, when that toolchain is installed (rustup cannot fetch
    // one on a machine without network access).
    let toolchain = format!("+{v}");
    let have = Command::new("cargo").arg(&toolchain).arg("--version").output().is_ok_and(|o| o.status.success());
    if have {
        let (ok, _) = capture(
            Command::new("cargo")
                .env_remove("RUSTUP_TOOLCHAIN")
                .env_remove("CARGO")
                .env_remove("RUSTC")
                .args([toolchain.as_str(), "check", "--quiet", "-p", "rrddmma", "--lib", "--all-features"])
                .env("CARGO_TARGET_DIR", root().join("target/msrv")),
        );
        tally.check(&format!("MSRV {v}: the library builds with Rust {v}"), ok);
    } else {
        println!("MSRV {v}: toolchain {v} is not installed; checked by clippy and the dependencies' rust-version only");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_minor() {
        assert_eq!(minor("1.82"), Some((1, 82)));
        assert_eq!(minor("1.76.0"), Some((1, 76)));
        assert!(minor("1.85").unwrap() > minor("1.82.1").unwrap());
        assert_eq!(minor("x"), None);
    }

    #[test]
    fn the_declared_minimum_is_read_and_dependencies_meet_it() {
        let v = declared().expect("rust-version in Cargo.toml");
        let ours = minor(&v).unwrap();
        assert!(ours >= (1, 82), "the bindings' `unsafe extern` blocks need 1.82, declared {v}");
        assert_eq!(newer_dependencies(ours).unwrap(), Vec::<String>::new());
    }
}
