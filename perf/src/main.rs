//! `rrddmma-perf`: perftest's RDMA microbenchmarks on rrddmma, speaking
//! perftest's out-of-band exchange so either side can be perftest, with
//! latency percentiles, JSON/CSV output, sweeps with a progress bar and SVG
//! plots, threads, and a counting allocator that fails the run if a measured
//! loop allocates.

mod alloc;
mod args;
mod clock;
mod cluster;
mod cluster_dc;
mod cluster_env;
mod cluster_flow;
mod cluster_opts;
mod cluster_report;
mod cluster_res;
mod cm;
mod dc;
mod dc_dual;
mod getopt;
mod gpu;
mod knobs;
mod load;
mod oob;
mod out;
mod pace;
mod payload;
mod place;
mod plot;
mod regions;
mod run;
mod scenario;
mod srq;
mod stats;
mod ud;

use std::process::ExitCode;

use args::{Opts, Test, Verb};

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

fn write_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn plot(args: &[String]) -> Result<(), String> {
    if let [input, rest @ ..] = args {
        if input.ends_with(".json") && rest.len() <= 1 {
            // A cluster report: every figure, as --svg draws them.
            let text = std::fs::read_to_string(input).map_err(|e| format!("cannot read {input}: {e}"))?;
            let svg = rest.first().cloned().unwrap_or_else(|| format!("{}.svg", input.trim_end_matches(".json")));
            return cluster_report::redraw(&text, svg.as_ref()).map_err(|e| format!("{input}: {e}"));
        }
    }
    let [input, output, rest @ ..] = args else {
        return Err(
            "usage: rrddmma-perf plot IN.csv OUT.svg [TITLE] [Y-LABEL], or plot RESULTS.json [OUT.svg] (a cluster report)"
                .into(),
        );
    };
    let text = std::fs::read_to_string(input).map_err(|e| format!("cannot read {input}: {e}"))?;
    let series = out::series_from_csv(&text)?;
    let title = rest.first().map_or("rrddmma-perf", String::as_str);
    let y = rest.get(1).map_or("value", String::as_str);
    write_file(output.as_ref(), &out::svg(title, y, &series))
}

fn bench(o: &Opts) -> Result<(), String> {
    let (mut s, fitted) = run::setup(o)?;
    // From here on a wait for the peer may span its measured run.
    s.oob.run_waits();
    let o = &fitted;
    let client = s.oob.is_client();
    let sizes = args::sizes(o);
    println!(
        "rrddmma-perf {}_{} on {} port {}: {} {} QP(s), {} thread(s), tx depth {}, post list {}, CQ moderation {}, \
         inline {}, clock {}, completions by {}, {}",
        o.verb.name(),
        if o.test == Test::Bw { "bw" } else { "lat" },
        s.ctx.name(),
        o.ib_port,
        o.qps,
        o.conn.name(),
        o.threads,
        o.tx_depth,
        o.post_list,
        o.cq_mod,
        o.inline,
        s.clock.describe(s.clock_read_ns),
        if o.events { "events" } else { "polling" },
        if client { "client" } else { "server" }
    );
    for (m, r) in s.my.iter().zip(&s.rem) {
        println!(" local QPN {:#08x} PSN {:#08x} | remote QPN {:#08x} PSN {:#08x}", m.qpn, m.psn, r.qpn, r.psn);
    }
    let mut results = Vec::new();
    // -W: port counters, their change printed after each report row.
    let counted = || s.counters.as_ref().map_or(Ok(()), regions::Counters::print);
    // -w / -y: the first limit a result of this side fell below.
    let mut below: Option<String> = None;
    let mut judge = |bw: f64, rate: f64| {
        if below.is_none() {
            below = limits(o, bw, rate);
        }
    };
    let progress = out::Progress::new(sizes.len(), o.progress);
    match (o.test, client) {
        (Test::Bw, _) if o.bidir => {
            // perftest's duplex runs: both sides stream; one exchange before
            // each size (for SEND the set-up's last one is the first size's),
            // one after it in sweeps, then the reports.
            println!("{}", out::header(o));
            for (i, &size) in sizes.iter().enumerate() {
                if o.verb != Verb::Send || i > 0 {
                    s.oob.handshake(&s.my[0])?;
                }
                let r = run::bw_bidir(&s, o, size)?;
                if o.all && o.verb != Verb::Send {
                    s.oob.handshake(&s.my[0])?;
                }
                let rep = s.oob.reports(&run::report_of(o, &r))?;
                if o.check_payload {
                    // WRITE: what the peer wrote here; READ: what this side read.
                    let iters = if o.verb == Verb::Write { rep.iters } else { r.iters };
                    run::verify_bw(&s, o.verb, size, iters)?;
                }
                if o.all && o.verb == Verb::Send {
                    s.oob.handshake(&s.my[0])?;
                }
                println!("{}", out::row(o, &r));
                let mine = run::report_of(o, &r);
                judge(rep.bw_avg + mine.bw_avg, rep.msg_rate + mine.msg_rate);
                counted()?;
                println!(
                    " {:<10} {:<14} {:<20.2} {:<15.6} (reported by the peer; both directions: {:.2})",
                    rep.size,
                    rep.iters,
                    rep.bw_avg,
                    rep.msg_rate,
                    rep.bw_avg + run::report_of(o, &r).bw_avg
                );
                progress.step(i + 1, size);
                results.push(r);
            }
            s.oob.close(&s.my[0])?;
        }
        (Test::Bw, _) if o.verb == Verb::Send || (o.verb == Verb::Write && o.knobs.imm) => {
            // perftest's SEND and WRITE-with-immediate bandwidth: no report
            // exchange; the exchanges around each size are `oob::size_sync`'s.
            // The receiver counts messages.
            println!("{}", out::header(o));
            for (i, &size) in sizes.iter().enumerate() {
                let sync = oob::size_sync(o.verb, o.test, o.knobs.imm, o.all, i);
                if sync.before {
                    s.oob.handshake(&s.my[0])?;
                }
                let r = if client { run::bw_client(&s, o, size)? } else { run::send_bw_receiver(&s, o, size, None)? };
                if sync.after {
                    s.oob.handshake(&s.my[0])?;
                }
                println!("{}{}", out::row(o, &r), if client { "" } else { " (received)" });
                let mine = run::report_of(o, &r);
                judge(mine.bw_avg, mine.msg_rate);
                counted()?;
                progress.step(i + 1, size);
                results.push(r);
            }
            s.oob.close(&s.my[0])?;
        }
        (Test::Bw, true) if o.run_infinitely => {
            // perftest's --run_infinitely: one report per interval until
            // the process is stopped; the server waits in its exchange.
            println!("{}", out::header(o));
            let every = Opts { duration: Some(o.duration.unwrap_or(5.0)), ..o.clone() };
            loop {
                let r = run::bw_client(&s, &every, o.size)?;
                println!("{}", out::row(o, &r));
                if r.allocs > 0 {
                    return Err(format!("{} heap allocation(s) happened inside a measured loop", r.allocs));
                }
            }
        }
        (Test::Bw, true) => {
            println!("{}", out::header(o));
            for (i, &size) in sizes.iter().enumerate() {
                let r = run::bw_client(&s, o, size)?;
                if o.check_payload && o.verb == Verb::Read {
                    run::verify_bw(&s, o.verb, size, r.iters)?;
                }
                println!("{}", out::row(o, &r));
                let mine = run::report_of(o, &r);
                judge(mine.bw_avg, mine.msg_rate);
                counted()?;
                progress.step(i + 1, size);
                results.push(r);
            }
            s.oob.handshake(&s.my[0])?;
            let last = results.last().cloned().unwrap_or_default();
            s.oob.reports(&run::report_of(o, &last))?;
            s.oob.close(&s.my[0])?;
        }
        (Test::Bw, false) => {
            s.oob.end_of_run(&s.my[0])?;
            let rep = s.oob.reports(&oob::BwReport::default())?;
            println!("{}", out::header(o));
            println!(
                " {:<10} {:<14} {:<20.2} {:<15.6} (reported by the client)",
                rep.size, rep.iters, rep.bw_avg, rep.msg_rate
            );
            counted()?;
            if o.check_payload && o.verb == Verb::Write {
                run::verify_bw(&s, o.verb, rep.size as usize, rep.iters)?;
                println!(" payload checked: every region the client wrote holds its pattern");
            }
            s.oob.close(&s.my[0])?;
        }
        (Test::Lat, _) if client || matches!(o.verb, Verb::Write | Verb::Send) => {
            println!("{}", out::header(o));
            for (i, &size) in sizes.iter().enumerate() {
                // perftest's send lat sweeps and write-with-immediate: the
                // exchange before a size that follows posting its receives
                // (`oob::size_sync`).
                if oob::size_sync(o.verb, o.test, o.knobs.imm, o.all, i).before {
                    s.oob.handshake(&s.my[0])?;
                }
                let r = run::lat(&s, o, size)?;
                // perftest's -U and -H: "#, usec" then "N, value" per sample,
                // written in large blocks (a -D run can list millions).
                for (on, v) in [(o.unsorted, &r.unsorted_ns), (o.histogram, &r.lat_ns)] {
                    if on {
                        use std::io::Write;
                        let mut w = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
                        let listed = writeln!(w, "#, usec")
                            .and_then(|()| {
                                v.iter().enumerate().try_for_each(|(k, ns)| writeln!(w, "{}, {}", k + 1, ns / 1000.0))
                            })
                            .and_then(|()| w.flush());
                        listed.map_err(|e| format!("writing the sample listing: {e}"))?;
                    }
                }
                println!("{}", out::row(o, &r));
                counted()?;
                progress.step(i + 1, size);
                results.push(r);
            }
            // perftest closes READ, atomic and SEND latency tests with the
            // closing handshake; WRITE latency ends without one (with -D this
            // side stays until the peer is done too: see `Oob::linger`).
            if o.verb != Verb::Write {
                s.oob.close(&s.my[0])?;
            } else if o.duration.is_some() {
                s.oob.linger(std::time::Duration::from_secs(10));
            }
        }
        (Test::Lat, _) => {
            // READ and atomic latency: the server only waits for the end.
            s.oob.close(&s.my[0])?;
            println!(" server done");
        }
    }
    if let Some(p) = &o.json {
        write_file(p, &out::json(o, s.ctx.name(), (s.clock.name(), s.clock_read_ns), &results)?)?;
    }
    if let Some(p) = &o.csv {
        write_file(p, &out::csv(o, &results)?)?;
    }
    if let Some(p) = &o.svg {
        let (y, points): (&str, Vec<(f64, f64)>) = match o.test {
            Test::Bw if o.gbits => {
                ("Gb/s", results.iter().map(|r| (r.size as f64, r.bytes_per_sec / 1.25e8)).collect())
            }
            Test::Bw => ("MiB/s", results.iter().map(|r| (r.size as f64, r.bytes_per_sec / 1048576.0)).collect()),
            Test::Lat => (
                "median latency (us)",
                results.iter().map(|r| (r.size as f64, out::lat_stats(&r.lat_ns).map_or(0.0, |l| l.p50))).collect(),
            ),
        };
        let title = format!("rrddmma-perf {}", o.verb.name());
        write_file(p, &out::svg(&title, y, &[out::Series { name: "rrddmma-perf".into(), points }]))?;
    }
    let allocs: u64 = results.iter().map(|r| r.allocs).sum();
    println!(" heap allocations inside measured loops: {allocs}");
    if o.events {
        println!(" completion events: {}", run::completion_events());
    }
    if o.knobs.imm {
        let (n, last) = run::imm_seen();
        println!(" immediate data: {n} receive completion(s) carried it, the last {last:#x}");
    }
    if let Some(e) = below {
        return Err(e);
    }
    if allocs > 0 {
        return Err(format!("{allocs} heap allocation(s) happened inside measured loops"));
    }
    Ok(())
}

/// perftest's verifier limits (`-w`, `-y`): the error when a bandwidth
/// test's result `bw` (in the report's units) or message rate `rate`
/// (Mpps) is below the limit given.
fn limits(o: &Opts, bw: f64, rate: f64) -> Option<String> {
    let unit = if o.gbits { "Gb/s" } else { "MiB/s" };
    match (o.knobs.limit_bw, o.knobs.limit_msgrate) {
        (Some(l), _) if bw < l => {
            Some(format!("BW result is below bw limit: {bw:.2} {unit} < --limit_bw {l} (perftest's verifier)"))
        }
        (_, Some(l)) if rate < l => Some(format!(
            "Msg rate is below msg_rate limit: {rate:.6} Mpps < --limit_msgrate {l} (perftest's verifier)"
        )),
        _ => None,
    }
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if argv.is_empty() || (argv[0] != "cluster" && argv.iter().any(|a| a == "-h" || a == "--help")) {
        println!("{}", args::USAGE);
        return if argv.is_empty() { ExitCode::from(2) } else { ExitCode::SUCCESS };
    }
    let result = if argv[0] == "cluster" {
        if argv.iter().any(|a| a == "-h" || a == "--help") {
            println!("{}", cluster_opts::USAGE);
            return ExitCode::SUCCESS;
        }
        if let Some(phases) = scenario::from_args(&argv[1..]) {
            match phases {
                Ok((phases, ranks)) => cluster::run(&phases, ranks),
                Err(e) => {
                    eprintln!("rrddmma-perf cluster: {e}");
                    return ExitCode::from(2);
                }
            }
        } else {
            match cluster_opts::parse(&argv[1..]) {
                Ok(o) => cluster::run(std::slice::from_ref(&o), None),
                Err(e) => {
                    eprintln!("rrddmma-perf cluster: {e}\n\n{}", cluster_opts::USAGE);
                    return ExitCode::from(2);
                }
            }
        }
    } else if argv[0] == "plot" {
        match argv[1..].iter().map(|a| a.clone().into_string()).collect::<Result<Vec<_>, _>>() {
            Ok(rest) => plot(&rest),
            Err(a) => {
                eprintln!("rrddmma-perf: argument {a:?} is not valid UTF-8");
                return ExitCode::from(2);
            }
        }
    } else {
        match args::parse(&argv) {
            Ok(o) => bench(&o),
            Err(e) => {
                eprintln!("rrddmma-perf: {e}\n\n{}", args::USAGE);
                return ExitCode::from(2);
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One write: the ranks of a cluster run share a terminal, and
            // `eprintln!` writes its pieces one by one (they interleaved).
            let line = format!("rrddmma-perf: {e}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// perftest's verifier: a result below `-w` (in the report's units) or
    /// `-y` (Mpps) is the error, equal or above passes; no limit, no error.
    #[test]
    fn limits_fail_below_and_pass_at_or_above() {
        let o = |line: &str| crate::args::parse(line.split_whitespace()).unwrap();
        let w = o("write bw -w 10 -y 0.5");
        assert_eq!(super::limits(&w, 10.0, 0.5), None);
        let e = super::limits(&w, 9.99, 1.0).unwrap();
        assert_eq!(e, "BW result is below bw limit: 9.99 MiB/s < --limit_bw 10 (perftest's verifier)");
        let e = super::limits(&w, 11.0, 0.4).unwrap();
        assert!(e.starts_with("Msg rate is below msg_rate limit: 0.400000 Mpps < --limit_msgrate 0.5"), "{e}");
        assert!(super::limits(&o("write bw --report_gbits -w 2"), 1.0, 1.0).unwrap().contains("1.00 Gb/s"));
        assert_eq!(super::limits(&o("write bw"), 0.0, 0.0), None);
    }
}
