//! Where device tests run: the host's own RDMA devices, the host's SoftRoCE
//! (`modprobe rdma_rxe`), or a SoftRoCE VM booted with virtme-ng.
//!
//! Work for the device is a list of [`Step`]s run by one shell script, so that
//! a VM boots once per task. Each step's output and exit code land in files
//! under `target/xtask/steps/`, read back by the caller.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::kernels::{self, Kernel};
use crate::{deps, root, run, Result};

/// The device name the harness creates for SoftRoCE.
pub const RXE_DEVICE: &str = "rxe0";

/// The SoftRoCE device the CM tests use, on one end of a veth pair
/// (rdmacm resolves no route over `lo`).
pub const CM_DEVICE: &str = "rxe_v0";
const CM_NETDEV: &str = "v0";
const CM_PEER_NETDEV: &str = "v1";
/// The address on `v0` (exported as `RRDDMMA_CM_ADDR`): servers listen here.
pub const CM_ADDR: &str = "10.77.0.1";
/// The address on `v1` (exported as `RRDDMMA_CM_PEER_ADDR`).
pub const CM_PEER_ADDR: &str = "10.77.0.2";

/// One command to run where the device is.
#[derive(Debug)]
pub struct Step {
    /// Short name, for logs.
    pub name: String,
    /// A shell command line.
    pub command: String,
}

/// How a check's outcome is added to the tally.
pub type Judge = Box<dyn Fn(&Done, &mut crate::tally::Tally)>;

/// A step together with how its outcome is judged: device work contributed by
/// one area of the project (the device tests, the examples, rrddmma-perf, the
/// cluster tests) to the single device session of `cargo xtask test`.
pub struct Check {
    /// What to run.
    pub step: Step,
    /// Adds the step's outcome to the tally.
    pub judge: Judge,
}

impl Check {
    /// A check whose step runs a libtest binary: its tests are counted.
    pub fn libtest(name: &str, command: String) -> Check {
        Check {
            step: Step { name: name.into(), command },
            judge: Box::new(|d, t| t.add_run(&d.name, d.code == Some(0), &d.output)),
        }
    }

    /// A check with its own verdict on the step's exit code and output.
    pub fn verdict(name: &str, command: String, ok: impl Fn(&Done) -> bool + 'static) -> Check {
        Check {
            step: Step { name: name.into(), command },
            judge: Box::new(move |d, t| t.check_output(&d.name, ok(d), &d.output)),
        }
    }
}

/// Runs every check's step in one device session and judges each.
pub fn run_checks(place: &Place, checks: &[Check], tally: &mut crate::tally::Tally) -> Result<()> {
    let steps: Vec<Step> =
        checks.iter().map(|c| Step { name: c.step.name.clone(), command: c.step.command.clone() }).collect();
    let done = run_limited(place, &steps, Some(CHECK_LIMIT_S))?;
    for (d, c) in done.iter().zip(checks) {
        let secs = d.secs.map_or("-".into(), |s| s.to_string());
        println!("---- {} (exit {:?}, {secs} s) ----\n{}", d.name, d.code, d.output);
        (c.judge)(d, tally);
    }
    Ok(())
}

/// `checks` alone in one device session (the VM when the host has none),
/// `what` naming them; an error when any failed.
pub fn run_alone(what: &str, checks: &[Check]) -> Result<()> {
    let place = locate(None)?;
    eprintln!("{what} on {}", place.describe());
    let mut tally = crate::tally::Tally::default();
    run_checks(&place, checks, &mut tally)?;
    tally.finish()
}

/// Seconds a check's step may run before it is stopped and counted as
/// failed: the longest (the device tests of one build) takes under three
/// minutes in the TCG VM on a loaded machine, so a step still running after this is a hang, and
/// the session goes on with the next step instead of running into CI's limit.
const CHECK_LIMIT_S: u32 = 600;

/// What `timeout --verbose` writes to a step's log when it stops the step.
const STOPPED: &str = "timeout: sending signal TERM to command";

/// A finished step.
#[derive(Debug)]
pub struct Done {
    /// The step's name.
    pub name: String,
    /// Exit code (`None` when the step never ran, e.g. the VM died, or was
    /// stopped at its time limit).
    pub code: Option<i32>,
    /// Standard output and error, interleaved.
    pub output: String,
    /// Seconds the step ran (`None` when it never ran).
    pub secs: Option<u64>,
}

/// Where the device is.
#[derive(Debug)]
pub enum Place {
    /// Devices already exist on the host (hardware, or SoftRoCE set up earlier).
    Host {
        /// The device tests use.
        device: String,
    },
    /// The host kernel has rdma_rxe: `rxe0` is created on the host's loopback.
    HostRxe,
    /// A SoftRoCE VM is needed.
    Vm {
        /// The kernel image to boot.
        kernel: PathBuf,
    },
}

impl Place {
    /// The device name tests should use.
    pub fn device(&self) -> &str {
        match self {
            Place::Host { device } => device,
            Place::HostRxe | Place::Vm { .. } => RXE_DEVICE,
        }
    }

    /// A sentence for logs.
    pub fn describe(&self) -> String {
        match self {
            Place::Host { device } => format!("device {device} on the host"),
            Place::HostRxe => format!("device {RXE_DEVICE} (SoftRoCE on the host's loopback)"),
            Place::Vm { kernel } => format!(
                "device {RXE_DEVICE} (SoftRoCE in a virtme-ng VM, kernel {} from {})",
                kernels::release_of(kernel),
                kernel.display()
            ),
        }
    }
}

fn host_devices() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir("/sys/class/infiniband")
        .map(|rd| rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Finds (or makes) the place for device tests; `wanted` picks a host device.
pub fn locate(wanted: Option<&str>) -> Result<Place> {
    let present = host_devices();
    if let Some(w) = wanted {
        if present.iter().any(|p| p == w) {
            return Ok(Place::Host { device: w.to_string() });
        }
        if w != RXE_DEVICE {
            return Err(format!("device {w} is not on this host (present: {present:?})").into());
        }
    } else if let Some(first) = present.first() {
        return Ok(Place::Host { device: first.clone() });
    }
    let modprobe = Command::new("modprobe").arg("rdma_rxe").output();
    if modprobe.is_ok_and(|o| o.status.success()) {
        return Ok(Place::HostRxe);
    }
    Ok(Place::Vm { kernel: Kernel::Stable.image()? })
}

fn kvm_usable() -> bool {
    let flags = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Path::new("/dev/kvm").exists()
        && flags.lines().any(|l| l.starts_with("flags") && (l.contains(" vmx") || l.contains(" svm")))
}

/// Per-process, so that two tasks running at once do not share step files.
fn steps_dir() -> PathBuf {
    root().join(format!("target/xtask/steps-{}", std::process::id()))
}

/// The shell script: set up SoftRoCE if asked, then run every step (each
/// stopped after `limit` seconds, when given).
fn script(place: &Place, steps: &[Step], dir: &Path, limit: Option<u32>) -> String {
    let mut s = String::from("#!/bin/bash\nset -u\n");
    // The session's output names the kernel it runs under.
    s.push_str("echo \"device session: kernel $(uname -r)\" >&2\n");
    s.push_str(&format!("cd '{}'\n", root().display()));
    if matches!(place, Place::HostRxe | Place::Vm { .. }) {
        s.push_str(&format!(
            "ip link set lo up\nmodprobe rdma_rxe || echo 'modprobe rdma_rxe failed' >&2\n\
             [ -e /sys/class/infiniband/{RXE_DEVICE} ] || rdma link add {RXE_DEVICE} type rxe netdev lo\n"
        ));
        // Tests may create SoftRoCE devices of their own here (root, rdma_rxe loaded).
        s.push_str("export RRDDMMA_TEST_SOFTROCE_ADMIN=1\n");
        // rdmacm cannot resolve a route on rxe bound to `lo`: a veth pair with
        // addresses and a second rxe device on one end serve the CM tests.
        // The VM has no udev to create /dev/infiniband/rdma_cm on first use:
        // rdma_ucm is loaded here.
        s.push_str(&format!(
            "if ! ip link show {CM_NETDEV} >/dev/null 2>&1; then\n\
             \x20 ip link add {CM_NETDEV} type veth peer name {CM_PEER_NETDEV}\n\
             \x20 ip addr add {CM_ADDR}/24 dev {CM_NETDEV}; ip addr add {CM_PEER_ADDR}/24 dev {CM_PEER_NETDEV}\n\
             \x20 ip link set {CM_NETDEV} up; ip link set {CM_PEER_NETDEV} up\n\
             fi\n\
             [ -e /sys/class/infiniband/{CM_DEVICE} ] || rdma link add {CM_DEVICE} type rxe netdev {CM_NETDEV}\n\
             modprobe rdma_ucm || echo 'modprobe rdma_ucm failed' >&2\n\
             export RRDDMMA_CM_ADDR={CM_ADDR} RRDDMMA_CM_PEER_ADDR={CM_PEER_ADDR} RRDDMMA_CM_DEVICE={CM_DEVICE}\n"
        ));
    }
    s.push_str(&format!("export RRDDMMA_TEST_DEVICE={}\n", place.device()));
    // SoftRoCE's ODP depends on the VM's kernel: the ODP rows must take the
    // path the kernel has (tests/device/newer_kernel.rs).
    if let Place::Vm { kernel } = place {
        let odp = kernels::rxe_has_odp(&kernels::release_of(kernel));
        s.push_str(&format!("export RRDDMMA_EXPECT_ODP={}\n", u8::from(odp)));
    }
    for (i, step) in steps.iter().enumerate() {
        let run = match limit {
            // `timeout` runs the step in a process group of its own and stops
            // the whole group; `--verbose` leaves the mark that tells a stop
            // from a command that itself exits 124.
            Some(l) => format!("timeout --verbose -k 10 {l} bash -c {}", shell_quote(&step.command)),
            None => format!("( {} )", step.command),
        };
        s.push_str(&format!(
            "t0=$SECONDS; {run} > '{d}/{i}.log' 2>&1; echo $? > '{d}/{i}.rc'; echo $((SECONDS - t0)) > '{d}/{i}.secs'\n",
            d = dir.display()
        ));
    }
    s
}

/// Runs the steps where the device is; each step's outcome is returned.
pub fn run_steps(place: &Place, steps: &[Step]) -> Result<Vec<Done>> {
    run_limited(place, steps, None)
}

/// [`run_steps`], each step stopped after `limit` seconds when given: a
/// stopped step has no exit code and its output says why.
fn run_limited(place: &Place, steps: &[Step], limit: Option<u32>) -> Result<Vec<Done>> {
    let dir = steps_dir();
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let path = dir.join("script.sh");
    fs::write(&path, script(place, steps, &dir, limit))?;
    match place {
        Place::Host { .. } | Place::HostRxe => run(Command::new("bash").arg(&path))?,
        Place::Vm { kernel } => {
            deps::ensure()?;
            let mut cmd = Command::new("vng");
            cmd.arg("--run").arg(kernel);
            if !kvm_usable() {
                cmd.arg("--disable-kvm");
            }
            cmd.args(["--memory", "2G", "--cpus", "2", "--rwdir"])
                .arg(root())
                .args(["--rwdir", "/tmp", "--exec"])
                .arg(format!("bash {}", path.display()));
            // virtme-ng reopens /dev/stdout, which truncates a redirected log:
            // keep its console to ourselves and show it only when it fails.
            eprintln!("$ {}", crate::show(&cmd));
            let mut boots = 0;
            loop {
                boots += 1;
                let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("cannot run vng: {e}"))?;
                if out.status.success() {
                    break;
                }
                eprint!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                // A VM that failed before the script began its first step
                // never reached the code under test: booted once more.
                if boots == 1 && !steps.is_empty() && !dir.join("0.log").exists() {
                    eprintln!("the SoftRoCE VM failed ({}) before its first step; booting it once more", out.status);
                    continue;
                }
                return Err(format!("the SoftRoCE VM failed ({})", out.status).into());
            }
        }
    }
    let done = outcomes(steps, &dir, limit);
    let _ = fs::remove_dir_all(&dir);
    Ok(done)
}

/// The outcomes the script left in `dir`, one per step.
fn outcomes(steps: &[Step], dir: &Path, limit: Option<u32>) -> Vec<Done> {
    let read = |i: usize, what: &str| fs::read_to_string(dir.join(format!("{i}.{what}"))).ok();
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let output = read(i, "log").unwrap_or_default();
            let code = read(i, "rc").and_then(|c| c.trim().parse().ok());
            let secs = read(i, "secs").and_then(|c| c.trim().parse().ok());
            Done { secs, ..judged(step, code, output, limit) }
        })
        .collect()
}

/// A step's outcome from its exit code and log: one its time limit stopped
/// has no exit code, and its output ends saying so.
fn judged(step: &Step, code: Option<i32>, mut output: String, limit: Option<u32>) -> Done {
    match limit {
        Some(l) if code == Some(124) && output.contains(STOPPED) => {
            output.push_str(&format!(
                "\nstep \"{}\" stopped: still running after {l} s (a hang: the last test started above is where)\n",
                step.name
            ));
            Done { name: step.name.clone(), code: None, output, secs: None }
        }
        _ => Done { name: step.name.clone(), code, output, secs: None },
    }
}

/// `cargo xtask vm [--kernel stable|newest] -- CMD...`: runs CMD's words as
/// given (each one quoted for the VM's shell), so `bash -c 'echo "a b" && exit 3'`
/// runs as written; the first line of output names the kernel (`uname -r`).
pub fn vm(args: &[String]) -> Result<()> {
    let (kernel, cmd) = match args {
        [flag, name, rest @ ..] if flag == "--kernel" => (Kernel::parse(name)?, rest),
        _ => (Kernel::Stable, args),
    };
    let cmd = cmd.strip_prefix(&["--".to_string()]).unwrap_or(cmd);
    if cmd.is_empty() {
        return Err("usage: cargo xtask vm [--kernel stable|newest] -- CMD...".into());
    }
    let place = Place::Vm { kernel: kernel.image()? };
    eprintln!("vm: {}", place.describe());
    let command = format!("echo \"kernel $(uname -r)\"; {}", shell_words(cmd));
    let done = run_steps(&place, &[Step { name: "vm".into(), command }])?;
    print!("{}", done[0].output);
    match done[0].code {
        Some(0) => Ok(()),
        code => Err(format!("command exited with {code:?}").into()),
    }
}

/// One word for a POSIX shell: left bare when it holds only safe characters,
/// else in single quotes (a `'` inside becomes `'\''`).
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A command line whose words a shell splits back into exactly `words`.
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    words.iter().map(|w| shell_quote(w.as_ref())).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What bash makes of `line`: its words, one per line of output.
    fn bash_words(line: &str) -> Vec<String> {
        let out = Command::new("bash").arg("-c").arg(format!("printf '%s\\n' {line}")).output().unwrap();
        String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect()
    }

    #[test]
    fn quoted_words_survive_the_shell() {
        let words = ["bash", "-c", "echo \"a b\" && exit 3", "it's", "$HOME", "a\\b", "*", "--x=1", "new\tline;"];
        assert_eq!(bash_words(&shell_words(&words)), words);
        assert_eq!(shell_words(&["target/debug/deps/device-1", "--ignored"]), "target/debug/deps/device-1 --ignored");
        assert_eq!(shell_quote(""), "''");
    }

    /// Runs `steps` on the host as a device session does, with `limit`.
    fn run_here(steps: &[Step], limit: u32) -> Vec<Done> {
        let dir = root().join(format!("target/xtask/limit-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let place = Place::Host { device: "none".into() };
        let out = Command::new("bash").arg("-c").arg(script(&place, steps, &dir, Some(limit))).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let done = outcomes(steps, &dir, Some(limit));
        fs::remove_dir_all(&dir).unwrap();
        done
    }

    #[test]
    fn a_step_past_its_limit_is_stopped_and_fails_naming_it() {
        let step = |name: &str, command: &str| Step { name: name.into(), command: command.into() };
        let steps = [
            step("hangs", "echo started; sleep 30; echo never"),
            step("exits 124 itself", "echo 'it'\\''s done'; exit 124"),
            step("passes", "[ \"$RRDDMMA_TEST_DEVICE\" = none ] && echo ok"),
        ];
        let start = std::time::Instant::now();
        let done = run_here(&steps, 1);
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "the hanging step was not stopped");
        assert_eq!(done[0].code, None, "{:?}", done[0]);
        assert!(done[0].output.starts_with("started\n") && !done[0].output.contains("never"), "{:?}", done[0]);
        assert!(done[0].output.contains("step \"hangs\" stopped: still running after 1 s"), "{:?}", done[0]);
        assert_eq!((done[1].code, done[1].output.as_str()), (Some(124), "it's done\n"));
        assert_eq!((done[2].code, done[2].output.as_str()), (Some(0), "ok\n"));
    }

    #[test]
    fn a_quoted_command_runs_as_written() {
        let out = Command::new("bash").arg("-c").arg(shell_words(&["bash", "-c", "echo \"a b\" && exit 3"])).output();
        let out = out.unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b\n");
    }
}
