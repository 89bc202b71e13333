//! The hostile-peer suite (`tests/hostile/main.rs`, feature `tokio`): the
//! ctrl attacks (TCP only) on the host, then one device step that runs every
//! other attack (the perf attacks against the release `rrddmma-perf`, named
//! by `RRDDMMA_PERF_BIN`); then prints the tables the tests report
//! (`ROW\t<table>\t<a>\t<b>\t<outcome>` lines): the hostile-peer table
//! (attack, victim, outcome) and the aio fault table (fault, call, outcome).

use std::process::Command;

use crate::capture::executable;
use crate::device::Check;
use crate::{root, show, Result};

/// The tables, in print order, with their column names.
const TABLES: [(&str, [&str; 3]); 2] =
    [("hostile", ["attack", "victim", "outcome"]), ("aio-fault", ["fault", "call", "outcome"])];

/// Builds the suite and returns its device check.
pub fn checks() -> Result<Vec<Check>> {
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["test", "--no-run", "--features", "tokio", "--test", "hostile", "--message-format=json"])
        .current_dir(root());
    eprintln!("$ {}", show(&build));
    let out = build.output()?;
    let bin = executable(&String::from_utf8_lossy(&out.stdout), "hostile")
        .ok_or("building the hostile-peer suite (--features tokio --test hostile) failed")?;
    // The perf attacks run the built rrddmma-perf as their victim.
    let perf = crate::pairs::binary()?;
    // The ctrl attacks are TCP only: they run here, on the host, where
    // their timing is the coordinator's and not the emulator's (under TCG a
    // flood of 150 connections distorts every deadline); the rest runs
    // where the device is.
    let mut host = Command::new(&bin);
    host.args(["--ignored", "--test-threads=1", "--nocapture", "ctrl::"]);
    eprintln!("$ {}", show(&host));
    let (host_ok, host_out) = crate::capture::capture(&mut host);
    let command = format!(
        "RRDDMMA_PERF_BIN='{}' '{}' --ignored --test-threads=1 --nocapture --skip ctrl::",
        perf.display(),
        bin.display()
    );
    Ok(vec![Check {
        step: crate::device::Step { name: "hostile-peer suite and aio fault table".into(), command },
        judge: Box::new(move |d, t| {
            println!("---- hostile-peer suite, ctrl attacks (TCP, on the host) ----\n{host_out}");
            print!("{}", tables(&format!("{host_out}\n{}", d.output)));
            t.add_run("hostile-peer suite, ctrl attacks (on the host)", host_ok, &host_out);
            t.add_run(&d.name, d.code == Some(0), &d.output);
        }),
    }])
}

/// `cargo xtask hostile`: the suite alone, where the device is (the VM when
/// the host has none), with its tables.
pub fn run() -> Result<()> {
    let checks = checks()?;
    let place = crate::device::locate(None)?;
    eprintln!("hostile-peer suite on {}", place.describe());
    let mut tally = crate::tally::Tally::default();
    crate::device::run_checks(&place, &checks, &mut tally)?;
    tally.finish()
}

/// The `ROW` lines of `output`, laid out as one table per name.
pub fn tables(output: &str) -> String {
    let rows: Vec<Vec<&str>> = output
        .lines()
        // With --nocapture libtest writes `test NAME ... ` before the
        // test's own output, on the same line.
        .filter_map(|l| l.find("ROW\t").map(|i| &l[i + 4..]))
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|cells| cells.len() == 4)
        .collect();
    let mut text = String::new();
    for (name, heads) in TABLES {
        let mine: Vec<[&str; 3]> = rows.iter().filter(|r| r[0] == name).map(|r| [r[1], r[2], r[3]]).collect();
        let width = |i: usize| mine.iter().map(|r| r[i].chars().count()).chain([heads[i].len()]).max().unwrap_or(0);
        let (w0, w1) = (width(0), width(1));
        text += &format!("\n== {name} table: {} rows ==\n", mine.len());
        text += &format!("{:w0$}  {:w1$}  {}\n", heads[0], heads[1], heads[2]);
        for r in &mine {
            text += &format!("{:w0$}  {:w1$}  {}\n", r[0], r[1], r[2]);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn rows_become_one_table_per_name() {
        let out = "noise\nROW\thostile\tflood\tctrl coordinator\tBusy, members joined\n\
                   ROW\taio-fault\tpeer vanishes\trecv\tError::Closed in 2 s\nROW\tbad\n";
        let t = super::tables(out);
        assert!(t.contains("== hostile table: 1 rows =="), "{t}");
        assert!(t.contains("flood   ctrl coordinator  Busy, members joined"), "{t}");
        assert!(t.contains("== aio-fault table: 1 rows =="), "{t}");
        assert!(!t.contains("bad"), "{t}");
    }

    #[test]
    fn rows_after_libtests_test_name_are_found() {
        let out = "test ud::flood ... ROW\thostile\tflood\tUdEndpoint\tcache held at 16\nok\n";
        let t = super::tables(out);
        assert!(t.contains("== hostile table: 1 rows =="), "{t}");
        assert!(t.contains("flood   UdEndpoint  cache held at 16"), "{t}");
    }
}
