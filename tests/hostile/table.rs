//! The rows the suite prints: `cargo xtask test` collects every line that
//! starts with `ROW\t` and prints one table per name.

/// Prints one row of `table` (`"hostile"`: attack, victim, outcome;
/// `"aio-fault"`: fault, call, outcome). Call it after the test's asserts,
/// so a printed row is a passed one.
pub fn row(table: &str, first: &str, second: &str, outcome: &str) {
    for cell in [table, first, second, outcome] {
        assert!(!cell.contains(['\t', '\n']), "a table cell has no tab or newline: {cell:?}");
    }
    println!("ROW\t{table}\t{first}\t{second}\t{outcome}");
}

/// A row of the hostile-peer table.
pub fn hostile(attack: &str, victim: &str, outcome: &str) {
    row("hostile", attack, victim, outcome);
}

/// A row of the aio fault table.
#[allow(dead_code)]
pub fn aio_fault(fault: &str, call: &str, outcome: &str) {
    row("aio-fault", fault, call, outcome);
}

/// The device the harness promises (its absence fails the test).
#[allow(dead_code)]
pub fn device() -> String {
    std::env::var("RRDDMMA_TEST_DEVICE").expect("RRDDMMA_TEST_DEVICE names the device for device tests")
}
