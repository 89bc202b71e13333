//! Cuts definitions out of kernel source files by name: a `struct NAME {...};`,
//! the `enum {...};` that lists a constant, a `#define`, a `typedef` line, or
//! a function definition with its body. The definitions are the kernel's
//! text, unchanged; only their order in the generated file is ours.

/// The byte just past the `}` matching the `{` at `open` (comments and
/// character literals skipped).
fn matching_brace(src: &str, open: usize) -> usize {
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += src[i..].find("*/").unwrap_or_else(|| panic!("an unclosed comment at byte {i}")) + 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => i += src[i..].find('\n').unwrap_or(src.len() - i),
            b'\'' => i += 2 + usize::from(b.get(i + 1) == Some(&b'\\')),
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    panic!("no closing brace for the one at byte {open}")
}

/// The start of the line holding byte `at`.
fn line_start(src: &str, at: usize) -> usize {
    src[..at].rfind('\n').map_or(0, |p| p + 1)
}

/// `struct NAME { ... };` at the start of a line.
pub fn structure(src: &str, file: &str, name: &str) -> String {
    let head = format!("\nstruct {name} {{");
    let at = src.find(&head).unwrap_or_else(|| panic!("{file} defines no struct {name}")) + 1;
    let end = matching_brace(src, at + head.len() - 2);
    let semi = end + src[end..].find(';').unwrap_or_else(|| panic!("struct {name} in {file} has no `;`"));
    src[at..=semi].to_string()
}

/// The `enum { ... };` whose body lists `constant`.
pub fn enum_with(src: &str, file: &str, constant: &str) -> String {
    let at = src
        .match_indices(constant)
        .map(|(p, _)| p)
        .find(|&p| {
            src[line_start(src, p)..p].trim().is_empty() && src[p + constant.len()..].starts_with([',', ' ', '\t', '='])
        })
        .unwrap_or_else(|| panic!("{file} lists no enum constant {constant}"));
    let open = src[..at].rfind("\nenum").unwrap_or_else(|| panic!("{constant} in {file} is in no enum")) + 1;
    let brace = open + src[open..].find('{').expect("an enum has a body");
    let end = matching_brace(src, brace);
    let semi = end + src[end..].find(';').expect("an enum ends with `;`");
    src[open..=semi].to_string()
}

/// The line `#define NAME ...`.
pub fn define(src: &str, file: &str, name: &str) -> String {
    let head = format!("\n#define {name} ");
    let at = src.find(&head).unwrap_or_else(|| panic!("{file} has no #define {name}")) + 1;
    let end = at + src[at..].find('\n').unwrap_or(src.len() - at);
    src[at..end].to_string()
}

/// The line `typedef ... NAME ...;`.
pub fn typedef(src: &str, file: &str, name: &str) -> String {
    let at = src
        .match_indices("\ntypedef ")
        .map(|(p, _)| p + 1)
        .find(|&p| src[p..p + src[p..].find(';').unwrap_or(0)].contains(name))
        .unwrap_or_else(|| panic!("{file} has no typedef of {name}"));
    let end = at + src[at..].find(';').expect("a typedef ends with `;`");
    src[at..=end].to_string()
}

/// The definition of function `name`: its declarator starts a line (the
/// return type may sit on the line before, as in `static u32\nname(`), and
/// its body follows the parameter list.
pub fn function(src: &str, file: &str, name: &str) -> String {
    let call = format!("{name}(");
    for (p, _) in src.match_indices(&call) {
        let line = line_start(src, p);
        // A definition's line starts at column 0 (calls are indented).
        if src[line..].starts_with([' ', '\t', '#', '*', '/']) {
            continue;
        }
        if p > line && !src[line..p].ends_with([' ', '*']) {
            continue; // `xname(`: another function whose name ends with this one
        }
        let close = p + src[p..].find(')').expect("a parameter list closes");
        let after = src[close..].trim_start_matches(|c: char| c != '{' && c != ';');
        if !after.starts_with('{') {
            continue; // a prototype
        }
        let brace = src.len() - after.len();
        // The return type on its own line before the declarator.
        let mut start = line;
        if !src[line..p].contains(' ') {
            let prev = line_start(src, line.saturating_sub(1));
            if prev < line && src[prev..line].trim_end().starts_with("static") {
                start = prev;
            }
        }
        return src[start..matching_brace(src, brace)].to_string();
    }
    panic!("{file} defines no function {name}")
}

/// The kernel's mlx5e receive path in dependency order, ready to compile
/// before a driver: `plumbing.h` (from `here`), the definitions cut from the
/// kernel tree `tree`, `rq.h` (from `here`), then the functions from
/// `mlx5e_read_cqe_slot` to `mlx5e_poll_rx_cq`, each passed through
/// `edit(name, text)` (a mutation; the identity otherwise). Used by the
/// kernel oracle (tests/mlx5_kernel_oracle.rs) and by the kernel column of
/// `cargo xtask bench-wqe` (xtask/src/bench_wqe/kernel.rs); the PRM oracle,
/// which includes this file too, does not use it.
#[allow(dead_code)]
pub fn mlx5e_rx(tree: &std::path::Path, here: &std::path::Path, edit: impl Fn(&str, String) -> String) -> Vec<String> {
    let read = |rel: &str| {
        let p = tree.join(rel);
        (std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())), rel.to_string())
    };
    let (cq_h, cq_f) = read("include/linux/mlx5/cq.h");
    let (dev, dev_f) = read("include/linux/mlx5/device.h");
    let (ifc, ifc_f) = read("include/linux/mlx5/mlx5_ifc.h");
    let (drv, drv_f) = read("include/linux/mlx5/driver.h");
    let (wq, wq_f) = read("drivers/net/ethernet/mellanox/mlx5/core/wq.h");
    let (en, en_f) = read("drivers/net/ethernet/mellanox/mlx5/core/en.h");
    let (rx, rx_f) = read("drivers/net/ethernet/mellanox/mlx5/core/en_rx.c");
    let mine = |f: &str| std::fs::read_to_string(here.join(f)).unwrap_or_else(|e| panic!("read {f}: {e}"));
    let mut parts = vec![mine("plumbing.h")];
    parts.push(enum_with(&cq_h, &cq_f, "MLX5_CQE_OWNER_MASK"));
    parts.push(enum_with(&dev, &dev_f, "MLX5_COMPRESSED"));
    parts.push(define(&dev, &dev_f, "MLX5_MINI_CQE_ARRAY_SIZE"));
    parts.push(enum_with(&ifc, &ifc_f, "MLX5_WQ_TYPE_LINKED_LIST_STRIDING_RQ"));
    for s in ["mlx5_cqe64", "mlx5_mini_cqe8", "mpwrq_cqe_bc"] {
        parts.push(structure(&dev, &dev_f, s));
    }
    for f in ["mlx5_get_cqe_format", "mpwrq_get_cqe_bc_consumed_strides", "mpwrq_get_cqe_consumed_strides"] {
        parts.push(function(&dev, &dev_f, f));
    }
    for s in ["mlx5_buf_list", "mlx5_frag_buf_ctrl"] {
        parts.push(structure(&drv, &drv_f, s));
    }
    for f in ["mlx5_init_fbc_offset", "mlx5_init_fbc", "mlx5_frag_buf_get_wqe"] {
        parts.push(function(&drv, &drv_f, f));
    }
    for s in ["mlx5_wq_cyc", "mlx5_cqwq"] {
        parts.push(structure(&wq, &wq_f, s));
    }
    for f in [
        "mlx5_wq_cyc_ctr2ix",
        "mlx5_cqwq_get_size",
        "mlx5_cqwq_ctr2ix",
        "mlx5_cqwq_get_ci",
        "mlx5_cqwq_get_wqe",
        "mlx5_cqwq_get_ctr_wrap_cnt",
        "mlx5_cqwq_get_wrap_cnt",
        "mlx5_cqwq_pop",
        "mlx5_cqwq_update_db_record",
        "mlx5_cqwq_get_cqe",
    ] {
        parts.push(function(&wq, &wq_f, f));
    }
    parts.push(structure(&en, &en_f, "mlx5e_cq_decomp"));
    parts.push(enum_with(&en, &en_f, "MLX5E_RQ_STATE_MINI_CQE_HW_STRIDX"));
    parts.push("struct mlx5e_rq;".into());
    parts.push(typedef(&en, &en_f, "mlx5e_fp_handle_rx_cqe"));
    parts.push(mine("rq.h"));
    for f in [
        "mlx5e_read_cqe_slot",
        "mlx5e_read_title_slot",
        "mlx5e_read_mini_arr_slot",
        "mlx5e_cqes_update_owner",
        "mlx5e_decompress_cqe",
        "mlx5e_decompress_cqe_no_hash",
        "mlx5e_decompress_cqes_cont",
        "mlx5e_decompress_cqes_start",
        "mlx5e_poll_rx_cq",
    ] {
        parts.push(edit(f, function(&rx, &rx_f, f)));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "/* x */\nstruct a {\n\tint b; /* } */\n\tstruct { int c; } d;\n};\n\
        enum {\n\tX_ONE,\n\tX_TWO = 2,\n};\n#define N 8\n\
        typedef void (*h_t)(struct a*);\n\
        static inline int f(int x);\n\
        static u32\nf(int x)\n{\n\tif (x) { return g(x); }\n\treturn 0;\n}\n\
        static inline int gf(int y)\n{\n\treturn f(y);\n}\n";

    #[test]
    fn cuts_each_kind_of_definition() {
        assert_eq!(structure(SRC, "s", "a"), "struct a {\n\tint b; /* } */\n\tstruct { int c; } d;\n};");
        assert_eq!(enum_with(SRC, "s", "X_TWO"), "enum {\n\tX_ONE,\n\tX_TWO = 2,\n};");
        assert_eq!(define(SRC, "s", "N"), "#define N 8");
        assert_eq!(typedef(SRC, "s", "h_t"), "typedef void (*h_t)(struct a*);");
        assert_eq!(function(SRC, "s", "f"), "static u32\nf(int x)\n{\n\tif (x) { return g(x); }\n\treturn 0;\n}");
        assert_eq!(function(SRC, "s", "gf"), "static inline int gf(int y)\n{\n\treturn f(y);\n}");
    }
}
