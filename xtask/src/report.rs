//! `cargo xtask test --device NAME [--expect mlx5] [--only-device]`: the
//! device tests on a device of this host (no VM), and the run's report.
//!
//! - `--device NAME` runs the checks of `cargo xtask test` on that device;
//!   the kernel matrix and soft-iWARP (which boot VMs) run only with
//!   `--kernel-matrix`.
//! - `--expect mlx5` (the default when NAME's driver is mlx5) makes every
//!   test written for ConnectX that skips a failure naming it
//!   (`RRDDMMA_EXPECT_DRIVER=mlx5`, read by tests/device/common.rs).
//! - `--only-device` runs the device tests alone (the binary from
//!   `RRDDMMA_DEVICE_TEST_BINARY`, else built), filtered by
//!   `RRDDMMA_DEVICE_TEST_FILTER` when set: a first look at a new machine.
//!
//! Every run with a device writes a JSON report (device, driver, firmware,
//! board id, kernel, rdma-core, linkage, each device test's outcome with its
//! time and, for a skip, its reason) to `target/xtask/test-report.json` (or
//! `RRDDMMA_TEST_REPORT`) and prints a summary table.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::device::{Check, Place};
use crate::root;

/// The options of `cargo xtask test` that pick the device.
#[derive(Debug, Default, Clone)]
pub struct Opts {
    /// `--device NAME`.
    pub device: Option<String>,
    /// `--expect DRIVER`.
    pub expect: Option<String>,
    /// `--only-device`.
    pub only_device: bool,
}

impl Opts {
    /// Reads the options out of `args`; `--kernel-matrix` and
    /// `--no-kernel-matrix` stay for the caller, anything else is refused.
    pub fn parse(args: &[String]) -> Result<Opts, String> {
        let mut o = Opts::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--device" => o.device = Some(it.next().ok_or("--device needs a device name (ibv_devices)")?.clone()),
                "--expect" => {
                    let v = it.next().ok_or("--expect needs a driver name (mlx5)")?;
                    if v != "mlx5" {
                        return Err(format!("--expect {v}: only mlx5 is known (the tests written for ConnectX)"));
                    }
                    o.expect = Some(v.clone());
                }
                "--only-device" => o.only_device = true,
                // Read by `test::run`.
                "--kernel-matrix" | "--no-kernel-matrix" => {}
                other => {
                    return Err(format!(
                        "cargo xtask test: unknown argument {other:?} (it takes --device NAME, --expect mlx5, \
                         --only-device, --kernel-matrix, --no-kernel-matrix)"
                    ))
                }
            }
        }
        if o.only_device && o.device.is_none() {
            return Err("--only-device needs --device NAME (a device of this host)".into());
        }
        if o.expect.is_some() && o.device.is_none() {
            return Err("--expect needs --device NAME: the VM's device is SoftRoCE".into());
        }
        Ok(o)
    }

    /// The driver whose tests must not skip: `--expect`, else mlx5 when the
    /// device's driver is mlx5.
    pub fn expected(&self, driver: &str) -> Option<String> {
        self.expect.clone().or_else(|| driver.starts_with("mlx5").then(|| "mlx5".to_string()))
    }
}

/// What the report says about the machine.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    /// The device.
    pub device: String,
    /// Its kernel driver (`mlx5_core`, `rdma_rxe`, ...; `rxe` when unknown).
    pub driver: String,
    /// `fw_ver`.
    pub firmware: String,
    /// `board_id`.
    pub board_id: String,
    /// `uname -r`.
    pub kernel: String,
    /// rdma-core's version (libibverbs' pkg-config version).
    pub rdma_core: String,
    /// The build's linkage.
    pub linkage: String,
}

/// The kernel driver of `device` on this machine (`mlx5_core`), read
/// before the session starts to pick the default `--expect`.
pub fn host_driver(device: &str) -> String {
    std::fs::read_link(format!("/sys/class/infiniband/{device}/device/driver"))
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "-".into())
}

/// A step printing the facts where the device is, as `key=value` lines
/// (SoftRoCE and siw devices have no bus device: their driver is the module
/// their name's prefix names).
const FACTS_STEP: &str = r#"d=$RRDDMMA_TEST_DEVICE; s=/sys/class/infiniband/$d
drv=-; [ -e "$s/device/driver" ] && drv=$(basename "$(readlink -f "$s/device/driver")")
case "$drv:$d" in -:rxe*) drv=rdma_rxe;; -:siw*) drv=siw;; esac
echo "driver=$drv"; echo "firmware=$(cat "$s/fw_ver" 2>/dev/null || echo -)"
echo "board_id=$(cat "$s/board_id" 2>/dev/null || echo -)"; echo "kernel=$(uname -r)"
echo "rdma_core=$(pkg-config --modversion libibverbs 2>/dev/null || echo -)""#;

/// rdma-core's release from libibverbs' version (`1.14.44.0` is rdma-core
/// 44: libibverbs 1.14 carries the release in its third number).
fn rdma_core(libibverbs: &str) -> String {
    match libibverbs.split('.').nth(2) {
        Some(r) if libibverbs.starts_with("1.14.") => format!("{r} (libibverbs {libibverbs})"),
        _ => libibverbs.to_string(),
    }
}

impl Facts {
    /// The facts the step of [`Facts::check`] printed about `device`.
    pub fn parse(device: &str, printed: &str) -> Facts {
        let get = |k: &str| {
            printed
                .lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map_or_else(|| "-".to_string(), str::to_string)
        };
        Facts {
            device: device.into(),
            driver: get("driver"),
            firmware: get("firmware"),
            board_id: get("board_id"),
            kernel: get("kernel"),
            rdma_core: rdma_core(&get("rdma_core")),
            linkage: std::env::var("RRDDMMA_LINKAGE").unwrap_or_else(|_| "pkg-config".into()),
        }
    }

    /// The check that reads the facts in the device session; its output
    /// lands in `slot`.
    pub fn check(slot: Rc<RefCell<String>>) -> Check {
        Check {
            step: crate::device::Step { name: "device facts for the report".into(), command: FACTS_STEP.into() },
            judge: Box::new(move |d, t| {
                slot.borrow_mut().push_str(&d.output);
                t.check_output(&d.name, d.code == Some(0) && d.output.contains("kernel="), &d.output)
            }),
        }
    }
}

/// One device test's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `passed`, `failed`, `skipped` or `ignored`.
    pub status: &'static str,
    /// Seconds, when libtest reported them.
    pub secs: Option<f64>,
    /// Why it skipped or failed, when known.
    pub reason: Option<String>,
}

/// The outcomes in libtest's output (`test NAME ... ok <0.012s>`), with the
/// skips of `skips` (`test<TAB>reason` lines) and the panics of failed tests.
pub fn outcomes(libtest: &str, skips: &str) -> BTreeMap<String, Outcome> {
    let mut map = BTreeMap::new();
    for line in libtest.lines() {
        let Some(rest) = line.strip_prefix("test ") else { continue };
        let Some((name, verdict)) = rest.split_once(" ... ") else { continue };
        let (word, time) = verdict.split_once(' ').unwrap_or((verdict, ""));
        let status = match word.trim() {
            "ok" => "passed",
            "FAILED" => "failed",
            "ignored," | "ignored" => "ignored",
            _ => continue,
        };
        let secs = time.trim().strip_prefix('<').and_then(|t| t.strip_suffix("s>")).and_then(|t| t.parse().ok());
        map.insert(name.trim().to_string(), Outcome { status, secs, reason: None });
    }
    for line in skips.lines() {
        if let Some((test, reason)) = line.split_once('\t') {
            if let Some(o) = map.get_mut(test).filter(|o| o.status == "passed") {
                o.status = "skipped";
                o.reason = Some(reason.to_string());
            }
        }
    }
    // The panic of each failed test: `thread 'NAME' panicked at ...:\nMESSAGE`.
    let lines: Vec<&str> = libtest.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix("thread '") else { continue };
        // `thread 'NAME' panicked at` (`thread 'NAME' (TID) panicked at` on newer toolchains).
        let Some((name, after)) = rest.split_once('\'') else { continue };
        if !after.contains(" panicked at ") {
            continue;
        }
        if let Some(o) = map.get_mut(name).filter(|o| o.status == "failed" && o.reason.is_none()) {
            o.reason = lines.get(i + 1).map(|m| m.trim().to_string());
        }
    }
    map
}

fn json_str(s: &str) -> serde_json::Value {
    serde_json::Value::String(s.to_string())
}

/// The report as JSON.
pub fn to_json(facts: &Facts, expect: Option<&str>, tests: &BTreeMap<String, Outcome>) -> serde_json::Value {
    let mut t = serde_json::Map::new();
    for (name, o) in tests {
        let mut m = serde_json::Map::new();
        m.insert("outcome".into(), json_str(o.status));
        m.insert("secs".into(), o.secs.map_or(serde_json::Value::Null, |s| serde_json::json!(s)));
        if let Some(r) = &o.reason {
            m.insert("reason".into(), json_str(r));
        }
        t.insert(name.clone(), serde_json::Value::Object(m));
    }
    let count = |s: &str| tests.values().filter(|o| o.status == s).count();
    serde_json::json!({
        "device": facts.device,
        "driver": facts.driver,
        "firmware": facts.firmware,
        "board_id": facts.board_id,
        "kernel": facts.kernel,
        "rdma_core": facts.rdma_core,
        "linkage": facts.linkage,
        "expect": expect,
        "summary": {
            "passed": count("passed"),
            "failed": count("failed"),
            "skipped": count("skipped"),
            "ignored": count("ignored"),
        },
        "tests": t,
    })
}

/// Where the report goes.
pub fn report_path() -> PathBuf {
    std::env::var_os("RRDDMMA_TEST_REPORT").map_or_else(|| root().join("target/xtask/test-report.json"), PathBuf::from)
}

/// Writes the report and prints its summary table (each skip and failure
/// with its reason).
pub fn write(facts: &Facts, expect: Option<&str>, tests: &BTreeMap<String, Outcome>) -> std::io::Result<PathBuf> {
    let path = report_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = to_json(facts, expect, tests);
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap_or_default() + "\n")?;
    println!("device test report ({}):", path.display());
    println!("| device | driver | firmware | board | kernel | rdma-core | linkage | expect |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |",
        facts.device,
        facts.driver,
        facts.firmware,
        facts.board_id,
        facts.kernel,
        facts.rdma_core,
        facts.linkage,
        expect.unwrap_or("-")
    );
    let s = &json["summary"];
    println!("passed {}, failed {}, skipped {}, ignored {}", s["passed"], s["failed"], s["skipped"], s["ignored"]);
    for (name, o) in tests.iter().filter(|(_, o)| matches!(o.status, "skipped" | "failed")) {
        println!("  {} {name}: {}", o.status, o.reason.as_deref().unwrap_or("-"));
    }
    Ok(path)
}

/// The skip log the device tests append to (`RRDDMMA_SKIP_LOG`).
pub fn skip_log() -> PathBuf {
    root().join(format!("target/xtask/skips-{}.tsv", std::process::id()))
}

/// The environment and libtest flags of the step whose tests the report
/// lists: the skip log, the expected driver, per-test times.
pub fn step_prefix(expect: Option<&str>) -> String {
    let mut s = format!("RRDDMMA_SKIP_LOG='{}' RUSTC_BOOTSTRAP=1 ", skip_log().display());
    if let Some(e) = expect {
        s.push_str(&format!("RRDDMMA_EXPECT_DRIVER={e} "));
    }
    s
}

/// libtest's flags for per-test times.
pub const TIMES: &str = "-Z unstable-options --report-time";

/// A libtest check whose output also feeds the report (kept in `slot`).
pub fn reported(name: &str, command: String, slot: Rc<RefCell<String>>) -> Check {
    let mut c = Check::libtest(name, command);
    let judge = c.judge;
    c.judge = Box::new(move |d, t| {
        slot.borrow_mut().push_str(&d.output);
        judge(d, t)
    });
    c
}

/// Reads the skip log (and removes it), builds and writes the report.
pub fn finish(facts: &Facts, expect: Option<&str>, libtest: &str, tally: &mut crate::tally::Tally) {
    let log = skip_log();
    let skips = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let tests = outcomes(libtest, &skips);
    match write(facts, expect, &tests) {
        Ok(path) => tally.check(
            &format!("device test report written ({}, {} tests)", path.display(), tests.len()),
            !tests.is_empty(),
        ),
        Err(e) => tally.check(&format!("device test report written ({e})"), false),
    }
}

/// `--only-device`: the device tests alone on `place`, then the report.
pub fn only_device(place: &Place, opts: &Opts, binary: &Path) -> crate::Result<()> {
    let expect = opts.expected(&host_driver(place.device()));
    let filter = std::env::var("RRDDMMA_DEVICE_TEST_FILTER").unwrap_or_default();
    let slot = Rc::new(RefCell::new(String::new()));
    let cmd =
        format!("{}'{}' --ignored --test-threads=1 {TIMES} {filter}", step_prefix(expect.as_deref()), binary.display());
    let printed = Rc::new(RefCell::new(String::new()));
    let checks = vec![Facts::check(printed.clone()), reported("device tests", cmd, slot.clone())];
    let mut tally = crate::tally::Tally::default();
    let _ = std::fs::remove_file(skip_log());
    crate::device::run_checks(place, &checks, &mut tally)?;
    let facts = Facts::parse(place.device(), &printed.borrow());
    finish(&facts, expect.as_deref(), &slot.borrow(), &mut tally);
    tally.finish()
}

/// The tests written for ConnectX that skip off mlx5: `--expect mlx5` on
/// SoftRoCE must fail naming each.
pub const MLX5_TESTS: &[&str] = &[
    "mkey::mkey_one_remote_range_over_three_regions_on_mlx5",
    "mprq::striding_rq_is_created_within_the_caps_on_mlx5",
    "tm::tag_add_and_remove_complete_on_a_tm_srq",
    "tm::an_unexpected_message_then_an_expected_one_on_a_tm_srq",
    "cx_bf::dedicated_blueflame_writes_land_on_mlx5",
    "cx_cq::compressed_cq_expands_a_burst_of_small_receives_on_mlx5",
    "cx_cq::completion_clock_stamps_advance_with_the_device_and_host_clocks_on_mlx5",
    "cx_dc::dc_write_read_cas_and_fetch_add_land_in_the_dct_on_mlx5",
    "cx_dc::dc_requests_on_every_stream_of_a_dci_land_on_mlx5",
    "cx_dc::dc_stream_in_error_is_reset_while_another_goes_on_on_mlx5",
    "cx_raw::raw_udp_frames_land_in_a_striding_rq_through_a_flow_on_connectx",
    "cx_raw::flow_counters_count_the_frames_a_rule_matched_on_connectx",
    "cx_raw::a_paced_raw_packet_qp_sends_no_faster_than_its_rate_on_connectx",
    "cx_odp::implicit_odp_takes_write_read_and_fetch_add_on_untouched_pages_on_mlx5",
    "devx::devx_caps_agree_with_what_mlx5dv_reports_on_mlx5",
];

/// The device-test filter of the checks below: the modules of [`MLX5_TESTS`].
const MLX5_MODULES: &str = "mkey:: mprq:: tm:: cx_bf:: cx_cq:: cx_dc:: cx_odp:: cx_raw:: devx::";

/// Checks run inside the VM: `cargo xtask test --device rxe0 --only-device`
/// there runs as a host run would (the VM's device is the host's), once
/// with `--expect mlx5` (fails naming every mlx5 test that skipped) and
/// once without (passes and writes its report). Both use the device tests
/// of `binary` filtered to the modules that hold the mlx5 tests.
pub fn vm_checks(binary: &Path) -> crate::Result<Vec<Check>> {
    let xtask = std::env::current_exe()?;
    let dev = crate::device::RXE_DEVICE;
    let run = |expect: &str, report: &Path| {
        format!(
            "RRDDMMA_DEVICE_TEST_BINARY='{}' RRDDMMA_DEVICE_TEST_FILTER='{MLX5_MODULES}' RRDDMMA_TEST_REPORT='{}' \
             '{}' test --device {dev} --only-device {expect}",
            binary.display(),
            report.display(),
            xtask.display()
        )
    };
    let expect_report = root().join("target/xtask/test-report-expect-mlx5.json");
    let plain_report = root().join("target/xtask/test-report-rxe0.json");
    let _ = std::fs::remove_file(&plain_report);
    let read = plain_report.clone();
    Ok(vec![
        Check::verdict(
            "cargo xtask test --device rxe0 --expect mlx5 (in the VM) fails naming every mlx5 test that skipped",
            run("--expect mlx5", &expect_report),
            |d| {
                d.code.is_some_and(|c| c != 0)
                    && MLX5_TESTS.iter().all(|t| d.output.contains(&format!("{t} skipped under --expect mlx5")))
            },
        ),
        Check::verdict(
            "cargo xtask test --device rxe0 (in the VM) passes and writes its JSON report",
            run("", &plain_report),
            move |d| {
                let json: serde_json::Value =
                    std::fs::read_to_string(&read).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
                let skipped = |t: &str| json["tests"][t]["outcome"] == "skipped";
                d.code == Some(0)
                    && json["device"] == dev
                    && json["driver"] == "rdma_rxe"
                    && json["summary"]["failed"] == 0
                    && MLX5_TESTS.iter().all(|t| skipped(t))
            },
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "running 4 tests
test mkey::a ... ok <0.010s>
test mkey::b ... ok <1.500s>
test tm::c ... FAILED <0.002s>
test x::d ... ignored, not here
thread 'tm::c' (77) panicked at tests/device/tm.rs:3:5:
tm::c skipped under --expect mlx5: rxe0 has no tag matching
";

    #[test]
    fn outcomes_name_passes_skips_failures_and_times() {
        let o = outcomes(RUN, "mkey::b\trxe0 is not an mlx5 device\nnot::run\tx\n");
        assert_eq!(o.len(), 4);
        assert_eq!(o["mkey::a"], Outcome { status: "passed", secs: Some(0.01), reason: None });
        assert_eq!(o["mkey::b"].status, "skipped");
        assert_eq!(o["mkey::b"].reason.as_deref(), Some("rxe0 is not an mlx5 device"));
        assert_eq!(o["tm::c"].status, "failed");
        assert!(o["tm::c"].reason.as_deref().unwrap().contains("skipped under --expect mlx5"), "{:?}", o["tm::c"]);
        assert_eq!(o["x::d"].status, "ignored");
        let j = to_json(&Facts { device: "rxe0".into(), ..Facts::default() }, Some("mlx5"), &o);
        assert_eq!(j["summary"]["skipped"], 1);
        assert_eq!(j["summary"]["failed"], 1);
        assert_eq!(j["tests"]["mkey::b"]["reason"], "rxe0 is not an mlx5 device");
        assert_eq!(j["expect"], "mlx5");
    }

    /// The `#[test]` functions of tests/device/MODULE.rs, as `MODULE::name`.
    fn device_tests(module: &str) -> Vec<String> {
        let text = std::fs::read_to_string(root().join(format!("tests/device/{module}.rs"))).unwrap();
        let mut names = Vec::new();
        let mut pending = false;
        for line in text.lines().map(str::trim) {
            if line == "#[test]" {
                pending = true;
            } else if let Some(rest) = line.strip_prefix("fn ").or_else(|| line.strip_prefix("async fn ")) {
                if std::mem::take(&mut pending) {
                    names.push(format!("{module}::{}", rest.split('(').next().unwrap_or(rest)));
                }
            }
        }
        names
    }

    /// Every test of a `cx_*` file (written for ConnectX) and every test
    /// whose name promises mlx5 or ConnectX (and no refusal off it) is in
    /// MLX5_TESTS; every entry
    /// names a test that exists, in a module the VM checks' filter runs.
    #[test]
    fn mlx5_tests_list_every_test_written_for_connectx() {
        let mut modules: Vec<String> = std::fs::read_dir(root().join("tests/device"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".rs").map(str::to_string))
            .collect();
        modules.sort();
        let mut all = Vec::new();
        for m in &modules {
            let tests = device_tests(m);
            for t in &tests {
                // `..._off_mlx5_..._on_mlx5` tests assert a refusal off mlx5: no skip.
                let named = (t.ends_with("_on_mlx5") || t.ends_with("_on_connectx")) && !t.contains("_off_mlx5");
                let promised = m.starts_with("cx_") || named;
                assert!(
                    !promised || MLX5_TESTS.contains(&t.as_str()),
                    "{t} is written for ConnectX: list it in MLX5_TESTS"
                );
            }
            all.extend(tests);
        }
        assert!(all.len() > 100, "{} device tests found", all.len());
        for t in MLX5_TESTS {
            assert!(all.iter().any(|a| a == t), "MLX5_TESTS names {t}, which is no device test");
            let module = t.split("::").next().unwrap();
            assert!(MLX5_MODULES.split(' ').any(|m| m == format!("{module}::")), "{t}: add {module}:: to MLX5_MODULES");
        }
    }

    /// The arguments of every `xtask test --device ...` command quoted in
    /// `text` (up to the closing backtick, across lines, comment markers
    /// dropped; in a code block up to a shell comment).
    fn quoted_device_commands(text: &str) -> Vec<Vec<String>> {
        text.match_indices("xtask test --device")
            .map(|(i, _)| {
                let rest = &text[i + "xtask test".len()..];
                let end = rest.find('`').unwrap_or_else(|| rest.find('\n').unwrap_or(rest.len()));
                let words = rest[..end].split_whitespace().take_while(|t| !t.starts_with('#'));
                words.filter(|t| !t.starts_with("//")).map(str::to_string).collect()
            })
            .collect()
    }

    /// Every `cargo xtask test --device ...` that README.md, docs/ and
    /// tests/ quote is a command the parser takes.
    #[test]
    fn quoted_device_commands_parse() {
        fn files(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()) {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "md" || x == "rs") {
                    out.push(p);
                }
            }
        }
        let mut paths = vec![root().join("README.md")];
        files(&root().join("docs"), &mut paths);
        files(&root().join("tests"), &mut paths);
        let mut seen = 0;
        for p in &paths {
            for args in quoted_device_commands(&std::fs::read_to_string(p).unwrap_or_default()) {
                seen += 1;
                if let Err(e) = Opts::parse(&args) {
                    panic!("{} quotes `cargo xtask test {}`: {e}", p.display(), args.join(" "));
                }
            }
        }
        assert!(seen >= 4, "{seen} quoted commands");
        let bad = quoted_device_commands("see `cargo xtask test --device mlx5_0\n  --expect mlx4` and more");
        assert_eq!(bad, [["--device", "mlx5_0", "--expect", "mlx4"]]);
        let block = quoted_device_commands("cargo xtask test --device mlx5_0   # on a ConnectX\nmore\n");
        assert_eq!(block, [["--device", "mlx5_0"]]);
        assert!(Opts::parse(&bad[0]).is_err());
    }

    #[test]
    fn options_refuse_what_cannot_run() {
        let a = |v: &[&str]| Opts::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(a(&["--device", "mlx5_0"]).unwrap().device.as_deref(), Some("mlx5_0"));
        assert!(a(&["--device"]).unwrap_err().contains("device name"));
        assert!(a(&["--device", "rxe0", "--expect", "bnxt"]).unwrap_err().contains("only mlx5"));
        assert!(a(&["--only-device"]).unwrap_err().contains("--device NAME"));
        assert!(a(&["--expect", "mlx5"]).unwrap_err().contains("--device NAME"));
        assert!(a(&["--devcie", "mlx5_0"]).unwrap_err().contains("unknown argument \"--devcie\""));
        assert!(a(&["--device", "mlx5_0", "mlx5_1"]).unwrap_err().contains("\"mlx5_1\""));
        assert!(a(&["--device", "mlx5_0", "--no-kernel-matrix"]).is_ok());
        assert_eq!(a(&["--device", "mlx5_0"]).unwrap().expected("mlx5_core").as_deref(), Some("mlx5"));
        assert_eq!(a(&["--device", "rxe0"]).unwrap().expected("-"), None);
        let f = Facts::parse("mlx5_0", "driver=mlx5_core\nfirmware=28.39.1002\nkernel=6.1.0-28-amd64\n");
        assert_eq!((f.driver.as_str(), f.firmware.as_str(), f.board_id.as_str()), ("mlx5_core", "28.39.1002", "-"));
        let rxe = Facts::parse("rxe0", "driver=rdma_rxe\nfirmware=\nrdma_core=1.14.44.0\n");
        assert_eq!((rxe.firmware.as_str(), rxe.rdma_core.as_str()), ("-", "44 (libibverbs 1.14.44.0)"));
    }
}
