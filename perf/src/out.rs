//! Output: perftest-style tables, JSON, CSV, a progress bar and SVG plots.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use crate::args::{Opts, Test};
use crate::run::Outcome;

/// Latency statistics in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatStats {
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub avg: f64,
    pub stdev: f64,
    pub p99: f64,
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

/// Results as JSON.
pub fn json(o: &Opts, device: &str, clock: &str, rs: &[Outcome]) -> String {
    let mut s = format!(
        "{{\n  \"tool\": \"rrddmma-perf\",\n  \"test\": \"{}\",\n  \"device\": \"{}\",\n  \"clock\": \"{}\",\n  \"qps\": {},\n  \
         \"threads\": {},\n  \"tx_depth\": {},\n  \"post_list\": {},\n  \"cq_mod\": {},\n  \"inline\": {},\n  \
         \"events\": {},\n  \"results\": [",
        test_name(o),
        device.replace(['"', '\\'], "_"),
        clock,
        o.qps,
        o.threads,
        o.tx_depth,
        o.post_list,
        o.cq_mod,
        o.inline,
        o.events
    );
    for (i, r) in rs.iter().enumerate() {
        s.push_str(if i == 0 { "\n    {" } else { ",\n    {" });
        let _ = write!(s, "\"size\": {}, \"iterations\": {}, \"allocations_in_loop\": {}", r.size, r.iters, r.allocs);
        match (o.test, lat_stats(&r.lat_ns)) {
            (Test::Bw, _) => {
                let _ = write!(
                    s,
                    ", \"bw_mib_s\": {:.3}, \"bw_gbit_s\": {:.4}, \"msg_rate_mpps\": {:.6}",
                    r.bytes_per_sec / 1048576.0,
                    r.bytes_per_sec / 1.25e8,
                    r.ops_per_sec / 1e6
                );
            }
            (Test::Lat, Some(l)) => {
                let _ = write!(
                    s,
                    ", \"lat_us\": {{\"min\": {:.3}, \"p50\": {:.3}, \"avg\": {:.3}, \"stdev\": {:.3}, \
                     \"p99\": {:.3}, \"p99_9\": {:.3}, \"max\": {:.3}}}",
                    l.min, l.p50, l.avg, l.stdev, l.p99, l.p999, l.max
                );
            }
            (Test::Lat, None) => {}
        }
        s.push('}');
    }
    s.push_str("\n  ]\n}\n");
    s
}

/// Results as CSV, one row per size.
pub fn csv(o: &Opts, rs: &[Outcome]) -> String {
    let mut s = String::from(
        "test,size,iterations,bw_mib_s,bw_gbit_s,msg_rate_mpps,lat_min_us,lat_p50_us,lat_avg_us,\
         lat_p99_us,lat_p99_9_us,lat_max_us,allocations_in_loop\n",
    );
    for r in rs {
        let _ = write!(s, "{},{},{},", test_name(o), r.size, r.iters);
        if o.test == Test::Bw {
            let _ = write!(
                s,
                "{:.3},{:.4},{:.6},,,,,,,",
                r.bytes_per_sec / 1048576.0,
                r.bytes_per_sec / 1.25e8,
                r.ops_per_sec / 1e6
            );
        } else {
            let l = lat_stats(&r.lat_ns).unwrap_or_default();
            let _ = write!(s, ",,,{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},", l.min, l.p50, l.avg, l.p99, l.p999, l.max);
        }
        let _ = writeln!(s, "{}", r.allocs);
    }
    s
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
