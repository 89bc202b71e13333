//! `rrddmma-perf --help` lists perftest's flags of rdma-core v59 and GPU
//! memory, each as an option of its own line (not merely mentioned).

use std::process::Command;

#[test]
fn help_lists_the_v59_gpu_and_verifier_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_rrddmma-perf")).arg("--help").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let listed = |flag: &str| {
        text.lines().any(|l| {
            let l = l.trim_start();
            let l = l.split_once(", ").map_or(l, |(short, rest)| if short.len() == 2 { rest } else { l });
            l.split_whitespace().next() == Some(flag)
        })
    };
    for flag in [
        "--use_ooo",
        "--use_data_direct",
        "--tph_mem",
        "--use_cuda",
        "--use_cuda_dmabuf",
        "--use_rocm",
        "--use_rocm_dmabuf",
        "--write_with_imm",
        "--send_with_imm",
        "--report-counters",
        "--mr_per_qp",
        "--sl",
        "--tclass",
        "--flow_label",
        "--retry_count",
        "--qp-timeout",
        "--limit_bw",
        "--limit_msgrate",
    ] {
        assert!(listed(flag), "--help does not list {flag}:\n{text}");
    }
    // --cpu_id and --ph share --tph_mem's line.
    assert!(text.contains("--tph_mem T --cpu_id N --ph H"), "{text}");
    // The test option for the dma-buf path stays out of the help.
    assert!(!text.contains("--dmabuf_exporter"), "{text}");
}
