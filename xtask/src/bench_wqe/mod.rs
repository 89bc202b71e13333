//! `cargo xtask bench-wqe [--record | --gate] [ROW..]`: instructions per direct WQE
//! (or completion), one row per kind, counted by callgrind as the
//! difference between runs of [`N`] and 0 iterations (start-up cancels),
//! for three programs doing the same work:
//!
//! - C with the `mlx5dv.h` helpers, following libmlx5's sequence
//!   (benches/wqe_cost/wqe_cost.c, `wqe_cost_c ROW N`);
//! - libmlx5 v59's own entries on the libmlx5 harness's fabricated objects
//!   (benches/wqe_cost/wqe_cost_mlx5.c linked with the pinned source build's
//!   `libmlx5.a`, [`mlx5`]);
//! - rrddmma's typed builders (examples/wqe_cost.rs, `wqe_cost ROW N`).
//!
//! Each posts through a send queue and a CQ of plain memory, the CQ written
//! by the program as the device would: at half a ring outstanding, a
//! completion for the last WQE, polled, and the ring freed through it.
//!
//! `--record` writes the counts to benches/wqe_cost/counts.json, which the
//! instruction gate of `cargo xtask test` ([`gate_check`], through
//! [`gate::check`]) holds the rows to; `--gate` runs that gate alone.

pub mod gate;
mod kernel;
mod mlx5;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::callgrind::collected;
use crate::tally::Tally;
use crate::{root, run as run_cmd, Result};

/// The longer run's iterations (WQEs; the batch row's are 32 per doorbell).
/// Counts repeat to the instruction, so a small N suffices; a multiple of
/// the 32 WQEs between completions, so every run ends at the same phase.
pub const N: u64 = 20_000;

/// The rows: program argument and what one operation is.
pub const ROWS: &[(&str, &str)] = &[
    ("write", "RC RDMA WRITE, one 64 B data segment"),
    ("write_inline32", "RC RDMA WRITE, 32 B inline"),
    ("send", "RC SEND, one data segment"),
    ("read", "RC RDMA READ"),
    ("cas", "RC compare-and-swap, 8 B"),
    ("fetch_add", "RC fetch-and-add, 8 B"),
    ("masked_cas8", "RC masked compare-and-swap, 8 B"),
    ("masked_cas16", "RC masked compare-and-swap, 16 B"),
    ("dc_write", "DC RDMA WRITE on a DCI stream (typed)"),
    ("batch32", "32 RC WRITEs, one doorbell (per WQE)"),
    ("umr_klm4", "UMR: mkey over a four-entry KLM list"),
    ("tag_add", "tag matching: tag add on the SRQ's command QP"),
    ("eth42", "raw packet SEND, a 42 B packet all inline (18 B in the Ethernet segment)"),
    ("tso", "raw packet TSO (54 B headers, MSS 1448)"),
    ("mprq", "striding RQ: one striding WQE posted"),
    ("poll", "one completion polled (64 B CQE)"),
    ("zip", "one CQE of a compressed session (mini-CQE expanded)"),
];

/// Why a column has no count for a row (printed as a footnote).
const NOT_APPLICABLE: &[(&str, Column, &str)] = &[
    (
        "masked_cas8",
        Column::Libmlx5,
        "libmlx5 v59 posts no masked atomics (no IBV_WR_* or mlx5dv_wr_* entry writes opcode 0x14)",
    ),
    (
        "masked_cas16",
        Column::Libmlx5,
        "libmlx5 of rdma-core has no path that writes extended (16- and 32-byte) masked atomics",
    ),
    (
        "zip",
        Column::Libmlx5,
        "libmlx5 does not expand compressed CQEs (a direct user does); the C side follows the kernel's mlx5e \
         decompression",
    ),
];

/// What a measured column runs for a row where it is not plain to see
/// (printed as a footnote beside the count).
const COLUMN_NOTES: &[(&str, Column, &str)] = &[
    (
        "tag_add",
        Column::Libmlx5,
        "mlx5_post_srq_ops (ibv_post_srq_ops) on the harness's tag-matching SRQ (tests/provider/tm.c), the signaled \
         add's completion through the extended poller; the list holds 65535 tags on every side, more than a run adds",
    ),
    (
        "mprq",
        Column::Libmlx5,
        "ibv_post_wq_recv (mlx5_post_wq_recv) on the harness's striding WQ (tests/provider/mprq.c), polled with \
         mlx5_poll_cq; libmlx5 does not lay out a striding WQE (its data segment at the WQE's first byte, where \
         struct mlx5_mprq_wqe has the next segment) nor count strides (the WQE's id taken from the stride index, the \
         ring freed per CQE): with one CQE per WQE that sequence does the same amount of work",
    ),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    C,
    Libmlx5,
    Rrddmma,
}

/// The counts file of the gate.
pub fn counts_file() -> PathBuf {
    root().join("benches/wqe_cost/counts.json")
}

/// Builds the Rust and C programs (the libmlx5 one is [`mlx5::build`]).
fn build() -> Result<(PathBuf, PathBuf)> {
    run_cmd(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--example", "wqe_cost"]))?;
    let c_exe = root().join("target/xtask/wqe_cost_c");
    std::fs::create_dir_all(root().join("target/xtask"))?;
    run_cmd(
        Command::new("cc")
            .args(["-O2", "-Wall", "-Werror", "-o"])
            .arg(&c_exe)
            .arg(root().join("benches/wqe_cost/wqe_cost.c")),
    )?;
    Ok((root().join("target/release/examples/wqe_cost"), c_exe))
}

/// Instructions callgrind counted for `exe args`.
fn instructions(exe: &Path, args: &[&str]) -> Result<u64> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--vgdb=no", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| format!("valgrind: {e} (Debian: apt-get install valgrind; `cargo xtask deps`)"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{} {}: {}\n{err}", exe.display(), args.join(" "), out.status).into());
    }
    collected(&err).ok_or_else(|| format!("no instruction count from callgrind:\n{err}").into())
}

/// The rows a program knows (`PROGRAM --rows`).
fn rows_of(exe: &Path) -> Result<Vec<String>> {
    let out = Command::new(exe).arg("--rows").output().map_err(|e| format!("{}: {e}", exe.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect())
}

/// Per-operation counts of `(exe, row)` pairs, two callgrind runs each,
/// two at a time (the machine's cores).
fn measure(jobs: &[(PathBuf, String)]) -> Result<Vec<f64>> {
    let runs: Vec<(usize, u64)> = (0..jobs.len()).flat_map(|j| [(j, N), (j, 0)]).collect();
    let next = Mutex::new(0usize);
    let results = Mutex::new(vec![(0u64, 0u64); jobs.len()]);
    let error = Mutex::new(None);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let k = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(&(j, n)) = runs.get(k) else { break };
                let (exe, row) = &jobs[j];
                match instructions(exe, &[row, &n.to_string()]) {
                    Ok(c) => {
                        let mut r = results.lock().unwrap();
                        if n == 0 {
                            r[j].1 = c;
                        } else {
                            r[j].0 = c;
                        }
                    }
                    Err(e) => *error.lock().unwrap() = Some(e.to_string()),
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap() {
        return Err(e.into());
    }
    Ok(results.into_inner().unwrap().into_iter().map(|(n, z)| (n as f64 - z as f64) / N as f64).collect())
}

/// The rows whose rings the C and Rust programs leave byte for byte
/// different (`WQE_COST_DUMP=1` prints a program's ring after a run), at
/// two run lengths: the two sides must build the same WQEs for their
/// counts to compare.
fn ring_mismatches(rust: &Path, c: &Path) -> Result<Vec<String>> {
    let (r_rows, c_rows) = (rows_of(rust)?, rows_of(c)?);
    let mut bad = Vec::new();
    for row in r_rows.iter().filter(|r| c_rows.contains(r) && !matches!(r.as_str(), "poll" | "zip")) {
        for n in ["100", "130"] {
            let dump = |exe: &Path| -> Result<Vec<u8>> {
                let out = Command::new(exe).args([row.as_str(), n]).env("WQE_COST_DUMP", "1").output()?;
                if !out.status.success() {
                    return Err(format!("{} {row} {n}: {}", exe.display(), out.status).into());
                }
                Ok(out.stdout)
            };
            if dump(rust)? != dump(c)? {
                bad.push(format!("{row} (after {n} WQEs)"));
                break;
            }
        }
    }
    Ok(bad)
}

/// One row's counts per column (`None`: n/a).
struct Table {
    rows: Vec<(&'static str, &'static str)>,
    c: Vec<Option<f64>>,
    libmlx5: Vec<Option<f64>>,
    ours: Vec<Option<f64>>,
    notes: Vec<String>,
}

fn measure_columns(
    rows: &[(&'static str, &'static str)],
    sides: &[(Column, &Path)],
    notes: &mut Vec<String>,
) -> Result<Vec<Vec<Option<f64>>>> {
    let mut jobs = Vec::new();
    let mut slots = Vec::new();
    for (col, exe) in sides {
        let known = rows_of(exe)?;
        for (i, (row, _)) in rows.iter().enumerate() {
            if known.iter().any(|k| k == row) {
                slots.push((*col, i, jobs.len()));
                jobs.push((exe.to_path_buf(), row.to_string()));
                if let Some((_, _, what)) = COLUMN_NOTES.iter().find(|(r, c, _)| r == row && c == col) {
                    notes.push(format!("{row}, {}: {what}", col_name(*col)));
                }
            } else if let Some((_, _, why)) = NOT_APPLICABLE.iter().find(|(r, c, _)| r == row && c == col) {
                notes.push(format!("{row}, {}: {why}", col_name(*col)));
            } else {
                notes.push(format!("{row}, {}: not written yet", col_name(*col)));
            }
        }
    }
    let counts = measure(&jobs)?;
    let mut out = vec![vec![None; rows.len()]; sides.len()];
    for (col, i, j) in slots {
        let s = sides.iter().position(|(c, _)| *c == col).expect("a side of the table");
        out[s][i] = Some(counts[j]);
    }
    Ok(out)
}

fn col_name(c: Column) -> &'static str {
    match c {
        Column::C => "C (mlx5dv.h)",
        Column::Libmlx5 => "libmlx5 v59",
        Column::Rrddmma => "rrddmma",
    }
}

fn cell(x: Option<f64>, note: Option<usize>) -> String {
    match (x, note) {
        (Some(x), Some(k)) => format!("{x:.1} [{k}]"),
        (Some(x), None) => format!("{x:.1}"),
        (None, Some(k)) => format!("n/a [{k}]"),
        (None, None) => "n/a".into(),
    }
}

fn print(t: &Table) {
    println!("| row | C (mlx5dv.h) | libmlx5 v59 | rrddmma | rrddmma / C |");
    println!("|---|---|---|---|---|");
    let note_of = |row: &str, col: Column| {
        let key = format!("{row}, {}:", col_name(col));
        t.notes.iter().position(|n| n.starts_with(&key)).map(|k| k + 1)
    };
    for (i, (row, what)) in t.rows.iter().enumerate() {
        let ratio = match (t.ours[i], t.c[i]) {
            (Some(r), Some(c)) => format!("{:.2}", r / c),
            _ => "n/a".into(),
        };
        println!(
            "| {what} (`{row}`) | {} | {} | {} | {ratio} |",
            cell(t.c[i], note_of(row, Column::C)),
            cell(t.libmlx5[i], note_of(row, Column::Libmlx5)),
            cell(t.ours[i], note_of(row, Column::Rrddmma)),
        );
    }
    for (k, n) in t.notes.iter().enumerate() {
        println!("\n[{}] {n}", k + 1);
    }
    println!(
        "\ninstructions per WQE (per CQE for poll and zip), callgrind, runs of {N} and 0 iterations; on every \
         side a CQE written and polled and the ring freed every 32 blocks (tag_add: every 32nd add; mprq: one \
         CQE per WQE, 32 polled at once)"
    );
}

/// The rows named in `args` (all without names).
fn selected(args: &[String]) -> Result<Vec<(&'static str, &'static str)>> {
    let names: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if let Some(bad) = names.iter().find(|n| !ROWS.iter().any(|(r, _)| *r == n.as_str())) {
        let all: Vec<&str> = ROWS.iter().map(|(r, _)| *r).collect();
        return Err(format!("bench-wqe: no row {bad:?}; rows: {}", all.join(" ")).into());
    }
    Ok(ROWS.iter().copied().filter(|(r, _)| names.is_empty() || names.iter().any(|n| n == r)).collect())
}

/// `cargo xtask bench-wqe [--record] [ROW..]`.
pub fn run(args: &[String]) -> Result<()> {
    if args.iter().any(|a| a == "--gate") {
        let mut tally = Tally::default();
        gate_check(&mut tally);
        return tally.finish();
    }
    let start = std::time::Instant::now();
    let rows = selected(args)?;
    let (rust, c) = build()?;
    let mut notes = Vec::new();
    let mlx5 = match mlx5::build() {
        Ok(p) => Some(p),
        Err(e) => {
            notes.push(format!("libmlx5 v59 column: not built ({e})"));
            None
        }
    };
    let mut sides = vec![(Column::C, c.as_path()), (Column::Rrddmma, rust.as_path())];
    if let Some(m) = &mlx5 {
        sides.push((Column::Libmlx5, m.as_path()));
    }
    // Rows no program has yet: named once, not as a line of n/a.
    let mut known = Vec::new();
    for (_, exe) in &sides {
        known.extend(rows_of(exe)?);
    }
    let (rows, missing): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(r, _)| known.iter().any(|k| k == r));
    let mismatches = ring_mismatches(&rust, &c)?;
    let cols = measure_columns(&rows, &sides, &mut notes)?;
    let mut libmlx5 = cols.get(2).cloned().unwrap_or_else(|| vec![None; rows.len()]);
    kernel::fill(&rows, &mut libmlx5, &mut notes);
    let t = Table { rows: rows.clone(), c: cols[0].clone(), ours: cols[1].clone(), libmlx5, notes };
    print(&t);
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|(r, _)| *r).collect();
        println!("not measured yet on any side: {}", names.join(", "));
    }
    if mismatches.is_empty() {
        println!("C and rrddmma leave byte-identical rings on every row they share (WQE_COST_DUMP=1)");
    } else {
        println!("C and rrddmma rings DIFFER: {}", mismatches.join(", "));
    }
    if args.iter().any(|a| a == "--record") {
        let measured = measured(&t);
        if args.iter().any(|a| !a.starts_with("--")) {
            return Err("bench-wqe --record records every row: name none".into());
        }
        gate::record(
            &counts_file(),
            "bench-wqe: instructions per direct WQE (examples/wqe_cost.rs, benches/wqe_cost/wqe_cost.c)",
            &measured,
        )?;
    }
    eprintln!("bench-wqe took {:.0} s", start.elapsed().as_secs_f64());
    Ok(())
}

fn measured(t: &Table) -> Vec<gate::Measured> {
    t.rows
        .iter()
        .enumerate()
        .filter_map(|(i, (row, _))| Some(gate::Measured { row: row.to_string(), ours: t.ours[i]?, reference: t.c[i] }))
        .collect()
}

/// The gate of `cargo xtask test`: every row rrddmma writes (and C's, to
/// notice a toolchain change), against benches/wqe_cost/counts.json.
pub fn gate_check(tally: &mut Tally) {
    let start = std::time::Instant::now();
    let built = build().and_then(|(rust, c)| {
        match ring_mismatches(&rust, &c) {
            Ok(bad) => tally.check_output(
                "bench-wqe: the C and rrddmma programs build byte-identical WQEs on every row",
                bad.is_empty(),
                &format!("rings differ: {}", bad.join(", ")),
            ),
            Err(e) => tally.check(&format!("bench-wqe: rings compared ({e})"), false),
        }
        let mut notes = Vec::new();
        let cols = measure_columns(ROWS, &[(Column::C, &c), (Column::Rrddmma, &rust)], &mut notes)?;
        Ok(Table {
            rows: ROWS.to_vec(),
            c: cols[0].clone(),
            ours: cols[1].clone(),
            libmlx5: vec![None; ROWS.len()],
            notes,
        })
    });
    match built {
        Ok(t) => gate::check(tally, "direct-path rows (bench-wqe)", &counts_file(), &measured(&t)),
        Err(e) => tally.check(&format!("instruction gate: direct-path rows (bench-wqe) measured ({e})"), false),
    }
    println!("  instruction gate (bench-wqe) took {:.0} s", start.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed counts hold every row of the table, and each row's
    /// count raised past the margin fails the gate naming that row (the
    /// recorded count itself passes).
    #[test]
    fn every_row_is_recorded_and_a_rise_past_the_margin_fails_naming_it() {
        let counts = gate::read(&counts_file()).expect("benches/wqe_cost/counts.json");
        for (row, _) in ROWS {
            let Some(&(ours, c)) = counts.rows.get(*row) else {
                panic!("{row}: no recorded count in benches/wqe_cost/counts.json (cargo xtask bench-wqe --record)")
            };
            let m = |x: f64| gate::Measured { row: row.to_string(), ours: x, reference: c };
            let (fail, _) = gate::judge(&counts, &[m(ours)]);
            assert!(fail.is_empty(), "{row}: {fail:?}");
            let (fail, _) = gate::judge(&counts, &[m(ours * (1.0 + 1.5 * counts.margin_percent / 100.0))]);
            assert!(fail.len() == 1 && fail[0].starts_with(&format!("{row}: ")), "{row}: {fail:?}");
        }
    }
}
