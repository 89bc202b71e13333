//! docs/features.md cites only tests that exist: every test named in a
//! status cell (a table row's last cell) is a function of the workspace's
//! Rust sources (`tests/`, `src/`, `xtask/`, `perf/`).
//!
//! A cited test is a backticked name in a status cell that is either
//! qualified by a device-test module (`mkey::mkey_one_remote_range...`,
//! the module a file of tests/device/ or tests/aio/), or bare with at least
//! four underscores (`compressed_cq_is_never_polled_through_the_provider`)
//! or ending in `_libmlx5` or `*`, and not a C name (`ibv_`, `mlx5`, `rdma_`). A
//! trailing `*` or `_` cites a family: some function starts with it.

use std::collections::BTreeSet;
use std::path::Path;

use crate::root;
use crate::tally::Tally;

/// The function names defined in the `.rs` files under `dir`.
fn functions(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                functions(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for part in text.split("fn ").skip(1) {
                let name: String = part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
}

/// The test modules a citation may be qualified by: the files of
/// tests/device and tests/aio.
fn modules() -> BTreeSet<String> {
    let mut m = BTreeSet::new();
    for dir in ["tests/device", "tests/aio"] {
        for e in std::fs::read_dir(root().join(dir)).into_iter().flatten().flatten() {
            if let Some(stem) = e.path().file_stem() {
                m.insert(stem.to_string_lossy().into_owned());
            }
        }
    }
    m
}

/// The tests cited by the status cells of `md`, as (cited text, name).
pub fn cited(md: &str, modules: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in md.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        if cells.len() < 2 {
            continue;
        }
        let status = cells[cells.len() - 1];
        for (i, token) in status.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let ident = |s: &str| {
                !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '*')
            };
            let name = match token.split_once("::") {
                // `wrap::aio` is a path of the crate, not a test.
                Some((m, n)) if modules.contains(m) && ident(n) && n.contains('_') => n,
                Some(_) => continue,
                None if ident(token)
                    && !["ibv_", "mlx5", "rdma_"].iter().any(|p| token.starts_with(p))
                    && (token.matches('_').count() >= 4 || token.ends_with("_libmlx5") || token.ends_with('*')) =>
                {
                    token
                }
                None => continue,
            };
            out.push((token.to_string(), name.to_string()));
        }
    }
    out
}

/// Whether `name` (a family when it ends in `*` or `_`) is among `fns`.
fn exists(name: &str, fns: &BTreeSet<String>) -> bool {
    match name.strip_suffix('*') {
        Some(prefix) => fns.iter().any(|f| f.starts_with(prefix)),
        None if name.ends_with('_') => fns.iter().any(|f| f.starts_with(name)),
        None => fns.contains(name),
    }
}

/// `cargo xtask test`'s check.
pub fn check(tally: &mut Tally) {
    let mut fns = BTreeSet::new();
    for dir in ["tests", "src", "xtask/src", "perf/src", "examples"] {
        functions(&root().join(dir), &mut fns);
    }
    let md = std::fs::read_to_string(root().join("docs/features.md")).unwrap_or_default();
    let cites = cited(&md, &modules());
    let missing: Vec<&String> = cites.iter().filter(|(_, n)| !exists(n, &fns)).map(|(t, _)| t).collect();
    for m in &missing {
        println!("docs/features.md cites `{m}`, which no test of the workspace is named (renamed or removed?)");
    }
    tally.check(
        &format!("docs/features.md cites only tests that exist ({} cited)", cites.len()),
        !cites.is_empty() && missing.is_empty(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_are_found_in_status_cells_only() {
        let md = "| a | `not_a_status_cell_but_long_name` | `mkey::one_test` and `compressed_cq_is_never_polled` |\n\
                  | b | x | `ibv_create_cq_ex_long_name_here`, `tag_matching_matches_libmlx5`, `local_a1_prime_*`, `cq_ring` |\n\
                  | c | x | `mkey::aio` |\n";
        let modules = ["mkey".to_string()].into_iter().collect();
        let c: Vec<String> = cited(md, &modules).into_iter().map(|(_, n)| n).collect();
        assert_eq!(
            c,
            ["one_test", "compressed_cq_is_never_polled", "tag_matching_matches_libmlx5", "local_a1_prime_*"]
        );
        let fns: BTreeSet<String> = ["one_test", "local_a1_prime_drops"].iter().map(|s| s.to_string()).collect();
        assert!(exists("one_test", &fns) && exists("local_a1_prime_*", &fns));
        assert!(!exists("tag_matching_matches_libmlx5", &fns), "a missing test is named");
    }
}
