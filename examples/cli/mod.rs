//! The operands of an example that takes no flags, read with `lexopt` (the
//! grammar of every binary here): `-h`/`--help` prints the usage and exits 0;
//! an unknown flag or an argument that is not UTF-8 prints the reason and
//! the usage and exits 2.

/// The operands after the program name, or exit as above.
pub fn operands(usage: &str) -> Vec<String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_env();
    let mut out = Vec::new();
    let fail = |e: lexopt::Error| -> ! {
        eprintln!("{e}\n{usage}");
        std::process::exit(2)
    };
    loop {
        match p.next() {
            Ok(None) => return out,
            Ok(Some(Short('h') | Long("help"))) => {
                println!("{usage}");
                std::process::exit(0)
            }
            Ok(Some(Value(v))) => out.push(v.string().unwrap_or_else(|e| fail(e))),
            Ok(Some(other)) => fail(other.unexpected()),
            Err(e) => fail(e),
        }
    }
}
