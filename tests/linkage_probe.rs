//! The linkage decision of build.rs over recorded inputs.

#[path = "../build/probe.rs"]
#[allow(dead_code)]
mod probe;

use probe::{decide, parse_ofed_info, parse_providers, Linkage, ProbeError, ProbeInputs};

/// `ofed_info -s` as printed by real installations.
const OFED_4_9: &str = "MLNX_OFED_LINUX-4.9-7.1.0.0:\n";
const OFED_5_8: &str = "MLNX_OFED_LINUX-5.8-1.1.2.1:\n";
const OFED_23_07: &str = "OFED-internal-23.07-0.5.0:\n";
const OFED_24_10: &str = "OFED-internal-24.10-1.1.4:\n";

fn inputs<'a>(ovr: Option<&'a str>, ofed: Option<&'a str>, pkg: bool) -> ProbeInputs<'a> {
    ProbeInputs { linkage_override: ovr, ofed_info: ofed, pkg_config_found: pkg, vendored: false, dlopen: false }
}

#[test]
fn ofed_versions_parse() {
    let v = |s| parse_ofed_info(s).map(|o| (o.major, o.version));
    assert_eq!(v(OFED_4_9), Some((4, "4.9-7.1.0.0".to_string())));
    assert_eq!(v(OFED_5_8), Some((5, "5.8-1.1.2.1".to_string())));
    assert_eq!(v(OFED_23_07), Some((23, "23.07-0.5.0".to_string())));
    assert_eq!(v(OFED_24_10), Some((24, "24.10-1.1.4".to_string())));
    assert_eq!(v(""), None);
    assert_eq!(v("bash: ofed_info: command not found"), None);
    assert_eq!(v("MLNX_OFED_LINUX-x.y:"), None);
}

#[test]
fn ofed_4_uses_experimental_verbs() {
    for pkg in [false, true] {
        let l = decide(&inputs(None, Some(OFED_4_9), pkg)).unwrap();
        assert_eq!(l, Linkage::Mlnx4 { version: "4.9-7.1.0.0".into() });
    }
}

#[test]
fn ofed_5_and_doca_use_rdma_core_api() {
    for (s, v) in [(OFED_5_8, "5.8-1.1.2.1"), (OFED_23_07, "23.07-0.5.0"), (OFED_24_10, "24.10-1.1.4")] {
        assert_eq!(decide(&inputs(None, Some(s), true)).unwrap(), Linkage::Mlnx5 { version: v.into() });
    }
}

#[test]
fn no_ofed_prefers_pkg_config_then_source_only_when_vendored() {
    assert_eq!(decide(&inputs(None, None, true)).unwrap(), Linkage::PkgConfig);
    let vendored = |pkg| ProbeInputs { vendored: true, ..inputs(None, None, pkg) };
    assert_eq!(decide(&vendored(false)).unwrap(), Linkage::Source);
    // An installed rdma-core still wins over the vendored build.
    assert_eq!(decide(&vendored(true)).unwrap(), Linkage::PkgConfig);
    // Without the feature, nothing found is an error naming the packages and the feature.
    let e = decide(&inputs(None, None, false)).unwrap_err();
    assert_eq!(e, ProbeError::NothingFound);
    let msg = e.to_string();
    assert!(msg.contains("apt-get install libibverbs-dev") && msg.contains("dnf install rdma-core-devel"), "{msg}");
    assert!(msg.contains("`vendored` feature") && msg.contains("RRDDMMA_LINKAGE=source"), "{msg}");
    // Unrecognised ofed_info output is ignored, not fatal.
    assert_eq!(decide(&inputs(None, Some("garbage"), true)).unwrap(), Linkage::PkgConfig);
}

#[test]
fn overrides_win_over_probing() {
    assert_eq!(decide(&inputs(Some("source"), Some(OFED_5_8), true)).unwrap(), Linkage::Source);
    assert_eq!(decide(&inputs(Some("static"), None, true)).unwrap(), Linkage::Static);
    assert_eq!(decide(&inputs(Some("pkg-config"), Some(OFED_5_8), true)).unwrap(), Linkage::PkgConfig);
    assert_eq!(
        decide(&inputs(Some("mlnx5"), Some(OFED_23_07), false)).unwrap(),
        Linkage::Mlnx5 { version: "23.07-0.5.0".into() }
    );
    assert_eq!(
        decide(&inputs(Some("mlnx4"), Some(OFED_4_9), false)).unwrap(),
        Linkage::Mlnx4 { version: "4.9-7.1.0.0".into() }
    );
}

#[test]
fn overrides_that_cannot_be_met_are_errors() {
    let e = decide(&inputs(Some("pkg-config"), None, false)).unwrap_err();
    assert_eq!(e, ProbeError::PkgConfigNotFound);
    let msg = e.to_string();
    assert!(msg.contains("apt-get install libibverbs-dev") && msg.contains("dnf install rdma-core-devel"), "{msg}");

    let e = decide(&inputs(Some("mlnx4"), Some(OFED_5_8), true)).unwrap_err();
    assert_eq!(e, ProbeError::OfedNotFound { wanted: "mlnx4", found: Some("MLNX_OFED_LINUX-5.8-1.1.2.1:".into()) });
    let e = decide(&inputs(Some("mlnx5"), None, true)).unwrap_err();
    assert_eq!(e, ProbeError::OfedNotFound { wanted: "mlnx5", found: None });
    assert!(e.to_string().contains("ofed_info -s` is not available"), "{e}");

    let e = decide(&inputs(Some("dynamic"), None, true)).unwrap_err();
    assert_eq!(e, ProbeError::UnknownOverride("dynamic".into()));
    assert!(e.to_string().contains("mlnx4, mlnx5, pkg-config, static, source"), "{e}");
}

#[test]
fn providers_default_to_mlx5_and_are_checked() {
    assert_eq!(parse_providers(None).unwrap(), ["mlx5"]);
    assert_eq!(parse_providers(Some("  ")).unwrap(), ["mlx5"]);
    assert_eq!(parse_providers(Some("mlx5,rxe")).unwrap(), ["mlx5", "rxe"]);
    assert_eq!(parse_providers(Some(" rxe , mlx5,rxe ")).unwrap(), ["rxe", "mlx5"]);
    let e = parse_providers(Some("mlx5,rxee")).unwrap_err();
    assert!(e.contains("\"rxee\"") && e.contains("known providers"), "{e}");
    assert!(parse_providers(Some(",,")).is_err());
    let e = parse_providers(Some("rxe")).unwrap_err();
    assert!(e.contains("leaves out mlx5") && e.contains("mlx5,rxe"), "{e}");
}

#[test]
fn rdma_core_versions() {
    assert_eq!(probe::rdma_core_version_from_libibverbs("1.14.44.0").as_deref(), Some("44.0"));
    assert_eq!(probe::rdma_core_version_from_libibverbs("1.15.59.0\n").as_deref(), Some("59.0"));
    assert_eq!(probe::rdma_core_version_from_libibverbs("41mlnx1"), None);
    let cmake = "project(rdma-core C)\nset(PACKAGE_NAME \"RDMA\")\nset(PACKAGE_VERSION \"59.0\")\n";
    assert_eq!(probe::rdma_core_version_from_cmake(cmake).as_deref(), Some("59.0"));
    assert_eq!(probe::rdma_core_version_from_cmake("project(x)"), None);
}

#[test]
fn linkage_names_match_the_override_values() {
    let all = [
        Linkage::Mlnx4 { version: String::new() },
        Linkage::Mlnx5 { version: String::new() },
        Linkage::PkgConfig,
        Linkage::Static,
        Linkage::Source,
    ];
    for l in all {
        let back = decide(&inputs(Some(l.name()), Some(if l.name() == "mlnx4" { OFED_4_9 } else { OFED_5_8 }), true));
        assert_eq!(back.unwrap().name(), l.name());
        assert_eq!(l.is_static(), matches!(l, Linkage::Static | Linkage::Source));
    }
}

#[test]
fn ofed_4_builds_with_the_experimental_verbs_cfg() {
    let l = decide(&inputs(None, Some(OFED_4_9), false)).unwrap();
    assert_eq!(l.rustc_cfgs(), ["rrddmma_mlnx_ofed4"]);
    assert!(!l.is_static());
    for other in [Linkage::Mlnx5 { version: String::new() }, Linkage::PkgConfig] {
        assert!(other.rustc_cfgs().is_empty(), "{other:?}");
    }
    for st in [Linkage::Static, Linkage::Source] {
        assert_eq!(st.rustc_cfgs(), ["rrddmma_static"]);
    }
    // Every cfg that can be emitted is declared to rustc.
    for l in [Linkage::Mlnx4 { version: String::new() }, Linkage::Static] {
        for c in l.rustc_cfgs() {
            assert!(probe::ALL_CFGS.contains(c), "{c} is not declared");
        }
    }
}

#[test]
fn dlopen_feature_links_nothing() {
    let on = |ovr| ProbeInputs { dlopen: true, ..inputs(ovr, Some(OFED_5_8), true) };
    // The feature wins over an installed rdma-core and MLNX_OFED.
    assert_eq!(decide(&on(None)).unwrap(), Linkage::Dlopen);
    assert_eq!(decide(&on(Some("dlopen"))).unwrap(), Linkage::Dlopen);
    assert!(Linkage::Dlopen.rustc_cfgs().is_empty() && !Linkage::Dlopen.is_static());
    let e = decide(&on(Some("static"))).unwrap_err();
    assert_eq!(e, ProbeError::DlopenFeature { wanted: "static".into(), feature_on: true });
    assert!(e.to_string().contains("RRDDMMA_LINKAGE=static") && e.to_string().contains("`dlopen` feature"));
    // Asking for dlopen without the feature names the feature to enable.
    let e = decide(&inputs(Some("dlopen"), None, true)).unwrap_err();
    assert!(e.to_string().contains("--features rrddmma/dlopen"), "{e}");
}
