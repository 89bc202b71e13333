//! Line charts for the cluster report: axes with ticks and labels, one
//! colour per line and a legend naming each (latency CDFs, throughput over
//! time).

use std::fmt::Write as _;

use crate::out::Series;

/// Colour-blind-safe line colours (Paul Tol's "bright" set), reused in turn.
const COLOURS: [&str; 7] = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A tick label: few digits, no trailing zeros.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The axes of a chart.
#[derive(Clone, Copy, Debug)]
pub struct Axes<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    /// A base-10 logarithmic x axis (values at or below 0 are left out).
    pub log_x: bool,
    /// The y axis's top (None: 10% above the largest value).
    pub y_max: Option<f64>,
}

/// An SVG line chart of `series` on `a`, with a legend to the right.
pub fn lines(a: Axes, series: &[Series]) -> String {
    let (w, h, l, r, t, b) = (760.0, 420.0, 70.0, 200.0, 40.0, 50.0);
    let fx = |x: f64| if a.log_x { x.log10() } else { x };
    let pts = || series.iter().flat_map(|s| s.points.iter()).filter(|p| !a.log_x || p.0 > 0.0);
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts() {
        x0 = x0.min(fx(x));
        x1 = x1.max(fx(x));
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if a.log_x {
        (x0, x1) = (x0.floor(), x1.ceil());
    } else {
        x0 = x0.min(0.0);
    }
    if x1 - x0 <= 0.0 {
        x1 = x0 + 1.0;
    }
    let y1 = a.y_max.unwrap_or(if y1 > 0.0 { y1 * 1.1 } else { 1.0 });
    let (pw, ph) = (w - l - r, h - t - b);
    let px = |x: f64| l + (fx(x) - x0) / (x1 - x0) * pw;
    let py = |y: f64| t + ph - y / y1 * ph;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n\
         <line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n\
         <text x=\"18\" y=\"{}\" transform=\"rotate(-90 18 {})\" text-anchor=\"middle\">{}</text>\n",
        l + pw / 2.0,
        esc(a.title),
        t + ph,
        l + pw,
        t + ph,
        t + ph,
        l + pw / 2.0,
        h - 12.0,
        esc(a.x),
        t + ph / 2.0,
        t + ph / 2.0,
        esc(a.y)
    );
    for k in 0..=4 {
        let v = y1 * f64::from(k) / 4.0;
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{l}\" y2=\"{y}\" stroke=\"black\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            l - 5.0,
            l - 8.0,
            py(v) + 4.0,
            tick(v),
            y = py(v)
        );
    }
    let xticks: Vec<f64> = if a.log_x {
        (x0 as i32..=x1 as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|k| x0 + (x1 - x0) * f64::from(k) / 5.0).collect()
    };
    for v in xticks {
        let x = px(v);
        let _ = writeln!(
            s,
            "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"black\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            t + ph,
            t + ph + 5.0,
            t + ph + 18.0,
            tick(v)
        );
    }
    s.push_str("<g class=\"legend\">\n");
    for (i, se) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let ly = t + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{c}\" stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">{}</text>",
            w - r + 15.0,
            w - r + 40.0,
            w - r + 45.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    s.push_str("</g>\n");
    for (i, se) in series.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = se
            .points
            .iter()
            .filter(|p| !a.log_x || p.0 > 0.0)
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            path.join(" "),
            esc(&se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_axes_ticks_legend_and_every_point() {
        let se = vec![
            Series { name: "0 -> 1".into(), points: vec![(1.0, 0.0), (10.0, 0.5), (100.0, 1.0)] },
            Series { name: "1 -> <2>".into(), points: vec![(2.0, 0.0), (0.0, 0.2), (20.0, 1.0)] },
        ];
        let s = lines(Axes { title: "CDF", x: "latency [us]", y: "fraction", log_x: true, y_max: Some(1.0) }, &se);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains(">latency [us]</text>") && s.contains(">fraction</text>"));
        assert!(s.contains("class=\"legend\"") && s.contains(">0 -&gt; 1</text>") && s.contains("1 -&gt; &lt;2&gt;"));
        // Decades 1, 10, 100 on the log axis; 0 is left out of a log axis.
        assert!(s.contains(">1.0</text>") && s.contains(">10.0</text>") && s.contains(">100</text>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert_eq!(s.matches(',').count(), 5, "3 + 2 points (the one at x = 0 is not on a log axis)");
        let lin = lines(Axes { title: "t", x: "s", y: "MiB/s", log_x: false, y_max: None }, &se);
        assert_eq!(lin.matches(',').count(), 6);
    }
}
