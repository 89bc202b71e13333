//! rrddmma-perf's device checks (perftest interoperability in both
//! directions, zero allocations in measured loops), `cargo xtask demo`
//! (rrddmma-perf beside perftest) and `cargo xtask bench-verbs` (callgrind:
//! userspace instructions per post + poll, rrddmma against C).

use std::path::PathBuf;
use std::process::Command;

use crate::device::{self, Check, Done, Step};
use crate::{root, run, Result};

/// Builds rrddmma-perf (release) and returns its path.
pub fn binary() -> Result<PathBuf> {
    run(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "-p", "rrddmma-perf"]))?;
    Ok(root().join("target/release/rrddmma-perf"))
}

/// Shell: `D` is the device, `X` the index of its RoCE v2 GID that maps an
/// IPv4 address (else its first RoCE v2 GID, else 0), as perftest's `-x` wants.
const GID_SHELL: &str = "D=\"$RRDDMMA_TEST_DEVICE\"; P=/sys/class/infiniband/$D/ports/1; X=; \
    for t in $P/gid_attrs/types/*; do i=${t##*/}; [ \"$(cat $t 2>/dev/null)\" = 'RoCE v2' ] || continue; \
    case $(cat $P/gids/$i) in 0000:0000:0000:0000:0000:ffff:*) X=$i; break;; esac; [ -n \"$X\" ] || X=$i; done; \
    X=${X:-0}";

/// Shell for a server and a client run against each other, with timeouts;
/// prints both outputs and both exit codes.
fn pair(server: &str, client: &str) -> String {
    pair_within(server, client, 60)
}

/// As [`pair`], the client given `client_secs` seconds (the server 30 more).
fn pair_within(server: &str, client: &str, client_secs: u32) -> String {
    // Wait until the server listens on its `-p` port (perftest's client does
    // not retry), at most 20 s.
    let words: Vec<&str> = server.split_whitespace().collect();
    let port = words.iter().position(|w| *w == "-p").and_then(|i| words.get(i + 1)).copied().unwrap_or("18515");
    format!(
        "{GID_SHELL}; L=$(mktemp); timeout {} {server} > $L 2>&1 & S=$!; \
         for i in $(seq 200); do ss -ltn | grep -q ':{port} ' && break; sleep 0.1; done; \
         timeout {client_secs} {client}; echo CLIENT-RC=$?; wait $S; echo SERVER-RC=$?; echo '--- server output'; \
         cat $L; rm -f $L",
        client_secs + 30
    )
}

/// As [`pair`], for servers listening through rdma_cm (no TCP port to
/// wait on: the CM's listening id on `port` is).
fn cm_pair(server: &str, client: &str, port: usize) -> String {
    format!(
        "L=$(mktemp); timeout 90 {server} > $L 2>&1 & S=$!; \
         for i in $(seq 200); do rdma res show cm_id | grep -Eq 'LISTEN.*:{port}( |$)' && break; sleep 0.1; done; \
         timeout 60 {client}; echo CLIENT-RC=$?; wait $S; echo SERVER-RC=$?; echo '--- server output'; cat $L; rm -f $L"
    )
}

/// An interop pair's verdict: both exited 0, rrddmma-perf allocated nothing
/// in its loops, and its own rows are plausible (perftest's layouts differ:
/// its server's "BW peak" is 0, its latency columns can be "inf" when its
/// clock estimate fails).
fn interop_ok(d: &Done, test: &str, size: u64, iters: u64, bw: bool, ours_client: bool) -> bool {
    let mine = side(&d.output, ours_client);
    let judged = match (bw, iters) {
        // -b: this side's row and the peer's reported one, positive.
        (true, 0) => rows(mine, size).iter().filter(|r| r[2] > 0.0).count() >= 2,
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
        // start together and stop at their own deadlines).
        (false, 0) => {
            let theirs = rows(side(&d.output, !ours_client), size);
            let theirs = theirs.iter().find(|r| r[1] > 0.0 && r[2] > 0.0 && r[2] < 1e5 && r[3] > 0.0);
            let ours = rows(mine, size).first().map_or(0.0, |r| r[1]);
            lat_plausible(mine, size, 0, 1) && theirs.is_some_and(|t| (t[1] - ours).abs() <= 5.0 + 0.1 * t[1].max(ours))
        }
        (false, n) => lat_plausible(mine, size, n, 1),
    };
    both_ok(d) && zero_allocs(&d.output) && judged
}

/// Rows of a result table whose first column is `size`, as numbers (the
/// leading numeric columns only).
fn rows(out: &str, size: u64) -> Vec<Vec<f64>> {
    out.lines()
        .map(|l| l.split_whitespace().map_while(|w| w.parse::<f64>().ok()).collect::<Vec<f64>>())
        .filter(|r| r.len() >= 4 && r[0] == size as f64)
        .collect()
}

/// The client's (`client`) or the server's part of a [`pair`]'s output.
fn side(out: &str, client: bool) -> &str {
    match out.split_once("--- server output") {
        Some((c, srv)) => {
            if client {
                c
            } else {
                srv
            }
        }
        None => out,
    }
}

fn both_ok(d: &Done) -> bool {
    d.code == Some(0) && d.output.contains("CLIENT-RC=0") && d.output.contains("SERVER-RC=0")
}

/// rrddmma-perf's reports of completion events taken (`-e`), in order.
fn event_counts(out: &str) -> Vec<u64> {
    out.lines().filter_map(|l| l.trim().strip_prefix("completion events: ")?.trim().parse().ok()).collect()
}

/// Every rrddmma-perf report of in-loop allocations says 0, and there is one.
fn zero_allocs(out: &str) -> bool {
    let counts: Vec<&str> =
        out.lines().filter_map(|l| l.trim().strip_prefix("heap allocations inside measured loops: ")).collect();
    !counts.is_empty() && counts.iter().all(|c| c.trim() == "0")
}

/// A bandwidth table row: size, iterations as asked, a positive bandwidth in column 3.
fn bw_plausible(out: &str, size: u64, iters: u64, want_rows: usize) -> bool {
    let r = rows(out, size);
    r.len() >= want_rows && r.iter().all(|r| r[1] == iters as f64 && r[2] > 0.0 && r[2] < 1e7)
}

/// A latency table row: the iterations asked (0: a `-D` run, any positive
/// count), min <= typical <= max, all positive and sane.
fn lat_plausible(out: &str, size: u64, iters: u64, want_rows: usize) -> bool {
    let count_ok = |n: f64| if iters == 0 { n > 0.0 } else { n == iters as f64 };
    let r = rows(out, size);
    r.len() >= want_rows
        && r.iter().all(|r| r.len() >= 7 && count_ok(r[1]) && r[2] > 0.0 && r[2] <= r[4] && r[4] <= r[3] && r[4] < 1e5)
}

/// An interop check: (test, perftest binary, flags for both sides, size,
/// iterations, bandwidth).
type Interop = (&'static str, &'static str, &'static str, u64, u64, bool);

/// The checks of `list` against perftest in both directions on `rxe0`, on
/// TCP ports from `base` up (two per entry). With `-e` in the flags both
/// sides must also say they ran on completion events.
fn interop_checks(v: &mut Vec<Check>, me: &str, list: &[Interop], base: usize) {
    let dev = "-d $D -x $X";
    for (k, &(test, tool, flags, size, iters, bw)) in list.iter().enumerate() {
        let events = flags.split_whitespace().any(|f| f == "-e");
        for ours_client in [true, false] {
            let port = base + 2 * k + usize::from(ours_client);
            let ours = format!("{me} {test} {dev} -p {port} {flags}");
            // `-F`: perftest's CPU-frequency estimate is unreliable under
            // TCG ("Correlation coefficient r^2 < 0.9"); without it a perftest
            // side may refuse to print its report and fail.
            let theirs = format!("{tool} {dev} -p {port} -F {flags}");
            let (name, server, client) = if ours_client {
                (
                    format!("perf interop: rrddmma-perf {test} {flags} client -> {tool} server"),
                    theirs,
                    format!("{ours} 127.0.0.1"),
                )
            } else {
                (
                    format!("perf interop: {tool} {flags} client -> rrddmma-perf {test} server"),
                    ours,
                    format!("{theirs} 127.0.0.1"),
                )
            };
            v.push(Check::verdict(&name, pair(&server, &client), move |d| {
                // -e: both say so, and rrddmma-perf took events unless it is
                // a passive server (one per iteration in latency clients).
                let passive = !ours_client && matches!(test, "read bw" | "atomic bw" | "read lat" | "atomic lat");
                let least = if passive {
                    0
                } else if bw {
                    1
                } else {
                    iters
                };
                interop_ok(d, test, size, iters, bw, ours_client)
                    && (!events
                        || (d.output.contains("completions by events")
                            && d.output.contains("Test with events")
                            && event_counts(side(&d.output, ours_client)).iter().all(|&n| n >= least)
                            && event_counts(side(&d.output, ours_client)).len() == 1))
            }));
        }
    }
}

/// The checks for `cargo xtask test`.
pub fn checks() -> Result<Vec<Check>> {
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let mut v = Vec::new();
    let dev = "-d $D -x $X";

    // Interoperability with perftest: every test kind, both directions.
    // (test, perftest binary, flags for both, size, iterations, bandwidth)
    let interop: [Interop; 10] = [
        ("write bw", "ib_write_bw", "-s 4096 -n 500", 4096, 500, true),
        ("read bw", "ib_read_bw", "-s 4096 -n 300", 4096, 300, true),
        ("send bw", "ib_send_bw", "-s 1024 -n 500", 1024, 500, true),
        ("atomic bw", "ib_atomic_bw", "-n 300", 8, 300, true),
        ("write lat", "ib_write_lat", "-n 200", 2, 200, false),
        ("read lat", "ib_read_lat", "-s 64 -n 200", 64, 200, false),
        ("send lat", "ib_send_lat", "-s 64 -n 200", 64, 200, false),
        ("atomic lat", "ib_atomic_lat", "-n 200", 8, 200, false),
        // Bidirectional: both sides stream; each prints its own direction.
        ("write bw", "ib_write_bw", "-b -s 4096 -n 300", 4096, 0, true),
        ("send bw", "ib_send_bw", "-b -s 1024 -n 300", 1024, 0, true),
    ];
    interop_checks(&mut v, &me, &interop, 18630);
    // The unreliable transports on every test perftest takes them on: UC
    // (WRITE and SEND), UD (SEND; a -a sweep stops at the path MTU, and send
    // lat sweeps exchange a message before each size).
    let unreliable: [Interop; 8] = [
        ("write bw", "ib_write_bw", "-c UC -s 4096 -n 300", 4096, 300, true),
        ("write lat", "ib_write_lat", "-c UC -n 200", 2, 200, false),
        ("send bw", "ib_send_bw", "-c UC -s 1024 -n 300", 1024, 300, true),
        ("send lat", "ib_send_lat", "-c UC -s 64 -n 200", 64, 200, false),
        ("send bw", "ib_send_bw", "-c UD -s 1024 -n 300", 1024, 300, true),
        ("send lat", "ib_send_lat", "-c UD -s 64 -n 200", 64, 200, false),
        // Judged on the 1024-byte row, present at any MTU from 1024 up; both
        // sides exiting 0 shows that their sweeps stopped at the same size.
        ("send bw", "ib_send_bw", "-c UD -a -n 50", 1024, 50, true),
        ("send lat", "ib_send_lat", "-c UD -a -n 20", 1024, 20, false),
    ];
    interop_checks(&mut v, &me, &unreliable, 18780);
    // perftest's -e (sleep on completion events) on both sides, for a
    // latency ping-pong, a latency test with a passive server and two
    // bandwidth tests: each side must say it ran on events.
    let events: [Interop; 4] = [
        ("send lat", "ib_send_lat", "-e -s 64 -n 200", 64, 200, false),
        ("atomic lat", "ib_atomic_lat", "-e -n 200", 8, 200, false),
        ("send bw", "ib_send_bw", "-e -s 1024 -n 500", 1024, 500, true),
        ("read bw", "ib_read_bw", "-e -s 4096 -n 300", 4096, 300, true),
    ];
    interop_checks(&mut v, &me, &events, 18720);
    // -D on the ping-pongs: each side runs to its own deadline, then they
    // part cleanly (WRITE: no closing handshake; SEND: the closing one).
    let durations: [Interop; 2] =
        [("write lat", "ib_write_lat", "-D 2", 2, 0, false), ("send lat", "ib_send_lat", "-s 64 -D 2", 64, 0, false)];
    interop_checks(&mut v, &me, &durations, 18740);

    // perftest's rdma_cm mode (-R), both directions, on the CM device (rxe
    // on a veth): the exchange and the QPs go through rdma_cm; on UD the
    // QPs by SIDR (send lat: the client then announces its QP, from which
    // the server makes its address handle).
    let rdma_cm: [(&str, &str, &str, u64, u64, bool); 7] = [
        ("write bw", "ib_write_bw", "-s 4096 -n 200", 4096, 200, true),
        ("send bw", "ib_send_bw", "-s 1024 -n 200", 1024, 200, true),
        ("write lat", "ib_write_lat", "-n 100", 2, 100, false),
        ("read lat", "ib_read_lat", "-s 64 -n 100", 64, 100, false),
        ("atomic lat", "ib_atomic_lat", "-n 100", 8, 100, false),
        ("send bw", "ib_send_bw", "-c UD -s 1024 -n 200", 1024, 200, true),
        ("send lat", "ib_send_lat", "-c UD -s 64 -n 100", 64, 100, false),
    ];
    for (k, (test, tool, flags, size, iters, bw)) in rdma_cm.into_iter().enumerate() {
        for ours_client in [true, false] {
            let port = 18700 + 2 * k + usize::from(ours_client);
            let cm_dev = "-d $RRDDMMA_CM_DEVICE -R";
            let ours = format!("{me} {test} {cm_dev} -p {port} {flags}");
            let theirs = format!("{tool} {cm_dev} -p {port} -F {flags}");
            let (name, server, client) = if ours_client {
                (
                    format!("perf -R interop: rrddmma-perf {test} {flags} client -> {tool} -R server"),
                    theirs,
                    format!("{ours} \"$RRDDMMA_CM_ADDR\""),
                )
            } else {
                (
                    format!("perf -R interop: {tool} -R {flags} client -> rrddmma-perf {test} server"),
                    ours,
                    format!("{theirs} \"$RRDDMMA_CM_ADDR\""),
                )
            };
            v.push(Check::verdict(&name, cm_pair(&server, &client, port), move |d| {
                interop_ok(d, test, size, iters, bw, ours_client)
            }));
        }
    }

    // rrddmma-perf against itself: every test kind, no allocation in any loop.
    let own: [(&str, &str, u64, u64, bool); 17] = [
        // perftest's getopt forms: value attached, `--flag=value`, `--flag value`.
        ("write bw", "-s64 -n2000 -q2 --threads=2 -l 4 --cq-mod 8", 64, 2000, true),
        ("read bw", "-s 4096 -n 500", 4096, 500, true),
        ("send bw", "-s 256 -n 2000", 256, 2000, true),
        ("atomic bw", "-n 1000", 8, 1000, true),
        ("read lat", "-s 64 -n 200", 64, 200, false),
        ("send lat", "-s 64 -n 200", 64, 200, false),
        ("atomic lat", "-n 200", 8, 200, false),
        ("write bw", "--size=1024 -D1", 1024, 0, true),
        ("send bw", "-b -s 256 -n 500", 256, 500, true),
        ("send bw", "-a --max-size 64 -n 100", 64, 100, true),
        ("read bw", "-b -a --max-size 64 -n 100", 64, 100, true),
        // -e: sleeping on completion events, also in the receiving thread of -b.
        ("read lat", "-e -s 64 -n 200", 64, 200, false),
        ("send bw", "-e -b -s 256 -n 500", 256, 500, true),
        // -D ping-pongs (any number of samples), the SEND one checking every payload.
        ("write lat", "-D 2", 2, 0, false),
        ("send lat", "-s 64 -D 2 --check-payload", 64, 0, false),
        // UD: an address handle per QP, post lists; UC both ways at once.
        ("send bw", "-c UD -s 1024 -n 500 -q 2 --threads 2 -l 4", 1024, 500, true),
        ("send bw", "-c UC -b -s 256 -n 300", 256, 300, true),
    ];
    for (k, (test, flags, size, iters, bw)) in own.into_iter().enumerate() {
        let port = 18610 + k;
        let name = format!("perf: rrddmma-perf {test} {flags} (zero allocations in loops)");
        v.push(Check::verdict(
            &name,
            pair(
                &format!("{me} {test} {dev} -p {port} {flags}"),
                &format!("{me} {test} {dev} -p {port} {flags} 127.0.0.1"),
            ),
            move |d| {
                // -e: the latency client took one event per iteration at
                // least; both sides of a -b send bw took some.
                let events_ok = !flags.split_whitespace().any(|f| f == "-e") || {
                    let n = event_counts(&d.output);
                    n.len() == 2 && if bw { n.iter().all(|&e| e > 0) } else { n.iter().any(|&e| e >= iters) }
                };
                both_ok(d)
                    && zero_allocs(&d.output)
                    && events_ok
                    && match (bw, iters) {
                        (true, 0) => rows(&d.output, size).iter().any(|r| r[1] > 0.0 && r[2] > 0.0),
                        (true, n) => bw_plausible(&d.output, size, n, 1),
                        (false, n) => lat_plausible(&d.output, size, n, 1),
                    }
            },
        ));
    }

    // perftest's -H/-U sample listings, -D on a latency test, placement.
    v.push(Check::verdict(
        "perf: rrddmma-perf read lat -D 1 -H (duration, sorted samples), atomic lat -U --cpu 0, write bw --numa -c RC --use_hugepages",
        format!(
            "echo 32 > /proc/sys/vm/nr_hugepages && {} && {} && {}",
            pair(
                &format!("{me} read lat {dev} -p 18685 -s 64 -D 1 -H"),
                &format!("{me} read lat {dev} -p 18685 -s 64 -D1 -H 127.0.0.1")
            ),
            pair(
                &format!("{me} atomic lat {dev} -p 18686 -n 100 -U"),
                &format!("{me} atomic lat {dev} -p 18686 -n100 -U --cpu 0 127.0.0.1")
            ),
            pair(
                &format!("{me} write bw {dev} -p 18687 -s 4096 -n 200 --numa -c RC --use_hugepages"),
                &format!("{me} write bw {dev} -p 18687 -s 4096 -n 200 --numa -cRC --use_hugepages 127.0.0.1")
            ),
        ),
        |d| {
            let listing = |from: usize| -> Vec<f64> {
                d.output[from..]
                    .lines()
                    .skip(1)
                    .map_while(|l| l.split_once(", ").and_then(|(_, v)| v.trim().parse::<f64>().ok()))
                    .collect()
            };
            let heads: Vec<usize> = d.output.match_indices("#, usec").map(|(i, _)| i).collect();
            let sorted_ok = heads.first().is_some_and(|&h| {
                let v = listing(h);
                v.len() > 10 && v.windows(2).all(|w| w[0] <= w[1]) && v[0] > 0.0
            });
            let unsorted_ok = heads.get(1).is_some_and(|&h| listing(h).len() == 99);
            let read_rows = rows(&d.output, 64);
            d.code == Some(0)
                && d.output.matches("CLIENT-RC=0").count() == 3
                && d.output.matches("SERVER-RC=0").count() == 3
                && zero_allocs(&d.output)
                && sorted_ok
                && unsorted_ok
                && read_rows.iter().any(|r| r[1] > 10.0 && r[2] > 0.0)
                && d.output.contains(" placement: CPU 0")
                && d.output.matches(" placement: ").count() == 3
                && bw_plausible(&d.output, 4096, 200, 2)
        },
    ));

    // --run_infinitely: a report per -D interval until stopped.
    v.push(Check::verdict(
        "perf: rrddmma-perf write bw --run_infinitely -D 1 reports every second until stopped",
        pair(
            &format!("{me} write bw {dev} -p 18688 -s 4096"),
            &format!("{me} write bw {dev} -p 18688 -s 4096 --run_infinitely -D 1 --no-progress 127.0.0.1 & sleep 15; kill -INT $!; wait $!; [ $? -ne 0 ]"),
        ),
        |d| {
            let client = side(&d.output, true);
            rows(client, 4096).iter().filter(|r| r[1] > 0.0 && r[2] > 0.0).count() >= 3
        },
    ));

    // Payload checking: every test kind it covers passes on clean data...
    let checked: [(&str, &str, u64, u64, bool); 8] = [
        ("write bw", "-s 4096 -n 300", 4096, 300, true),
        ("read bw", "-s 1024 -n 200 -q 2", 1024, 200, true),
        ("write lat", "-s 64 -n 100", 64, 100, false),
        ("send lat", "-s 64 -n 100", 64, 100, false),
        ("read lat", "-s 64 -n 100", 64, 100, false),
        ("atomic lat", "-n 100", 8, 100, false),
        // UD: the payload lands after the 40-byte GRH, one cache line in.
        ("send lat", "-c UD -s 1024 -n 100", 1024, 100, false),
        ("write bw", "-c UC -s 4096 -n 300", 4096, 300, true),
    ];
    for (k, (test, flags, size, iters, bw)) in checked.into_iter().enumerate() {
        let port = 18670 + k;
        let flags = format!("{flags} --check-payload");
        v.push(Check::verdict(
            &format!("perf: rrddmma-perf {test} {flags}"),
            pair(
                &format!("{me} {test} {dev} -p {port} {flags}"),
                &format!("{me} {test} {dev} -p {port} {flags} 127.0.0.1"),
            ),
            move |d| {
                both_ok(d)
                    && zero_allocs(&d.output)
                    && !d.output.contains("payload check failed")
                    && if bw {
                        bw_plausible(&d.output, size, iters, 1)
                    } else {
                        lat_plausible(&d.output, size, iters, 1)
                    }
            },
        ));
    }
    // ... and one byte corrupted on purpose by the sending side is caught by
    // the receiving side, which names it and fails.
    v.push(Check::verdict(
        "perf: --check-payload catches a byte the WRITE sender corrupted",
        pair(
            &format!("{me} write bw {dev} -p 18680 -s 4096 -n 300 --check-payload"),
            &format!(
                "env RRDDMMA_PERF_CORRUPT=1 {me} write bw {dev} -p 18680 -s 4096 -n 300 --check-payload 127.0.0.1"
            ),
        ),
        |d| {
            !d.output.contains("SERVER-RC=0")
                && d.output.contains(
                    "payload check failed: write bw, QP 0, 4096-byte message at offset 0, iteration 0, byte 0",
                )
        },
    ));
    v.push(Check::verdict(
        "perf: --check-payload catches a byte the READ source corrupted",
        pair(
            &format!("env RRDDMMA_PERF_CORRUPT=1 {me} read lat {dev} -p 18681 -s 64 -n 100 --check-payload"),
            &format!("{me} read lat {dev} -p 18681 -s 64 -n 100 --check-payload 127.0.0.1"),
        ),
        |d| {
            !d.output.contains("CLIENT-RC=0")
                && d.output.contains("payload check failed: read lat, iteration 0, byte 0")
        },
    ));

    // -c where perftest refuses it (exit 2 naming the flag, the test and
    // what it takes), an explicit UD size above the path MTU (both sides
    // fail after the MTU exchange, as perftest's do), and a UD receiver
    // short of messages failing after its stall limit instead of waiting.
    v.push(Check::verdict(
        "perf: -c refusals (read bw -c UD, atomic lat -c UC, send bw -c UC -R, send bw -c UD -s 8192 above the MTU) and a UD receiver short of messages",
        format!(
            "{me} read bw -c UD; echo READ-UD-RC=$?; {me} atomic lat -c UC; echo ATOMIC-UC-RC=$?; \
             {me} send bw -c UC -R; echo UC-CM-RC=$?; {}; {}",
            pair(
                &format!("{me} send bw {dev} -p 18760 -c UD -s 8192 -n 50"),
                &format!("{me} send bw {dev} -p 18760 -c UD -s 8192 -n 50 127.0.0.1")
            ),
            pair(
                &format!("env RRDDMMA_PERF_STALL_SECS=5 {me} send bw {dev} -p 18761 -c UD -s 1024 -n 300"),
                &format!("{me} send bw {dev} -p 18761 -c UD -s 1024 -n 200 127.0.0.1")
            ),
        ),
        |d| {
            let o = &d.output;
            o.contains("READ-UD-RC=2")
                && o.contains("rrddmma-perf: -c UD: read bw needs RC (UD carries SEND only: send bw, send lat)")
                && o.contains("ATOMIC-UC-RC=2")
                && o.contains("rrddmma-perf: -c UC: atomic lat needs RC (UC carries RDMA WRITE and SEND only")
                && o.contains("UC-CM-RC=2")
                && o.contains("rrddmma-perf: -c UC with -R: rdma_cm makes no UC connections")
                && o.matches("-s 8192 with -c UD: a UD message is at most one packet and the path MTU is").count() == 2
                && o.contains("no message for 5 s: received 200 of 300")
                && o.matches("CLIENT-RC=1").count() == 2
                && o.matches("SERVER-RC=1").count() == 2
        },
    ));

    // A ping-pong whose peer stops early (as after a lost UC message): the
    // waiting side fails after the stall limit instead of spinning forever.
    let short = |test: &str, port: u16| {
        pair(
            &format!("env RRDDMMA_PERF_STALL_SECS=5 {me} {test} {dev} -p {port} -c UC -n 300"),
            &format!("{me} {test} {dev} -p {port} -c UC -n 200 127.0.0.1"),
        )
    };
    v.push(Check::verdict(
        "perf: a UC latency ping-pong short of messages fails after the stall limit",
        format!("{}; {}", short("send lat", 18762), short("write lat", 18763)),
        |d| {
            let o = &d.output;
            o.contains("no completion for 5 s (the peer stopped, or a message was lost")
                && o.contains("no RDMA WRITE from the peer for 5 s (the peer stopped, or a message was lost")
                && o.matches("SERVER-RC=1").count() == 2
        },
    ));

    // A sweep with every output format.
    let dir = "/tmp/rrddmma-perf-sweep";
    v.push(Check::verdict(
        "perf: sweep writes JSON, CSV and SVG",
        format!(
            "rm -rf {dir}; mkdir -p {dir}; {}; ls {dir}; cat {dir}/r.json {dir}/r.csv; head -c 200 {dir}/r.svg",
            pair(
                &format!("{me} write bw {dev} -p 18660 -a --max-size 4096 -n 200"),
                &format!("{me} write bw {dev} -p 18660 -a --max-size 4096 -n 200 --json {dir}/r.json --csv {dir}/r.csv --svg {dir}/r.svg 127.0.0.1")
            )
        ),
        |d| {
            let json_ok = json_in(&d.output);
            let sizes_ok = json_ok.is_some_and(|j| {
                let clock_ok = matches!(j["clock"].as_str(), Some("tsc" | "monotonic"));
                let r = j["results"].as_array().cloned().unwrap_or_default();
                clock_ok
                    && r.len() == 12
                    && r.iter().all(|x| x["allocations_in_loop"] == 0 && x["bw_mib_s"].as_f64().is_some_and(|b| b > 0.0))
            });
            both_ok(d) && sizes_ok && d.output.contains("test,size,iterations") && d.output.contains("<svg")
        },
    ));
    Ok(v)
}

/// The first JSON object in `out` that starts with rrddmma-perf's `"tool"` key.
fn json_in(out: &str) -> Option<serde_json::Value> {
    let start = out.find("{\n  \"tool\"")?;
    let rest = &out[start..];
    let end = rest.find("\n}\n")? + 3;
    serde_json::from_str(&rest[..end]).ok()
}

/// Every rrddmma-perf JSON object in `out`, in order.
fn jsons_in(out: &str) -> Vec<serde_json::Value> {
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

/// What one `rrddmma-perf cluster` run on three ranks must report.
#[derive(Clone, Debug)]
struct ClusterWant {
    pattern: &'static str,
    op: &'static str,
    qps: u64,
    threads: u64,
    sizes: Vec<u64>,
    iters: u64,
    /// The bandwidth flows (source, destination).
    bw: Vec<(u64, u64)>,
    /// loaded-latency's probe flow: latency only, no bandwidth.
    probe: Option<(u64, u64)>,
}

impl ClusterWant {
    fn new(pattern: &'static str, op: &'static str, qps: u64, threads: u64, sizes: &[u64], iters: u64) -> Self {
        let all = (0..3u64).flat_map(|s| (0..3).map(move |d| (s, d))).filter(|(s, d)| s != d);
        let (bw, probe): (Vec<(u64, u64)>, _) = match pattern {
            "incast" => (vec![(1, 0), (2, 0)], None),
            "outcast" => (vec![(0, 1), (0, 2)], None),
            "ring" => (vec![(0, 1), (1, 2), (2, 0)], None),
            "loaded-latency" => (all.filter(|f| f.0 != 0).collect(), Some((0, 1))),
            _ => (all.collect(), None),
        };
        ClusterWant { pattern, op, qps, threads, sizes: sizes.to_vec(), iters, bw, probe }
    }

    /// The command-line flags of this run, writing JSON, CSV and SVG to `dir`.
    fn flags(&self, dir: &str) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(u64::to_string).collect();
        format!(
            "cluster --pattern {} --op {} -q {} --threads {} -s {} -n {} --lat-samples 30 \
             --json {dir}/r.json --csv {dir}/r.csv --svg {dir}/r.svg",
            self.pattern,
            self.op,
            self.qps,
            self.threads,
            sizes.join(","),
            self.iters
        )
    }
}

/// The cluster-mode JSON of three ranks matches `w`: its settings, one result
/// per size in order, each with exactly the expected flows (every bandwidth
/// flow with `iters` × `qps` requests, positive bandwidth, message rate and
/// latency, the probe flow with latency alone), per-rank totals that add up,
/// the aggregate and a fairness index in (0, 1].
fn cluster_json_ok(j: &serde_json::Value, w: &ClusterWant) -> bool {
    let pos = |v: &serde_json::Value| v.as_f64().is_some_and(|x| x > 0.0);
    let lat_pos = |f: &serde_json::Value| ["p50", "p99", "p999", "avg"].iter().all(|k| pos(&f["lat_us"][k]));
    let near = |a: f64, b: f64| (a - b).abs() <= 0.01 + 1e-3 * b.abs();
    let sizes: Vec<u64> = j["sizes"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(|v| v.as_u64()).collect());
    let results = j["results"].as_array().cloned().unwrap_or_default();
    let mut want_pairs: Vec<(u64, u64)> = w.bw.iter().copied().chain(w.probe).collect();
    want_pairs.sort();
    let result_ok = |r: &serde_json::Value, size: u64| {
        let flows = r["flows"].as_array().cloned().unwrap_or_default();
        let mut got: Vec<(u64, u64)> =
            flows.iter().filter_map(|f| Some((f["src"].as_u64()?, f["dst"].as_u64()?))).collect();
        got.sort();
        let flows_ok = flows.iter().all(|f| {
            let pair = (f["src"].as_u64().unwrap_or(9), f["dst"].as_u64().unwrap_or(9));
            if Some(pair) == w.probe {
                f["requests"].as_u64() == Some(0) && lat_pos(f)
            } else {
                f["requests"].as_u64() == Some(w.iters * w.qps)
                    && pos(&f["bw_mib_s"])
                    && pos(&f["msg_rate_mpps"])
                    && pos(&f["seconds"])
                    && (w.probe.is_some() || lat_pos(f))
            }
        });
        let bw = |f: &serde_json::Value| f["bw_mib_s"].as_f64().unwrap_or(0.0);
        let totals = r["rank_totals"].as_array().cloned().unwrap_or_default();
        let totals_ok = totals.len() == 3
            && totals.iter().enumerate().all(|(rank, t)| {
                let sum = |k: &str| flows.iter().filter(|f| f[k].as_u64() == Some(rank as u64)).map(bw).sum::<f64>();
                t["rank"].as_u64() == Some(rank as u64)
                    && near(t["out_mib_s"].as_f64().unwrap_or(-1.0), sum("src"))
                    && near(t["in_mib_s"].as_f64().unwrap_or(-1.0), sum("dst"))
            });
        let jain = r["jain_fairness"].as_f64().unwrap_or(0.0);
        r["size"].as_u64() == Some(size)
            && got == want_pairs
            && flows_ok
            && totals_ok
            && near(r["aggregate_mib_s"].as_f64().unwrap_or(-1.0), flows.iter().map(bw).sum())
            && jain > 0.0
            && jain <= 1.0 + 1e-9
    };
    j["mode"] == "cluster"
        && j["pattern"] == w.pattern
        && j["op"] == w.op
        && j["ranks"].as_u64() == Some(3)
        && j["qps_per_pair"].as_u64() == Some(w.qps)
        && j["threads_per_rank"].as_u64() == Some(w.threads)
        && j["iterations_per_qp"].as_u64() == Some(w.iters)
        && sizes == w.sizes
        && results.len() == w.sizes.len()
        && results.iter().zip(&w.sizes).all(|(r, &s)| result_ok(r, s))
}

/// `rrddmma-perf cluster` on three ranks: all-to-all and incast on the three
/// namespace hosts (`tests/cluster/hosts.sh`, set up here unless an earlier
/// check did) and under `mpirun -np 3`; then, with fewer iterations, outcast
/// (read) and ring (send) on the namespace hosts and loaded-latency (atomic)
/// under mpirun. Several QPs per pair, several threads per rank and several
/// sizes run in some of them; those stay at one packet per message (1024 B,
/// the rxe veths' MTU): with 4096-byte writes over 2 QPs per pair and 2
/// threads, rxe failed some runs with REM_INV_REQ_ERR (docs/perf.md).
pub fn cluster_checks() -> Result<Vec<Check>> {
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let devices = "rxe_h1,rxe_h2,rxe_h3";
    let hosts_up = "{ ip netns list | grep -q '^h1' || bash tests/cluster/hosts.sh 3 >/dev/null; }";
    let launch = |mpi: bool, port: u16, flags: &str| {
        if mpi {
            format!(
                "mkdir -p /dev/shm/ompi && TMPDIR=/dev/shm/ompi timeout 180 mpirun --allow-run-as-root \
                 --oversubscribe -np 3 -x RRDDMMA_COORDINATOR=127.0.0.1:{port} -x RRDDMMA_DEVICES={devices} {me} {flags}"
            )
        } else {
            let hosts = format!("10.79.0.1:{port},10.79.0.2:{port},10.79.0.3:{port}");
            format!(
                "pids= && for i in 3 2 1; do ip netns exec h$i env RRDDMMA_HOSTS={hosts} RRDDMMA_DEVICES={devices} \
                 RRDDMMA_JOIN_TIMEOUT_MS=60000 timeout 120 {me} {flags} & pids=\"$pids $!\"; done; rc=0; \
                 for p in $pids; do wait $p || rc=1; done; [ $rc = 0 ]"
            )
        }
    };
    let runs: [(bool, Vec<ClusterWant>); 6] = [
        (false, vec![ClusterWant::new("all-to-all", "write", 2, 2, &[256, 1024], 200)]),
        (true, vec![ClusterWant::new("all-to-all", "write", 1, 1, &[4096], 200)]),
        (false, vec![ClusterWant::new("incast", "write", 1, 1, &[4096], 200)]),
        (true, vec![ClusterWant::new("incast", "write", 1, 2, &[4096], 200)]),
        (
            false,
            vec![
                ClusterWant::new("outcast", "read", 2, 2, &[64, 1024], 50),
                ClusterWant::new("ring", "send", 2, 1, &[64, 1024], 50),
            ],
        ),
        (true, vec![ClusterWant::new("loaded-latency", "atomic", 1, 2, &[8], 50)]),
    ];
    let mut v = Vec::new();
    let mut port = 18690u16;
    for (k, (mpi, wants)) in runs.into_iter().enumerate() {
        let mut cmd = format!("{hosts_up} || exit 1; rc=0");
        for (i, w) in wants.iter().enumerate() {
            let dir = format!("/tmp/rrddmma-perf-cluster-{k}-{i}");
            port += 1;
            cmd += &format!(
                "; rm -rf {dir} && mkdir -p {dir} && {{ {launch} || rc=1; }}; cat {dir}/r.json; \
                 head -c 120 {dir}/r.svg; echo; head -c 120 {dir}/r-bars.svg; echo; head -3 {dir}/r.csv",
                launch = launch(mpi, port, &w.flags(&dir))
            );
        }
        cmd += "; exit $rc";
        let what: Vec<String> = wants
            .iter()
            .map(|w| {
                format!(
                    "{} {}, {} QP(s)/pair, {} thread(s)/rank, sizes {:?}",
                    w.pattern, w.op, w.qps, w.threads, w.sizes
                )
            })
            .collect();
        let name = format!(
            "perf cluster, 3 ranks, {}: {}: every pair present and non-zero, JSON schema, SVG",
            if mpi { "mpirun -np 3" } else { "three namespace hosts" },
            what.join("; ")
        );
        v.push(Check::verdict(&name, cmd, move |d| {
            let js = jsons_in(&d.output);
            let runs = wants.len();
            d.code == Some(0)
                && js.len() == runs
                && js.iter().zip(&wants).all(|(j, w)| cluster_json_ok(j, w))
                && d.output.matches("heap allocations inside measured loops: 0").count() == 3 * runs
                && (0..3).all(|r| d.output.matches(&format!("rank {r}/3: ")).count() == runs)
                && d.output.matches("<svg").count() == 2 * runs
                && d.output.matches("pattern,op,size,qps_per_pair,threads_per_rank,src,dst").count() == runs
        }));
    }
    Ok(v)
}

/// `cargo xtask perf-checks [pair|cluster|rdma_cm] [--only TEXT]`:
/// rrddmma-perf's device checks alone, the pairwise ones, the cluster-mode
/// ones (last: they set up the namespace hosts) or the `-R` ones; with
/// `--only`, those whose name contains TEXT.
pub fn run_checks(args: &[String]) -> Result<()> {
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1));
    let which = args.first().map(String::as_str).filter(|w| *w != "--only");
    let mut checks = if which == Some("cluster") { Vec::new() } else { checks()? };
    if which == Some("rdma_cm") {
        checks.retain(|c| c.step.name.starts_with("perf -R "));
    } else if which != Some("pair") {
        checks.extend(cluster_checks()?);
    }
    if let Some(text) = only {
        checks.retain(|c| c.step.name.contains(text.as_str()));
        if checks.is_empty() {
            return Err(format!("perf-checks --only {text:?}: no check's name contains it").into());
        }
    }
    let place = device::locate(None)?;
    eprintln!("perf checks on {}", place.describe());
    let mut tally = crate::tally::Tally::default();
    device::run_checks(&place, &checks, &mut tally)?;
    println!("\n{} passed, {} failed", tally.passed, tally.failed);
    if tally.failed > 0 {
        return Err(format!("{} failed", tally.failed).into());
    }
    Ok(())
}

/// Repetitions of every demo measurement by default (tools alternate, the
/// order flips every repetition); `--reps N` asks for more (at least 5).
const REPS: usize = 5;
/// Iterations per demo run.
const DEMO_ITERS: u64 = 1000;

/// One demo measurement: (perftest command, rrddmma-perf test, flags, size).
struct Item {
    name: &'static str,
    perftest: &'static str,
    ours: &'static str,
    size: u64,
    bw: bool,
}

fn demo_items() -> Vec<Item> {
    let mut v: Vec<Item> = (1..=16)
        .map(|i| Item { name: "write bw", perftest: "ib_write_bw", ours: "write bw", size: 1 << i, bw: true })
        .collect();
    v.push(Item { name: "write lat", perftest: "ib_write_lat", ours: "write lat", size: 2, bw: false });
    v.push(Item { name: "read lat", perftest: "ib_read_lat", ours: "read lat", size: 2, bw: false });
    v.push(Item { name: "send lat", perftest: "ib_send_lat", ours: "send lat", size: 2, bw: false });
    v.push(Item { name: "atomic lat", perftest: "ib_atomic_lat", ours: "atomic lat", size: 8, bw: false });
    v
}

/// The median ratio rrddmma-perf / perftest of the repetitions that have
/// both, with its spread (lowest, highest); `None` when none has both.
fn ratio_spread(p: &[Option<f64>], r: &[Option<f64>]) -> Option<(f64, f64, f64)> {
    // A value that is not a positive finite number (perftest prints "inf"
    // or 0 when its clock estimate fails) has no ratio.
    let ok = |v: &Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    let ratios: Vec<f64> = p.iter().zip(r).filter_map(|(p, r)| Some(ok(r)? / ok(p)?)).collect();
    let lo = ratios.iter().copied().fold(f64::MAX, f64::min);
    let hi = ratios.iter().copied().fold(f64::MIN, f64::max);
    Some((median(ratios)?, lo, hi))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 })
}

/// The client's result row of one run: (bandwidth MiB/s) or (median, p99) in
/// µs. Bandwidth comes from the message rate (printed with six decimals by
/// both tools; MB/s has two, too coarse for small messages here).
fn client_numbers(out: &str, size: u64, perftest: bool, bw: bool) -> Option<(f64, f64)> {
    let client = out.split("--- server output").next()?;
    let r = rows(client, size).into_iter().next()?;
    let mib = |mpps: f64| mpps * 1e6 * size as f64 / 1048576.0;
    match (bw, perftest) {
        (true, true) => Some((mib(*r.get(4)?), 0.0)),
        (true, false) => Some((mib(r[3]), 0.0)),
        (false, _) => Some((*r.get(4)?, *r.get(7)?)),
    }
}

/// `cargo xtask demo [--device NAME] [--reps N] [--no-instructions |
/// --instructions-only]`: rrddmma-perf and perftest side by side, timed
/// (see [`timing_script`]) and by userspace instructions per message (see
/// [`instr_script`]).
pub fn demo(args: &[String]) -> Result<()> {
    let wanted = args.iter().position(|a| a == "--device").and_then(|i| args.get(i + 1));
    let reps = match args.iter().position(|a| a == "--reps").and_then(|i| args.get(i + 1)) {
        None => REPS,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= REPS => n,
            _ => return Err(format!("demo --reps {v}: want a whole number of at least {REPS}").into()),
        },
    };
    let instr = !args.iter().any(|a| a == "--no-instructions");
    let timing = !args.iter().any(|a| a == "--instructions-only");
    if !instr && !timing {
        return Err("demo: --no-instructions and --instructions-only together leave nothing to run".into());
    }
    crate::deps::ensure()?;
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let place = device::locate(wanted.map(String::as_str))?;
    let mut steps = Vec::new();
    if timing {
        eprintln!("demo: {}; {reps} alternating repetitions of each run", place.describe());
        steps.push(Step { name: "demo".into(), command: timing_script(&me, reps) });
    }
    if instr {
        eprintln!("demo: {}; instructions per message under callgrind (client side)", place.describe());
        steps.push(Step { name: "instructions".into(), command: instr_script(&me) });
    }
    let done = device::run_steps(&place, &steps)?;
    let dir = root().join("target/demo");
    std::fs::create_dir_all(&dir)?;
    let log: String = done.iter().map(|d| d.output.as_str()).collect();
    std::fs::write(dir.join("runs.log"), &log)?;
    let mut outputs = done.iter().map(|d| d.output.as_str());
    let mut failures = Vec::new();
    if timing {
        failures.extend(timing_report(outputs.next().unwrap_or(""), &place, reps, &exe)?);
    }
    if instr {
        failures.extend(instr_report(outputs.next().unwrap_or("")));
    }
    for f in &failures {
        eprintln!("run failed: {f}");
    }
    println!("every run's output: {}", dir.join("runs.log").display());
    if !failures.is_empty() {
        return Err(format!("{} demo run(s) failed", failures.len()).into());
    }
    Ok(())
}

/// The timed runs: every [`demo_items`] entry with each tool against its own
/// server, `reps` times, the tools alternating.
fn timing_script(me: &str, reps: usize) -> String {
    let items = demo_items();
    let mut script = String::new();
    let mut port = 18700;
    for rep in 0..reps {
        for (k, it) in items.iter().enumerate() {
            let size_flag = if it.ours.starts_with("atomic") { String::new() } else { format!("-s {}", it.size) };
            let common = format!("-d $D -x $X -n {DEMO_ITERS} {size_flag}");
            let runs = [
                // `-F`: perftest's CPU-frequency estimate fails under TCG
                // ("Correlation coefficient r^2 < 0.9") and it then refuses
                // to print its report.
                ("perftest", format!("{} {common} -F", it.perftest)),
                ("rrddmma", format!("{me} {} {common} --no-progress", it.ours)),
            ];
            let order: Vec<usize> = if (rep + k) % 2 == 0 { vec![0, 1] } else { vec![1, 0] };
            for i in order {
                let (tool, cmd) = &runs[i];
                port = if port >= 18790 { 18700 } else { port + 1 };
                script.push_str(&format!(
                    "echo '=== {tool}|{k}|{rep}'; ( {} ); ",
                    pair(&format!("{cmd} -p {port}"), &format!("{cmd} -p {port} 127.0.0.1"))
                ));
            }
        }
    }
    script.push_str("echo '=== end'");
    script
}

/// The timed runs' table, ratios and plot; returns the failed runs.
fn timing_report(out: &str, place: &device::Place, reps: usize, exe: &std::path::Path) -> Result<Vec<String>> {
    let items = demo_items();
    let dir = root().join("target/demo");
    // results[k] = (perftest values, rrddmma values), one slot per repetition.
    type Samples = Vec<Option<(f64, f64)>>;
    let mut results: Vec<(Samples, Samples)> = items.iter().map(|_| (vec![None; reps], vec![None; reps])).collect();
    let mut failures = Vec::new();
    for chunk in out.split("=== ").skip(1) {
        let head = chunk.lines().next().unwrap_or("");
        let f: Vec<&str> = head.split('|').collect();
        let [tool, k, rep] = f[..] else { continue };
        let (Ok(k), Ok(rep)) = (k.parse::<usize>(), rep.parse::<usize>()) else { continue };
        let it = &items[k];
        let perftest = tool == "perftest";
        let ok = chunk.contains("CLIENT-RC=0") && chunk.contains("SERVER-RC=0");
        match client_numbers(chunk, it.size, perftest, it.bw).filter(|_| ok) {
            Some(v) if perftest => results[k].0[rep] = Some(v),
            Some(v) => results[k].1[rep] = Some(v),
            None => failures.push(format!("{tool} {} {} B:\n{chunk}", it.name, it.size)),
        }
    }

    let mut csv = String::from("series,size,value\n");
    println!(
        "\nrrddmma-perf vs perftest on {} ({reps} alternating runs, {DEMO_ITERS} iterations each, inline off; \
         values are medians, the ratio is the median of the runs' ratios, spread its lowest-highest)\n",
        place.describe()
    );
    println!("| test | size (B) | perftest | rrddmma-perf | ratio | spread |");
    println!("|---|---|---|---|---|---|");
    let mut bw_ratios = Vec::new();
    let mut lat_ratios = Vec::new();
    for (it, (p, r)) in items.iter().zip(&results) {
        let whats: &[(usize, &str)] = if it.bw { &[(0, "MiB/s")] } else { &[(0, "median µs"), (1, "p99 µs")] };
        for &(i, what) in whats {
            let pick = |v: &Samples| -> Vec<Option<f64>> {
                v.iter().map(|x| x.map(|x| if i == 0 { x.0 } else { x.1 })).collect()
            };
            let (pv, rv) = (pick(p), pick(r));
            let (Some(pm), Some(rm), Some((ratio, lo, hi))) = (
                median(pv.iter().flatten().copied().collect()),
                median(rv.iter().flatten().copied().collect()),
                ratio_spread(&pv, &rv),
            ) else {
                println!("| {} {what} | {} | failed | failed | - | - |", it.name, it.size);
                continue;
            };
            if it.bw {
                csv.push_str(&format!(
                    "perftest (ib_write_bw),{},{pm:.3}\nrrddmma-perf,{},{rm:.3}\n",
                    it.size, it.size
                ));
                bw_ratios.push(ratio);
            } else {
                lat_ratios.push((format!("{} {}", it.name, what.trim_end_matches(" µs")), ratio, lo, hi));
            }
            println!("| {} {what} | {} | {pm:.2} | {rm:.2} | {ratio:.2}x | {lo:.2}-{hi:.2}x |", it.name, it.size);
        }
    }
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp();
    println!();
    if !bw_ratios.is_empty() {
        let min = bw_ratios.iter().copied().fold(f64::MAX, f64::min);
        println!("write bandwidth rrddmma-perf / perftest: geometric mean {:.3}x, lowest {min:.3}x (>= 1.00 is as fast or faster)", geo(&bw_ratios));
    }
    for (name, r, lo, hi) in &lat_ratios {
        println!(
            "{name} latency rrddmma-perf / perftest: {r:.3}x, spread {lo:.3}-{hi:.3}x (<= 1.00 is as fast or faster)"
        );
    }
    let csv_path = dir.join("write_bw_sweep.csv");
    let svg_path = dir.join("write_bw_sweep.svg");
    std::fs::write(&csv_path, &csv)?;
    run(Command::new(exe)
        .arg("plot")
        .arg(&csv_path)
        .arg(&svg_path)
        .arg(format!("RDMA WRITE bandwidth on {}, rrddmma-perf vs perftest", place.device()))
        .arg("MiB/s"))?;
    println!("plot: {}\ndata: {}", svg_path.display(), csv_path.display());
    Ok(failures)
}

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
fn instr_script(me: &str) -> String {
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

/// The count callgrind printed at the end of a run (`Collected : N`).
fn collected(out: &str) -> Option<u64> {
    out.lines().find_map(|l| l.split("Collected :").nth(1)).and_then(|v| v.trim().parse::<u64>().ok())
}

/// Userspace instructions per message of one tool from its two runs:
/// `(I(n2) - I(n1)) / (n2 - n1)`, when both ran, in event mode, and the
/// second counted more.
fn per_message(runs: &[(u64, u64)]) -> Option<f64> {
    let [(n1, i1), (n2, i2)] = runs[..] else { return None };
    (n2 > n1 && i2 > i1).then(|| (i2 - i1) as f64 / (n2 - n1) as f64)
}

/// The instruction-count table; returns the failed runs.
fn instr_report(out: &str) -> Vec<String> {
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

/// Iteration counts whose difference gives the per-iteration count.
const VERBS_N: [u64; 2] = [100, 400];

/// The bench-verbs rows: (kind argument, batch, what is posted and polled).
const VERBS_ROWS: [(&str, u32, &str); 9] = [
    ("write", 1, "RDMA WRITE 64 B"),
    ("write", 32, "RDMA WRITE 64 B"),
    ("read", 1, "RDMA READ 64 B"),
    ("send", 1, "SEND 64 B + its RECV (post_recv, 2 polls)"),
    ("faa", 1, "atomic fetch-and-add"),
    ("cas", 1, "atomic compare-and-swap"),
    ("wr", 1, "RDMA WRITE, `ibv_wr_*` (`Qp::wr_batch`)"),
    ("wr", 32, "RDMA WRITE, `ibv_wr_*` (`Qp::wr_batch`)"),
    ("cqex", 1, "RDMA WRITE, extended CQ (`Cq::start_poll`)"),
];

/// `cargo xtask bench-verbs`: userspace instructions per iteration (post +
/// poll) of each of [`VERBS_ROWS`], rrddmma (`examples/verbs_cost.rs`)
/// against C (`benches/verbs_cost/verbs_cost.c`), counted by callgrind
/// inside the functions named `verbs_cost_*` only, on the default device.
/// With `kinds` (e.g. `wr cqex`), only their rows run.
pub fn bench_verbs(kinds: &[String]) -> Result<()> {
    if let Some(k) = kinds.iter().find(|k| !VERBS_ROWS.iter().any(|(kind, _, _)| kind == k)) {
        return Err(format!("bench-verbs: no row of kind {k:?}; kinds: write read send faa cas wr cqex").into());
    }
    let rows: Vec<_> =
        VERBS_ROWS.iter().filter(|(kind, _, _)| kinds.is_empty() || kinds.iter().any(|k| k == kind)).collect();
    run(Command::new(env!("CARGO")).args(["build", "--release", "--quiet", "--example", "verbs_cost"]))?;
    let rust = root().join("target/release/examples/verbs_cost");
    let c = root().join("target/xtask/verbs_cost_c");
    std::fs::create_dir_all(root().join("target/xtask"))?;
    run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&c)
        .arg(root().join("benches/verbs_cost/verbs_cost.c"))
        .arg("-libverbs"))?;
    let place = device::locate(None)?;
    eprintln!("bench-verbs on {}", place.describe());
    let mut steps = Vec::new();
    for (kind, batch, _) in &rows {
        for (side, exe) in [("rrddmma", &rust), ("C", &c)] {
            for n in VERBS_N {
                steps.push(Step {
                    name: format!("{side} {kind} batch {batch} n {n}"),
                    command: format!(
                        "valgrind --tool=callgrind --vgdb=no --callgrind-out-file=/dev/null \
                         --toggle-collect='verbs_cost_*' '{}' \"$RRDDMMA_TEST_DEVICE\" {kind} {batch} {n}",
                        exe.display()
                    ),
                });
            }
        }
    }
    let done = device::run_steps(&place, &steps)?;
    let mut counts = Vec::new();
    for d in &done {
        match collected(&d.output) {
            Some(n) if d.code == Some(0) => counts.push(n),
            _ => return Err(format!("{} failed ({:?}):\n{}", d.name, d.code, d.output).into()),
        }
    }
    let per = |i: usize| (counts[i + 1] as f64 - counts[i] as f64) / (VERBS_N[1] - VERBS_N[0]) as f64;
    println!("| requests | per post | C (libibverbs calls) | rrddmma | ratio rrddmma / C |");
    println!("|---|---|---|---|---|");
    let mut over = Vec::new();
    for (row, (kind, batch, what)) in rows.iter().enumerate() {
        let (r, cc) = (per(row * 4), per(row * 4 + 2));
        if r / cc > 1.02 {
            over.push(format!("{kind} x{batch} {:.3}", r / cc));
        }
        println!("| {what} | {batch} | {cc:.1} | {r:.1} | {:.3} |", r / cc);
    }
    println!(
        "\nuserspace instructions per iteration (post + poll), device {}; {}",
        place.device(),
        if over.is_empty() {
            "every row within 1.02x".to_string()
        } else {
            format!("above 1.02x: {}", over.join(", "))
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's ratio is the median of the repetitions' own ratios; a
    /// repetition missing either tool is left out of the ratio and spread.
    #[test]
    fn demo_ratio_is_the_median_of_paired_runs_with_its_spread() {
        let p = [Some(10.0), Some(20.0), None, Some(10.0), Some(10.0)];
        let r = [Some(12.0), Some(20.0), Some(99.0), Some(9.0), None];
        let (m, lo, hi) = ratio_spread(&p, &r).unwrap();
        assert_eq!((m, lo, hi), (1.0, 0.9, 1.2));
        assert!(ratio_spread(&[None], &[Some(1.0)]).is_none());
        // perftest's "inf" or 0 (clock estimate failed) gives no ratio.
        let p = [Some(f64::INFINITY), Some(0.0), Some(10.0)];
        let r = [Some(5.0), Some(5.0), Some(11.0)];
        assert_eq!(ratio_spread(&p, &r).unwrap(), (1.1, 1.1, 1.1));
    }

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

    /// A `-D` ping-pong against perftest passes only when both sides print
    /// their rows and counted about as many iterations.
    #[test]
    fn duration_interop_wants_matching_counts() {
        let done = |ours: u32, theirs: u32| {
            Done {
            name: String::new(),
            code: Some(0),
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

    /// rrddmma-perf's JSON for an outcast run, 2 QPs per pair, 10 per QP.
    fn outcast(second_flow: &str) -> String {
        format!(
            "noise\n{{\n  \"tool\": \"rrddmma-perf\",\n  \"mode\": \"cluster\",\n  \"pattern\": \"outcast\",\n  \
             \"op\": \"read\",\n  \"ranks\": 3,\n  \"qps_per_pair\": 2,\n  \"threads_per_rank\": 2,\n  \
             \"iterations_per_qp\": 10,\n  \"sizes\": [64],\n  \"results\": [\n    {{\"size\": 64, \"flows\": [\n      \
             {{\"src\": 0, \"dst\": 1, \"requests\": 20, \"seconds\": 1, \"bw_mib_s\": 2.0, \"msg_rate_mpps\": 1, \
             \"lat_us\": {{\"p50\": 1, \"p99\": 2, \"p999\": 3, \"avg\": 1}}}},\n      {second_flow}],\n      \
             \"rank_totals\": [{{\"rank\": 0, \"out_mib_s\": 5.0, \"in_mib_s\": 0}}, {{\"rank\": 1, \"out_mib_s\": 0, \
             \"in_mib_s\": 2.0}}, {{\"rank\": 2, \"out_mib_s\": 0, \"in_mib_s\": 3.0}}],\n      \
             \"aggregate_mib_s\": 5.0, \"jain_fairness\": 0.96}}\n  ]\n}}\nmore noise\n"
        )
    }

    #[test]
    fn cluster_json_must_hold_every_pair_with_its_requests() {
        let w = ClusterWant::new("outcast", "read", 2, 2, &[64], 10);
        let good = "{\"src\": 0, \"dst\": 2, \"requests\": 20, \"seconds\": 1, \"bw_mib_s\": 3.0, \
                    \"msg_rate_mpps\": 1, \"lat_us\": {\"p50\": 1, \"p99\": 2, \"p999\": 3, \"avg\": 1}}";
        let js = jsons_in(&format!("{}{}", outcast(good), outcast(good)));
        assert_eq!(js.len(), 2);
        assert!(cluster_json_ok(&js[0], &w));
        // Requests of one QP only, a zero latency, a missing pair, other settings: all refused.
        for bad in [
            good.replace("20", "10"),
            good.replace("\"p99\": 2", "\"p99\": 0"),
            good.replace("\"dst\": 2", "\"dst\": 1"),
        ] {
            assert!(!cluster_json_ok(&jsons_in(&outcast(&bad))[0], &w), "{bad}");
        }
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 1, 2, &[64], 10)));
        assert!(!cluster_json_ok(&js[0], &ClusterWant::new("outcast", "read", 2, 2, &[64, 128], 10)));
    }
}
