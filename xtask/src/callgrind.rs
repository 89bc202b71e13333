//! Reading callgrind's output.

/// The count callgrind printed at the end of a run (`Collected : N`).
pub(crate) fn collected(out: &str) -> Option<u64> {
    out.lines().find_map(|l| l.split("Collected :").nth(1)).and_then(|v| v.trim().parse::<u64>().ok())
}
