//! Kernel object counts of a device, from `rdma resource show`: what a
//! leak test compares before and after.

/// The number of objects of `kind` (`pd`, `cq`, `qp`, `cm_id`, `mr`, `ctx`,
/// `srq`) the kernel holds on device `dev`, all processes together.
pub fn count(dev: &str, kind: &str) -> u64 {
    let out = std::process::Command::new("rdma")
        .args(["resource", "show"])
        .output()
        .expect("rdma resource show (iproute2's rdma tool; the VM has it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(&format!("{dev}:")))
        .unwrap_or_else(|| panic!("no line for {dev} in `rdma resource show`: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == kind).unwrap_or_else(|| panic!("no {kind} count in {line:?}"));
    words[i + 1].parse().unwrap_or_else(|_| panic!("{kind} count in {line:?}"))
}

/// The device the harness promised (`RRDDMMA_TEST_DEVICE`).
pub fn device() -> String {
    std::env::var("RRDDMMA_TEST_DEVICE").expect("RRDDMMA_TEST_DEVICE names the test device")
}
