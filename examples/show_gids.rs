//! Lists the GID tables of RDMA devices, one line per valid entry, in the
//! columns of the `show_gids` script that ships with NVIDIA's driver stack:
//! device, port, index, GID (in the kernel's sysfs form), the IPv4 address
//! of an IPv4-mapped GID, RoCE version and network device.
//!
//! ```text
//! cargo run --example show_gids -- [DEVICE [PORT]]
//! ```
//!
//! Use the index of a `v2` line with an IPv4 address as `-g` of
//! `rc_pingpong` / `ud_pingpong` on RoCE. A bad argument prints the usage and
//! exits with code 2; a device that cannot be read exits with code 1.

use std::process::ExitCode;

use rrddmma::prim::{device_names, Context, Gid, GidType};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "Usage: show_gids [DEVICE [PORT]]\n  \
                     lists the valid GID table entries of every port of DEVICE (default: every device)\n";

/// The GID as the kernel shows it in sysfs: eight groups of four hex digits.
fn sysfs_form(g: &Gid) -> String {
    g.0.chunks(2).map(|p| format!("{:02x}{:02x}", p[0], p[1])).collect::<Vec<_>>().join(":")
}

fn version(t: GidType) -> String {
    match t {
        GidType::ROCE_V2 => "v2".into(),
        GidType::ROCE_V1 | GidType::IB => "v1".into(),
        other => format!("?{}", other.to_raw()),
    }
}

fn row(cols: [&str; 7]) -> String {
    let [dev, port, index, gid, ipv4, ver, ndev] = cols;
    format!("{dev:<10}{port:<6}{index:<7}{gid:<41}{ipv4:<17}{ver:<5}{ndev}").trim_end().to_string()
}

fn run(dev: Option<&str>, port: Option<u8>) -> Res<usize> {
    let names = match dev {
        Some(d) => vec![d.to_string()],
        None => device_names()?,
    };
    println!("{}", row(["DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "DEV"]));
    println!("{}", row(["---", "----", "-----", "---", "------------", "---", "---"]));
    let mut found = 0;
    for name in &names {
        let ctx = Context::open(name)?;
        let ports = ctx.query_device()?.phys_port_cnt;
        if let Some(p) = port.filter(|&p| p > ports) {
            return Err(format!("{name} has {ports} port(s), no port {p}").into());
        }
        for p in (1..=ports).filter(|p| port.is_none_or(|want| want == *p)) {
            for e in ctx.gid_table(p)? {
                let ipv4 = e.ipv4().map(|a| a.to_string()).unwrap_or_default();
                let ndev = e.netdev().unwrap_or_default();
                println!(
                    "{}",
                    row([
                        name,
                        &p.to_string(),
                        &e.index.to_string(),
                        &sysfs_form(&e.gid),
                        &ipv4,
                        &version(e.gid_type),
                        &ndev
                    ])
                );
                found += 1;
            }
        }
    }
    Ok(found)
}

/// The operands (`lexopt`); `None`: help was asked for.
fn operands() -> Result<Option<Vec<String>>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_env();
    let mut out = Vec::new();
    while let Some(arg) = p.next()? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Value(v) => out.push(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(Some(out))
}

fn main() -> ExitCode {
    let usage = |msg: String| {
        eprintln!("show_gids: {msg}");
        eprint!("{USAGE}");
        ExitCode::from(2)
    };
    let args = match operands() {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage(e.to_string()),
    };
    if args.len() > 2 {
        return usage(format!("too many arguments: {args:?}"));
    }
    let port = match args.get(1).map(|p| p.parse::<u8>()) {
        None => None,
        Some(Ok(p)) if p >= 1 => Some(p),
        Some(_) => return usage(format!("invalid port {:?}: expected 1..=255", args[1])),
    };
    match run(args.first().map(String::as_str), port) {
        Ok(n) => {
            println!("n_gids_found={n}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("show_gids: {e}");
            ExitCode::from(1)
        }
    }
}
