//! Reproducible builds: every workspace the suite builds resolves from its
//! committed lockfile, and the suite leaves the tree as it found it.

use std::path::Path;
use std::process::Command;

use crate::root;
use crate::tally::Tally;

/// The workspaces `cargo xtask test` builds, by manifest (the main one,
/// the fuzz targets, the peer programs of `bench-peers`).
pub const WORKSPACES: &[&str] = &["Cargo.toml", "fuzz/Cargo.toml", "peers/Cargo.toml"];

/// Each workspace's `Cargo.lock` is current (`cargo metadata --locked`
/// refuses to change it): a stale one would be rewritten by the build and
/// resolve dependencies afresh on every machine.
pub fn lockfiles(tally: &mut Tally) {
    for manifest in WORKSPACES {
        let out = Command::new(env!("CARGO"))
            .args(["metadata", "--locked", "--format-version", "1", "--manifest-path"])
            .arg(root().join(manifest))
            .output();
        let lock = Path::new(manifest).with_file_name("Cargo.lock");
        let ok = match out {
            Ok(o) if o.status.success() => true,
            Ok(o) => {
                println!(
                    "{}: not current; run `cargo metadata --format-version 1 --manifest-path {manifest} >/dev/null` \
                     and commit it:\n{}",
                    lock.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                false
            }
            Err(e) => {
                println!("cargo metadata for {manifest}: {e}");
                false
            }
        };
        tally.check(&format!("{} current (cargo metadata --locked)", lock.display()), ok);
    }
}

/// What `git status --porcelain` says of the tree: tracked files changed
/// and untracked files not ignored; `None` outside a git checkout.
pub fn snapshot() -> Option<String> {
    let out = Command::new("git").args(["status", "--porcelain"]).current_dir(root()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The lines of `after` that `before` does not have: what the run changed.
pub fn changed(before: &str, after: &str) -> Vec<String> {
    after.lines().filter(|l| !before.lines().any(|b| b == *l)).map(str::to_string).collect()
}

/// The suite's last check: the tree is as the run found it.
pub fn unchanged(tally: &mut Tally, before: Option<&str>) {
    let (Some(before), Some(after)) = (before, snapshot()) else {
        println!("tree unchanged: not a git checkout, not checked");
        return;
    };
    let diff = changed(before, &after);
    for line in &diff {
        println!("the run changed the tree: {line}");
    }
    tally.check("the run left the tree unchanged (git status)", diff.is_empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_run_changed_is_what_git_status_gained() {
        let before = " M src/lib.rs\n?? notes.txt\n";
        assert!(changed(before, before).is_empty());
        let after = " M src/lib.rs\n M fuzz/Cargo.lock\n?? notes.txt\n?? tests/out.bin\n";
        assert_eq!(changed(before, after), [" M fuzz/Cargo.lock", "?? tests/out.bin"]);
        // A file the developer had changed and the run restored is no change of the run's.
        assert!(changed(before, "?? notes.txt\n").is_empty());
    }
}
