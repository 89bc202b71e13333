//! rrddmma-perf against perftest 25.01 (built from source, `perftest_src`)
//! for the flags Debian bookworm's perftest 4.5 lacks, in the kernel
//! matrix's VM, both sides on the rdma-core v59 libraries:
//! - `--write_with_imm`: write bw and write lat, both roles;
//! - `--flow_label` (two QPs, round-robin labels): send bw, both roles;
//! - `--send_with_imm`: rrddmma-perf's sender against perftest 25.01's
//!   receiver (perftest 25.01 has no `--send_with_imm`: its receiver takes
//!   SEND-with-immediate as a receive, which is what is checked; the other
//!   role needs a perftest that sends it).
//!
//! perftest's side must print its row with the iterations asked and none of
//! its failure lines. TCP ports 18830 and up.

use super::verdict::{bw_plausible, interop_ok, lat_plausible};
use crate::device::{Check, Done};
use crate::pairs::{pair, rows, side};
use crate::perftest_src::Perftest25;

/// Lines perftest prints when something failed (it can still exit 0 after
/// some of them, for example a failed closing handshake's message).
const PERFTEST_FAILURES: &[&str] =
    &["Failed", "failed", "Couldn't", "Unable", "Error", "error", "not supported", "Unsupported"];

/// perftest's side said none of its failure lines.
pub(crate) fn perftest_quiet(out: &str) -> bool {
    !out.lines().any(|l| PERFTEST_FAILURES.iter().any(|f| l.contains(f)))
}

/// perftest's bandwidth row of `size`: one, with `iters` iterations and a
/// positive average bandwidth (column 4), or not negative when perftest said
/// its CPU-frequency estimate failed under TCG.
pub(crate) fn perftest_bw_row(out: &str, size: u64, iters: u64) -> bool {
    let no_clock = out.contains("Correlation coefficient r^2");
    let r = rows(out, size);
    r.len() == 1
        && r[0].len() >= 5
        && r[0][1] == iters as f64
        && if no_clock { r[0][3] >= 0.0 } else { r[0][3] > 0.0 && r[0][3] < 1e7 }
}

/// perftest's latency row of `size`: one, with `iters` iterations and
/// positive t_min <= t_typical <= t_max (or its `inf`-free count alone when
/// its clock estimate failed).
pub(crate) fn perftest_lat_row(out: &str, size: u64, iters: u64) -> bool {
    let no_clock = out.contains("Correlation coefficient r^2");
    let r = rows(out, size);
    r.len() == 1
        && r[0][1] == iters as f64
        && (no_clock || (r[0].len() >= 5 && r[0][2] > 0.0 && r[0][2] <= r[0][4] && r[0][4] <= r[0][3]))
}

/// `immediate data: N receive completion(s) carried it, the last V`: (N, V).
pub(crate) fn imm(out: &str) -> Option<(u64, String)> {
    let l = out.lines().find_map(|l| l.trim().strip_prefix("immediate data: "))?;
    let (n, rest) = l.split_once(' ')?;
    Some((n.parse().ok()?, rest.rsplit(' ').next()?.to_string()))
}

/// The flow labels of rrddmma-perf's `QP i attributes:` lines, in order.
fn labels(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("QP ").and_then(|r| r.split_once(" attributes: ")).map(|(_, a)| a))
        .filter_map(|a| a.split(", ").find(|f| f.starts_with("flow label ")).map(str::to_string))
        .collect()
}

/// The checks, each named with the kernel `release`: `me` is rrddmma-perf
/// (quoted), `pt` the built perftest 25.01.
pub fn checks(release: &str, me: &str, pt: &Perftest25) -> Vec<Check> {
    let dev = "-d $D -x $X";
    let env = pt.env();
    let mut v = Vec::new();
    // (our test, perftest's tool, the flags both take, size, iterations, port)
    let imm_runs: [(&str, &str, &str, u64, u64, usize); 2] = [
        ("write bw", "ib_write_bw", "--write_with_imm -s 4096 -n 300", 4096, 300, 18830),
        ("write lat", "ib_write_lat", "--write_with_imm -s 64 -n 200", 64, 200, 18832),
    ];
    for (test, tool, flags, size, iters, port) in imm_runs {
        for ours_client in [true, false] {
            let p = port + usize::from(ours_client);
            let ours = format!("{env} {me} {test} {dev} -p {p} {flags}");
            // `-F`: perftest's CPU-frequency estimate is unreliable under TCG.
            let theirs = format!("{env} {} {dev} -p {p} -F {flags}", pt.tool(tool));
            let (name, server, client) = if ours_client {
                (
                    format!("rrddmma-perf {test} {flags} client -> {tool} 25.01 server"),
                    theirs,
                    format!("{ours} 127.0.0.1"),
                )
            } else {
                (
                    format!("{tool} 25.01 {flags} client -> rrddmma-perf {test} server"),
                    ours,
                    format!("{theirs} 127.0.0.1"),
                )
            };
            let bw = test.ends_with("bw");
            v.push(Check::verdict(
                &format!("kernel {release}: perf flags (perftest 25.01, rdma-core v59): {name}"),
                pair(&server, &client),
                move |d| imm_verdict(d, bw, size, iters, ours_client),
            ));
        }
    }
    // --flow_label over two QPs, and --send_with_imm towards perftest's receiver.
    let fl = "--flow_label 0x1234,0xabcde -q 2 -s 1024 -n 300";
    let runs: [(bool, &str, usize); 2] = [(true, "--send_with_imm", 18834), (false, "", 18835)];
    for (ours_client, extra, p) in runs {
        let ours = format!("{env} {me} send bw {dev} -p {p} {fl} {extra}");
        let theirs = format!("{env} {} {dev} -p {p} -F {fl}", pt.tool("ib_send_bw"));
        let (name, server, client) = if ours_client {
            (
                format!("rrddmma-perf send bw {fl} --send_with_imm client -> ib_send_bw 25.01 server"),
                theirs,
                format!("{ours} 127.0.0.1"),
            )
        } else {
            (
                format!("ib_send_bw 25.01 {fl} client -> rrddmma-perf send bw server"),
                ours,
                format!("{theirs} 127.0.0.1"),
            )
        };
        v.push(Check::verdict(
            &format!("kernel {release}: perf flags (perftest 25.01, rdma-core v59): {name}"),
            pair(&server, &client),
            move |d| flow_verdict(d, ours_client),
        ));
    }
    v
}

/// A `--write_with_imm` pair: the interop verdict, perftest's row with the
/// iterations and no failure line, and every message rrddmma-perf received
/// carried perftest's immediate (0); rrddmma-perf's sender (bw) received none.
fn imm_verdict(d: &Done, bw: bool, size: u64, iters: u64, ours_client: bool) -> bool {
    let (mine, theirs) = (side(&d.output, ours_client), side(&d.output, !ours_client));
    let test = if bw { "write bw" } else { "write lat" };
    let perftest_row = if bw { perftest_bw_row(theirs, size, iters) } else { perftest_lat_row(theirs, size, iters) };
    let received = match (bw, ours_client) {
        (true, true) => imm(mine) == Some((0, "0x0".into())),
        _ => imm(mine) == Some((iters, "0x0".into())),
    };
    // rrddmma-perf's receiving server measures what it received: positive.
    let own_row = if bw && !ours_client { bw_plausible(mine, size, iters, 1) } else { true };
    interop_ok(d, test, size, iters, bw, ours_client)
        && (bw || lat_plausible(mine, size, iters, 1))
        && own_row
        && received
        && perftest_row
        && perftest_quiet(theirs)
}

/// The `--flow_label` pairs: the interop verdict (300 messages on each of
/// two QPs: rrddmma-perf's row counts per QP, perftest's the 600 of all),
/// rrddmma-perf's QPs read back the labels in turn, perftest's row has the
/// 600 and no failure line; with `--send_with_imm` rrddmma-perf's client
/// said so.
fn flow_verdict(d: &Done, ours_client: bool) -> bool {
    let (mine, theirs) = (side(&d.output, ours_client), side(&d.output, !ours_client));
    interop_ok(d, "send bw", 1024, 300, true, ours_client)
        && labels(mine) == ["flow label 0x1234", "flow label 0xabcde"]
        && perftest_bw_row(theirs, 1024, 600)
        && perftest_quiet(theirs)
        && (!ours_client || imm(mine) == Some((0, "0x0".into())))
        && (!ours_client || mine.contains(" requests carry immediate data (0x5eed0000 + QP index)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(client: &str, server: &str) -> Done {
        Done {
            name: String::new(),
            code: Some(0),
            secs: Some(1),
            output: format!("{client}\nCLIENT-RC=0\nSERVER-RC=0\n--- server output\n{server}\n"),
        }
    }

    const OURS_WRITE_BW: &str = " 4096       300            6.41                 0.001640\n \
        heap allocations inside measured loops: 0\n immediate data: 0 receive completion(s) carried it, the last 0x0";
    const THEIRS_SERVER: &str = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n \
        4096       300              0.00               6.38                 0.001633\n";

    #[test]
    fn write_imm_pair_wants_perftests_row_and_no_failure_line() {
        assert!(imm_verdict(&done(OURS_WRITE_BW, THEIRS_SERVER), true, 4096, 300, true));
        // perftest counted another number of iterations.
        let short = THEIRS_SERVER.replace(" 300 ", " 299 ");
        assert!(!imm_verdict(&done(OURS_WRITE_BW, &short), true, 4096, 300, true));
        // perftest's row is missing.
        assert!(!imm_verdict(&done(OURS_WRITE_BW, " #bytes #iterations\n"), true, 4096, 300, true));
        // perftest said something failed.
        let failed = format!("{THEIRS_SERVER} Failed to close connection between server and client\n");
        assert!(!imm_verdict(&done(OURS_WRITE_BW, &failed), true, 4096, 300, true));
        // perftest's bandwidth is 0 without a clock warning.
        let zero = THEIRS_SERVER.replace("6.38", "0.00");
        assert!(!imm_verdict(&done(OURS_WRITE_BW, &zero), true, 4096, 300, true));
        // rrddmma-perf's sender received immediates.
        let got = OURS_WRITE_BW.replace("data: 0 receive", "data: 3 receive");
        assert!(!imm_verdict(&done(&got, THEIRS_SERVER), true, 4096, 300, true));
    }

    /// The flow-label pair: rrddmma-perf counts per QP (300), perftest all
    /// its QPs (600); both labels read back.
    #[test]
    fn flow_label_pair_wants_per_qp_and_total_counts() {
        let ours = " QP 0 attributes: sl 0, traffic class 0, flow label 0x1234, timeout 14, retry count 6\n             QP 1 attributes: sl 0, traffic class 0, flow label 0xabcde, timeout 14, retry count 6\n             1024       300            371.49               0.380410        0 (received)\n             heap allocations inside measured loops: 0";
        let theirs = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n             1024       600              1.54               1.54   \t\t     0.001580\n";
        assert!(flow_verdict(&done(theirs, ours), false));
        assert!(!flow_verdict(&done(&theirs.replace(" 600 ", " 300 "), ours), false));
        assert!(!flow_verdict(&done(theirs, &ours.replace("0xabcde", "0x0")), false));
    }

    #[test]
    fn readers_take_rrddmma_perf_lines() {
        let out = " QP 0 attributes: sl 0, traffic class 0, flow label 0x1234, timeout 14, retry count 6\n \
                   QP 1 attributes: sl 0, traffic class 0, flow label 0xabcde, timeout 14, retry count 6\n \
                   immediate data: 600 receive completion(s) carried it, the last 0x0\n";
        assert_eq!(labels(out), ["flow label 0x1234", "flow label 0xabcde"]);
        assert_eq!(imm(out), Some((600, "0x0".into())));
        assert!(perftest_lat_row(" 64 200 9.10 40.2 12.3 13.0 2.1 20.0 40.2\n", 64, 200));
        assert!(!perftest_lat_row(" 64 200 9.10 40.2 52.3 13.0 2.1 20.0 40.2\n", 64, 200));
        assert!(perftest_quiet(" 64 200 9.10\n Conflicting CPU frequency values detected: 2000 != 2100\n"));
    }
}
