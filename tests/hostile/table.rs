//! The rows the suite prints: `cargo xtask test` collects every line that
//! starts with `ROW\t` and prints one table per name.

/// Prints one row of `table` (`"hostile"`: attack, victim, outcome;
/// `"aio-fault"`: fault, call, outcome). Call it after the test's asserts,
/// so a printed row is a passed one.
pub fn row(table: &str, first: &str, second: &str, outcome: &str) {
    for cell in [table, first, second, outcome] {
        assert!(!cell.contains(['\t', '\n']), "a table cell has no tab or newline: {cell:?}");
    }
    println!("ROW\t{table}\t{first}\t{second}\t{outcome}");
}

/// A row of the hostile-peer table.
pub fn hostile(attack: &str, victim: &str, outcome: &str) {
    row("hostile", attack, victim, outcome);
}

/// A row of the aio fault table.
#[allow(dead_code)]
pub fn aio_fault(fault: &str, call: &str, outcome: &str) {
    row("aio-fault", fault, call, outcome);
}

/// The device the harness promises (its absence fails the test).
#[allow(dead_code)]
pub fn device() -> String {
    std::env::var("RRDDMMA_TEST_DEVICE").expect("RRDDMMA_TEST_DEVICE names the device for device tests")
}

/// The kernel objects (`[qp, cq, mr, pd]`) that `rdma res show` lists for
/// process `pid` (every process with `None`).
#[allow(dead_code)]
pub fn kernel_objects(pid: Option<u32>) -> [usize; 4] {
    ["qp", "cq", "mr", "pd"].map(|kind| {
        let out = std::process::Command::new("rdma")
            .args(["res", "show", kind])
            .output()
            .unwrap_or_else(|e| panic!("running `rdma res show {kind}` (iproute2's rdma tool): {e}"));
        assert!(out.status.success(), "`rdma res show {kind}`: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let tag = pid.map(|p| format!(" pid {p} "));
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| tag.as_ref().is_none_or(|t| format!("{l} ").contains(t.as_str())))
            .count()
    })
}

/// This process's kernel objects, as [`kernel_objects`].
#[allow(dead_code)]
pub fn own_kernel_objects() -> [usize; 4] {
    kernel_objects(Some(std::process::id()))
}

/// Resident memory of process `pid` in KiB (`VmRSS` of `/proc/PID/status`).
#[allow(dead_code)]
pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}
