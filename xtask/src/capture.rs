//! Running a command for its output, and reading cargo's JSON messages:
//! shared by `cargo xtask test` and the check modules it runs.

use std::path::PathBuf;
use std::process::Command;

use crate::{root, show};

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
