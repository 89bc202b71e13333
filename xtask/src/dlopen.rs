//! The `dlopen` linkage in `cargo xtask test`: the library and its tests
//! built in a mount namespace where rdma-core's headers, libraries and
//! pkg-config files are hidden; the binaries checked with `readelf -d`; the
//! typed load errors (`tests/dlopen.rs`) on the host and in that namespace;
//! and the device suite, in the device session, on this linkage (built with
//! `tokio`, so the async layer's `aio_cm::` tests run on it too).

use std::path::PathBuf;
use std::process::Command;

use crate::capture::{capture, executable};
use crate::device::Check;
use crate::tally::Tally;
use crate::{root, Result};

/// The target directory of the namespace build: its own, so that every
/// crate of the build is compiled where rdma-core is hidden.
const TARGET: &str = "target/dlopen";

/// Debian's rdma-core packages whose headers, libraries and `.pc` files the
/// namespace hides.
const PACKAGES: &str = "libibverbs-dev librdmacm-dev libibverbs1 librdmacm1 ibverbs-providers";

/// Shell lines that hide rdma-core inside a private mount namespace: empty
/// directories over the header folders, `/dev/null` over every library and
/// pkg-config file the packages install; then they show what is left.
fn hide_rdma_core() -> String {
    format!(
        "set -e\n\
         mount --make-rprivate /\n\
         for d in /usr/include/infiniband /usr/include/rdma; do if [ -d $d ]; then mount -t tmpfs none $d; fi; done\n\
         for f in $(dpkg -L {PACKAGES} 2>/dev/null | grep -E '\\.(so(\\.[0-9.]*)?|a|pc)$'); do\n\
           if [ -f \"$f\" ]; then mount --bind /dev/null \"$f\"; fi\n\
         done\n\
         echo \"hidden: headers $(find /usr/include/infiniband /usr/include/rdma -type f | wc -l) files left; \\\n\
           pkg-config libibverbs: $(pkg-config --exists libibverbs 2>/dev/null && echo found || echo absent); \\\n\
           libibverbs.so.1 readable ELF: $(head -c4 /usr/lib/x86_64-linux-gnu/libibverbs.so.1 | grep -q ELF && echo yes || echo no)\"\n"
    )
}

/// Runs `script` after [`hide_rdma_core`] in a new mount namespace.
fn in_namespace(script: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"]).arg(format!("{}{script}", hide_rdma_core()));
    c
}

/// What the namespace build produced.
pub struct Built {
    /// `tests/device` on the dlopen linkage.
    pub device: PathBuf,
}

/// Builds in the namespace and runs the host checks; the device binary for
/// [`checks`], when the build succeeded.
pub fn host(tally: &mut Tally) -> Option<Built> {
    let cargo = env!("CARGO");
    let dir = root().join(TARGET);
    let dir = dir.display();
    // rrddmma itself (library, build script, tests) is compiled anew each time.
    let build = format!(
        "export CARGO_TARGET_DIR={dir}\n\
         {cargo} clean --quiet -p rrddmma\n\
         {cargo} test --no-run --quiet -p rrddmma --features dlopen,tokio --test dlopen --test device --message-format=json\n"
    );
    let mut cmd = in_namespace(&build);
    eprintln!("$ {}", crate::show(&cmd));
    let (ok, out) = match cmd.current_dir(root()).output() {
        Ok(o) => {
            eprint!("{}", String::from_utf8_lossy(&o.stderr));
            (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned())
        }
        Err(e) => (false, format!("cannot run unshare: {e}")),
    };
    let hidden = out.lines().find(|l| l.starts_with("hidden:")).unwrap_or("hidden: (no report)").to_string();
    let really_hidden = hidden.contains("headers 0 files left")
        && hidden.contains("pkg-config libibverbs: absent")
        && hidden.contains("readable ELF: no");
    println!("dlopen build namespace: {hidden}");
    let (dl, device) = (executable(&out, "dlopen"), executable(&out, "device"));
    tally.check(
        "dlopen linkage builds with rdma-core hidden (no headers, libraries or .pc files)",
        ok && really_hidden && dl.is_some() && device.is_some(),
    );
    let (Some(dl), Some(device)) = (dl, device) else {
        return None;
    };
    // The host cases: readelf shows no rdma-core library needed, and each
    // missing library or symbol is its typed error.
    let (ok, out) = capture(&mut Command::new(&dl));
    tally.add_run("dlopen linkage: no NEEDED rdma-core library, typed load errors", ok, &out);
    // Run where the libraries are hidden: libibverbs.so.1 itself is missing.
    let (ok, out) = capture(&mut in_namespace(&format!("RRDDMMA_DLOPEN_CASE=no_rdma_core '{}'\n", dl.display())));
    tally.check(
        "dlopen linkage, run with rdma-core hidden: Error::Load names libibverbs.so.1",
        ok && out.contains("cannot load libibverbs.so.1"),
    );
    Some(Built { device })
}

/// The device suite on the dlopen linkage (`build_info()` asserted; every
/// device test, `aio_cm::` included), for the device session.
pub fn checks(built: &Built, skip: &str) -> Vec<Check> {
    vec![Check::libtest(
        "device tests (dlopen linkage)",
        format!("RRDDMMA_EXPECT_LINKAGE=dlopen '{}' --ignored --test-threads=1 {skip}", built.device.display()),
    )]
}

/// `cargo xtask dlopen`: the checks above alone, the device suite in its own
/// device session.
pub fn run() -> Result<()> {
    let mut tally = Tally::default();
    if let Some(built) = host(&mut tally) {
        let place = crate::device::locate(None)?;
        println!("device tests on {}", place.describe());
        crate::device::run_checks(&place, &checks(&built, "--skip cm::thousand"), &mut tally)?;
    }
    tally.finish()
}
