//! Device checks of the librdmacm examples against rdmacm-utils' C tools, in
//! both roles, over the harness's CM device (`RRDDMMA_CM_ADDR`, see
//! `device.rs`): `rping` with data verification (`-v -V`) and
//! `rdma_server` / `rdma_client`.

use std::path::PathBuf;
use std::process::Command;

use crate::device::{Check, Done};
use crate::{root, show, Result};

const EXAMPLES: [&str; 3] = ["rping", "rdma_server", "rdma_client"];
/// Pings per rping run and their size.
const PINGS: u32 = 20;
const SIZE: u32 = 200;

fn example(name: &str) -> String {
    let p: PathBuf = root().join("target/debug/examples").join(name);
    format!("'{}'", p.display())
}

/// A server in the background, the client once it listens (rdmacm ports are
/// not in `ss`: a short wait), both outputs prefixed, exit codes reported.
fn pair(server: &str, client: &str) -> String {
    format!(
        "D=$(mktemp -d); timeout 120 {server} > $D/s 2>&1 & S_PID=$!; sleep 3; \
         timeout 120 {client} > $D/c 2>&1; C=$?; wait $S_PID; S=$?; \
         sed 's/^/server: /' $D/s; sed 's/^/client: /' $D/c; rm -rf $D; \
         echo \"exit server=$S client=$C\"; [ $S = 0 ] && [ $C = 0 ]"
    )
}

/// Every ping's data, as rping prints it, on both sides: `ping data:
/// rdma-ping-N: ` on the client, `server ping data: rdma-ping-N: ` on the
/// server, for N in 0..PINGS, the echoed text the 'A'..'z' rolling pattern.
fn pinged(d: &Done) -> bool {
    let ok_line = |prefix: &str, n: u32| {
        let head = format!("{prefix}rdma-ping-{n}: ");
        d.output.lines().any(|l| {
            l.strip_prefix(&head).is_some_and(|rest| {
                let first = b'A' + (n % 58) as u8;
                rest.len() == SIZE as usize - 1 - head.len() + prefix.len() && rest.as_bytes().first() == Some(&first)
            })
        })
    };
    d.code == Some(0)
        && (0..PINGS).all(|n| ok_line("client: ping data: ", n) && ok_line("server: server ping data: ", n))
        && !d.output.contains("data mismatch")
}

/// Both tools printed their start and a zero end.
fn exchanged(d: &Done) -> bool {
    d.code == Some(0)
        && [
            "server: rdma_server: start",
            "server: rdma_server: end 0",
            "client: rdma_client: start",
            "client: rdma_client: end 0",
        ]
        .iter()
        .all(|l| d.output.lines().any(|x| x == *l))
}

/// Builds the examples; whether they built.
pub fn build_examples() -> bool {
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet"]).current_dir(root());
    for e in EXAMPLES {
        build.args(["--example", e]);
    }
    eprintln!("$ {}", show(&build));
    let built = build.status().is_ok_and(|s| s.success());
    if !built {
        println!("building the rdmacm examples failed");
    }
    built
}

/// The `rping` example against C `rping`, in both roles, with data
/// verification: the server listens on `addr` (a shell word) at `port`
/// (our server) and `port + 1` (C's); each command runs after `setup`
/// (empty: none); the check names start with `prefix`.
pub fn rping_interop(prefix: &str, addr: &str, port: u16, setup: &str, built: bool) -> Vec<Check> {
    let rping = example("rping");
    let flags = format!("-v -V -S {SIZE}");
    let a = format!("-a {addr}");
    let after = |cmd: String| if setup.is_empty() { cmd } else { format!("{setup} && ({cmd})") };
    let (p1, p2) = (port, port + 1);
    [
        (
            "rping server, C rping client (-v -V)",
            pair(&format!("{rping} -s {a} -p {p1} {flags}"), &format!("rping -c {a} -p {p1} -C {PINGS} {flags}")),
        ),
        (
            "C rping server, rping client (-v -V)",
            pair(&format!("rping -s {a} -p {p2} {flags}"), &format!("{rping} -c {a} -p {p2} -C {PINGS} {flags}")),
        ),
    ]
    .into_iter()
    .map(|(name, cmd)| Check::verdict(&format!("{prefix}{name}"), after(cmd), move |d| built && pinged(d)))
    .collect()
}

/// Builds the examples and returns their device checks.
pub fn checks() -> Result<Vec<Check>> {
    let built = build_examples();
    let [rping, server, client] = EXAMPLES.map(example);
    let flags = format!("-v -V -S {SIZE}");
    let a = "-a \"$RRDDMMA_CM_ADDR\"";
    let mut v = rping_interop("", "\"$RRDDMMA_CM_ADDR\"", 7301, "", built);
    let mut add = |name: &str, cmd: String, judge: fn(&Done) -> bool| {
        v.push(Check::verdict(name, cmd, move |d| built && judge(d)));
    };
    add(
        "rping server and client (-v -V)",
        pair(&format!("{rping} -s {a} -p 7303 {flags}"), &format!("{rping} -c {a} -p 7303 -C {PINGS} {flags}")),
        pinged,
    );
    let s = "-s \"$RRDDMMA_CM_ADDR\"";
    add(
        "rdma_server, C rdma_client",
        pair(&format!("{server} -p 7304"), &format!("rdma_client {s} -p 7304")),
        exchanged,
    );
    add("C rdma_server, rdma_client", pair("rdma_server -p 7305", &format!("{client} {s} -p 7305")), exchanged);
    add("rping refuses a bad size", format!("{rping} -s -S 10; [ $? = 2 ]"), |d| {
        d.code == Some(0) && d.output.contains("valid range is 26")
    });
    Ok(v)
}

/// `cargo xtask cm-examples`: only these checks, where the device is.
pub fn run() -> Result<()> {
    crate::deps::ensure()?;
    let place = crate::device::locate(None)?;
    println!("rdmacm example checks on {}", place.describe());
    let checks = checks()?;
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
    fn rdma_tools_verdict_needs_both_ends() {
        let out = "server: rdma_server: start\nserver: rdma_server: end 0\nclient: rdma_client: start\nclient: rdma_client: end 0\n";
        assert!(exchanged(&done(0, out)));
        assert!(!exchanged(&done(1, out)));
        assert!(!exchanged(&done(0, &out.replace("client: rdma_client: end 0", "client: rdma_client: end -1"))));
    }
}
