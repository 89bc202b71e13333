//! Every `static inline` function of the installed verbs.h / mlx5dv.h is either
//! provided as Rust by `src/bindings/inline.rs` or listed here as not provided
//! (with the reason). A new inline in the headers fails the check.

use std::fs;
use std::path::Path;

use crate::{root, Result};

/// Static inlines deliberately not mirrored, with the way to reach the feature.
pub const NOT_PROVIDED: &[(&str, &str)] = &[
    ("__ibv_get_device_list", "macro helper; rrddmma registers static providers itself"),
    ("___ibv_query_port", "the body of the `ibv_query_port` macro: mirrored as `ibv_query_port`"),
    ("ibv_create_flow_action_esp", "IPsec flow actions: out of scope"),
    ("ibv_modify_flow_action_esp", "IPsec flow actions: out of scope"),
    ("ibv_destroy_flow_action", "IPsec flow actions: out of scope"),
    ("ibv_memcpy_to_dm", "prim::Dm calls the DM's copy entry itself"),
    ("ibv_memcpy_from_dm", "prim::Dm calls the DM's copy entry itself"),
    ("ibv_alloc_null_mr", "not yet wrapped"),
    ("ibv_post_wq_recv", "receive work queues (RSS): not yet wrapped"),
    ("ibv_create_wq", "receive work queues (RSS): not yet wrapped"),
    ("ibv_create_rwq_ind_table", "receive work queues (RSS): not yet wrapped"),
    ("ibv_destroy_rwq_ind_table", "receive work queues (RSS): not yet wrapped"),
    ("ibv_post_srq_ops", "tag matching: not yet wrapped"),
    ("ibv_flow_label_to_udp_sport", "pure arithmetic; not yet mirrored"),
    ("ibv_wc_read_tm_info", "tag matching: not yet wrapped"),
    ("ibv_wr_send_tso", "TSO on raw packet QPs: not yet wrapped"),
    ("ibv_query_gid_table", "prim::Context::gid_table reads the entries through ibv_query_gid_ex"),
    ("ibv_is_qpt_supported", "pure arithmetic; not yet mirrored"),
    ("ibv_wr_bind_mw", "type 2 window binds: not yet wrapped"),
    ("ibv_query_ece", "exported by libibverbs; prim::Qp::query_ece calls it"),
    ("ibv_set_ece", "exported by libibverbs; prim::Qp::set_ece calls it"),
];

/// mlx5dv.h's inlines other than `mlx5dv_wr_set_dc_addr` and `mlx5dv_wr_set_dc_addr_stream` are not
/// mirrored in inline.rs.
const MLX5DV_PENDING: &str = "segment, CQE and clock helpers re-implemented in rrddmma::mlx5dv and checked against the header by tests/mlx5_oracle.rs; mkey/UMR/raw-WQE/memcpy helpers not wrapped";

/// Names of the `static inline` functions a header defines.
pub fn header_inlines(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = false;
    for line in text.lines() {
        let l = line.trim_start();
        let decl = if let Some(rest) = l.strip_prefix("static inline") {
            pending = !rest.contains('(');
            if pending {
                continue;
            }
            rest
        } else if pending {
            pending = false;
            l
        } else {
            continue;
        };
        if let Some(before) = decl.split('(').next() {
            if let Some(name) = before.split(|c: char| c.is_whitespace() || c == '*').rfind(|w| !w.is_empty()) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// Names of the `pub fn` / `pub unsafe fn` items in inline.rs.
fn provided(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("pub unsafe fn ").or_else(|| l.strip_prefix("pub fn "))
        })
        .filter_map(|r| r.split(['(', '<']).next())
        .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_string)
        .collect()
}

/// Fails when a header inline is neither provided nor listed as not provided.
pub fn run(include: &Path) -> Result<()> {
    let ours = provided(&fs::read_to_string(root().join("src/bindings/inline.rs"))?);
    let mut unknown = Vec::new();
    let mut pending = 0;
    for (header, is_dv) in [("verbs.h", false), ("mlx5dv.h", true)] {
        let text = fs::read_to_string(include.join(header))?;
        for name in header_inlines(&text) {
            let listed = NOT_PROVIDED.iter().any(|(n, _)| *n == name);
            if ours.contains(&name) || listed {
                continue;
            }
            if is_dv {
                pending += 1;
                continue;
            }
            unknown.push(name);
        }
    }
    println!(
        "inlines: {} mirrored in Rust, {} listed as not provided, {pending} mlx5dv ({MLX5DV_PENDING})",
        ours.len(),
        NOT_PROVIDED.len()
    );
    if !unknown.is_empty() {
        return Err(format!(
            "static inlines in the installed headers that src/bindings/inline.rs neither mirrors \
             nor lists as not provided: {unknown:?}"
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_inline_names() {
        let h = "static inline int ibv_post_send(struct ibv_qp *qp,\n\
                 static inline struct ibv_qp *\nibv_create_qp_ex(struct ibv_context *c,\n\
                 static inline void *foo (void)\nint not_inline(void);\n";
        assert_eq!(header_inlines(h), ["ibv_post_send", "ibv_create_qp_ex", "foo"]);
    }
}
