//! Linkage probe: decides how rrddmma reaches libibverbs and libmlx5, then
//! tells cargo what to link. The decision itself is `build/probe.rs`.

#[path = "build/probe.rs"]
mod probe;
#[path = "build/source.rs"]
mod source;

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use probe::{Linkage, ProbeInputs, INSTALL_HINT};

/// Environment variables that change the outcome.
const ENV_VARS: &[&str] = &[
    "RRDDMMA_LINKAGE",
    "RRDDMMA_STATIC_PROVIDERS",
    "RRDDMMA_STATIC_LIBDIR",
    "RRDDMMA_OFED_LIBDIR",
    "RRDDMMA_RDMA_CORE_SRC",
    "PKG_CONFIG_PATH",
    "PKG_CONFIG_LIBDIR",
    "PKG_CONFIG_SYSROOT_DIR",
    "PATH",
    "DOCS_RS",
];

fn main() {
    for v in ENV_VARS {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/probe.rs");
    println!("cargo:rerun-if-changed=build/source.rs");
    for cfg in probe::ALL_CFGS {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
    }

    // docs.rs builds documentation without libibverbs: the bindings are
    // committed, so rustdoc needs nothing linked.
    if env::var_os("DOCS_RS").is_some() {
        let docs =
            Outcome { linkage: Linkage::PkgConfig, rdma_core_version: "none (docs.rs)".into(), providers: vec![] };
        if let Err(msg) = emit(&docs) {
            eprintln!("\nerror: rrddmma's build script: {msg}\n");
            std::process::exit(1);
        }
        return;
    }
    if let Err(msg) = run() {
        eprintln!("\nerror: rrddmma cannot link to libibverbs: {msg}\n");
        std::process::exit(1);
    }
}

/// What the build settled on, handed to the library through `rustc-env`.
struct Outcome {
    linkage: Linkage,
    rdma_core_version: String,
    providers: Vec<String>,
}

fn run() -> Result<(), String> {
    let linkage_override = env::var("RRDDMMA_LINKAGE").ok();
    let linkage_override = linkage_override.as_deref().map(str::trim).filter(|s| !s.is_empty());
    // Probe only what the decision can use: an override short-circuits the rest.
    let dlopen = env::var_os("CARGO_FEATURE_DLOPEN").is_some();
    let wants_ofed = !dlopen && matches!(linkage_override, None | Some("mlnx4" | "mlnx5"));
    let ofed_info = if wants_ofed { ofed_info() } else { None };
    let wants_pkg = !dlopen && matches!(linkage_override, None | Some("pkg-config"));
    let ibverbs_pc = if wants_pkg && ofed_info.is_none() {
        pkg_config::Config::new().cargo_metadata(false).env_metadata(false).probe("libibverbs").ok()
    } else {
        None
    };
    let inputs = ProbeInputs {
        linkage_override,
        ofed_info: ofed_info.as_deref(),
        pkg_config_found: ibverbs_pc.is_some(),
        vendored: env::var_os("CARGO_FEATURE_VENDORED").is_some(),
        dlopen,
    };
    let linkage = probe::decide(&inputs).map_err(|e| e.to_string())?;

    let providers = if linkage.is_static() {
        probe::parse_providers(env::var("RRDDMMA_STATIC_PROVIDERS").ok().as_deref())?
    } else {
        Vec::new()
    };

    let rdma_core_version = match &linkage {
        Linkage::PkgConfig => link_pkg_config()?,
        Linkage::Mlnx5 { version } => {
            link_ofed()?;
            format!("MLNX_OFED {version}")
        }
        Linkage::Mlnx4 { version } => {
            // Legacy libibverbs and its separate libmlx5; the crate binds
            // their experimental verbs by hand (`bindings::exp4`) and leaves
            // out what only rdma-core exports (docs/mlnx-ofed-4.md).
            link_ofed()?;
            format!("MLNX_OFED {version} (legacy libibverbs, experimental verbs)")
        }
        Linkage::Static => link_static_system(&providers)?,
        Linkage::Source => link_source(&providers)?,
        // Nothing to link: the library opens rdma-core's shared objects itself.
        Linkage::Dlopen => "loaded at run time".into(),
    };

    if cm_wanted() && !linkage.is_static() && linkage != Linkage::Dlopen {
        link_rdmacm_shared()?;
    }
    for cfg in linkage.rustc_cfgs() {
        println!("cargo:rustc-cfg={cfg}");
    }
    let outcome = Outcome { linkage, rdma_core_version, providers };
    emit(&outcome)
}

/// Whether the `cm` feature (librdmacm) is on.
fn cm_wanted() -> bool {
    env::var_os("CARGO_FEATURE_CM").is_some()
}

/// librdmacm, shared: through pkg-config, else beside libibverbs.
fn link_rdmacm_shared() -> Result<(), String> {
    if pkg_config::Config::new().probe("librdmacm").is_ok() {
        return Ok(());
    }
    if ofed_info().is_some() {
        println!("cargo:rustc-link-lib=dylib=rdmacm");
        return Ok(());
    }
    Err("the `cm` feature needs librdmacm, which pkg-config does not find; install it \
         (Debian/Ubuntu: apt-get install librdmacm-dev; RHEL/Fedora: dnf install rdma-core-devel) \
         or build without it (--no-default-features)"
        .into())
}

/// Runs `ofed_info -s`; `None` when the command is missing or fails.
fn ofed_info() -> Option<String> {
    let out = Command::new("ofed_info").arg("-s").output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok().filter(|s| !s.trim().is_empty())
}

/// Shared libraries through pkg-config: libibverbs and libmlx5.
fn link_pkg_config() -> Result<String, String> {
    let verbs = pkg_config::Config::new()
        .probe("libibverbs")
        .map_err(|e| format!("pkg-config cannot find libibverbs ({e}); {INSTALL_HINT}"))?;
    pkg_config::Config::new()
        .probe("libmlx5")
        .map_err(|e| format!("pkg-config finds libibverbs but not libmlx5 ({e}); {INSTALL_HINT}"))?;
    Ok(probe::rdma_core_version_from_libibverbs(&verbs.version).unwrap_or(verbs.version))
}

/// MLNX_OFED: pkg-config when OFED registered itself there (5.x does), else its
/// library directory (`RRDDMMA_OFED_LIBDIR`, default the system's).
fn link_ofed() -> Result<(), String> {
    let found =
        pkg_config::Config::new().probe("libibverbs").is_ok() && pkg_config::Config::new().probe("libmlx5").is_ok();
    if found {
        return Ok(());
    }
    let dirs: Vec<PathBuf> = match env::var_os("RRDDMMA_OFED_LIBDIR") {
        Some(d) => vec![d.into()],
        None => ["/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib"].iter().map(PathBuf::from).collect(),
    };
    let dir = dirs.iter().find(|d| d.join("libibverbs.so").exists()).ok_or_else(|| {
        format!(
            "MLNX_OFED was detected but libibverbs.so is not in {dirs:?}; \
                 set RRDDMMA_OFED_LIBDIR to OFED's library directory"
        )
    })?;
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    println!("cargo:rustc-link-lib=dylib=mlx5");
    Ok(())
}

/// The static archives of an installed rdma-core (e.g. Debian's libibverbs-dev).
fn link_static_system(providers: &[String]) -> Result<String, String> {
    let pc = pkg_config::Config::new().cargo_metadata(false).env_metadata(false).probe("libibverbs");
    let libdir = match env::var_os("RRDDMMA_STATIC_LIBDIR") {
        Some(d) => PathBuf::from(d),
        None => pc
            .as_ref()
            .ok()
            .and_then(|l| l.link_paths.first().cloned())
            .unwrap_or_else(|| PathBuf::from("/usr/lib/x86_64-linux-gnu")),
    };
    let version = pc
        .as_ref()
        .ok()
        .and_then(|l| probe::rdma_core_version_from_libibverbs(&l.version))
        .unwrap_or_else(|| "unknown".into());
    let mut archives = Vec::new();
    for p in providers {
        archives.push(source::find_provider_archive(&libdir, p)?);
    }
    let verbs = libdir.join("libibverbs.a");
    if !verbs.exists() {
        return Err(format!("RRDDMMA_LINKAGE=static but {} does not exist; {INSTALL_HINT}", verbs.display()));
    }
    if cm_wanted() {
        let cm = libdir.join("librdmacm.a");
        if !cm.exists() {
            return Err(format!(
                "RRDDMMA_LINKAGE=static with the `cm` feature but {} does not exist; \
                 install librdmacm-dev or build without `cm` (--no-default-features)",
                cm.display()
            ));
        }
        // librdmacm calls into libibverbs: it comes first.
        archives.push(cm);
    }
    archives.push(verbs);
    link_archives(&archives);
    // Distribution builds resolve neighbours through libnl.
    for lib in ["libnl-route-3.0", "libnl-3.0"] {
        if pkg_config::Config::new().probe(lib).is_err() {
            println!("cargo:warning=static linkage: {lib} not found by pkg-config; linking may fail");
        }
    }
    Ok(version)
}

/// rdma-core built from source, static, with only the chosen providers.
fn link_source(providers: &[String]) -> Result<String, String> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    let built = source::build(&out_dir, providers, cm_wanted())?;
    link_archives(&built.archives);
    Ok(built.version)
}

/// Links archives in the given order (providers first, libibverbs last).
fn link_archives(archives: &[PathBuf]) {
    let mut dirs: Vec<&Path> = archives.iter().filter_map(|a| a.parent()).collect();
    dirs.dedup();
    for d in dirs {
        println!("cargo:rustc-link-search=native={}", d.display());
    }
    for a in archives {
        let stem = a.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let name = stem.strip_prefix("lib").unwrap_or(stem);
        println!("cargo:rustc-link-lib=static:-bundle={name}");
    }
    println!("cargo:rustc-link-lib=dylib=pthread");
}

/// Hands the outcome to the crate: `build_info()` and provider registration.
fn emit(o: &Outcome) -> Result<(), String> {
    println!("cargo:rustc-env=RRDDMMA_BUILD_LINKAGE={}", o.linkage.name());
    println!("cargo:rustc-env=RRDDMMA_BUILD_RDMA_CORE={}", o.rdma_core_version);
    println!("cargo:rustc-env=RRDDMMA_BUILD_PROVIDERS={}", o.providers.join(","));

    let mut src = String::from("// Generated by build.rs: the statically linked providers.\n");
    let _ = writeln!(src, "/// Providers linked into this build (empty for shared linkage).");
    let _ = writeln!(src, "pub const STATIC_PROVIDERS: &[&str] = &{:?};", o.providers);
    if !o.providers.is_empty() {
        src.push_str("extern \"C\" {\n");
        for p in &o.providers {
            let _ = writeln!(src, "    static verbs_provider_{p}: u8;");
        }
        src.push_str("    fn ibv_static_providers(unused: *mut core::ffi::c_void, ...);\n}\n");
        src.push_str(
            "/// Pulls the providers' objects into the link; their constructors register them.\n\
             pub(crate) fn register() {\n    // SAFETY: the arguments are addresses of the providers' \
             `verbs_device_ops`\n    // objects, ended by a null pointer, as rdma-core's \
             `IBV_STATIC_PROVIDERS` passes them.\n    unsafe {\n        ibv_static_providers(core::ptr::null_mut(), ",
        );
        for p in &o.providers {
            let _ = write!(src, "core::ptr::addr_of!(verbs_provider_{p}), ");
        }
        src.push_str("core::ptr::null::<u8>());\n    }\n}\n");
    } else {
        src.push_str(
            "/// Shared linkage: libibverbs loads its providers itself.\n#[inline]\npub(crate) fn register() {}\n",
        );
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    fs::write(out.join("static_providers.rs"), src).map_err(|e| format!("writing static_providers.rs: {e}"))
}
