//! Command-line flags: perftest's names and defaults, plus this tool's own.

use std::path::PathBuf;

use crate::pace::{Rate, RateKind, RateUnits};

/// The operation measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// SEND/RECV.
    Send,
    /// 8-byte fetch-and-add (or compare-and-swap with `-A CMP_AND_SWAP`).
    Atomic,
}

impl Verb {
    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Write => "write",
            Verb::Read => "read",
            Verb::Send => "send",
            Verb::Atomic => "atomic",
        }
    }
}

/// The transport (`-c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conn {
    /// Reliable connected.
    Rc,
    /// Unreliable connected: RDMA WRITE and SEND, no acknowledgements.
    Uc,
    /// Unreliable datagram: SEND of at most one path MTU, to an address handle.
    Ud,
    /// Extended reliable connected: the requester's `XRC_SEND` QPs name the
    /// responder's XRC SRQ; the responder's `XRC_RECV` QPs take its side.
    Xrc,
    /// Dynamically connected (ConnectX): the requester's DC initiators
    /// address the responder's DC targets, which receive on one SRQ.
    Dc,
}

impl Conn {
    /// perftest's name.
    pub fn name(self) -> &'static str {
        match self {
            Conn::Rc => "RC",
            Conn::Uc => "UC",
            Conn::Ud => "UD",
            Conn::Xrc => "XRC",
            Conn::Dc => "DC",
        }
    }
}

/// perftest's largest inline payload on UD (`MAX_INLINE_UD`).
pub const MAX_INLINE_UD: u32 = 884;
/// perftest's receive depth for UC and UD runs of `-n` iterations when `-r`
/// keeps its default: one receive per message, up to this many (`UC_MAX_RX`).
pub const UC_MAX_RX: u64 = 16000;
/// The default of `-r`.
const DEF_RX_DEPTH: u32 = 512;

/// Bandwidth or latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// Streaming, many requests in flight.
    Bw,
    /// One request at a time.
    Lat,
}

/// Everything the command line sets.
#[derive(Clone, Debug)]
pub struct Opts {
    pub verb: Verb,
    pub test: Test,
    pub device: Option<String>,
    pub ib_port: u8,
    pub gid_index: Option<u8>,
    pub size: usize,
    /// Whether `-s` was given (UD: a larger default is cut to the MTU, a larger `-s` refused).
    pub size_given: bool,
    pub all: bool,
    pub max_size: usize,
    pub iters: u64,
    pub duration: Option<f64>,
    /// perftest's `-e`: sleep on completion events instead of polling.
    pub events: bool,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub post_list: u32,
    pub cq_mod: u32,
    pub qps: u32,
    pub threads: u32,
    pub inline: u32,
    pub gbits: bool,
    pub tcp_port: u16,
    pub server: Option<String>,
    pub dont_xchg_versions: bool,
    pub mtu: Option<u32>,
    pub cas: bool,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub progress: bool,
    pub bidir: bool,
    pub check_payload: bool,
    pub histogram: bool,
    pub unsorted: bool,
    pub cpu: Option<usize>,
    pub numa: bool,
    pub hugepages: bool,
    pub run_infinitely: bool,
    /// perftest's `-R`: QPs connected through rdma_cm, the exchange over an RC QP.
    pub rdma_cm: bool,
    /// perftest's `-c`.
    pub conn: Conn,
    /// perftest's `--use-srq`: receives go to one SRQ shared by the QPs.
    pub use_srq: bool,
    /// perftest's `--odp`: the buffer is registered with on-demand paging.
    pub odp: bool,
    /// perftest's `--rate_limit` (with `--rate_units`, `--rate_limit_type`, `--burst_size`).
    pub rate: Option<Rate>,
    /// perftest's `--log_dci_streams`: with `-c DC`, each DCI has
    /// `2^N` concurrent streams (0: a plain DCI).
    pub log_dci_streams: u8,
    /// perftest's `--log_active_dci_streams`: requests go round-robin over
    /// the first `2^N` streams (default `--log_dci_streams`).
    pub log_active_dci_streams: u8,
    /// perftest's QP attribute, memory and verification flags (`knobs`).
    pub knobs: crate::knobs::Knobs,
}

pub const USAGE: &str = "\
usage: rrddmma-perf {write,read,send,atomic} {bw,lat} [FLAGS] [SERVER]
       rrddmma-perf plot IN.csv OUT.svg [TITLE]
       rrddmma-perf plot RESULTS.json [OUT.svg]   (redraw a cluster report's figures)
       rrddmma-perf cluster [FLAGS]   (every rank; see rrddmma-perf cluster --help)
Without SERVER this side is the server and waits for a client on the TCP port.
perftest's flags:
  -d, --ib-dev NAME        device (default: the first one)
  -i, --ib-port N          port (default 1)
  -x, --gid-index N        GID index (default on RoCE: the RoCE v2 GID)
  -s, --size BYTES         message size (bw 65536, lat 2, atomic 8)
  -a, --all                sweep sizes 2 .. 2^23 (see --max-size)
  -n, --iters N            iterations (bw 5000, lat 1000)
  -D, --duration SECS      run for SECS seconds instead of -n iterations
  -e, --events             sleep on completion events instead of polling (read, send, atomic)
  -t, --tx-depth N         send queue depth (bw 128, lat 1)
  -r, --rx-depth N         receive queue depth for send tests (512)
  -l, --post_list N        requests per doorbell (1)
  -Q, --cq-mod N           one signaled request every N (100; 1 above 8 KiB unless -a/-Q)
  -q, --qp N               queue pairs (1)
  -I, --inline_size BYTES  inline payloads up to BYTES (0)
  -m, --mtu BYTES          path MTU (default: the port's active MTU)
  -A, --atomic_type T      FETCH_AND_ADD (default) or CMP_AND_SWAP
  -p, --port N             TCP port of the exchange (18515)
  -b, --bidirectional      both sides stream at once (bw tests)
  -H, --report-histogram   print every latency sample, sorted (lat tests)
  -U, --report-unsorted    print every latency sample in the order taken (lat tests)
  -c, --connection T       transport: RC (default); UC (write, send); UD (send, messages up to the MTU);
                           XRC (bw without -b; needs a device with XRC, e.g. mlx5);
                           DC (every test, -b too, not -R; needs an mlx5 device)
      --log_dci_streams N  -c DC: each DC initiator runs 2^N streams (0..16, default 0: none)
      --log_active_dci_streams N
                           -c DC: requests go round-robin over 2^N streams (default --log_dci_streams)
      --use-srq            receives from one shared receive queue (send tests; -r sizes it)
      --odp                register the buffer with on-demand paging (not atomic, not UC)
      --rate_limit R       bw tests: send at most R (in --rate_units) per second
      --rate_units U       M (MiB/s), g (Gb/s, the default) or p (messages/s)
      --rate_limit_type T  SW (the loop paces bursts) or HW (the device paces the QPs; default,
                           falling back to SW when the device has no pacing and T was not given)
      --burst_size N       requests per burst of the rate limiter (default: the tx depth)
  -R, --rdma_cm            connect through rdma_cm (SERVER by IP address; exchange over RDMA SEND)
      --use_hugepages      buffers on 2 MiB huge pages
      --run_infinitely     bw client: stream until stopped, a report every -D seconds (5)
      --report_gbits       report Gb/s instead of MiB/s
      --dont_xchg_versions skip the version, system-data and MTU exchange
  -S, --sl N               service level of the QPs' address vectors (0)
      --tclass N           GRH traffic class (0)
      --flow_label L[,L..] GRH flow label; QP i takes the (i mod count)-th
  -u, --qp-timeout N       local ACK timeout, 4.096 us x 2^N (14)
      --retry_count N      rdma_cm's retry count (with -R)
      --use_ooo            out-of-order data placement (mlx5 OOO_DP; refused where the device lacks it)
      --write_with_imm     RDMA WRITE with immediate data (write bw, write lat; the receiver checks it)
      --send_with_imm      SEND with immediate data (send bw, send lat; the receiver checks it)
      --mr_per_qp          a memory region per QP (bw tests)
      --tph_mem T --cpu_id N --ph H
                           register through a DMA handle with TPH: memory type volatile|vm or
                           persistent|pm, steering CPU N, processing hint H (0..3); --ph alone works too
  -W, --report-counters C[,C..]
                           print the change of port counters (paths under
                           /sys/class/infiniband/DEV/ports/PORT/, e.g. hw_counters/sent_pkts)
  -w, --limit_bw BW        fail the run when its bandwidth is below BW (MiB/s, Gb/s with --report_gbits)
  -y, --limit_msgrate R    fail the run when its message rate is below R (Mpps)
      --use_cuda N         buffer on CUDA device N (libcuda.so.1 loaded at run time; peer memory)
      --use_cuda_dmabuf    register the CUDA buffer through its dma-buf
      --use_rocm N         buffer on ROCm device N (libamdhip64.so loaded at run time; peer memory)
      --use_rocm_dmabuf    register the ROCm buffer through its dma-buf
      --use_data_direct    register the GPU's dma-buf through mlx5 data-direct (with --use_cuda_dmabuf)
This tool's own:
      --threads N          threads driving the QPs (bw; QPs split round-robin)
      --max-size BYTES     largest size of a -a sweep (2^23)
      --json FILE          results as JSON
      --csv FILE           results as CSV
      --svg FILE           plot of the sweep (bandwidth or median latency vs size)
      --no-progress        no progress bar on sweeps
      --cpu N              run on CPU N
      --numa               run on the CPUs of the device's NUMA node (buffers become node-local)
      --check-payload      check what arrived against a pattern (both sides; not send/atomic bw)";

pub use crate::getopt::{num, text};

/// A positional argument as text (non-UTF-8 is an error).
fn positional(v: std::ffi::OsString) -> Result<String, String> {
    v.into_string().map_err(|v| format!("argument {v:?} is not valid UTF-8"))
}

/// Longest `-D`: a year.
const MAX_DURATION: f64 = 31_536_000.0;

/// `-D` must be a finite number of seconds in (0, a year].
pub fn check_duration(d: Option<f64>) -> Result<(), String> {
    match d {
        Some(d) if !(d > 0.0 && d <= MAX_DURATION) => Err(format!(
            "-D {d}: give a number of seconds above 0 and at most {MAX_DURATION} (a year); \
             an endless bandwidth run is --run_infinitely"
        )),
        _ => Ok(()),
    }
}

/// Parses the arguments after the program name, with perftest's getopt
/// forms: `-s64`, `-s 64`, `--size=64`, `--size 64`.
pub fn parse<I>(args: I) -> Result<Opts, String>
where
    I: IntoIterator,
    I::Item: Into<std::ffi::OsString>,
{
    use lexopt::Arg::{Long, Short, Value};
    let mut p = lexopt::Parser::from_args(args);
    let mut next_word = |what: &str| -> Result<String, String> {
        match p.next().map_err(|e| e.to_string())? {
            Some(Value(v)) => positional(v),
            Some(other) => Err(format!("expected {what} first, found {}", other.unexpected())),
            None => Err(format!("missing {what}")),
        }
    };
    let verb = match next_word("the test name")?.as_str() {
        "write" => Verb::Write,
        "read" => Verb::Read,
        "send" => Verb::Send,
        "atomic" => Verb::Atomic,
        other => return Err(format!("unknown test {other:?}: expected write, read, send or atomic")),
    };
    let test = match next_word("bw or lat after the test name")?.as_str() {
        "bw" => Test::Bw,
        "lat" => Test::Lat,
        other => return Err(format!("unknown kind {other:?}: expected bw or lat")),
    };
    let mut o = Opts {
        verb,
        test,
        device: None,
        ib_port: 1,
        gid_index: None,
        size: 0,
        size_given: false,
        all: false,
        max_size: 1 << 23,
        iters: if test == Test::Bw { 5000 } else { 1000 },
        duration: None,
        events: false,
        tx_depth: 0,
        rx_depth: DEF_RX_DEPTH,
        post_list: 1,
        cq_mod: 100,
        qps: 1,
        threads: 1,
        inline: 0,
        gbits: false,
        tcp_port: 18515,
        server: None,
        dont_xchg_versions: false,
        mtu: None,
        cas: false,
        json: None,
        csv: None,
        svg: None,
        progress: true,
        bidir: false,
        check_payload: false,
        histogram: false,
        unsorted: false,
        cpu: None,
        numa: false,
        hugepages: false,
        run_infinitely: false,
        rdma_cm: false,
        conn: Conn::Rc,
        use_srq: false,
        odp: false,
        rate: None,
        log_dci_streams: 0,
        log_active_dci_streams: 0,
        knobs: Default::default(),
    };
    let mut knobs = crate::knobs::Given::default();
    let mut cq_mod_set = false;
    let mut active_streams = None;
    let mut limit = Limiter::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Short('d') | Long("ib-dev") => o.device = Some(text(&mut p, "-d")?),
            Short('i') | Long("ib-port") => o.ib_port = num(&mut p, "-i")?,
            Short('x') | Long("gid-index") => o.gid_index = Some(num(&mut p, "-x")?),
            Short('s') | Long("size") => {
                o.size = num(&mut p, "-s")?;
                o.size_given = true;
            }
            Short('a') | Long("all") => o.all = true,
            Short('n') | Long("iters") => o.iters = num(&mut p, "-n")?,
            Short('D') | Long("duration") => o.duration = Some(num(&mut p, "-D")?),
            Short('e') | Long("events") => o.events = true,
            Short('t') | Long("tx-depth") => o.tx_depth = num(&mut p, "-t")?,
            Short('r') | Long("rx-depth") => o.rx_depth = num(&mut p, "-r")?,
            Short('l') | Long("post_list") => o.post_list = num(&mut p, "-l")?,
            Short('Q') | Long("cq-mod") | Long("cq_mod") => {
                o.cq_mod = num(&mut p, "-Q")?;
                cq_mod_set = true;
            }
            Short('q') | Long("qp") => o.qps = num(&mut p, "-q")?,
            Short('I') | Long("inline_size") => o.inline = num(&mut p, "-I")?,
            Short('m') | Long("mtu") => o.mtu = Some(num(&mut p, "-m")?),
            Short('A') | Long("atomic_type") => match text(&mut p, "-A")?.as_str() {
                "FETCH_AND_ADD" => o.cas = false,
                "CMP_AND_SWAP" => o.cas = true,
                v => return Err(format!("-A: {v:?} is not FETCH_AND_ADD or CMP_AND_SWAP")),
            },
            Short('p') | Long("port") => o.tcp_port = num(&mut p, "-p")?,
            Short('F') | Long("CPU-freq") => {}
            Short('b') | Long("bidirectional") => o.bidir = true,
            // perftest's long name has the typo; both are taken.
            Short('H') | Long("report-histogrm") | Long("report-histogram") => o.histogram = true,
            Short('U') | Long("report-unsorted") => o.unsorted = true,
            Short('c') | Long("connection") => {
                o.conn = match text(&mut p, "-c")?.as_str() {
                    "RC" => Conn::Rc,
                    "UC" => Conn::Uc,
                    "UD" => Conn::Ud,
                    "XRC" => Conn::Xrc,
                    "DC" => Conn::Dc,
                    "SRD" => {
                        return Err("-c SRD: rrddmma-perf supports RC, UC, UD, XRC and DC connections (SRD is \
                                    EFA's)"
                            .into())
                    }
                    v => return Err(format!("-c {v:?}: expected RC, UC, UD, XRC, DC or SRD")),
                }
            }
            Short('R') | Long("rdma_cm") => o.rdma_cm = true,
            Long("use-srq") => o.use_srq = true,
            Long("log_dci_streams") => o.log_dci_streams = num(&mut p, "--log_dci_streams")?,
            Long("log_active_dci_streams") => active_streams = Some(num(&mut p, "--log_active_dci_streams")?),
            Long("odp") => o.odp = true,
            Long("rate_limit") => limit.value = Some(num(&mut p, "--rate_limit")?),
            Long("rate_units") => limit.units = Some(text(&mut p, "--rate_units")?),
            Long("rate_limit_type") => limit.kind = Some(text(&mut p, "--rate_limit_type")?),
            Long("burst_size") => limit.burst = Some(num(&mut p, "--burst_size")?),
            Long("cpu") => o.cpu = Some(num(&mut p, "--cpu")?),
            Long("numa") => o.numa = true,
            Long("use_hugepages") | Long("use-hugepages") => o.hugepages = true,
            Long("run_infinitely") | Long("run-infinitely") => o.run_infinitely = true,
            Long("report_gbits") => o.gbits = true,
            Long("dont_xchg_versions") => o.dont_xchg_versions = true,
            Long("threads") => o.threads = num(&mut p, "--threads")?,
            Long("max-size") => o.max_size = num(&mut p, "--max-size")?,
            Long("json") => o.json = Some(p.value().map_err(|e| format!("--json: {e}"))?.into()),
            Long("csv") => o.csv = Some(p.value().map_err(|e| format!("--csv: {e}"))?.into()),
            Long("svg") => o.svg = Some(p.value().map_err(|e| format!("--svg: {e}"))?.into()),
            Long("no-progress") => o.progress = false,
            Long("check-payload") => o.check_payload = true,
            Short(c) if crate::knobs::SHORT.contains(&c) => crate::knobs::short(&mut p, c, &mut knobs)?,
            Long(f) if crate::knobs::LONG.contains(&f) => {
                let f = f.to_string();
                crate::knobs::long_flag(&mut p, &f, &mut knobs)?
            }
            Value(v) if o.server.is_none() => o.server = Some(positional(v)?),
            Value(v) => return Err(format!("unexpected argument {v:?}")),
            Short(c) => return Err(format!("unknown flag -{c}")),
            Long(f) => return Err(format!("unknown flag --{f}")),
        }
    }
    o.size = message_size(o.verb, o.size, if test == Test::Bw { 65536 } else { 2 })?;
    if o.verb == Verb::Atomic {
        o.all = false;
    }
    if o.tx_depth == 0 {
        o.tx_depth = if test == Test::Bw { 128 } else { 1 };
    }
    if o.size == 0 || o.iters == 0 || o.qps == 0 || o.threads == 0 || o.post_list == 0 || o.cq_mod == 0 {
        return Err("-s, -n, -q, --threads, -l and -Q must be at least 1".into());
    }
    check_duration(o.duration)?;
    if o.all && o.duration.is_some() {
        return Err("-a and -D cannot be combined".into());
    }
    if test == Test::Lat && (o.qps != 1 || o.threads != 1 || o.post_list != 1) {
        return Err("latency tests use one QP, one thread and no post list".into());
    }
    if o.bidir && test == Test::Lat {
        return Err("-b (bidirectional) is for bandwidth tests; latency tests are ping-pongs already".into());
    }
    if o.bidir && o.verb == Verb::Send && o.duration.is_some() {
        return Err("-b with -D is not supported for send bw: the receiving half counts -n messages".into());
    }
    if o.check_payload && test == Test::Bw && matches!(o.verb, Verb::Send | Verb::Atomic) {
        return Err("--check-payload covers write and read bw and every latency test; not send or atomic bw".into());
    }
    if o.check_payload && o.verb == Verb::Atomic && o.cas {
        return Err("--check-payload checks fetch-and-add results; not -A CMP_AND_SWAP".into());
    }
    if o.threads > o.qps {
        return Err(format!("--threads {} needs at least as many QPs (-q)", o.threads));
    }
    if o.post_list > o.tx_depth {
        return Err(format!("-l {} exceeds the tx depth -t {}", o.post_list, o.tx_depth));
    }
    transport(&mut o)?;
    dc_streams(&mut o, active_streams)?;
    o.rate = limit.check(&o)?;
    if let Some(r) = o.rate.as_mut().filter(|r| o.conn == Conn::Dc && r.kind == RateKind::Hw) {
        if r.kind_given {
            return Err("-c DC with --rate_limit_type HW: rrddmma-perf paces DC initiators in software only; give \
                        --rate_limit_type SW"
                .into());
        }
        // As where a QP takes no HW limit: software pacing, said so.
        eprintln!(" --rate_limit with -c DC: pacing in software (DC initiators take no HW rate limit here)");
        r.kind = RateKind::Sw;
    }
    extras(&mut o)?;
    o.knobs = crate::knobs::check(&knob_facts(&o), knobs)?;
    // perftest leaves CQ moderation on for UD, whose messages are small, and
    // with -e.
    if o.size > 8192 && !o.all && !cq_mod_set && o.conn != Conn::Ud && !o.events {
        o.cq_mod = 1;
    }
    // The signaled request must fit in the queue: posting stops once fewer
    // than a post list's worth of slots is free.
    o.cq_mod = o.cq_mod.min(o.tx_depth - o.post_list + 1);
    if o.events && o.verb == Verb::Write {
        return Err("-e (events): not on WRITE tests, as perftest: a WRITE raises no completion at its target \
                    (the write lat receiver watches its buffer), so there is nothing to sleep on; -e takes read, \
                    send and atomic tests"
            .into());
    }
    if o.events && (o.duration.is_some() || o.run_infinitely) {
        return Err("-e (events) cannot be combined with -D or --run_infinitely, as in perftest (a side asleep \
                    on an event does not see its deadline pass); use -n with -e"
            .into());
    }
    if (o.histogram || o.unsorted) && test == Test::Bw {
        return Err("-H and -U are available on latency tests only".into());
    }
    if o.run_infinitely && (test != Test::Bw || o.verb == Verb::Send || o.all || o.bidir) {
        return Err("--run_infinitely: write, read and atomic bw only, without -a or -b".into());
    }
    if o.cpu.is_some() && o.numa {
        return Err("--cpu and --numa both choose the CPUs: give one".into());
    }
    if o.all && o.max_size < 2 {
        return Err("--max-size must be at least 2".into());
    }
    if let Some(m) = o.mtu {
        if !matches!(m, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(format!("-m {m}: MTU must be 256, 512, 1024, 2048 or 4096"));
        }
    }
    Ok(o)
}

/// What [`crate::knobs::check`]'s rules need of the rest of the line.
fn knob_facts(o: &Opts) -> crate::knobs::Run<'static> {
    crate::knobs::Run {
        verb: o.verb.name(),
        bw: o.test == Test::Bw,
        conn: o.conn.name(),
        bidir: o.bidir,
        run_infinitely: o.run_infinitely,
        rdma_cm: o.rdma_cm,
        check_payload: o.check_payload,
        duration: o.duration.is_some(),
        odp: o.odp,
        hugepages: o.hugepages,
    }
}

/// The transport's rules, as perftest's parser has them: UC carries WRITE
/// and SEND, UD SEND alone; UC does not go through rdma_cm (perftest
/// refuses it there too), UD does (SIDR, see `cm`). UD caps inline
/// payloads at [`MAX_INLINE_UD`]; UC and UD post one receive per message up
/// front in `-n` runs (they have no flow control to wait for re-posting).
fn transport(o: &mut Opts) -> Result<(), String> {
    let test = format!("{} {}", o.verb.name(), if o.test == Test::Bw { "bw" } else { "lat" });
    let allowed = match o.verb {
        Verb::Write => "RC or UC",
        Verb::Send => "RC, UC or UD",
        Verb::Read | Verb::Atomic => "RC",
    };
    match o.conn {
        Conn::Rc | Conn::Xrc => return Ok(()),
        Conn::Dc if o.rdma_cm => {
            return Err("-c DC: -R (rdma_cm makes no DC connections: DC has no connection to make); run -c DC \
                 without -R (the exchange goes over TCP)"
                .to_string());
        }
        Conn::Dc => return Ok(()),
        Conn::Uc if matches!(o.verb, Verb::Read | Verb::Atomic) => {
            return Err(format!(
                "-c UC: {test} needs {allowed} (UC carries RDMA WRITE and SEND only: write bw, write lat, send bw, \
                 send lat)"
            ))
        }
        Conn::Ud if o.verb != Verb::Send => {
            return Err(format!("-c UD: {test} needs {allowed} (UD carries SEND only: send bw, send lat)"))
        }
        Conn::Uc if o.rdma_cm => {
            return Err("-c UC with -R: rdma_cm makes no UC connections (perftest refuses this too); drop -R or use \
                        -c RC"
                .into())
        }
        _ => {}
    }
    if o.conn == Conn::Ud && o.inline > MAX_INLINE_UD {
        eprintln!(" -I {}: inline size set to {MAX_INLINE_UD} (the most perftest inlines on UD)", o.inline);
        o.inline = MAX_INLINE_UD;
    }
    if o.duration.is_none() && o.rx_depth == DEF_RX_DEPTH {
        o.rx_depth = o.iters.min(UC_MAX_RX) as u32;
    }
    Ok(())
}

/// The rate-limiter flags as given, checked by [`Limiter::check`].
#[derive(Default)]
struct Limiter {
    value: Option<f64>,
    units: Option<String>,
    kind: Option<String>,
    burst: Option<u32>,
}

impl Limiter {
    /// perftest's rules: a positive rate; units `M`, `g` or `p`; type `SW`
    /// or `HW` (perftest's `PP` paces raw Ethernet QPs, which this tool has
    /// not); the limit on bandwidth tests without `--run_infinitely`; SW
    /// not on atomics nor SEND with `-b`; HW not through rdma_cm.
    fn check(self, o: &Opts) -> Result<Option<Rate>, String> {
        let Some(value) = self.value else {
            let given = [
                (self.units.is_some(), "--rate_units"),
                (self.kind.is_some(), "--rate_limit_type"),
                (self.burst.is_some(), "--burst_size"),
            ];
            return match given.iter().find(|(g, _)| *g) {
                Some((_, flag)) => Err(format!("{flag} without --rate_limit: give the limit too (--rate_limit R)")),
                None => Ok(None),
            };
        };
        if !(value > 0.0 && value.is_finite()) {
            return Err(format!("--rate_limit {value}: give a rate above 0"));
        }
        let units = match self.units.as_deref() {
            None | Some("g") => RateUnits::Gbps,
            Some("M") => RateUnits::MiBps,
            Some("p") => RateUnits::Pps,
            Some(u) => return Err(format!("--rate_units {u:?}: expected M (MiB/s), g (Gb/s) or p (messages/s)")),
        };
        let kind = match self.kind.as_deref() {
            None | Some("HW") => RateKind::Hw,
            Some("SW") => RateKind::Sw,
            Some("PP") => {
                return Err("--rate_limit_type PP: perftest's packet pacing of raw Ethernet QPs; for RC, UC, UD \
                            and XRC QPs --rate_limit_type HW asks the device for the same pacing \
                            (ibv_modify_qp_rate_limit)"
                    .into())
            }
            Some(k) => return Err(format!("--rate_limit_type {k:?}: expected SW or HW")),
        };
        let test = format!("{} {}", o.verb.name(), if o.test == Test::Bw { "bw" } else { "lat" });
        if o.test != Test::Bw {
            return Err(format!(
                "--rate_limit: {test} is a latency test; the limit paces bandwidth tests (write, read, send, atomic \
                 bw)"
            ));
        }
        if o.run_infinitely {
            return Err("--rate_limit with --run_infinitely: not supported (perftest refuses it too); use -D".into());
        }
        if kind == RateKind::Sw && (o.verb == Verb::Atomic || (o.verb == Verb::Send && o.bidir)) {
            return Err(format!(
                "--rate_limit_type SW: not on {test}{} (perftest's SW limiter takes write, read and send bw, send \
                 without -b); try --rate_limit_type HW",
                if o.bidir { " -b" } else { "" }
            ));
        }
        if kind == RateKind::Sw && o.events {
            return Err("--rate_limit_type SW with -e: a side asleep on a completion event misses the start of its \
                        next burst; drop -e"
                .into());
        }
        if o.rdma_cm && (kind == RateKind::Hw || self.kind.is_none()) {
            return Err("--rate_limit_type HW with -R: not through rdma_cm (perftest refuses it too); use \
                        --rate_limit_type SW or drop -R"
                .into());
        }
        let burst = match self.burst {
            None | Some(0) => o.tx_depth,
            Some(b) => b,
        };
        Ok(Some(Rate { value, units, kind, kind_given: self.kind.is_some(), burst }))
    }
}

/// The checks of `--use-srq`, `--odp` and `-c XRC`, as perftest's parser
/// has them, and the limits of this tool's XRC runs.
fn extras(o: &mut Opts) -> Result<(), String> {
    let test = format!("{} {}", o.verb.name(), if o.test == Test::Bw { "bw" } else { "lat" });
    if o.use_srq && o.verb != Verb::Send {
        return Err(format!(
            "--use-srq: {test} takes no receives; the shared receive queue is for send bw and send lat (as in \
             perftest)"
        ));
    }
    if o.use_srq && o.qps > o.rx_depth {
        return Err(format!(
            "--use-srq with -q {}: the SRQ holds -r {} receives, fewer than one per QP; give -r {} or more",
            o.qps, o.rx_depth, o.qps
        ));
    }
    if o.use_srq && o.rdma_cm && o.conn == Conn::Ud {
        return Err("--use-srq with -R -c UD: the rdma_cm UD set-up takes each peer's announcement on the QP's own \
                    receive queue; drop --use-srq or -R"
            .into());
    }
    if o.odp && o.verb == Verb::Atomic {
        return Err("--odp: not on atomic tests (perftest refuses ODP with atomics)".into());
    }
    if o.odp && o.conn == Conn::Uc {
        return Err("--odp with -c UC: not supported (perftest refuses ODP with UC); use -c RC".into());
    }
    if o.conn == Conn::Xrc {
        if o.rdma_cm {
            return Err("-c XRC with -R: rdma_cm makes no XRC connections (perftest refuses this too)".into());
        }
        if o.test == Test::Lat || o.bidir {
            return Err(format!(
                "-c XRC: {test}{}: rrddmma-perf runs XRC on one-way bandwidth tests (write, read, send, atomic bw \
                 without -b)",
                if o.bidir { " -b" } else { "" }
            ));
        }
        // perftest turns --use-srq on with XRC: its receives go to the XRC SRQ.
        o.use_srq = false;
    }
    Ok(())
}

/// perftest's DCI stream flags: only with `-c DC`; up to 16 (stream ids
/// are 16 bits); the active streams at most the DCI's, by default all of them.
fn dc_streams(o: &mut Opts, active: Option<u8>) -> Result<(), String> {
    let given = o.log_dci_streams != 0 || active.is_some();
    if given && o.conn != Conn::Dc {
        return Err(format!(
            "--log_dci_streams / --log_active_dci_streams: DCI streams are a DC initiator's; add -c DC (the run is \
             -c {})",
            o.conn.name()
        ));
    }
    if o.log_dci_streams > 16 {
        return Err(format!("--log_dci_streams {}: at most 16 (a DCI stream id is 16 bits)", o.log_dci_streams));
    }
    let active = active.unwrap_or(o.log_dci_streams);
    if active > o.log_dci_streams {
        return Err(format!(
            "--log_active_dci_streams {active} is above --log_dci_streams {}: a DCI runs at most 2^{} streams",
            o.log_dci_streams, o.log_dci_streams
        ));
    }
    o.log_active_dci_streams = active;
    Ok(())
}

/// UD's message limit, once the path MTU (`mtu` bytes) is known: perftest
/// cuts a default size, and a `-a` sweep, to the MTU (saying so, as the
/// returned note) and refuses an explicit `-s` above it.
pub fn fit_ud(o: &mut Opts, mtu: usize) -> Result<Option<String>, String> {
    if o.conn != Conn::Ud {
        return Ok(None);
    }
    if o.all {
        if o.max_size <= mtu {
            return Ok(None);
        }
        o.max_size = mtu;
        return Ok(Some(format!(
            " -c UD: a message is at most one packet; the sweep stops at the path MTU, {mtu} bytes"
        )));
    }
    if o.size <= mtu {
        return Ok(None);
    }
    if o.size_given {
        return Err(format!(
            "-s {} with -c UD: a UD message is at most one packet and the path MTU is {mtu} bytes; give -s {mtu} or \
             less",
            o.size
        ));
    }
    o.size = mtu;
    Ok(Some(format!(" -c UD: a message is at most one packet; message size set to the path MTU, {mtu} bytes")))
}

/// The message size: `-s` as given, else `default`; atomics are 8 bytes.
pub fn message_size(verb: Verb, size: usize, default: usize) -> Result<usize, String> {
    match (verb, size) {
        (Verb::Atomic, 0 | 8) => Ok(8),
        (Verb::Atomic, _) => Err("atomic operations are 8 bytes: -s must be 8".into()),
        (_, 0) => Ok(default),
        (_, s) => Ok(s),
    }
}

/// The message sizes to run.
pub fn sizes(o: &Opts) -> Vec<usize> {
    if o.all {
        (1..24).map(|i| 1usize << i).take_while(|s| *s <= o.max_size).collect()
    } else {
        vec![o.size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Opts, String> {
        parse(s.split_whitespace())
    }

    /// `-c DC` and perftest's DCI stream flags: the forms taken and the
    /// ones refused, each refusal naming the flag and the fix.
    #[test]
    fn dc_connection_and_dci_stream_flags() {
        for t in ["write bw", "read bw", "send bw", "atomic bw"] {
            let o = p(&format!("{t} -c DC")).unwrap();
            assert_eq!((o.conn, o.log_dci_streams, o.log_active_dci_streams), (Conn::Dc, 0, 0), "{t}");
        }
        let o = p("write bw -c DC --log_dci_streams 4").unwrap();
        assert_eq!((o.log_dci_streams, o.log_active_dci_streams), (4, 4), "active defaults to all streams");
        let o = p("write bw -c DC --log_dci_streams=4 --log_active_dci_streams=2").unwrap();
        assert_eq!((o.log_dci_streams, o.log_active_dci_streams), (4, 2));
        assert_eq!(o.conn.name(), "DC");
        let refused = |args: &str, says: &[&str]| {
            let e = p(args).map(|_| ()).unwrap_err();
            assert!(says.iter().all(|w| e.contains(w)), "{args}: {e}");
        };
        refused("write bw --log_dci_streams 2", &["DC initiator", "add -c DC", "-c RC"]);
        refused("send bw -c UD --log_active_dci_streams 1", &["add -c DC", "-c UD"]);
        refused("write bw -c DC --log_dci_streams 17", &["--log_dci_streams 17", "at most 16"]);
        refused(
            "write bw -c DC --log_dci_streams 2 --log_active_dci_streams 3",
            &["--log_active_dci_streams 3 is above --log_dci_streams 2"],
        );
        refused("write bw -c DC --log_active_dci_streams 1", &["above --log_dci_streams 0"]);
        // Latency tests and -b: a DC initiator and a DC target on each side (perf/src/dc_dual.rs).
        for t in ["write lat -c DC", "read lat -c DC", "send lat -c DC", "atomic lat -c DC", "send bw -c DC -b"] {
            assert_eq!(p(t).unwrap().conn, Conn::Dc, "{t}");
        }
        refused("read bw -c DC -R", &["-R (rdma_cm makes no DC connections: DC has no connection to make)"]);
        refused("write bw -c DC --rate_limit 1 --rate_units M --rate_limit_type HW", &["software only"]);
        refused("write bw -c SRD", &["SRD is EFA's"]);
        // Without a type, the limit falls back to software pacing.
        let o = p("write bw -c DC --rate_limit 1 --rate_units M").unwrap();
        assert_eq!(o.rate.map(|r| r.kind), Some(RateKind::Sw));
    }

    #[test]
    fn perftest_defaults_and_flags() {
        let o = p("write bw -d rxe0 -x 1 127.0.0.1").unwrap();
        assert_eq!((o.size, o.iters, o.tx_depth, o.cq_mod), (65536, 5000, 128, 1));
        assert_eq!(o.server.as_deref(), Some("127.0.0.1"));
        assert_eq!(o.gid_index, Some(1));
        let o = p("write bw -s 64 -Q 16 -l 4 -q 2 --threads 2 --report_gbits --cq-mod=8").unwrap();
        assert_eq!((o.size, o.cq_mod, o.post_list, o.qps, o.threads, o.gbits), (64, 8, 4, 2, 2, true));
        let o = p("write lat").unwrap();
        assert_eq!((o.size, o.iters, o.tx_depth), (2, 1000, 1));
        let o = p("write bw -a --max-size 64").unwrap();
        assert_eq!(sizes(&o), vec![2, 4, 8, 16, 32, 64]);
        assert_eq!(p("atomic lat").unwrap().size, 8);
    }

    #[test]
    fn bad_input_is_explained() {
        assert!(p("wrte bw").unwrap_err().contains("unknown test"));
        assert!(p("write bw -s x").unwrap_err().contains("not a valid number"));
        assert!(p("write lat -q 2").unwrap_err().contains("one QP"));
        assert!(p("write bw --bogus").unwrap_err().contains("unknown flag"));
        assert!(p("atomic bw -s 64").unwrap_err().contains("8 bytes"));
        assert!(p("write bw -q 1 --threads 2").unwrap_err().contains("QPs"));
        assert!(p("write bw -s").unwrap_err().contains("-s"));
    }

    #[test]
    fn transports_on_the_tests_perftest_allows_them_on() {
        for ok in
            ["write bw -c UC", "write lat -c UC", "send bw -c UC", "send lat -cUC", "send bw -c UD", "send lat -c UD"]
        {
            assert!(p(ok).is_ok(), "{ok}");
        }
        assert_eq!(p("send lat --connection=UD").unwrap().conn, Conn::Ud);
        let e = p("read bw -c UC").unwrap_err();
        assert!(e.starts_with("-c UC: read bw needs RC (UC carries RDMA WRITE and SEND only"), "{e}");
        assert!(p("atomic lat -c UC").unwrap_err().contains("atomic lat needs RC"));
        let e = p("write lat -c UD").unwrap_err();
        assert!(e.starts_with("-c UD: write lat needs RC or UC (UD carries SEND only: send bw, send lat)"), "{e}");
        assert!(p("read bw -c UD").unwrap_err().contains("read bw needs RC ("));
        assert!(p("send bw -c UC -R").unwrap_err().contains("-c UC with -R"));
        let ud_cm = p("send lat -c UD -R").unwrap();
        assert!(ud_cm.rdma_cm && ud_cm.conn == Conn::Ud);
        assert!(p("send bw -c UD -R -b").is_ok());
        assert!(p("write bw -c UD -R").unwrap_err().contains("write bw needs RC or UC"));
        assert_eq!(p("send bw -c XRC").unwrap().conn, Conn::Xrc);
        assert!(p("send bw -c SRD").unwrap_err().contains("RC, UC, UD, XRC and DC"));
        assert!(p("send bw -c rc").unwrap_err().contains("expected RC, UC, UD"));
    }

    #[test]
    fn unreliable_transports_take_perftest_defaults() {
        // One receive per message up front (no RNR retry to wait for re-posting).
        assert_eq!(p("send bw -c UD -n 300").unwrap().rx_depth, 300);
        assert_eq!(p("send bw -c UC").unwrap().rx_depth, 5000);
        assert_eq!(p("send bw -c UC -n 100000").unwrap().rx_depth, 16000);
        assert_eq!(p("send bw -c UC -n 300 -r 64").unwrap().rx_depth, 64);
        assert_eq!(p("send bw -c UD -D 2").unwrap().rx_depth, 512);
        assert_eq!(p("send bw -n 300").unwrap().rx_depth, 512);
        // UD: inline capped, CQ moderation kept for the (later capped) default size.
        assert_eq!(p("send lat -c UD -I 4000").unwrap().inline, MAX_INLINE_UD);
        assert_eq!(p("send bw -c UD").unwrap().cq_mod, 100);
        assert_eq!(p("send bw -c UC").unwrap().cq_mod, 1);
    }

    #[test]
    fn ud_messages_fit_the_path_mtu() {
        let mut o = p("send bw -c UD").unwrap();
        assert!(fit_ud(&mut o, 1024).unwrap().unwrap().contains("1024 bytes"));
        assert_eq!(o.size, 1024);
        let mut o = p("send lat -c UD -a").unwrap();
        assert!(fit_ud(&mut o, 4096).unwrap().is_some());
        assert_eq!(sizes(&o).last(), Some(&4096));
        let mut o = p("send bw -c UD -s 2048").unwrap();
        let e = fit_ud(&mut o, 1024).unwrap_err();
        assert!(e.starts_with("-s 2048 with -c UD:") && e.contains("give -s 1024 or less"), "{e}");
        let mut o = p("send bw -c UD -s 1024").unwrap();
        assert_eq!(fit_ud(&mut o, 1024), Ok(None));
        let mut o = p("send bw -c UC -s 65536").unwrap();
        assert_eq!(fit_ud(&mut o, 1024), Ok(None));
        assert_eq!(o.size, 65536);
    }

    #[test]
    fn events_where_perftest_takes_them() {
        for t in ["read bw", "send bw", "atomic bw", "read lat", "send lat", "atomic lat"] {
            assert!(p(&format!("{t} -e")).unwrap().events, "{t}");
        }
        assert!(p("send lat --events").unwrap().events);
        for t in ["write bw -e", "write lat --events"] {
            let e = p(t).unwrap_err();
            assert!(e.contains("-e") && e.contains("WRITE") && e.contains("read, send and atomic"), "{e}");
        }
        for t in ["read bw -e -D 2", "read lat -e -D 2", "read bw -e --run_infinitely"] {
            let e = p(t).unwrap_err();
            assert!(e.contains("-e") && e.contains("-D") && e.contains("use -n"), "{e}");
        }
        // -D on every latency test, the ping-pongs included.
        for t in ["write lat -D 2", "send lat -s 64 -D 2", "read lat -D 1", "atomic lat -D 3"] {
            assert!(p(t).unwrap().duration.is_some(), "{t}");
        }
        // perftest keeps CQ moderation with events, above 8 KiB too.
        assert_eq!(p("send bw -e -s 65536").unwrap().cq_mod, 100);
        assert_eq!(p("send bw -s 65536").unwrap().cq_mod, 1);
    }

    #[test]
    fn durations_are_finite_and_bounded() {
        for bad in ["0", "-1", "nan", "inf", "1e20"] {
            let e = p(&format!("write lat -D {bad}")).unwrap_err();
            assert!(e.starts_with(&format!("-D {}", bad.parse::<f64>().unwrap())) && e.contains("at most"), "{e}");
        }
        assert_eq!(p("read lat -D 31536000").unwrap().duration, Some(31_536_000.0));
    }

    #[test]
    fn getopt_forms_as_perftest_takes_them() {
        for line in [
            "write bw -s64 -n100",
            "write bw -s 64 -n 100",
            "write bw --size=64 --iters=100",
            "write bw --size 64 --iters 100",
        ] {
            let o = p(line).unwrap();
            assert_eq!((o.size, o.iters), (64, 100), "{line}");
        }
        let o = p("write bw -as64 -x1 10.0.0.1").unwrap();
        assert!(o.all);
        assert_eq!((o.size, o.gid_index, o.server.as_deref()), (64, Some(1), Some("10.0.0.1")));
    }

    #[test]
    fn srq_odp_and_xrc_where_perftest_takes_them() {
        let o = p("send bw --use-srq -q 4 -r 64").unwrap();
        assert!(o.use_srq && o.rx_depth == 64);
        assert!(p("send lat --use-srq").unwrap().use_srq);
        assert!(p("send bw -c UD --use-srq -n 300").unwrap().use_srq);
        for t in ["read bw", "write lat", "atomic bw"] {
            let e = p(&format!("{t} --use-srq")).unwrap_err();
            assert!(e.starts_with(&format!("--use-srq: {t} takes no receives")), "{e}");
        }
        let e = p("send bw --use-srq -q 8 -r 4").unwrap_err();
        assert!(e.contains("fewer than one per QP; give -r 8 or more"), "{e}");
        assert!(p("send lat --use-srq -R -c UD").unwrap_err().contains("drop --use-srq or -R"));
        assert!(p("send bw --use-srq -R").unwrap().use_srq);
        for t in ["write bw", "read lat", "send bw -c UD"] {
            assert!(p(&format!("{t} --odp")).unwrap().odp, "{t}");
        }
        assert!(p("atomic bw --odp").unwrap_err().contains("not on atomic tests"));
        assert!(p("write bw --odp -c UC").unwrap_err().contains("use -c RC"));
        for t in ["write bw", "read bw", "send bw", "atomic bw"] {
            assert_eq!(p(&format!("{t} -c XRC -q 2")).unwrap().conn, Conn::Xrc, "{t}");
        }
        // perftest turns the SRQ on with XRC; the XRC SRQ takes the receives.
        assert!(!p("send bw -c XRC --use-srq").unwrap().use_srq);
        assert!(p("write lat -c XRC").unwrap_err().contains("one-way bandwidth tests"));
        assert!(p("send bw -c XRC -b").unwrap_err().contains("send bw -b"));
        assert!(p("write bw -c XRC -R").unwrap_err().contains("rdma_cm makes no XRC"));
    }

    #[test]
    fn rate_limits_as_perftest_parses_them() {
        let o = p("write bw --rate_limit 10 --rate_units M --rate_limit_type SW --burst_size 16").unwrap();
        let r = o.rate.unwrap();
        assert_eq!((r.value, r.units, r.kind, r.kind_given, r.burst), (10.0, RateUnits::MiBps, RateKind::Sw, true, 16));
        // perftest's defaults: Gb/s, the HW limiter (falling back to SW), bursts of the tx depth.
        let r = p("send bw --rate_limit=2.5 -t 64").unwrap().rate.unwrap();
        assert_eq!((r.units, r.kind, r.kind_given, r.burst), (RateUnits::Gbps, RateKind::Hw, false, 64));
        assert_eq!(
            p("read bw --rate_limit 1000 --rate_units p --rate_limit_type SW").unwrap().rate.unwrap().units,
            RateUnits::Pps
        );
        assert!(p("write bw").unwrap().rate.is_none());
        let bad = [
            ("write lat --rate_limit 1", "write lat is a latency test"),
            ("write bw --rate_limit 0", "give a rate above 0"),
            ("write bw --rate_limit -3", "give a rate above 0"),
            ("write bw --rate_limit 1 --rate_units G", "expected M (MiB/s), g (Gb/s) or p"),
            ("write bw --rate_limit 1 --rate_limit_type PP", "raw Ethernet"),
            ("write bw --rate_limit 1 --rate_limit_type sw", "expected SW or HW"),
            ("atomic bw --rate_limit 1 --rate_limit_type SW", "not on atomic bw"),
            ("send bw -b --rate_limit 1 --rate_limit_type SW", "not on send bw -b"),
            ("read bw -e --rate_limit 1 --rate_limit_type SW", "drop -e"),
            ("write bw -R --rate_limit 1", "HW with -R"),
            ("write bw --run_infinitely --rate_limit 1", "use -D"),
            ("write bw --burst_size 8", "--burst_size without --rate_limit"),
            ("write bw --rate_units M", "--rate_units without --rate_limit"),
        ];
        for (line, want) in bad {
            let e = p(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
        assert!(p("atomic bw --rate_limit 1 --rate_limit_type HW").is_ok());
        assert!(p("write bw -R --rate_limit 1 --rate_limit_type SW").is_ok());
    }

    #[test]
    fn non_utf8_is_an_error_not_a_panic() {
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(vec![b'r', 0xff, b'x']);
        let e = parse(["write".into(), "bw".into(), "-d".into(), bad.clone()]).unwrap_err();
        assert!(e.contains("not valid UTF-8"), "{e}");
        let e = parse([std::ffi::OsString::from("write"), "bw".into(), bad.clone()]).unwrap_err();
        assert!(e.contains("not valid UTF-8"), "{e}");
        let e = parse([bad]).unwrap_err();
        assert!(e.contains("not valid UTF-8"), "{e}");
    }
}
