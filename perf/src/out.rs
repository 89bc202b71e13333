//! Output: perftest-style tables, JSON, CSV, a progress bar and SVG plots.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use serde::Serialize;

use crate::args::{Opts, Test};
use crate::run::Outcome;

/// Latency statistics in microseconds (as `lat_us` in the JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatStats {
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub avg: f64,
    pub stdev: f64,
    pub p99: f64,
    #[serde(rename = "p99_9")]
    pub p999: f64,
}

/// Nearest-rank percentile of sorted samples.
fn pct(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Statistics of sorted nanosecond samples (None when there are none).
pub fn lat_stats(sorted_ns: &[f64]) -> Option<LatStats> {
    if sorted_ns.is_empty() {
        return None;
    }
    let us: Vec<f64> = sorted_ns.iter().map(|v| v / 1000.0).collect();
    let n = us.len() as f64;
    let avg = us.iter().sum::<f64>() / n;
    let var = us.iter().map(|v| (v - avg) * (v - avg)).sum::<f64>() / n;
    Some(LatStats {
        min: us[0],
        max: us[us.len() - 1],
        p50: us[us.len() / 2],
        avg,
        stdev: var.sqrt(),
        p99: pct(&us, 0.99),
        p999: pct(&us, 0.999),
    })
}

fn bw_unit(o: &Opts) -> (&'static str, f64) {
    if o.gbits {
        ("Gb/sec", 1.25e8)
    } else {
        ("MB/sec", 1048576.0)
    }
}

/// The table header.
pub fn header(o: &Opts) -> String {
    match o.test {
        Test::Bw => {
            format!(" #bytes     #iterations    BW average[{}]   MsgRate[Mpps]   allocs", bw_unit(o).0)
        }
        Test::Lat => " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
                      t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]   allocs"
            .into(),
    }
}

/// One table row.
pub fn row(o: &Opts, r: &Outcome) -> String {
    match o.test {
        Test::Bw => format!(
            " {:<10} {:<14} {:<20.2} {:<15.6} {}",
            r.size,
            r.iters,
            r.bytes_per_sec / bw_unit(o).1,
            r.ops_per_sec / 1e6,
            r.allocs
        ),
        Test::Lat => {
            let s = lat_stats(&r.lat_ns).unwrap_or_default();
            format!(
                " {:<7} {:<10} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<15.2} {:<22.2} {:<24.2} {}",
                r.size, r.iters, s.min, s.max, s.p50, s.avg, s.stdev, s.p99, s.p999, r.allocs
            )
        }
    }
}

fn test_name(o: &Opts) -> String {
    format!("{}_{}", o.verb.name(), if o.test == Test::Bw { "bw" } else { "lat" })
}

/// The version of the pairwise JSON document's layout: raised on every
/// change a reader could trip on (a field renamed, removed or retyped);
/// fields only added keep it. docs/perf.md lists the versions.
pub const SCHEMA_VERSION: u32 = 1;

/// The JSON document (`--json`).
#[derive(Serialize)]
struct RunJson<'a> {
    tool: &'static str,
    schema_version: u32,
    test: String,
    device: &'a str,
    clock: &'a str,
    /// What one read of the clock cost, in nanoseconds (inside every latency sample).
    clock_read_ns: f64,
    /// The transport: RC, UC or UD.
    connection: &'static str,
    /// Whether completions were taken by events (`-e`).
    events: bool,
    qps: u32,
    threads: u32,
    tx_depth: u32,
    post_list: u32,
    cq_mod: u32,
    inline: u32,
    results: Vec<SizeJson>,
}

/// One size: bandwidth fields on bandwidth tests, `lat_us` on latency tests.
#[derive(Serialize)]
struct SizeJson {
    size: usize,
    iterations: u64,
    allocations_in_loop: u64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    bw: Option<BwJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lat_us: Option<LatStats>,
}

#[derive(Serialize)]
struct BwJson {
    bw_mib_s: f64,
    bw_gbit_s: f64,
    msg_rate_mpps: f64,
}

fn bw_of(r: &Outcome) -> BwJson {
    BwJson {
        bw_mib_s: r.bytes_per_sec / 1048576.0,
        bw_gbit_s: r.bytes_per_sec / 1.25e8,
        msg_rate_mpps: r.ops_per_sec / 1e6,
    }
}

/// Results as JSON.
pub fn json(o: &Opts, device: &str, (clock, clock_read_ns): (&str, f64), rs: &[Outcome]) -> Result<String, String> {
    let results = rs
        .iter()
        .map(|r| SizeJson {
            size: r.size,
            iterations: r.iters,
            allocations_in_loop: r.allocs,
            bw: (o.test == Test::Bw).then(|| bw_of(r)),
            lat_us: if o.test == Test::Lat { lat_stats(&r.lat_ns) } else { None },
        })
        .collect();
    let doc = RunJson {
        tool: "rrddmma-perf",
        schema_version: SCHEMA_VERSION,
        test: test_name(o),
        device,
        clock,
        clock_read_ns,
        connection: o.conn.name(),
        events: o.events,
        qps: o.qps,
        threads: o.threads,
        tx_depth: o.tx_depth,
        post_list: o.post_list,
        cq_mod: o.cq_mod,
        inline: o.inline,
        results,
    };
    let mut s = serde_json::to_string_pretty(&doc).map_err(|e| format!("writing the JSON: {e}"))?;
    s.push('\n');
    Ok(s)
}

/// A CSV row (`--csv`): the header comes from the field names; the columns
/// a test does not measure are empty.
#[derive(Default, Serialize)]
struct SizeCsv {
    test: String,
    size: usize,
    iterations: u64,
    bw_mib_s: Option<f64>,
    bw_gbit_s: Option<f64>,
    msg_rate_mpps: Option<f64>,
    lat_min_us: Option<f64>,
    lat_p50_us: Option<f64>,
    lat_avg_us: Option<f64>,
    lat_p99_us: Option<f64>,
    lat_p99_9_us: Option<f64>,
    lat_max_us: Option<f64>,
    allocations_in_loop: u64,
}

/// Results as CSV, one row per size.
pub fn csv(o: &Opts, rs: &[Outcome]) -> Result<String, String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rs {
        let bw = (o.test == Test::Bw).then(|| bw_of(r));
        let l = if o.test == Test::Lat { lat_stats(&r.lat_ns) } else { None };
        w.serialize(SizeCsv {
            test: test_name(o),
            size: r.size,
            iterations: r.iters,
            bw_mib_s: bw.as_ref().map(|b| b.bw_mib_s),
            bw_gbit_s: bw.as_ref().map(|b| b.bw_gbit_s),
            msg_rate_mpps: bw.as_ref().map(|b| b.msg_rate_mpps),
            lat_min_us: l.map(|l| l.min),
            lat_p50_us: l.map(|l| l.p50),
            lat_avg_us: l.map(|l| l.avg),
            lat_p99_us: l.map(|l| l.p99),
            lat_p99_9_us: l.map(|l| l.p999),
            lat_max_us: l.map(|l| l.max),
            allocations_in_loop: r.allocs,
        })
        .map_err(|e| format!("writing the CSV: {e}"))?;
    }
    if rs.is_empty() {
        // The writer emits the header with the first row; a side with no
        // rows (a passive latency server) still gets it.
        w.serialize(SizeCsv::default()).map_err(|e| format!("writing the CSV: {e}"))?;
        let bytes = w.into_inner().map_err(|e| format!("writing the CSV: {e}"))?;
        let text = String::from_utf8(bytes).map_err(|e| format!("writing the CSV: {e}"))?;
        return Ok(text.lines().next().map(|h| format!("{h}\n")).unwrap_or_default());
    }
    let bytes = w.into_inner().map_err(|e| format!("writing the CSV: {e}"))?;
    String::from_utf8(bytes).map_err(|e| format!("writing the CSV: {e}"))
}

/// A progress bar on standard error (a line per step when not a terminal).
#[derive(Debug)]
pub struct Progress {
    total: usize,
    tty: bool,
    on: bool,
}

impl Progress {
    /// A bar over `total` steps; silent when `on` is false or there is one step.
    pub fn new(total: usize, on: bool) -> Progress {
        Progress { total, tty: std::io::stderr().is_terminal(), on: on && total > 1 }
    }

    /// Shows that step `done` (1-based) of size `size` finished.
    pub fn step(&self, done: usize, size: usize) {
        if !self.on {
            return;
        }
        let width = 30;
        let filled = done * width / self.total.max(1);
        let bar = format!("[{}{}] {done}/{} ({size} B)", "#".repeat(filled), ".".repeat(width - filled), self.total);
        let mut e = std::io::stderr();
        if self.tty {
            let _ = write!(e, "\r{bar}");
            if done == self.total {
                let _ = writeln!(e);
            }
        } else {
            let _ = writeln!(e, "{bar}");
        }
    }
}

/// One line of a plot.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn size_label(b: f64) -> String {
    let b = b as u64;
    if b >= 1 << 20 {
        format!("{}M", b >> 20)
    } else if b >= 1 << 10 {
        format!("{}K", b >> 10)
    } else {
        b.to_string()
    }
}

/// An SVG line plot over message sizes (log2 x axis, linear y from 0).
pub fn svg(title: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, l, r, t, b) = (720.0, 420.0, 70.0, 160.0, 40.0, 50.0);
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x.max(1.0).log2());
        x1 = x1.max(x.max(1.0).log2());
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1.0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let px = |x: f64| l + (x.max(1.0).log2() - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| h - b - y / y1 * (h - t - b);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" \
         font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        (w - r + l) / 2.0,
        esc(title)
    );
    let _ = writeln!(
        s,
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" \
         y2=\"{}\" stroke=\"black\"/>",
        h - b,
        w - r,
        h - b,
        h - b
    );
    let mut e = x0.ceil() as i32;
    while f64::from(e) <= x1 {
        let x = px(2f64.powi(e));
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{t}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"{}\" \
             text-anchor=\"middle\">{}</text>",
            h - b,
            h - b + 16.0,
            size_label(2f64.powi(e))
        );
        e += 1;
    }
    for k in 0..=5 {
        let v = y1 * f64::from(k) / 5.0;
        let y = py(v);
        let _ = writeln!(
            s,
            "<line x1=\"{l}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" \
             text-anchor=\"end\">{v:.3}</text>",
            w - r,
            l - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">message size (bytes)</text>\n<text x=\"16\" y=\"{}\" \
         text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>",
        (w - r + l) / 2.0,
        h - 12.0,
        (h - b + t) / 2.0,
        (h - b + t) / 2.0,
        esc(y_label)
    );
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
    for (i, se) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let path: Vec<String> = se.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
        let _ =
            writeln!(s, "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>", path.join(" "));
        for &(x, y) in &se.points {
            let _ = writeln!(s, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>", px(x), py(y));
        }
        let ly = t + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{c}\" stroke-width=\"2\"/><text x=\"{}\" \
             y=\"{}\">{}</text>",
            w - r + 10.0,
            w - r + 30.0,
            w - r + 36.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Reads `series,size,value` rows (a header line is skipped) into series.
pub fn series_from_csv(text: &str) -> Result<Vec<Series>, String> {
    let mut out: Vec<Series> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if line.trim().is_empty() || (i == 0 && f.get(1).is_some_and(|v| v.parse::<f64>().is_err())) {
            continue;
        }
        let [name, x, y] = f[..] else {
            return Err(format!("line {}: expected series,size,value: {line:?}", i + 1));
        };
        let x: f64 = x.parse().map_err(|_| format!("line {}: bad size {x:?}", i + 1))?;
        let y: f64 = y.parse().map_err(|_| format!("line {}: bad value {y:?}", i + 1))?;
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => out.push(Series { name: name.to_string(), points: vec![(x, y)] }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(|i| f64::from(i) * 1000.0).collect();
        let s = lat_stats(&v).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.p999, s.max), (1.0, 501.0, 990.0, 999.0, 1000.0));
        assert!(lat_stats(&[]).is_none());
    }

    #[test]
    fn json_and_csv_carry_what_each_test_measures() {
        let bw = crate::args::parse(["write", "bw", "-q", "2"]).unwrap();
        let r = Outcome {
            size: 4096,
            iters: 100,
            bytes_per_sec: 2.0 * 1048576.0,
            ops_per_sec: 512.0,
            ..Outcome::default()
        };
        // A device name with JSON's special characters stays a valid string.
        let j: serde_json::Value =
            serde_json::from_str(&json(&bw, "mlx5_\"0\\", ("tsc", 12.5), std::slice::from_ref(&r)).unwrap()).unwrap();
        assert_eq!(
            (j["test"].as_str(), j["device"].as_str(), j["qps"].as_u64()),
            (Some("write_bw"), Some("mlx5_\"0\\"), Some(2))
        );
        assert_eq!((j["connection"].as_str(), j["events"].as_bool()), (Some("RC"), Some(false)));
        assert_eq!(j["schema_version"].as_u64(), Some(u64::from(SCHEMA_VERSION)));
        assert_eq!((j["clock"].as_str(), j["clock_read_ns"].as_f64()), (Some("tsc"), Some(12.5)));
        let row = &j["results"][0];
        assert_eq!(
            (row["size"].as_u64(), row["bw_mib_s"].as_f64(), row["msg_rate_mpps"].as_f64()),
            (Some(4096), Some(2.0), Some(512e-6))
        );
        assert!(row.get("lat_us").is_none());
        let c = csv(&bw, &[r]).unwrap();
        assert_eq!(c.lines().nth(1), Some("write_bw,4096,100,2.0,0.016777216,0.000512,,,,,,,0"));

        let lat = crate::args::parse(["send", "lat"]).unwrap();
        let samples: Vec<f64> = (1..=100).map(|i| f64::from(i) * 1000.0).collect();
        let r = Outcome { size: 2, iters: 100, lat_ns: samples, ..Outcome::default() };
        let j: serde_json::Value =
            serde_json::from_str(&json(&lat, "rxe0", ("monotonic", 40.0), std::slice::from_ref(&r)).unwrap()).unwrap();
        let row = &j["results"][0];
        assert_eq!((row["lat_us"]["min"].as_f64(), row["lat_us"]["p99_9"].as_f64()), (Some(1.0), Some(100.0)));
        assert!(row.get("bw_mib_s").is_none());
        assert!(csv(&lat, &[r]).unwrap().lines().nth(1).unwrap().starts_with("send_lat,2,100,,,,1.0,51.0,50.5,"));
        // A side without rows still writes the header.
        assert_eq!(csv(&lat, &[]).unwrap(), format!("{}\n", c.lines().next().unwrap()));
    }

    #[test]
    fn plot_has_every_series_and_point() {
        let csv = "series,size,value\nrrddmma,2,1.0\nperftest,2,0.5\nrrddmma,4,2.0\n";
        let ser = series_from_csv(csv).unwrap();
        assert_eq!(ser.len(), 2);
        let svg = svg("t <1>", "MiB/s", &ser);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(series_from_csv("h,size,v\na,2\n").is_err());
        assert!(series_from_csv("a,2,x\n").is_err());
    }
}
