//! The control plane's checks: the fuzz smoke run (host), and inside the VM
//! the socket-level fault tests, a three-host RC mesh across network
//! namespaces, and the cluster example under Open MPI's `mpirun`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::capture::{capture, executable};
use crate::device::Check;
use crate::tally::Tally;
use crate::{root, Result};

/// Fuzz targets of `fuzz/`, each run briefly from its committed corpus.
const FUZZ_TARGETS: &[&str] = &["wire_decode", "coordinator"];
/// Seconds each fuzz target runs in CI.
const FUZZ_SECONDS: u32 = 15;

fn have_cargo_fuzz() -> bool {
    Command::new("cargo").args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success())
}

fn have_nightly() -> bool {
    Command::new("rustup").args(["run", "nightly", "rustc", "--version"]).output().is_ok_and(|o| o.status.success())
}

/// `cargo fuzz` through rustup's proxy: nightly when installed, else the
/// stable toolchain with its unstable flags unlocked.
fn cargo_fuzz(args: &[&str]) -> Command {
    let mut c = Command::new("cargo");
    c.env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO").env_remove("RUSTC");
    if have_nightly() {
        c.arg("+nightly");
    } else {
        c.env("RUSTC_BOOTSTRAP", "1");
    }
    c.arg("fuzz").args(args);
    c
}

/// Installs cargo-fuzz if missing, then runs every target for a few seconds.
pub fn fuzz_smoke(tally: &mut Tally) {
    if !have_cargo_fuzz() {
        let (ok, _) = capture(Command::new("cargo").args(["install", "--locked", "--quiet", "cargo-fuzz"]));
        if !ok {
            return tally.check("cargo-fuzz installed", false);
        }
    }
    for t in FUZZ_TARGETS {
        let scratch = root().join("target/xtask/fuzz").join(t);
        let _ = std::fs::remove_dir_all(&scratch);
        let _ = std::fs::create_dir_all(&scratch);
        let seeds = root().join("fuzz/corpus").join(t);
        let time = format!("-max_total_time={FUZZ_SECONDS}");
        let (scratch, seeds) = (scratch.to_string_lossy().into_owned(), seeds.to_string_lossy().into_owned());
        let (ok, out) = capture(&mut cargo_fuzz(&["run", "--sanitizer", "none", t, &scratch, &seeds, "--", &time]));
        tally.check(&format!("fuzz smoke: {t} ({FUZZ_SECONDS} s, no crash)"), ok && out.contains("Done "));
    }
}

/// Builds one test or example and returns its executable.
pub(crate) fn built(kind: &str, name: &str) -> Result<PathBuf> {
    let out = Command::new(env!("CARGO"))
        .args(["build", "--message-format=json", &format!("--{kind}"), name])
        .current_dir(root())
        .output()?;
    if !out.status.success() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        return Err(format!("building {kind} {name} failed").into());
    }
    executable(&String::from_utf8_lossy(&out.stdout), name)
        .ok_or_else(|| format!("cargo named no executable for {kind} {name}").into())
}

pub(crate) fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// Each of `ranks` printed its verified line, naming where its rank came from.
pub(crate) fn all_verified(out: &str, ranks: u32, source: &str) -> bool {
    (0..ranks).all(|r| {
        let head = format!("rank {r}/{ranks} on rxe_h{} ({source}): verified writes from {} peers", r + 1, ranks - 1);
        out.lines().any(|l| l.starts_with(&head))
    })
}

/// Device-session checks; they create devices `rxe_h1..3` and namespaces, so
/// they run after every other check.
pub fn checks() -> Result<Vec<Check>> {
    let session = built("test", "ctrl_session")?;
    let ex = q(&built("example", "cluster")?);
    let hosts = "10.79.0.1:18650,10.79.0.2:18650,10.79.0.3:18650";
    let devices = "rxe_h1,rxe_h2,rxe_h3";
    let mesh = format!(
        "bash tests/cluster/hosts.sh 3 >/dev/null && pids= && for i in 3 2 1; do \
         ip netns exec h$i env RRDDMMA_HOSTS={hosts} RRDDMMA_DEVICES={devices} RRDDMMA_JOIN_TIMEOUT_MS=60000 \
         timeout 120 {ex} & pids=\"$pids $!\"; done; rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc"
    );
    let mpirun = format!(
        "mkdir -p /dev/shm/ompi && TMPDIR=/dev/shm/ompi timeout 180 mpirun --allow-run-as-root --oversubscribe \
         -np 3 -x RRDDMMA_COORDINATOR=127.0.0.1:18651 -x RRDDMMA_DEVICES={devices} {ex}"
    );
    Ok(vec![
        // The stranger-flood test measures whether members get in while a
        // flood connects as fast as the machine allows: a race of rates that
        // CPU emulation distorts (members slowed ~30x against the kernel's
        // accept queue). It runs on the host in the host tests; here it is
        // skipped.
        Check::libtest(
            "control-plane faults over TCP (in the VM)",
            format!("{} --test-threads=2 --skip regression_a_stranger_flood_during_the_join", q(&session)),
        ),
        Check::verdict("three hosts in network namespaces: RC mesh, write all, barrier, verify", mesh, |d| {
            d.code == Some(0) && all_verified(&d.output, 3, "LocalAddress")
        }),
        Check::verdict("cluster example under mpirun -np 3, one rxe device per rank", mpirun, |d| {
            d.code == Some(0) && all_verified(&d.output, 3, "OpenMpi")
        }),
    ])
}

#[cfg(test)]
mod tests {
    use super::all_verified;

    #[test]
    fn verified_lines_are_required_from_every_rank() {
        let two = "rank 0/3 on rxe_h1 (OpenMpi): verified writes from 2 peers in 1 ms\n\
                   rank 2/3 on rxe_h3 (OpenMpi): verified writes from 2 peers in 1 ms\n";
        assert!(!all_verified(two, 3, "OpenMpi"));
        let three = format!("{two}rank 1/3 on rxe_h2 (OpenMpi): verified writes from 2 peers in 1 ms\n");
        assert!(all_verified(&three, 3, "OpenMpi"));
        assert!(!all_verified(&three, 3, "LocalAddress"));
    }
}
