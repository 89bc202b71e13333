//! The MLNX_OFED 4.x path (cfg `rrddmma_mlnx_ofed4`) on a host without 4.x:
//! clippy-clean, its host tests pass (linked against the installed
//! libibverbs), the DC example (the same source the rdma-core build
//! compiles) builds, and the library refers to no libibverbs or libmlx5
//! symbol that 4.x libibverbs does not export.
//!
//! Alone, the same steps are (`docs/mlnx-ofed-4.md`):
//! `RUSTFLAGS='--cfg rrddmma_mlnx_ofed4' CARGO_TARGET_DIR=target/mlnx4-check cargo test --lib -- exp4 mlx5dv::dc`
//! and `... cargo build --example dc`.

use std::process::Command;

use crate::capture::capture;
use crate::tally::Tally;
use crate::{root, show};

/// The user-facing globals of MLNX_OFED 4.6 libibverbs' `src/libibverbs.map`
/// (gpudirect/libibverbs, commit bf7ecd9022a3d09ea0441b04853f5c16ce0c673c),
/// leaving out the provider-side `ibv_cmd_*` / `ibv_exp_cmd_*` helpers.
const OFED4_EXPORTS: &[&str] = &[
    "ibv_ack_async_event",
    "ibv_ack_cq_events",
    "ibv_alloc_pd",
    "ibv_attach_mcast",
    "ibv_close_device",
    "ibv_close_xrc_domain",
    "ibv_copy_ah_attr_from_kern",
    "ibv_copy_path_rec_from_kern",
    "ibv_copy_path_rec_to_kern",
    "ibv_copy_qp_attr_from_kern",
    "ibv_create_ah",
    "ibv_create_ah_from_wc",
    "ibv_create_comp_channel",
    "ibv_create_cq",
    "ibv_create_qp",
    "ibv_create_srq",
    "ibv_create_xrc_rcv_qp",
    "ibv_create_xrc_srq",
    "ibv_dealloc_pd",
    "ibv_dereg_mr",
    "ibv_destroy_ah",
    "ibv_destroy_comp_channel",
    "ibv_destroy_cq",
    "ibv_destroy_qp",
    "ibv_destroy_srq",
    "ibv_detach_mcast",
    "ibv_dofork_range",
    "ibv_dontfork_range",
    "ibv_event_type_str",
    "ibv_fork_init",
    "ibv_free_device_list",
    "ibv_get_async_event",
    "ibv_get_cq_event",
    "ibv_get_device_guid",
    "ibv_get_device_list",
    "ibv_get_device_name",
    "ibv_get_sysfs_path",
    "ibv_init_ah_from_wc",
    "ibv_modify_qp",
    "ibv_modify_srq",
    "ibv_modify_xrc_rcv_qp",
    "ibv_node_type_str",
    "ibv_open_device",
    "ibv_open_xrc_domain",
    "ibv_port_state_str",
    "ibv_query_device",
    "ibv_query_device_ex",
    "ibv_query_gid",
    "ibv_query_pkey",
    "ibv_query_port",
    "ibv_query_qp",
    "ibv_query_srq",
    "ibv_query_xrc_rcv_qp",
    "ibv_rate_to_mbps",
    "ibv_rate_to_mult",
    "ibv_read_sysfs_file",
    "ibv_reg_mr",
    "ibv_reg_xrc_rcv_qp",
    "ibv_resize_cq",
    "ibv_unreg_xrc_rcv_qp",
    "ibv_wc_status_str",
    "mbps_to_ibv_rate",
    "mult_to_ibv_rate",
];

/// Verbs symbols (`ibv_*`, `_ibv_*`, `mlx5dv_*`, ...) an archive leaves undefined.
fn undefined_verbs_symbols(rlib: &std::path::Path) -> Result<Vec<String>, String> {
    let out = Command::new("nm").arg("-u").arg(rlib).output().map_err(|e| format!("cannot run nm: {e}"))?;
    if !out.status.success() {
        return Err(format!("nm -u {} failed", rlib.display()));
    }
    let mut syms: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| ["ibv_", "_ibv_", "mlx5dv_", "mbps_to_ibv", "mult_to_ibv"].iter().any(|p| s.starts_with(p)))
        .map(str::to_string)
        .collect();
    syms.sort();
    syms.dedup();
    Ok(syms)
}

/// Clippy, the `exp4` and `dc` host tests, the DC example, and the symbol
/// check, with the cfg set.
pub fn check(tally: &mut Tally) {
    let target = root().join("target/mlnx4-check");
    let cargo = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO"));
        c.args(args).env("RUSTFLAGS", "--cfg rrddmma_mlnx_ofed4").env("CARGO_TARGET_DIR", &target);
        c
    };
    let clippy = |extra: &[&str]| {
        let args = [&["clippy", "--lib", "--quiet"], extra, &["--", "-D", "warnings"]].concat();
        capture(&mut cargo(&args)).0
    };
    // The library with the DC example, and the library's own tests
    // (`--profile test`: the integration tests need rdma-core-only items).
    let ok = clippy(&["--example", "dc", "--example", "raw_echo"]) && clippy(&["--profile", "test"]);
    tally.check("MLNX_OFED 4.x cfg: clippy -D warnings", ok);
    let (ok, out) = capture(&mut cargo(&["test", "--lib", "--quiet", "--", "exp4", "mlx5dv::dc"]));
    tally.add_run("MLNX_OFED 4.x cfg: exp4 and dc host tests", ok, &out);
    // The example also builds without the cfg (`cargo test --workspace`
    // builds every example): one DC program for both linkages.
    let (ok, _) = capture(&mut cargo(&["build", "--example", "dc", "--quiet"]));
    tally.check("MLNX_OFED 4.x cfg: the DC example builds", ok);

    let mut build = cargo(&["build", "--lib", "--quiet"]);
    let built = capture(&mut build).0;
    let rlib = target.join("debug/librrddmma.rlib");
    let verdict = if built { undefined_verbs_symbols(&rlib) } else { Err(format!("`{}` failed", show(&build))) };
    let good = match verdict {
        Ok(syms) => {
            let foreign: Vec<&String> = syms.iter().filter(|s| !OFED4_EXPORTS.contains(&s.as_str())).collect();
            println!("MLNX_OFED 4.x cfg: {} verbs symbols referenced, not exported by 4.x: {foreign:?}", syms.len());
            !syms.is_empty() && foreign.is_empty()
        }
        Err(e) => {
            println!("{e}");
            false
        }
    };
    tally.check("MLNX_OFED 4.x cfg: only symbols 4.x libibverbs exports", good);
}
