//! `rrddmma-perf cluster --scenario FILE`: an experiment as a TOML file.
//! Top-level keys are defaults for every phase; each `[[phase]]` runs in
//! turn with its own report, and either names a pattern or lists its flows
//! (`[[phase.flow]]`, each with its own op, mix, rate and size
//! distribution). The keys are the long flags' names (`size` and `sizes`
//! for `-s`, `iters` for `-n`, `duration` for `-D`, `depth` for `-t`,
//! `qps` for `-q`), so a quick command line and a file say the same.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Value;

use crate::args::Verb;
use crate::cluster_opts::{self, ClusterOpts, FlowSpec, Pattern, ScenarioInfo};
use crate::load;

type Res<T> = Result<T, String>;

/// The settings a file or a phase may give (every one optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    pattern: Option<Value>,
    op: Option<Value>,
    mix: Option<Value>,
    size: Option<Value>,
    sizes: Option<Value>,
    size_dist: Option<Value>,
    rate: Option<Value>,
    iters: Option<Value>,
    duration: Option<Value>,
    depth: Option<Value>,
    warmup: Option<Value>,
    reps: Option<Value>,
    lat_samples: Option<Value>,
    qps: Option<Value>,
    threads: Option<Value>,
    seed: Option<Value>,
}

/// One flow of a phase's explicit list.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowToml {
    src: u32,
    dst: u32,
    op: Option<String>,
    mix: Option<String>,
    rate: Option<Value>,
    size_dist: Option<Value>,
}

/// A TOML value as a flag's text: strings as they are, numbers printed,
/// lists joined with commas.
fn flag_text(v: &Value) -> Res<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Float(f) => Ok(f.to_string()),
        Value::Array(a) => Ok(a.iter().map(flag_text).collect::<Res<Vec<_>>>()?.join(",")),
        other => Err(format!("{} is not a string, a number or a list of them", other.type_str())),
    }
}

/// A value as the file wrote it, near enough for a message.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        v => flag_text(v).unwrap_or_else(|_| v.type_str().to_string()),
    }
}

impl Settings {
    /// `(key, flag, value)` for every key given, `over`'s before `self`'s.
    fn flags(&self, over: &Settings) -> Vec<(&'static str, &'static str, Value)> {
        let pick = |a: &Option<Value>, b: &Option<Value>| a.clone().or_else(|| b.clone());
        let (o, s) = (over, self);
        [
            ("pattern", "--pattern", pick(&o.pattern, &s.pattern)),
            ("op", "--op", pick(&o.op, &s.op)),
            ("mix", "--mix", pick(&o.mix, &s.mix)),
            ("size", "-s", pick(&o.size, &s.size)),
            ("sizes", "-s", pick(&o.sizes, &s.sizes)),
            ("size_dist", "--size-dist", pick(&o.size_dist, &s.size_dist)),
            ("rate", "--rate", pick(&o.rate, &s.rate)),
            ("iters", "-n", pick(&o.iters, &s.iters)),
            ("duration", "-D", pick(&o.duration, &s.duration)),
            ("depth", "-t", pick(&o.depth, &s.depth)),
            ("warmup", "--warmup", pick(&o.warmup, &s.warmup)),
            ("reps", "--reps", pick(&o.reps, &s.reps)),
            ("lat_samples", "--lat-samples", pick(&o.lat_samples, &s.lat_samples)),
            ("qps", "-q", pick(&o.qps, &s.qps)),
            ("threads", "--threads", pick(&o.threads, &s.threads)),
            ("seed", "--seed", pick(&o.seed, &s.seed)),
        ]
        .into_iter()
        .filter_map(|(k, f, v)| v.map(|v| (k, f, v)))
        .collect()
    }
}

/// The line of `text` where `key` is first set (at or after `from`), for
/// error messages.
fn line_of(text: &str, key: &str, from: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| {
            let l = l.trim_start();
            l.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(from.max(1), |(i, _)| i + 1)
}

/// The line of the `k`th (from 0) `[[phase]]` header.
fn phase_line(text: &str, k: usize) -> usize {
    text.lines().enumerate().filter(|(_, l)| l.trim() == "[[phase]]").nth(k).map_or(1, |(i, _)| i + 1)
}

/// Deserializes `t` (a table of the file) as `T`, an unknown or mistyped
/// key named with its line.
fn typed<T: for<'de> Deserialize<'de>>(path: &str, text: &str, from: usize, where_: &str, t: toml::Table) -> Res<T> {
    Value::Table(t).try_into::<T>().map_err(|e| {
        let msg = e.to_string();
        let msg = msg.trim();
        // serde names the key in backquotes: `unknown field `rtae``.
        let key = msg.split('`').nth(1).unwrap_or("");
        let line = if key.is_empty() { from } else { line_of(text, key, from) };
        format!("{path}, line {line}: {where_}: {msg}")
    })
}

/// The phases of a scenario file's `text` (read from `path`), and its
/// `ranks` if given; `out` holds `--json`, `--csv` and `--svg` as given,
/// each phase writing them with its name added to the file's stem.
pub fn phases(path: &str, text: &str, out: [Option<PathBuf>; 3]) -> Res<(Vec<ClusterOpts>, Option<u32>)> {
    let mut top: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map_or(0, |s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        format!("{path}, line {line}: {}", e.message())
    })?;
    let ranks = match top.remove("ranks") {
        None => None,
        Some(Value::Integer(r)) if (2..=65_536).contains(&r) => Some(r as u32),
        Some(v) => {
            return Err(format!(
                "{path}, line {}: ranks = {}: a whole number from 2",
                line_of(text, "ranks", 1),
                shown(&v)
            ))
        }
    };
    let list = match top.remove("phase") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err(format!("{path}: no [[phase]] (each phase is a [[phase]] table)")),
    };
    let defaults: Settings = typed(path, text, 1, "top level", top)?;
    let mut v = Vec::new();
    for (k, p) in list.into_iter().enumerate() {
        let at = phase_line(text, k);
        let Value::Table(mut p) = p else { return Err(format!("{path}: phase {} is not a table", k + 1)) };
        let name = match p.remove("name") {
            None => format!("phase{}", k + 1),
            Some(Value::String(n))
                if !n.is_empty()
                    && n.len() <= 64
                    && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
            {
                n
            }
            Some(n) => {
                return Err(format!(
                    "{path}, line {}: phase name {}: letters, digits, - and _ only (it goes into file names)",
                    line_of(text, "name", at),
                    shown(&n)
                ))
            }
        };
        if v.iter().any(|o: &ClusterOpts| o.scenario.as_ref().is_some_and(|s| s.phase == name)) {
            return Err(format!("{path}, line {at}: a second phase named {name:?}"));
        }
        let flows: Vec<FlowToml> = match p.remove("flow") {
            None => Vec::new(),
            Some(f) => typed(path, text, at, &format!("phase {name:?}'s flows"), {
                let mut t = toml::Table::new();
                t.insert("f".into(), f);
                t
            })
            .map(|w: FlowList| w.f)?,
        };
        let own: Settings = typed(path, text, at, &format!("phase {name:?}"), p)?;
        let o = phase(path, text, at, &name, &defaults, &own, &flows, &out)?;
        v.push(o);
    }
    Ok((v, ranks))
}

#[derive(Deserialize)]
struct FlowList {
    f: Vec<FlowToml>,
}

/// Builds one phase's options from the file's `defaults` and its `own`
/// keys, naming the key (and its line) a bad value came from.
#[allow(clippy::too_many_arguments)]
fn phase(
    path: &str,
    text: &str,
    at: usize,
    name: &str,
    defaults: &Settings,
    own: &Settings,
    flows: &[FlowToml],
    out: &[Option<PathBuf>; 3],
) -> Res<ClusterOpts> {
    let keyed = own.flags(&Settings::default()).into_iter().map(|(k, ..)| k).collect::<Vec<_>>();
    let mut args = Vec::new();
    let wrap = |key: &str, e: String| {
        let line = if keyed.contains(&key) { line_of(text, key, at) } else { line_of(text, key, 1) };
        format!("{path}, line {line}: phase {name:?}, key {key}: {e}")
    };
    if !flows.is_empty() && own.pattern.is_some() {
        return Err(format!("{path}, line {at}: phase {name:?} gives both a pattern and [[phase.flow]]s; one of them"));
    }
    for (key, flag, value) in defaults.flags(own) {
        if key == "pattern" && !flows.is_empty() {
            // The file's default pattern gives way to the phase's flows.
            continue;
        }
        let t = flag_text(&value).map_err(|e| wrap(key, e))?;
        // A bad value on its own is named by its key.
        cluster_opts::parse([flag, t.as_str()]).map_err(|e| wrap(key, e))?;
        args.push(flag.to_string());
        args.push(t);
    }
    let mut o = cluster_opts::parse(&args).map_err(|e| format!("{path}, line {at}: phase {name:?}: {e}"))?;
    if !flows.is_empty() {
        if o.verb == Verb::Send {
            return Err(format!(
                "{path}, line {at}: phase {name:?}: explicit flows run write, read or atomic, not send"
            ));
        }
        o.pattern = Pattern::Explicit;
        let slot = o.sizes.iter().copied().max().unwrap_or(0);
        for f in flows {
            let here = |e: String| format!("{path}, phase {name:?}, flow {} -> {}: {e}", f.src, f.dst);
            if f.src == f.dst || o.flows.iter().any(|g| (g.src, g.dst) == (f.src, f.dst)) {
                return Err(here("a flow from a rank to itself, or listed twice".into()));
            }
            let mut w = o.workload.clone();
            if let Some(op) = &f.op {
                w.mix = load::parse_mix(&format!("{op}:1")).map_err(|e| here(e.replace("--mix", "op")))?;
            }
            if let Some(m) = &f.mix {
                w.mix = load::parse_mix(m).map_err(|e| here(e.replace("--mix", "mix")))?;
            }
            if let Some(r) = &f.rate {
                w.rate =
                    load::parse_rate(&flag_text(r).map_err(&here)?).map_err(|e| here(e.replace("--rate", "rate")))?;
            }
            if let Some(d) = &f.size_dist {
                w.sizes = load::parse_sizes(&flag_text(d).map_err(&here)?)
                    .map_err(|e| here(e.replace("--size-dist", "size_dist")))?;
                if w.sizes.max() > slot {
                    return Err(here(format!(
                        "size_dist draws up to {} bytes, above the phase's size {slot} (set the phase's size to {})",
                        w.sizes.max(),
                        w.sizes.max()
                    )));
                }
            }
            o.flows.push(FlowSpec { src: f.src, dst: f.dst, workload: w });
        }
    }
    let named = |p: &Option<PathBuf>| {
        p.as_ref().map(|p| {
            let stem = p.file_stem().map_or("cluster".into(), |s| s.to_string_lossy().into_owned());
            let ext = p.extension().map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
            p.with_file_name(format!("{stem}-{name}{ext}"))
        })
    };
    (o.json, o.csv, o.svg) = (named(&out[0]), named(&out[1]), named(&out[2]));
    o.scenario = Some(ScenarioInfo { file: path.to_string(), phase: name.to_string(), text: text.to_string() });
    Ok(o)
}

/// `cluster --scenario FILE [--json F] [--csv F] [--svg F]`: None when the
/// arguments name no scenario (a command-line run).
pub fn from_args(args: &[std::ffi::OsString]) -> Option<Res<(Vec<ClusterOpts>, Option<u32>)>> {
    if !args.iter().any(|a| a == "--scenario" || a.to_string_lossy().starts_with("--scenario=")) {
        return None;
    }
    Some((|| {
        use lexopt::Arg::{Long, Short, Value as V};
        let mut p = lexopt::Parser::from_args(args);
        let (mut file, mut out) = (None, [None, None, None]);
        fn value(p: &mut lexopt::Parser, f: &str) -> Res<PathBuf> {
            p.value().map(PathBuf::from).map_err(|e| format!("{f}: {e}"))
        }
        while let Some(arg) = p.next().map_err(|e| e.to_string())? {
            match arg {
                Long("scenario") => file = Some(value(&mut p, "--scenario")?),
                Long("json") => out[0] = Some(value(&mut p, "--json")?),
                Long("csv") => out[1] = Some(value(&mut p, "--csv")?),
                Long("svg") => out[2] = Some(value(&mut p, "--svg")?),
                Long(f) => {
                    return Err(format!(
                        "--{f}: the scenario file gives the settings; with --scenario only --json, --csv and --svg"
                    ))
                }
                Short(c) => {
                    return Err(format!(
                        "-{c}: the scenario file gives the settings; with --scenario only --json, --csv and --svg"
                    ))
                }
                V(v) => return Err(format!("unexpected argument {v:?}")),
            }
        }
        let file: PathBuf = file.ok_or("--scenario: which file?")?;
        let path = file.display().to_string();
        let text = std::fs::read_to_string(Path::new(&file)).map_err(|e| format!("cannot read {path}: {e}"))?;
        phases(&path, &text, out)
    })())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Rate, Sizes};

    const TWO: &str = "ranks = 3\nwarmup = 4\nthreads = \"per-qp\"\n\n[[phase]]\nname = \"ring\"\npattern = \"ring\"\n\
        qps = 2\nsize = 1024\nrate = \"300\"\niters = 100\n\n[[phase]]\nname = \"pair\"\nsize = 512\n\n\
        [[phase.flow]]\nsrc = 1\ndst = 0\nop = \"read\"\n\n[[phase.flow]]\nsrc = 2\ndst = 0\n\
        rate = \"poisson:200\"\nsize_dist = \"uniform:64-512\"\n";

    fn load(text: &str) -> Res<(Vec<ClusterOpts>, Option<u32>)> {
        phases("s.toml", text, [Some("r.json".into()), None, Some("out/r.svg".into())])
    }

    #[test]
    fn phases_take_the_defaults_their_own_keys_and_explicit_flows() {
        let (v, ranks) = load(TWO).unwrap();
        assert_eq!((v.len(), ranks), (2, Some(3)));
        let (a, b) = (&v[0], &v[1]);
        assert_eq!(
            (a.pattern, a.qps, a.sizes.clone(), a.iters, a.warmup, a.threads),
            (Pattern::Ring, 2, vec![1024], 100, 4, 0)
        );
        assert_eq!(a.workload.rate, Rate::Fixed(300.0));
        assert_eq!(a.json, Some("r-ring.json".into()));
        assert_eq!(a.svg, Some("out/r-ring.svg".into()));
        assert_eq!(b.pattern, Pattern::Explicit);
        assert_eq!((b.qps, b.sizes.clone(), b.iters, b.warmup), (1, vec![512], 1000, 4));
        assert_eq!(b.flow_list(3), vec![(1, 0), (2, 0)]);
        assert_eq!(b.workload_of(1, 0).mix.name(), "read:1");
        assert_eq!(b.workload_of(1, 0).rate, Rate::Closed);
        assert_eq!(b.workload_of(2, 0).rate, Rate::Poisson(200.0));
        assert_eq!(b.workload_of(2, 0).sizes, Sizes::Uniform(64, 512));
        assert_eq!(b.scenario.as_ref().map(|s| s.phase.as_str()), Some("pair"));
        assert_eq!(b.json, Some("r-pair.json".into()));
    }

    #[test]
    fn bad_files_name_the_key_and_the_line() {
        let e = |t: &str| load(t).unwrap_err();
        assert!(e("ranks = 3\n[[phase]\n").starts_with("s.toml, line 2: "), "{}", e("ranks = 3\n[[phase]\n"));
        let typo = TWO.replace("rate = \"300\"", "rtae = \"300\"");
        let m = e(&typo);
        assert!(m.starts_with("s.toml, line 10: phase \"ring\"") && m.contains("unknown field `rtae`"), "{m}");
        let m = e(&TWO.replace("iters = 100", "iters = -5"));
        assert!(m.starts_with("s.toml, line 11: phase \"ring\", key iters: -n"), "{m}");
        let m = e(&TWO.replace("warmup = 4", "warmup = \"x\""));
        assert!(m.starts_with("s.toml, line 2: phase \"ring\", key warmup"), "{m}");
        let m = e(&TWO.replace("uniform:64-512", "uniform:64-4096"));
        assert!(m.contains("flow 2 -> 0: size_dist draws up to 4096 bytes, above the phase's size 512"), "{m}");
        let m = e(&TWO.replace("op = \"read\"", "op = \"send\""));
        assert!(m.contains("flow 1 -> 0") && m.contains("send cannot be mixed"), "{m}");
        assert!(e(&TWO.replace("src = 2", "src = 1")).contains("listed twice"));
        assert!(e(&TWO.replace("name = \"pair\"", "name = \"ring\"")).contains("a second phase named \"ring\""));
        assert!(e(&TWO.replace("name = \"pair\"", "name = \"a b\"")).contains("letters, digits"));
        assert!(e("ranks = 3\n").contains("no [[phase]]"));
        assert!(e(&TWO.replace("ranks = 3", "ranks = 1")).starts_with("s.toml, line 1: ranks = 1"));
        let m = e(&TWO.replace("dst = 0\nop", "dst = 0\nopp"));
        assert!(m.contains("unknown field `opp`") && m.contains("flows"), "{m}");
        let m = e(&TWO.replace("name = \"pair\"\n", "name = \"pair\"\npattern = \"ring\"\n"));
        assert!(m.contains("both a pattern and [[phase.flow]]s"), "{m}");
    }

    #[test]
    fn only_output_flags_go_with_a_scenario() {
        let a = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(from_args(&a(&["-s", "64"])).is_none());
        let e = from_args(&a(&["--scenario", "x.toml", "-s", "64"])).unwrap().unwrap_err();
        assert!(e.contains("-s: the scenario file gives the settings"), "{e}");
        let e = from_args(&a(&["--scenario", "/nonexistent.toml"])).unwrap().unwrap_err();
        assert!(e.contains("cannot read /nonexistent.toml"), "{e}");
    }
}
