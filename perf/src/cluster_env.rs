//! What a cluster run ran on: each rank's testbed facts (host, device,
//! firmware, link, GID, kernel, CPU, clock source, the rdma-core it loaded,
//! the rrddmma version and git revision it was built from) and the deltas
//! of every port counter its device exports in sysfs, sent to rank 0 with
//! the results.
//!
//! The lines a rank sends are `testbed KEY VALUE...` and `counter NAME
//! DELTA`; rank 0 takes at most [`MAX_LINES`] of them per rank, names and
//! values of bounded length, so a peer cannot grow the report without end.

use std::collections::BTreeMap;
use std::path::Path;

type Res<T> = Result<T, String>;

/// Testbed and counter lines taken from one rank at most.
pub const MAX_LINES: usize = 1024;
/// Longest key, counter name or value taken, in bytes.
pub const MAX_TEXT: usize = 200;

/// The testbed keys a rank reports, in order.
pub const KEYS: [&str; 14] = [
    "host",
    "device",
    "firmware",
    "link_layer",
    "rate",
    "active_mtu",
    "gid_index",
    "gid_type",
    "kernel",
    "cpu",
    "clock_source",
    "rdma_core",
    "rrddmma_version",
    "git_revision",
];

/// The port's facts a rank's testbed names besides sysfs': the active MTU
/// and the GID (index and type) its QPs connect with.
pub struct PortFacts {
    pub mtu: String,
    pub gid_index: u8,
    pub gid_type: String,
}

/// The libibverbs this process loaded, from `/proc/self/maps` (its real
/// file name carries the rdma-core release: `libibverbs.so.1.14.44.0` is
/// rdma-core 44), with the linkage rrddmma was built for; a static build
/// maps none and names the release built in.
pub fn rdma_core() -> String {
    let info = rrddmma::build_info();
    let loaded = std::fs::read_to_string("/proc/self/maps").ok().and_then(|maps| {
        let path = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("libibverbs.so"))?;
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.into());
        Some(real.file_name()?.to_string_lossy().into_owned())
    });
    match loaded {
        Some(lib) => format!("{lib} loaded (linkage {}, built against {})", info.linkage, info.rdma_core),
        None => format!("{} built in (linkage {})", info.rdma_core, info.linkage),
    }
}

/// The first line of `path` (trimmed), or "unknown".
fn first_line(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// This rank's testbed facts, as (key, value) in [`KEYS`] order; `port`
/// holds the active MTU and GID of the port the run uses.
pub fn testbed(sysfs: &Path, device: &str, port: &PortFacts) -> Vec<(&'static str, String)> {
    let dev = sysfs.join("class/infiniband").join(device);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "unknown".into());
    let values = [
        first_line("/proc/sys/kernel/hostname"),
        device.to_string(),
        first_line(dev.join("fw_ver")),
        first_line(dev.join("ports/1/link_layer")),
        first_line(dev.join("ports/1/rate")),
        port.mtu.clone(),
        port.gid_index.to_string(),
        port.gid_type.clone(),
        first_line("/proc/sys/kernel/osrelease"),
        cpu,
        first_line(sysfs.join("devices/system/clocksource/clocksource0/current_clocksource")),
        rdma_core(),
        env!("RRDDMMA_PERF_LIB_VERSION").to_string(),
        env!("RRDDMMA_PERF_GIT_REVISION").to_string(),
    ];
    KEYS.into_iter().zip(values).map(|(k, v)| (k, clip(&v))).collect()
}

/// `s` on one line, at most [`MAX_TEXT`] bytes.
fn clip(s: &str) -> String {
    let one: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut end = one.len().min(MAX_TEXT);
    while !one.is_char_boundary(end) {
        end -= 1;
    }
    one[..end].to_string()
}

/// Every port counter of `device` under `sysfs` (`ports/N/counters/*` and
/// `ports/N/hw_counters/*`), named `portN/counters/NAME`; files that do not
/// read as a number are left out, and at most [`MAX_LINES`] are read.
pub fn counters(sysfs: &Path, device: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let ports = sysfs.join("class/infiniband").join(device).join("ports");
    let Ok(list) = std::fs::read_dir(&ports) else { return out };
    for port in list.flatten() {
        for group in ["counters", "hw_counters"] {
            let Ok(files) = std::fs::read_dir(port.path().join(group)) else { continue };
            for f in files.flatten() {
                if out.len() >= MAX_LINES {
                    return out;
                }
                // `lifespan` is how long the kernel caches the values, in ms: a setting.
                if f.file_name() == "lifespan" {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(f.path()) else { continue };
                let Ok(v) = text.trim().parse::<u64>() else { continue };
                let name =
                    format!("port{}/{group}/{}", port.file_name().to_string_lossy(), f.file_name().to_string_lossy());
                out.insert(clip(&name).replace(' ', "_"), v);
            }
        }
    }
    out
}

/// The change of every counter from `before` to `after` (a counter that
/// went down, e.g. reset or wrapped, counts from 0).
pub fn deltas(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, &a)| {
            let b = before.get(k).copied().unwrap_or(0);
            (k.clone(), if a >= b { a - b } else { a })
        })
        .collect()
}

/// The lines this rank sends: its testbed, then its counter deltas.
pub fn encode(testbed: &[(&'static str, String)], deltas: &BTreeMap<String, u64>) -> String {
    let mut s = String::new();
    for (k, v) in testbed {
        s.push_str(&format!("testbed {k} {v}\n"));
    }
    for (k, v) in deltas {
        s.push_str(&format!("counter {k} {v}\n"));
    }
    s
}

/// One rank's testbed and counter deltas, as rank 0 got them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankEnv {
    pub testbed: BTreeMap<String, String>,
    pub counters: BTreeMap<String, u64>,
}

/// Takes one `testbed` or `counter` line of rank `rank` into `env`
/// (`Ok(false)` when the line is neither); a bad or excess line is an
/// error naming the rank and the line.
pub fn take(rank: usize, line: &str, env: &mut RankEnv) -> Res<bool> {
    let bad = |what: &str| Err(format!("rank {rank} sent {line:.80?}: {what}"));
    let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
    if kind != "testbed" && kind != "counter" {
        return Ok(false);
    }
    if env.testbed.len() + env.counters.len() >= MAX_LINES {
        return bad(&format!("more than {MAX_LINES} testbed and counter lines"));
    }
    if line.len() > 2 * MAX_TEXT + 32 {
        return bad(&format!("a line longer than {} bytes", 2 * MAX_TEXT + 32));
    }
    let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
    if key.is_empty() || key.len() > MAX_TEXT {
        return bad("an empty or overlong name");
    }
    if kind == "testbed" {
        if !KEYS.contains(&key) {
            return bad(&format!("testbed key {key:?} (expected one of {KEYS:?})"));
        }
        env.testbed.insert(key.to_string(), value.to_string());
    } else {
        let Ok(v) = value.parse::<u64>() else { return bad("a counter delta that is not a number") };
        env.counters.insert(key.to_string(), v);
    }
    Ok(true)
}

/// Today's date and time in UTC, `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc(secs)
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (the proleptic
/// Gregorian calendar, from the days-to-civil formula).
fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_764_041_000), "2025-11-25T03:23:20Z");
    }

    /// A fake sysfs with one device of two ports.
    fn fake_sysfs(dir: &Path, retries: u64) {
        let dev = dir.join("class/infiniband/rxe_x");
        for (port, group, name, v) in [
            ("1", "counters", "port_xmit_packets", "100".to_string()),
            ("1", "hw_counters", "completer_retry_err", retries.to_string()),
            ("1", "hw_counters", "duplicate_request", (2 * retries).to_string()),
            ("2", "hw_counters", "rcvd_rnr_err", "0".to_string()),
            ("1", "hw_counters", "lifespan", "10".to_string()),
            ("1", "hw_counters", "odd", "not a number".to_string()),
        ] {
            let d = dev.join("ports").join(port).join(group);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(name), format!("{v}\n")).unwrap();
        }
        std::fs::write(dev.join("fw_ver"), "1.2.3\n").unwrap();
        std::fs::write(dev.join("ports/1/link_layer"), "Ethernet\n").unwrap();
    }

    #[test]
    fn regression_counter_deltas_of_every_port_counter_are_read_and_sent() {
        let dir = std::env::temp_dir().join(format!("rrddmma-perf-env-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        fake_sysfs(&dir, 5);
        let before = counters(&dir, "rxe_x");
        assert_eq!(before.len(), 4, "the non-number and the lifespan setting are left out: {before:?}");
        fake_sysfs(&dir, 47);
        let d = deltas(&before, &counters(&dir, "rxe_x"));
        assert_eq!(d["port1/hw_counters/completer_retry_err"], 42);
        assert_eq!(d["port1/hw_counters/duplicate_request"], 84);
        assert_eq!((d["port1/counters/port_xmit_packets"], d["port2/hw_counters/rcvd_rnr_err"]), (0, 0));
        let port = PortFacts { mtu: "1024".into(), gid_index: 1, gid_type: "ROCE_V2".into() };
        let tb = testbed(&dir, "rxe_x", &port);
        let get = |k: &str| tb.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(
            (get("firmware"), get("link_layer"), get("rate")),
            ("1.2.3".into(), "Ethernet".into(), "unknown".into())
        );
        // Rank 0 takes back exactly what was sent.
        let mut env = RankEnv::default();
        for line in encode(&tb, &d).lines() {
            assert!(take(1, line, &mut env).unwrap(), "{line}");
        }
        assert_eq!(env.counters, d);
        assert_eq!(env.testbed["active_mtu"], "1024");
        assert_eq!((env.testbed["gid_index"].as_str(), env.testbed["gid_type"].as_str()), ("1", "ROCE_V2"));
        assert_eq!(env.testbed["rrddmma_version"], env!("CARGO_PKG_VERSION"), "the library and perf share 0.1.0");
        assert!(!env.testbed["git_revision"].is_empty() && env.testbed["rdma_core"].contains("linkage"));
        assert_eq!(env.testbed.len(), KEYS.len(), "every key sent: {:?}", env.testbed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn regression_peer_testbed_and_counter_lines_are_bounded_and_checked() {
        let mut env = RankEnv::default();
        assert!(!take(2, "0 1 0 10", &mut env).unwrap(), "a result line is not ours");
        let e = take(2, "counter port1/x ten", &mut env).unwrap_err();
        assert!(e.starts_with("rank 2") && e.contains("not a number"), "{e}");
        assert!(take(2, "testbed password hunter2", &mut env).unwrap_err().contains("testbed key \"password\""));
        let long = format!("counter {} 1", "a".repeat(MAX_TEXT + 1));
        assert!(take(2, &long, &mut env).unwrap_err().contains("overlong"));
        for i in 0..MAX_LINES {
            take(2, &format!("counter c{i} 1"), &mut env).unwrap();
        }
        let e = take(2, "counter one_more 1", &mut env).unwrap_err();
        assert!(e.contains(&format!("more than {MAX_LINES}")), "{e}");
        assert_eq!(env.counters.len(), MAX_LINES);
    }
}
