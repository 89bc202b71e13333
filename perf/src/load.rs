//! What a cluster flow offers: its arrival process (closed loop, or open
//! loop at a fixed or Poisson rate), its mix of operations and its
//! distribution of message sizes, with the seeded generator that draws
//! them. Parsed from `--rate`, `--mix` and `--size-dist` (or a scenario
//! file's keys of the same names).

use crate::args::Verb;

type Res<T> = Result<T, String>;

/// The most requests a flow's QP keeps waiting for room in its send queue;
/// arrivals beyond them are dropped (counted, never posted).
pub const BACKLOG: usize = 4096;

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// A new request as soon as one completes (`-t` in flight per QP).
    Closed,
    /// Open loop, this many requests per second, evenly spaced.
    Fixed(f64),
    /// Open loop, exponential inter-arrival times of this mean rate.
    Poisson(f64),
}

impl Rate {
    /// Requests per second offered (None in closed loop).
    pub fn offered(self) -> Option<f64> {
        match self {
            Rate::Closed => None,
            Rate::Fixed(r) | Rate::Poisson(r) => Some(r),
        }
    }

    /// The same process at `1 / parts` of the rate (a flow spread over
    /// `parts` QPs).
    pub fn split(self, parts: u32) -> Rate {
        let p = f64::from(parts.max(1));
        match self {
            Rate::Closed => Rate::Closed,
            Rate::Fixed(r) => Rate::Fixed(r / p),
            Rate::Poisson(r) => Rate::Poisson(r / p),
        }
    }

    /// Seconds to the next arrival.
    pub fn gap(self, rng: &mut Rng) -> f64 {
        match self {
            Rate::Closed => 0.0,
            Rate::Fixed(r) => 1.0 / r,
            // Inverse transform: -ln(U) / rate with U in (0, 1].
            Rate::Poisson(r) => -(1.0 - rng.unit()).ln() / r,
        }
    }

    /// `closed`, `100000/s` or `poisson:100000/s`.
    pub fn name(self) -> String {
        match self {
            Rate::Closed => "closed".into(),
            Rate::Fixed(r) => format!("{r}/s"),
            Rate::Poisson(r) => format!("poisson:{r}/s"),
        }
    }
}

/// A count with an optional k/m/g suffix (10^3, 10^6, 10^9): `100k`, `2.5m`.
fn count(v: &str) -> Option<f64> {
    let v = v.trim();
    let (num, mul) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1e3),
        (i, 'm' | 'M') => (&v[..i], 1e6),
        (i, 'g' | 'G') => (&v[..i], 1e9),
        _ => (v, 1.0),
    };
    num.parse::<f64>().ok().map(|x| x * mul).filter(|x| x.is_finite())
}

/// Parses `--rate`: `closed`, `R` (fixed spacing) or `poisson:R`, R
/// requests per second per flow with an optional k/m/g suffix.
pub fn parse_rate(v: &str) -> Res<Rate> {
    // As the report names them: `100000/s`.
    let v = v.strip_suffix("/s").unwrap_or(v);
    if v == "closed" {
        return Ok(Rate::Closed);
    }
    let (poisson, r) = match v.split_once(':') {
        Some(("poisson", r)) => (true, r),
        Some(("fixed", r)) => (false, r),
        Some((kind, _)) => return Err(format!("--rate {v:?}: {kind:?} is no arrival process (fixed or poisson)")),
        None => (false, v),
    };
    match count(r) {
        Some(x) if (1.0..=1e9).contains(&x) => Ok(if poisson { Rate::Poisson(x) } else { Rate::Fixed(x) }),
        _ => Err(format!(
            "--rate {v:?}: expected requests per second per flow from 1 to 1g, e.g. 100k, fixed:5000 or poisson:100k"
        )),
    }
}

/// Weighted operations; weights are relative (they need not add to 100).
#[derive(Clone, Debug, PartialEq)]
pub struct Mix {
    /// (operation, cumulative weight), in the order given.
    cum: Vec<(Verb, u64)>,
}

impl Mix {
    /// Every request is `v`.
    pub fn only(v: Verb) -> Mix {
        Mix { cum: vec![(v, 1)] }
    }

    /// The operations in the mix, in the order given.
    pub fn verbs(&self) -> impl Iterator<Item = Verb> + '_ {
        self.cum.iter().map(|c| c.0)
    }

    /// Draws an operation.
    pub fn pick(&self, rng: &mut Rng) -> Verb {
        pick_cum(&self.cum, rng)
    }

    /// `write:70,read:30`.
    pub fn name(&self) -> String {
        let mut prev = 0;
        let parts: Vec<String> = self
            .cum
            .iter()
            .map(|&(v, c)| {
                let s = format!("{}:{}", v.name(), c - prev);
                prev = c;
                s
            })
            .collect();
        parts.join(",")
    }
}

/// The value of `cum` (cumulative weights, the last the total) under a
/// uniform draw.
fn pick_cum<T: Copy>(cum: &[(T, u64)], rng: &mut Rng) -> T {
    let total = cum.last().map_or(1, |c| c.1);
    let x = rng.below(total);
    let i = cum.partition_point(|c| c.1 <= x);
    cum[i.min(cum.len() - 1)].0
}

/// A comma-separated `KEY:WEIGHT` list (whole weights, each at least 1, a
/// key at most once) with cumulative weights.
fn weighted<T: Copy + PartialEq>(flag: &str, v: &str, key: impl Fn(&str) -> Res<T>) -> Res<Vec<(T, u64)>> {
    let mut cum: Vec<(T, u64)> = Vec::new();
    let mut total = 0u64;
    for part in v.split(',') {
        let (k, w) = part.trim().split_once(':').ok_or_else(|| {
            format!("{flag} {v:?}: {part:?} has no weight (give KEY:WEIGHT pairs, e.g. write:70,read:30)")
        })?;
        let k = key(k.trim())?;
        let w: u64 = w
            .trim()
            .parse()
            .ok()
            .filter(|w| (1..=1_000_000).contains(w))
            .ok_or_else(|| format!("{flag} {v:?}: weight {w:?} is not a whole number from 1 to 1000000"))?;
        if cum.iter().any(|c| c.0 == k) {
            return Err(format!("{flag} {v:?}: {part:?} repeats a key"));
        }
        total += w;
        cum.push((k, total));
    }
    Ok(cum)
}

/// Parses `--mix`: `write:70,read:20,atomic:10`. Send is not mixed: a
/// receiver must know how many messages to expect.
pub fn parse_mix(v: &str) -> Res<Mix> {
    let cum = weighted("--mix", v, |k| match k {
        "write" => Ok(Verb::Write),
        "read" => Ok(Verb::Read),
        "atomic" => Ok(Verb::Atomic),
        "send" => Err(format!("--mix {v:?}: send cannot be mixed (its receiver counts the messages it expects)")),
        _ => Err(format!("--mix {v:?}: {k:?} is not an operation (write, read or atomic)")),
    })?;
    Ok(Mix { cum })
}

/// How message sizes are drawn (atomics are always 8 bytes).
#[derive(Clone, Debug, PartialEq)]
pub enum Sizes {
    Fixed(usize),
    /// Uniform over `lo..=hi` bytes.
    Uniform(usize, usize),
    /// (size, cumulative weight).
    Weighted(Vec<(usize, u64)>),
}

/// The largest message: 8 MiB, as `-a`'s sweep.
pub const MAX_SIZE: usize = 1 << 23;

fn one_size(flag: &str, v: &str, s: &str) -> Res<usize> {
    s.trim()
        .parse()
        .ok()
        .filter(|s| (1..=MAX_SIZE).contains(s))
        .ok_or_else(|| format!("{flag} {v:?}: {s:?} is not a size from 1 to {MAX_SIZE} bytes"))
}

impl Sizes {
    /// The largest size drawn.
    pub fn max(&self) -> usize {
        match self {
            Sizes::Fixed(s) => *s,
            Sizes::Uniform(_, hi) => *hi,
            Sizes::Weighted(w) => w.iter().map(|c| c.0).max().unwrap_or(0),
        }
    }

    /// The mean size drawn.
    pub fn mean(&self) -> f64 {
        match self {
            Sizes::Fixed(s) => *s as f64,
            Sizes::Uniform(lo, hi) => (*lo + *hi) as f64 / 2.0,
            Sizes::Weighted(w) => {
                let mut prev = 0;
                let total = w.last().map_or(1, |c| c.1) as f64;
                w.iter()
                    .map(|&(s, c)| {
                        let p = (c - prev) as f64;
                        prev = c;
                        s as f64 * p / total
                    })
                    .sum()
            }
        }
    }

    /// The size of a request of `v`: drawn, or 8 for atomics.
    pub fn for_op(&self, v: Verb, rng: &mut Rng) -> usize {
        if v == Verb::Atomic {
            8
        } else {
            self.pick(rng)
        }
    }

    /// Draws a size.
    pub fn pick(&self, rng: &mut Rng) -> usize {
        match self {
            Sizes::Fixed(s) => *s,
            Sizes::Uniform(lo, hi) => lo + rng.below((hi - lo + 1) as u64) as usize,
            Sizes::Weighted(w) => pick_cum(w, rng),
        }
    }

    /// `4096`, `uniform:64-4096` or `64:80,4096:20`.
    pub fn name(&self) -> String {
        match self {
            Sizes::Fixed(s) => s.to_string(),
            Sizes::Uniform(lo, hi) => format!("uniform:{lo}-{hi}"),
            Sizes::Weighted(w) => {
                let mut prev = 0;
                let p: Vec<String> = w
                    .iter()
                    .map(|&(s, c)| {
                        let t = format!("{s}:{}", c - prev);
                        prev = c;
                        t
                    })
                    .collect();
                p.join(",")
            }
        }
    }
}

/// Parses `--size-dist`: `N` (fixed), `uniform:LO-HI`, `SIZE:WEIGHT,...`
/// or `file:PATH` (one `SIZE` or `SIZE WEIGHT` per line, `#` comments; a
/// size listed without a weight counts 1 each time it appears).
pub fn parse_sizes(v: &str) -> Res<Sizes> {
    const F: &str = "--size-dist";
    if let Some(path) = v.strip_prefix("file:") {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{F} {v:?}: cannot read {path}: {e}"))?;
        return sizes_from_text(path, &text);
    }
    if let Some(r) = v.strip_prefix("uniform:") {
        let (lo, hi) =
            r.split_once('-').ok_or_else(|| format!("{F} {v:?}: expected uniform:LO-HI, e.g. uniform:64-4096"))?;
        let (lo, hi) = (one_size(F, v, lo)?, one_size(F, v, hi)?);
        if lo > hi {
            return Err(format!("{F} {v:?}: the range's low end {lo} is above its high end {hi}"));
        }
        return Ok(Sizes::Uniform(lo, hi));
    }
    if v.contains(':') {
        return Ok(Sizes::Weighted(weighted(F, v, |k| one_size(F, v, k))?));
    }
    Ok(Sizes::Fixed(one_size(F, v, v)?))
}

/// A size file's distribution; errors name the file and the line.
pub fn sizes_from_text(path: &str, text: &str) -> Res<Sizes> {
    let mut w: Vec<(usize, u64)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |what: &str| format!("{path}, line {}: {line:?}: {what}", i + 1);
        let mut it = line.split_whitespace();
        let s: usize = it
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|s| (1..=MAX_SIZE).contains(s))
            .ok_or_else(|| bad(&format!("expected a size from 1 to {MAX_SIZE} bytes")))?;
        let weight: u64 = match it.next() {
            None => 1,
            Some(x) => x
                .parse()
                .ok()
                .filter(|x| (1..=1_000_000_000).contains(x))
                .ok_or_else(|| bad("the weight is not a whole number from 1 to 1000000000"))?,
        };
        if it.next().is_some() {
            return Err(bad("expected SIZE or SIZE WEIGHT"));
        }
        match w.iter_mut().find(|e| e.0 == s) {
            Some(e) => e.1 += weight,
            None => w.push((s, weight)),
        }
        if w.len() > 65_536 {
            return Err(bad("more than 65536 distinct sizes"));
        }
    }
    if w.is_empty() {
        return Err(format!("{path}: no sizes (one SIZE or SIZE WEIGHT per line)"));
    }
    let mut total = 0;
    for e in &mut w {
        total += e.1;
        e.1 = total;
    }
    Ok(Sizes::Weighted(w))
}

/// One flow's offered load.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub rate: Rate,
    pub mix: Mix,
    pub sizes: Sizes,
}

/// SplitMix64: small, fast, and the same sequence for the same seed on
/// every host, so a run's arrivals can be reproduced.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n ≥ 1), by widening multiplication.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_gaps_have_the_mean_and_variance_of_an_exponential() {
        let (r, n) = (1000.0, 200_000);
        let mut rng = Rng::new(42);
        let g: Vec<f64> = (0..n).map(|_| Rate::Poisson(r).gap(&mut rng)).collect();
        let mean = g.iter().sum::<f64>() / n as f64;
        let var = g.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        // Exponential(λ): mean 1/λ, variance 1/λ²; 200k samples put both
        // well within 2%.
        assert!((mean * r - 1.0).abs() < 0.02, "mean {mean}");
        assert!((var * r * r - 1.0).abs() < 0.02, "variance {var}");
        assert!(g.iter().all(|x| x.is_finite() && *x >= 0.0));
        // Arrivals in 1 ms windows are Poisson(1): index of dispersion 1.
        let mut t = 0.0;
        let mut bins = vec![0u32; 1000];
        let mut rng = Rng::new(7);
        while t < 1.0 {
            t += Rate::Poisson(1e6).gap(&mut rng);
            if t < 1.0 {
                bins[(t * 1000.0) as usize] += 1;
            }
        }
        let m = bins.iter().map(|&b| f64::from(b)).sum::<f64>() / 1000.0;
        let v = bins.iter().map(|&b| (f64::from(b) - m).powi(2)).sum::<f64>() / 999.0;
        assert!((m / 1000.0 - 1.0).abs() < 0.01 && (v / m - 1.0).abs() < 0.1, "mean {m}, variance {v}");
        assert_eq!(Rate::Fixed(250.0).gap(&mut rng), 0.004);
        assert_eq!(Rate::Poisson(100.0).split(4), Rate::Poisson(25.0));
    }

    #[test]
    fn rates_parse_with_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_rate("100k"), Ok(Rate::Fixed(100_000.0)));
        assert_eq!(parse_rate("poisson:2.5m"), Ok(Rate::Poisson(2_500_000.0)));
        assert_eq!(parse_rate("fixed:5000"), Ok(Rate::Fixed(5000.0)));
        assert_eq!(parse_rate("closed"), Ok(Rate::Closed));
        for r in [Rate::Fixed(1500.0), Rate::Poisson(2e5)] {
            assert_eq!(parse_rate(&r.name()), Ok(r), "names parse back");
        }
        assert!(parse_rate("gauss:10").unwrap_err().contains("\"gauss\" is no arrival process"));
        for bad in ["0", "-5", "x", "poisson:", "2g", "inf"] {
            assert!(parse_rate(bad).unwrap_err().contains("requests per second per flow"), "{bad}");
        }
    }

    #[test]
    fn mixes_draw_their_proportions() {
        let m = parse_mix("write:70,read:20,atomic:10").unwrap();
        assert_eq!(m.name(), "write:70,read:20,atomic:10");
        let mut rng = Rng::new(1);
        let mut c = [0u32; 3];
        let n = 100_000;
        for _ in 0..n {
            c[match m.pick(&mut rng) {
                Verb::Write => 0,
                Verb::Read => 1,
                _ => 2,
            }] += 1;
        }
        for (got, want) in c.iter().zip([0.7, 0.2, 0.1]) {
            assert!((f64::from(*got) / f64::from(n) - want).abs() < 0.01, "{c:?}");
        }
        assert_eq!(Mix::only(Verb::Read).name(), "read:1");
        assert!(parse_mix("write:70,send:30").unwrap_err().contains("send cannot be mixed"));
        assert!(parse_mix("write:70,cas:30").unwrap_err().contains("\"cas\" is not an operation"));
        assert!(parse_mix("write").unwrap_err().contains("has no weight"));
        assert!(parse_mix("write:0").unwrap_err().contains("weight \"0\""));
        assert!(parse_mix("write:1,write:2").unwrap_err().contains("repeats a key"));
    }

    #[test]
    fn size_distributions_draw_in_range_and_in_proportion() {
        let mut rng = Rng::new(3);
        let u = parse_sizes("uniform:64-4096").unwrap();
        let xs: Vec<usize> = (0..100_000).map(|_| u.pick(&mut rng)).collect();
        assert!(xs.iter().all(|x| (64..=4096).contains(x)));
        assert!(xs.contains(&64) && xs.contains(&4096));
        let mean = xs.iter().sum::<usize>() as f64 / xs.len() as f64;
        assert!((mean / u.mean() - 1.0).abs() < 0.01, "{mean}");
        let w = parse_sizes("64:80,4096:20").unwrap();
        assert_eq!((w.max(), w.mean(), w.name()), (4096, 64.0 * 0.8 + 4096.0 * 0.2, "64:80,4096:20".into()));
        let small = (0..100_000).filter(|_| w.pick(&mut rng) == 64).count();
        assert!((small as f64 / 100_000.0 - 0.8).abs() < 0.01, "{small}");
        assert_eq!(parse_sizes("1024"), Ok(Sizes::Fixed(1024)));
        assert!(parse_sizes("uniform:4096-64").unwrap_err().contains("low end 4096 is above its high end 64"));
        assert!(parse_sizes("uniform:64").unwrap_err().contains("uniform:LO-HI"));
        assert!(parse_sizes("0").unwrap_err().contains("not a size from 1"));
        assert!(parse_sizes("16777216").unwrap_err().contains("not a size from 1"));
        assert!(parse_sizes("file:/nonexistent/sizes").unwrap_err().contains("cannot read /nonexistent/sizes"));
    }

    #[test]
    fn size_files_name_the_bad_line() {
        let s = sizes_from_text("s.txt", "# sizes\n64 3\n\n4096\n64 1  # more\n").unwrap();
        assert_eq!(s, Sizes::Weighted(vec![(64, 4), (4096, 5)]));
        assert!(sizes_from_text("s.txt", "64\nabc\n").unwrap_err().starts_with("s.txt, line 2: \"abc\""));
        assert!(sizes_from_text("s.txt", "64 0\n").unwrap_err().contains("line 1"));
        assert!(sizes_from_text("s.txt", "64 1 2\n").unwrap_err().contains("SIZE or SIZE WEIGHT"));
        assert!(sizes_from_text("s.txt", "# nothing\n").unwrap_err().contains("no sizes"));
    }

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(9), Rng::new(9));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert!((0..1000).all(|_| a.below(5) < 5));
    }
}
