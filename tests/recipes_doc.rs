//! docs/recipes.md quotes the recipes of examples/recipes.rs verbatim: each
//! `// recipe: NAME` ... `// end recipe` region is a code block of the page,
//! in order, and the page has no other Rust block.

fn regions(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("\n// recipe: ") {
        let body = &rest[i + 1..];
        let start = body.find('\n').expect("a line after the marker") + 1;
        let end = body.find("\n// end recipe\n").expect("every recipe ends") + 1;
        out.push(body[start..end].trim_end().to_string());
        rest = &body[end..];
    }
    out
}

fn code_blocks(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = md;
    while let Some(i) = rest.find("```rust") {
        let body = &rest[i..];
        let start = body.find('\n').expect("a line after the fence") + 1;
        let end = start + body[start..].find("\n```").expect("a closing fence");
        out.push(body[start..end].trim_end().to_string());
        rest = &body[end + 4..];
    }
    out
}

#[test]
fn the_recipes_page_quotes_the_example_verbatim() {
    let root = env!("CARGO_MANIFEST_DIR");
    let src = std::fs::read_to_string(format!("{root}/examples/recipes.rs")).expect("examples/recipes.rs");
    let md = std::fs::read_to_string(format!("{root}/docs/recipes.md")).expect("docs/recipes.md");
    let (code, quoted) = (regions(&src), code_blocks(&md));
    assert_eq!(code.len(), 7, "seven recipes");
    assert_eq!(quoted.len(), code.len(), "one code block per recipe");
    for (i, (c, q)) in code.iter().zip(&quoted).enumerate() {
        assert_eq!(c, q, "recipe {i} of docs/recipes.md differs from examples/recipes.rs");
    }
}
