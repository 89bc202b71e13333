//! `cargo xtask mutants`: cargo-mutants over `src/mlx5dv`, its mutants
//! tested by the library's unit tests, the host test binaries that reach
//! mlx5dv (`tests/mlx5_*.rs`), the libmlx5 differential harness in its quick
//! mode (`RRDDMMA_HARNESS_QUICK=1`) and, with `--device`, the device tests
//! of `mlx5dv::` and those named after the mutated file, in the SoftRoCE VM.
//!
//! cargo-mutants runs `cargo test` in its scratch copy of the tree; it finds
//! cargo through `$CARGO`, which this task points at a copy of itself
//! ([`proxy`]): `cargo test --no-run` builds the binaries above, `cargo test`
//! runs them, anything else goes to cargo as it is. The builds share
//! `target/` (its dependencies and the harness's rdma-core build are made
//! once), and cargo-mutants writes its `mutants.out` under `target/mutants`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use crate::{root, show, Result};

/// The cargo-mutants release the task installs and runs.
pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";

/// Where cargo-mutants writes `mutants.out`.
const OUTPUT: &str = "target/mutants";

/// Code only MLNX_OFED 4.x builds (cfg `rrddmma_mlnx_ofed4`): no test here compiles it.
const OFED4_ONLY: &str = "src/mlx5dv/exp4.rs";

const HELP: &str = "\
usage: cargo xtask mutants [--sample N] [--seed S] [--in-diff REF] [--timeout SECS] [--device] [--list]

cargo-mutants (installed from crates.io when missing, version PINNED) over src/mlx5dv/**/*.rs
(src/mlx5dv/exp4.rs left out: only MLNX_OFED 4.x compiles it). Each mutant is tested by:
  1. the library's unit tests and the host test binaries tests/mlx5_*.rs (cargo test --lib --test ..);
  2. the libmlx5 differential harness (tests/mlx5_provider.rs --ignored) in its quick mode,
     RRDDMMA_HARNESS_QUICK=1: every section's counts divided by 10, on the rdma-core v59
     build made once under target/ (the static mlx5 source build when cargo xtask test has made it);
  3. with --device: the device tests of module mlx5dv:: and those whose names contain the mutated
     file's stem (cq, dc, clock, ...), in the SoftRoCE VM: one boot per mutant, none for the baseline.

  --sample N      a seeded sample of about N mutants spread over the files: every step-th mutant of
                  the listing, step = total / N, from the (S mod step)-th (cargo-mutants --shard k/step
                  --sharding round-robin; the same tree and seed give the same sample)
  --seed S        the sample's seed (default 1)
  --in-diff REF   only mutants in lines changed since the git ref REF (git diff REF, cargo-mutants --in-diff)
  --timeout SECS  the test timeout per mutant (default: cargo-mutants' own, from the baseline run)
  --device        add the device tests (step 3)
  --list          list the chosen mutants, run nothing

Prints the mutants tested, caught, missed (file:line and the mutation), unviable and timed out, the
score over the viable ones, and the time per mutant; a missed mutant inside an item under
#[cfg(rrddmma_mlnx_ofed4)] (compiled only for MLNX_OFED 4.x) is listed apart, outside the score; cargo-mutants' output is in target/mutants/mutants.out.
Not part of cargo xtask test (minutes per dozen mutants).";

/// The task's options.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Opts {
    pub help: bool,
    pub sample: Option<usize>,
    pub seed: u64,
    pub in_diff: Option<String>,
    pub timeout: Option<u64>,
    pub device: bool,
    pub list: bool,
}

impl Opts {
    /// Reads the flags main.rs's parser has checked.
    pub fn parse(args: &[String]) -> Result<Opts> {
        let mut o = Opts { seed: 1, ..Opts::default() };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
            match a.as_str() {
                "--help" => o.help = true,
                "--device" => o.device = true,
                "--list" => o.list = true,
                "--sample" => {
                    let n: usize = value("--sample")?.parse().map_err(|e| format!("--sample: {e}"))?;
                    if n == 0 {
                        return Err("--sample needs at least 1 mutant".into());
                    }
                    o.sample = Some(n);
                }
                "--seed" => o.seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
                "--in-diff" => o.in_diff = Some(value("--in-diff")?),
                "--timeout" => o.timeout = Some(value("--timeout")?.parse().map_err(|e| format!("--timeout: {e}"))?),
                other => return Err(format!("unknown flag {other}").into()),
            }
        }
        Ok(o)
    }
}

/// cargo-mutants' arguments that choose the mutants: the files of
/// src/mlx5dv, the diff, and the sample (`--shard k/n --sharding
/// round-robin`: every n-th mutant of the listing, from the k-th).
pub fn selection_args(diff: Option<&Path>, shard: Option<(usize, usize)>) -> Vec<String> {
    let mut a: Vec<String> =
        ["--file", "src/mlx5dv/**/*.rs", "--exclude", OFED4_ONLY].iter().map(|s| s.to_string()).collect();
    if let Some(d) = diff {
        a.push("--in-diff".into());
        a.push(d.display().to_string());
    }
    if let Some((k, n)) = shard {
        a.push("--shard".into());
        a.push(format!("{k}/{n}"));
        a.push("--sharding".into());
        a.push("round-robin".into());
    }
    a
}

/// The shard `k/n` that samples about `want` of `total` mutants: n is
/// `total / want` rounded (at least 1), k is the seed modulo n.
pub fn sample_shard(total: usize, want: usize, seed: u64) -> (usize, usize) {
    let n = (total as f64 / want.max(1) as f64).round().max(1.0) as usize;
    ((seed % n as u64) as usize, n)
}

fn cargo_mutants() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    let p = home.join("bin/cargo-mutants");
    if p.is_file() {
        p
    } else {
        PathBuf::from("cargo-mutants")
    }
}

/// Installs the pinned cargo-mutants when it is missing or another version.
fn ensure_installed() -> Result<()> {
    let have = Command::new(cargo_mutants()).args(["mutants", "--version"]).output().ok();
    let version = have.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    if version == format!("cargo-mutants {CARGO_MUTANTS_VERSION}") {
        return Ok(());
    }
    eprintln!("cargo-mutants {CARGO_MUTANTS_VERSION} missing (found {version:?}): installing it from crates.io");
    crate::run(Command::new(env!("CARGO")).args([
        "install",
        "--locked",
        "cargo-mutants",
        "--version",
        CARGO_MUTANTS_VERSION,
    ]))
}

/// The cargo-mutants command at the workspace root, `CARGO` pointing at
/// this task's proxy.
fn mutants_cmd(proxy_exe: &Path, opts: &Opts) -> Result<Command> {
    let mut cmd = Command::new(cargo_mutants());
    cmd.args(["mutants", "--dir"]).arg(root()).args(["--package", "rrddmma", "--no-shuffle"]);
    cmd.env("CARGO", proxy_exe)
        .env(REAL_CARGO, env!("CARGO"))
        .env(ROOT, root())
        .env("CARGO_TARGET_DIR", root().join("target"))
        .env("RRDDMMA_RDMA_CORE_SRC", crate::rdma_core_src::tarball()?)
        .env(DEVICE, if opts.device { "1" } else { "0" })
        .current_dir(root());
    if let Some(build) = crate::mlx5_provider::source_build() {
        cmd.env("RRDDMMA_MLX5_PROVIDER_BUILD", build);
    }
    Ok(cmd)
}

/// The env var that makes the xtask binary a cargo proxy: the real cargo.
pub const REAL_CARGO: &str = "RRDDMMA_MUTANTS_REAL_CARGO";
const ROOT: &str = "RRDDMMA_MUTANTS_ROOT";
const DEVICE: &str = "RRDDMMA_MUTANTS_DEVICE";

/// `cargo xtask mutants`.
pub fn run(args: &[String]) -> Result<()> {
    let opts = Opts::parse(args)?;
    if opts.help {
        println!("{}", HELP.replace("PINNED", CARGO_MUTANTS_VERSION));
        return Ok(());
    }
    ensure_installed()?;
    let out = root().join(OUTPUT);
    std::fs::create_dir_all(&out)?;
    // A copy of this binary, so that rebuilding xtask meanwhile changes nothing.
    let proxy_exe = out.join("cargo-proxy");
    std::fs::copy(std::env::current_exe()?, &proxy_exe)?;

    let diff = match &opts.in_diff {
        Some(r) => {
            let o = Command::new("git").args(["diff", r, "--"]).current_dir(root()).output()?;
            if !o.status.success() {
                return Err(format!("git diff {r} failed: {}", String::from_utf8_lossy(&o.stderr)).into());
            }
            let p = out.join("in-diff.patch");
            std::fs::write(&p, &o.stdout)?;
            Some(p)
        }
        None => None,
    };
    let shard = match opts.sample {
        Some(n) => {
            let mut cmd = mutants_cmd(&proxy_exe, &opts)?;
            cmd.args(selection_args(diff.as_deref(), None)).args(["--list", "--json"]);
            eprintln!("$ {}", show(&cmd));
            let o = cmd.output()?;
            if !o.status.success() {
                return Err(format!("cargo mutants --list failed: {}", String::from_utf8_lossy(&o.stderr)).into());
            }
            let total = listed(&String::from_utf8_lossy(&o.stdout))?;
            let (k, step) = sample_shard(total, n, opts.seed);
            println!(
                "sample: every {step}th of {total} mutants from the {k}th (seed {}): about {}",
                opts.seed,
                total / step
            );
            Some((k, step))
        }
        None => None,
    };
    let mut cmd = mutants_cmd(&proxy_exe, &opts)?;
    cmd.args(selection_args(diff.as_deref(), shard));
    if opts.list {
        cmd.arg("--list");
        return crate::run(&mut cmd);
    }
    cmd.arg("--output").arg(&out);
    if let Some(t) = opts.timeout {
        cmd.args(["--timeout", &t.to_string()]);
    }
    eprintln!("$ {}", show(&cmd));
    let start = Instant::now();
    let status = cmd.status()?;
    let took = start.elapsed().as_secs_f64();
    // 0: all caught; 2: some missed; 3: some timed out.
    if !matches!(status.code(), Some(0 | 2 | 3)) {
        return Err(format!("cargo-mutants failed ({status}); see {}/mutants.out/debug.log", out.display()).into());
    }
    summary(&out.join("mutants.out"), took)
}

/// How many mutants `cargo mutants --list --json` lists.
fn listed(json: &str) -> Result<usize> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    Ok(v.as_array().ok_or("cargo mutants --list --json: not an array")?.len())
}

/// Whether the mutant `line` of `missed.txt` (`file:line:col: what`) lies
/// in an item only MLNX_OFED 4.x builds.
fn ofed4_only(mutant: &str) -> bool {
    let mut parts = mutant.splitn(3, ':');
    let (Some(file), Some(line)) = (parts.next(), parts.next().and_then(|l| l.parse::<usize>().ok())) else {
        return false;
    };
    let src = std::fs::read_to_string(root().join(file)).unwrap_or_default();
    ofed4_items(&src).iter().any(|&(a, b)| (a..=b).contains(&line))
}

/// The line ranges (1-based, inclusive) of the items under
/// `#[cfg(rrddmma_mlnx_ofed4)]` in `src`: from the attribute to the line
/// where the item's braces close (or its `;`).
pub fn ofed4_items(src: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(rrddmma_mlnx_ofed4)]" {
            i += 1;
            continue;
        }
        let start = i;
        let mut depth = 0i64;
        let mut opened = false;
        let mut end = i;
        for (j, l) in lines.iter().enumerate().skip(i + 1) {
            let code = l.split("//").next().unwrap_or("");
            if !opened && code.trim_start().starts_with("#[") {
                continue;
            }
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            end = j;
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
        }
        out.push((start + 1, end + 1));
        i = end + 1;
    }
    out
}

fn lines(dir: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The summary of a run, from cargo-mutants' `caught.txt`, `missed.txt`,
/// `unviable.txt` and `timeout.txt`.
fn summary(dir: &Path, took: f64) -> Result<()> {
    let caught = lines(dir, "caught.txt");
    let missed = lines(dir, "missed.txt");
    let unviable = lines(dir, "unviable.txt");
    let timeout = lines(dir, "timeout.txt");
    let (ofed4, missed): (Vec<String>, Vec<String>) = missed.into_iter().partition(|m| ofed4_only(m));
    let tested = caught.len() + missed.len() + ofed4.len() + unviable.len() + timeout.len();
    let viable = caught.len() + missed.len() + timeout.len();
    println!("mutation testing of src/mlx5dv ({}):", dir.display());
    println!(
        "  {tested} mutants tested: {} caught, {} missed, {} unviable, {} timed out, {} only MLNX_OFED 4.x builds",
        caught.len(),
        missed.len(),
        unviable.len(),
        timeout.len(),
        ofed4.len()
    );
    for m in &missed {
        println!("  missed: {m}");
    }
    for m in &ofed4 {
        println!("  not built here (only MLNX_OFED 4.x builds this item; outside the score): {m}");
    }
    for m in &timeout {
        println!("  timed out: {m}");
    }
    if viable > 0 {
        println!(
            "  score: {} of {viable} viable mutants caught ({:.1}%; a timeout counts as not caught)",
            caught.len(),
            100.0 * caught.len() as f64 / viable as f64
        );
    }
    if tested > 0 {
        println!("  took {took:.0} s, {:.0} s per mutant (the baseline build and run included)", took / tested as f64);
    }
    Ok(())
}

/// The host test binaries that reach mlx5dv: `tests/mlx5_*.rs`.
fn host_tests(dir: &Path) -> Vec<String> {
    let mut t: Vec<String> = std::fs::read_dir(dir.join("tests"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter_map(|n| {
                    n.strip_prefix("mlx5_").and_then(|s| s.strip_suffix(".rs")).map(|s| format!("mlx5_{s}"))
                })
                .collect()
        })
        .unwrap_or_default();
    t.sort();
    t
}

/// The file of src/mlx5dv (its folders included) that differs between the
/// scratch copy `here` and the tree, as its module's name (`clock` for
/// src/mlx5dv/completion/clock.rs, `dc` for src/mlx5dv/dc/mod.rs).
fn mutated_stem(here: &Path, tree: &Path) -> Option<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let base = here.join("src/mlx5dv");
    let mut files = Vec::new();
    walk(&base, &mut files);
    files.into_iter().find_map(|p| {
        let rel = p.strip_prefix(&base).ok()?;
        let ours = std::fs::read(&p).ok()?;
        let theirs = std::fs::read(tree.join("src/mlx5dv").join(rel)).ok()?;
        if ours == theirs {
            return None;
        }
        let stem = p.file_stem()?.to_str()?;
        let name = if stem == "mod" { p.parent()?.file_name()?.to_str()? } else { stem };
        Some(name.to_string())
    })
}

/// The xtask binary as cargo-mutants' `cargo` (`RRDDMMA_MUTANTS_REAL_CARGO`
/// set): `test --no-run` builds, `test` runs the mutant's tests, the rest
/// is the real cargo's.
pub fn proxy(real: &str) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let here = std::env::current_dir().unwrap_or_default();
    let cargo = |a: &[&str]| {
        let mut c = Command::new(real);
        c.args(a).env("CARGO", real).env_remove(REAL_CARGO).current_dir(&here);
        c
    };
    let ok = |c: &mut Command| {
        eprintln!("$ {}", show(c));
        c.status().is_ok_and(|s| s.success())
    };
    if args.first().map(String::as_str) != Some("test") {
        let mut c = cargo(&[]);
        c.args(&args);
        return match c.status() {
            Ok(s) if s.success() => ExitCode::SUCCESS,
            Ok(s) => ExitCode::from(s.code().unwrap_or(1).clamp(1, 255) as u8),
            Err(_) => ExitCode::FAILURE,
        };
    }
    let device = std::env::var(DEVICE).is_ok_and(|v| v == "1");
    let tests = host_tests(&here);
    let mut host: Vec<&str> = vec!["test", "-p", "rrddmma", "--lib"];
    for t in &tests {
        host.push("--test");
        host.push(t);
    }
    if args.iter().any(|a| a == "--no-run") {
        host.push("--no-run");
        let mut good = ok(&mut cargo(&host));
        if device {
            good = good && ok(&mut cargo(&["test", "--no-run", "--test", "device", "--features", "tokio"]));
        }
        return if good { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let good = ok(&mut cargo(&host))
        && ok(cargo(&["test", "-p", "rrddmma", "--test", "mlx5_provider", "--", "--ignored"])
            .env("RRDDMMA_HARNESS_QUICK", "1"))
        && (!device || device_step(&cargo, &here));
    if good {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The device tests whose names contain the mutated file's stem, in the VM
/// (no boot when none does).
fn device_step(cargo: &dyn Fn(&[&str]) -> Command, here: &Path) -> bool {
    let tree = std::env::var_os(ROOT).map(PathBuf::from).unwrap_or_else(root);
    let Some(stem) = mutated_stem(here, &tree) else {
        eprintln!("device step: no mutated file under src/mlx5dv (the baseline): no device tests");
        return true;
    };
    let out = cargo(&["test", "--no-run", "--test", "device", "--features", "tokio", "--message-format=json"]).output();
    let Some(bin) = out.ok().and_then(|o| crate::capture::executable(&String::from_utf8_lossy(&o.stdout), "device"))
    else {
        eprintln!("device step: building the device tests failed");
        return false;
    };
    let listed = Command::new(&bin).args(["--list", "--ignored"]).output();
    let names = listed.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    // The mlx5dv module's own device tests (every entry point off mlx5), and
    // those named after the file.
    let hit = |l: &str| l.ends_with(": test") && (l.starts_with("mlx5dv::") || l.contains(stem.as_str()));
    let matching = names.lines().filter(|l| hit(l)).count();
    if matching == 0 {
        eprintln!("device step: no device test is in mlx5dv:: or contains {stem:?}: no VM boot");
        return true;
    }
    eprintln!("device step: {matching} device tests (mlx5dv:: or containing {stem:?})");
    let bin = bin.display().to_string();
    let args = [bin, "--ignored".into(), "--test-threads=1".into(), "mlx5dv::".into(), stem];
    crate::device::vm(&args).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(a: &[&str]) -> Vec<String> {
        a.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_parse() {
        let o =
            Opts::parse(&s(&["--sample", "40", "--seed", "7", "--in-diff", "main", "--timeout", "300", "--device"]))
                .unwrap();
        assert_eq!(
            o,
            Opts {
                help: false,
                sample: Some(40),
                seed: 7,
                in_diff: Some("main".into()),
                timeout: Some(300),
                device: true,
                list: false
            }
        );
        assert_eq!(Opts::parse(&[]).unwrap().seed, 1);
        assert!(Opts::parse(&s(&["--sample", "0"])).is_err());
        assert!(Opts::parse(&s(&["--sample"])).unwrap_err().to_string().contains("--sample needs a value"));
        assert!(Opts::parse(&s(&["--seed", "x"])).is_err());
    }

    #[test]
    fn selection_names_mlx5dv_without_exp4() {
        let a = selection_args(Some(Path::new("/t/d.patch")), Some((3, 80)));
        let want = [
            "--file",
            "src/mlx5dv/**/*.rs",
            "--exclude",
            "src/mlx5dv/exp4.rs",
            "--in-diff",
            "/t/d.patch",
            "--shard",
            "3/80",
            "--sharding",
            "round-robin",
        ];
        assert_eq!(a, s(&want));
        assert_eq!(selection_args(None, None), s(&want[..4]));
    }

    #[test]
    fn ofed4_items_span_their_braces() {
        let src = "fn a() {}\n#[cfg(rrddmma_mlnx_ofed4)]\n#[inline]\nfn b() {\n    x({ 1 }); // }\n}\nfn c() {}\n\
                   #[cfg(rrddmma_mlnx_ofed4)]\nuse x::y;\n#[cfg(not(rrddmma_mlnx_ofed4))]\nfn d() {}\n";
        assert_eq!(ofed4_items(src), vec![(2, 6), (8, 9)]);
    }

    #[test]
    fn sample_is_a_seeded_round_robin_shard() {
        assert_eq!(sample_shard(1218, 15, 46), (46, 81));
        assert_eq!(sample_shard(1218, 15, 100), (19, 81));
        assert_eq!(sample_shard(1218, 100, 1), (1, 12));
        assert_eq!(sample_shard(10, 100, 7), (0, 1));
        assert_eq!(sample_shard(1218, 15, 46), sample_shard(1218, 15, 46));
    }
}
