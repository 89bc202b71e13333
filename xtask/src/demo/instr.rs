//! The demo's instruction counts: userspace instructions per message of
//! each tool's client under callgrind.

use crate::callgrind::collected;
use crate::pairs::{pair_within, side};

/// The instruction-count rows: every test kind perftest takes `-e` on,
/// (test, perftest binary, flags for both sides, perftest's own flags).
/// WRITE tests are left out: perftest refuses `-e` there, and busy-polled
/// loops spin as long as the device takes, so their counts follow timing.
/// perftest's bandwidth runs take `-N` (no peak): otherwise it stamps every
/// request and, after the run, compares every request with every later
/// signaled completion (n^2 / cq_mod steps), which rrddmma-perf has no
/// counterpart of (it reports no peak) and which makes a count per message
/// grow with `-n` (docs/benchmarks.md).
const INSTR_ITEMS: [(&str, &str, &str, &str); 6] = [
    ("send lat", "ib_send_lat", "-e -s 2", ""),
    ("read lat", "ib_read_lat", "-e -s 2", ""),
    ("atomic lat", "ib_atomic_lat", "-e", ""),
    ("send bw", "ib_send_bw", "-e -s 64", "-N"),
    ("read bw", "ib_read_bw", "-e -s 64", "-N"),
    ("atomic bw", "ib_atomic_bw", "-e", "-N"),
];

/// The two `-n` of a row, whose counts' difference is the per-message count.
/// Far apart: perftest's start-up varies by up to some 3 x 10^5
/// instructions from run to run (its CPU-clock estimate spins on
/// `gettimeofday` for a fixed time), which a difference of 5,000 messages
/// spreads to at most about 60 per message.
fn instr_n(test: &str) -> [u64; 2] {
    if test.ends_with("bw") {
        [1000, 10000]
    } else {
        [1000, 6000]
    }
}

/// The instruction-count runs: for each [`INSTR_ITEMS`] row and each tool,
/// the client under callgrind (counting from start to exit, userspace
/// only) at both `-n` of [`instr_n`] at once (the counts do not depend on
/// timing), each against a server of the same tool running natively.
pub(crate) fn instr_script(me: &str) -> String {
    let mut script = String::new();
    let mut port = 18800;
    for (k, (test, tool, flags, theirs)) in INSTR_ITEMS.iter().enumerate() {
        let cmds = [
            ("perftest", format!("{tool} -d $D -x $X -F {flags} {theirs}")),
            ("rrddmma", format!("{me} {test} -d $D -x $X {flags} --no-progress")),
        ];
        for (name, cmd) in &cmds {
            let mut parts = Vec::new();
            for (i, n) in instr_n(test).into_iter().enumerate() {
                port += 1;
                let server = format!("{cmd} -n {n} -p {port}");
                let client = format!(
                    "valgrind --tool=callgrind --vgdb=no --callgrind-out-file=/dev/null {cmd} -n {n} -p {port} 127.0.0.1"
                );
                script.push_str(&format!(
                    "T{i}=$(mktemp); ( {} ) > $T{i} 2>&1 & P{i}=$!; ",
                    pair_within(&server, &client, 600)
                ));
                parts.push(format!("echo '=== {name}|{k}|{n}'; cat $T{i}; rm -f $T{i}; "));
            }
            script.push_str("wait $P0 $P1; ");
            script.push_str(&parts.concat());
        }
    }
    script.push_str("echo '=== end'");
    script
}

/// Userspace instructions per message of one tool from its two runs:
/// `(I(n2) - I(n1)) / (n2 - n1)`, when both ran, in event mode, and the
/// second counted more.
fn per_message(runs: &[(u64, u64)]) -> Option<f64> {
    let [(n1, i1), (n2, i2)] = runs[..] else { return None };
    (n2 > n1 && i2 > i1).then(|| (i2 - i1) as f64 / (n2 - n1) as f64)
}

/// The instruction-count table; returns the failed runs.
pub(crate) fn instr_report(out: &str) -> Vec<String> {
    // counts[k] = (perftest runs, rrddmma runs), each run (n, instructions).
    type Runs = Vec<(u64, u64)>;
    let mut counts: Vec<(Runs, Runs)> = INSTR_ITEMS.iter().map(|_| Default::default()).collect();
    let mut failures = Vec::new();
    for chunk in out.split("=== ").skip(1) {
        let head = chunk.lines().next().unwrap_or("");
        let [tool, k, n] = head.split('|').collect::<Vec<_>>()[..] else { continue };
        let (Ok(k), Ok(n)) = (k.parse::<usize>(), n.parse::<u64>()) else { continue };
        let perftest = tool == "perftest";
        // Both exited 0, the client was counted, and both ran on events.
        let events = if perftest { "Test with events" } else { "completions by events" };
        let ok = chunk.contains("CLIENT-RC=0") && chunk.contains("SERVER-RC=0");
        match collected(side(chunk, true)).filter(|_| ok && chunk.matches(events).count() == 2) {
            Some(c) if perftest => counts[k].0.push((n, c)),
            Some(c) => counts[k].1.push((n, c)),
            None => failures.push(format!("{tool} {} -n {n} under callgrind:\n{chunk}", INSTR_ITEMS[k].0)),
        }
    }
    println!(
        "\nuserspace instructions per message on the client, counted by callgrind (the server runs natively); \
         both tools in event mode (-e) on both sides, perftest's bandwidth tests with -N (no peak); \
         (I(n2) - I(n1)) / (n2 - n1), n = {:?} (lat), {:?} (bw)\n",
        instr_n("lat"),
        instr_n("bw")
    );
    println!("| test | rrddmma-perf instr/msg | perftest instr/msg | ratio |");
    println!("|---|---|---|---|");
    for ((test, _, flags, _), (p, r)) in INSTR_ITEMS.iter().zip(&counts) {
        match (per_message(r), per_message(p)) {
            (Some(r), Some(p)) => println!("| {test} {flags} | {r:.1} | {p:.1} | {:.3} |", r / p),
            (r, p) => {
                let show = |v: Option<f64>| v.map_or("failed".to_string(), |v| format!("{v:.1}"));
                println!("| {test} {flags} | {} | {} | - |", show(r), show(p));
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-message count is the difference of two runs over the
    /// difference of their `-n`; a failed run, a run without events or a
    /// count that did not grow leaves the tool's cell empty.
    #[test]
    fn instructions_per_message_from_two_runs() {
        assert_eq!(per_message(&[(100, 5_000), (300, 8_000)]), Some(15.0));
        assert_eq!(per_message(&[(100, 5_000)]), None);
        assert_eq!(per_message(&[(100, 5_000), (300, 4_000)]), None);
        let run = |tool: &str, n: u64, events: &str, count: u64| {
            format!(
                "=== {tool}|0|{n}\n{events}\n==1== Collected : {count}\nCLIENT-RC=0\nSERVER-RC=0\n\
                 --- server output\n{events}\n"
            )
        };
        let ours = |n, c| run("rrddmma", n, "completions by events", c);
        let theirs = |n, c| run("perftest", n, " Test with events.", c);
        let out = [ours(100, 1_000), ours(300, 3_000), theirs(100, 2_000), theirs(300, 5_000)].concat();
        assert!(instr_report(&out).is_empty());
        // perftest polling (no event line) counts as a failed run.
        let out = [ours(100, 1_000), ours(300, 3_000), run("perftest", 100, "", 1)].concat();
        assert_eq!(instr_report(&out).len(), 1);
    }
}
