//! `rrddmma-perf cluster -c DC`'s checks: its help; on the rxe namespace
//! hosts (no DC) the refusal without `--dc-fallback rc` and the RC mesh,
//! said so in the report, with it; and on mlx5 the DC mesh under each of
//! UCX's policies, all-to-all and incast (skipped off mlx5, failed under
//! `--expect mlx5`, as the DC interop checks: [`super::dc`]). The mlx5
//! ones are written for hardware; on rxe only their skip has been seen.

use super::dc::{judge, GUARD};
use crate::device::{Check, Done};
use crate::Result;

/// What the runs must say without `--dc-fallback rc`, after the device's
/// refusal (the first part of each rank's error line).
const REFUSAL_TAIL: &str =
    "; pass --dc-fallback rc to measure the RC mesh instead (the report then says so), or run -c RC";

/// What `DcMesh::refusal()` says on rank `r`'s rxe device (the DC target's
/// create, `Error::Unsupported` of `mlx5dv_create_qp`), as rrddmma prints it.
fn refusal(r: u32) -> String {
    format!(
        "mlx5dv_create_qp: DC (dynamically connected transport) is not supported by rxe_h{r} (mlx5dv_is_supported = \
         false); use an RC mesh instead: one RC QP per peer (wrap::connect_rc_mesh), which every device runs; \
         wrap::dc::DcMesh falls back to one by itself"
    )
}

/// The JSON report between the markers the step prints around it.
fn report_in(out: &str, tag: &str) -> Option<serde_json::Value> {
    let begin = format!("=== begin {tag}\n");
    let s = out.find(&begin)? + begin.len();
    let e = out[s..].find(&format!("=== end {tag}"))? + s;
    serde_json::from_str(&out[s..e]).ok()
}

/// Every rank's error ends the run with its device's refusal, exactly
/// ([`refusal`], naming the rank's rxe device),
/// then the fallback's hint. The ranks' lines may run into each other (three
/// processes on one terminal), so each is looked for as a substring.
fn refused_everywhere(out: &str) -> bool {
    (1..=3).all(|r| out.matches(&format!("rrddmma-perf: -c DC: {}{REFUSAL_TAIL}", refusal(r))).count() == 1)
}

/// A `-c DC` report of three ranks, `pattern` with `iters` requests per
/// flow: its transport, every flow non-zero, every rank's QPs (`qps`) and
/// the RC mesh's 2 beside them.
fn report_ok(j: &serde_json::Value, transport: &str, pattern: &str, iters: u64, qps: u64) -> bool {
    let flows = j["flows"].as_array().map_or(&[][..], Vec::as_slice);
    let want_flows = if pattern == "incast" { 2 } else { 6 };
    let res = j["resources"].as_array().map_or(&[][..], Vec::as_slice);
    j["transport"] == transport
        && j["pattern"] == pattern
        && (transport == "dc") == j["refusal"].is_null()
        && flows.len() == want_flows
        && flows.iter().all(|f| f["ops"] == iters && f["mib_s"].as_f64().is_some_and(|m| m > 0.0))
        && (pattern != "incast" || flows.iter().all(|f| f["dst"] == 0))
        && res.len() == 3
        && res.iter().all(|r| r["qps"] == qps && r["mr_bytes"].as_u64().is_some_and(|b| b > 0))
        && j["rc_mesh_resources"]["qps"] == 2
        && j["resources_counted"].as_str().is_some_and(|h| h.contains("64-byte blocks"))
}

/// The checks; `me` is rrddmma-perf (quoted), `hosts_up` sets up the
/// namespace hosts, `launch(port, flags)` runs three ranks on them.
pub fn checks(me: &str, hosts_up: &str, launch: &dyn Fn(u16, &str) -> String) -> Result<Vec<Check>> {
    let mut v = Vec::new();
    v.push(Check::verdict(
        "perf cluster --help shows -c DC, --dci, --dc-policy and --dc-fallback",
        format!("{me} cluster --help; echo HELP-RC=$?"),
        |d| {
            let o = &d.output;
            o.contains("HELP-RC=0")
                && o.contains("  -c, --connection T   RC (default): an RC mesh, -q QPs to every other rank; DC: one DC target and a")
                && o.contains("      --dci K          -c DC: DC initiators in each rank's pool (4)")
                && o.contains("      --dc-policy P    -c DC: dcs (default), dcs_quota[:QUOTA] (8), hw_dcs, rand[:SEED]")
                && o.contains("      --dc-fallback rc -c DC where a rank's device lacks DC (rxe)")
        },
    ));
    let dir = "/tmp/rrddmma-perf-cluster-dc";
    let flags = "cluster -c DC --pattern incast -s 1024 -n 50 --warmup 4";
    let cmd = format!(
        "{hosts_up} || exit 1; rm -rf {dir} && mkdir -p {dir}; {{ {refuse}; }}; echo REFUSE-RC=$?; \
         {{ {fallback}; }}; echo FALLBACK-RC=$?; echo '=== begin fb'; cat {dir}/fb.json; echo '=== end fb'; \
         {{ {fallback_a2a}; }}; echo A2A-RC=$?; echo '=== begin a2a'; cat {dir}/a2a.json; echo '=== end a2a'",
        refuse = launch(18961, flags),
        fallback = launch(18962, &format!("{flags} --dci 2 --dc-fallback rc --json {dir}/fb.json")),
        fallback_a2a = launch(
            18963,
            &format!("cluster -c DC -s 1024 -n 30 --dc-policy dcs_quota:4 --dc-fallback rc --json {dir}/a2a.json")
        ),
    );
    v.push(Check::verdict(
        "perf cluster -c DC on rxe (3 namespace hosts): the device's refusal on every rank without --dc-fallback, \
         the RC mesh said so in the report with --dc-fallback rc (incast, all-to-all), QPs and memory per rank",
        cmd,
        |d: &Done| {
            let o = &d.output;
            let (fb, a2a) = (report_in(o, "fb"), report_in(o, "a2a"));
            o.contains("REFUSE-RC=1")
                && refused_everywhere(o)
                && o.contains("FALLBACK-RC=0")
                && o.contains("A2A-RC=0")
                && o.matches("transport: RC mesh (--dc-fallback rc), not DC: ").count() == 2
                && o.matches("  rank 2 (rc-fallback): 2 QP(s); ").count() == 2
                && fb.is_some_and(|j| report_ok(&j, "rc-fallback", "incast", 50, 2))
                && a2a.is_some_and(|j| report_ok(&j, "rc-fallback", "all-to-all", 30, 2))
        },
    ));
    // mlx5: three ranks on the one device, each policy, all-to-all and incast.
    let runs: [(&str, &str, u16); 4] =
        [("dcs", "all-to-all", 2), ("dcs_quota:4", "incast", 1), ("hw_dcs", "all-to-all", 2), ("rand:3", "incast", 2)];
    for (k, (policy, pattern, dcis)) in runs.into_iter().enumerate() {
        let port = 18970 + k;
        let json = format!("{dir}/mlx5-{k}.json");
        let ranks: String = (0..3)
            .map(|r| {
                format!(
                    "RRDDMMA_COORDINATOR=127.0.0.1:{port} RRDDMMA_RANK={r} RRDDMMA_SIZE=3 \
                     RRDDMMA_DEVICES=$RRDDMMA_TEST_DEVICE,$RRDDMMA_TEST_DEVICE,$RRDDMMA_TEST_DEVICE timeout 120 {me} \
                     cluster -c DC --pattern {pattern} --dci {dcis} --dc-policy {policy} -s 4096 -n 500 --json {json} & \
                     pids=\"$pids $!\"; "
                )
            })
            .collect();
        let cmd = format!(
            "{GUARD}; mkdir -p {dir}; pids=; {ranks}rc=0; for p in $pids; do wait $p || rc=1; done; echo DC-RC=$rc; \
             echo '=== begin m'; cat {json}; echo '=== end m'"
        );
        let qps = u64::from(dcis) + 1;
        v.push(Check {
            step: crate::device::Step {
                name: format!(
                    "perf cluster -c DC (needs mlx5): 3 ranks, {pattern}, --dci {dcis} --dc-policy {policy}: DC \
                     transport, {qps} QPs per rank, every flow non-zero"
                ),
                command: cmd,
            },
            judge: judge(move |d| {
                d.output.contains("DC-RC=0")
                    && report_in(&d.output, "m").is_some_and(|j| report_ok(&j, "dc", pattern, 500, qps))
            }),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(transport: &str, ops: u64, qps: u64) -> serde_json::Value {
        let flow = |src: u64| serde_json::json!({"src": src, "dst": 0, "ops": ops, "mib_s": 1.5});
        let res = serde_json::json!({"qps": qps, "mr_bytes": 4096});
        serde_json::json!({
            "transport": transport,
            "refusal": if transport == "dc" { serde_json::Value::Null } else { "no DC".into() },
            "pattern": "incast",
            "flows": [flow(1), flow(2)],
            "resources": [res, res, res],
            "rc_mesh_resources": {"qps": 2},
            "resources_counted": "... 64-byte blocks ...",
        })
    }

    #[test]
    fn dc_report_needs_its_transport_every_flow_and_every_ranks_qps() {
        assert!(report_ok(&report("rc-fallback", 50, 2), "rc-fallback", "incast", 50, 2));
        assert!(report_ok(&report("dc", 50, 3), "dc", "incast", 50, 3));
        assert!(!report_ok(&report("rc-fallback", 50, 2), "dc", "incast", 50, 2), "the wrong transport");
        assert!(!report_ok(&report("rc-fallback", 49, 2), "rc-fallback", "incast", 50, 2), "a flow short");
        assert!(!report_ok(&report("dc", 50, 2), "dc", "incast", 50, 3), "the QPs of a rank");
        assert!(!report_ok(&report("dc", 50, 3), "dc", "all-to-all", 50, 3), "all-to-all has 6 flows");
        let mut no_dc_refusal = report("dc", 50, 3);
        no_dc_refusal["refusal"] = "x".into();
        assert!(!report_ok(&no_dc_refusal, "dc", "incast", 50, 3));
        let mut zero = report("dc", 50, 3);
        zero["flows"][1]["mib_s"] = 0.0.into();
        assert!(!report_ok(&zero, "dc", "incast", 50, 3));
    }

    #[test]
    fn refusal_must_name_every_ranks_device_exactly() {
        let line = |r: u32| format!("rrddmma-perf: -c DC: {}{REFUSAL_TAIL}", refusal(r));
        // As seen on rxe: two ranks' lines ran into one.
        let seen = format!("{}\n{}{}\nREFUSE-RC=1\n", line(3), line(2), line(1));
        assert!(refused_everywhere(&seen));
        assert!(!refused_everywhere(&format!("{}\n{}\n", line(1), line(2))), "rank 3 did not refuse");
        let other = line(2).replace("is not supported", "failed");
        assert!(!refused_everywhere(&format!("{}\n{other}\n{}\n", line(1), line(3))));
        assert!(report_in("=== begin a\n{\"x\": 1}\n=== end a\n", "a").is_some_and(|j| j["x"] == 1));
        assert!(report_in("=== begin a\nnot json\n=== end a\n", "a").is_none());
    }
}
