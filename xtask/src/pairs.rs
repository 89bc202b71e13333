//! Running rrddmma-perf and perftest as a server and client pair in one
//! shell command, and reading their output: shared by `cargo xtask test`'s
//! perf checks, `cargo xtask perf-checks` and `cargo xtask demo`.

use std::path::PathBuf;
use std::process::Command;

use crate::device::Done;
use crate::{root, run, Result};

/// Builds rrddmma-perf (release) and returns its path.
pub fn binary() -> Result<PathBuf> {
    run(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "-p", "rrddmma-perf"]))?;
    Ok(root().join("target/release/rrddmma-perf"))
}

/// Shell: `D` is the device, `X` the index of its RoCE v2 GID that maps an
/// IPv4 address (else its first RoCE v2 GID, else 0), as perftest's `-x` wants.
pub(crate) const GID_SHELL: &str = "D=\"$RRDDMMA_TEST_DEVICE\"; P=/sys/class/infiniband/$D/ports/1; X=; \
    for t in $P/gid_attrs/types/*; do i=${t##*/}; [ \"$(cat $t 2>/dev/null)\" = 'RoCE v2' ] || continue; \
    case $(cat $P/gids/$i) in 0000:0000:0000:0000:0000:ffff:*) X=$i; break;; esac; [ -n \"$X\" ] || X=$i; done; \
    X=${X:-0}";

/// Shell for a server and a client run against each other, with timeouts;
/// prints both outputs and both exit codes.
pub(crate) fn pair(server: &str, client: &str) -> String {
    pair_within(server, client, 60)
}

/// As [`pair`], the client given `client_secs` seconds (the server 30 more).
pub(crate) fn pair_within(server: &str, client: &str, client_secs: u32) -> String {
    // Wait until the server listens on its `-p` port (perftest's client does
    // not retry), at most 20 s.
    let words: Vec<&str> = server.split_whitespace().collect();
    let port = words.iter().position(|w| *w == "-p").and_then(|i| words.get(i + 1)).copied().unwrap_or("18515");
    format!(
        "{GID_SHELL}; L=$(mktemp); timeout {} {server} > $L 2>&1 & S=$!; \
         for i in $(seq 200); do ss -ltn | grep -q ':{port} ' && break; sleep 0.1; done; \
         timeout {client_secs} {client}; echo CLIENT-RC=$?; wait $S; echo SERVER-RC=$?; echo '--- server output'; \
         cat $L; rm -f $L",
        client_secs + 30
    )
}

/// As [`pair`], for servers listening through rdma_cm (no TCP port to
/// wait on: the CM's listening id on `port` is).
pub(crate) fn cm_pair(server: &str, client: &str, port: usize) -> String {
    format!(
        "L=$(mktemp); timeout 90 {server} > $L 2>&1 & S=$!; \
         for i in $(seq 200); do rdma res show cm_id | grep -Eq 'LISTEN.*:{port}( |$)' && break; sleep 0.1; done; \
         timeout 60 {client}; echo CLIENT-RC=$?; wait $S; echo SERVER-RC=$?; echo '--- server output'; cat $L; rm -f $L"
    )
}

/// Rows of a result table whose first column is `size`, as numbers (the
/// leading numeric columns only).
pub(crate) fn rows(out: &str, size: u64) -> Vec<Vec<f64>> {
    out.lines()
        .map(|l| l.split_whitespace().map_while(|w| w.parse::<f64>().ok()).collect::<Vec<f64>>())
        .filter(|r| r.len() >= 4 && r[0] == size as f64)
        .collect()
}

/// The client's (`client`) or the server's part of a [`pair`]'s output.
pub(crate) fn side(out: &str, client: bool) -> &str {
    match out.split_once("--- server output") {
        Some((c, srv)) => {
            if client {
                c
            } else {
                srv
            }
        }
        None => out,
    }
}

/// Both sides of a [`pair`] exited 0.
pub(crate) fn both_ok(d: &Done) -> bool {
    d.code == Some(0) && d.output.contains("CLIENT-RC=0") && d.output.contains("SERVER-RC=0")
}
