//! The testbed a cluster run's JSON must describe: every fact of every
//! rank, and the counters' deltas (shared by the cluster checks and the
//! load, mix and scenario checks).

/// Every testbed fact each rank must report, none empty or "unknown"
/// (firmware aside: rxe has none, and says "unknown").
pub(super) const TESTBED_KEYS: [&str; 14] = [
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

/// The JSON's testbed names three ranks on rxe_h* devices, each with every
/// fact of [`TESTBED_KEYS`] (RoCE v2 GIDs over Ethernet, the libibverbs the
/// process loaded, the git revision the binary was built from), the date
/// and the command line, and the counters hold every rank's deltas; under
/// mpirun (ranks in the devices' namespace: rxe exports hw_counters there)
/// every counter in `exported` is in every rank's deltas, and the rank sent
/// and received packets. A rank in a namespace host sees no hw_counters,
/// and its table says so (checked with the output).
pub(super) fn testbed_ok(j: &serde_json::Value, mpi: bool, exported: &[String]) -> bool {
    let tb = &j["testbed"];
    let ranks = tb["ranks"].as_array().cloned().unwrap_or_default();
    let counters = j["counters"].as_array().cloned().unwrap_or_default();
    let text = |t: &serde_json::Value, k: &str| t[k].as_str().unwrap_or("").to_string();
    let hex_rev = |r: &str| {
        let r = r.strip_suffix("-dirty").unwrap_or(r);
        r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit())
    };
    ranks.len() == 3
        && ranks.iter().enumerate().all(|(r, t)| {
            t["rank"].as_u64() == Some(r as u64)
                && TESTBED_KEYS.iter().all(|k| !text(t, k).is_empty() && (*k == "firmware" || text(t, k) != "unknown"))
                && text(t, "device").starts_with("rxe_h")
                && text(t, "link_layer") == "Ethernet"
                && text(t, "gid_type") == "ROCE_V2"
                && text(t, "gid_index").parse::<u8>().is_ok()
                && text(t, "active_mtu").trim_start_matches("MTU_").parse::<u32>().is_ok_and(|m| m >= 256)
                && text(t, "rdma_core").contains("libibverbs.so.1.")
                && hex_rev(&text(t, "git_revision"))
        })
        && tb["transport"] == "RC"
        && tb["date_utc"].as_str().is_some_and(|d| d.ends_with('Z'))
        && tb["command_line"].as_array().is_some_and(|a| a.iter().any(|v| v == "cluster"))
        && counters.len() == 3
        && counters.iter().enumerate().all(|(r, c)| {
            let d = &c["deltas"];
            let moved = |k: &str| d[k].as_u64().is_some_and(|v| v > 0);
            c["rank"].as_u64() == Some(r as u64)
                && d.is_object()
                && (!mpi
                    || !exported.is_empty()
                        && exported.iter().all(|k| d[k].is_u64())
                        && moved("port1/hw_counters/sent_pkts")
                        && moved("port1/hw_counters/rcvd_pkts"))
        })
}
