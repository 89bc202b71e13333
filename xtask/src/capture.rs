//! Running a command for its output, and reading cargo's JSON messages:
//! shared by `cargo xtask test` and the check modules it runs.

use std::path::PathBuf;
use std::process::Command;

use crate::{root, show, Result};

/// Runs a command, prints its output, and returns (success, stdout+stderr).
pub(crate) fn capture(cmd: &mut Command) -> (bool, String) {
    eprintln!("$ {}", show(cmd));
    match cmd.current_dir(root()).output() {
        Ok(o) => {
            let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            print!("{text}");
            (o.status.success(), text)
        }
        Err(e) => (false, format!("cannot run {}: {e}", show(cmd))),
    }
}

/// The executable that cargo's JSON messages (`--message-format=json`) name
/// for the target `name`.
pub(crate) fn executable(json: &str, name: &str) -> Option<PathBuf> {
    json.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == name)
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
}

/// Builds the `device` integration test (with `features`, comma-separated,
/// if any) and returns its executable.
pub(crate) fn device_binary(features: &str, env: &[(&str, &str)], target_dir: Option<&str>) -> Result<PathBuf> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["test", "--no-run", "--test", "device", "--message-format=json"]);
    if !features.is_empty() {
        cmd.args(["--features", features]);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(t) = target_dir {
        cmd.env("CARGO_TARGET_DIR", root().join(t));
    }
    eprintln!("$ {} {env:?}", show(&cmd));
    let out = cmd.current_dir(root()).output()?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("building the device tests failed ({env:?})").into());
    }
    executable(&String::from_utf8_lossy(&out.stdout), "device")
        .ok_or_else(|| "cargo named no executable for the device tests".into())
}
