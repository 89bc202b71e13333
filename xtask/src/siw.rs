//! soft-iWARP (siw) in the VM. Debian's kernels are built without it
//! (`CONFIG_RDMA_SIW` is not set), so the module is built out of tree from
//! the same kernel's source: Debian's `linux-source-<series>` (downloaded and
//! unpacked by [`crate::kernel_src`], shared with the kernel mlx5e oracle)
//! against `linux-headers-<abi>`.
//! The module is cached under `target/xtask/siw/<abi>/`; `source.txt` beside
//! it names the package and version it came from.
//!
//! In the VM, `siw0` sits on its own veth pair ([`SIW_ADDR`] on `v2`): iWARP
//! connects through the CM only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::device::Check;
use crate::{kernels, root, run, Result};

/// The siw device the checks create.
pub const SIW_DEVICE: &str = "siw0";
/// The address on `v2`, where siw0 sits (servers listen here).
pub const SIW_ADDR: &str = "10.78.0.1";
/// The address on `v3`.
pub const SIW_PEER_ADDR: &str = "10.78.0.2";

/// The device tests run on siw0: libtest filters (any matches). `iwarp::`
/// holds RC through the CM (WRITE, SEND, READ) on both layers; `aio_cm::`
/// the async layer through the CM (the device binary is built with
/// `tokio`).
pub const DEVICE_SUBSET: &str = "iwarp:: aio_cm:: features::odp_dm_and_xrc cm::event_channel_dropped \
     cm::regression_cm_id_accessors_from_threads cm::unresolvable_address hw_verbs::";

/// A built module and the source it came from.
pub struct Module {
    /// The `siw.ko` file.
    pub ko: PathBuf,
    /// "linux-source-6.1 6.1.192-2 (drivers/infiniband/sw/siw), headers linux-headers-6.1.0-56-amd64".
    pub source: String,
}

/// `6.1.0-56-amd64` → `6.1`.
fn series(release: &str) -> String {
    release.split(['.', '-']).take(2).collect::<Vec<_>>().join(".")
}

/// Builds (once) siw for the kernel image `image` (Debian stable's, whose
/// headers and source are in the system's apt sources).
pub fn module(image: &Path) -> Result<Module> {
    let abi = kernels::release_of(image);
    let series = series(&abi);
    let dir = root().join("target/xtask/siw").join(&abi);
    let src = dir.join(format!("linux-source-{series}/drivers/infiniband/sw/siw"));
    let ko = src.join("siw.ko");
    let note = dir.join("source.txt");
    if ko.exists() && note.exists() {
        return Ok(Module { ko, source: fs::read_to_string(note)?.trim().to_string() });
    }
    fs::create_dir_all(&dir)?;
    let headers = format!("linux-headers-{abi}");
    if !Path::new("/usr/src").join(&headers).is_dir() {
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", &headers])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    // The source package is shared with the kernel mlx5e oracle: one
    // download, one unpacking; the module is built in a copy of siw's
    // directory kept per kernel ABI.
    let linux = crate::kernel_src::unpacked(&series)?;
    if src.exists() {
        fs::remove_dir_all(&src)?;
    }
    fs::create_dir_all(&src)?;
    run(Command::new("cp").arg("-rT").arg(linux.tree.join("drivers/infiniband/sw/siw")).arg(&src))?;
    run(Command::new("make")
        .arg("-C")
        .arg(Path::new("/usr/src").join(&headers))
        .arg(format!("M={}", src.display()))
        .args(["CONFIG_RDMA_SIW=m", "modules"]))?;
    let source = format!("{} {} (drivers/infiniband/sw/siw), built against {headers}", linux.package, linux.version);
    fs::write(&note, &source)?;
    Ok(Module { ko, source })
}

/// Shell lines that load `ko`, put siw0 on its own veth pair and lift the
/// locked-memory limit: siw counts the pages it pins against
/// `RLIMIT_MEMLOCK` even for root (rxe does not), and the async layer's
/// pools are megabytes.
fn setup(ko: &Path) -> String {
    format!(
        "(lsmod | grep -q '^siw ' || (modprobe -a $(modinfo -F depends '{ko}' | tr , ' ') && insmod '{ko}')) && \
         (ip link show v2 >/dev/null 2>&1 || (ip link add v2 type veth peer name v3 && \
          ip addr add {SIW_ADDR}/24 dev v2 && ip addr add {SIW_PEER_ADDR}/24 dev v3 && \
          ip link set v2 up && ip link set v3 up)) && \
         ([ -e /sys/class/infiniband/{SIW_DEVICE} ] || rdma link add {SIW_DEVICE} type siw netdev v2) && \
         ulimit -l unlimited",
        ko = ko.display()
    )
}

/// The environment that points the device tests at siw0.
pub fn env() -> String {
    format!(
        "RRDDMMA_TEST_DEVICE={SIW_DEVICE} RRDDMMA_CM_DEVICE={SIW_DEVICE} RRDDMMA_CM_ADDR={SIW_ADDR} \
         RRDDMMA_CM_PEER_ADDR={SIW_PEER_ADDR} RRDDMMA_EXPECT_IWARP=1"
    )
}

/// The siw checks for the stable kernel's device session: the module loads
/// (the output names its source), rping runs over it, and the device tests
/// `device_tests` in `subset` run on siw0.
pub fn checks(image: &Path, device_tests: &Path, subset: &str) -> Result<Vec<Check>> {
    let m = module(image)?;
    println!("siw: module from {}", m.source);
    let setup = setup(&m.ko);
    let source = m.source.clone();
    let mut checks = vec![Check::verdict(
        &format!("siw: {SIW_DEVICE} from {}", m.source),
        format!("{setup} && echo 'siw from {source}' && ibv_devinfo -d {SIW_DEVICE}"),
        |d| d.code == Some(0) && d.output.contains("transport:") && d.output.contains("iWARP"),
    )];
    checks.push(Check::verdict(
        "siw: rping (librdmacm's C tool) over iWARP",
        format!(
            "{setup} && (timeout 60 rping -s -a {SIW_ADDR} -C 3 -v & sleep 3; \
             timeout 60 rping -c -a {SIW_ADDR} -C 3 -v; c=$?; wait; exit $c)"
        ),
        |d| d.code == Some(0) && d.output.matches("ping data").count() >= 3,
    ));
    // The repository's rping example against C rping, both roles, on siw0.
    checks.extend(crate::cm::rping_interop("siw: ", SIW_ADDR, 7311, &setup, crate::cm::build_examples()));
    checks.push(Check::libtest(
        "device tests on siw (iWARP)",
        format!("{setup} && {} '{}' --ignored --test-threads=1 {subset}", env(), device_tests.display()),
    ));
    Ok(checks)
}

/// `cargo xtask siw [-- CMD...]`: builds the module (or reuses it), boots
/// the stable kernel's VM, puts siw0 up and runs CMD there (default:
/// `ibv_devinfo -d siw0`) with the device tests' environment pointing at
/// siw0, e.g. a device test binary with `--ignored --test-threads=1 iwarp::`.
pub fn task(args: &[String]) -> Result<()> {
    if args == ["--checks"] {
        return only_checks();
    }
    let cmd = args.strip_prefix(&["--".to_string()]).unwrap_or(args);
    let m = module(&kernels::Kernel::Stable.image()?)?;
    println!("siw: module from {}", m.source);
    let what = if cmd.is_empty() { format!("ibv_devinfo -d {SIW_DEVICE}") } else { crate::device::shell_words(cmd) };
    let line = format!("{} && export {} && {what}", setup(&m.ko), env());
    crate::device::vm(&["bash".to_string(), "-c".to_string(), line])
}

/// `cargo xtask siw --checks`: the siw checks of `cargo xtask test` alone
/// (the device tests built with `tokio`), in one VM under the stable kernel.
fn only_checks() -> Result<()> {
    crate::deps::ensure()?;
    let image = kernels::Kernel::Stable.image()?;
    let tests = crate::capture::device_binary("tokio", &[], None)?;
    let checks = checks(&image, &tests, DEVICE_SUBSET)?;
    let mut tally = crate::tally::Tally::default();
    crate::device::run_checks(&crate::device::Place::Vm { kernel: image }, &checks, &mut tally)?;
    tally.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_source_series_comes_from_the_release() {
        assert_eq!(super::series("6.1.0-56-amd64"), "6.1");
        assert_eq!(super::series("7.3.4+deb13-amd64"), "7.3");
    }
}
