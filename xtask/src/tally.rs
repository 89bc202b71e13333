//! Counting test outcomes from libtest's output, across host and device runs.

/// How many of a failed check's last output lines the summary repeats.
pub const TAIL_LINES: usize = 30;

/// Passed and failed tests so far, and the names of those that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// What failed, in order: libtest tests by name, harness checks by their
    /// description. The final summary repeats them, so a failure is found
    /// without scrolling back through a half-hour log.
    pub failures: Vec<String>,
    /// Steps left out on request (an opt-out flag), with the flag: the
    /// final summary lists them, so a run never omits a step unseen.
    pub skipped: Vec<String>,
}

impl Tally {
    /// Adds the counts of every `test result:` line in a libtest output,
    /// and names each failed test: from its `test NAME ... FAILED` line, or
    /// from the `failures:` list libtest prints before its result (a test
    /// whose own output ran into its `test NAME ...` line has only that).
    /// Each name carries the first lines of its `---- NAME stdout ----`
    /// block (the panic message), so the summary says why.
    pub fn add_libtest(&mut self, output: &str) {
        let mut named: Vec<String> = Vec::new();
        let mut listed: Vec<String> = Vec::new();
        for line in output.lines() {
            let t = line.trim();
            if let Some(name) = t.strip_prefix("test ").and_then(|r| r.strip_suffix(" ... FAILED")) {
                named.push(name.to_string());
                continue;
            }
            if t == "failures:" {
                listed.clear();
                continue;
            }
            if line.starts_with("    ") && !t.is_empty() && !t.contains(' ') {
                listed.push(t.to_string());
                continue;
            }
            let Some(rest) = t.strip_prefix("test result: ") else {
                continue;
            };
            for part in rest.split(';') {
                let mut words = part.split_whitespace().skip_while(|w| w.ends_with('.'));
                let (Some(n), Some(what)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                match what {
                    "passed" => self.passed += n,
                    "failed" => self.failed += n,
                    _ => {}
                }
            }
            for name in listed.drain(..) {
                if !named.contains(&name) {
                    named.push(name);
                }
            }
        }
        for name in named {
            let why = why_failed(output, &name);
            self.failures.push(format!("{name}{why}"));
        }
    }

    /// Counts a libtest run: its `test result:` lines, plus one failure when
    /// the run failed (`ok == false`) without a failing test to show for it
    /// (a build error, a crash, a timeout) or ran no test at all; that
    /// failure repeats the output's tail. Failed tests counted but not
    /// named are listed under the run's name.
    pub fn add_run(&mut self, name: &str, ok: bool, output: &str) {
        let (passed, failed, names) = (self.passed, self.failed, self.failures.len());
        self.add_libtest(output);
        let ran = self.passed + self.failed > passed + failed;
        let unnamed = (self.failed - failed).saturating_sub((self.failures.len() - names) as u64);
        if unnamed > 0 {
            self.failures.push(format!("{name}: {unnamed} failed test(s) not named in its output"));
        }
        if !ran || (!ok && self.failed == failed) {
            self.check_output(name, false, output);
        }
    }

    /// Records one check of the harness's own (not a libtest test).
    pub fn check(&mut self, name: &str, ok: bool) {
        println!("check {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            self.failures.push(format!("check {name}"));
        }
    }

    /// As [`Tally::check`], for a check judged on a step's output: a
    /// failure is listed in the final summary with the output's last
    /// [`TAIL_LINES`] lines, so its cause shows at the end of the log too.
    /// A client/server pair's output (the server's after `--- server
    /// output`) gives half of them to each side, so the client's part is
    /// never pushed out by a long server report.
    pub fn check_output(&mut self, name: &str, ok: bool, output: &str) {
        self.check(name, ok);
        if !ok {
            let tail = |part: &str, n: usize| {
                let lines: Vec<&str> = part.lines().collect();
                lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("\n    | {l}")).collect::<String>()
            };
            let shown = match output.split_once("--- server output") {
                Some((client, server)) => {
                    format!("{}\n    | --- server output{}", tail(client, TAIL_LINES / 2), tail(server, TAIL_LINES / 2))
                }
                None => tail(output, TAIL_LINES),
            };
            if let Some(last) = self.failures.last_mut() {
                last.push_str(&shown);
            }
        }
    }

    /// Records a step left out because an opt-out flag asked for it (not a
    /// failure; listed by [`Tally::finish`]).
    pub fn skip(&mut self, what: &str) {
        println!("skipped {what}");
        self.skipped.push(what.to_string());
    }

    /// Prints the final `N passed, N failed` line (with `N skipped on
    /// request` and their list when any were), and the list of what failed;
    /// an error when anything did.
    pub fn finish(&self) -> crate::Result<()> {
        if self.skipped.is_empty() {
            println!("\n{} passed, {} failed", self.passed, self.failed);
        } else {
            println!("\n{} passed, {} failed, {} skipped on request", self.passed, self.failed, self.skipped.len());
            println!("skipped:");
            for what in &self.skipped {
                println!("  {what}");
            }
        }
        if self.failed == 0 {
            return Ok(());
        }
        println!("failed:");
        for name in &self.failures {
            println!("  {name}");
        }
        Err(format!("{} failed", self.failed).into())
    }
}

/// The first lines of a failed test's `---- NAME stdout ----` block
/// (its panic message), each on a line of its own prefixed `    | `;
/// empty when the output has no such block.
fn why_failed(output: &str, name: &str) -> String {
    const WHY_LINES: usize = 8;
    let head = format!("---- {name} stdout ----");
    let Some(at) = output.find(&head) else {
        return String::new();
    };
    output[at + head.len()..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("---- ") && l.trim() != "failures:")
        .filter(|l| !l.trim().is_empty())
        .take(WHY_LINES)
        .map(|l| format!("\n    | {l}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_libtest_lines() {
        let mut t = Tally::default();
        t.add_libtest(
            "running 3 tests\n\
             test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\
             test result: FAILED. 2 passed; 4 failed; 0 ignored; 0 measured; 0 filtered out\n",
        );
        assert_eq!((t.passed, t.failed), (5, 4));
        t.check("x", false);
        assert_eq!(t.failed, 5);
        assert_eq!(t.failures, ["check x"]);
    }

    #[test]
    fn a_failed_check_on_output_repeats_its_tail_in_the_summary() {
        let mut t = Tally::default();
        let out: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        t.check_output("passes", true, &out);
        t.check_output("fails", false, &out);
        assert_eq!((t.passed, t.failed), (1, 1));
        let f = &t.failures[0];
        assert!(f.starts_with("check fails\n    | line 11\n"), "{f}");
        assert!(f.ends_with("    | line 40") && !f.contains("line 10\n"), "{f}");
        assert_eq!(f.lines().count(), 1 + TAIL_LINES);
    }

    #[test]
    fn a_failed_pair_repeats_both_sides_tails() {
        let mut t = Tally::default();
        let client: String = (1..=40).map(|i| format!("client {i}\n")).collect();
        let server: String = (1..=40).map(|i| format!("server {i}\n")).collect();
        t.check_output("pair", false, &format!("{client}--- server output\n{server}"));
        let f = &t.failures[0];
        assert!(f.contains("| client 40\n    | --- server output\n"), "{f}");
        assert!(f.contains("| client 26\n") && !f.contains("| client 25\n"), "{f}");
        assert!(f.ends_with("| server 40") && !f.contains("| server 25\n"), "{f}");
    }

    #[test]
    fn steps_skipped_on_request_are_listed_not_failed() {
        let mut t = Tally::default();
        t.skip("kernel matrix (--no-kernel-matrix)");
        assert_eq!((t.passed, t.failed), (0, 0));
        assert_eq!(t.skipped, ["kernel matrix (--no-kernel-matrix)"]);
        assert!(t.finish().is_ok());
    }

    #[test]
    fn runs_that_fail_without_a_failing_test_count_as_failed() {
        let ok = "test result: ok. 2 passed; 0 failed; 0 ignored\n";
        let mut t = Tally::default();
        t.add_run("fine", true, ok);
        assert_eq!((t.passed, t.failed), (2, 0));
        t.add_run("crashed after its tests", false, ok);
        assert_eq!((t.passed, t.failed), (4, 1));
        t.add_run("did not build", false, "error[E0308]: mismatched types");
        assert_eq!((t.passed, t.failed), (4, 2));
        t.add_run("ran nothing", true, "running 0 tests");
        assert_eq!((t.passed, t.failed), (4, 3));
        t.add_run("a test failed", false, "test cm::x ... FAILED\ntest result: FAILED. 1 passed; 1 failed;");
        assert_eq!((t.passed, t.failed), (5, 4));
    }

    #[test]
    fn failed_tests_are_named_from_libtests_list_with_their_panic() {
        let out = "running 2 tests\n\
             test a::one ... ok\n\
             test a::two ... some output of its own\n\
             FAILED\n\n\
             failures:\n\n\
             ---- a::two stdout ----\n\n\
             thread 'a::two' panicked at tests/device/a.rs:9:5:\n\
             the QP is in the error state\n\n\
             failures:\n    a::two\n\n\
             test result: FAILED. 1 passed; 1 failed; 0 ignored\n";
        let mut t = Tally::default();
        t.add_run("suite", false, out);
        assert_eq!((t.passed, t.failed), (1, 1));
        assert_eq!(t.failures.len(), 1, "{:?}", t.failures);
        let f = &t.failures[0];
        assert!(f.starts_with("a::two\n    | thread 'a::two' panicked"), "{f}");
        assert!(f.ends_with("    | the QP is in the error state"), "{f}");
    }

    #[test]
    fn a_count_without_names_and_a_crash_show_in_the_summary() {
        let mut t = Tally::default();
        t.add_run("suite", false, "test result: FAILED. 3 passed; 2 failed; 0 ignored\n");
        assert_eq!(t.failures, ["suite: 2 failed test(s) not named in its output"]);
        t.add_run("vm", false, "running 9 tests\ntest x ... ok\nkilled: step timed out");
        assert!(t.failures[1].starts_with("check vm\n") && t.failures[1].ends_with("| killed: step timed out"));
    }
}
