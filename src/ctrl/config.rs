//! The cluster description: who the ranks are, where the coordinator listens,
//! and this process's rank, from a TOML file, the environment, or the launcher.
//!
//! # File
//! ```toml
//! # rank 0 is the coordinator; its entry is where it listens
//! hosts = ["10.0.0.1:18650", "10.0.0.2:18650", "10.0.0.3:18650"]
//! secret = "experiment-42"        # optional: strangers are rejected
//! devices = ["mlx5_0", "mlx5_0", "mlx5_1"]   # optional, one per rank
//! join_timeout_ms = 30000
//! op_timeout_ms = 10000
//! ```
//! Keys: `hosts`, `coordinator`, `rank`, `size`, `secret`, `devices`,
//! `join_timeout_ms`, `op_timeout_ms`, `handshake_timeout_ms`, `max_frame`,
//! optionally under a `[cluster]` table. The parser takes this subset of TOML
//! (strings, integers, arrays of strings, comments) and rejects unknown keys,
//! so a typo is an error rather than a silent default.
//!
//! # Environment
//! `RRDDMMA_CLUSTER` names a file to start from; then `RRDDMMA_HOSTS`
//! (comma-separated), `RRDDMMA_COORDINATOR`, `RRDDMMA_RANK`, `RRDDMMA_SIZE`,
//! `RRDDMMA_SECRET`, `RRDDMMA_DEVICES` and `RRDDMMA_{JOIN,OP}_TIMEOUT_MS`
//! override it.
//!
//! # Rank and size
//! In order: an explicit `rank`; Open MPI's `OMPI_COMM_WORLD_RANK`/`_SIZE`;
//! PMI's `PMI_RANK`/`PMI_SIZE`; SLURM's `SLURM_PROCID`/`SLURM_NTASKS`; and
//! last, the one `hosts` entry whose address is local to this machine. The
//! size is the explicit `size`, else the launcher's, else the number of hosts;
//! sources that disagree are an error.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;
use std::time::Duration;

use super::error::{Error, Result};

/// Smallest `max_frame` accepted: room for every handshake frame with margin.
pub const MIN_FRAME: u32 = 1024;

/// Default TCP port of the coordinator.
pub const DEFAULT_PORT: u16 = 18650;

/// A cluster description, before this process's rank is resolved.
///
/// | field | default |
/// |---|---|
/// | `hosts`, `devices` | empty |
/// | `coordinator`, `rank`, `size`, `secret` | `None` (rank and size then come from the launcher or the local addresses) |
/// | `join_timeout` | 60 s |
/// | `op_timeout` | 30 s (per collective; `Session::barrier_within` and the other `_within` forms take their own) |
/// | `handshake_timeout` | 5 s |
/// | `max_frame` | 16 MiB |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `host:port` of every rank, rank 0 first (the coordinator listens on its entry).
    pub hosts: Vec<String>,
    /// Where the coordinator listens, when `hosts` is not given.
    pub coordinator: Option<String>,
    /// This process's rank, if fixed here.
    pub rank: Option<u32>,
    /// Number of ranks, if fixed here.
    pub size: Option<u32>,
    /// Shared secret; members and coordinator must all have the same one.
    pub secret: Option<Vec<u8>>,
    /// RDMA device of each rank (optional; empty means each rank's default).
    pub devices: Vec<String>,
    /// How long joining the session may take.
    pub join_timeout: Duration,
    /// How long each collective may take.
    pub op_timeout: Duration,
    /// How long a new connection may take to prove itself at the coordinator.
    pub handshake_timeout: Duration,
    /// Largest frame payload, in bytes.
    pub max_frame: u32,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            hosts: Vec::new(),
            coordinator: None,
            rank: None,
            size: None,
            secret: None,
            devices: Vec::new(),
            join_timeout: Duration::from_secs(60),
            op_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(5),
            max_frame: 16 << 20,
        }
    }
}

/// Where a resolved rank came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankSource {
    /// The configuration (file or `RRDDMMA_RANK`).
    Config,
    /// Open MPI's `OMPI_COMM_WORLD_RANK`.
    OpenMpi,
    /// PMI's `PMI_RANK`.
    Pmi,
    /// SLURM's `SLURM_PROCID`.
    Slurm,
    /// The only `hosts` entry with a local address.
    LocalAddress,
}

/// A cluster description with this process's place in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// This process's rank.
    pub rank: u32,
    /// Number of ranks.
    pub size: u32,
    /// Where the coordinator listens.
    pub coordinator: SocketAddr,
    /// Where the rank came from.
    pub rank_source: RankSource,
    /// This rank's RDMA device, if the configuration names one.
    pub device: Option<String>,
}

fn cfg_err(msg: impl Into<String>) -> Error {
    Error::Config(msg.into())
}

impl ClusterConfig {
    /// Parses a TOML description (see the module docs for the keys).
    pub fn from_toml(text: &str) -> Result<ClusterConfig> {
        let mut c = ClusterConfig::default();
        for (line_no, key, value) in toml_subset(text)? {
            let at = |m: &str| cfg_err(format!("line {line_no}: `{key}` {m}"));
            let int = |v: &Value| match v {
                Value::Int(i) => Ok(*i),
                _ => Err(at("must be an integer")),
            };
            let string = |v: &Value| match v {
                Value::Str(s) => Ok(s.clone()),
                _ => Err(at("must be a string")),
            };
            let strings = |v: &Value| match v {
                Value::List(l) => Ok(l.clone()),
                _ => Err(at("must be an array of strings")),
            };
            let u32_of = |v: &Value| u32::try_from(int(v)?).map_err(|_| at("is out of range"));
            let ms = |v: &Value| Ok::<_, Error>(Duration::from_millis(int(v)?));
            match key.as_str() {
                "hosts" => c.hosts = strings(&value)?,
                "coordinator" => c.coordinator = Some(string(&value)?),
                "rank" => c.rank = Some(u32_of(&value)?),
                "size" => c.size = Some(u32_of(&value)?),
                "secret" => c.secret = Some(string(&value)?.into_bytes()),
                "devices" => c.devices = strings(&value)?,
                "join_timeout_ms" => c.join_timeout = ms(&value)?,
                "op_timeout_ms" => c.op_timeout = ms(&value)?,
                "handshake_timeout_ms" => c.handshake_timeout = ms(&value)?,
                "max_frame" => c.max_frame = u32_of(&value)?,
                _ => return Err(at("is not a known key")),
            }
        }
        Ok(c)
    }

    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<ClusterConfig> {
        let text =
            std::fs::read_to_string(path).map_err(|e| cfg_err(format!("cannot read {}: {e}", path.display())))?;
        ClusterConfig::from_toml(&text).map_err(|e| cfg_err(format!("{}: {e}", path.display())))
    }

    /// The description from the process environment (see the module docs).
    pub fn from_env() -> Result<ClusterConfig> {
        ClusterConfig::from_vars(&|k| std::env::var(k).ok())
    }

    /// [`ClusterConfig::from_env`] over any variable lookup.
    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<ClusterConfig> {
        let mut c = match var("RRDDMMA_CLUSTER") {
            Some(p) => ClusterConfig::from_file(Path::new(&p))?,
            None => ClusterConfig::default(),
        };
        let list = |s: String| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from).collect();
        let num = |k: &str, s: String| {
            s.trim().parse::<u64>().map_err(|_| cfg_err(format!("{k}={s:?} is not a non-negative integer")))
        };
        let small = |k: &str, s: String| {
            num(k, s).and_then(|n| u32::try_from(n).map_err(|_| cfg_err(format!("{k}={n} is out of range"))))
        };
        if let Some(v) = var("RRDDMMA_HOSTS") {
            c.hosts = list(v);
        }
        if let Some(v) = var("RRDDMMA_COORDINATOR") {
            c.coordinator = Some(v);
        }
        if let Some(v) = var("RRDDMMA_RANK") {
            c.rank = Some(small("RRDDMMA_RANK", v)?);
        }
        if let Some(v) = var("RRDDMMA_SIZE") {
            c.size = Some(small("RRDDMMA_SIZE", v)?);
        }
        if let Some(v) = var("RRDDMMA_SECRET") {
            c.secret = Some(v.into_bytes());
        }
        if let Some(v) = var("RRDDMMA_DEVICES") {
            c.devices = list(v);
        }
        if let Some(v) = var("RRDDMMA_JOIN_TIMEOUT_MS") {
            c.join_timeout = Duration::from_millis(num("RRDDMMA_JOIN_TIMEOUT_MS", v)?);
        }
        if let Some(v) = var("RRDDMMA_OP_TIMEOUT_MS") {
            c.op_timeout = Duration::from_millis(num("RRDDMMA_OP_TIMEOUT_MS", v)?);
        }
        Ok(c)
    }

    /// Resolves this process's rank, the size and the coordinator, reading
    /// launcher variables through `var` and checking local addresses.
    pub fn resolve(&self, var: &dyn Fn(&str) -> Option<String>) -> Result<Resolved> {
        let pair = |rank_key: &str, size_key: &str| -> Result<Option<(u32, u32)>> {
            match (var(rank_key), var(size_key)) {
                (None, _) => Ok(None),
                (Some(r), s) => {
                    let r: u32 = r.trim().parse().map_err(|_| cfg_err(format!("{rank_key}={r:?} is not a rank")))?;
                    let s = s.ok_or_else(|| cfg_err(format!("{rank_key} is set but {size_key} is not")))?;
                    let s: u32 = s.trim().parse().map_err(|_| cfg_err(format!("{size_key}={s:?} is not a size")))?;
                    Ok(Some((r, s)))
                }
            }
        };
        let mut launcher = None;
        for src in [RankSource::OpenMpi, RankSource::Pmi, RankSource::Slurm] {
            let (rk, sk) = launcher_vars(src);
            if let Some((r, s)) = pair(rk, sk)? {
                launcher = Some((src, r, s));
                break;
            }
        }

        let hosts_len = u32::try_from(self.hosts.len()).map_err(|_| cfg_err("too many hosts"))?;
        let size = match (self.size, &launcher, hosts_len) {
            (Some(s), _, _) => s,
            (None, Some((_, _, s)), _) => *s,
            (None, None, n) if n > 0 => n,
            _ => return Err(cfg_err("the cluster size is unknown: give `size`, `hosts`, or start under srun/mpirun")),
        };
        if size == 0 {
            return Err(cfg_err("the cluster size is 0"));
        }
        if self.max_frame < MIN_FRAME {
            return Err(cfg_err(format!(
                "max_frame {} is below the {MIN_FRAME} bytes a handshake needs",
                self.max_frame
            )));
        }
        if let Some((src, _, s)) = launcher {
            if s != size {
                let var = launcher_vars(src).1;
                return Err(cfg_err(format!("{var} says size {s} but the configuration says {size}")));
            }
        }
        if hosts_len > 0 && hosts_len != size {
            return Err(cfg_err(format!("{hosts_len} hosts listed for a cluster of size {size}")));
        }
        if !self.devices.is_empty() && self.devices.len() != size as usize {
            return Err(cfg_err(format!("{} devices listed for a cluster of size {size}", self.devices.len())));
        }

        let (rank, rank_source) = match (self.rank, launcher) {
            (Some(r), _) => (r, RankSource::Config),
            (None, Some((src, r, _))) => (r, src),
            (None, None) => (self.local_rank()?, RankSource::LocalAddress),
        };
        if rank >= size {
            return Err(cfg_err(format!("rank {rank} ({rank_source:?}) is not below the size {size}")));
        }

        let coord_text = match (&self.coordinator, self.hosts.first()) {
            (Some(c), _) => c.clone(),
            (None, Some(h)) => h.clone(),
            (None, None) => {
                return Err(cfg_err("no coordinator address: give `hosts` or `coordinator` (RRDDMMA_COORDINATOR)"))
            }
        };
        let coordinator = resolve_addr(&coord_text)?;
        let device = self.devices.get(rank as usize).cloned();
        Ok(Resolved { rank, size, coordinator, rank_source, device })
    }

    /// The rank of the only `hosts` entry whose address belongs to this machine.
    fn local_rank(&self) -> Result<u32> {
        if self.hosts.is_empty() {
            return Err(cfg_err("no rank given and no launcher found: set `rank` (RRDDMMA_RANK) or `hosts`"));
        }
        let mut local = Vec::new();
        for (i, h) in self.hosts.iter().enumerate() {
            let addr = resolve_addr(h)?;
            if UdpSocket::bind(SocketAddr::new(addr.ip(), 0)).is_ok() {
                local.push(i as u32);
            }
        }
        match local.as_slice() {
            [one] => Ok(*one),
            [] => {
                Err(cfg_err(format!("none of the hosts {:?} is an address of this machine; set the rank", self.hosts)))
            }
            many => Err(cfg_err(format!(
                "hosts of ranks {many:?} are all addresses of this machine; set the rank (RRDDMMA_RANK)"
            ))),
        }
    }
}

/// The rank and size variables of a launcher.
fn launcher_vars(src: RankSource) -> (&'static str, &'static str) {
    match src {
        RankSource::OpenMpi => ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        RankSource::Pmi => ("PMI_RANK", "PMI_SIZE"),
        RankSource::Slurm => ("SLURM_PROCID", "SLURM_NTASKS"),
        RankSource::Config | RankSource::LocalAddress => ("rank", "size"),
    }
}

/// `host:port` or a bare host (with [`DEFAULT_PORT`]) to one socket address.
pub fn resolve_addr(text: &str) -> Result<SocketAddr> {
    let with_port = if text.parse::<SocketAddr>().is_ok()
        || text
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && !h.ends_with(':') && p.parse::<u16>().is_ok() && !h.contains(':'))
    {
        text.to_string()
    } else if text.contains(':') && !text.starts_with('[') {
        format!("[{text}]:{DEFAULT_PORT}")
    } else {
        format!("{text}:{DEFAULT_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| cfg_err(format!("cannot resolve {text:?}: {e}")))?
        .next()
        .ok_or_else(|| cfg_err(format!("{text:?} resolves to no address")))
}

#[derive(Debug)]
enum Value {
    Str(String),
    Int(u64),
    List(Vec<String>),
}

/// The `key = value` pairs of the supported TOML subset, with line numbers.
fn toml_subset(text: &str) -> Result<Vec<(usize, String, Value)>> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((no, line)) = lines.next() {
        let line = strip_comment(line);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') && !line.contains('=') {
            if line == "[cluster]" {
                continue;
            }
            return Err(cfg_err(format!("line {no}: only a [cluster] table is understood, not {line}")));
        }
        let (key, rest) =
            line.split_once('=').ok_or_else(|| cfg_err(format!("line {no}: expected `key = value`, got {line:?}")))?;
        let key = key.trim().to_string();
        let mut value = rest.trim().to_string();
        // Arrays may span lines.
        if value.starts_with('[') {
            while !array_closed(&value) {
                let (_, more) = lines.next().ok_or_else(|| cfg_err(format!("line {no}: unterminated array")))?;
                value.push(' ');
                value.push_str(strip_comment(more).trim());
            }
        }
        out.push((no, key.clone(), parse_value(&value).map_err(|m| cfg_err(format!("line {no}: `{key}`: {m}")))?));
    }
    Ok(out)
}

fn strip_comment(line: &str) -> &str {
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            '\\' if in_str && !escaped => {
                escaped = true;
                continue;
            }
            '"' if !escaped => in_str = !in_str,
            '#' if !in_str => return &line[..i],
            _ => {}
        }
        escaped = false;
    }
    line
}

fn array_closed(v: &str) -> bool {
    let mut in_str = false;
    let mut escaped = false;
    for c in v.chars() {
        match c {
            '\\' if in_str && !escaped => {
                escaped = true;
                continue;
            }
            '"' if !escaped => in_str = !in_str,
            ']' if !in_str => return true,
            _ => {}
        }
        escaped = false;
    }
    false
}

fn parse_string(v: &str) -> std::result::Result<(String, &str), String> {
    let body = v.strip_prefix('"').ok_or("a string must start with a double quote")?;
    let mut s = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((s, &body[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '"')) => s.push('"'),
                Some((_, '\\')) => s.push('\\'),
                Some((_, 'n')) => s.push('\n'),
                Some((_, 't')) => s.push('\t'),
                _ => return Err("unsupported escape in string".into()),
            },
            c => s.push(c),
        }
    }
    Err("unterminated string".into())
}

fn parse_value(v: &str) -> std::result::Result<Value, String> {
    if v.starts_with('"') {
        let (s, rest) = parse_string(v)?;
        if !rest.trim().is_empty() {
            return Err(format!("unexpected {rest:?} after the string"));
        }
        return Ok(Value::Str(s));
    }
    if let Some(inner) = v.strip_prefix('[') {
        let mut items = Vec::new();
        let mut rest = inner.trim_start();
        loop {
            if let Some(after) = rest.strip_prefix(']') {
                if !after.trim().is_empty() {
                    return Err(format!("unexpected {after:?} after the array"));
                }
                return Ok(Value::List(items));
            }
            let (s, r) = parse_string(rest).map_err(|e| format!("array item: {e}"))?;
            items.push(s);
            rest = r.trim_start();
            if let Some(r) = rest.strip_prefix(',') {
                rest = r.trim_start();
            } else if !rest.starts_with(']') {
                return Err("array items must be separated by commas".into());
            }
        }
    }
    v.replace('_', "").parse::<u64>().map(Value::Int).map_err(|_| format!("{v:?} is not a string, integer or array"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn parses_the_documented_file() {
        let c = ClusterConfig::from_toml(
            "# comment\n[cluster]\nhosts = [\"10.0.0.1:1\", # first\n  \"10.0.0.2:2\",\n  \"h#3:3\"]\n\
             secret = \"s3\\\"cret # not a comment\"\nrank = 2\njoin_timeout_ms = 1_500\nmax_frame = 4096\n",
        )
        .unwrap();
        assert_eq!(c.hosts, ["10.0.0.1:1", "10.0.0.2:2", "h#3:3"]);
        assert_eq!(c.secret.as_deref(), Some(&b"s3\"cret # not a comment"[..]));
        assert_eq!(c.rank, Some(2));
        assert_eq!(c.join_timeout, Duration::from_millis(1500));
        assert_eq!(c.max_frame, 4096);
    }

    #[test]
    fn bad_files_name_the_line_and_key() {
        let e = ClusterConfig::from_toml("hosts = [\"a\"]\nrnak = 1\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("rnak"), "{e}");
        let e = ClusterConfig::from_toml("rank = \"one\"").unwrap_err().to_string();
        assert!(e.contains("rank") && e.contains("integer"), "{e}");
        let e = ClusterConfig::from_toml("hosts = [\"a\" \"b\"]").unwrap_err().to_string();
        assert!(e.contains("commas"), "{e}");
        let e = ClusterConfig::from_toml("[servers]\n").unwrap_err().to_string();
        assert!(e.contains("[cluster]"), "{e}");
        assert!(ClusterConfig::from_toml("hosts = [\"a\",\n").is_err());
        assert!(ClusterConfig::from_toml("size = 99999999999").is_err());
    }

    #[test]
    fn launchers_give_rank_and_size_in_order() {
        let c = ClusterConfig { coordinator: Some("127.0.0.1:7000".into()), ..Default::default() };
        let r = c.resolve(&vars(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4")])).unwrap();
        assert_eq!((r.rank, r.size, r.rank_source), (2, 4, RankSource::Slurm));
        let r = c.resolve(&vars(&[("PMI_RANK", "1"), ("PMI_SIZE", "3"), ("SLURM_PROCID", "0"), ("SLURM_NTASKS", "3")]));
        assert_eq!(r.unwrap().rank_source, RankSource::Pmi);
        let r = c
            .resolve(&vars(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "3"), ("PMI_RANK", "1")]))
            .unwrap();
        assert_eq!((r.rank, r.rank_source), (0, RankSource::OpenMpi));
        assert_eq!(r.coordinator, "127.0.0.1:7000".parse().unwrap());
        // Explicit rank wins; a size disagreement is an error.
        let c2 = ClusterConfig { rank: Some(1), ..c.clone() };
        let r = c2.resolve(&vars(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4")])).unwrap();
        assert_eq!((r.rank, r.rank_source), (1, RankSource::Config));
        let c3 = ClusterConfig { size: Some(5), ..c.clone() };
        let e = c3.resolve(&vars(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4")])).unwrap_err().to_string();
        assert!(e.contains("SLURM_NTASKS") && e.contains('5'), "{e}");
        let e = c.resolve(&vars(&[("PMI_RANK", "1")])).unwrap_err().to_string();
        assert!(e.contains("PMI_SIZE"), "{e}");
        let e = c.resolve(&vars(&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")])).unwrap_err().to_string();
        assert!(e.contains("rank 4"), "{e}");
        let e = c.resolve(&vars(&[])).unwrap_err().to_string();
        assert!(e.contains("size is unknown"), "{e}");
        let tiny = ClusterConfig { max_frame: 100, size: Some(2), rank: Some(0), ..c.clone() };
        let e = tiny.resolve(&vars(&[])).unwrap_err().to_string();
        assert!(e.contains("max_frame 100"), "{e}");
    }

    #[test]
    fn rank_from_local_addresses() {
        // 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
        let c = ClusterConfig {
            hosts: vec!["192.0.2.1:7000".into(), "127.0.0.1:7000".into(), "192.0.2.3".into()],
            ..Default::default()
        };
        let r = c.resolve(&vars(&[])).unwrap();
        assert_eq!((r.rank, r.size, r.rank_source), (1, 3, RankSource::LocalAddress));
        assert_eq!(r.coordinator, "192.0.2.1:7000".parse().unwrap());
        let both = ClusterConfig { hosts: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()], ..Default::default() };
        let e = both.resolve(&vars(&[])).unwrap_err().to_string();
        assert!(e.contains("[0, 1]") && e.contains("RRDDMMA_RANK"), "{e}");
        let none = ClusterConfig { hosts: vec!["192.0.2.1:1".into()], ..Default::default() };
        assert!(none.resolve(&vars(&[])).unwrap_err().to_string().contains("none of the hosts"));
    }

    #[test]
    fn environment_overrides() {
        let c = ClusterConfig::from_vars(&vars(&[
            ("RRDDMMA_HOSTS", "10.0.0.1:5, 10.0.0.2:5"),
            ("RRDDMMA_RANK", "1"),
            ("RRDDMMA_SECRET", "k"),
            ("RRDDMMA_DEVICES", "rxe_a,rxe_b"),
            ("RRDDMMA_OP_TIMEOUT_MS", "250"),
        ]))
        .unwrap();
        assert_eq!(c.hosts.len(), 2);
        assert_eq!(c.op_timeout, Duration::from_millis(250));
        let r = c.resolve(&vars(&[])).unwrap();
        assert_eq!((r.rank, r.size, r.device.as_deref()), (1, 2, Some("rxe_b")));
        assert!(ClusterConfig::from_vars(&vars(&[("RRDDMMA_RANK", "-1")])).is_err());
    }

    #[test]
    fn addresses_take_a_default_port() {
        assert_eq!(resolve_addr("127.0.0.1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(resolve_addr("127.0.0.1:9").unwrap().port(), 9);
        assert_eq!(resolve_addr("::1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(resolve_addr("[::1]:9").unwrap().port(), 9);
        assert_eq!(resolve_addr("localhost:9").unwrap().port(), 9);
        assert!(resolve_addr("no such host.invalid").is_err());
    }
}
