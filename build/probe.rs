//! The linkage decision, as a pure function of what the build machine showed.
//!
//! `build.rs` gathers the inputs (environment, `ofed_info -s`, pkg-config) and
//! acts on the decision; this file only decides, so that the host tests can
//! feed it recorded inputs (`tests/linkage_probe.rs` includes it by path).

use std::fmt;

/// How the library reaches libibverbs and libmlx5.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// MLNX_OFED 4.x: legacy libibverbs with the experimental verbs (`ibv_exp_*`).
    Mlnx4 {
        /// The OFED version, e.g. `4.9-7.1.0.0`.
        version: String,
    },
    /// MLNX_OFED 5.x or later (including DOCA's `OFED-internal-*`): rdma-core API.
    Mlnx5 {
        /// The OFED version, e.g. `5.8-1.1.2.1` or `23.07-0.5.0`.
        version: String,
    },
    /// Shared libraries found through pkg-config (`libibverbs`, `libmlx5`).
    PkgConfig,
    /// Static archives of an installed rdma-core (`libibverbs.a` and the
    /// providers' archives), providers registered at start-up.
    Static,
    /// rdma-core built from source as static archives, providers registered at start-up.
    Source,
    /// Nothing linked: libibverbs, libmlx5 and librdmacm opened at run time
    /// (the `dlopen` Cargo feature).
    Dlopen,
}

impl Linkage {
    /// The name used by `RRDDMMA_LINKAGE` and reported by `build_info()`.
    pub fn name(&self) -> &'static str {
        match self {
            Linkage::Mlnx4 { .. } => "mlnx4",
            Linkage::Mlnx5 { .. } => "mlnx5",
            Linkage::PkgConfig => "pkg-config",
            Linkage::Static => "static",
            Linkage::Source => "source",
            Linkage::Dlopen => "dlopen",
        }
    }

    /// Whether providers are linked in statically and must be registered.
    pub fn is_static(&self) -> bool {
        matches!(self, Linkage::Static | Linkage::Source)
    }

    /// The `--cfg` names the library is compiled with under this linkage:
    /// `rrddmma_static` for static builds, `rrddmma_mlnx_ofed4` for the
    /// MLNX_OFED 4.x experimental verbs.
    pub fn rustc_cfgs(&self) -> &'static [&'static str] {
        match self {
            Linkage::Mlnx4 { .. } => &[CFG_MLNX_OFED4],
            Linkage::Static | Linkage::Source => &["rrddmma_static"],
            Linkage::Mlnx5 { .. } | Linkage::PkgConfig | Linkage::Dlopen => &[],
        }
    }
}

/// The cfg of the MLNX_OFED 4.x experimental-verbs build.
pub const CFG_MLNX_OFED4: &str = "rrddmma_mlnx_ofed4";

/// Every cfg `rustc_cfgs` can name, declared to rustc so none warns.
pub const ALL_CFGS: &[&str] = &["rrddmma_static", CFG_MLNX_OFED4];

/// What the build machine showed, gathered by `build.rs`.
#[derive(Clone, Debug, Default)]
pub struct ProbeInputs<'a> {
    /// The value of `RRDDMMA_LINKAGE`, if set and not empty.
    pub linkage_override: Option<&'a str>,
    /// The standard output of `ofed_info -s`, if the command exists and succeeded.
    pub ofed_info: Option<&'a str>,
    /// Whether pkg-config found `libibverbs`.
    pub pkg_config_found: bool,
    /// Whether the `vendored` feature is on: with nothing installed found,
    /// build rdma-core from source.
    pub vendored: bool,
    /// Whether the `dlopen` feature is on: link nothing, load at run time.
    pub dlopen: bool,
}

/// Why no linkage could be chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// `RRDDMMA_LINKAGE` holds a value that is not one of the known names.
    UnknownOverride(String),
    /// `RRDDMMA_LINKAGE` names a link-time linkage while the `dlopen`
    /// feature is on, or `dlopen` while the feature is off.
    DlopenFeature {
        /// The override.
        wanted: String,
        /// Whether the feature is on.
        feature_on: bool,
    },
    /// `RRDDMMA_LINKAGE=mlnx4|mlnx5` was asked for but `ofed_info -s` did not
    /// report a matching MLNX_OFED.
    OfedNotFound {
        /// The override that was asked for.
        wanted: &'static str,
        /// What `ofed_info -s` printed, if anything.
        found: Option<String>,
    },
    /// `RRDDMMA_LINKAGE=pkg-config` was asked for but pkg-config found no `libibverbs`.
    PkgConfigNotFound,
    /// Neither MLNX_OFED nor pkg-config found libibverbs, and the `vendored`
    /// feature is off.
    NothingFound,
}

/// The packages that provide libibverbs and libmlx5, for error messages.
pub const INSTALL_HINT: &str = "\
install the RDMA user-space libraries and headers, then build again:
    Debian/Ubuntu:  apt-get install libibverbs-dev ibverbs-providers pkg-config
    RHEL/Fedora:    dnf install rdma-core-devel libibverbs pkgconf-pkg-config
or build rdma-core from source: enable rrddmma's `vendored` feature
(`cargo build --features rrddmma/vendored`) or set RRDDMMA_LINKAGE=source (needs cmake,
ninja-build, python3 and pkg-config; RRDDMMA_RDMA_CORE_SRC may point at an rdma-core tree
or .tar.gz; otherwise the build downloads the pinned release)";

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::UnknownOverride(v) => write!(
                f,
                "RRDDMMA_LINKAGE={v:?} is not a linkage; use one of \
                 mlnx4, mlnx5, pkg-config, static, source, dlopen (or unset it to probe)"
            ),
            ProbeError::DlopenFeature { wanted, feature_on: true } => write!(
                f,
                "RRDDMMA_LINKAGE={wanted} asks to link rdma-core, but the `dlopen` feature loads it \
                 at run time instead; unset RRDDMMA_LINKAGE (or set it to dlopen), or build without \
                 the feature"
            ),
            ProbeError::DlopenFeature { wanted, feature_on: false } => write!(
                f,
                "RRDDMMA_LINKAGE={wanted} needs the `dlopen` Cargo feature, which compiles the \
                 run-time loader: build with --features rrddmma/dlopen"
            ),
            ProbeError::OfedNotFound { wanted, found } => {
                write!(f, "RRDDMMA_LINKAGE={wanted} asks for MLNX_OFED ")?;
                match found {
                    None => write!(f, "but `ofed_info -s` is not available")?,
                    Some(s) => write!(f, "but `ofed_info -s` printed {s:?}")?,
                }
                write!(f, "; unset RRDDMMA_LINKAGE to probe, or {INSTALL_HINT}")
            }
            ProbeError::PkgConfigNotFound => {
                write!(f, "RRDDMMA_LINKAGE=pkg-config but pkg-config cannot find libibverbs; {INSTALL_HINT}")
            }
            ProbeError::NothingFound => {
                write!(f, "neither MLNX_OFED (`ofed_info -s`) nor pkg-config finds libibverbs; {INSTALL_HINT}")
            }
        }
    }
}

/// An MLNX_OFED installation as reported by `ofed_info -s`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ofed {
    /// Major version (4, 5, 23, 24, ...).
    pub major: u32,
    /// The whole version string without prefix or trailing colon.
    pub version: String,
}

/// Parses the output of `ofed_info -s`.
///
/// Known forms: `MLNX_OFED_LINUX-5.8-1.1.2.1:` and DOCA's `OFED-internal-23.07-0.5.0:`.
/// Anything else (empty output, an unknown vendor string) yields `None`.
pub fn parse_ofed_info(output: &str) -> Option<Ofed> {
    let line = output.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_end_matches(':');
    let version = ["MLNX_OFED_LINUX-", "OFED-internal-"].iter().find_map(|p| line.strip_prefix(p))?;
    let major = version.split(['.', '-']).next()?.parse().ok()?;
    Some(Ofed { major, version: version.to_string() })
}

fn ofed_linkage(ofed: Ofed) -> Linkage {
    if ofed.major < 5 {
        Linkage::Mlnx4 { version: ofed.version }
    } else {
        Linkage::Mlnx5 { version: ofed.version }
    }
}

/// Decides the linkage: the `dlopen` feature, else the override, else MLNX_OFED, else pkg-config, else
/// (with the `vendored` feature) a static build from source, else an error.
pub fn decide(inputs: &ProbeInputs<'_>) -> Result<Linkage, ProbeError> {
    let ofed = inputs.ofed_info.and_then(parse_ofed_info);
    if inputs.dlopen {
        return match inputs.linkage_override {
            None | Some("dlopen") => Ok(Linkage::Dlopen),
            Some(other) => Err(ProbeError::DlopenFeature { wanted: other.to_string(), feature_on: true }),
        };
    }
    if let Some(wanted) = inputs.linkage_override {
        return match wanted {
            "mlnx4" | "mlnx5" => {
                let wanted: &'static str = if wanted == "mlnx4" { "mlnx4" } else { "mlnx5" };
                match ofed.map(ofed_linkage) {
                    Some(l) if l.name() == wanted => Ok(l),
                    _ => {
                        Err(ProbeError::OfedNotFound { wanted, found: inputs.ofed_info.map(|s| s.trim().to_string()) })
                    }
                }
            }
            "pkg-config" if inputs.pkg_config_found => Ok(Linkage::PkgConfig),
            "pkg-config" => Err(ProbeError::PkgConfigNotFound),
            "static" => Ok(Linkage::Static),
            "source" => Ok(Linkage::Source),
            "dlopen" => Err(ProbeError::DlopenFeature { wanted: "dlopen".into(), feature_on: false }),
            other => Err(ProbeError::UnknownOverride(other.to_string())),
        };
    }
    if let Some(ofed) = ofed {
        return Ok(ofed_linkage(ofed));
    }
    if inputs.pkg_config_found {
        return Ok(Linkage::PkgConfig);
    }
    if inputs.vendored {
        return Ok(Linkage::Source);
    }
    Err(ProbeError::NothingFound)
}

/// Providers that rdma-core can link statically (`verbs_provider_<name>`).
pub const KNOWN_PROVIDERS: &[&str] = &[
    "bnxt_re",
    "cxgb4",
    "efa",
    "erdma",
    "hfi1verbs",
    "hns",
    "ionic",
    "ipathverbs",
    "irdma",
    "mana",
    "mlx4",
    "mlx5",
    "mthca",
    "ocrdma",
    "qedr",
    "rxe",
    "siw",
    "vmw_pvrdma",
];

/// Parses `RRDDMMA_STATIC_PROVIDERS` (comma-separated, default `mlx5`).
///
/// Returns the providers in the given order without duplicates, or the first
/// name that rdma-core does not know.
pub fn parse_providers(value: Option<&str>) -> Result<Vec<String>, String> {
    let value = value.map(str::trim).filter(|v| !v.is_empty()).unwrap_or("mlx5");
    let mut out: Vec<String> = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !KNOWN_PROVIDERS.contains(&name) {
            return Err(format!(
                "RRDDMMA_STATIC_PROVIDERS names {name:?}, which is not an rdma-core provider; \
                 known providers: {}",
                KNOWN_PROVIDERS.join(", ")
            ));
        }
        if !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    if out.is_empty() {
        return Err("RRDDMMA_STATIC_PROVIDERS names no provider; give e.g. `mlx5` or `mlx5,rxe`".into());
    }
    if !out.iter().any(|p| p == "mlx5") {
        return Err(format!(
            "RRDDMMA_STATIC_PROVIDERS={value:?} leaves out mlx5, which rrddmma's mlx5dv layer links against; \
             add it, e.g. `mlx5,{value}`"
        ));
    }
    Ok(out)
}

/// The rdma-core release from libibverbs' pkg-config version (`1.14.44.0` → `44.0`).
pub fn rdma_core_version_from_libibverbs(version: &str) -> Option<String> {
    let parts: Vec<&str> = version.trim().split('.').collect();
    match parts.as_slice() {
        [_, _, major, minor] => Some(format!("{major}.{minor}")),
        _ => None,
    }
}

/// The rdma-core release from a source tree's top `CMakeLists.txt`
/// (`set(PACKAGE_VERSION "59.0")`).
pub fn rdma_core_version_from_cmake(cmakelists: &str) -> Option<String> {
    cmakelists.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("set(PACKAGE_VERSION")?;
        let v = rest.trim().trim_end_matches(')').trim().trim_matches('"');
        (!v.is_empty()).then(|| v.to_string())
    })
}
