//! rrddmma-perf's perftest flags for shared receive queues, rate limits,
//! on-demand paging and XRC, on the device: interoperability with perftest
//! in both roles where rxe has the feature, the typed refusal where it has
//! not.

use super::verdict::interop_ok;
use crate::device::{Check, Done};
use crate::pairs::{binary, both_ok, pair, rows, side};
use crate::Result;

/// Both roles of a pair against perftest: (name, server, client, whether
/// rrddmma-perf is the client), on TCP ports `port` and `port + 1`.
fn roles(me: &str, test: &str, tool: &str, flags: &str, port: usize) -> [(String, String, String, bool); 2] {
    let dev = "-d $D -x $X";
    [true, false].map(|ours_client| {
        let p = port + usize::from(ours_client);
        let ours = format!("{me} {test} {dev} -p {p} {flags}");
        // `-F`: perftest's CPU-frequency estimate is unreliable under TCG.
        let theirs = format!("{tool} {dev} -p {p} -F {flags}");
        if ours_client {
            (format!("rrddmma-perf {test} {flags} client -> {tool} server"), theirs, format!("{ours} 127.0.0.1"), true)
        } else {
            (format!("{tool} {flags} client -> rrddmma-perf {test} server"), ours, format!("{theirs} 127.0.0.1"), false)
        }
    })
}

/// The SW-limited rate of the rate checks, in MiB/s, and the flags that set it.
/// Under TCG on a loaded machine an unpaced 4 KiB stream on rxe ran at 2
/// to 20 MiB/s: the limit stays well below that.
const RATE_MIB: f64 = 1.0;
const RATE_FLAGS: &str = "--rate_limit 1 --rate_units M --rate_limit_type SW --burst_size 8";

/// Whether rrddmma-perf's own rows of `size` bytes (MiB/s in column 3)
/// show a rate near the limit: above a floor (the pacing did not stall
/// the run) and below 1.5 times the limit (TCG is noisy; an unpaced
/// 4 KiB stream on rxe runs above it).
fn near_limit(out: &str, size: u64) -> bool {
    let r = rows(out, size);
    !r.is_empty() && r.iter().all(|r| r[2] > RATE_MIB * 0.2 && r[2] < RATE_MIB * 1.5)
}

/// The checks for `cargo xtask test` under Debian stable's kernel.
pub fn checks() -> Result<Vec<Check>> {
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let dev = "-d $D -x $X";
    let mut v = Vec::new();

    // --use-srq: every receive from one SRQ (send bw with two QPs sharing
    // it, send lat), both roles; each side says it used one.
    let srq: [(&str, &str, &str, u64, u64, bool); 2] = [
        ("send bw", "ib_send_bw", "--use-srq -q 2 -s 1024 -n 400", 1024, 400, true),
        ("send lat", "ib_send_lat", "--use-srq -s 64 -n 200", 64, 200, false),
    ];
    for (k, (test, tool, flags, size, iters, bw)) in srq.into_iter().enumerate() {
        for (name, server, client, ours_client) in roles(&me, test, tool, flags, 18800 + 2 * k) {
            v.push(Check::verdict(&format!("perf flags: {name}"), pair(&server, &client), move |d| {
                interop_ok(d, test, size, iters, bw, ours_client)
                    && side(&d.output, ours_client).contains(" shared receive queue: ")
                    && side(&d.output, !ours_client).contains("Using SRQ      : ON")
            }));
        }
    }

    // --rate_limit_type SW: rrddmma-perf paces the stream it sends (its
    // client row near the limit); perftest's pacing depends on its CPU
    // frequency estimate, which TCG spoils, so its client is judged on
    // counts alone.
    for (name, server, client, ours_client) in
        roles(&me, "write bw", "ib_write_bw", &format!("-s 4096 -n 300 {RATE_FLAGS}"), 18810)
    {
        v.push(Check::verdict(&format!("perf flags: {name}"), pair(&server, &client), move |d| {
            interop_ok(d, "write bw", 4096, 300, true, ours_client)
                && (!ours_client
                    || (near_limit(side(&d.output, true), 4096)
                        && d.output.contains(" rate limit: 1 MiB/s, paced in software in bursts of 8")))
        }));
    }
    // SEND: rrddmma-perf's receiver measures what arrived, paced by its client.
    v.push(Check::verdict(
        "perf flags: rrddmma-perf send bw SW rate limit, the receiver measures the paced stream",
        pair(
            &format!("{me} send bw {dev} -p 18812 -s 4096 -n 300"),
            &format!("{me} send bw {dev} -p 18812 -s 4096 -n 300 {RATE_FLAGS} 127.0.0.1"),
        ),
        |d| both_ok(d) && near_limit(side(&d.output, true), 4096) && near_limit(side(&d.output, false), 4096),
    ));

    // What rxe lacks: device pacing (HW; without --rate_limit_type it falls
    // back to SW as perftest does), XRC, and on-demand paging before Linux
    // 6.14 (with ODP the pair must pass instead: RRDDMMA_EXPECT_ODP).
    v.push(Check::verdict(
        "perf flags: typed refusals on rxe (--rate_limit_type HW, -c XRC, --odp where the kernel lacks ODP) and HW's SW fallback",
        format!(
            "echo ODP=$RRDDMMA_EXPECT_ODP; {}; {}; {}; {}",
            pair(
                &format!("{me} write bw {dev} -p 18814 -s 4096 -n 200"),
                &format!("{me} write bw {dev} -p 18814 -s 4096 -n 200 --rate_limit 1 --rate_limit_type HW 127.0.0.1")
            ),
            pair(
                &format!("{me} write bw {dev} -p 18815 -s 4096 -n 300"),
                &format!("{me} write bw {dev} -p 18815 -s 4096 -n 300 --rate_limit 1 --rate_units M --burst_size 8 127.0.0.1")
            ),
            pair(
                &format!("{me} send bw {dev} -p 18816 -c XRC -n 100"),
                &format!("{me} send bw {dev} -p 18816 -c XRC -n 100 127.0.0.1")
            ),
            pair(
                &format!("{me} write bw {dev} -p 18817 -s 4096 -n 200 --odp"),
                &format!("{me} write bw {dev} -p 18817 -s 4096 -n 200 --odp 127.0.0.1")
            ),
        ),
        refusals,
    ));
    Ok(v)
}

/// The verdict of the refusal step: each pair's outcome, in order.
fn refusals(d: &Done) -> bool {
    let o = &d.output;
    let parts: Vec<&str> = o.split("CLIENT-RC=").collect();
    if parts.len() != 5 {
        return false;
    }
    // parts[k] starts with pair k's client exit code; pair k+1's client
    // output follows pair k's server output in it.
    let (hw, fallback, xrc, odp) = (parts[1], parts[2], parts[3], parts[4]);
    // The refusal names the device, its value and the way out between these.
    let hw_ok = o
        .contains("rrddmma-perf: --rate_limit_type HW: ibv_modify_qp_rate_limit: packet pacing is not supported by ")
        && o.contains("(packet_pacing_caps.qp_rate_limit_max = 0)")
        && o.contains("; use --rate_limit_type SW")
        && hw.starts_with('1');
    let fallback_ok = fallback.starts_with('0')
        && o.contains("the QP takes no HW rate limit (ibv_modify_qp_rate_limit: packet pacing is not supported")
        && o.contains(" rate limit: 1 MiB/s, paced in software in bursts of 8")
        && near_limit(hw, 4096);
    let xrc_ok = xrc.starts_with('1')
        && o.matches("rrddmma-perf: -c XRC: opening an XRC domain: ibv_open_xrcd:").count() == 2
        && o.contains("use -c RC)");
    let odp_ok = if o.contains("ODP=1") {
        odp.starts_with('0') && o.contains(" memory: registered with on-demand paging (--odp)")
    } else {
        odp.starts_with('1')
            && o.matches("rrddmma-perf: --odp: ibv_reg_mr: on-demand paging is not supported by ").count() == 2
    };
    hw_ok && fallback_ok && xrc_ok && odp_ok
}

/// The `--odp` checks for the kernel matrix (`release`: the newest kernel,
/// whose rxe has RC on-demand paging): WRITE, READ and SEND bandwidth with
/// both sides' buffers registered with ODP, against perftest in both roles.
pub fn odp_checks(release: &str) -> Result<Vec<Check>> {
    let exe = binary()?;
    let me = format!("'{}'", exe.display());
    let list: [(&str, &str, &str, u64, u64); 3] = [
        ("write bw", "ib_write_bw", "--odp -s 4096 -n 300", 4096, 300),
        ("read bw", "ib_read_bw", "--odp -s 4096 -n 200", 4096, 200),
        ("send bw", "ib_send_bw", "--odp -s 1024 -n 300", 1024, 300),
    ];
    let mut v = Vec::new();
    for (k, (test, tool, flags, size, iters)) in list.into_iter().enumerate() {
        for (name, server, client, ours_client) in roles(&me, test, tool, flags, 18820 + 2 * k) {
            v.push(Check::verdict(
                &format!("kernel {release}: perf flags: {name}"),
                pair(&server, &client),
                move |d| {
                    interop_ok(d, test, size, iters, true, ours_client)
                        && side(&d.output, ours_client).contains(" memory: registered with on-demand paging (--odp)")
                },
            ));
        }
    }
    Ok(v)
}
