//! Checks of the tree itself. Reproducible builds: every workspace the
//! suite builds resolves from its committed lockfile, and the suite leaves
//! the tree as it found it. Unsafe code: every `unsafe` block and
//! `unsafe impl` carries a `// SAFETY:` comment, and every `unsafe fn` a
//! `# Safety` section in its doc ([`safety_comments`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;
use crate::tally::Tally;

/// The workspaces `cargo xtask test` builds, by manifest (the main one,
/// the fuzz targets, the peer programs of `bench-peers`).
pub const WORKSPACES: &[&str] = &["Cargo.toml", "fuzz/Cargo.toml", "peers/Cargo.toml"];

/// Each workspace's `Cargo.lock` is current (`cargo metadata --locked`
/// refuses to change it): a stale one would be rewritten by the build and
/// resolve dependencies afresh on every machine.
pub fn lockfiles(tally: &mut Tally) {
    for manifest in WORKSPACES {
        let out = Command::new(env!("CARGO"))
            .args(["metadata", "--locked", "--format-version", "1", "--manifest-path"])
            .arg(root().join(manifest))
            .output();
        let lock = Path::new(manifest).with_file_name("Cargo.lock");
        let ok = match out {
            Ok(o) if o.status.success() => true,
            Ok(o) => {
                println!(
                    "{}: not current; run `cargo metadata --format-version 1 --manifest-path {manifest} >/dev/null` \
                     and commit it:\n{}",
                    lock.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                false
            }
            Err(e) => {
                println!("cargo metadata for {manifest}: {e}");
                false
            }
        };
        tally.check(&format!("{} current (cargo metadata --locked)", lock.display()), ok);
    }
}

/// What `git status --porcelain` says of the tree: tracked files changed
/// and untracked files not ignored; `None` outside a git checkout.
pub fn snapshot() -> Option<String> {
    let out = Command::new("git").args(["status", "--porcelain"]).current_dir(root()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The lines of `after` that `before` does not have: what the run changed.
pub fn changed(before: &str, after: &str) -> Vec<String> {
    after.lines().filter(|l| !before.lines().any(|b| b == *l)).map(str::to_string).collect()
}

/// The suite's last check: the tree is as the run found it.
pub fn unchanged(tally: &mut Tally, before: Option<&str>) {
    let (Some(before), Some(after)) = (before, snapshot()) else {
        println!("tree unchanged: not a git checkout, not checked");
        return;
    };
    let diff = changed(before, &after);
    for line in &diff {
        println!("the run changed the tree: {line}");
    }
    tally.check("the run left the tree unchanged (git status)", diff.is_empty());
}

/// The folders whose `unsafe` [`safety_comments`] reads, relative to the
/// workspace.
pub const SAFETY_TREES: &[&str] = &["src", "examples"];

/// Files left out of [`safety_comments`]: the bindings `cargo xtask
/// bindings` generates (bindgen's unsafe, not ours).
pub const GENERATED: &[&str] =
    &["src/bindings/sys.rs", "src/bindings/cm.rs", "src/bindings/dl_sys.rs", "src/bindings/dl_cm.rs"];

/// Every `unsafe` block and `unsafe impl` under [`SAFETY_TREES`] has a
/// `// SAFETY:` comment, and every `unsafe fn` a `# Safety` doc section
/// (see [`unsafe_findings`]). Clippy's `undocumented_unsafe_blocks` sees
/// only the code one build compiles; this reads every file, whatever its
/// cfg (MLNX_OFED 4.x, `dlopen`, ...), macro bodies included.
pub fn safety_comments(tally: &mut Tally) {
    let mut files = Vec::new();
    for tree in SAFETY_TREES {
        rust_files(&root().join(tree), &mut files);
    }
    files.sort();
    let mut bad = 0;
    for file in &files {
        let rel = file.strip_prefix(root()).unwrap_or(file).to_string_lossy().into_owned();
        if GENERATED.contains(&rel.as_str()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            println!("{rel}: unreadable");
            bad += 1;
            continue;
        };
        for (line, what) in unsafe_findings(&text) {
            println!("{rel}:{line}: {what}");
            bad += 1;
        }
    }
    tally.check(
        "every unsafe block and impl has a `// SAFETY:` comment, every unsafe fn a `# Safety` doc (src/, examples/)",
        bad == 0 && !files.is_empty(),
    );
}

/// The `.rs` files below `dir`, into `out`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// What is missing in a Rust file's unsafe code, by line (1-based):
///
/// - an `unsafe { .. }` block or an `unsafe impl` needs a comment holding
///   `SAFETY:` in the comment lines right above it, or above the statement
///   it is part of (a `let` or call spread over lines: the walk up goes
///   over lines that continue the expression, and over the arguments of a
///   call, but not past the end of another statement, a `{`, or a field or
///   match arm: those take their own comment);
/// - an `unsafe fn` needs `# Safety` in its doc, unless it implements a
///   trait's method (the trait documents it) or is in a macro's input (the
///   macro writes its doc; its own `unsafe fn` is checked where defined).
///
/// Attribute lines between comment and item are passed over. Comments,
/// strings and character literals are read as such: `unsafe {` in a doc
/// example or a string is not code.
pub fn unsafe_findings(text: &str) -> Vec<(usize, &'static str)> {
    let lines = lex(text);
    let toks = tokens(&lines);
    let n = lines.len();
    // Per line: the innermost bracket open where the line starts, and
    // whether its code is all attribute.
    let mut open_at_start: Vec<Option<char>> = vec![None; n + 1];
    let mut attr_only = vec![false; n];
    let mut code_toks = vec![0usize; n];
    let mut attr_toks = vec![0usize; n];
    // The stack of open brackets: the bracket, whether it opens the body of
    // a trait impl (`impl .. for .. {`), whether a macro's input (`name!{`).
    let mut stack: Vec<(char, bool, bool)> = Vec::new();
    // Per `unsafe` of an `unsafe fn`: whether its doc is another's (a trait
    // impl's method, or an item in a macro's input, which the macro documents).
    let mut doc_elsewhere = vec![false; toks.len()];
    let mut attr_depth: Option<usize> = None;
    let mut item_start = 0;
    let mut next_line = 0;
    for (i, t) in toks.iter().enumerate() {
        while next_line <= t.line {
            open_at_start[next_line] = stack.last().map(|b| b.0);
            next_line += 1;
        }
        code_toks[t.line] += 1;
        if attr_depth.is_none()
            && t.text == "#"
            && (toks.get(i + 1).is_some_and(|u| u.text == "[")
                || (toks.get(i + 1).is_some_and(|u| u.text == "!") && toks.get(i + 2).is_some_and(|u| u.text == "[")))
        {
            attr_depth = Some(stack.len());
        }
        if attr_depth.is_some() {
            attr_toks[t.line] += 1;
        }
        if t.text == "fn" && i > 0 && toks[i - 1].text == "unsafe" {
            doc_elsewhere[i - 1] = stack.last().is_some_and(|b| b.0 == '{' && b.1) || stack.iter().any(|b| b.2);
        }
        // `name!(`, `name![`, `name!{`: a macro's input.
        let macro_input =
            i >= 2 && toks[i - 1].text == "!" && toks[i - 2].text.starts_with(|c: char| c.is_alphabetic() || c == '_');
        match t.text.as_str() {
            "(" | "[" => stack.push((t.text.chars().next().unwrap_or('('), false, macro_input)),
            "{" => {
                let head = &toks[item_start..i];
                let trait_impl = head.iter().any(|u| u.text == "impl") && head.iter().any(|u| u.text == "for");
                stack.push(('{', trait_impl, macro_input));
                item_start = i + 1;
            }
            ")" | "]" | "}" => {
                stack.pop();
                if attr_depth == Some(stack.len()) && t.text == "]" {
                    attr_depth = None;
                }
                if t.text == "}" {
                    item_start = i + 1;
                }
            }
            ";" => item_start = i + 1,
            _ => {}
        }
    }
    while next_line <= n {
        open_at_start[next_line] = stack.last().map(|b| b.0);
        next_line += 1;
    }
    for l in 0..n {
        attr_only[l] = code_toks[l] > 0 && code_toks[l] == attr_toks[l];
    }

    // The first line of the statement, field or argument line `l` is in.
    let statement_start = |l: usize| {
        let mut s = l;
        while s > 0 {
            let code = lines[s - 1].code.trim();
            if code.is_empty() || attr_only[s - 1] {
                break;
            }
            match code.chars().last() {
                Some(';' | '{' | '}') => break,
                Some(',') if !matches!(open_at_start[s], Some('(' | '[')) => break,
                _ => s -= 1,
            }
        }
        s
    };
    // Whether the comment lines right above line `s` (attributes passed
    // over) hold `needle`.
    let comment_above = |s: usize, needle: &str| {
        let mut p = s;
        while p > 0 {
            p -= 1;
            if attr_only[p] {
                continue;
            }
            let line = &lines[p];
            if !line.code.trim().is_empty() || line.comment.trim().is_empty() {
                return false;
            }
            if line.comment.contains(needle) {
                return true;
            }
        }
        false
    };

    let mut found = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.text != "unsafe" {
            continue;
        }
        let after = |k: usize| toks.get(i + k).map_or("", |u| u.text.as_str());
        let is_ident = |k: usize| after(k).starts_with(|c: char| c.is_alphabetic() || c == '_');
        let missing = match after(1) {
            "{" if !comment_above(statement_start(t.line), "SAFETY:") => {
                "`unsafe` block without a `// SAFETY:` comment above it or its statement"
            }
            "impl" if !comment_above(statement_start(t.line), "SAFETY:") => {
                "`unsafe impl` without a `// SAFETY:` comment above it"
            }
            // A definition (`unsafe fn name`, `unsafe extern "C" fn name`),
            // not a pointer type (`unsafe fn(..)`).
            "fn" | "extern" => {
                let named = if after(1) == "fn" { is_ident(2) } else { after(2) == "fn" && is_ident(3) };
                if !named || doc_elsewhere[i] || comment_above(t.line, "# Safety") {
                    continue;
                }
                "`unsafe fn` without a `# Safety` section in its doc"
            }
            _ => continue,
        };
        found.push((t.line + 1, missing));
    }
    found
}

/// A line of Rust source: its code, with comments and the contents of
/// string and character literals blanked, and the text of its comments.
#[derive(Default)]
struct Line {
    code: String,
    comment: String,
}

/// Splits `text` into [`Line`]s.
fn lex(text: &str) -> Vec<Line> {
    enum State {
        Code,
        LineComment,
        Block(u32),
        Str,
        Raw(usize),
    }
    let ident = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let chars: Vec<char> = text.chars().collect();
    let mut lines = vec![Line::default()];
    let mut state = State::Code;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let at = |k: usize| chars.get(i + k).copied();
        if c == '\n' {
            if matches!(state, State::LineComment) {
                state = State::Code;
            }
            lines.push(Line::default());
            i += 1;
            continue;
        }
        let line = lines.last_mut().expect("one line at least");
        match state {
            State::Code => {
                if c == '/' && at(1) == Some('/') {
                    state = State::LineComment;
                    line.comment.push_str("//");
                    i += 2;
                    continue;
                }
                if c == '/' && at(1) == Some('*') {
                    state = State::Block(1);
                    line.comment.push_str("/*");
                    i += 2;
                    continue;
                }
                if c == '"' {
                    state = State::Str;
                    line.code.push(' ');
                } else if c == 'r'
                    && (!ident(i.checked_sub(1).and_then(|k| chars.get(k)))
                        || (matches!(chars[i - 1], 'b' | 'c') && !ident(i.checked_sub(2).and_then(|k| chars.get(k)))))
                    && {
                        let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                        at(1 + hashes) == Some('"')
                    }
                {
                    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                    state = State::Raw(hashes);
                    line.code.push_str(&" ".repeat(hashes + 2));
                    i += hashes + 2;
                    continue;
                } else if c == '\'' && (at(1) == Some('\\') || (at(1).is_some() && at(2) == Some('\''))) {
                    // A character literal (a lone `'` starts a lifetime).
                    let mut j = i + 1;
                    if at(1) == Some('\\') {
                        j += 2;
                    }
                    while j < chars.len() && chars[j] != '\'' && chars[j] != '\n' {
                        j += 1;
                    }
                    let end = (j + 1).min(chars.len());
                    line.code.push_str(&" ".repeat(end - i));
                    i = end;
                    continue;
                } else {
                    line.code.push(c);
                }
            }
            State::LineComment => line.comment.push(c),
            State::Block(depth) => {
                if c == '*' && at(1) == Some('/') {
                    state = if depth == 1 { State::Code } else { State::Block(depth - 1) };
                    line.comment.push_str("*/");
                    i += 2;
                    continue;
                }
                if c == '/' && at(1) == Some('*') {
                    state = State::Block(depth + 1);
                    line.comment.push_str("/*");
                    i += 2;
                    continue;
                }
                line.comment.push(c);
            }
            State::Str => {
                line.code.push(' ');
                if c == '\\' && at(1).is_some_and(|n| n != '\n') {
                    line.code.push(' ');
                    i += 1;
                } else if c == '"' {
                    state = State::Code;
                }
            }
            State::Raw(hashes) => {
                line.code.push(' ');
                if c == '"' && (1..=hashes).all(|k| at(k) == Some('#')) {
                    line.code.push_str(&" ".repeat(hashes));
                    state = State::Code;
                    i += hashes;
                }
            }
        }
        i += 1;
    }
    lines
}

/// A token of code: an identifier, keyword or number, or one other
/// character, with its line (0-based).
struct Tok {
    line: usize,
    text: String,
}

/// The tokens of the lines' code.
fn tokens(lines: &[Line]) -> Vec<Tok> {
    let mut out = Vec::new();
    for (line, l) in lines.iter().enumerate() {
        let mut word = String::new();
        for c in l.code.chars() {
            if c.is_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                out.push(Tok { line, text: std::mem::take(&mut word) });
            }
            if !c.is_whitespace() {
                out.push(Tok { line, text: c.to_string() });
            }
        }
        if !word.is_empty() {
            out.push(Tok { line, text: word });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_run_changed_is_what_git_status_gained() {
        let before = " M src/lib.rs\n?? notes.txt\n";
        assert!(changed(before, before).is_empty());
        let after = " M src/lib.rs\n M fuzz/Cargo.lock\n?? notes.txt\n?? tests/out.bin\n";
        assert_eq!(changed(before, after), [" M fuzz/Cargo.lock", "?? tests/out.bin"]);
        // A file the developer had changed and the run restored is no change of the run's.
        assert!(changed(before, "?? notes.txt\n").is_empty());
    }

    /// Unsafe code as the tree writes it: every block, impl and fn
    /// documented, in the shapes the check must follow.
    const SAMPLE: &str = r##"
/// Reads `p`.
///
/// # Safety
/// `p` is valid for reads.
#[inline]
pub unsafe fn read(p: *const u8) -> u8 {
    // SAFETY: the caller's contract.
    unsafe { *p }
}

/// # Safety
/// Never called.
pub(crate) const unsafe extern "C" fn callback(_: *mut u8) {}

forward! {
    /// The macro writes the safety section.
    pub unsafe fn forwarded(p: *mut u8) => op;
}

type Hook = unsafe extern "C" fn(*mut u8);
type Plain = Option<unsafe fn(*const u8) -> u8>;

// SAFETY: Thing holds no thread-bound state.
unsafe impl Send for Thing {}

// SAFETY: `destroy` frees the handle once, after its last use.
unsafe impl Destroy for Thing {
    unsafe fn destroy(&self) {
        // SAFETY: the handle is live.
        unsafe { free(self.0) };
    }
}

fn shapes(p: *const u8, q: &[u8]) -> u8 {
    // SAFETY: a statement spread over lines.
    let a =
        unsafe { read(p) };
    // SAFETY: an argument of a call spread over lines.
    let b = f(
        1,
        unsafe { read(p) },
    );
    let c = f(
        1,
        // SAFETY: an argument's own comment.
        unsafe { read(p) },
    );
    // SAFETY: a method chain.
    let d = q
        .iter()
        .map(|x| unsafe { read(x) })
        .sum();
    let e = match a {
        0 => 1,
        // SAFETY: a match arm's own comment.
        _ => unsafe { read(p) },
    };
    let s = "unsafe { not code }";
    let r = r#"unsafe { nor this }"#;
    let ch = '{';
    /* unsafe { nor a block comment } */
    // SAFETY: over an attribute.
    #[allow(clippy::identity_op)]
    let g = unsafe { read(p) } + 0;
    a + b + c + d + e + g
}
"##;

    #[test]
    fn documented_unsafe_passes() {
        assert_eq!(unsafe_findings(SAMPLE), []);
    }

    /// The mutated sample: every `SAFETY:` and `# Safety` in it is needed.
    /// Taking any one out gives one finding, at the item it documented.
    #[test]
    fn each_comment_taken_out_is_caught() {
        let lines: Vec<&str> = SAMPLE.lines().collect();
        let mut mutants = 0;
        for (k, l) in lines.iter().enumerate() {
            let mutated = if l.contains("SAFETY:") {
                l.replace("SAFETY:", "Note:")
            } else if l.contains("# Safety") {
                l.replace("# Safety", "# Notes")
            } else {
                continue;
            };
            let mut text: Vec<&str> = lines.clone();
            text[k] = &mutated;
            let found = unsafe_findings(&text.join("\n"));
            assert_eq!(found.len(), 1, "mutating line {}: {found:?}", k + 1);
            // The finding names the item below the comment (1-based lines).
            let at = found[0].0;
            assert!(at > k + 1 && at <= k + 6, "mutating line {}: found at {at}", k + 1);
            assert!(lines[at - 1].contains("unsafe"), "line {at}: {}", lines[at - 1]);
            mutants += 1;
        }
        assert_eq!(mutants, 12);
    }

    /// Shapes a comment elsewhere does not cover: a second block in the
    /// next statement, a field or arm below another's comment, a blank
    /// line between comment and block, a comment after the block.
    #[test]
    fn comments_elsewhere_do_not_count() {
        let cases = [
            "// SAFETY: the first.\nunsafe { a() };\nunsafe { b() };\n",
            "let s = S {\n    // SAFETY: the first.\n    a: unsafe { a() },\n    b: unsafe { b() },\n};\n",
            "match x {\n    // SAFETY: the first.\n    A => unsafe { a() },\n    B => unsafe { b() },\n}\n",
            "// SAFETY: too far.\n\nunsafe { a() };\n",
            "let x = unsafe { a() }; // SAFETY: after it.\n",
            "/// Reads.\npub unsafe fn f() {}\n",
            "unsafe impl Send for T {}\n",
        ];
        for case in cases {
            assert_eq!(unsafe_findings(case).len(), 1, "{case}");
        }
    }
}
