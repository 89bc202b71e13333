//! Cuts a `#define NAME...` out of a kernel header by name, with its
//! backslash-continued lines: the kernel's text, unchanged.

/// The definition of macro `name` (function-like or not).
pub fn define(src: &str, file: &str, name: &str) -> String {
    let at = [format!("\n#define {name}("), format!("\n#define {name} "), format!("\n#define {name}\t")]
        .iter()
        .find_map(|h| src.find(h.as_str()))
        .unwrap_or_else(|| panic!("{file} has no #define {name}"))
        + 1;
    let mut end = at;
    loop {
        let nl = end + src[end..].find('\n').unwrap_or(src.len() - end);
        if !src[end..nl].trim_end().ends_with('\\') || nl >= src.len() {
            return src[at..nl].to_string();
        }
        end = nl + 1;
    }
}
