//! The `dlopen` linkage's function tables, generated from the committed
//! bindings: every function declared in an `extern "C"` block of
//! `src/bindings/sys.rs` (and `inline.rs`'s), and of `src/bindings/cm.rs`,
//! gets a table entry resolved once at run time and a function of the same
//! name and signature that calls through it. `cargo xtask bindings` writes
//! them after the bindings; `--check` fails when they drift.

use std::fmt::Write as _;

/// The verbs and mlx5dv table, relative to the workspace root.
pub const GENERATED_SYS: &str = "src/bindings/dl_sys.rs";
/// The librdmacm table, relative to the workspace root.
pub const GENERATED_CM: &str = "src/bindings/dl_cm.rs";

/// The generated files' lints: C names, and the C functions' argument counts.
const LINTS: &str =
    "#![allow(non_camel_case_types, non_snake_case, clippy::all, clippy::undocumented_unsafe_blocks, rustdoc::all)]";

/// One C function of an `extern "C"` block.
#[derive(Debug, PartialEq)]
struct CFn {
    /// The Rust name.
    name: String,
    /// The symbol (`#[link_name]`, else the name).
    symbol: String,
    /// `(name, type)` of each parameter.
    params: Vec<(String, String)>,
    /// The return type; `()` when none.
    ret: String,
}

/// Collapses whitespace runs to one space and drops the space bindgen's
/// formatter leaves inside brackets when it breaks lines.
fn tidy(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.replace("( ", "(").replace(" )", ")").replace(", )", ")").replace(",)", ")")
}

/// Splits at commas outside brackets (`->` is not a bracket).
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '(' | '[' | '<' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if prev != '-' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                prev = c;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        prev = c;
    }
    out.push(cur);
    out.into_iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect()
}

/// The functions of every `extern "C"` block in `src`.
fn extern_fns(src: &str, file: &str) -> Result<Vec<CFn>, String> {
    let mut fns = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("extern \"C\" {") {
        let body_start = at + "extern \"C\" {".len();
        // The block ends at the first `}` at the start of a line.
        let len = rest[body_start..].find("\n}").ok_or_else(|| format!("{file}: unterminated extern block"))?;
        let body = &rest[body_start..body_start + len];
        rest = &rest[body_start + len..];
        let mut link_name = None;
        let mut item = String::new();
        for line in body.lines().map(str::trim) {
            if line.is_empty() || line.starts_with("//") {
                continue;
            }
            if let Some(a) = line.strip_prefix("#[link_name = \"") {
                link_name = Some(a.trim_end_matches("\"]").to_string());
                continue;
            }
            if line.starts_with("#[") {
                return Err(format!("{file}: attribute the generator does not know in an extern block: {line}"));
            }
            item.push(' ');
            item.push_str(line);
            if line.ends_with(';') {
                fns.push(parse_fn(&item, link_name.take(), file)?);
                item.clear();
            }
        }
    }
    Ok(fns)
}

/// Parses `pub fn name(params) -> ret;`.
fn parse_fn(item: &str, link_name: Option<String>, file: &str) -> Result<CFn, String> {
    let item = tidy(item);
    let sig = item
        .strip_prefix("pub fn ")
        .and_then(|s| s.strip_suffix(';'))
        .ok_or_else(|| format!("{file}: not a `pub fn` declaration: {item}"))?;
    let open = sig.find('(').ok_or_else(|| format!("{file}: no parameter list: {item}"))?;
    let name = sig[..open].trim().to_string();
    let mut depth = 0;
    let mut close = None;
    for (i, c) in sig[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or_else(|| format!("{file}: unbalanced parameters: {item}"))?;
    if sig[open + 1..close].contains("...") {
        return Err(format!("{file}: {name} is variadic; the dlopen table cannot forward it"));
    }
    let mut params = Vec::new();
    for p in split_top(&sig[open + 1..close]) {
        let (n, t) = p.split_once(':').ok_or_else(|| format!("{file}: unnamed parameter in {name}: {p}"))?;
        params.push((n.trim().to_string(), t.trim().to_string()));
    }
    let tail = sig[close + 1..].trim();
    let ret = match tail.strip_prefix("->") {
        Some(r) => r.trim().to_string(),
        None if tail.is_empty() => "()".to_string(),
        None => return Err(format!("{file}: unexpected text after {name}'s parameters: {tail}")),
    };
    let symbol = link_name.unwrap_or_else(|| name.clone());
    Ok(CFn { name, symbol, params, ret })
}

/// One library's table: its struct, resolver, accessor and forwarding functions.
fn table(out: &mut String, lib_static: &str, table: &str, lib_desc: &str, fns: &[&CFn]) {
    let accessor = table.to_lowercase();
    let _ = writeln!(out, "\n/// {lib_desc}'s functions, each resolved once ({lib_static}).");
    let _ = writeln!(out, "pub(crate) struct {table} {{");
    for f in fns {
        let _ = writeln!(out, "    pub(crate) {}: Option<{}>,", f.name, fn_type(f));
    }
    out.push_str("}\n\n");
    let _ = writeln!(out, "impl {table} {{");
    let _ = writeln!(out, "    fn resolve(lib: &'static Library) -> {table} {{");
    out.push_str("        // SAFETY: each field's type is the C type of the symbol of its name,\n");
    out.push_str("        // as bindgen bound it from the library's header.\n");
    out.push_str("        unsafe {\n");
    let _ = writeln!(out, "            {table} {{");
    for f in fns {
        let _ = writeln!(out, "                {}: lib.sym(c\"{}\"),", f.name, f.symbol);
    }
    out.push_str("            }\n        }\n    }\n}\n\n");
    let _ = writeln!(out, "/// The table, resolved on first use.");
    out.push_str("#[inline]\n");
    let _ = writeln!(out, "pub(crate) fn {accessor}() -> &'static {table} {{");
    let _ = writeln!(out, "    static TABLE: OnceLock<{table}> = OnceLock::new();");
    let _ = writeln!(out, "    TABLE.get_or_init(|| {table}::resolve(&{lib_static}))");
    out.push_str("}\n");
    for f in fns {
        let params: Vec<String> = f.params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
        let args: Vec<&str> = f.params.iter().map(|(n, _)| n.as_str()).collect();
        let ret = if f.ret == "()" { String::new() } else { format!(" -> {}", f.ret) };
        let _ = writeln!(out, "\n/// `{}` from {lib_desc}, loaded at run time.", f.symbol);
        out.push_str("///\n/// # Safety\n/// The C function's contract.\n#[inline]\n");
        let _ = writeln!(out, "pub unsafe fn {}({}){ret} {{", f.name, params.join(", "));
        let _ = writeln!(out, "    match {accessor}().{} {{", f.name);
        out.push_str("        // SAFETY: the caller upholds the C function's contract.\n");
        let _ = writeln!(out, "        Some(f) => unsafe {{ f({}) }},", args.join(", "));
        let _ = writeln!(out, "        None => absent(&{lib_static}, \"{}\"),", f.symbol);
        out.push_str("    }\n}\n");
    }
}

/// `unsafe extern "C" fn(params) -> ret`.
fn fn_type(f: &CFn) -> String {
    let params: Vec<String> = f.params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
    let ret = if f.ret == "()" { String::new() } else { format!(" -> {}", f.ret) };
    format!("unsafe extern \"C\" fn({}){ret}", params.join(", "))
}

/// `dl_sys.rs`: libibverbs (every function but `mlx5dv_*`, plus `inline.rs`'s
/// extern block) and libmlx5 (`mlx5dv_*`).
pub fn generate_sys(sys: &str, inline: &str) -> Result<String, String> {
    let mut fns = extern_fns(sys, "sys.rs")?;
    fns.extend(extern_fns(inline, "inline.rs")?);
    let (mlx5, verbs): (Vec<&CFn>, Vec<&CFn>) = fns.iter().partition(|f| f.symbol.starts_with("mlx5dv_"));
    let mut out = String::from(
        "// Generated by `cargo xtask bindings` from the extern blocks of src/bindings/sys.rs\n\
         // and src/bindings/inline.rs; do not edit. `cargo xtask bindings --check` fails on drift.\n\n\
         //! The `dlopen` linkage's libibverbs and libmlx5 functions: each one of\n\
         //! `sys`'s, calling through a pointer resolved once (see `dl`).\n\n\
         {LINTS}\n\n\
         #[allow(unused_imports)]\n\
         use core::ffi::{c_char, c_int, c_uint, c_void};\n\
         use std::sync::OnceLock;\n\n\
         use super::dl::{absent, Library, LIBIBVERBS, LIBMLX5};\n\
         pub use super::sys::*;\n",
    )
    .replace("{LINTS}", LINTS);
    table(&mut out, "LIBIBVERBS", "Libibverbs", "libibverbs", &verbs);
    table(&mut out, "LIBMLX5", "Libmlx5", "libmlx5", &mlx5);
    Ok(out)
}

/// `dl_cm.rs`: librdmacm.
pub fn generate_cm(cm: &str) -> Result<String, String> {
    let fns = extern_fns(cm, "cm.rs")?;
    // Types both files define (`__be16`, ...) would be ambiguous between the
    // two glob imports; an explicit import of cm.rs's own settles each.
    let used: std::collections::BTreeSet<&str> = fns
        .iter()
        .flat_map(|f| f.params.iter().map(|(_, t)| t.as_str()).chain([f.ret.as_str()]))
        .flat_map(|t| t.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .collect();
    let own: Vec<&str> = cm
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("pub ")?;
            let l = ["type ", "struct ", "union "].iter().find_map(|k| l.strip_prefix(k))?;
            l.split(|c: char| !(c.is_alphanumeric() || c == '_')).next()
        })
        .filter(|n| used.contains(n))
        .collect();
    let refs: Vec<&CFn> = fns.iter().collect();
    let mut out = String::from(
        "// Generated by `cargo xtask bindings` from the extern block of src/bindings/cm.rs;\n\
         // do not edit. `cargo xtask bindings --check` fails on drift.\n\n\
         //! librdmacm (`rdma/rdma_cma.h`) under the `dlopen` linkage: the types of\n\
         //! the generated bindings, and each function calling through a pointer\n\
         //! resolved once. Reach it as `bindings::cm::rdma_connect`. Feature `cm`.\n\n\
         {LINTS}\n\n\
         use std::sync::OnceLock;\n\n\
         use super::dl::{absent, Library, LIBRDMACM};\n\
         #[allow(unused_imports)]\n\
         use super::sys::*;\n\
         pub use super::cm_sys::*;\n",
    )
    .replace("{LINTS}", LINTS);
    if !own.is_empty() {
        let _ = writeln!(out, "pub use super::cm_sys::{{{}}};", own.join(", "));
    }
    table(&mut out, "LIBRDMACM", "Librdmacm", "librdmacm", &refs);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bindgen_declarations() {
        let src = "unsafe extern \"C\" {\n    pub fn ibv_get_device_list(\n        num_devices: *mut ::core::ffi::c_int,\n    ) -> *mut *mut ibv_device;\n}\n\
                   unsafe extern \"C\" {\n    /// doc\n    #[link_name = \"ibv_query_port\"]\n    pub fn compat(a: Option<unsafe extern \"C\" fn(x: u8, y: u16) -> u32>, b: u8);\n}\n";
        let fns = extern_fns(src, "t").unwrap();
        assert_eq!(fns.len(), 2);
        assert_eq!(fns[0].name, "ibv_get_device_list");
        assert_eq!(fns[0].params, vec![("num_devices".into(), "*mut ::core::ffi::c_int".into())]);
        assert_eq!(fns[0].ret, "*mut *mut ibv_device");
        assert_eq!(fns[1].symbol, "ibv_query_port");
        assert_eq!(fns[1].params.len(), 2);
        assert_eq!(fns[1].params[0].1, "Option<unsafe extern \"C\" fn(x: u8, y: u16) -> u32>");
        assert_eq!(fns[1].ret, "()");
    }

    #[test]
    fn refuses_what_it_cannot_forward() {
        let variadic = "unsafe extern \"C\" {\n    pub fn f(a: u8, ...);\n}\n";
        assert!(extern_fns(variadic, "t").unwrap_err().contains("variadic"));
        let attr = "unsafe extern \"C\" {\n    #[link(name = \"x\")]\n    pub fn f(a: u8);\n}\n";
        assert!(extern_fns(attr, "t").unwrap_err().contains("attribute"));
    }
}
