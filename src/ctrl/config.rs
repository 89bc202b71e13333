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
//! optionally under a `[cluster]` table. The file is TOML 1.0, read by the
//! `toml` crate; on top of the format's own rules (no key twice, no leading
//! zeros) an unknown key and an empty `secret` are errors naming their line,
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
//!
//! # Coordinator
//! `coordinator`, else the first `hosts` entry, else, under `srun` (rank
//! from SLURM or PMI), the first host of `SLURM_STEP_NODELIST` at
//! [`DEFAULT_PORT`]: rank 0 runs there with block or cyclic distribution.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{Error, Result};
use super::hostlist;

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
///
/// `Debug` prints `<redacted>` in place of the secret.
///
/// A data struct, not an option struct: it is what a cluster file or the
/// environment says, and programs read it (the hosts, this rank's device,
/// the timeouts), so its fields are public. It is `#[non_exhaustive]`, so a
/// new key is not a breaking change: make one with [`ClusterConfig::from_toml`],
/// [`ClusterConfig::from_env`] or [`ClusterConfig::default`], then assign the
/// fields to change.
///
/// ```
/// use std::time::Duration;
/// use rrddmma::ctrl::ClusterConfig;
/// let mut c = ClusterConfig::default();
/// c.hosts = vec!["10.0.0.1:18650".into(), "10.0.0.2:18650".into()];
/// c.op_timeout = Duration::from_secs(10);
/// ```
#[derive(Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("hosts", &self.hosts)
            .field("coordinator", &self.coordinator)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("secret", &self.secret.as_ref().map(|_| Redacted))
            .field("devices", &self.devices)
            .field("join_timeout", &self.join_timeout)
            .field("op_timeout", &self.op_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_frame", &self.max_frame)
            .finish()
    }
}

/// Stands for a secret in `Debug` output.
pub(crate) struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The keys of a cluster file, each with where it stood (spans need named
/// fields: serde's `flatten` would lose them).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    hosts: Option<Spanned<Vec<String>>>,
    coordinator: Option<Spanned<String>>,
    rank: Option<Spanned<u32>>,
    size: Option<Spanned<u32>>,
    secret: Option<Spanned<String>>,
    devices: Option<Spanned<Vec<String>>>,
    join_timeout_ms: Option<Spanned<u64>>,
    op_timeout_ms: Option<Spanned<u64>>,
    handshake_timeout_ms: Option<Spanned<u64>>,
    max_frame: Option<Spanned<u32>>,
    /// The same keys under `[cluster]` (only at the top level).
    cluster: Option<Box<Spanned<FileKeys>>>,
}

/// The 1-based line and column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl ClusterConfig {
    /// Parses a TOML description (see the module docs for the keys).
    ///
    /// Any TOML 1.0 document is read (literal and multi-line strings,
    /// escapes, quoted or dotted keys, a leading byte-order mark). An unknown
    /// key, a key given twice (also once at the top and once under
    /// `[cluster]`), a value of the wrong type or range and an empty `secret`
    /// are [`Error::ConfigFile`] errors naming the line.
    pub fn from_toml(text: &str) -> Result<ClusterConfig> {
        let at = |span: std::ops::Range<usize>, message: String| {
            let (line, column) = line_col(text, span.start);
            Error::ConfigFile { path: None, line, column, message }
        };
        let mut k: FileKeys = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            let mut message = e.message().trim_end().to_string();
            // The parser's span covers the repeated key: name it.
            if let Some(key) = e.span().and_then(|s| text.get(s)).filter(|k| message == "duplicate key" && k.len() < 80)
            {
                message = format!("duplicate key `{key}`");
            }
            Error::ConfigFile { path: None, line, column, message }
        })?;
        if let Some(table) = k.cluster.take() {
            let table = table.into_inner();
            if let Some(inner) = &table.cluster {
                return Err(at(inner.span(), "a `cluster` table inside [cluster]".to_string()));
            }
            macro_rules! merge {
                ($($f:ident),*) => {$(
                    if let Some(v) = table.$f {
                        if k.$f.is_some() {
                            let m = format!("`{}` is given both at the top level and under [cluster]", stringify!($f));
                            return Err(at(v.span(), m));
                        }
                        k.$f = Some(v);
                    }
                )*};
            }
            merge!(
                hosts,
                coordinator,
                rank,
                size,
                secret,
                devices,
                join_timeout_ms,
                op_timeout_ms,
                handshake_timeout_ms,
                max_frame
            );
        }
        let mut c = ClusterConfig::default();
        if let Some(secret) = k.secret {
            if secret.get_ref().is_empty() {
                let m = "`secret` is empty; remove the key to run without authentication".to_string();
                return Err(at(secret.span(), m));
            }
            c.secret = Some(secret.into_inner().into_bytes());
        }
        let ms = |v: Spanned<u64>| Duration::from_millis(v.into_inner());
        c.hosts = k.hosts.map(Spanned::into_inner).unwrap_or_default();
        c.coordinator = k.coordinator.map(Spanned::into_inner);
        c.rank = k.rank.map(Spanned::into_inner);
        c.size = k.size.map(Spanned::into_inner);
        c.devices = k.devices.map(Spanned::into_inner).unwrap_or_default();
        c.join_timeout = k.join_timeout_ms.map_or(c.join_timeout, ms);
        c.op_timeout = k.op_timeout_ms.map_or(c.op_timeout, ms);
        c.handshake_timeout = k.handshake_timeout_ms.map_or(c.handshake_timeout, ms);
        c.max_frame = k.max_frame.map_or(c.max_frame, Spanned::into_inner);
        Ok(c)
    }

    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<ClusterConfig> {
        let text =
            std::fs::read_to_string(path).map_err(|e| cfg_err(format!("cannot read {}: {e}", path.display())))?;
        ClusterConfig::from_toml(&text).map_err(|e| match e {
            Error::ConfigFile { path: None, line, column, message } => {
                Error::ConfigFile { path: Some(path.to_path_buf()), line, column, message }
            }
            e => e,
        })
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
            if v.is_empty() {
                return Err(cfg_err("RRDDMMA_SECRET is set but empty; unset it to run without authentication"));
            }
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
        check_secret(self.secret.as_deref())?;
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
            (None, None) => srun_coordinator(var, launcher.map(|l| l.0))?,
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

/// An empty secret would turn authentication on with an empty key.
pub(crate) fn check_secret(secret: Option<&[u8]>) -> Result<()> {
    match secret {
        Some([]) => Err(cfg_err("the secret is empty; use `None` (no `secret` key) to run without authentication")),
        _ => Ok(()),
    }
}

/// Under `srun` with neither `hosts` nor `coordinator`: the first host of
/// the step (`SLURM_STEP_NODELIST`), where rank 0 runs, at [`DEFAULT_PORT`].
fn srun_coordinator(var: &dyn Fn(&str) -> Option<String>, launcher: Option<RankSource>) -> Result<String> {
    let srun = matches!(launcher, Some(RankSource::Slurm | RankSource::Pmi));
    let list = var("SLURM_STEP_NODELIST").filter(|_| srun);
    let Some(list) = list else {
        return Err(cfg_err(
            "no coordinator address: give `hosts` or `coordinator` (RRDDMMA_COORDINATOR), or start under srun",
        ));
    };
    let host = hostlist::first_host(&list)
        .ok_or_else(|| cfg_err(format!("SLURM_STEP_NODELIST={list:?} is not a host list; set RRDDMMA_COORDINATOR")))?;
    Ok(format!("{host}:{DEFAULT_PORT}"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    /// The configuration every spelling in `same_config_in_every_toml_form` means.
    fn expected() -> ClusterConfig {
        ClusterConfig {
            hosts: vec!["10.0.0.1:1".into(), "10.0.0.2:2".into(), "h#3:3".into()],
            secret: Some("s3\"cret # é".as_bytes().to_vec()),
            rank: Some(2),
            join_timeout: Duration::from_millis(1500),
            max_frame: 4096,
            ..Default::default()
        }
    }

    #[test]
    fn same_config_in_every_toml_form() {
        let forms: &[(&str, &str)] = &[
            (
                "basic strings, comments, multi-line array, underscores",
                r##"# comment
[cluster]
hosts = ["10.0.0.1:1", # first
  "10.0.0.2:2",
  "h#3:3"]
secret = "s3\"cret # é"
rank = 2
join_timeout_ms = 1_500
max_frame = 4096
"##,
            ),
            (
                "literal strings, top level, hex integer",
                r##"hosts = ['10.0.0.1:1', '10.0.0.2:2', 'h#3:3']
secret = 's3"cret # é'
rank = 2
join_timeout_ms = 1500
max_frame = 0x1000
"##,
            ),
            (
                "\\u and \\U escapes, table header with spaces",
                r##"[ cluster ]
hosts = ["10.0.0.1:1", "10.0.0.2:2", "h\u00233:3"]
secret = "s3\u0022cret # \U000000E9"
rank = 2
join_timeout_ms = 1500
max_frame = 4096
"##,
            ),
            (
                "quoted and dotted keys",
                r##""hosts" = ["10.0.0.1:1", "10.0.0.2:2", "h#3:3"]
'secret' = 's3"cret # é'
cluster.rank = 2
cluster."join_timeout_ms" = 1500
"cluster".max_frame = 4096
"##,
            ),
            (
                "multi-line strings",
                r##"hosts = ["""10.0.0.1:1""", '''10.0.0.2:2''', """
h#3:3"""]
secret = """
s3"cret \
   # é"""
rank = 2
join_timeout_ms = 1500
max_frame = 4096
"##,
            ),
            (
                "leading byte-order mark, inline table",
                "\u{feff}cluster = { hosts = [\"10.0.0.1:1\", \"10.0.0.2:2\", \"h#3:3\"], \
                 secret = 's3\"cret # é', rank = 2, join_timeout_ms = 1500, max_frame = 4096 }\n",
            ),
        ];
        for (form, text) in forms {
            match ClusterConfig::from_toml(text) {
                Ok(c) => assert_eq!(c, expected(), "{form}"),
                Err(e) => panic!("{form}: {e}\n{text}"),
            }
        }
    }

    /// The error of `text`, which must be a `ConfigFile` error at `line`.
    fn file_error(text: &str, line: usize) -> String {
        match ClusterConfig::from_toml(text) {
            Err(e @ Error::ConfigFile { line: l, .. }) => {
                assert_eq!(l, line, "{e}\n{text}");
                let msg = e.to_string();
                assert!(msg.contains(&format!("line {line}")), "{msg}");
                msg
            }
            other => panic!("{text:?} gave {other:?}"),
        }
    }

    #[test]
    fn bad_files_are_typed_errors_naming_the_line() {
        let e = file_error("hosts = [\"a\"]\nrnak = 1\n", 2);
        assert!(e.contains("rnak"), "{e}");
        let e = file_error("[cluster]\nrank = 1\n\nrank = 2\n", 4);
        assert!(e.contains("duplicate key `rank`"), "{e}");
        let e = file_error("rank = 1\n[cluster]\nrank = 2\n", 3);
        assert!(e.contains("both at the top level and under [cluster]"), "{e}");
        let e = file_error("hosts = [\"a\"]\nsize = 007\n", 2);
        assert!(e.to_lowercase().contains("leading zero"), "{e}");
        let e = file_error("hosts = [\"a\"]\n\nsecret = ''\n", 3);
        assert!(e.contains("`secret` is empty"), "{e}");
        let e = file_error("rank = \"one\"", 1);
        assert!(e.contains("\"one\"") && e.contains("u32"), "{e}");
        file_error("hosts = [\"a\" \"b\"]", 1);
        let e = file_error("\n[servers]\nx = 1\n", 2);
        assert!(e.contains("servers"), "{e}");
        file_error("hosts = [\"a\",\n", 1);
        file_error("\n\nsize = 99999999999", 3);
        file_error("join_timeout_ms = -1", 1);
        let e = file_error("[cluster]\ncluster.rank = 1", 2);
        assert!(e.contains("inside [cluster]"), "{e}");
    }

    #[test]
    fn a_file_error_names_the_file() {
        let dir = std::env::temp_dir().join(format!("rrddmma-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cluster.toml");
        std::fs::write(&path, "hosts = [\"a\"]\nrnak = 1\n").unwrap();
        let e = ClusterConfig::from_file(&path).unwrap_err();
        assert!(matches!(&e, Error::ConfigFile { path: Some(p), line: 2, .. } if *p == path), "{e:?}");
        assert!(e.to_string().starts_with(&format!("cluster file {}, line 2", path.display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let c = ClusterConfig { secret: Some(b"hunter2".to_vec()), ..Default::default() };
        let d = format!("{c:?} {c:#?}");
        assert!(!d.contains("hunter2") && !d.contains("104, 117") && d.contains("<redacted>"), "{d}");
        let none = format!("{:?}", ClusterConfig::default());
        assert!(none.contains("secret: None"), "{none}");
        // The protocol machines hold the secret too.
        use crate::ctrl::proto::{Coordinator, Member, Params};
        let p = Params::new(2).secret(c.secret.clone()).max_frame(4096).handshake_timeout(Duration::from_secs(1));
        let d = format!("{:?} {:?} {:?}", p, Coordinator::new(p.clone()), Member::new(p.clone(), 1, [7; 16]));
        assert!(!d.contains("hunter2") && !d.contains("104, 117") && d.contains("<redacted>"), "{d}");
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
    fn srun_names_the_coordinator_host() {
        let c = ClusterConfig::default();
        let slurm = [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "3"), ("SLURM_STEP_NODELIST", "localhost,n[2-3]")];
        let r = c.resolve(&vars(&slurm)).unwrap();
        assert_eq!((r.rank, r.size, r.rank_source), (1, 3, RankSource::Slurm));
        assert_eq!(r.coordinator, SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)));
        // An explicit coordinator wins over the node list.
        let given = ClusterConfig { coordinator: Some("127.0.0.1:7000".into()), ..Default::default() };
        assert_eq!(given.resolve(&vars(&slurm)).unwrap().coordinator.port(), 7000);
        // mpirun inside an allocation: the step's list is not mpirun's.
        let ompi = [("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "3"), ("SLURM_STEP_NODELIST", "localhost")];
        let e = c.resolve(&vars(&ompi)).unwrap_err().to_string();
        assert!(e.contains("RRDDMMA_COORDINATOR"), "{e}");
        let bad = [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "3"), ("SLURM_STEP_NODELIST", "n[")];
        let e = c.resolve(&vars(&bad)).unwrap_err().to_string();
        assert!(e.contains("SLURM_STEP_NODELIST=\"n[\"") && e.contains("RRDDMMA_COORDINATOR"), "{e}");
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
        let e = ClusterConfig::from_vars(&vars(&[("RRDDMMA_SECRET", "")])).unwrap_err().to_string();
        assert!(e.contains("RRDDMMA_SECRET is set but empty"), "{e}");
        let empty = ClusterConfig { secret: Some(Vec::new()), rank: Some(0), size: Some(1), ..Default::default() };
        let e = empty.resolve(&vars(&[])).unwrap_err().to_string();
        assert!(e.contains("secret is empty"), "{e}");
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
