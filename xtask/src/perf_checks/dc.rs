//! rrddmma-perf `-c DC` against perftest `-c DC`, both roles: WRITE, READ
//! and SEND bandwidth, WRITE over DCI streams, the four latency tests and
//! `-b` (a DC initiator and a DC target on each side). DC needs a ConnectX
//! (mlx5) device; on any other device (rxe in the VM) each check's step
//! runs nothing but says which driver it found, and the check is counted
//! as skipped (`Tally::skip`, listed at the end), never as passed. Under
//! `cargo xtask test --device NAME --expect mlx5` (`RRDDMMA_EXPECT_DRIVER=mlx5`, exported
//! into every step) the guard fails the step instead, naming the driver it
//! found. Written for hardware; on rxe only the skip and the failure under
//! the expectation have been seen.

use super::verdict::interop_ok;
use crate::device::{Check, Done, Step};
use crate::pairs::{binary, pair};
use crate::Result;

/// Printed by the step when the device's driver is not mlx5_core.
pub(super) const NOT_MLX5: &str = "dc-interop: not an mlx5 device, driver";

/// The step's guard: the driver of `$RRDDMMA_TEST_DEVICE` (as `report`'s
/// facts find it); anything but mlx5_core prints [`NOT_MLX5`] and stops,
/// with status 1 when mlx5 is expected (`RRDDMMA_EXPECT_DRIVER=mlx5`).
pub(super) const GUARD: &str = r#"s=/sys/class/infiniband/$RRDDMMA_TEST_DEVICE; drv=-; [ -e "$s/device/driver" ] && drv=$(basename "$(readlink -f "$s/device/driver")"); if [ "$drv" != mlx5_core ]; then echo "dc-interop: not an mlx5 device, driver $drv"; if [ "${RRDDMMA_EXPECT_DRIVER:-}" = mlx5 ]; then echo "dc-interop: skipped under --expect mlx5 (run it on a ConnectX device, or drop --expect mlx5)"; exit 1; fi; exit 0; fi"#;

/// (test, perftest binary, flags for both sides, size, iterations, bandwidth).
type Dc = (&'static str, &'static str, &'static str, u64, u64, bool);

const LIST: [Dc; 10] = [
    ("write bw", "ib_write_bw", "-c DC -s 4096 -n 500", 4096, 500, true),
    ("read bw", "ib_read_bw", "-c DC -s 4096 -n 500", 4096, 500, true),
    ("send bw", "ib_send_bw", "-c DC -s 1024 -n 500", 1024, 500, true),
    ("write bw", "ib_write_bw", "-c DC --log_dci_streams 2 -s 4096 -n 500", 4096, 500, true),
    // A DC initiator and a DC target on each side (perftest doubles its
    // QPs: initiators first, then targets).
    ("write lat", "ib_write_lat", "-c DC -n 200", 2, 200, false),
    ("read lat", "ib_read_lat", "-c DC -s 64 -n 200", 64, 200, false),
    ("send lat", "ib_send_lat", "-c DC -s 64 -n 200", 64, 200, false),
    ("atomic lat", "ib_atomic_lat", "-c DC -n 200", 8, 200, false),
    ("write bw", "ib_write_bw", "-c DC -b -s 4096 -n 300", 4096, 0, true),
    ("send bw", "ib_send_bw", "-c DC -b -s 1024 -n 300", 1024, 0, true),
];

/// The judge of a DC check: skipped where the step found no mlx5 device,
/// else `ok`.
pub(super) fn judge(ok: impl Fn(&Done) -> bool + 'static) -> crate::device::Judge {
    Box::new(move |d, t| {
        if d.output.contains(NOT_MLX5) && d.code == Some(0) {
            t.skip(&format!("{} (no mlx5 device here)", d.name));
        } else if d.output.contains(NOT_MLX5) {
            // The guard under --expect mlx5: the check did not run.
            t.check_output(&d.name, false, &d.output);
        } else {
            t.check_output(&d.name, ok(d), &d.output);
        }
    })
}

/// The DC interop checks, on TCP ports 18900 and up (two per entry).
pub fn checks() -> Result<Vec<Check>> {
    let exe = binary()?;
    Ok(build(&format!("'{}'", exe.display())))
}

/// The checks with rrddmma-perf at `me` (quoted for the shell).
fn build(me: &str) -> Vec<Check> {
    let dev = "-d $D -x $X";
    let mut v = Vec::new();
    for (k, &(test, tool, flags, size, iters, bw)) in LIST.iter().enumerate() {
        for ours_client in [true, false] {
            let port = 18900 + 2 * k + usize::from(ours_client);
            let ours = format!("{me} {test} {dev} -p {port} {flags}");
            // `-F`: as the other interop checks (perftest's CPU-frequency check).
            let theirs = format!("{tool} {dev} -p {port} -F {flags}");
            let (name, server, client) = if ours_client {
                (
                    format!("perf DC interop (needs mlx5): rrddmma-perf {test} {flags} client -> {tool} server"),
                    theirs,
                    format!("{ours} 127.0.0.1"),
                )
            } else {
                (
                    format!("perf DC interop (needs mlx5): {tool} {flags} client -> rrddmma-perf {test} server"),
                    ours,
                    format!("{theirs} 127.0.0.1"),
                )
            };
            let command = format!("{GUARD}; {}", pair(&server, &client));
            v.push(Check {
                step: Step { name, command },
                judge: judge(move |d| interop_ok(d, test, size, iters, bw, ours_client)),
            });
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(output: &str) -> Done {
        Done { name: "perf DC interop (needs mlx5): x".into(), code: Some(0), output: output.into(), secs: Some(1) }
    }

    /// On rxe the step's guard speaks and the check is a skip, not a pass;
    /// a step that ran (no guard line) is judged by its verdict.
    #[test]
    fn dc_check_off_mlx5_is_a_skip_and_on_mlx5_a_verdict() {
        let mut t = crate::tally::Tally::default();
        (judge(|_| true))(&done("dc-interop: not an mlx5 device, driver -\n"), &mut t);
        assert_eq!((t.passed, t.failed, t.skipped.len()), (0, 0, 1));
        // Under --expect mlx5 the guard exits 1: a failure, not a skip.
        let expected = Done { code: Some(1), ..done("dc-interop: not an mlx5 device, driver -\n") };
        (judge(|_| true))(&expected, &mut t);
        assert_eq!((t.passed, t.failed, t.skipped.len()), (0, 1, 1));
        t.failed = 0;
        (judge(|_| false))(&done("CLIENT-RC=0\n"), &mut t);
        assert_eq!((t.passed, t.failed), (0, 1));
        (judge(|_| true))(&done("CLIENT-RC=0\n"), &mut t);
        assert_eq!((t.passed, t.failed), (1, 1));
    }

    /// Each entry runs in both roles, each check's name says it needs mlx5,
    /// and every command starts with the guard.
    #[test]
    fn dc_checks_name_mlx5_and_guard_every_step() {
        let v = build("'/bin/rrddmma-perf'");
        assert_eq!(v.len(), 2 * LIST.len());
        for c in &v {
            assert!(c.step.name.contains("(needs mlx5)"), "{}", c.step.name);
            assert!(c.step.command.starts_with(GUARD), "{}", c.step.command);
        }
    }
}
