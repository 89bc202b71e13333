//! rrddmma-perf's pairwise device checks: interoperability with perftest
//! (both directions, also through rdma_cm), against itself, payload
//! checking, refusals and outputs.

use super::verdict::{bw_plausible, event_counts, interop_ok, json_in, lat_plausible, zero_allocs};
use crate::device::Check;
use crate::pairs::{binary, both_ok, cm_pair, pair, rows, side, GID_SHELL};
use crate::Result;

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

    // -c DC on a device that is not mlx5 (rxe): each role ends at once with
    // exit 1, naming the device and what to run instead, before any peer
    // waits (a server that waited would run into the timeout: exit 124);
    // the DCI stream flags parse (their refusals are host tests).
    v.push(Check::verdict(
        "perf: -c DC --log_dci_streams refused on a device that is not mlx5, both roles, naming the device",
        format!(
            "{GID_SHELL}; timeout 60 {me} write bw {dev} -p 18765 -c DC --log_dci_streams 2; echo DC-SERVER-RC=$?; \
             timeout 60 {me} send bw {dev} -p 18766 -c DC --log_dci_streams 3 --log_active_dci_streams 1 127.0.0.1; \
             echo DC-CLIENT-RC=$?; echo DEVICE=$D"
        ),
        |d| {
            let o = &d.output;
            let dev = o.lines().find_map(|l| l.strip_prefix("DEVICE=")).unwrap_or("?");
            let named = format!(
                "rrddmma-perf: -c DC needs an mlx5 (ConnectX) device: DC initiators and targets are created \
                 through mlx5dv; {dev} is not one (run -c RC, UC, UD or XRC on it)"
            );
            o.contains("DC-SERVER-RC=1") && o.contains("DC-CLIENT-RC=1") && o.matches(&named).count() == 2
        },
    ));

    // -c DC latency tests and -b (a DC initiator and a DC target on each
    // side) run where -c DC runs: off mlx5 the device's refusal, exit 1,
    // before any peer waits; -R (no DC connection to make) is refused at
    // parse time, exit 2, on any device.
    v.push(Check::verdict(
        "perf: -c DC latency and -b refused off mlx5 naming the device, -R refused with the reason",
        format!(
            "{GID_SHELL}; s=/sys/class/infiniband/$D; drv=-; [ -e \"$s/device/driver\" ] && \
             drv=$(basename \"$(readlink -f \"$s/device/driver\")\"); echo DRIVER=$drv; \
             if [ \"$drv\" = mlx5_core ]; then set -- 'read bw -R'; \
             else set -- 'write lat' 'read lat -s 64' 'send lat' 'atomic lat' 'send bw -b' 'write bw -b' 'read bw -R'; fi; \
             for a in \"$@\"; do \
             timeout 30 {me} $a {dev} -p 18767 -c DC 127.0.0.1 >/tmp/rrddmma-perf-dc-refused 2>&1; rc=$?; \
             head -1 /tmp/rrddmma-perf-dc-refused; echo DC-RC=$rc; done"
        ),
        |d| {
            let o = &d.output;
            let cm = "rrddmma-perf: -c DC: -R (rdma_cm makes no DC connections: DC has no connection to make); run \
                      -c DC without -R (the exchange goes over TCP)";
            let refused = |l: &str| {
                l.starts_with("rrddmma-perf: -c DC needs an mlx5 (ConnectX) device: ")
                    && l.ends_with(" is not one (run -c RC, UC, UD or XRC on it)")
            };
            // On mlx5 the six run (the DC interop checks pair them with
            // perftest): only -R is refused there.
            let mlx5 = o.lines().any(|l| l == "DRIVER=mlx5_core");
            let runs = if mlx5 { 0 } else { 6 };
            o.matches("DC-RC=1\n").count() == runs
                && o.lines().filter(|l| refused(l)).count() == runs
                && o.matches("DC-RC=2\n").count() == 1
                && o.lines().any(|l| l == cm)
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
