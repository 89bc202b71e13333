//! The `dlopen` linkage (feature `dlopen`): the binary records no rdma-core
//! library as needed, and a library or symbol that cannot be loaded is a
//! typed error naming it, never a crash.
//!
//! Each case runs in a child process of this binary, because a library is
//! opened once per process: the parent sets the case's environment (a name
//! override such as `RRDDMMA_LIBIBVERBS`) and checks the child's verdict.
//! `RRDDMMA_DLOPEN_CASE=no_rdma_core` is run alone by `cargo xtask test`
//! in a mount namespace where rdma-core's libraries are hidden.

use std::process::Command;

use rrddmma::bindings::dl::{LoadError, LIBIBVERBS, LIBMLX5};
use rrddmma::prim::{cm::EventChannel, device_names, Context, Error};

/// The error of a case, which must be the dlopen linkage's.
fn load_error(case: &str, r: Result<impl std::fmt::Debug, Error>) -> (String, LoadError) {
    match r {
        Err(e @ Error::Load { .. }) => {
            let msg = e.to_string();
            let Error::Load { error, .. } = e else { unreachable!() };
            (msg, *error)
        }
        other => panic!("{case}: expected Error::Load, got {other:?}"),
    }
}

fn must(case: &str, ok: bool, what: &str, msg: &str) {
    assert!(ok, "{case}: {what}; the message was: {msg}");
}

/// One case, in this process.
fn run_case(case: &str) {
    match case {
        // libibverbs under a name no file has: listing and opening devices
        // both report the library, dlerror's words and the variable to set.
        "absent_libibverbs" => {
            let (msg, e) = load_error(case, device_names());
            must(case, e.library == "libibverbs-absent.so.1" && !e.opened && e.symbol.is_none(), "library", &msg);
            must(case, msg.contains("cannot load libibverbs-absent.so.1"), "message names the library", &msg);
            must(case, msg.contains("cannot open shared object file"), "message has dlerror's words", &msg);
            must(case, msg.contains("RRDDMMA_LIBIBVERBS"), "message names the variable", &msg);
            let (msg2, _) = load_error(case, Context::open("rxe0"));
            assert_eq!(msg, msg2, "{case}: Context::open reports the same");
            assert!(
                !Error::Load { op: "x", error: Box::new(e) }.is_unsupported(),
                "{case}: a missing library is not 'unsupported'"
            );
        }
        // A library that opens but lacks the functions (libc has no verbs).
        "symbol_missing" => {
            let (msg, e) = load_error(case, device_names());
            must(case, e.opened && e.symbol == Some("ibv_get_device_list"), "first missing symbol", &msg);
            must(
                case,
                msg.starts_with("ibv_get_device_list is not in libc.so.6 (an rdma-core older"),
                "names both",
                &msg,
            );
        }
        // librdmacm absent: the CM's first call names it.
        "absent_librdmacm" => {
            let (msg, e) = load_error(case, EventChannel::create());
            must(
                case,
                e.library == "librdmacm-absent.so.1" && e.symbol == Some("rdma_create_event_channel"),
                "which",
                &msg,
            );
            must(case, msg.contains("rdma_create_event_channel: cannot load librdmacm-absent.so.1"), "message", &msg);
        }
        // A CM function absent from the library that opened: that verb's
        // typed "unsupported", naming symbol and library.
        "cm_symbol_missing" => {
            let r = EventChannel::create();
            let unsupported = r.as_ref().err().is_some_and(Error::is_unsupported);
            let (msg, e) = load_error(case, r);
            must(case, unsupported, "is_unsupported()", &msg);
            must(case, e.opened && e.library == "libc.so.6", "library", &msg);
            assert_eq!(
                msg,
                "rdma_create_event_channel is not in libc.so.6 (an rdma-core older than the function, \
                 or not rdma-core's); install a newer rdma-core or set RRDDMMA_LIBRDMACM to one"
            );
        }
        // libmlx5 absent (a machine without the mlx5 provider): the
        // library, and an `mlx5dv_*` function checked in it, name the
        // library and the variable; libibverbs, a library of its own,
        // still loads.
        "absent_libmlx5" => {
            let e = LIBMLX5.check().expect_err("libmlx5-absent.so.1 does not exist");
            let msg = e.to_string();
            must(case, e.library == "libmlx5-absent.so.1" && !e.opened && e.symbol.is_none(), "library", &msg);
            must(case, msg.contains("cannot load libmlx5-absent.so.1: "), "message names the library", &msg);
            must(case, msg.contains("cannot open shared object file"), "message has dlerror's words", &msg);
            must(case, msg.contains("RRDDMMA_LIBMLX5"), "message names the variable", &msg);
            let by_symbol = LIBMLX5.check_symbol("mlx5dv_create_qp").expect_err("no library, no symbol");
            assert_eq!(by_symbol, e, "{case}: a symbol of a library that did not open reports the library");
            let err = Error::Load { op: "mlx5dv_create_qp", error: Box::new(e) };
            must(case, !err.is_unsupported(), "a missing library is not 'unsupported'", &err.to_string());
            device_names().expect("libibverbs loads without libmlx5");
        }
        // A library that opens but lacks the mlx5dv functions.
        "mlx5_symbol_missing" => {
            LIBMLX5.check().expect("libc.so.6 opens");
            let e = LIBMLX5.check_symbol("mlx5dv_create_qp").expect_err("libc has no mlx5dv_create_qp");
            let msg = e.to_string();
            must(case, e.is_missing_symbol() && e.library == "libc.so.6", "which", &msg);
            assert_eq!(
                msg,
                "mlx5dv_create_qp is not in libc.so.6 (an rdma-core older than the function, or not rdma-core's); \
                 install a newer rdma-core or set RRDDMMA_LIBMLX5 to one"
            );
            let err = Error::Load { op: "mlx5dv_create_qp", error: Box::new(e) };
            must(case, err.is_unsupported(), "a missing function is 'unsupported'", &err.to_string());
        }
        // With nothing overridden on a machine with rdma-core's libraries.
        "system" => {
            assert_eq!(rrddmma::build_info().linkage, "dlopen");
            let names = device_names().expect("device_names with the system's libibverbs");
            println!("{case}: libibverbs loaded; devices {names:?}");
            // librdmacm loads and runs: a channel, or (with no RDMA device
            // node, as on a host without one) the kernel's own refusal.
            match EventChannel::create() {
                Ok(_) => println!("{case}: librdmacm loaded; event channel open"),
                Err(e @ Error::Verbs { .. }) => println!("{case}: librdmacm loaded; the kernel says {e}"),
                Err(e) => panic!("{case}: librdmacm did not load: {e}"),
            }
        }
        // D5: whether this process runs in secure execution, and which
        // file it asks `dlopen` for libibverbs.
        "d5_secure_execution" => {
            println!("d5: secure={} libibverbs={}", rrddmma::bindings::dl::secure_execution(), LIBIBVERBS.name());
        }
        // In a namespace without rdma-core's libraries (run by `cargo xtask test`).
        "no_rdma_core" => {
            let (msg, e) = load_error(case, device_names());
            must(case, e.library == "libibverbs.so.1" && !e.opened, "library", &msg);
            println!("{case}: {msg}");
        }
        other => panic!("unknown case {other}"),
    }
    println!("{case}: ok");
}

/// Runs `case` in a child with `env` set; true when it passed.
fn child(case: &str, env: &[(&str, &str)]) -> bool {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.env("RRDDMMA_DLOPEN_CASE", case);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawning the case");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let ok = out.status.success();
    println!("test dlopen::{case} ... {}", if ok { "ok" } else { "FAILED" });
    ok
}

/// D5: a set-user-ID copy of this binary, owned by `nobody` and run by
/// root (so its effective user differs from its real one: `AT_SECURE`),
/// with `RRDDMMA_LIBIBVERBS` naming another library, must ask `dlopen` for
/// the soname; the same copy without the bit asks for the override. Needs
/// root to give the copy another owner; otherwise says so and passes.
fn d5_setuid_copy_ignores_overrides() -> bool {
    let name = "d5_setuid_copy_ignores_overrides";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("test dlopen::{name} ... ok (not run: making a set-user-ID copy of another owner needs root)");
        return true;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("rrddmma-d5-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.join("dlopen-setuid");
    std::fs::copy(std::env::current_exe().unwrap(), &copy).unwrap();
    std::os::unix::fs::chown(&copy, Some(65534), Some(65534)).unwrap();
    let run = |mode: u32| {
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = Command::new(&copy)
            .env("RRDDMMA_DLOPEN_CASE", "d5_secure_execution")
            .env("RRDDMMA_LIBIBVERBS", "libibverbs-absent.so.1")
            .output()
            .expect("running the copy");
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        let said =
            String::from_utf8_lossy(&out.stdout).lines().find(|l| l.starts_with("d5: ")).unwrap_or("").to_string();
        println!("{name}: mode {mode:o}: {said:?}");
        said
    };
    let (setuid, plain) = (run(0o4755), run(0o755));
    let _ = std::fs::remove_dir_all(&dir);
    let ok = setuid == "d5: secure=true libibverbs=libibverbs.so.1"
        && plain == "d5: secure=false libibverbs=libibverbs-absent.so.1";
    if !ok && setuid.contains("secure=false") {
        println!("{name}: the set-user-ID bit had no effect: is {} mounted nosuid?", dir.display());
    }
    println!("test dlopen::{name} ... {}", if ok { "ok" } else { "FAILED" });
    ok
}

/// `readelf -d`: the binary needs none of rdma-core's libraries.
fn needs_no_rdma_core() -> bool {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new("readelf").arg("-d").arg(&exe).output().expect("readelf (binutils) runs");
    let dynamic = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
    let bad: Vec<&&str> =
        needed.iter().filter(|l| ["libibverbs", "librdmacm", "libmlx5"].iter().any(|n| l.contains(n))).collect();
    let ok = out.status.success() && !needed.is_empty() && bad.is_empty();
    println!("NEEDED of this binary: {needed:?}");
    println!("test dlopen::needs_no_rdma_core ... {}", if ok { "ok" } else { "FAILED" });
    ok
}

fn main() {
    if let Ok(case) = std::env::var("RRDDMMA_DLOPEN_CASE") {
        run_case(&case);
        return;
    }
    let results = [
        needs_no_rdma_core(),
        child("absent_libibverbs", &[("RRDDMMA_LIBIBVERBS", "libibverbs-absent.so.1")]),
        child("symbol_missing", &[("RRDDMMA_LIBIBVERBS", "libc.so.6")]),
        child("absent_librdmacm", &[("RRDDMMA_LIBRDMACM", "librdmacm-absent.so.1")]),
        child("cm_symbol_missing", &[("RRDDMMA_LIBRDMACM", "libc.so.6")]),
        child("absent_libmlx5", &[("RRDDMMA_LIBMLX5", "libmlx5-absent.so.1")]),
        child("mlx5_symbol_missing", &[("RRDDMMA_LIBMLX5", "libc.so.6")]),
        child("system", &[]),
        d5_setuid_copy_ignores_overrides(),
    ];
    let failed = results.iter().filter(|r| !**r).count();
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        results.len() - failed
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
