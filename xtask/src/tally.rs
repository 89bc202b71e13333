//! Counting test outcomes from libtest's output, across host and device runs.

/// Passed and failed tests so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
}

impl Tally {
    /// Adds the counts of every `test result:` line in a libtest output.
    pub fn add_libtest(&mut self, output: &str) {
        for line in output.lines() {
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

    /// Records one check of the harness's own (not a libtest test).
    pub fn check(&mut self, name: &str, ok: bool) {
        println!("check {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
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
        assert_eq!(t, Tally { passed: 5, failed: 4 });
        t.check("x", false);
        assert_eq!(t.failed, 5);
    }
}
