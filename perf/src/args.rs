//! Command-line flags: perftest's names and defaults, plus this tool's own.

use std::path::PathBuf;

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
    pub all: bool,
    pub max_size: usize,
    pub iters: u64,
    pub duration: Option<f64>,
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
}

pub const USAGE: &str = "\
usage: rrddmma-perf {write,read,send,atomic} {bw,lat} [FLAGS] [SERVER]
       rrddmma-perf plot IN.csv OUT.svg [TITLE]
Without SERVER this side is the server and waits for a client on the TCP port.
perftest's flags:
  -d, --ib-dev NAME        device (default: the first one)
  -i, --ib-port N          port (default 1)
  -x, --gid-index N        GID index (default on RoCE: the RoCE v2 GID)
  -s, --size BYTES         message size (bw 65536, lat 2, atomic 8)
  -a, --all                sweep sizes 2 .. 2^23 (see --max-size)
  -n, --iters N            iterations (bw 5000, lat 1000)
  -D, --duration SECS      run for SECS seconds instead of -n iterations
  -t, --tx-depth N         send queue depth (bw 128, lat 1)
  -r, --rx-depth N         receive queue depth for send tests (512)
  -l, --post_list N        requests per doorbell (1)
  -Q, --cq-mod N           one signaled request every N (100; 1 above 8 KiB unless -a/-Q)
  -q, --qp N               queue pairs (1)
  -I, --inline_size BYTES  inline payloads up to BYTES (0)
  -m, --mtu BYTES          path MTU (default: the port's active MTU)
  -A, --atomic_type T      FETCH_AND_ADD (default) or CMP_AND_SWAP
  -p, --port N             TCP port of the exchange (18515)
      --report_gbits       report Gb/s instead of MiB/s
      --dont_xchg_versions skip the version, system-data and MTU exchange
This tool's own:
      --threads N          threads driving the QPs (bw; QPs split round-robin)
      --max-size BYTES     largest size of a -a sweep (2^23)
      --json FILE          results as JSON
      --csv FILE           results as CSV
      --svg FILE           plot of the sweep (bandwidth or median latency vs size)
      --no-progress        no progress bar on sweeps";

fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse().map_err(|_| format!("{flag}: {v:?} is not a valid number"))
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Opts, String> {
    let mut it = args.iter().cloned();
    let verb = match it.next().as_deref() {
        Some("write") => Verb::Write,
        Some("read") => Verb::Read,
        Some("send") => Verb::Send,
        Some("atomic") => Verb::Atomic,
        Some(other) => return Err(format!("unknown test {other:?}: expected write, read, send or atomic")),
        None => return Err("missing the test name".into()),
    };
    let test = match it.next().as_deref() {
        Some("bw") => Test::Bw,
        Some("lat") => Test::Lat,
        Some(other) => return Err(format!("unknown kind {other:?}: expected bw or lat")),
        None => return Err("missing bw or lat after the test name".into()),
    };
    let mut o = Opts {
        verb,
        test,
        device: None,
        ib_port: 1,
        gid_index: None,
        size: 0,
        all: false,
        max_size: 1 << 23,
        iters: if test == Test::Bw { 5000 } else { 1000 },
        duration: None,
        tx_depth: 0,
        rx_depth: 512,
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
    };
    let mut cq_mod_set = false;
    while let Some(a) = it.next() {
        // `--flag=value` as well as `--flag value`.
        let (flag, inline_val) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut val = || inline_val.clone().or_else(|| it.next());
        match flag.as_str() {
            "-d" | "--ib-dev" => o.device = Some(val().ok_or("-d needs a device name")?),
            "-i" | "--ib-port" => o.ib_port = num(&flag, val())?,
            "-x" | "--gid-index" => o.gid_index = Some(num(&flag, val())?),
            "-s" | "--size" => o.size = num(&flag, val())?,
            "-a" | "--all" => o.all = true,
            "-n" | "--iters" => o.iters = num(&flag, val())?,
            "-D" | "--duration" => o.duration = Some(num(&flag, val())?),
            "-t" | "--tx-depth" => o.tx_depth = num(&flag, val())?,
            "-r" | "--rx-depth" => o.rx_depth = num(&flag, val())?,
            "-l" | "--post_list" => o.post_list = num(&flag, val())?,
            "-Q" | "--cq-mod" | "--cq_mod" => {
                o.cq_mod = num(&flag, val())?;
                cq_mod_set = true;
            }
            "-q" | "--qp" => o.qps = num(&flag, val())?,
            "-I" | "--inline_size" => o.inline = num(&flag, val())?,
            "-m" | "--mtu" => o.mtu = Some(num(&flag, val())?),
            "-A" | "--atomic_type" => match val().as_deref() {
                Some("FETCH_AND_ADD") => o.cas = false,
                Some("CMP_AND_SWAP") => o.cas = true,
                v => return Err(format!("-A: {v:?} is not FETCH_AND_ADD or CMP_AND_SWAP")),
            },
            "-p" | "--port" => o.tcp_port = num(&flag, val())?,
            "-F" | "--CPU-freq" => {}
            "--report_gbits" => o.gbits = true,
            "--dont_xchg_versions" => o.dont_xchg_versions = true,
            "--threads" => o.threads = num(&flag, val())?,
            "--max-size" => o.max_size = num(&flag, val())?,
            "--json" => o.json = Some(val().ok_or("--json needs a file")?.into()),
            "--csv" => o.csv = Some(val().ok_or("--csv needs a file")?.into()),
            "--svg" => o.svg = Some(val().ok_or("--svg needs a file")?.into()),
            "--no-progress" => o.progress = false,
            f if f.starts_with('-') => return Err(format!("unknown flag {f}")),
            _ if o.server.is_none() => o.server = Some(a),
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    if o.verb == Verb::Atomic {
        if o.size != 0 && o.size != 8 {
            return Err("atomic operations are 8 bytes: -s must be 8".into());
        }
        o.size = 8;
        o.all = false;
    } else if o.size == 0 {
        o.size = if test == Test::Bw { 65536 } else { 2 };
    }
    if o.tx_depth == 0 {
        o.tx_depth = if test == Test::Bw { 128 } else { 1 };
    }
    if o.size == 0 || o.iters == 0 || o.qps == 0 || o.threads == 0 || o.post_list == 0 || o.cq_mod == 0 {
        return Err("-s, -n, -q, --threads, -l and -Q must be at least 1".into());
    }
    if o.duration.is_some_and(|d| d.is_nan() || d <= 0.0) {
        return Err("-D must be a positive number of seconds".into());
    }
    if o.all && o.duration.is_some() {
        return Err("-a and -D cannot be combined".into());
    }
    if test == Test::Lat && (o.qps != 1 || o.threads != 1 || o.post_list != 1) {
        return Err("latency tests use one QP, one thread and no post list".into());
    }
    if o.threads > o.qps {
        return Err(format!("--threads {} needs at least as many QPs (-q)", o.threads));
    }
    if o.post_list > o.tx_depth {
        return Err(format!("-l {} exceeds the tx depth -t {}", o.post_list, o.tx_depth));
    }
    if o.size > 8192 && !o.all && !cq_mod_set {
        o.cq_mod = 1;
    }
    // The signaled request must fit in the queue: posting stops once fewer
    // than a post list's worth of slots is free.
    o.cq_mod = o.cq_mod.min(o.tx_depth - o.post_list + 1);
    if test == Test::Lat && o.duration.is_some() {
        return Err("latency tests take -n iterations; -D is for bandwidth tests".into());
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
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
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
    }
}
