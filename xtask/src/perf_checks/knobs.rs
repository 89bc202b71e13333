//! rrddmma-perf's perftest flags of QP attributes, memory regions,
//! immediate data, counters, verifier limits, rdma-core v59 and GPU memory
//! (perf/src/knobs.rs), on the device:
//! - against perftest in both roles where Debian's perftest (4.5-0.17) has
//!   the flag and rxe runs it: `-S`, `--tclass`, `-u`, `--mr_per_qp`,
//!   `-w`/`-y` (rrddmma-perf's side), `-W`, `--retry_count` (with `-R`);
//! - against rrddmma-perf where that perftest lacks the flag:
//!   `--write_with_imm`, `--send_with_imm`, `--flow_label` (the kernel
//!   matrix also runs these against perftest 25.01: `perftest25.rs`), and a
//!   limit the run falls below;
//! - the typed refusal where rxe (or the machine) cannot run it:
//!   `--use_ooo`, `--use_data_direct`, `--ph` (TPH), `--use_cuda`,
//!   `--use_rocm_dmabuf`, and the dma-buf registration of a vgem buffer.
//!
//! TCP ports 18950 and up.

use super::verdict::interop_ok;
use crate::device::{Check, Done};
use crate::pairs::{binary, both_ok, cm_pair, pair, rows, side};
use crate::Result;

/// The values of `QP 0 attributes:` lines on `out`'s side, in order.
fn attrs(out: &str) -> Vec<&str> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("QP ").and_then(|r| r.split_once(" attributes: ")).map(|(_, a)| a))
        .collect()
}

/// `-W`'s printed change of `counter` (perftest's `\tNAME=DELTA`), every
/// one on `out`.
fn counter(out: &str, counter: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix('\t')?.strip_prefix(counter)?.strip_prefix('=')?.trim().parse().ok())
        .collect()
}

/// `immediate data: N receive completion(s) carried it, the last V`: (N, V).
fn imm(out: &str) -> Option<(u64, String)> {
    let l = out.lines().find_map(|l| l.trim().strip_prefix("immediate data: "))?;
    let (n, rest) = l.split_once(' ')?;
    Some((n.parse().ok()?, rest.rsplit(' ').next()?.to_string()))
}

/// The checks for `cargo xtask test`.
pub fn checks() -> Result<Vec<Check>> {
    let exe = binary()?;
    Ok(build(&format!("'{}'", exe.display())))
}

fn build(me: &str) -> Vec<Check> {
    let dev = "-d $D -x $X";
    let mut v = Vec::new();

    // QP attributes, a region per QP, and rrddmma-perf's verifier limits,
    // against perftest in both roles: each side reads its QPs' attributes
    // back from the device; rrddmma-perf's two QPs have two rkeys.
    let qp = "-s 4096 -n 300 -q 2 --mr_per_qp -S 1 --tclass 32 -u 16";
    let limits = "-w 0.001 -y 0.000001";
    for ours_client in [true, false] {
        let p = 18950 + usize::from(ours_client);
        let ours = format!("{me} write bw {dev} -p {p} {qp} {limits}");
        let theirs = format!("ib_write_bw {dev} -p {p} -F {qp}");
        let (name, server, client) = if ours_client {
            ("rrddmma-perf write bw client -> ib_write_bw server", theirs, format!("{ours} 127.0.0.1"))
        } else {
            ("ib_write_bw client -> rrddmma-perf write bw server", ours, format!("{theirs} 127.0.0.1"))
        };
        v.push(Check::verdict(&format!("perf knobs: {name}, {qp} {limits}"), pair(&server, &client), move |d| {
            let mine = side(&d.output, ours_client);
            let a = attrs(mine);
            let rkeys =
                mine.lines().find_map(|l| l.trim().strip_prefix("memory: one region per QP (--mr_per_qp), rkeys "));
            // perftest 4.5's client reports the iterations of all its QPs.
            interop_ok(d, "write bw", 4096, if ours_client { 300 } else { 600 }, true, ours_client)
                && a.len() == 2
                // rxe keeps no SL on RoCE (its packets carry none): it reads back 0 there.
                && a.iter().all(|a| {
                    (a.starts_with("sl 1, ") || a.starts_with("sl 0, "))
                        && a.ends_with(", traffic class 32, flow label 0x0, timeout 16, retry count 6")
                })
                && rkeys.is_some_and(|k| {
                    let k: Vec<&str> = k.split_whitespace().collect();
                    k.len() == 2 && k[0] != k[1]
                })
        }));
    }

    // -W: both tools print the change of the port's packet counters after
    // the report, perftest's way; the sender sent, the receiver received.
    let w = "-s 1024 -n 300 -W hw_counters/sent_pkts,hw_counters/rcvd_pkts";
    for ours_client in [true, false] {
        let p = 18952 + usize::from(ours_client);
        let ours = format!("{me} send bw {dev} -p {p} {w}");
        let theirs = format!("ib_send_bw {dev} -p {p} -F {w}");
        let (name, server, client) = if ours_client {
            ("rrddmma-perf send bw client -> ib_send_bw server", theirs, format!("{ours} 127.0.0.1"))
        } else {
            ("ib_send_bw client -> rrddmma-perf send bw server", ours, format!("{theirs} 127.0.0.1"))
        };
        v.push(Check::verdict(&format!("perf knobs: {name}, {w}"), pair(&server, &client), move |d| {
            let (c, s) = (side(&d.output, true), side(&d.output, false));
            interop_ok(d, "send bw", 1024, 300, true, ours_client)
                && counter(c, "hw_counters/sent_pkts").first().is_some_and(|&n| n >= 300)
                && counter(s, "hw_counters/rcvd_pkts").first().is_some_and(|&n| n >= 300)
                && counter(c, "hw_counters/rcvd_pkts").len() == 1
                && counter(s, "hw_counters/sent_pkts").len() == 1
        }));
    }

    // --retry_count through rdma_cm, both roles: rrddmma-perf's QP has the
    // count its CM was given (the connecting side's and the accepting side's).
    for ours_client in [true, false] {
        let p = 18954 + usize::from(ours_client);
        let cm_dev = "-d $RRDDMMA_CM_DEVICE -R --retry_count 5";
        let ours = format!("{me} write bw {cm_dev} -p {p} -s 4096 -n 200");
        let theirs = format!("ib_write_bw {cm_dev} -p {p} -F -s 4096 -n 200");
        let (name, server, client) = if ours_client {
            ("rrddmma-perf write bw -R client -> ib_write_bw -R server", theirs, format!("{ours} \"$RRDDMMA_CM_ADDR\""))
        } else {
            ("ib_write_bw -R client -> rrddmma-perf write bw -R server", ours, format!("{theirs} \"$RRDDMMA_CM_ADDR\""))
        };
        v.push(Check::verdict(
            &format!("perf -R knobs: {name}, --retry_count 5"),
            cm_pair(&server, &client, p),
            move |d| {
                let a = attrs(side(&d.output, ours_client));
                interop_ok(d, "write bw", 4096, 200, true, ours_client)
                    && a.len() == 1
                    && a[0].ends_with("retry count 5")
            },
        ));
    }

    // Where Debian's perftest lacks the flag: rrddmma-perf against itself
    // (against perftest 25.01 in the kernel matrix: perftest25.rs).
    // WRITE with immediate data: the server receives one completion per
    // message, each with the sender's immediate (0x5eed0000 + QP index).
    v.push(Check::verdict(
        "perf knobs: rrddmma-perf write bw --write_with_imm -q 2 (the server receives every immediate)",
        pair(
            &format!("{me} write bw {dev} -p 18956 --write_with_imm -s 4096 -n 300 -q 2"),
            &format!("{me} write bw {dev} -p 18956 --write_with_imm -s 4096 -n 300 -q 2 127.0.0.1"),
        ),
        |d| {
            let (c, s) = (side(&d.output, true), side(&d.output, false));
            both_ok(d)
                && imm(s).is_some_and(|(n, last)| n == 600 && (last == "0x5eed0000" || last == "0x5eed0001"))
                && imm(c) == Some((0, "0x0".into()))
                && rows(c, 4096).len() == 1
                && rows(s, 4096).iter().any(|r| r[1] == 300.0 && r[2] > 0.0)
        },
    ));
    v.push(Check::verdict(
        "perf knobs: rrddmma-perf write lat --write_with_imm (each side receives every immediate)",
        pair(
            &format!("{me} write lat {dev} -p 18957 --write_with_imm -s 64 -n 200 --check-payload"),
            &format!("{me} write lat {dev} -p 18957 --write_with_imm -s 64 -n 200 --check-payload 127.0.0.1"),
        ),
        |d| {
            both_ok(d)
                && [true, false].iter().all(|&c| imm(side(&d.output, c)) == Some((200, "0x5eed0000".into())))
                && super::verdict::lat_plausible(side(&d.output, true), 64, 200, 1)
        },
    ));
    // SEND with immediate data, with GRH flow labels round-robin over the QPs.
    v.push(Check::verdict(
        "perf knobs: rrddmma-perf send bw --send_with_imm --flow_label 0x1234,0xabcde -q 2",
        pair(
            &format!("{me} send bw {dev} -p 18958 --send_with_imm --flow_label 0x1234,0xabcde -s 1024 -n 300 -q 2"),
            &format!(
                "{me} send bw {dev} -p 18958 --send_with_imm --flow_label 0x1234,0xabcde -s 1024 -n 300 -q 2 127.0.0.1"
            ),
        ),
        |d| {
            let (c, s) = (side(&d.output, true), side(&d.output, false));
            let labels =
                |o: &str| attrs(o).iter().map(|a| a.split(", ").nth(2).unwrap_or("").to_string()).collect::<Vec<_>>();
            both_ok(d)
                && imm(s).is_some_and(|(n, _)| n == 600)
                && labels(c) == ["flow label 0x1234", "flow label 0xabcde"]
                && labels(s) == ["flow label 0x1234", "flow label 0xabcde"]
        },
    ));
    // A limit the run falls below: the client reports, then fails as perftest does.
    v.push(Check::verdict(
        "perf knobs: rrddmma-perf write bw -w above the bandwidth fails after its report",
        pair(
            &format!("{me} write bw {dev} -p 18959 -s 4096 -n 200"),
            &format!("{me} write bw {dev} -p 18959 -s 4096 -n 200 --limit_bw 1000000 127.0.0.1"),
        ),
        |d| {
            let c = side(&d.output, true);
            d.output.contains("CLIENT-RC=1")
                && d.output.contains("SERVER-RC=0")
                && rows(c, 4096).len() == 1
                && c.contains("rrddmma-perf: BW result is below bw limit: ")
                && c.contains(" MiB/s < --limit_bw 1000000 (perftest's verifier)")
        },
    ));

    // What rxe and this machine cannot run: each refused before the
    // exchange, naming the device (or what is missing) and the way out;
    // vgem's dma-buf runs the GPU dma-buf registration, which rxe refuses.
    let refuse = |flags: &str| format!("{me} write bw {dev} -p 18960 {flags}; echo RC=$?");
    let cmd = format!(
        "{}; {}; {}; {}; {}; modprobe vgem 2>/dev/null; {}",
        refuse("--use_ooo"),
        refuse("--use_data_direct --use_cuda 0 --use_cuda_dmabuf"),
        refuse("--tph_mem vm --cpu_id 0 --ph 1"),
        refuse("--use_cuda 0"),
        refuse("--use_rocm 0 --use_rocm_dmabuf"),
        pair(
            &format!("{me} write bw {dev} -p 18961 -s 4096 -n 100 --dmabuf_exporter vgem"),
            &format!("{me} write bw {dev} -p 18961 -s 4096 -n 100 --dmabuf_exporter vgem 127.0.0.1"),
        ),
    );
    let cmd = format!("{}; {cmd}", crate::pairs::GID_SHELL);
    v.push(Check::verdict(
        "perf knobs: typed refusals on rxe (--use_ooo, --use_data_direct, TPH, --use_cuda, --use_rocm_dmabuf, a vgem dma-buf)",
        cmd,
        refusals,
    ));
    v
}

/// The refusal step's verdict: each run exited 1 with its refusal.
fn refusals(d: &Done) -> bool {
    let o = &d.output;
    let says = |line: &str| o.lines().any(|l| l.starts_with(line));
    o.lines().filter(|l| *l == "RC=1").count() == 5
        && says("rrddmma-perf: --use_ooo: mlx5dv_create_qp (MLX5DV_QP_CREATE_OOO_DP): ")
        && o.contains("is not supported by rxe")
        && says("rrddmma-perf: --use_data_direct: mlx5dv_get_data_direct_sysfs_path: ")
        && says("rrddmma-perf: --ph (TPH): ibv_alloc_dmah: ")
        && says("rrddmma-perf: --use_cuda: cannot load libcuda.so.1 (the NVIDIA CUDA driver library): ")
        && o.contains("or run without --use_cuda\n")
        && says("rrddmma-perf: --use_rocm_dmabuf: cannot load libamdhip64.so (the AMD ROCm HIP runtime): ")
        && o.matches("rrddmma-perf: --dmabuf_exporter vgem: registering the buffer: ibv_reg_dmabuf_mr: dma-buf registration is not supported by rxe").count() == 2
        && o.contains("CLIENT-RC=1")
        && o.contains("SERVER-RC=1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_take_what_rrddmma_perf_prints() {
        let out = " QP 0 attributes: sl 1, traffic class 32, flow label 0x0, timeout 16, retry count 6\n\
                   \thw_counters/sent_pkts=312\n\n immediate data: 600 receive completion(s) carried it, the last 0x5eed0001\n";
        assert_eq!(attrs(out), ["sl 1, traffic class 32, flow label 0x0, timeout 16, retry count 6"]);
        assert_eq!(counter(out, "hw_counters/sent_pkts"), [312]);
        assert_eq!(counter(out, "hw_counters/rcvd_pkts"), Vec::<u64>::new());
        assert_eq!(imm(out), Some((600, "0x5eed0001".into())));
    }
}
