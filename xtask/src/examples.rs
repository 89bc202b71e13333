//! Device checks of the interoperable examples: `rc_pingpong` and
//! `ud_pingpong` against rdma-core's `ibv_rc_pingpong` / `ibv_ud_pingpong` in
//! both roles and against themselves; `show_gids` against the kernel's sysfs
//! GID table; `devinfo` against `ibv_devinfo`; bad command lines.

use std::path::PathBuf;
use std::process::Command;

use crate::device::{Check, Done};
use crate::{root, show, Result};

const EXAMPLES: [&str; 7] = ["rc_pingpong", "ud_pingpong", "show_gids", "devinfo", "recipes", "raw_echo", "dc_mkey"];

/// The recipes `examples/recipes.rs` runs (docs/recipes.md).
const RECIPES: [&str; 6] =
    ["two_processes", "remote_table", "ud_srq", "wait_without_spinning", "gid_and_mtu", "error_completions"];

fn example(name: &str) -> String {
    let p: PathBuf = root().join("target/debug/examples").join(name);
    format!("'{}'", p.display())
}

/// Shell lines setting `$GFLAG` to `-g N` for the first RoCE v2 GID of port 1
/// that maps an IPv4 address, read from sysfs (empty on InfiniBand, where
/// the LID routes).
fn gid_flag(dev: &str) -> String {
    format!(
        "P=/sys/class/infiniband/{dev}/ports/1; G=; \
         for f in $(grep -l '^0000:0000:0000:0000:0000:ffff:' $P/gids/* 2>/dev/null); do \
           i=${{f##*/}}; [ \"$(cat $P/gid_attrs/types/$i 2>/dev/null)\" = 'RoCE v2' ] && {{ G=$i; break; }}; \
         done; GFLAG=${{G:+-g $G}}; echo \"GID index: ${{G:-none}}\"; "
    )
}

/// A server and a client on one TCP port: the server starts in the
/// background, the client connects once the port listens; both outputs are
/// printed with `server: ` / `client: ` prefixes; the step fails unless both
/// exit 0.
fn pair(dev: &str, port: u16, server: &str, client: &str) -> String {
    format!(
        "{g}D=$(mktemp -d); \
         timeout 60 {server} -d {dev} $GFLAG -p {port} > $D/s 2>&1 & S_PID=$!; \
         for i in $(seq 100); do ss -ltn | grep -q ':{port} ' && break; sleep 0.1; done; \
         timeout 60 {client} -d {dev} $GFLAG -p {port} localhost > $D/c 2>&1; C=$?; \
         wait $S_PID; S=$?; \
         sed 's/^/server: /' $D/s; sed 's/^/client: /' $D/c; rm -rf $D; \
         echo \"exit server=$S client=$C\"; [ $S = 0 ] && [ $C = 0 ]",
        g = gid_flag(dev)
    )
}

/// Both sides completed `iters` exchanges of `size` bytes and printed the C
/// tools' result lines; no `-c` complaint.
fn exchanged(d: &Done, iters: u32, size: u64) -> bool {
    let bytes = size * u64::from(iters) * 2;
    let has = |who: &str| {
        d.output.lines().any(|l| l.starts_with(&format!("{who}: {iters} iters in ")) && l.ends_with(" usec/iter"))
            && d.output.lines().any(|l| l.starts_with(&format!("{who}: {bytes} bytes in ")) && l.ends_with(" Mbit/sec"))
    };
    d.code == Some(0) && has("server") && has("client") && !d.output.contains("invalid data")
}

/// `key:<tabs>value` lines of an `ibv_devinfo`-style report, in order.
fn fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `devinfo -v` and `ibv_devinfo -v` agree on the facts that matter.
fn devinfo_matches(d: &Done, dev: &str) -> bool {
    let Some((ours, theirs)) = d.output.split_once("=== ibv_devinfo") else { return false };
    let (a, b) = (fields(ours), fields(theirs));
    let keys = [
        "hca_id",
        "transport",
        "fw_ver",
        "node_guid",
        "sys_image_guid",
        "vendor_id",
        "vendor_part_id",
        "phys_port_cnt",
        "max_mr_size",
        "max_qp",
        "max_qp_wr",
        "max_cqe",
        "max_sge",
        "atomic_cap",
        "num_comp_vectors",
        "port",
        "state",
        "max_mtu",
        "active_mtu",
        "port_lid",
        "link_layer",
        "gid_tbl_len",
        "active_width",
        "active_speed",
    ];
    let mut ok = d.code == Some(0) && ours.contains(&format!("hca_id:\t{dev}"));
    for k in keys {
        let get = |f: &[(String, String)]| f.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let (x, y) = (get(&a), get(&b));
        if x.is_none() || x != y {
            println!("devinfo differs from ibv_devinfo on {k}: {x:?} vs {y:?}");
            ok = false;
        }
    }
    let gids =
        |t: &str| t.lines().map(str::trim).filter(|l| l.starts_with("GID[")).map(String::from).collect::<Vec<_>>();
    if gids(ours).is_empty() || gids(ours) != gids(theirs) {
        println!("GID lines differ: {:?} vs {:?}", gids(ours), gids(theirs));
        ok = false;
    }
    ok
}

/// Every non-zero GID of port 1 in sysfs (`sysfs INDEX GID TYPE` lines) is a
/// `show_gids` row with the same index, GID, version, IPv4 and netdev, and
/// the count matches.
fn show_gids_matches(d: &Done, dev: &str) -> bool {
    let rows: Vec<Vec<&str>> = d.output.lines().map(|l| l.split_whitespace().collect()).collect();
    let sysfs: Vec<&Vec<&str>> = rows.iter().filter(|r| r.first() == Some(&"sysfs")).collect();
    let mut ok = d.code == Some(0) && !sysfs.is_empty();
    for s in &sysfs {
        // sysfs INDEX GID TYPE... NETDEV
        let (idx, gid, netdev) = (s[1], s[2], *s.last().unwrap_or(&""));
        let ver = if s.contains(&"v2") { "v2" } else { "v1" };
        let ipv4 = gid.strip_prefix("0000:0000:0000:0000:0000:ffff:").map(|t| {
            let h: Vec<u8> = t.split(':').flat_map(|w| u16::from_str_radix(w, 16).unwrap_or(0).to_be_bytes()).collect();
            format!("{}.{}.{}.{}", h[0], h[1], h[2], h[3])
        });
        let mut want = vec![dev, "1", idx, gid];
        if let Some(a) = &ipv4 {
            want.push(a);
        }
        want.extend([ver, netdev]);
        if !rows.contains(&want) {
            println!("show_gids has no row {want:?}");
            ok = false;
        }
    }
    ok && d.output.contains(&format!("n_gids_found={}", sysfs.len()))
}

/// Builds the examples and returns their device checks.
pub fn checks(dev: &str) -> Result<Vec<Check>> {
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet"]).current_dir(root());
    for e in EXAMPLES {
        build.args(["--example", e]);
    }
    eprintln!("$ {}", show(&build));
    let built = build.status().is_ok_and(|s| s.success());
    if !built {
        println!("building the examples failed");
    }
    let [rc, ud, gids, devinfo, recipes, raw_echo, dc_mkey] = EXAMPLES.map(example);
    let dev_s = dev.to_string();
    let mut v = Vec::new();
    let mut add_pair = |name: &str, port: u16, server: String, client: String, iters: u32, size: u64| {
        let cmd = pair(dev, port, &server, &client);
        v.push(Check::verdict(name, cmd, move |d| built && exchanged(d, iters, size)));
    };
    add_pair(
        "rc_pingpong server, ibv_rc_pingpong client",
        18601,
        format!("{rc} -n 200 -c"),
        "ibv_rc_pingpong -n 200 -c".into(),
        200,
        4096,
    );
    add_pair(
        "ibv_rc_pingpong server, rc_pingpong client",
        18602,
        "ibv_rc_pingpong -n 200 -c -s 8192 -m 2048".into(),
        format!("{rc} -n 200 -c -s 8192 -m 2048 -e"),
        200,
        8192,
    );
    add_pair(
        "rc_pingpong server and client (events, small rx depth)",
        18603,
        format!("{rc} -n 300 -c -e -r 4 -s 1000"),
        format!("{rc} -n 300 -c -r 4 -s 1000"),
        300,
        1000,
    );
    add_pair(
        "ud_pingpong server, ibv_ud_pingpong client",
        18604,
        format!("{ud} -n 200 -c"),
        "ibv_ud_pingpong -n 200 -c".into(),
        200,
        1024,
    );
    add_pair(
        "ibv_ud_pingpong server, ud_pingpong client",
        18605,
        "ibv_ud_pingpong -n 200 -c -s 2048 -e".into(),
        format!("{ud} -n 200 -c -s 2048"),
        200,
        2048,
    );
    add_pair(
        "ud_pingpong server and client (events)",
        18606,
        format!("{ud} -n 300 -c -s 64 -r 8"),
        format!("{ud} -n 300 -c -s 64 -r 8 -e"),
        300,
        64,
    );
    // The -c check can fail: a client sending the plain 0x7b buffer.
    let cmd = pair(dev, 18607, &format!("{rc} -n 10 -c"), "ibv_rc_pingpong -n 10");
    v.push(Check::verdict("rc_pingpong -c refuses data without the pattern", cmd, move |d| {
        built
            && d.code.is_some_and(|c| c != 0)
            && d.output.contains("server: invalid data in page 0")
            && d.output.contains("exit server=1 client=0")
    }));

    // Shell builtins only (`read`, no `cat` or command substitution): a
    // table of 1,024 entries read with a process per entry took minutes
    // in the TCG VM.
    let sysfs = format!(
        "P=/sys/class/infiniband/{dev}/ports/1; for f in $P/gids/*; do i=${{f##*/}}; g=; t=; n=; \
         read -r g 2>/dev/null < $f || continue; \
         [ \"$g\" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue; \
         read -r t 2>/dev/null < $P/gid_attrs/types/$i; read -r n 2>/dev/null < $P/gid_attrs/ndevs/$i; \
         case \"$t\" in 'RoCE v2') t=v2;; *) t=v1;; esac; echo \"sysfs $i $g $t $n\"; done"
    );
    v.push(Check::verdict(
        "docs/recipes.md: every recipe runs to its checked end",
        format!("timeout 300 {recipes} {dev}"),
        move |done| {
            built
                && done.code == Some(0)
                && RECIPES.iter().all(|r| done.output.lines().any(|l| l == format!("recipe {r}: ok")))
        },
    ));
    // Two processes: a DC target with an indirect key on ConnectX; elsewhere
    // both refusals printed and the RC fallback passing the same check.
    v.push(Check::verdict(
        "dc_mkey: DCT + indirect key across two processes; elsewhere the DC and key refusals and the RC fallback",
        format!("timeout 120 {dc_mkey} {dev}"),
        move |done| {
            let out = &done.output;
            let dc = out.contains("rank 0: indirect key") && out.contains("through the indirect key, mesh over DC");
            let refused =
                out.lines().any(|l| l.starts_with("rank 0: unsupported: ") && l.contains("indirect memory keys"))
                    && out.lines().any(|l| l.starts_with("rank 1: unsupported: ") && l.contains("DC"))
                    && out.contains("three RC WRITEs, a token each, mesh over RC");
            built && done.code == Some(0) && out.lines().any(|l| l == "dc_mkey: ok") && (dc || refused)
        },
    ));
    // A ConnectX Ethernet port echoes; a device without raw packet QPs
    // (rxe, siw) gets the refusal, naming raw packets, and status 0.
    v.push(Check::verdict(
        "raw_echo sets up (flow, raw packet QP, striding RQ where offered) on a ConnectX Ethernet port; elsewhere prints the raw packet refusal",
        format!("timeout 120 {raw_echo} {dev} 1 7777 0"),
        move |done| {
            let refused = done.output.lines().any(|l| l.starts_with("unsupported: ") && l.contains("raw packet"));
            built && done.code == Some(0) && (refused || done.output.contains("echoed 0 packets"))
        },
    ));
    let d = dev_s.clone();
    v.push(Check::verdict(
        "show_gids lists the sysfs GID table",
        format!("timeout 60 {gids} {dev} 1 && {sysfs}"),
        move |done| built && show_gids_matches(done, &d),
    ));
    let d = dev_s.clone();
    v.push(Check::verdict(
        "devinfo agrees with ibv_devinfo",
        format!("timeout 60 {devinfo} -v -d {dev} && echo '=== ibv_devinfo' && timeout 60 ibv_devinfo -v -d {dev}"),
        move |done| built && devinfo_matches(done, &d),
    ));
    let bad = [
        ("rc_size", format!("{rc} -s abc")),
        ("rc_mtu", format!("{rc} -m 1000 localhost")),
        ("ud_flag", format!("{ud} --bogus")),
        ("ud_mtu_flag", format!("{ud} -m 1024")),
        ("show_gids", format!("{gids} -x")),
        ("devinfo", format!("{devinfo} -q")),
    ];
    let mut cmd: String = bad
        .iter()
        .map(|(name, c)| {
            format!("timeout 30 {c} > /tmp/ex-bad.$$ 2>&1; echo \"{name} exit=$?\"; grep -c '^Usage' /tmp/ex-bad.$$; ")
        })
        .collect();
    cmd.push_str(&format!("timeout 30 {rc} -d missing0 -n 1; echo \"missing exit=$?\""));
    v.push(Check::verdict("bad command lines exit 2 with the usage; a missing device exits 1", cmd, move |done| {
        let lines: Vec<&str> = done.output.lines().collect();
        let usage_after = |name: &str| {
            lines
                .windows(2)
                .any(|w| w[0] == format!("{name} exit=2") && w[1].trim().parse::<u32>().is_ok_and(|n| n >= 1))
        };
        built
            && bad.iter().all(|(name, _)| usage_after(name))
            && lines.contains(&"missing exit=1")
            && done.output.contains("missing0")
    }));
    Ok(v)
}

/// `cargo xtask examples`: only these checks, in one device session.
pub fn run(_args: &[String]) -> Result<()> {
    crate::deps::ensure()?;
    let place = crate::device::locate(None)?;
    println!("example checks on {}", place.describe());
    let checks = checks(place.device())?;
    let mut tally = crate::tally::Tally::default();
    crate::device::run_checks(&place, &checks, &mut tally)?;
    tally.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(code: i32, output: &str) -> Done {
        Done { name: "t".into(), code: Some(code), output: output.into(), secs: Some(1) }
    }

    #[test]
    fn exchange_verdict_needs_both_sides_and_no_complaint() {
        let both = "server: 400 bytes in 0.10 seconds = 0.03 Mbit/sec\nserver: 2 iters in 0.10 seconds = 5.00 usec/iter\n\
                    client: 400 bytes in 0.10 seconds = 0.03 Mbit/sec\nclient: 2 iters in 0.10 seconds = 5.00 usec/iter\n";
        assert!(exchanged(&done(0, both), 2, 100));
        assert!(!exchanged(&done(1, both), 2, 100), "exit code");
        assert!(!exchanged(&done(0, both), 3, 100), "iteration count");
        assert!(!exchanged(&done(0, both), 2, 50), "byte count");
        let one = both.lines().filter(|l| l.starts_with("server")).collect::<Vec<_>>().join("\n");
        assert!(!exchanged(&done(0, &one), 2, 100), "client line missing");
        assert!(!exchanged(&done(0, &format!("{both}invalid data in page 0\n")), 2, 100));
    }

    #[test]
    fn devinfo_verdict_compares_values() {
        let keys = "hca_id transport fw_ver node_guid sys_image_guid vendor_id vendor_part_id phys_port_cnt \
                    max_mr_size max_qp max_qp_wr max_cqe max_sge atomic_cap num_comp_vectors port state max_mtu \
                    active_mtu port_lid link_layer gid_tbl_len active_width active_speed";
        let report = |guid: &str| {
            let mut s: String = keys.split_whitespace().map(|k| format!("\t{k}:\t\tv_{k}\n")).collect();
            s = s.replace("hca_id:\t\tv_hca_id", "hca_id:\trxe0").replace("v_node_guid", guid);
            s + "\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n"
        };
        let same = format!("{}=== ibv_devinfo\n{}", report("0200:00ff"), report("0200:00ff"));
        assert!(devinfo_matches(&done(0, &same), "rxe0"));
        assert!(!devinfo_matches(&done(0, &same), "rxe1"));
        let other = format!("{}=== ibv_devinfo\n{}", report("0200:00ff"), report("0200:00fe"));
        assert!(!devinfo_matches(&done(0, &other), "rxe0"));
        assert!(!devinfo_matches(&done(0, &report("0200:00ff")), "rxe0"), "no ibv_devinfo part");
    }

    #[test]
    fn show_gids_verdict_matches_rows_to_sysfs() {
        let table = "rxe0 1 1 0000:0000:0000:0000:0000:ffff:7f00:0001 127.0.0.1 v2 lo\n\
                     rxe0 1 2 0000:0000:0000:0000:0000:0000:0000:0001 v2 lo\nn_gids_found=2\n";
        let sysfs = "sysfs 1 0000:0000:0000:0000:0000:ffff:7f00:0001 v2 lo\n\
                     sysfs 2 0000:0000:0000:0000:0000:0000:0000:0001 v2 lo\n";
        assert!(show_gids_matches(&done(0, &format!("{table}{sysfs}")), "rxe0"));
        assert!(!show_gids_matches(&done(0, &format!("{}{sysfs}", table.replace("127.0.0.1", "127.0.0.2"))), "rxe0"));
        assert!(!show_gids_matches(&done(0, &format!("{}{sysfs}", table.replace("=2", "=3"))), "rxe0"));
        assert!(!show_gids_matches(&done(0, &format!("{table}{}", sysfs.replacen("v2", "v1", 1))), "rxe0"));
        assert!(!show_gids_matches(&done(0, table), "rxe0"), "no sysfs rows");
    }
}
