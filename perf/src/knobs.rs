//! perftest's QP attribute, memory and verification flags: `--sl`,
//! `--tclass`, `--flow_label`, `--qp-timeout`, `--retry_count`,
//! `--use_ooo`, `--write_with_imm`, `--send_with_imm`, `--mr_per_qp`,
//! `--tph_mem` / `--cpu_id` / `--ph`, `--use_data_direct`,
//! `--report-counters`, `--limit_bw`, `--limit_msgrate`, and the GPU memory
//! of `--use_cuda`, `--use_cuda_dmabuf`, `--use_rocm`, `--use_rocm_dmabuf`
//! (see `gpu`). Parsed here, checked as perftest's parser checks them.

use rrddmma::prim::TphMemType;

use crate::getopt::{num, text};

/// Where the test buffer lives (perftest's `memory_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuKind {
    /// `--use_cuda=N`: CUDA device N, through `libcuda.so.1`.
    Cuda,
    /// `--use_rocm=N`: ROCm device N, through `libamdhip64.so`.
    Rocm,
    /// The hidden `--dmabuf_exporter vgem`: a dma-buf from the kernel's
    /// virtual GEM driver, registered as a GPU's dma-buf is (device tests).
    Vgem,
}

/// GPU (or other exporter's) memory for the test buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpu {
    pub kind: GpuKind,
    /// The device index (`--use_cuda=N`, `--use_rocm=N`).
    pub device: u32,
    /// Registered through a dma-buf (`--use_cuda_dmabuf`,
    /// `--use_rocm_dmabuf`; always for vgem); else the peer-memory path
    /// (registration of the device pointer, with nvidia-peermem or amdgpu's).
    pub dmabuf: bool,
}

/// The flags' values; `Default` is perftest's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Knobs {
    /// `-S, --sl`: the service level of the address vectors.
    pub sl: u8,
    /// `--tclass`: the GRH traffic class.
    pub tclass: u8,
    /// `--flow_label=a,b,..`: GRH flow labels, QP i takes label `i % len`.
    pub flow_labels: Vec<u32>,
    /// `-u, --qp-timeout`: local ACK timeout exponent (default 14).
    pub qp_timeout: u8,
    /// `--retry_count`: rdma_cm's retry count (`-R`).
    pub retry_count: Option<u8>,
    /// `--use_ooo`: out-of-order data placement (mlx5's `OOO_DP`).
    pub ooo: bool,
    /// `--write_with_imm` / `--send_with_imm`: the request carries
    /// immediate data, which the receiver checks for.
    pub imm: bool,
    /// `--mr_per_qp`: a memory region per QP.
    pub mr_per_qp: bool,
    /// `--tph_mem`, `--cpu_id`, `--ph`: a DMA handle with TLP processing hints.
    pub tph_mem: Option<TphMemType>,
    pub cpu_id: Option<u32>,
    pub ph: Option<u8>,
    /// `--use_data_direct`: the dma-buf registered through mlx5 data-direct.
    pub data_direct: bool,
    /// `-W, --report-counters`: port counters (paths under
    /// `/sys/class/infiniband/DEV/ports/PORT/`) whose change is printed.
    pub counters: Vec<String>,
    /// `-w, --limit_bw`: the run fails when its bandwidth is below.
    pub limit_bw: Option<f64>,
    /// `-y, --limit_msgrate`: the run fails when its message rate (Mpps) is below.
    pub limit_msgrate: Option<f64>,
    pub gpu: Option<Gpu>,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            sl: 0,
            tclass: 0,
            flow_labels: Vec::new(),
            qp_timeout: 14,
            retry_count: None,
            ooo: false,
            imm: false,
            mr_per_qp: false,
            tph_mem: None,
            cpu_id: None,
            ph: None,
            data_direct: false,
            counters: Vec::new(),
            limit_bw: None,
            limit_msgrate: None,
            gpu: None,
        }
    }
}

/// The long flags parsed here.
pub const LONG: [&str; 25] = [
    "sl",
    "tclass",
    "flow_label",
    "qp-timeout",
    "retry_count",
    "use_ooo",
    "write_with_imm",
    "send_with_imm",
    "mr_per_qp",
    "tph_mem",
    "cpu_id",
    "ph",
    "use_data_direct",
    "report-counters",
    "limit_bw",
    "limit_msgrate",
    "use_cuda",
    "use_cuda_dmabuf",
    "use_rocm",
    "use_rocm_dmabuf",
    "dmabuf_exporter",
    // The flags perftest has that need one of these first.
    "cuda_mem_type",
    "use_cuda_bus_id",
    "use_cuda_pcie_mapping",
    "no_enhanced_reorder",
];

/// The short flags parsed here (perftest's letters).
pub const SHORT: [char; 5] = ['S', 'u', 'w', 'W', 'y'];

/// The raw flags, before [`check`] turns them into [`Knobs`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Given {
    pub k: Knobs,
    write_imm: bool,
    send_imm: bool,
    cuda: Option<u32>,
    rocm: Option<u32>,
    cuda_dmabuf: bool,
    rocm_dmabuf: bool,
    vgem: bool,
}

/// The value of `-S`/`--sl` and the other flags by their short letter.
pub fn short(p: &mut lexopt::Parser, c: char, g: &mut Given) -> Result<(), String> {
    let long = match c {
        'S' => "sl",
        'u' => "qp-timeout",
        'w' => "limit_bw",
        'W' => "report-counters",
        _ => "limit_msgrate",
    };
    long_flag(p, long, g)
}

/// A number in `lo..=hi`, named by its flag in the refusal.
fn bounded<T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy>(
    p: &mut lexopt::Parser,
    flag: &str,
    hi: T,
    what: &str,
) -> Result<T, String> {
    let v: T = num(p, flag)?;
    if v > hi {
        return Err(format!("{flag} {v}: at most {hi} ({what})"));
    }
    Ok(v)
}

/// A limit of `-w`/`-y`: a number of 0 or more.
fn limit(p: &mut lexopt::Parser, flag: &str) -> Result<f64, String> {
    let v: f64 = num(p, flag)?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("{flag} {v}: give a limit of 0 or more"));
    }
    Ok(v)
}

/// One of [`LONG`], with its value.
pub fn long_flag(p: &mut lexopt::Parser, f: &str, g: &mut Given) -> Result<(), String> {
    let k = &mut g.k;
    match f {
        "sl" => k.sl = bounded(p, "--sl", 15u8, "a service level is 4 bits")?,
        "tclass" => k.tclass = bounded(p, "--tclass", 255u16, "the GRH traffic class is 8 bits")? as u8,
        "flow_label" => {
            let v = text(p, "--flow_label")?;
            k.flow_labels = v
                .split(',')
                .map(|l| match parse_int(l) {
                    Some(n) if n <= 0xf_ffff => Ok(n as u32),
                    _ => Err(format!(
                        "--flow_label {v}: {l:?} is not a flow label (0 to 1048575, the GRH's 20 bits; a list is \
                         comma-separated)"
                    )),
                })
                .collect::<Result<_, _>>()?;
        }
        "qp-timeout" => k.qp_timeout = bounded(p, "--qp-timeout", 31u8, "4.096 us x 2^N, N of 5 bits")?,
        "retry_count" => k.retry_count = Some(bounded(p, "--retry_count", 7u8, "3 bits; 7 retries forever on rxe")?),
        "use_ooo" => k.ooo = true,
        "write_with_imm" => g.write_imm = true,
        "send_with_imm" => g.send_imm = true,
        "mr_per_qp" => k.mr_per_qp = true,
        "tph_mem" => {
            k.tph_mem = Some(match text(p, "--tph_mem")?.to_ascii_lowercase().as_str() {
                "volatile" | "vm" => TphMemType::Volatile,
                "persistent" | "pm" => TphMemType::Persistent,
                v => return Err(format!("--tph_mem {v:?}: expected volatile (vm) or persistent (pm)")),
            })
        }
        "cpu_id" => k.cpu_id = Some(num(p, "--cpu_id")?),
        "ph" => k.ph = Some(bounded(p, "--ph", 3u8, "0 bidirectional, 1 requester, 2 target, 3 target with priority")?),
        "use_data_direct" => k.data_direct = true,
        "report-counters" => {
            let v = text(p, "--report-counters")?;
            k.counters = v.split(',').filter(|c| !c.is_empty()).map(str::to_string).collect();
            if let Some(bad) = k.counters.iter().find(|c| c.starts_with('/') || c.split('/').any(|s| s == "..")) {
                return Err(format!(
                    "--report-counters: {bad:?} is not a counter of the port: give paths under \
                     /sys/class/infiniband/DEV/ports/PORT/, e.g. counters/port_xmit_data,hw_counters/rcvd_pkts"
                ));
            }
            if k.counters.is_empty() {
                return Err("--report-counters: give counter names, e.g. counters/port_xmit_data".into());
            }
        }
        "limit_bw" => k.limit_bw = Some(limit(p, "--limit_bw")?),
        "limit_msgrate" => k.limit_msgrate = Some(limit(p, "--limit_msgrate")?),
        "use_cuda" => g.cuda = Some(num(p, "--use_cuda")?),
        "use_rocm" => g.rocm = Some(num(p, "--use_rocm")?),
        "use_cuda_dmabuf" => g.cuda_dmabuf = true,
        "use_rocm_dmabuf" => g.rocm_dmabuf = true,
        "dmabuf_exporter" => match text(p, "--dmabuf_exporter")?.as_str() {
            "vgem" => g.vgem = true,
            v => return Err(format!("--dmabuf_exporter {v:?}: only vgem (the kernel's virtual GEM driver)")),
        },
        other => {
            return Err(format!(
                "--{other}: perftest's flag is not available in rrddmma-perf yet (see docs/perf.md's flag table)"
            ))
        }
    }
    Ok(())
}

/// perftest's `strtol(.., 0)`: decimal, or hex with `0x`.
fn parse_int(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// What the rest of the command line says, for [`check`]'s rules.
pub struct Run<'a> {
    /// `write`, `read`, `send` or `atomic`.
    pub verb: &'a str,
    /// A bandwidth test (else latency).
    pub bw: bool,
    /// The transport's name (`RC`, `UC`, `UD`, `XRC`, `DC`).
    pub conn: &'a str,
    pub bidir: bool,
    pub run_infinitely: bool,
    pub rdma_cm: bool,
    pub check_payload: bool,
    /// `-D` given.
    pub duration: bool,
    pub odp: bool,
    pub hugepages: bool,
}

/// perftest's rules for these flags, and this tool's limits: the flags'
/// values, or why not.
pub fn check(r: &Run<'_>, g: Given) -> Result<Knobs, String> {
    let test = format!("{} {}", r.verb, if r.bw { "bw" } else { "lat" });
    let mut k = g.k;
    if g.write_imm && r.verb != "write" {
        return Err(format!("--write_with_imm: write lat and write bw only (as perftest), not {test}"));
    }
    if g.send_imm && r.verb != "send" {
        return Err(format!("--send_with_imm: send lat and send bw only (as perftest), not {test}"));
    }
    k.imm = g.write_imm || g.send_imm;
    if g.write_imm && (r.bidir || r.run_infinitely || !matches!(r.conn, "RC" | "UC") || r.rdma_cm) {
        return Err(format!(
            "--write_with_imm with {}: rrddmma-perf runs write-with-immediate on RC and UC, without -b, \
             --run_infinitely or -R",
            if r.bidir {
                "-b"
            } else if r.run_infinitely {
                "--run_infinitely"
            } else if r.rdma_cm {
                "-R"
            } else {
                r.conn
            }
        ));
    }
    if g.write_imm && r.check_payload && r.bw {
        return Err("--write_with_imm with --check-payload: the payload check covers write bw without it".into());
    }
    if g.write_imm && r.duration {
        return Err("--write_with_imm with -D: the receiver counts -n messages; use -n".into());
    }
    if k.mr_per_qp && !r.bw {
        return Err(format!("--mr_per_qp: bandwidth tests only (as perftest), not {test}"));
    }
    if (k.limit_bw.is_some() || k.limit_msgrate.is_some()) && !r.bw {
        return Err(format!("--limit_bw / --limit_msgrate: bandwidth tests only (as perftest), not {test}"));
    }
    if k.retry_count.is_some() && !r.rdma_cm {
        return Err("--retry_count: rdma_cm's retry count (perftest's meaning); add -R, or leave it out (QPs \
                    connected without rdma_cm retry 7 times, as perftest's)"
            .into());
    }
    if !k.flow_labels.is_empty() && r.conn == "DC" {
        return Err("--flow_label with -c DC: not yet (DC initiators take their address per request)".into());
    }
    if k.ooo && !matches!(r.conn, "RC" | "UC" | "UD") {
        return Err(format!(
            "--use_ooo with -c {}: rrddmma-perf asks out-of-order placement on RC, UC and UD QPs",
            r.conn
        ));
    }
    // perftest's TPH rules.
    if k.ph.is_some() && k.data_direct {
        return Err("--ph with --use_data_direct: data direct is not supported with TPH (as perftest)".into());
    }
    if k.tph_mem.is_some() != k.cpu_id.is_some() {
        return Err(if k.tph_mem.is_some() {
            "--tph_mem requires --cpu_id to be specified (as perftest)"
        } else {
            "--cpu_id requires --tph_mem to be specified (as perftest)"
        }
        .into());
    }
    if k.tph_mem.is_some() && k.ph.is_none() {
        return Err("--tph_mem and --cpu_id can only be used when --ph is specified (as perftest)".into());
    }
    if k.ph.is_some() && r.odp {
        return Err("--ph with --odp: a DMA handle takes registration through reg_mr_ex, not on-demand paging".into());
    }
    // GPU memory.
    if g.cuda.is_some() && g.rocm.is_some() {
        return Err("--use_cuda and --use_rocm both choose the buffer's device: give one".into());
    }
    if g.cuda_dmabuf && g.cuda.is_none() {
        return Err("--use_cuda_dmabuf: add --use_cuda=N (the CUDA device whose memory is exported)".into());
    }
    if g.rocm_dmabuf && g.rocm.is_none() {
        return Err("--use_rocm_dmabuf: add --use_rocm=N (the ROCm device whose memory is exported)".into());
    }
    k.gpu = match (g.cuda, g.rocm, g.vgem) {
        (Some(_) | None, Some(_) | None, true) if g.cuda.is_some() || g.rocm.is_some() => {
            return Err("--dmabuf_exporter vgem replaces the GPU: drop --use_cuda / --use_rocm".into())
        }
        (_, _, true) => Some(Gpu { kind: GpuKind::Vgem, device: 0, dmabuf: true }),
        (Some(d), _, _) => Some(Gpu { kind: GpuKind::Cuda, device: d, dmabuf: g.cuda_dmabuf }),
        (_, Some(d), _) => Some(Gpu { kind: GpuKind::Rocm, device: d, dmabuf: g.rocm_dmabuf }),
        _ => None,
    };
    if k.data_direct && !k.gpu.is_some_and(|g| g.dmabuf) {
        return Err("--use_data_direct registers a GPU's dma-buf through mlx5 data-direct: add --use_cuda=N \
                    --use_cuda_dmabuf (as perftest)"
            .into());
    }
    if let Some(gpu) = k.gpu {
        let flag = match gpu.kind {
            GpuKind::Cuda => "--use_cuda",
            GpuKind::Rocm => "--use_rocm",
            GpuKind::Vgem => "--dmabuf_exporter",
        };
        let clash = [
            (r.check_payload, "--check-payload (the CPU cannot read the buffer)"),
            (!r.bw && r.verb == "write" && !k.imm, "write lat (its receiver polls the buffer; add --write_with_imm)"),
            (r.odp, "--odp"),
            (r.hugepages, "--use_hugepages"),
            (k.mr_per_qp, "--mr_per_qp"),
            (k.ph.is_some(), "--ph (TPH registers process memory here)"),
            (r.conn == "DC", "-c DC"),
        ];
        if let Some((_, what)) = clash.iter().find(|(on, _)| *on) {
            return Err(format!("{flag} with {what}: not supported; drop one"));
        }
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use crate::args::parse;

    fn p(s: &str) -> Result<crate::args::Opts, String> {
        parse(s.split_whitespace())
    }

    /// The flags take perftest's spellings and forms, and its defaults.
    #[test]
    fn perftest_spellings_and_defaults() {
        let d = p("write bw").unwrap().knobs;
        assert_eq!((d.sl, d.tclass, d.qp_timeout, d.imm, d.mr_per_qp, d.ooo), (0, 0, 14, false, false, false));
        let k = p("write bw -S 3 --tclass=96 --flow_label 0x10,7 -u 18 --mr_per_qp -W counters/port_xmit_data,\
                   hw_counters/sent_pkts -w 0.5 -y 0.01 --write_with_imm --use_ooo -q 2")
        .unwrap()
        .knobs;
        assert_eq!((k.sl, k.tclass, k.qp_timeout, k.imm, k.mr_per_qp, k.ooo), (3, 96, 18, true, true, true));
        assert_eq!(k.flow_labels, vec![16, 7]);
        assert_eq!(k.counters, vec!["counters/port_xmit_data", "hw_counters/sent_pkts"]);
        assert_eq!((k.limit_bw, k.limit_msgrate), (Some(0.5), Some(0.01)));
        let k =
            p("send lat --send_with_imm --sl=2 --qp-timeout=10 --report-counters=hw_counters/rcvd_pkts").unwrap().knobs;
        assert_eq!((k.imm, k.sl, k.qp_timeout), (true, 2, 10));
        let k = p("write bw --tph_mem PM --cpu_id 3 --ph 2").unwrap().knobs;
        assert_eq!((k.tph_mem, k.cpu_id, k.ph), (Some(rrddmma::prim::TphMemType::Persistent), Some(3), Some(2)));
        assert_eq!(
            p("write bw --tph_mem volatile --cpu_id 0 --ph 0").unwrap().knobs.tph_mem,
            Some(rrddmma::prim::TphMemType::Volatile)
        );
        assert_eq!(p("write bw -R --retry_count 5").unwrap().knobs.retry_count, Some(5));
        let g = p("read bw --use_cuda=1 --use_cuda_dmabuf --use_data_direct").unwrap().knobs;
        assert_eq!(g.gpu, Some(super::Gpu { kind: super::GpuKind::Cuda, device: 1, dmabuf: true }));
        assert!(g.data_direct);
        let g = p("send bw --use_rocm 0").unwrap().knobs.gpu.unwrap();
        assert_eq!((g.kind, g.dmabuf), (super::GpuKind::Rocm, false));
        assert_eq!(p("write bw --dmabuf_exporter vgem").unwrap().knobs.gpu.unwrap().kind, super::GpuKind::Vgem);
    }

    /// perftest's refusals, and this tool's, each naming the flag and the fix.
    #[test]
    fn refusals_name_the_flag_and_the_fix() {
        let bad = [
            ("send bw --write_with_imm", "write lat and write bw only"),
            ("write lat --send_with_imm", "send lat and send bw only"),
            ("write bw -b --write_with_imm", "without -b"),
            ("write lat --mr_per_qp", "bandwidth tests only"),
            ("write lat -w 1", "bandwidth tests only"),
            ("write bw --retry_count 3", "add -R"),
            ("write bw --retry_count 9 -R", "at most 7"),
            ("write bw -S 16", "--sl 16: at most 15"),
            ("write bw --tclass 256", "at most 255"),
            ("write bw --flow_label 1,0x100000", "not a flow label"),
            ("write bw -u 32", "at most 31"),
            ("write bw --tph_mem vm --ph 1", "--tph_mem requires --cpu_id"),
            ("write bw --cpu_id 1 --ph 1", "--cpu_id requires --tph_mem"),
            ("write bw --tph_mem vm --cpu_id 1", "only be used when --ph"),
            ("write bw --tph_mem dram", "expected volatile (vm) or persistent (pm)"),
            ("write bw --ph 4", "at most 3"),
            ("write bw --use_data_direct", "add --use_cuda=N --use_cuda_dmabuf"),
            ("write bw --use_cuda 0 --use_cuda_dmabuf --use_data_direct --ph 1", "not supported with TPH"),
            ("write bw --use_cuda_dmabuf", "add --use_cuda=N"),
            ("write bw --use_rocm_dmabuf", "add --use_rocm=N"),
            ("write bw --use_cuda 0 --use_rocm 0", "give one"),
            ("write bw --use_cuda 0 --check-payload", "--check-payload"),
            ("write lat --use_cuda 0", "add --write_with_imm"),
            ("write bw -c XRC --use_ooo", "RC, UC and UD"),
            ("write bw -W /etc/passwd", "not a counter of the port"),
            ("write bw -W hw_counters/../../x", "not a counter of the port"),
            ("write bw -w -1", "0 or more"),
            ("write bw --use_cuda_pcie_mapping", "not available in rrddmma-perf yet"),
        ];
        for (line, want) in bad {
            let e = p(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
        assert!(p("write lat --use_cuda 0 --write_with_imm").is_ok());
    }
}
