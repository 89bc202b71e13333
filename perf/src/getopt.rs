//! Reading a flag's value as perftest's getopt takes it (`-s64`, `-s 64`,
//! `--size=64`, `--size 64`), for every parser of the tool.

/// The value of the flag being parsed, as text (non-UTF-8 is an error).
pub fn text(p: &mut lexopt::Parser, flag: &str) -> Result<String, String> {
    let v = p.value().map_err(|e| format!("{flag}: {e}"))?;
    v.into_string().map_err(|v| format!("{flag}: {v:?} is not valid UTF-8"))
}

/// The value of the flag being parsed, as a number.
pub fn num<T: std::str::FromStr>(p: &mut lexopt::Parser, flag: &str) -> Result<T, String> {
    let v = text(p, flag)?;
    v.parse().map_err(|_| format!("{flag}: {v:?} is not a valid number"))
}
