//! The instruction gate: callgrind's counts repeat to the instruction, so
//! each row's count is recorded in a committed file and a later count above
//! it by more than the file's margin fails a check that names the row.
//!
//! Reusable for any table of rows (the direct-path rows of `bench-wqe`, the
//! verbs rows of `bench-verbs`): measure the rows, then [`check`] them
//! against their file; [`record`] writes the file. The file (JSON):
//!
//! ```text
//! { "what": "...", "margin_percent": 1.0,
//!   "rows": { "write": { "rrddmma": 91.9, "c": 62.0 }, ... } }
//! ```
//!
//! `rrddmma` is the gated count; `c`, the reference's, is recorded too:
//! when it moves by more than the margin the toolchain (or the C side)
//! changed, and the check's output says so (re-record after a look), but
//! only a rise of ours fails.

use std::collections::BTreeMap;
use std::path::Path;

use crate::tally::Tally;
use crate::Result;

/// One measured row: its name, our count and the reference's (C), in
/// instructions per operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The row's name (the key in the counts file).
    pub row: String,
    /// rrddmma's count.
    pub ours: f64,
    /// The reference's count (C), when the row has one.
    pub reference: Option<f64>,
}

/// A counts file: the margin and each row's recorded counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Counts {
    /// How far above its recorded count a row may measure, in percent.
    pub margin_percent: f64,
    /// Recorded (ours, reference) per row.
    pub rows: BTreeMap<String, (f64, Option<f64>)>,
}

/// The margin a new counts file states.
pub const DEFAULT_MARGIN_PERCENT: f64 = 1.0;

/// Reads a counts file.
pub fn read(path: &Path) -> Result<Counts> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}

fn parse(text: &str) -> std::result::Result<Counts, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let margin_percent =
        v["margin_percent"].as_f64().ok_or("no number \"margin_percent\" (the allowed rise, in percent)")?;
    let mut rows = BTreeMap::new();
    for (name, r) in v["rows"].as_object().ok_or("no object \"rows\"")? {
        let ours = r["rrddmma"].as_f64().ok_or_else(|| format!("row {name}: no number \"rrddmma\""))?;
        rows.insert(name.clone(), (ours, r["c"].as_f64()));
    }
    Ok(Counts { margin_percent, rows })
}

/// Writes `measured` as the counts file at `path` (the margin kept from
/// the file there, else [`DEFAULT_MARGIN_PERCENT`]), under `what`.
pub fn record(path: &Path, what: &str, measured: &[Measured]) -> Result<()> {
    let margin = read(path).map(|c| c.margin_percent).unwrap_or(DEFAULT_MARGIN_PERCENT);
    let mut rows = serde_json::Map::new();
    for m in measured {
        let mut r = serde_json::Map::new();
        r.insert("rrddmma".into(), serde_json::json!(round2(m.ours)));
        if let Some(c) = m.reference {
            r.insert("c".into(), serde_json::json!(round2(c)));
        }
        rows.insert(m.row.clone(), r.into());
    }
    let v = serde_json::json!({ "what": what, "margin_percent": margin, "rows": rows });
    std::fs::write(path, serde_json::to_string_pretty(&v)? + "\n")?;
    println!("recorded {} rows in {}", measured.len(), path.display());
    Ok(())
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The verdict on `measured` against `counts`: the failures (a row above
/// its recorded count by more than the margin, or a row the file does not
/// have), and notes (a reference count that moved, a row faster than
/// recorded: re-record to tighten).
pub fn judge(counts: &Counts, measured: &[Measured]) -> (Vec<String>, Vec<String>) {
    let (mut fail, mut note) = (Vec::new(), Vec::new());
    let limit = |x: f64| x * (1.0 + counts.margin_percent / 100.0);
    for m in measured {
        let Some(&(ours, reference)) = counts.rows.get(&m.row) else {
            fail.push(format!("{}: no recorded count (measured {:.2}); record the rows", m.row, m.ours));
            continue;
        };
        if m.ours > limit(ours) + 1e-9 {
            fail.push(format!(
                "{}: {:.2} instructions, recorded {ours:.2} (+{:.1}%, the margin is {}%)",
                m.row,
                m.ours,
                (m.ours / ours - 1.0) * 100.0,
                counts.margin_percent
            ));
        } else if m.ours < ours / (1.0 + counts.margin_percent / 100.0) {
            note.push(format!(
                "{}: {:.2}, below its recorded {ours:.2}: record the rows to keep the gain",
                m.row, m.ours
            ));
        }
        if let (Some(c), Some(rc)) = (m.reference, reference) {
            if (c - rc).abs() > rc * counts.margin_percent / 100.0 {
                note.push(format!(
                    "{}: the C count moved, {c:.2} against {rc:.2} recorded (a toolchain change? look, then record)",
                    m.row
                ));
            }
        }
    }
    (fail, note)
}

/// Checks `measured` against the counts file at `path`, as one check named
/// `instruction gate: N {what} at or below their recorded counts (+M%)`;
/// a failure lists each row above its count with the recorded and the
/// measured count.
pub fn check(tally: &mut Tally, what: &str, path: &Path, measured: &[Measured]) {
    let counts = match read(path) {
        Ok(c) => c,
        Err(e) => {
            tally.check(&format!("instruction gate: {what} ({e})"), false);
            return;
        }
    };
    let (fail, note) = judge(&counts, measured);
    for n in &note {
        println!("  note: {n}");
    }
    let name = format!(
        "instruction gate: {} {what} at or below their recorded counts (+{}%, {})",
        measured.len(),
        counts.margin_percent,
        path.strip_prefix(crate::root()).unwrap_or(path).display()
    );
    let out: String = fail.iter().map(|f| format!("above its recorded count: {f}\n")).collect();
    print!("{out}");
    tally.check_output(&name, fail.is_empty() && !measured.is_empty(), &out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> Counts {
        parse(r#"{"margin_percent": 1.0, "rows": {"write": {"rrddmma": 100.0, "c": 60.0}, "poll": {"rrddmma": 20.0}}}"#)
            .unwrap()
    }

    fn m(row: &str, ours: f64, reference: Option<f64>) -> Measured {
        Measured { row: row.into(), ours, reference }
    }

    #[test]
    fn a_rise_beyond_the_margin_fails_naming_the_row_and_both_counts() {
        let (fail, _) = judge(&counts(), &[m("write", 101.0, Some(60.0)), m("poll", 20.2, None)]);
        assert!(fail.is_empty(), "{fail:?}");
        let (fail, _) = judge(&counts(), &[m("write", 101.2, Some(60.0))]);
        assert_eq!(fail.len(), 1);
        assert!(fail[0].starts_with("write: 101.20 instructions, recorded 100.00"), "{}", fail[0]);
    }

    #[test]
    fn an_unrecorded_row_fails_and_a_moved_reference_is_noted() {
        let (fail, note) = judge(&counts(), &[m("tso", 50.0, None), m("write", 90.0, Some(70.0))]);
        assert!(fail.len() == 1 && fail[0].starts_with("tso: no recorded count"), "{fail:?}");
        assert!(note.iter().any(|n| n.contains("C count moved")), "{note:?}");
        assert!(note.iter().any(|n| n.contains("below its recorded")), "{note:?}");
    }
}
