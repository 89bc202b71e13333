//! `cargo xtask bench-peers`: rrddmma beside the other Rust RDMA crates
//! (sideway, ibverbs, async-rdma) and C verbs calls, on one device, in one
//! device session. The programs live in `peers/`, a workspace of their own
//! (`peers/sideway`, `peers/ibverbs` and `peers/async-rdma` are separate
//! workspaces again: each brings its own `-sys` crate for libibverbs).
//!
//! For each crate and workload: userspace instructions per operation
//! (callgrind inside `peers_measured` minus `peers_settle`, the difference of
//! two run lengths; the async rows count the whole process, every thread,
//! and take the same difference), heap allocations per operation (each Rust program's
//! counting allocator) and wall time per operation (median and range over
//! the rounds, the crates' order rotated each round).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::callgrind::collected;
use crate::device::{self, shell_quote, Step};
use crate::{root, run, Result};

/// Run lengths whose difference gives the per-operation count (set-ups use
/// [`SETUP_N`]).
const OPS_N: [u64; 2] = [100, 400];
const SETUP_N: [u64; 2] = [1, 3];
/// Operations per timed run (set-ups: [`TIMED_SETUPS`]).
const TIMED_OPS: u64 = 2000;
const TIMED_SETUPS: u64 = 5;

/// The workloads, as the programs name them, and the table's wording.
const WORKLOADS: [(&str, &str); 6] = [
    ("setup", "set-up: context to connected RC pair + registered buffer (per set-up)"),
    ("write1", "RDMA WRITE 64 B, 1 per post"),
    ("write32", "RDMA WRITE 64 B, 32 per post (per post)"),
    ("read", "RDMA READ 64 B"),
    ("send", "SEND 64 B + its RECV"),
    ("faa", "fetch-and-add 8 B"),
];

/// One program of the comparison: its column name and how to run it.
struct Peer {
    name: &'static str,
    /// Executable and the arguments before DEVICE.
    exe: PathBuf,
    pre: &'static [&'static str],
    /// Workloads it runs (`setup` for rrddmma-wrap only: its operations are
    /// prim's calls).
    workloads: &'static [&'static str],
    /// Workloads it can express (the others only print why not).
    counted: &'static [&'static str],
}

const ALL: &[&str] = &["setup", "write1", "write32", "read", "send", "faa"];

/// The async comparison's workloads (`OP-SIZE-INFLIGHT`, `frontpage`), run
/// by rrddmma's synchronous event path, `wrap::aio` with and without the
/// driver's spin, and async-rdma when it builds.
const AIO: [(&str, &str); 9] = [
    ("write-64-1", "RDMA WRITE 64 B, 1 in flight"),
    ("write-64-32", "RDMA WRITE 64 B, 32 in flight (per op)"),
    ("write-65536-1", "RDMA WRITE 64 KiB, 1 in flight"),
    ("write-65536-32", "RDMA WRITE 64 KiB, 32 in flight (per op)"),
    ("read-64-1", "RDMA READ 64 B, 1 in flight"),
    ("read-64-32", "RDMA READ 64 B, 32 in flight (per op)"),
    ("read-65536-1", "RDMA READ 64 KiB, 1 in flight"),
    ("read-65536-32", "RDMA READ 64 KiB, 32 in flight (per op)"),
    ("frontpage", "async-rdma's README exchange: request 8 B, write, read back, give back (per exchange)"),
];
const AIO_ALL: &[&str] = &[
    "write-64-1",
    "write-64-32",
    "write-65536-1",
    "write-65536-32",
    "read-64-1",
    "read-64-32",
    "read-65536-1",
    "read-65536-32",
    "frontpage",
];
/// Run lengths of an async row's counted runs (`frontpage`:
/// [`FRONTPAGE_N`]): callgrind counts the whole process, every thread
/// (async-rdma's runtime and agent work on threads of their own, which
/// `--toggle-collect` would not follow), and the difference over the
/// difference of operations is the cost of one. Operations of a timed run.
const AIO_N: [u64; 2] = [320, 1280];
const FRONTPAGE_N: [u64; 2] = [64, 256];
const AIO_TIMED: u64 = 640;
const FRONTPAGE_TIMED: u64 = 160;

/// Options of `cargo xtask bench-peers`.
struct Opts {
    device: Option<String>,
    reps: usize,
    smoke: bool,
    /// `--times`: the timed rounds only, no callgrind counts (the counts
    /// repeat to the instruction; the times need the rounds).
    times: bool,
    /// Only these workloads (`aio`: every async one); empty: all.
    rows: Vec<String>,
    /// `--userspace v59`: every program runs on the pinned rdma-core v59
    /// libraries ([`crate::userspace`]) instead of the system's.
    v59: bool,
}

impl Opts {
    fn wants(&self, w: &str) -> bool {
        self.rows.is_empty() || self.rows.iter().any(|r| r == w || (r == "aio" && AIO_ALL.contains(&w)))
    }
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts { device: None, reps: 5, smoke: false, times: false, rows: Vec::new(), v59: false };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--device" => o.device = Some(it.next().ok_or("--device needs a NAME")?.clone()),
            "--reps" => {
                let v = it.next().ok_or("--reps needs a number")?;
                o.reps = v.parse().map_err(|_| format!("--reps {v:?}: give a whole number of rounds, e.g. 5"))?;
                if o.reps == 0 {
                    return Err("--reps 0: at least one round".into());
                }
            }
            "--smoke" => o.smoke = true,
            "--times" => o.times = true,
            "--userspace" => match it.next().map(String::as_str) {
                Some("v59") => o.v59 = true,
                other => return Err(format!("--userspace {other:?}: the one choice is v59").into()),
            },
            "--rows" => {
                let v = it.next().ok_or("--rows needs a list, e.g. write32,aio")?;
                o.rows = v.split(',').map(str::to_string).collect();
                if let Some(r) =
                    o.rows.iter().find(|r| *r != "aio" && !ALL.contains(&r.as_str()) && !AIO_ALL.contains(&r.as_str()))
                {
                    return Err(format!(
                        "--rows: no workload {r:?}; workloads: {} aio {}",
                        ALL.join(" "),
                        AIO_ALL.join(" ")
                    )
                    .into());
                }
            }
            other => return Err(format!("bench-peers: unknown argument {other:?}").into()),
        }
    }
    Ok(o)
}

/// `cargo build --release --locked` of one workspace under `peers/` into
/// `peers/target`; the error text when it fails. `--locked`: each
/// workspace's committed Cargo.lock is used as it is (peers/async-rdma's
/// pins a yanked version that cargo could not resolve afresh).
fn build(dir: &Path) -> std::result::Result<(), String> {
    eprintln!("$ (cd {}) cargo build --release --locked", dir.display());
    let out = Command::new(env!("CARGO"))
        .args(["build", "--release", "--locked", "--quiet"])
        .env("CARGO_TARGET_DIR", root().join("peers/target"))
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first: Vec<&str> = err.lines().filter(|l| l.starts_with("error") || l.contains("yanked")).take(3).collect();
    Err(if first.is_empty() { err.lines().last().unwrap_or("failed").to_string() } else { first.join("; ") })
}

/// Fields of a `RESULT ...` line.
fn result(out: &str) -> Option<BTreeMap<String, String>> {
    let line = out.lines().find(|l| l.starts_with("RESULT "))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
    )
}

/// The reason line of a program that cannot express a workload.
fn unsupported(out: &str) -> Option<String> {
    let line = out.lines().find(|l| l.starts_with("UNSUPPORTED "))?;
    Some(line.split("reason=").nth(1).unwrap_or("unsupported").to_string())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Non-blank, non-comment lines of a program.
fn code_lines(path: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("/*") && !l.starts_with('*'))
            .count(),
    )
}

/// The rdma-core release of the system's libibverbs (`pkg-config` says
/// `1.14.44.0` for 44), which the VM shares with the host.
fn system_rdma_core_major() -> Option<u32> {
    let out = Command::new("pkg-config").args(["--modversion", "libibverbs"]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().split('.').nth(2)?.parse().ok()
}

/// Why sideway may fail on this device without that saying anything of
/// this run: its extended-CQ poller ends a polling pass a second time after
/// `ibv_next_poll` returned `ENOENT`, and rxe before rdma-core 55 has ended
/// it already (docs/benchmarks.md, "sideway on this rxe"): its ping-pong
/// then fails its payload check and its SEND + RECV fills a queue. `None`
/// where sideway must pass (another device, rdma-core 55 or later, v59).
fn sideway_known_failure(device: &str, v59: bool, major: Option<u32>) -> Option<&'static str> {
    (device.starts_with("rxe") && !v59 && major.is_some_and(|m| m < 55)).then_some(
        "known: sideway ends a polling pass twice, which rxe before rdma-core 55 has already ended \
         (docs/benchmarks.md, \"sideway on this rxe\")",
    )
}

/// `cargo xtask bench-peers [--device NAME] [--reps N] [--smoke | --times]
/// [--rows LIST] [--userspace v59]`.
pub fn run_peers(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    let started = std::time::Instant::now();
    let peers = root().join("peers");
    let bin = peers.join("target/release");
    build(&peers).map_err(|e| format!("peers/ does not build: {e}"))?;
    let sideway = build(&peers.join("sideway"));
    let ibverbs = build(&peers.join("ibverbs"));
    let async_rdma = build(&peers.join("async-rdma"));
    std::fs::create_dir_all(root().join("target/xtask"))?;
    let c = root().join("target/xtask/peers_c");
    run(Command::new("cc").args(["-O2", "-Wall", "-g", "-o"]).arg(&c).arg(peers.join("c/peers_c.c")).arg("-libverbs"))?;
    let pp_c = root().join("target/xtask/pingpong_c");
    run(Command::new("cc").args(["-O2", "-Wall", "-o"]).arg(&pp_c).arg(peers.join("pingpong/c.c")).arg("-libverbs"))?;
    let mut list = vec![
        Peer { name: "C verbs", exe: c, pre: &[], workloads: ALL, counted: ALL },
        Peer { name: "rrddmma prim", exe: bin.join("rrddmma"), pre: &["prim"], workloads: ALL, counted: ALL },
        Peer {
            name: "rrddmma wrap",
            exe: bin.join("rrddmma"),
            pre: &["wrap"],
            workloads: &["setup"],
            counted: &["setup"],
        },
    ];
    for (name, pre) in [
        ("rrddmma sync event", &["event"] as &'static [&'static str]),
        ("rrddmma aio", &["aio"]),
        ("rrddmma aio, spin_polls(0)", &["aio-nospin"]),
        ("rrddmma aio local", &["aio-local"]),
    ] {
        // The event path and the local endpoint cannot run `frontpage`
        // (their timed runs say why).
        let counted = if name.contains("event") || name.contains("local") { &AIO_ALL[..8] } else { AIO_ALL };
        list.push(Peer { name, exe: bin.join("rrddmma"), pre, workloads: AIO_ALL, counted });
    }
    if sideway.is_ok() {
        list.push(Peer { name: "sideway", exe: bin.join("peers-sideway"), pre: &[], workloads: ALL, counted: ALL });
    }
    if ibverbs.is_ok() {
        list.push(Peer {
            name: "ibverbs",
            exe: bin.join("peers-ibverbs"),
            pre: &[],
            workloads: ALL,
            counted: &["setup", "send"],
        });
    }
    if async_rdma.is_ok() {
        list.push(Peer {
            name: "async-rdma",
            exe: bin.join("peers-async-rdma"),
            pre: &[],
            workloads: AIO_ALL,
            counted: AIO_ALL,
        });
    }
    let place = device::locate(o.device.as_deref())?;
    eprintln!("bench-peers on {}", place.describe());
    let line = |p: &Peer, w: &str, n: u64, settle: bool| {
        let mut s = shell_quote(&p.exe.to_string_lossy());
        for a in p.pre {
            s.push(' ');
            s.push_str(a);
        }
        s.push_str(&format!(" \"$RRDDMMA_TEST_DEVICE\" {w} {n}{}", if settle { " settle" } else { "" }));
        s
    };
    // (kind, peer index, workload, n): what each step measured.
    let mut meta = Vec::new();
    let mut steps = Vec::new();
    // The rxe GID the C, sideway and ibverbs programs use: RoCE v2 for
    // 127.0.0.1 when present, else index 1.
    let gid = "export PEERS_GID_INDEX=$(for f in /sys/class/infiniband/$RRDDMMA_TEST_DEVICE/ports/1/gid_attrs/types/*; do \
               i=${f##*/}; t=$(cat $f 2>/dev/null); g=$(cat /sys/class/infiniband/$RRDDMMA_TEST_DEVICE/ports/1/gids/$i); \
               case \"$t:$g\" in 'RoCE v2:0000:0000:0000:0000:0000:ffff:'*) echo $i; break;; esac; done); \
               export PEERS_GID_INDEX=${PEERS_GID_INDEX:-1}; ";
    // Every program loads libibverbs by its soname (rrddmma, C and ibverbs
    // link it, sideway dlopens it): LD_LIBRARY_PATH points them all at v59.
    let userspace = if o.v59 {
        let v59 = crate::userspace::build(&crate::rdma_core_src::tarball()?)?;
        format!("export LD_LIBRARY_PATH={}; ", shell_quote(&v59.lib.to_string_lossy()))
    } else {
        String::new()
    };
    let gid = format!("{userspace}{gid}");
    if !o.smoke && !o.times {
        for (pi, p) in list.iter().enumerate() {
            for w in p.counted.iter().filter(|w| o.wants(w)) {
                let aio = AIO_ALL.contains(w);
                let ns: &[u64] = match *w {
                    "setup" => &SETUP_N,
                    "frontpage" => &FRONTPAGE_N,
                    _ if aio => &AIO_N,
                    _ => &OPS_N,
                };
                // The async rows: the whole process, no toggles.
                let toggles = if aio { "" } else { "--toggle-collect=peers_measured --toggle-collect=peers_settle " };
                for &n in ns {
                    steps.push(Step {
                        name: format!("callgrind {} {w} {n}", p.name),
                        command: format!(
                            "{gid}valgrind --tool=callgrind --vgdb=no --callgrind-out-file=/dev/null {toggles}{}",
                            line(p, w, n, !aio)
                        ),
                    });
                    meta.push(("instr", pi, *w, n));
                }
            }
        }
    }
    let (reps, ops, setups) = if o.smoke { (1, 50, 1) } else { (o.reps, TIMED_OPS, TIMED_SETUPS) };
    for round in 0..reps {
        for (w, _) in WORKLOADS.iter().chain(&AIO).filter(|(w, _)| o.wants(w)) {
            let w = *w;
            let k = list.len();
            for j in 0..k {
                let pi = (j + round) % k;
                let p = &list[pi];
                if !p.workloads.contains(&w) {
                    continue;
                }
                let n = match w {
                    "setup" => setups,
                    _ if o.smoke && AIO_ALL.contains(&w) => 32,
                    "frontpage" => FRONTPAGE_TIMED,
                    _ if AIO_ALL.contains(&w) => AIO_TIMED,
                    _ => ops,
                };
                steps.push(Step {
                    name: format!("time {} {w} round {round}", p.name),
                    command: format!("{gid}{}", line(p, w, n, false)),
                });
                meta.push(("time", pi, w, n));
            }
        }
    }
    // Each ping-pong program runs once: (file, executable).
    let mut pingpongs = vec![("c.c", pp_c.clone()), ("rrddmma.rs", bin.join("pingpong-rrddmma"))];
    if sideway.is_ok() {
        pingpongs.push(("sideway.rs", bin.join("pingpong-sideway")));
    }
    if ibverbs.is_ok() {
        pingpongs.push(("ibverbs.rs", bin.join("pingpong-ibverbs")));
    }
    let measured = steps.len();
    if !o.rows.is_empty() {
        pingpongs.clear();
    }
    for (file, exe) in &pingpongs {
        steps.push(Step {
            name: format!("pingpong {file}"),
            command: format!("{gid}{} \"$RRDDMMA_TEST_DEVICE\" $PEERS_GID_INDEX", shell_quote(&exe.to_string_lossy())),
        });
    }
    let done = device::run_steps(&place, &steps)?;
    let (done, pp_done) = done.split_at(measured);
    // (peer, workload) -> measurements.
    let mut instr: BTreeMap<(usize, &str), Vec<(u64, u64)>> = BTreeMap::new();
    let mut time: BTreeMap<(usize, &str), Vec<f64>> = BTreeMap::new();
    let mut allocs: BTreeMap<(usize, &str), String> = BTreeMap::new();
    let mut empty: BTreeMap<(usize, &str), String> = BTreeMap::new();
    let mut why: BTreeMap<(usize, &str), String> = BTreeMap::new();
    let mut failed = Vec::new();
    // Failures of sideway's that `sideway_known_failure` explains here.
    let known = sideway_known_failure(place.device(), o.v59, system_rdma_core_major());
    let mut known_failed = Vec::new();
    let explained = |peer: &str| known.filter(|_| peer == "sideway");
    let line = |d: &device::Done| format!("{} (exit {:?}): {}", d.name, d.code, d.output.lines().last().unwrap_or(""));
    for (d, (kind, pi, w, n)) in done.iter().zip(&meta) {
        if let Some(r) = unsupported(&d.output) {
            why.insert((*pi, *w), r);
            continue;
        }
        let Some(res) = result(&d.output).filter(|_| d.code == Some(0)) else {
            match explained(list[*pi].name) {
                Some(_) => known_failed.push(line(d)),
                None => failed.push(line(d)),
            }
            continue;
        };
        if *kind == "instr" {
            match collected(&d.output) {
                Some(c) => instr.entry((*pi, *w)).or_default().push((*n, c)),
                None => failed.push(format!("{}: no callgrind count", d.name)),
            }
            empty.insert((*pi, *w), res.get("empty_polls_per_op").cloned().unwrap_or_default());
        } else {
            if let Some(t) = res.get("ns_per_op").and_then(|t| t.parse().ok()) {
                time.entry((*pi, *w)).or_default().push(t);
            }
            allocs.insert((*pi, *w), res.get("allocs_per_op").cloned().unwrap_or_default());
        }
    }
    let mut md = String::new();
    md.push_str(&format!(
        "device {}; libibverbs {}; {} timed round(s) of {ops} operations ({setups} set-ups), order rotated each round; {}\n\n",
        place.device(),
        if o.v59 { "rdma-core v59 (built in place, LD_LIBRARY_PATH)" } else { "the system's" },
        reps,
        if o.smoke {
            "smoke mode: no instruction counts".to_string()
        } else if o.times {
            "--times: no instruction counts".to_string()
        } else {
            format!(
                "instructions: callgrind, runs of {OPS_N:?} operations ({SETUP_N:?} set-ups), difference / {}; \
                 async rows: the whole process, runs of {AIO_N:?} operations ({FRONTPAGE_N:?} exchanges), \
                 difference over the difference; async timed runs: {AIO_TIMED} operations \
                 ({FRONTPAGE_TIMED} exchanges)",
                OPS_N[1] - OPS_N[0]
            )
        }
    ));
    for (title, rows) in
        [("Operations and set-up", &WORKLOADS[..]), ("Async layer beside the synchronous event path", &AIO[..])]
    {
        if !rows.iter().any(|(w, _)| o.wants(w)) {
            continue;
        }
        md.push_str(&format!("\n{title}:\n\n"));
        md.push_str("| workload | crate | instructions / op | allocations / op | time / op µs, median (min–max) | empty polls / op (callgrind run) |\n");
        md.push_str("|---|---|---|---|---|---|\n");
        for (w, what) in rows.iter().filter(|(w, _)| o.wants(w)) {
            let w = *w;
            for (pi, p) in list.iter().enumerate() {
                if !p.workloads.contains(&w) {
                    continue;
                }
                if let Some(r) = why.get(&(pi, w)) {
                    md.push_str(&format!("| {what} | {} | — | — | cannot express: {r} | — |\n", p.name));
                    continue;
                }
                let ins = match instr.get(&(pi, w)).map(Vec::as_slice) {
                    Some([(n0, c0), (n1, c1)]) => format!("{:.0}", (*c1 as f64 - *c0 as f64) / (n1 - n0) as f64),
                    Some([(n, c)]) => format!("{:.0}", *c as f64 / *n as f64),
                    _ if o.smoke || o.times => "—".to_string(),
                    _ => "failed".to_string(),
                };
                let t = match time.get_mut(&(pi, w)) {
                    Some(v) if !v.is_empty() => {
                        let (lo, hi) =
                            (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max));
                        format!("{:.2} ({:.2}–{:.2})", median(v) / 1e3, lo / 1e3, hi / 1e3)
                    }
                    _ => "failed".to_string(),
                };
                let al = allocs.get(&(pi, w)).cloned().unwrap_or_else(|| "failed".into());
                let em = empty.get(&(pi, w)).cloned().unwrap_or_else(|| "—".into());
                md.push_str(&format!("| {what} | {} | {ins} | {al} | {t} | {em} |\n", p.name));
            }
        }
    }
    if let Err(e) = &sideway {
        md.push_str(&format!("\nsideway: not measured, peers/sideway does not build here: {e}\n"));
    }
    if let Err(e) = &ibverbs {
        md.push_str(&format!("\nibverbs: not measured, peers/ibverbs does not build here: {e}\n"));
    }
    if let Err(e) = &async_rdma {
        md.push_str(&format!("\nasync-rdma: not measured, peers/async-rdma does not build here: `{e}`\n"));
    }
    if !pingpongs.is_empty() {
        md.push_str("\nRC ping-pong program length (non-blank, non-comment lines, `peers/pingpong/`):\n\n");
        md.push_str("| program | lines | run on the device |\n|---|---|---|\n");
        for ((file, _), d) in pingpongs.iter().zip(pp_done) {
            let lines = code_lines(&peers.join("pingpong").join(file)).map_or("?".to_string(), |n| n.to_string());
            let peer = if *file == "sideway.rs" { "sideway" } else { file };
            let ran = if d.code == Some(0) && d.output.contains("pingpong ok") {
                "ok (10 rounds verified)".to_string()
            } else {
                match explained(peer) {
                    Some(k) => {
                        known_failed.push(line(d));
                        format!("failed (exit {:?}; {k})", d.code)
                    }
                    None => {
                        failed.push(line(d));
                        format!("failed (exit {:?})", d.code)
                    }
                }
            };
            md.push_str(&format!("| pingpong/{file} | {lines} | {ran} |\n"));
        }
    }
    if let (Some(k), false) = (known, known_failed.is_empty()) {
        md.push_str(&format!("\nsideway's failed steps, not counted ({k}):\n- {}\n", known_failed.join("\n- ")));
    }
    if !failed.is_empty() {
        md.push_str(&format!("\nfailed steps:\n- {}\n", failed.join("\n- ")));
    }
    md.push_str(&format!("\nwall time of this run: {:.0} s\n", started.elapsed().as_secs_f64()));
    print!("{md}");
    let out = root().join("target/xtask/bench-peers.md");
    std::fs::write(&out, &md)?;
    eprintln!("written to {}", out.display());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} step(s) failed (listed above)", failed.len()).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sideway_failures_are_explained_only_on_rxe_before_rdma_core_55() {
        assert!(sideway_known_failure("rxe0", false, Some(44)).is_some_and(|k| k.contains("rdma-core 55")));
        assert_eq!(sideway_known_failure("rxe0", false, Some(55)), None, "fixed rxe");
        assert_eq!(sideway_known_failure("rxe0", true, Some(44)), None, "--userspace v59");
        assert_eq!(sideway_known_failure("mlx5_0", false, Some(44)), None, "hardware");
        assert_eq!(sideway_known_failure("rxe0", false, None), None, "release unknown: a failure counts");
        assert!(system_rdma_core_major().is_some_and(|m| m >= 17), "pkg-config names the system's release");
    }

    #[test]
    fn result_lines_and_reasons_are_read() {
        let out = "noise\nRESULT crate=C workload=write1 iters=100 ns_per_op=12.5 allocs_per_op=n/a \
                   empty_polls_per_op=0.000\n==1== Collected : 45156\n";
        let r = result(out).unwrap();
        assert_eq!(r["crate"], "C");
        assert_eq!(r["ns_per_op"], "12.5");
        assert_eq!(collected(out), Some(45156));
        assert_eq!(result("no result here"), None);
        let u = "UNSUPPORTED crate=ibverbs workload=read reason=posts only SEND and RECV\n";
        assert_eq!(unsupported(u).as_deref(), Some("posts only SEND and RECV"));
    }

    #[test]
    fn options_and_median() {
        let o = parse(&["--device".into(), "mlx5_0".into(), "--reps".into(), "7".into(), "--smoke".into()]).unwrap();
        assert_eq!((o.device.as_deref(), o.reps, o.smoke), (Some("mlx5_0"), 7, true));
        let o = parse(&["--times".into(), "--rows".into(), "aio".into()]).unwrap();
        assert!(o.times && !o.smoke && o.wants("write-64-32") && !o.wants("setup"));
        assert!(parse(&["--reps".into(), "0".into()]).is_err());
        assert!(parse(&["--bogus".into()]).is_err());
        assert!(parse(&["--userspace".into(), "v59".into()]).unwrap().v59);
        assert!(!parse(&[]).unwrap().v59);
        let e = parse(&["--userspace".into(), "v44".into()]).err().unwrap().to_string();
        assert!(e.contains("v59"), "{e}");
        let o = parse(&["--rows".into(), "aio".into()]).unwrap();
        assert!(o.wants("frontpage") && o.wants("read-64-32") && !o.wants("write32"));
        assert!(parse(&["--rows".into(), "frontpage,send".into()]).unwrap().wants("frontpage"));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
