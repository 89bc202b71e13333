//! rrddmma's project tasks.
//!
//! - `cargo xtask test`: fmt, clippy, docs, bindings drift, host tests, then the
//!   device tests on a real RDMA device (host SoftRoCE or the SoftRoCE VM), the
//!   static-linkage checks, and a final `N passed, N failed` line.
//! - `cargo xtask demo [--device NAME] [--reps N] [--no-instructions | --instructions-only] [--no-peers]`:
//!   rrddmma-perf beside perftest on the default device, timed and by instructions per message, then a
//!   smoke round of `bench-peers`.
//! - `cargo xtask perf-checks [pair|cluster|rdma_cm] [--only TEXT]`: only rrddmma-perf's device checks
//!   (those whose name contains TEXT).
//! - `cargo xtask hostile`: only the hostile-peer suite, with its tables.
//! - `cargo xtask tree-check`: only the source checks (import circles, SAFETY comments).
//! - `cargo xtask mlx5-harness`: only the libmlx5 differential harness and the kernel mlx5e oracle.
//! - `cargo xtask slurm`: only the `srun` checks (a one-node Slurm in the VM).
//! - `cargo xtask bench-verbs [--record | --gate] [KIND..]`: callgrind count of post + poll, rrddmma vs C verbs calls;
//!   kind `aio`: the async rows (`LocalEndpoint` beside the synchronous event path).
//! - `cargo xtask bench-peers [--device NAME] [--reps N] [--smoke | --times] [--rows W,..] [--userspace v59]`: rrddmma beside the other Rust RDMA
//!   crates and C (`peers/`): instructions, allocations and time per operation.
//! - `cargo xtask vm [--kernel stable|newest] -- CMD...`: runs CMD inside the SoftRoCE VM with `rxe0` ready,
//!   under Debian stable's kernel or Debian's newest (see `kernels`).
//! - `cargo xtask siw [-- CMD... | --checks]`: CMD in the VM with soft-iWARP's `siw0` up, or the
//!   siw checks of `test` alone.
//! - `cargo xtask bindings [--check] [--dl-only]`: regenerates or checks `src/bindings/sys.rs`
//!   (and the `dlopen` tables derived from it).
//! - `cargo xtask dlopen`: the dlopen linkage alone: built with rdma-core hidden, its load
//!   errors, and the device suite on it.
//! - `cargo xtask userspace`: builds (or reuses) the pinned rdma-core v59 as shared
//!   libraries run in place, and prints the `RRDDMMA_LIB*` settings for a `dlopen` binary.
//! - `cargo xtask perftest25`: builds (or reuses) perftest 25.01 from Debian's pinned orig tarball
//!   against the v59 libraries (the kernel matrix's interop peer for the flags perftest 4.5 lacks).
//! - `cargo xtask deps`: installs what the other tasks need (idempotent).
//! - `cargo xtask bench-wqe [--record | --gate] [ROW..]`: callgrind count per direct WQE, rrddmma vs C with the
//!   mlx5dv.h helpers vs libmlx5 v59 (`--record` rewrites benches/wqe_cost/counts.json, the gate's counts; `--gate` runs the gate alone).
//! - `cargo xtask mutants [--sample N --seed S] [--in-diff REF] [--timeout SECS] [--device]`:
//!   cargo-mutants over `src/mlx5dv` (unit tests, host tests, the harness's quick mode).

mod aio;
mod bench_peers;
mod bench_verbs;
mod bench_wqe;
mod bindings;
mod callgrind;
mod capture;
mod circles;
mod cluster;
mod cm;
mod demo;
mod deps;
mod device;
mod dl_gen;
mod dlopen;
mod doc_tests;
mod examples;
mod hostile;
mod inline_check;
mod kernel_src;
mod kernels;
mod matrix;
mod mlnx4;
mod mlx5_provider;
mod msrv;
mod mutants;
mod pairs;
mod perf_checks;
mod perftest_src;
mod phases;
mod rdma_core_src;
mod report;
mod siw;
mod slurm;
mod tally;
mod test;
mod tree_check;
mod userspace;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Errors end the task with their message.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// `cargo xtask mlx5-harness`: that step of `cargo xtask test` alone (the
/// libmlx5 differential harness and the kernel mlx5e oracle).
fn mlx5_harness() -> Result<()> {
    let mut tally = tally::Tally::default();
    mlx5_provider::check(&mut tally, &rdma_core_src::tarball()?);
    tally.finish()
}

/// Runs a command at the workspace root, echoing it; fails on a non-zero exit.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {}", show(cmd));
    // The repository root, unless the caller chose a directory (apt-get
    // download and the unpacking of kernels and siw write into theirs).
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    let status = cmd.status().map_err(|e| format!("{}: {e}", show(cmd)))?;
    if !status.success() {
        return Err(format!("`{}` failed ({status})", show(cmd)).into());
    }
    Ok(())
}

/// A command line as text, for logs.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <task>\n\
         \x20 test [--no-kernel-matrix]  everything CI checks, host and device, under Debian stable's and newest kernel and on soft-iWARP\n\
         \x20                      (--no-kernel-matrix: stable's kernel and rxe only, the rest listed as skipped;\n\
         \x20                      without it, a device on the host fails those checks: they need the VM)\n\
         \x20 demo [--device NAME] [--reps N] [--no-instructions | --instructions-only] [--no-peers]\n\
         \x20                      rrddmma-perf beside perftest: ratios with spread, a plot, instructions per message;\n\
         \x20                      then a smoke round of bench-peers (--no-peers skips it)\n\
         \x20 userspace             builds the pinned rdma-core v59 shared libraries in place and prints the RRDDMMA_LIB* settings\n\
         \x20 perftest25            builds perftest 25.01 (Debian's pinned orig tarball) against the v59 libraries\n\
         \x20 examples              device checks of the interoperable examples only\n\
         \x20 cm-examples           device checks of the rdmacm examples only (rping, rdma_server/client)\n\
         \x20 perf-checks [pair|cluster|rdma_cm|matrix] [--only TEXT]  rrddmma-perf's device checks only (interop, payload,\n\
         \x20                      cluster mode, -R); --only: those whose name contains TEXT\n\
         \x20 hostile               the hostile-peer suite only, with its tables (attack, victim, outcome)\n\
         \x20 tree-check            the source checks only (import circles, SAFETY comments)\n\
         \x20 mlx5-harness          the libmlx5 differential harness and the kernel mlx5e oracle only\n\
         \x20 slurm                 the srun checks only (a one-node Slurm started in the VM)\n\
         \x20 bench-verbs [KIND..]  callgrind: instructions per post + poll, rrddmma vs C (rows of KINDs only; aio: async rows;\n\
         \x20                      --record: write the rows' counts to benches/verbs_cost/counts.json; --gate: the instruction gate alone)\n\
         \x20 bench-peers [--device NAME] [--reps N] [--smoke | --times] [--rows W,..] [--userspace v59]\n\
         \x20                      rrddmma beside sideway, ibverbs, async-rdma and C (peers/); --rows: those\n\
         \x20                      workloads only (aio: the async ones); --userspace v59: every program on\n\
         \x20                      the pinned rdma-core v59 libraries\n\
         \x20 vm [--kernel stable|newest] -- CMD...\n\
         \x20                      run CMD in the SoftRoCE VM (rxe0 ready) under Debian stable's or newest kernel\n\
         \x20 siw [-- CMD...]       run CMD in the VM with soft-iWARP's siw0 up (the module built from the\n\
         \x20                      stable kernel's source) and the device tests' environment pointing at it\n\
         \x20 siw --checks          the siw checks of `test` alone (module, rping both ways, device tests on siw0)\n\
         \x20 bindings [--check] [--dl-only]  regenerate / check src/bindings/sys.rs (and the dlopen tables)\n\
         \x20 dlopen                the dlopen linkage: build with rdma-core hidden, load errors, device suite\n\
         \x20 deps                  install the tools and packages the tasks need\n\
         \x20 bench-wqe [--record | --gate] [ROW..]  callgrind: instructions per direct WQE, rrddmma vs C helpers vs libmlx5\n\
         \x20 mutants [--sample N] [--seed S] [--in-diff REF] [--timeout SECS] [--device] [--list] [--help]\n\
         \x20                      cargo-mutants over src/mlx5dv: unit and host tests, the harness's quick mode\n\
         \x20                      (--device: the device tests named after the mutated file); not part of test"
    );
    ExitCode::from(2)
}

/// The task and its arguments, read with `lexopt` (the grammar of every
/// binary here): each task's flags are checked, and an argument that is not
/// UTF-8 is an error. `vm` takes everything after `--` verbatim.
fn parse() -> std::result::Result<(String, Vec<String>), lexopt::Error> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_env();
    let task = match p.next()? {
        Some(Value(v)) => v.string()?,
        Some(arg) => return Err(arg.unexpected()),
        None => return Err("no task given".into()),
    };
    let mut rest = Vec::new();
    if task == "siw" {
        for a in p.raw_args()?.skip_while(|a| a == "--") {
            rest.push(a.into_string().map_err(lexopt::Error::NonUnicodeValue)?);
        }
        return Ok((task, rest));
    }
    if task == "vm" {
        let mut raw: Vec<_> = p.raw_args()?.collect();
        if raw.first().is_some_and(|a| a == "--kernel") {
            let name = raw.get(1).ok_or("--kernel needs a value: stable or newest")?.clone();
            rest.push("--kernel".to_string());
            rest.push(name.into_string().map_err(lexopt::Error::NonUnicodeValue)?);
            raw.drain(..2);
        }
        for a in raw.into_iter().skip_while(|a| a == "--") {
            rest.push(a.into_string().map_err(lexopt::Error::NonUnicodeValue)?);
        }
        return Ok((task, rest));
    }
    while let Some(arg) = p.next()? {
        match (task.as_str(), arg) {
            ("test", Long("kernel-matrix")) => rest.push("--kernel-matrix".to_string()),
            ("test", Long("no-kernel-matrix")) => rest.push("--no-kernel-matrix".to_string()),
            ("test", Long(f @ ("device" | "expect"))) => {
                rest.push(format!("--{f}"));
                rest.push(p.value()?.string()?);
            }
            ("test", Long("only-device")) => rest.push("--only-device".to_string()),
            ("demo", Long("device") | Short('d')) => {
                rest.push("--device".to_string());
                rest.push(p.value()?.string()?);
            }
            ("demo", Long("reps")) => {
                rest.push("--reps".to_string());
                rest.push(p.value()?.string()?);
            }
            ("demo", Long(f @ ("no-instructions" | "instructions-only" | "no-peers"))) => rest.push(format!("--{f}")),
            ("bindings", Long("check")) => rest.push("--check".to_string()),
            ("bindings", Long("dl-only")) => rest.push("--dl-only".to_string()),
            ("perf-checks", Value(v)) if rest.is_empty() => rest.push(v.string()?),
            ("perf-checks", Long("only")) => {
                rest.push("--only".to_string());
                rest.push(p.value()?.string()?);
            }
            ("bench-verbs", Value(v)) => rest.push(v.string()?),
            ("bench-verbs", Long(f @ ("record" | "gate"))) => rest.push(format!("--{f}")),
            ("bench-wqe", Long(f @ ("record" | "gate"))) => rest.push(format!("--{f}")),
            ("bench-wqe", Value(v)) => rest.push(v.string()?),
            ("bench-peers", Long(f @ ("device" | "reps" | "rows" | "userspace"))) => {
                rest.push(format!("--{f}"));
                rest.push(p.value()?.string()?);
            }
            ("bench-peers", Long(f @ ("smoke" | "times"))) => rest.push(format!("--{f}")),
            ("mutants", Long(f @ ("sample" | "seed" | "in-diff" | "timeout"))) => {
                rest.push(format!("--{f}"));
                rest.push(p.value()?.string()?);
            }
            ("mutants", Long(f @ ("device" | "list" | "help"))) => rest.push(format!("--{f}")),
            (_, arg) => return Err(arg.unexpected()),
        }
    }
    Ok((task, rest))
}

fn main() -> ExitCode {
    // cargo-mutants' `cargo` (`cargo xtask mutants`).
    if let Ok(real) = std::env::var(mutants::REAL_CARGO) {
        return mutants::proxy(&real);
    }
    let (task, rest) = match parse() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xtask: {e}");
            return usage();
        }
    };
    let rest = &rest[..];
    let result = match task.as_str() {
        "test" => test::run(rest),
        "demo" => demo::demo(rest),
        "examples" => examples::run(rest),
        "perf-checks" => perf_checks::run_checks(rest),
        "hostile" => hostile::run(),
        "tree-check" => {
            let mut tally = tally::Tally::default();
            circles::check(&mut tally);
            tree_check::safety_comments(&mut tally);
            doc_tests::check(&mut tally);
            if tally.failed == 0 {
                Ok(())
            } else {
                Err(format!("{} source check(s) failed: {}", tally.failed, tally.failures.join(", ")).into())
            }
        }
        "mlx5-harness" => mlx5_harness(),
        "slurm" => slurm::run(),
        "cm-examples" => cm::run(),
        "bench-verbs" => bench_verbs::bench_verbs(rest),
        "bench-peers" => bench_peers::run_peers(rest),
        "vm" => device::vm(rest),
        "siw" => siw::task(rest),
        "bindings" => bindings::run(rest),
        "dlopen" => dlopen::run(),
        "userspace" => userspace::run(),
        "perftest25" => perftest_src::run(),
        "deps" => deps::ensure(),
        "bench-wqe" => bench_wqe::run(rest),
        "mutants" => mutants::run(rest),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}
