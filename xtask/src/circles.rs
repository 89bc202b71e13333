//! Import circles: files of the workspace that import each other, two
//! directly or more around a loop (`a` -> `b` -> `c` -> `a`).
//!
//! Every crate's module tree is read from its root file through its `mod`
//! declarations (files `name.rs` or `name/mod.rs`, inline `mod name { .. }`
//! blocks). A file imports another when one of its paths names a module of
//! the other: a `use` tree (`crate::..`, `super::..`, `self::..`, or a child
//! module's name), or a `crate::`/`super::`/`self::` path anywhere in its
//! code, macros included. The path's longest prefix that is a module decides
//! the file it names.
//!
//! Not imports: a module naming its own descendants (`mod child;`,
//! `pub use child::Item;`, `crate::prim::cq::Cq` from `prim/mod.rs`): that
//! is the tree itself, so a child may use its parent's items (`super::Item`,
//! `crate::prim::Item`); and code under `#[cfg(test)]`: tests may reach
//! across the layers they check.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// The circles the workspace keeps, with the reason: (file, file, reason),
/// the files as workspace-relative paths.
pub const ALLOWED: &[(&str, &str, &str)] = &[];

/// The crate roots checked by `cargo xtask test`, relative to the workspace.
pub const ROOTS: &[&str] = &["src/lib.rs", "xtask/src/main.rs", "perf/src/main.rs"];

/// One file importing another, with the first path that does it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// The importing file.
    pub from: PathBuf,
    /// The imported file.
    pub to: PathBuf,
    /// The path that imports it, as written (`super::pd::Pd`).
    pub path: String,
}

/// Files that import each other, directly or around a longer loop:
/// `files[i]` imports `files[i + 1]` (and the last the first) by `paths[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Circle {
    /// The files around the loop, starting with the first in path order.
    pub files: Vec<PathBuf>,
    /// How each file imports the next.
    pub paths: Vec<String>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.files.len() == 2 {
            write!(f, "{} and {} import each other", self.files[0].display(), self.files[1].display())?;
        } else {
            let names: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
            write!(f, "{} import each other around a loop", names.join(", "))?;
        }
        let steps: Vec<String> = (0..self.files.len())
            .map(|i| {
                let next = &self.files[(i + 1) % self.files.len()];
                format!("{} uses `{}` of {}", self.files[i].display(), self.paths[i], next.display())
            })
            .collect();
        write!(f, " ({})", steps.join("; "))
    }
}

/// A crate's modules: module path (`["prim", "pd"]`) -> the file holding it.
type Modules = BTreeMap<Vec<String>, PathBuf>;

/// Reads the module tree under `root` (a crate root file) into `mods`.
fn read_tree(root: &Path) -> Result<(Modules, Vec<(PathBuf, syn::File)>), String> {
    let mut mods = Modules::new();
    let mut files = Vec::new();
    // (file, its module path, the directory its `mod x;` children live in)
    let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut todo = vec![(root.to_path_buf(), Vec::new(), dir)];
    while let Some((file, module, child_dir)) = todo.pop() {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let ast = syn::parse_file(&text).map_err(|e| format!("{}: cannot parse: {e}", file.display()))?;
        // A module declared twice under exclusive `cfg`s (`#[path]` to two
        // files): the second file gets a key of its own.
        let mut key = module.clone();
        while mods.get(&key).is_some_and(|f| f != &file) {
            match key.last_mut() {
                Some(last) => last.push_str("#cfg"),
                None => break,
            }
        }
        mods.insert(key, file.clone());
        declare(&ast.items, &file, &module, &child_dir, &mut mods, &mut todo)?;
        files.push((file, ast));
    }
    Ok((mods, files))
}

type Todo = Vec<(PathBuf, Vec<String>, PathBuf)>;

/// The file a `#[path = "..."]` attribute names, if the module has one.
fn path_attr(m: &syn::ItemMod) -> Option<String> {
    m.attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Records the modules that `items` (of `file`, module `module`) declare.
fn declare(
    items: &[syn::Item],
    file: &Path,
    module: &[String],
    child_dir: &Path,
    mods: &mut Modules,
    todo: &mut Todo,
) -> Result<(), String> {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let name = m.ident.to_string();
        let mut path = module.to_vec();
        path.push(name.clone());
        match &m.content {
            Some((_, inner)) => {
                mods.insert(path.clone(), file.to_path_buf());
                declare(inner, file, &path, &child_dir.join(&name), mods, todo)?;
            }
            None if path_attr(m).is_some() => {
                // `#[path = "x.rs"]`: relative to the declaring file's folder.
                let rel = path_attr(m).unwrap_or_default();
                let found = file.parent().unwrap_or(Path::new(".")).join(&rel);
                if !found.exists() {
                    return Err(format!("{}: `#[path = {rel:?}] mod {name};` has no file", file.display()));
                }
                todo.push((found, path, child_dir.join(&name)));
            }
            None => {
                let flat = child_dir.join(format!("{name}.rs"));
                let nested = child_dir.join(&name).join("mod.rs");
                let found = if flat.exists() {
                    flat
                } else if nested.exists() {
                    nested
                } else {
                    return Err(format!("{}: `mod {name};` has no file {}", file.display(), flat.display()));
                };
                todo.push((found, path, child_dir.join(&name)));
            }
        }
    }
    Ok(())
}

/// Collects the module paths one file names, per inline scope.
struct Refs<'m> {
    mods: &'m Modules,
    /// The module the visitor is in (the file's, then inline ones).
    scope: Vec<String>,
    /// (resolved module path, the path as written)
    found: Vec<(Vec<String>, String)>,
}

impl Refs<'_> {
    /// Resolves `segs` (as written in scope `self.scope`) to the deepest
    /// module it names; `use_tree`: a bare first segment may name a child.
    fn add(&mut self, segs: &[String], use_tree: bool) {
        let Some(first) = segs.first() else { return };
        let (mut base, mut rest) = match first.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (self.scope.clone(), &segs[1..]),
            "super" => {
                let mut base = self.scope.clone();
                let mut rest = segs;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            name if use_tree => {
                let mut child = self.scope.clone();
                child.push(name.to_string());
                if !self.mods.contains_key(&child) {
                    return;
                }
                (self.scope.clone(), segs)
            }
            _ => return,
        };
        while let Some(s) = rest.first() {
            let mut next = base.clone();
            next.push(s.clone());
            if !self.mods.contains_key(&next) {
                break;
            }
            base = next;
            rest = &rest[1..];
        }
        self.found.push((base, segs.join("::")));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, Some(n.ident.to_string())),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, Some(r.ident.to_string())),
            syn::UseTree::Glob(_) => self.use_leaf(prefix, None),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &[String], last: Option<String>) {
        let mut segs = prefix.to_vec();
        // `use super::x::{self}` names `super::x`.
        segs.extend(last.filter(|l| l != "self" || prefix.is_empty()));
        self.add(&segs, true);
    }

    /// `crate::a::b`-like paths inside a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            match &flat[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if matches!(id.to_string().as_str(), "crate" | "super" | "self") => {
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(n))) =
                        (flat.get(j), flat.get(j + 1), flat.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segs.push(n.to_string());
                        j += 3;
                    }
                    if segs.len() > 1 {
                        self.add(&segs, false);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(l) => l.path.is_ident("cfg") && l.tokens.to_string().trim() == "test",
        _ => false,
    })
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            _ => return visit::visit_item(self, item),
        };
        if !test_only(attrs) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.scope.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.scope.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() > 1 {
            self.add(&segs, false);
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }

    // `pub(in crate::x)` grants visibility; it imports nothing.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}
}

/// Every import between two different files of the crate rooted at `root`.
pub fn imports(root: &Path) -> Result<Vec<Import>, String> {
    let (mods, files) = read_tree(root)?;
    let by_file: BTreeMap<&PathBuf, Vec<String>> = mods.iter().filter(|(_, f)| f.exists()).fold(
        BTreeMap::new(),
        |mut m: BTreeMap<&PathBuf, Vec<String>>, (module, file)| {
            // A file's own module is its shortest module path.
            let e = m.entry(file).or_insert_with(|| module.clone());
            if module.len() < e.len() {
                *e = module.clone();
            }
            m
        },
    );
    let mut out = Vec::new();
    for (file, ast) in &files {
        let own = &by_file[file];
        let mut refs = Refs { mods: &mods, scope: own.clone(), found: Vec::new() };
        refs.visit_file(ast);
        let mut seen = BTreeSet::new();
        for (module, path) in refs.found {
            let to = &mods[&module];
            // The file's own descendants are its tree, not imports.
            if to != file && !module.starts_with(own) && seen.insert(to.clone()) {
                out.push(Import { from: file.clone(), to: to.clone(), path });
            }
        }
    }
    Ok(out)
}

/// The circles among `imports`: one per group of files that reach each
/// other (a strongly connected component of the import graph), shown as the
/// shortest loop through its first file; in path order.
pub fn circles(imports: &[Import]) -> Vec<Circle> {
    let mut next: BTreeMap<&PathBuf, Vec<&Import>> = BTreeMap::new();
    for i in imports {
        next.entry(&i.from).or_default().push(i);
    }
    // Files reachable from `start` (BFS), with the import that reached each first.
    let reach = |start: &PathBuf| {
        let mut came: BTreeMap<&PathBuf, &Import> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(f) = queue.pop_front() {
            for i in next.get(f).into_iter().flatten() {
                if !came.contains_key(&i.to) {
                    came.insert(&i.to, i);
                    queue.push_back(&i.to);
                }
            }
        }
        came
    };
    let mut out = Vec::new();
    let mut done: BTreeSet<&PathBuf> = BTreeSet::new();
    let files: BTreeSet<&PathBuf> = imports.iter().map(|i| &i.from).collect();
    for start in files {
        if done.contains(start) {
            continue;
        }
        let from_start = reach(start);
        let Some(mut step) = from_start.get(start).copied() else { continue };
        // The group: the files `start` reaches that reach it back.
        for f in from_start.keys() {
            if reach(f).contains_key(start) {
                done.insert(f);
            }
        }
        // Walk the BFS tree back from `start` to itself: the shortest loop.
        let mut files = vec![step.from.clone()];
        let mut paths = vec![step.path.clone()];
        while &step.from != start {
            step = from_start[&step.from];
            files.push(step.from.clone());
            paths.push(step.path.clone());
        }
        files.reverse();
        paths.reverse();
        out.push(Circle { files, paths });
    }
    out
}

/// The circles of the crates at `roots` (files under `base`), paths shown
/// relative to `base`, less the `allowed` ones.
pub fn find(base: &Path, roots: &[&str], allowed: &[(&str, &str, &str)]) -> Result<Vec<Circle>, String> {
    let mut found = Vec::new();
    for root in roots {
        let mut all = imports(&base.join(root))?;
        for i in &mut all {
            i.from = i.from.strip_prefix(base).unwrap_or(&i.from).to_path_buf();
            i.to = i.to.strip_prefix(base).unwrap_or(&i.to).to_path_buf();
        }
        found.extend(circles(&all));
    }
    let is_allowed = |c: &Circle| {
        allowed.iter().any(|(a, b, _)| {
            let (a, b) = (Path::new(a), Path::new(b));
            c.files.iter().any(|f| f == a) && c.files.iter().any(|f| f == b)
        })
    };
    found.retain(|c| !is_allowed(c));
    Ok(found)
}

/// `cargo xtask test`'s check: no files of the workspace import each other,
/// directly or around a loop (other than [`ALLOWED`]); prints each circle.
pub fn check(tally: &mut crate::tally::Tally) {
    match find(&crate::root(), ROOTS, ALLOWED) {
        Ok(found) => {
            for c in &found {
                println!("import circle: {c}");
            }
            for (a, b, why) in ALLOWED {
                println!("import circle kept: {a} <-> {b}: {why}");
            }
            tally.check("no import circles between files", found.is_empty());
        }
        Err(e) => {
            println!("import circles: {e}");
            tally.check("no import circles between files", false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up crate in a fresh directory: `files` are (path, text).
    fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-circles-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    const LIB: &str = "mod a; mod b; pub mod c; fn f() {}";

    #[test]
    fn two_files_that_import_each_other_are_named() {
        let dir = tree(
            "pair",
            &[
                ("lib.rs", LIB),
                ("a.rs", "use crate::b::X; pub struct Y;"),
                ("b.rs", "use super::a::Y; pub struct X;"),
                ("c/mod.rs", "mod d; pub use d::Z;"),
                ("c/d.rs", "pub struct Z; fn g() -> crate::a::Y { crate::a::Y }"),
            ],
        );
        let found = find(&dir, &["lib.rs"], &[]).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let c = &found[0];
        assert_eq!(c.files, [Path::new("a.rs"), Path::new("b.rs")]);
        assert_eq!(c.paths, ["crate::b::X", "super::a::Y"]);
        let text = c.to_string();
        assert!(text.contains("a.rs") && text.contains("b.rs"), "{text}");
        // Allowed, it is no longer reported.
        assert!(find(&dir, &["lib.rs"], &[("b.rs", "a.rs", "inherent")]).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn paths_in_code_macros_and_nested_modules_count() {
        let dir = tree(
            "nested",
            &[
                ("lib.rs", LIB),
                ("a.rs", "fn f() { println!(\"{}\", crate::c::d::N); }"),
                ("b.rs", ""),
                ("c/mod.rs", "mod d;"),
                // `super::super::a` from a nested file names a.rs; `self::`
                // of its own module is no import.
                ("c/d.rs", "pub const N: u8 = 1; fn g() { let _ = super::super::a::h(); self::g2(); } fn g2() {}"),
            ],
        );
        let all = imports(&dir.join("lib.rs")).unwrap();
        let has = |from: &str, to: &str| all.iter().any(|i| i.from.ends_with(from) && i.to.ends_with(to));
        assert!(has("a.rs", "c/d.rs"), "{all:?}");
        assert!(has("c/d.rs", "a.rs"), "{all:?}");
        assert!(!has("c/d.rs", "c/d.rs"));
        let found = find(&dir, &["lib.rs"], &[]).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_parent_declaring_and_calling_its_child_is_no_circle() {
        let dir = tree(
            "tree",
            &[
                ("lib.rs", "mod a; mod b; mod c; fn f() { a::g(); } pub fn root_item() {}"),
                ("a.rs", "use crate::root_item; pub fn g() { root_item() } #[cfg(test)] mod tests { use super::*; }"),
                // Tests may reach across: b's test uses a, a uses b.
                ("b.rs", "pub fn h() { crate::a::g() }"),
                (
                    "c/mod.rs",
                    "mod d; pub use self::d::D; pub use d::E; pub struct F; fn f() -> crate::c::d::D { d::D }",
                ),
                (
                    "c/d.rs",
                    "pub struct D; pub struct E; fn f() -> super::F { super::F } #[cfg(test)] fn t() { crate::b::h() }",
                ),
            ],
        );
        assert!(find(&dir, &["lib.rs"], &[]).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Under `#[cfg(test)]` nothing counts; the same path outside does.
    #[test]
    fn test_code_is_left_out() {
        let files = |gate: &'static str| {
            [
                ("lib.rs", "mod a; mod b;"),
                ("a.rs", "pub fn f() { crate::b::g() }"),
                ("b.rs", if gate.is_empty() { "pub fn g() {} fn t() { crate::a::f() }" } else { gate }),
            ]
        };
        let gated = tree("gated", &files("pub fn g() {} #[cfg(test)] mod tests { fn t() { crate::a::f() } }"));
        assert!(find(&gated, &["lib.rs"], &[]).unwrap().is_empty());
        let open = tree("open", &files(""));
        assert_eq!(find(&open, &["lib.rs"], &[]).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&gated);
        let _ = std::fs::remove_dir_all(&open);
    }

    /// A loop of three and one of four files, each import written another
    /// way: a `use` line, a path in code, a path in a macro, `super::`.
    #[test]
    fn loops_longer_than_two_are_named_with_every_step() {
        let dir = tree(
            "loops",
            &[
                ("lib.rs", "mod a; mod b; mod c; mod p;"),
                ("a.rs", "use crate::b::B; pub struct A;"),
                ("b.rs", "pub struct B; fn f() -> crate::c::C { crate::c::C }"),
                ("c.rs", "pub struct C; fn f() { let _ = std::mem::size_of::<u8>(); g!(crate::a::A); }"),
                ("p/mod.rs", "mod e; mod h; mod k; mod m;"),
                ("p/e.rs", "use super::h::H; pub struct E;"),
                ("p/h.rs", "pub struct H; fn f(_: super::k::K) {}"),
                ("p/k.rs", "pub struct K; use crate::p::m::M;"),
                ("p/m.rs", "pub struct M; fn f(_: &super::e::E) {}"),
            ],
        );
        let found = find(&dir, &["lib.rs"], &[]).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        let three = found.iter().find(|c| c.files.len() == 3).expect("the loop of three");
        assert_eq!(three.files, [Path::new("a.rs"), Path::new("b.rs"), Path::new("c.rs")]);
        assert_eq!(three.paths, ["crate::b::B", "crate::c::C", "crate::a::A"]);
        let four = found.iter().find(|c| c.files.len() == 4).expect("the loop of four");
        assert_eq!(four.files[0], Path::new("p/e.rs"));
        assert_eq!(four.paths, ["super::h::H", "super::k::K", "crate::p::m::M", "super::e::E"]);
        let text = four.to_string();
        assert!(text.contains("p/k.rs uses `crate::p::m::M` of p/m.rs"), "{text}");
        // Break one step: no loop is left there.
        std::fs::write(dir.join("p/m.rs"), "pub struct M;").unwrap();
        assert_eq!(find(&dir, &["lib.rs"], &[]).unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The workspace itself has none (beyond the allowed ones).
    #[test]
    fn the_workspace_has_no_circles() {
        let found = find(&crate::root(), ROOTS, ALLOWED).unwrap();
        let text: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert!(found.is_empty(), "{}", text.join("\n"));
    }
}
