//! What a passing rrddmma-perf run prints: plausible result rows, no
//! allocation in measured loops, completion events, JSON reports.

use crate::device::Done;
use crate::pairs::{both_ok, rows, side};

/// An interop pair's verdict: both exited 0, rrddmma-perf allocated nothing
/// in its loops, and its own rows are plausible (perftest's layouts differ:
/// its server's "BW peak" is 0, its latency columns can be "inf" when its
/// clock estimate fails).
pub(crate) fn interop_ok(d: &Done, test: &str, size: u64, iters: u64, bw: bool, ours_client: bool) -> bool {
    let mine = side(&d.output, ours_client);
    let judged = match (bw, iters) {
        // -b: this side's row, positive, and the peer's reported one. A
        // perftest peer turns cycles into time with its CPU-frequency
        // estimate; when TCG spoils that ("Correlation coefficient r^2: …
        // < 0.9") the bandwidth it reports can round to 0.00: then its row
        // must be there with the iterations, the bandwidth only not negative.
        (true, 0) => {
            let no_clock = side(&d.output, !ours_client).contains("Correlation coefficient r^2");
            let r = rows(mine, size);
            r.len() >= 2
                && r[0][2] > 0.0
                && r[1][1] == r[0][1]
                && r[1][2] < 1e7
                && if no_clock { r[1][2] >= 0.0 } else { r[1][2] > 0.0 }
        }
        // A passive server (WRITE, READ, atomic bw) prints the numbers its
        // client reports. perftest's client computes them from its CPU
        // frequency estimate, which TCG can spoil into a 0: the row and its
        // iteration count must be there, the bandwidth only not negative.
        (true, n) if !ours_client && matches!(test, "write bw" | "read bw" | "atomic bw") => {
            let r = rows(mine, size);
            !r.is_empty() && r.iter().all(|r| r[1] == n as f64 && r[2] >= 0.0 && r[2] < 1e7)
        }
        (true, n) => bw_plausible(mine, size, n, 1),
        // READ/atomic latency servers are passive.
        (false, _) if !ours_client && matches!(test, "read lat" | "atomic lat") => true,
        // -D: perftest's side prints its duration row too (size,
        // iterations, average latency, transactions per second), and the
        // two sides of the ping-pong counted about as many iterations (they
        // start together and stop at their own deadlines). perftest turns
        // cycles into time with its CPU-frequency estimate; when TCG spoils
        // that ("Correlation coefficient r^2: … < 0.9") the estimate is 0
        // and its row says `inf` and `0.00`: then only its count is judged.
        (false, 0) => {
            let out = side(&d.output, !ours_client);
            let no_clock = out.contains("Correlation coefficient r^2");
            let theirs = rows(out, size);
            let theirs = theirs.iter().find(|r| r[1] > 0.0 && (no_clock || (r[2] > 0.0 && r[2] < 1e5 && r[3] > 0.0)));
            let ours = rows(mine, size).first().map_or(0.0, |r| r[1]);
            lat_plausible(mine, size, 0, 1) && theirs.is_some_and(|t| (t[1] - ours).abs() <= 5.0 + 0.1 * t[1].max(ours))
        }
        (false, n) => lat_plausible(mine, size, n, 1),
    };
    both_ok(d) && zero_allocs(&d.output) && judged
}

/// rrddmma-perf's reports of completion events taken (`-e`), in order.
pub(crate) fn event_counts(out: &str) -> Vec<u64> {
    out.lines().filter_map(|l| l.trim().strip_prefix("completion events: ")?.trim().parse().ok()).collect()
}

/// Every rrddmma-perf report of in-loop allocations says 0, and there is one.
pub(crate) fn zero_allocs(out: &str) -> bool {
    let counts: Vec<&str> =
        out.lines().filter_map(|l| l.trim().strip_prefix("heap allocations inside measured loops: ")).collect();
    !counts.is_empty() && counts.iter().all(|c| c.trim() == "0")
}

/// A bandwidth table row: size, iterations as asked, a positive bandwidth in column 3.
pub(crate) fn bw_plausible(out: &str, size: u64, iters: u64, want_rows: usize) -> bool {
    let r = rows(out, size);
    r.len() >= want_rows && r.iter().all(|r| r[1] == iters as f64 && r[2] > 0.0 && r[2] < 1e7)
}

/// A latency table row: the iterations asked (0: a `-D` run, any positive
/// count), min <= typical <= max, all positive and sane.
pub(crate) fn lat_plausible(out: &str, size: u64, iters: u64, want_rows: usize) -> bool {
    let count_ok = |n: f64| if iters == 0 { n > 0.0 } else { n == iters as f64 };
    let r = rows(out, size);
    r.len() >= want_rows
        && r.iter().all(|r| r.len() >= 7 && count_ok(r[1]) && r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[3] && r[4] < 1e5)
}

/// The first JSON object in `out` that starts with rrddmma-perf's `"tool"` key.
pub(crate) fn json_in(out: &str) -> Option<serde_json::Value> {
    let start = out.find("{\n  \"tool\"")?;
    let rest = &out[start..];
    let end = rest.find("\n}\n")? + 3;
    serde_json::from_str(&rest[..end]).ok()
}

/// Every rrddmma-perf JSON object in `out`, in order.
pub(crate) fn jsons_in(out: &str) -> Vec<serde_json::Value> {
    let mut v = Vec::new();
    let mut rest = out;
    while let Some(start) = rest.find("{\n  \"tool\"") {
        rest = &rest[start..];
        let Some(end) = rest.find("\n}\n") else { break };
        if let Ok(j) = serde_json::from_str(&rest[..end + 3]) {
            v.push(j);
        }
        rest = &rest[end + 3..];
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `-D` ping-pong against perftest passes only when both sides print
    /// their rows and counted about as many iterations.
    #[test]
    fn duration_interop_wants_matching_counts() {
        let done = |ours: u32, theirs: u32| {
            Done {
            name: String::new(),
            code: Some(0),
            secs: Some(1),
            output: format!(
                "rrddmma-perf write_lat\n 2       {ours}     20.1     900.5     22.3     40.2     60.0     300.1     800.2     0\n \
                 heap allocations inside measured loops: 0\nCLIENT-RC=0\nSERVER-RC=0\n--- server output\n \
                 #bytes        #iterations       t_avg[usec]    tps average\n 2             {theirs}            \
                 118.35         4224.85\n"
            ),
        }
        };
        assert!(interop_ok(&done(7965, 7966), "write lat", 2, 0, false, true));
        assert!(!interop_ok(&done(7965, 3000), "write lat", 2, 0, false, true));
        assert!(!interop_ok(&done(0, 7966), "write lat", 2, 0, false, true));
    }

    /// perftest's side without a CPU-frequency estimate prints `inf` and
    /// `0.00` in its duration row: its count is still judged, and those
    /// values pass only when it said why.
    #[test]
    fn duration_interop_judges_only_the_count_when_perftest_has_no_clock() {
        let done = |theirs: u32, said: bool| {
            Done {
            name: String::new(),
            code: Some(0),
            secs: Some(1),
            output: format!(
                "rrddmma-perf write_lat\n 2       7965     20.1     900.5     22.3     40.2     60.0     300.1     800.2     0\n \
                 heap allocations inside measured loops: 0\nCLIENT-RC=0\nSERVER-RC=0\n--- server output\n{} \
                 #bytes        #iterations       t_avg[usec]    tps average\n 2             {theirs}            inf         0.00\n",
                if said { "Correlation coefficient r^2: 0.713 < 0.9\n" } else { "" }
            ),
        }
        };
        assert!(interop_ok(&done(7966, true), "write lat", 2, 0, false, true));
        assert!(!interop_ok(&done(7966, false), "write lat", 2, 0, false, true));
        assert!(!interop_ok(&done(3000, true), "write lat", 2, 0, false, true));
    }

    /// A `-b` run against perftest: this side's row positive; the peer's
    /// reported row may say 0.00 only when perftest said its clock failed.
    #[test]
    fn bidir_interop_takes_a_zero_peer_row_only_when_perftest_has_no_clock() {
        let done = |ours: &str, peer: &str, said: bool| Done {
            name: String::new(),
            code: Some(0),
            secs: Some(1),
            output: format!(
                "rrddmma-perf send_bw\n #bytes #iterations BW MsgRate allocs\n 1024 300 {ours} 0.006 0\n \
                 1024 300 {peer} 0.0001 (reported by the peer)\n heap allocations inside measured loops: 0\n\
                 CLIENT-RC=0\nSERVER-RC=0\n--- server output\n{}  1024 300 6.67 6.67 0.0068\n",
                if said { "Correlation coefficient r^2: 0.86 < 0.9\n" } else { "" }
            ),
        };
        assert!(interop_ok(&done("6.48", "14.84", false), "send bw", 1024, 0, true, true));
        assert!(interop_ok(&done("6.48", "0.00", true), "send bw", 1024, 0, true, true));
        assert!(!interop_ok(&done("6.48", "0.00", false), "send bw", 1024, 0, true, true));
        assert!(!interop_ok(&done("0.00", "14.84", true), "send bw", 1024, 0, true, true));
    }
}
