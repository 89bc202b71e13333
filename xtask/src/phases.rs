//! Where a long task's minutes go: the time of each phase, printed as it
//! ends and once more, as a table, at the end (CI has a time budget; the
//! table says which phase to look at when it grows).

use std::time::Instant;

/// The phases of one run, in order.
pub struct Phases {
    start: Instant,
    last: Instant,
    done: Vec<(String, f64)>,
}

impl Phases {
    /// Starts the clock.
    pub fn start() -> Phases {
        let now = Instant::now();
        Phases { start: now, last: now, done: Vec::new() }
    }

    /// Ends the phase `name` (the time since the previous one ended, or since the start).
    pub fn end(&mut self, name: &str) {
        let now = Instant::now();
        let secs = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        println!("phase {name}: {secs:.0} s");
        self.done.push((name.to_string(), secs));
    }

    /// The table: each phase's seconds and share of the whole.
    pub fn table(&self) -> String {
        let total = self.last.duration_since(self.start).as_secs_f64().max(f64::MIN_POSITIVE);
        let mut s = format!("where the {:.1} minutes went:\n", total / 60.0);
        for (name, secs) in &self.done {
            s.push_str(&format!("  {:>6.0} s  {:>3.0} %  {name}\n", secs, 100.0 * secs / total));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_phase_with_its_share() {
        let mut p = Phases::start();
        p.end("first");
        p.end("second");
        let t = p.table();
        assert!(t.starts_with("where the 0.0 minutes went:\n"), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[1].ends_with("first") && lines[2].ends_with("second"), "{t}");
    }
}
