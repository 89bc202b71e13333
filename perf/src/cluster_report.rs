//! Rank 0's report of `rrddmma-perf cluster`: per size, the per-flow matrix,
//! per-rank totals, the aggregate and Jain's fairness index, as a table,
//! JSON, CSV and two SVG charts (a heatmap and per-rank bars, one panel per
//! size).

use std::fmt::Write as _;

use serde::Serialize;

use crate::cluster_opts::ClusterOpts;

type Res<T> = Result<T, String>;

/// One flow's outcome, measured by its source rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    pub ops: u64,
    pub secs: f64,
    pub size: usize,
    /// Latency percentiles in µs: p50, p99, p99.9, mean (0 without samples).
    pub lat: [f64; 4],
}

impl FlowResult {
    fn mib_s(&self) -> f64 {
        if self.secs > 0.0 {
            (self.ops as f64 * self.size as f64) / self.secs / 1048576.0
        } else {
            0.0
        }
    }

    fn mpps(&self) -> f64 {
        if self.secs > 0.0 {
            self.ops as f64 / self.secs / 1e6
        } else {
            0.0
        }
    }

    pub fn encode(&self) -> String {
        format!(
            "{} {} {} {:e} {} {:e} {:e} {:e} {:e}\n",
            self.src, self.dst, self.ops, self.secs, self.size, self.lat[0], self.lat[1], self.lat[2], self.lat[3]
        )
    }

    pub fn decode(line: &str) -> Res<FlowResult> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("malformed flow result {line:?}");
        if w.len() != 9 {
            return Err(bad());
        }
        let f = |i: usize| w[i].parse::<f64>().map_err(|_| bad());
        Ok(FlowResult {
            src: w[0].parse().map_err(|_| bad())?,
            dst: w[1].parse().map_err(|_| bad())?,
            ops: w[2].parse().map_err(|_| bad())?,
            secs: f(3)?,
            size: w[4].parse().map_err(|_| bad())?,
            lat: [f(5)?, f(6)?, f(7)?, f(8)?],
        })
    }
}

/// Rank 0's view of another rank's result lines: what they may say.
#[derive(Clone, Copy, Debug)]
pub struct Expect<'a> {
    /// Ranks in the cluster.
    pub ranks: u32,
    /// The sizes every rank runs.
    pub sizes: &'a [usize],
}

/// Parses rank `rank`'s gathered results (one [`FlowResult::encode`] line
/// per flow), checking every value against `e`: a line that is malformed or
/// out of range is an error naming the rank, the line and the value, never
/// a panic in the report.
pub fn decode_rank(rank: usize, text: &str, e: Expect) -> Res<Vec<FlowResult>> {
    let max_lines = (e.ranks as usize).saturating_sub(1) * e.sizes.len();
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        if k >= max_lines {
            return Err(format!(
                "rank {rank} sent more than {max_lines} result lines (one per flow and size at most; do all ranks run \
                 the same -s with the same number of ranks?)"
            ));
        }
        let f = FlowResult::decode(line).map_err(|m| format!("rank {rank}: {m}"))?;
        let bad = |what: String| Err(format!("rank {rank} sent an out-of-range result in {line:?}: {what}"));
        if f.src as usize != rank {
            return bad(format!("source rank {} (a rank reports only its own flows)", f.src));
        }
        if f.dst >= e.ranks || f.dst == f.src {
            return bad(format!("destination rank {} (ranks are 0..{}, not the source)", f.dst, e.ranks));
        }
        if !e.sizes.contains(&f.size) {
            return bad(format!("size {} (this run's sizes are {:?})", f.size, e.sizes));
        }
        if f.ops.checked_mul(f.size as u64).is_none() {
            return bad(format!("{} requests of {} bytes (the byte count passes 2^64)", f.ops, f.size));
        }
        if let Some(v) = std::iter::once(f.secs).chain(f.lat).find(|v| !v.is_finite() || *v < 0.0) {
            return bad(format!("time {v} (times are finite and not negative)"));
        }
        out.push(f);
    }
    Ok(out)
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || q == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * q)
}

/// The flows of one message size.
struct SizeRun {
    size: usize,
    flows: Vec<FlowResult>,
}

impl SizeRun {
    fn bw_flows(&self) -> impl Iterator<Item = &FlowResult> {
        self.flows.iter().filter(|f| f.ops > 0)
    }

    /// (out MiB/s, in MiB/s) per rank of `n`.
    fn totals(&self, n: u32) -> Vec<(f64, f64)> {
        let mut t = vec![(0.0, 0.0); n as usize];
        // Ranks are checked when the results are decoded (`decode_rank`);
        // anything else is left out rather than indexed.
        for f in self.bw_flows() {
            if let Some(s) = t.get_mut(f.src as usize) {
                s.0 += f.mib_s();
            }
            if let Some(d) = t.get_mut(f.dst as usize) {
                d.1 += f.mib_s();
            }
        }
        t
    }

    fn aggregate(&self) -> f64 {
        self.bw_flows().map(FlowResult::mib_s).sum()
    }

    fn fairness(&self) -> f64 {
        jain(&self.bw_flows().map(FlowResult::mib_s).collect::<Vec<_>>())
    }
}

/// The JSON document (`--json`).
#[derive(Serialize)]
struct ReportJson<'a> {
    tool: &'static str,
    mode: &'static str,
    pattern: &'static str,
    op: &'static str,
    ranks: u32,
    qps_per_pair: u32,
    threads_per_rank: u32,
    tx_depth: u32,
    /// `null` with `-D`.
    iterations_per_qp: Option<u64>,
    /// `null` without `-D`.
    duration_s: Option<f64>,
    lat_samples: u32,
    sizes: &'a [usize],
    results: Vec<SizeJson>,
}

/// One size's results.
#[derive(Serialize)]
struct SizeJson {
    size: usize,
    flows: Vec<FlowJson>,
    rank_totals: Vec<TotalJson>,
    aggregate_mib_s: f64,
    jain_fairness: f64,
}

#[derive(Serialize)]
struct FlowJson {
    src: u32,
    dst: u32,
    requests: u64,
    seconds: f64,
    bw_mib_s: f64,
    msg_rate_mpps: f64,
    lat_us: LatJson,
}

#[derive(Serialize)]
struct LatJson {
    p50: f64,
    p99: f64,
    p999: f64,
    avg: f64,
}

#[derive(Serialize)]
struct TotalJson {
    rank: usize,
    out_mib_s: f64,
    in_mib_s: f64,
}

/// A CSV row (`--csv`): the header comes from the field names.
#[derive(Serialize)]
struct FlowCsv {
    pattern: &'static str,
    op: &'static str,
    size: usize,
    qps_per_pair: u32,
    threads_per_rank: u32,
    src: u32,
    dst: u32,
    requests: u64,
    seconds: f64,
    bw_mib_s: f64,
    msg_rate_mpps: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    avg_us: f64,
}

/// Rank 0's view of every flow of every size.
pub struct Report<'a> {
    o: &'a ClusterOpts,
    n: u32,
    runs: Vec<SizeRun>,
}

/// Width and height of one SVG panel, and the panels per row.
const PANEL_COLUMNS: usize = 4;

impl<'a> Report<'a> {
    /// Groups `every` flow by size, in the order of `o.sizes`, each sorted
    /// by (source, destination).
    pub fn new(o: &'a ClusterOpts, n: u32, every: Vec<FlowResult>) -> Report<'a> {
        let mut runs: Vec<SizeRun> = o.sizes.iter().map(|&size| SizeRun { size, flows: Vec::new() }).collect();
        for f in every {
            if let Some(r) = runs.iter_mut().find(|r| r.size == f.size) {
                r.flows.push(f);
            }
        }
        for r in &mut runs {
            r.flows.sort_by_key(|f| (f.src, f.dst));
        }
        Report { o, n, runs }
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        for (i, r) in self.runs.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            let _ = writeln!(s, " size {} B", r.size);
            s.push_str(" src -> dst   requests   MiB/s        Mpps       p50[us]    p99[us]    p99.9[us]  avg[us]\n");
            for f in &r.flows {
                let _ = writeln!(
                    s,
                    " {:>3} -> {:<3}  {:<10} {:<12.2} {:<10.6} {:<10.2} {:<10.2} {:<10.2} {:.2}",
                    f.src,
                    f.dst,
                    f.ops,
                    f.mib_s(),
                    f.mpps(),
                    f.lat[0],
                    f.lat[1],
                    f.lat[2],
                    f.lat[3]
                );
            }
            s.push_str(" rank   out MiB/s    in MiB/s\n");
            for (rank, (o, i)) in r.totals(self.n).iter().enumerate() {
                let _ = writeln!(s, " {rank:<6} {o:<12.2} {i:.2}");
            }
            let _ = write!(s, " aggregate {:.2} MiB/s, Jain's fairness index {:.4}", r.aggregate(), r.fairness());
        }
        s
    }

    /// The report as JSON (schema in docs/perf.md).
    pub fn json(&self) -> Res<String> {
        let o = self.o;
        let results = self
            .runs
            .iter()
            .map(|r| SizeJson {
                size: r.size,
                flows: r
                    .flows
                    .iter()
                    .map(|f| FlowJson {
                        src: f.src,
                        dst: f.dst,
                        requests: f.ops,
                        seconds: f.secs,
                        bw_mib_s: f.mib_s(),
                        msg_rate_mpps: f.mpps(),
                        lat_us: LatJson { p50: f.lat[0], p99: f.lat[1], p999: f.lat[2], avg: f.lat[3] },
                    })
                    .collect(),
                rank_totals: r
                    .totals(self.n)
                    .into_iter()
                    .enumerate()
                    .map(|(rank, (out_mib_s, in_mib_s))| TotalJson { rank, out_mib_s, in_mib_s })
                    .collect(),
                aggregate_mib_s: r.aggregate(),
                jain_fairness: r.fairness(),
            })
            .collect();
        let doc = ReportJson {
            tool: "rrddmma-perf",
            mode: "cluster",
            pattern: o.pattern.name(),
            op: o.verb.name(),
            ranks: self.n,
            qps_per_pair: o.qps,
            threads_per_rank: o.threads,
            tx_depth: o.depth,
            iterations_per_qp: if o.duration.is_some() { None } else { Some(o.iters) },
            duration_s: o.duration,
            lat_samples: o.lat_samples,
            sizes: &o.sizes,
            results,
        };
        let mut s = serde_json::to_string_pretty(&doc).map_err(|e| format!("writing the JSON: {e}"))?;
        s.push('\n');
        Ok(s)
    }

    /// One CSV row per flow and size, with the run's settings repeated.
    pub fn csv(&self) -> Res<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for f in self.runs.iter().flat_map(|r| &r.flows) {
            w.serialize(FlowCsv {
                pattern: self.o.pattern.name(),
                op: self.o.verb.name(),
                size: f.size,
                qps_per_pair: self.o.qps,
                threads_per_rank: self.o.threads,
                src: f.src,
                dst: f.dst,
                requests: f.ops,
                seconds: f.secs,
                bw_mib_s: f.mib_s(),
                msg_rate_mpps: f.mpps(),
                p50_us: f.lat[0],
                p99_us: f.lat[1],
                p999_us: f.lat[2],
                avg_us: f.lat[3],
            })
            .map_err(|e| format!("writing the CSV: {e}"))?;
        }
        let bytes = w.into_inner().map_err(|e| format!("writing the CSV: {e}"))?;
        String::from_utf8(bytes).map_err(|e| format!("writing the CSV: {e}"))
    }

    /// One SVG holding `panels` (each of `w` × `h`, drawn by `draw` at an
    /// offset), `PANEL_COLUMNS` to a row, under `title`.
    fn grid(&self, title: &str, w: usize, h: usize, draw: impl Fn(&mut String, &SizeRun, usize, usize)) -> String {
        let cols = self.runs.len().clamp(1, PANEL_COLUMNS);
        let rows = self.runs.len().div_ceil(cols).max(1);
        let (tw, th) = (w * cols, 30 + h * rows);
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{tw}\" height=\"{th}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{title}</text>\n",
            tw / 2
        );
        for (i, r) in self.runs.iter().enumerate() {
            draw(&mut s, r, w * (i % cols), 30 + h * (i / cols));
        }
        s.push_str("</svg>\n");
        s
    }

    /// Per size, an N×N heatmap of bandwidth (source rows, destination
    /// columns).
    pub fn heatmap(&self) -> String {
        let n = self.n as usize;
        let cell = 60;
        let (x0, y0) = (60, 50);
        let (w, h) = (x0 + cell * n + 30, y0 + cell * n + 30);
        let title = format!("rrddmma-perf cluster {} {}: MiB/s per flow", self.o.pattern.name(), self.o.verb.name());
        self.grid(&title, w, h, |s, r, ox, oy| {
            let max = r.bw_flows().map(FlowResult::mib_s).fold(0.0, f64::max).max(1e-9);
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} B: destination rank</text>\n\
                 <text x=\"{}\" y=\"{}\" transform=\"rotate(-90 {} {})\" text-anchor=\"middle\">source rank</text>",
                ox + x0 + cell * n / 2,
                oy + 15,
                r.size,
                ox + 20,
                oy + y0 + cell * n / 2,
                ox + 20,
                oy + y0 + cell * n / 2
            );
            for i in 0..n {
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{i}</text>\n\
                     <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{i}</text>",
                    ox + x0 + cell * i + cell / 2,
                    oy + y0 - 4,
                    ox + x0 - 6,
                    oy + y0 + cell * i + cell / 2 + 4
                );
            }
            for src in 0..n {
                for dst in 0..n {
                    let v = r.flows.iter().find(|f| f.src as usize == src && f.dst as usize == dst).map(|f| f.mib_s());
                    let (fill, label) = match v {
                        Some(v) if v > 0.0 => {
                            let t = v / max;
                            let red = (255.0 * (1.0 - t)) as u8;
                            let green = (255.0 - 120.0 * t) as u8;
                            (format!("rgb({red},{green},255)"), format!("{v:.1}"))
                        }
                        _ => ("#eeeeee".to_string(), String::new()),
                    };
                    let _ = writeln!(
                        s,
                        "<rect x=\"{}\" y=\"{}\" width=\"{cell}\" height=\"{cell}\" fill=\"{fill}\" stroke=\"white\"/>\
                         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                        ox + x0 + cell * dst,
                        oy + y0 + cell * src,
                        ox + x0 + cell * dst + cell / 2,
                        oy + y0 + cell * src + cell / 2 + 4
                    );
                }
            }
        })
    }

    /// Per size, per-rank out/in bandwidth bars.
    pub fn bars(&self) -> String {
        let n = self.n as usize;
        let (x0, y0, hgt, group) = (50, 40, 160, 70);
        let (w, h) = (x0 + group * n + 20, y0 + hgt + 40);
        self.grid("rrddmma-perf cluster: per-rank MiB/s (blue: out, orange: in)", w, h, |s, r, ox, oy| {
            let t = r.totals(self.n);
            let max = t.iter().map(|(o, i)| o.max(*i)).fold(0.0, f64::max).max(1e-9);
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} B, Jain {:.3}</text>",
                ox + w / 2,
                oy + 15,
                r.size,
                r.fairness()
            );
            for (rank, (o, i)) in t.iter().enumerate() {
                for (k, (v, colour)) in [(o, "#4477aa"), (i, "#ee7733")].into_iter().enumerate() {
                    let bh = (v / max * hgt as f64) as usize;
                    let _ = writeln!(
                        s,
                        "<rect x=\"{}\" y=\"{}\" width=\"25\" height=\"{bh}\" fill=\"{colour}\"><title>{v:.2}</title></rect>",
                        ox + x0 + group * rank + 28 * k,
                        oy + y0 + hgt - bh
                    );
                }
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">rank {rank}</text>",
                    ox + x0 + group * rank + 26,
                    oy + y0 + hgt + 16
                );
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_opts::parse;

    #[test]
    fn fairness_and_round_trip() {
        assert!((jain(&[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        let f = FlowResult { src: 2, dst: 0, ops: 99, secs: 0.5, size: 4096, lat: [1.5, 2.5, 3.5, 1.75] };
        assert_eq!(FlowResult::decode(f.encode().trim()).unwrap(), f);
        assert!(FlowResult::decode("1 2 x").is_err());
    }

    fn flow(src: u32, dst: u32, size: usize, ops: u64) -> FlowResult {
        FlowResult { src, dst, ops, secs: 1.0, size, lat: [1.0, 2.0, 3.0, 1.5] }
    }

    #[test]
    fn every_size_gets_its_matrix_in_every_format() {
        let o = parse(["--pattern", "incast", "-s", "1048576,2097152", "-q", "2", "--threads", "2"]).unwrap();
        // Out of order, as gathered from the ranks.
        let every =
            vec![flow(2, 0, 2097152, 10), flow(1, 0, 1048576, 10), flow(2, 0, 1048576, 30), flow(1, 0, 2097152, 10)];
        let r = Report::new(&o, 3, every);
        assert_eq!(r.runs.iter().map(|x| x.size).collect::<Vec<_>>(), vec![1048576, 2097152]);
        assert_eq!(r.runs[0].flows.iter().map(|f| f.src).collect::<Vec<_>>(), vec![1, 2]);
        // 10 and 30 MiB/s: Jain = 40² / (2 · 1000) = 0.8; rank 0 takes in 40.
        assert!((r.runs[0].fairness() - 0.8).abs() < 1e-12);
        assert_eq!(r.runs[0].totals(3)[0], (0.0, 40.0));
        assert!((r.runs[1].fairness() - 1.0).abs() < 1e-12);
        let t = r.table();
        assert!(t.contains(" size 1048576 B\n") && t.contains(" size 2097152 B\n"));
        assert_eq!(t.matches("Jain's fairness index").count(), 2);
        let j: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!((j["qps_per_pair"].as_u64(), j["threads_per_rank"].as_u64()), (Some(2), Some(2)));
        assert_eq!(j["sizes"], serde_json::json!([1048576, 2097152]));
        assert_eq!(j["iterations_per_qp"].as_u64(), Some(o.iters));
        assert!(j["duration_s"].is_null());
        let res = j["results"].as_array().unwrap();
        assert_eq!(res.len(), 2);
        assert!((res[0]["jain_fairness"].as_f64().unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(res[0]["flows"][1]["src"].as_u64(), Some(2));
        assert!((res[0]["flows"][1]["bw_mib_s"].as_f64().unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(res[0]["rank_totals"][0]["in_mib_s"].as_f64(), Some(40.0));
        let c = r.csv().unwrap();
        assert_eq!(c.lines().count(), 5);
        assert_eq!(
            c.lines().next().unwrap(),
            "pattern,op,size,qps_per_pair,threads_per_rank,src,dst,requests,seconds,bw_mib_s,msg_rate_mpps,\
             p50_us,p99_us,p999_us,avg_us"
        );
        assert!(c.lines().nth(1).unwrap().starts_with("incast,write,1048576,2,2,1,0,10,"));
        let (h, b) = (r.heatmap(), r.bars());
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains("1048576 B: destination rank") && h.contains("2097152 B: destination rank"));
        assert!(b.contains("1048576 B, Jain 0.800") && b.contains("2097152 B, Jain 1.000"));
    }

    #[test]
    fn regression_out_of_range_or_malformed_result_line_names_the_rank() {
        let sizes = [4096usize, 65536];
        let e = Expect { ranks: 3, sizes: &sizes };
        let line = |f: &FlowResult| f.encode();
        let ok = flow(2, 0, 4096, 10);
        assert_eq!(decode_rank(2, &line(&ok), e).unwrap(), vec![ok.clone()]);
        let cases = [
            (line(&flow(2, 7, 4096, 10)), "destination rank 7"),
            (line(&flow(2, 4_000_000_000, 4096, 10)), "destination rank 4000000000"),
            (line(&flow(2, 2, 4096, 10)), "destination rank 2"),
            (line(&flow(0, 1, 4096, 10)), "source rank 0"),
            (line(&flow(2, 0, 512, 10)), "size 512"),
            (line(&flow(2, 0, 65536, u64::MAX / 2)), "passes 2^64"),
            (line(&FlowResult { secs: f64::NAN, ..ok.clone() }), "time NaN"),
            (line(&FlowResult { lat: [1.0, -2.0, 3.0, 1.0], ..ok.clone() }), "time -2"),
            ("2 0 ten 1e0 4096 1 2 3 4".to_string(), "malformed flow result"),
            ("2 0".to_string(), "malformed flow result"),
            (line(&ok).repeat(5), "more than 4 result lines"),
        ];
        for (text, want) in cases {
            let err = decode_rank(2, &text, e).unwrap_err();
            assert!(err.starts_with("rank 2") && err.contains(want), "{text:?}: {err}");
        }
        // The report itself cannot index past its ranks, whatever it is given.
        let o = parse(["-s", "4096"]).unwrap();
        let r = Report::new(&o, 3, vec![flow(9, 12, 4096, 10), ok]);
        assert_eq!(r.runs[0].totals(3).len(), 3);
        assert!(r.table().contains("aggregate"));
        assert!(r.bars().contains("rank 2"));
    }
}
