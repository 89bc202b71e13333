//! `cargo xtask test`: everything CI checks.
//!
//! Order: install what is missing; fmt, clippy, docs, bindings drift; host
//! tests; the no-linkage build message; the MLNX_OFED 4.x cfg checks; the
//! static source builds; then one device session (host SoftRoCE or VM)
//! running the device tests, the missing-device check and the static
//! binaries; then a second VM under Debian's newest kernel running a subset
//! of the device tests (`matrix`). Ends with `N passed, N failed`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use crate::capture::{capture, device_binary, executable};
use crate::device::{self, Check};
use crate::report;
use crate::tally::Tally;
use crate::{bindings, deps, root, show, Result};

fn cargo(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.args(args);
    c
}

/// The long loops run once, in the pkg-config step: the 1,000-cycle CM
/// leak check (minutes in the emulated VM) and the event loops under load
/// (500 rounds per completion-channel path, about 35 s), which exercise
/// the kernel and the library's waiting code, not the linkage; the other
/// linkages run every other device test.
const SKIP_CM_CYCLES: &str = "--skip cm::thousand --skip event_loop::";

/// The device tests run with a device that is not there: the modules that
/// open `RRDDMMA_TEST_DEVICE` through the tests' one helper (the CM tests
/// open the CM device and pass), every one of which must fail naming it.
const MISSING_SUBSET: &str = "loopback:: ops:: errors:: cq:: device:: wrap::";

/// The verdict on the [`MISSING_SUBSET`] run: it failed, named the
/// missing device, and no test passed (a test that passes without its
/// device is a defect).
fn missing_fails(d: &device::Done) -> bool {
    d.code.is_some_and(|c| c != 0)
        && d.output.contains("missing0")
        && d.output.lines().any(|l| l.starts_with("test result: FAILED. 0 passed;"))
}

/// Builds the library's unit tests (a few are device tests, `#[ignore]`d on
/// the host; with `tokio`, so the async layer's among them) and returns
/// their executable.
fn lib_binary() -> Result<PathBuf> {
    let mut cmd =
        cargo(&["test", "--no-run", "--lib", "-p", "rrddmma", "--features", "tokio", "--message-format=json"]);
    eprintln!("$ {}", show(&cmd));
    let out = cmd.current_dir(root()).output()?;
    executable(&String::from_utf8_lossy(&out.stdout), "rrddmma")
        .ok_or_else(|| "building the library's unit tests failed".into())
}

/// A cargo command that sees no installed libibverbs (an empty pkg-config path).
fn cargo_without_linkage(args: &[&str]) -> Command {
    let empty = root().join("target/xtask/empty-pkgconfig");
    let _ = std::fs::create_dir_all(&empty);
    let mut c = cargo(args);
    c.env("PKG_CONFIG_LIBDIR", &empty)
        .env("PKG_CONFIG_PATH", &empty)
        .env_remove("RRDDMMA_LINKAGE")
        .env("CARGO_TARGET_DIR", root().join("target/no-linkage"));
    c
}

/// A build that finds no linkage must fail with the package-naming message;
/// without an override it also names the `vendored` feature. docs.rs
/// (`DOCS_RS`) documents the crate with nothing to link.
fn no_linkage_message(tally: &mut Tally) {
    let names_packages = |text: &str| {
        text.contains("rrddmma cannot link to libibverbs")
            && text.contains("apt-get install libibverbs-dev")
            && text.contains("dnf install rdma-core-devel")
            && !text.contains("undefined reference")
    };
    let (ok, text) =
        capture(cargo_without_linkage(&["build", "--lib", "--quiet"]).env("RRDDMMA_LINKAGE", "pkg-config"));
    tally.check("build without linkage names the packages", !ok && names_packages(&text));
    let (ok, text) = capture(&mut cargo_without_linkage(&["build", "--lib", "--quiet"]));
    let good = !ok && names_packages(&text) && text.contains("`vendored` feature");
    tally.check("build without linkage or `vendored` fails naming the feature", good);
    // docs.rs runs a nightly rustdoc with `--cfg docsrs` (Cargo.toml's
    // metadata), which turns on `doc(cfg)`; RUSTC_BOOTSTRAP lets the stable
    // toolchain do the same here.
    let (ok, _) = capture(
        cargo_without_linkage(&["doc", "--no-deps", "--quiet", "-p", "rrddmma", "--all-features"])
            .env("DOCS_RS", "1")
            .env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTDOCFLAGS", "-D warnings --cfg docsrs"),
    );
    tally.check("docs build as on docs.rs (no libibverbs, all features, --cfg docsrs)", ok);
    let page =
        std::fs::read_to_string(root().join("target/no-linkage/doc/rrddmma/wrap/index.html")).unwrap_or_default();
    tally.check(
        "docs.rs pages name the feature of gated items (doc(cfg): `aio` needs `tokio`)",
        ok && page.contains("Available on crate feature `tokio` only"),
    );
}

/// Feature sets build, the optional features' tests pass, and the MSRV holds.
fn feature_checks(tally: &mut Tally) {
    for set in ["--no-default-features", "--all-features"] {
        let ok = capture(&mut cargo(&["build", "--quiet", "-p", "rrddmma", "--lib", "--examples", set])).0;
        tally.check(&format!("cargo build {set}"), ok);
    }
    let (ok, out) = capture(&mut cargo(&[
        "test",
        "-p",
        "rrddmma",
        "--features",
        "serde,log",
        "--test",
        "serde_roundtrip",
        "--test",
        "ctrl_log",
    ]));
    tally.add_run("serde round trips and log events", ok, &out);
    crate::msrv::check(tally);
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// The kernel matrix and soft-iWARP need the VM (they load modules and
/// boot kernels): on a host with its own device they are failed checks
/// naming the opt-out, never a silent omission.
const NOT_IN_VM_SIW: &str = "siw: soft-iWARP checks run (not run: the device is on the host, and siw needs the VM; \
     pass --no-kernel-matrix to leave the kernel matrix and siw out)";
const NOT_IN_VM_MATRIX: &str = "kernel matrix: Debian's newest kernel run (not run: the device is on the host; \
     pass --no-kernel-matrix to leave the kernel matrix and siw out)";
const SKIPPED_SIW: &str = "soft-iWARP (siw) checks (--no-kernel-matrix or RRDDMMA_KERNEL_MATRIX=0)";
const SKIPPED_MATRIX: &str =
    "kernel matrix under Debian's newest kernel (--no-kernel-matrix or RRDDMMA_KERNEL_MATRIX=0)";

/// `cargo xtask test`.
pub fn run(args: &[String]) -> Result<()> {
    let opts = report::Opts::parse(args)?;
    if opts.only_device {
        let place = device::locate(opts.device.as_deref())?;
        let binary = match std::env::var_os("RRDDMMA_DEVICE_TEST_BINARY") {
            Some(b) => PathBuf::from(b),
            None => device_binary("tokio", &[], None)?,
        };
        return report::only_device(&place, &opts, &binary);
    }
    // The kernel matrix (Debian's newest kernel) and soft-iWARP add a
    // download, a module build and a second VM (docs/testing.md has the
    // minutes): on unless `--no-kernel-matrix` or RRDDMMA_KERNEL_MATRIX=0;
    // with `--device NAME` (a device of this host) only on `--kernel-matrix`.
    let asked = args.iter().any(|a| a == "--kernel-matrix");
    let matrix = !args.iter().any(|a| a == "--no-kernel-matrix")
        && (asked || (opts.device.is_none() && std::env::var("RRDDMMA_KERNEL_MATRIX").map_or(true, |v| v != "0")));
    let mut phases = crate::phases::Phases::start();
    deps::ensure()?;
    phases.end("tools and packages (deps)");
    let mut tally = Tally::default();
    let tree_before = crate::tree_check::snapshot();
    crate::tree_check::lockfiles(&mut tally);

    tally.check("cargo fmt --check", capture(&mut cargo(&["fmt", "--all", "--", "--check"])).0);
    tally.check(
        "cargo clippy -D warnings",
        capture(&mut cargo(&["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"])).0,
    );
    tally.check(
        "cargo clippy -D warnings, feature tokio",
        capture(&mut cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--features",
            "rrddmma/tokio",
            "--",
            "-D",
            "warnings",
        ]))
        .0,
    );
    tally.check(
        "cargo doc (warnings denied)",
        capture(
            cargo(&["doc", "--no-deps", "--quiet", "-p", "rrddmma", "--features", "tokio"])
                .env("RUSTDOCFLAGS", "-D warnings"),
        )
        .0,
    );
    let drift = bindings::run(&["--check".to_string()]);
    if let Err(e) = &drift {
        println!("{e}");
    }
    tally.check("bindings match the installed headers", drift.is_ok());
    crate::circles::check(&mut tally);
    crate::tree_check::safety_comments(&mut tally);
    crate::doc_tests::check(&mut tally);
    phases.end("lints: fmt, clippy twice, doc, bindings, source checks");

    let (ok, host) = capture(&mut cargo(&["test", "--workspace"]));
    tally.add_run("host tests", ok, &host);
    phases.end("host tests (build and run)");
    no_linkage_message(&mut tally);
    feature_checks(&mut tally);
    crate::mlnx4::check(&mut tally);
    crate::cluster::fuzz_smoke(&mut tally);
    let dlopen = crate::dlopen::host(&mut tally);
    phases.end("linkage, feature, MLNX_OFED 4.x, fuzz and dlopen builds");

    // With `tokio`: the async layer's CM tests (`aio_cm::`) run in it.
    let shared = device_binary("tokio", &[], None)?;
    let lib = lib_binary()?;
    let src = crate::rdma_core_src::tarball()?;
    let src = src.to_string_lossy();
    let source_env = |providers: &'static str| {
        [("RRDDMMA_LINKAGE", "source"), ("RRDDMMA_STATIC_PROVIDERS", providers), ("RRDDMMA_RDMA_CORE_SRC", &*src)]
            .map(|(k, v)| (k, v.to_string()))
    };
    let build_static = |providers: &'static str, dir: &str| {
        let env = source_env(providers);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        device_binary("", &env, Some(dir))
    };
    let static_rxe = build_static("mlx5,rxe", "target/static-rxe")?;
    let static_mlx5 = build_static("mlx5", "target/static-mlx5")?;
    phases.end("device test binaries (pkg-config, lib, two static source builds)");
    crate::mlx5_provider::check(&mut tally, &crate::rdma_core_src::tarball()?);
    phases.end("libmlx5 harness and kernel oracles");
    crate::bench_wqe::gate_check(&mut tally);
    phases.end("direct-path instruction gate");
    let static_debian = device_binary(
        "",
        &[("RRDDMMA_LINKAGE", "static"), ("RRDDMMA_STATIC_PROVIDERS", "mlx5,rxe")],
        Some("target/static-debian"),
    )?;

    let example_built = capture(&mut cargo(&["build", "--quiet", "--example", "mlx5_direct_write"])).0;
    let direct = root().join("target/debug/examples/mlx5_direct_write");
    let dc_built = capture(&mut cargo(&["build", "--quiet", "--example", "dc"])).0;
    let dc_example = root().join("target/debug/examples/dc");
    phases.end("static distribution build and examples");

    let place = device::locate(opts.device.as_deref())?;
    println!("device tests on {}", place.describe());
    let expect = opts.expected(&report::host_driver(place.device()));
    let dev = place.device().to_string();
    let tests = |bin: &Path, filter: &str| format!("{} --ignored --test-threads=1 {filter}", quoted(bin));
    let (facts, listed) = (Rc::new(RefCell::new(String::new())), Rc::new(RefCell::new(String::new())));
    let _ = std::fs::remove_file(report::skip_log());
    let mut checks = vec![
        Check::verdict("device listed", "ibv_devices; rdma link show".into(), move |d| {
            d.code == Some(0) && d.output.contains(&dev)
        }),
        report::Facts::check(facts.clone()),
        report::reported(
            "device tests (pkg-config linkage)",
            format!("{}{}", report::step_prefix(expect.as_deref()), tests(&shared, report::TIMES)),
            listed.clone(),
        ),
        Check::libtest(
            "library unit tests that need the device (CM id lock and events, RESET under a direct view, aio control QP access)",
            tests(&lib, ""),
        ),
        Check::verdict(
            "device tests fail when the named device is missing (none passes)",
            format!("RRDDMMA_TEST_DEVICE=missing0 {}", tests(&shared, MISSING_SUBSET)),
            missing_fails,
        ),
        Check::libtest(
            "static source build, providers mlx5,rxe",
            format!(
                "RRDDMMA_EXPECT_LINKAGE=source RRDDMMA_EXPECT_PROVIDERS=mlx5,rxe {}",
                tests(&static_rxe, SKIP_CM_CYCLES)
            ),
        ),
        Check::libtest(
            "static distribution archives, providers mlx5,rxe",
            format!(
                "RRDDMMA_EXPECT_LINKAGE=static RRDDMMA_EXPECT_PROVIDERS=mlx5,rxe {}",
                tests(&static_debian, SKIP_CM_CYCLES)
            ),
        ),
    ];
    if let Some(built) = &dlopen {
        checks.extend(crate::dlopen::checks(built, SKIP_CM_CYCLES));
    }
    let dev = place.device().to_string();
    checks.push(Check::verdict(
        "static mlx5-only build reports no supported device",
        tests(&static_mlx5, "loopback"),
        move |d| {
            d.code.is_some_and(|c| c != 0) && d.output.contains("no supported RDMA device") && d.output.contains(&dev)
        },
    ));
    checks.push(Check::verdict(
        "direct WQE example runs (or reports unsupported off mlx5)",
        format!("{} \"$RRDDMMA_TEST_DEVICE\" 100", quoted(&direct)),
        move |d| {
            example_built
                && d.code == Some(0)
                && (d.output.starts_with("unsupported: ") || d.output.contains("direct 64-byte RDMA WRITEs"))
        },
    ));
    checks.push(Check::verdict(
        "DC example (typed DC builders on a DCI's direct view) runs (or reports unsupported off mlx5)",
        format!("{} \"$RRDDMMA_TEST_DEVICE\"", quoted(&dc_example)),
        move |d| {
            dc_built
                && d.code == Some(0)
                && (d.output.starts_with("unsupported: ") || d.output.contains("WRITE and READ of 64 bytes"))
        },
    ));
    // What `cargo xtask vm -- bash -c 'echo "a b" && exit 3'` hands the VM.
    checks.push(Check::verdict(
        "vm runs a quoted command as written",
        device::shell_words(&["bash", "-c", "echo \"a b\" && exit 3"]),
        |d| d.code == Some(3) && d.output.lines().any(|l| l == "a b"),
    ));
    if matches!(place, device::Place::Vm { .. }) {
        checks.extend(report::vm_checks(&shared)?);
    }
    checks.extend(crate::perf_checks::checks()?);
    checks.push(crate::bench_verbs::gate_check()?);
    checks.extend(crate::examples::checks(place.device())?);
    checks.extend(crate::cm::checks()?);
    checks.extend(crate::aio::checks()?);
    checks.extend(crate::hostile::checks()?);
    // soft-iWARP, built from the stable kernel's source (VM only).
    match (matrix, &place) {
        (true, device::Place::Vm { kernel }) => match crate::siw::checks(kernel, &shared, crate::siw::DEVICE_SUBSET) {
            Ok(siw) => checks.extend(siw),
            Err(e) => tally.check(&format!("siw: module built from the stable kernel's source ({e})"), false),
        },
        (true, _) => tally.check(NOT_IN_VM_SIW, false),
        (false, _) => tally.skip(SKIPPED_SIW),
    }
    // Last: they add devices and namespaces.
    checks.extend(crate::cluster::checks()?);
    checks.extend(crate::perf_checks::cluster_checks()?);
    checks.extend(crate::slurm::checks()?);
    // `--expect mlx5` reaches every step (checks written for ConnectX that
    // find another device fail instead of skipping).
    if let Some(e) = &expect {
        for c in &mut checks {
            c.step.command = format!("export RRDDMMA_EXPECT_DRIVER={e}; {}", c.step.command);
        }
    }
    phases.end("device checks assembled (perf, examples, siw module)");
    device::run_checks(&place, &checks, &mut tally)?;
    phases.end("device session (every device check, one VM under the stable kernel)");
    let facts = report::Facts::parse(place.device(), &facts.borrow());
    report::finish(&facts, expect.as_deref(), &listed.borrow(), &mut tally);
    // The kernel matrix: a subset under Debian's newest kernel, in its own VM.
    if !matrix {
        tally.skip(SKIPPED_MATRIX);
    } else if matches!(place, device::Place::Vm { .. }) {
        let tarball = crate::rdma_core_src::tarball()?;
        let v59 = dlopen.as_ref().map(|b| (b.device.as_path(), tarball.as_path()));
        if let Err(e) = crate::matrix::newest(&shared, v59, &mut tally) {
            tally.check(&format!("kernel matrix: Debian's newest kernel fetched and booted ({e})"), false);
        }
    } else {
        tally.check(NOT_IN_VM_MATRIX, false);
    }
    phases.end("kernel matrix (Debian's newest kernel, its own VM)");
    crate::tree_check::unchanged(&mut tally, tree_before.as_deref());
    print!("\n{}", phases.table());

    tally.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(code: i32, output: &str) -> device::Done {
        device::Done { name: "missing".into(), code: Some(code), output: output.into(), secs: Some(1) }
    }

    #[test]
    fn the_missing_device_run_passes_only_when_every_test_failed_naming_it() {
        let all_failed = "panicked: device missing0 not found\ntest result: FAILED. 0 passed; 37 failed; 0 ignored";
        assert!(missing_fails(&done(101, all_failed)));
        // One test passed without its device.
        let one_passed = "device missing0 not found\ntest result: FAILED. 1 passed; 36 failed; 0 ignored";
        assert!(!missing_fails(&done(101, one_passed)));
        // The device not named, or the run not failed.
        assert!(!missing_fails(&done(101, "test result: FAILED. 0 passed; 37 failed")));
        assert!(!missing_fails(&done(0, all_failed)));
    }
}
