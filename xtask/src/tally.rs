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
    /// Adds the counts of every `test result:` line in a libtest output.
    pub fn add_libtest(&mut self, output: &str) {
        for line in output.lines() {
            if let Some(name) = line.trim().strip_prefix("test ").and_then(|r| r.strip_suffix(" ... FAILED")) {
                self.failures.push(name.to_string());
            }
            let Some(rest) = line.trim().strip_prefix("test result: ") else {
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
        }
    }

    /// Counts a libtest run: its `test result:` lines, plus one failure when
    /// the run failed (`ok == false`) without a failing test to show for it
    /// (a build error, a crash) or ran no test at all.
    pub fn add_run(&mut self, name: &str, ok: bool, output: &str) {
        let (passed, failed) = (self.passed, self.failed);
        self.add_libtest(output);
        let ran = self.passed + self.failed > passed + failed;
        if !ran || (!ok && self.failed == failed) {
            self.check(name, false);
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
}
