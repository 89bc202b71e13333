//! The direct path's rows in the demo. On a ConnectX (a host device whose
//! driver is mlx5): `cargo xtask bench-wqe`'s table (instructions per WQE
//! for every kind, beside C with the `mlx5dv.h` helpers and libmlx5), and
//! its WRITE row run on the device itself: `examples/mlx5_direct_write.rs`
//! posts the same sequence (`SqRing::write`, one data segment, `post` with
//! the doorbell) on the QP's real send queue and polls its real CQ, timed
//! per WQE. On any other device the demo prints why these rows are skipped.

use crate::device::Place;

/// Whether the demo runs the direct path's rows on its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WqeRows {
    /// The device is a ConnectX: the table, and the WRITE row on its ring.
    Run,
    /// Not a ConnectX: the sentence the demo prints instead.
    Skip(String),
}

/// The choice for the demo's `place`, whose device's kernel driver is
/// `driver` (`mlx5_core` on a ConnectX; read from sysfs on the host).
pub(crate) fn plan(place: &Place, driver: &str) -> WqeRows {
    const WHY: &str = "the direct path (mlx5dv) posts WQEs into a ConnectX's own queues; \
                       `cargo xtask bench-wqe` counts its rows on plain memory anywhere";
    match place {
        Place::Host { .. } if driver.starts_with("mlx5") => WqeRows::Run,
        Place::Host { device } => WqeRows::Skip(format!(
            "direct-path rows (bench-wqe) skipped: {device}'s driver is {driver}, not mlx5; {WHY}"
        )),
        Place::HostRxe | Place::Vm { .. } => WqeRows::Skip(format!(
            "direct-path rows (bench-wqe) skipped: {} is SoftRoCE (rdma_rxe), not mlx5; {WHY}",
            place.device()
        )),
    }
}

/// WQEs the device run posts (one at a time: post, doorbell, poll).
pub(crate) const DEVICE_WRITES: u32 = 100_000;

/// The step posting the WRITE row on the device's ring (`exe` is the built
/// `mlx5_direct_write` example).
pub(crate) fn device_script(exe: &str) -> String {
    format!("{exe} \"$RRDDMMA_TEST_DEVICE\" {DEVICE_WRITES}")
}

/// Microseconds per WQE that the example printed (`N direct 64-byte RDMA
/// WRITEs on DEV: X us each (post + doorbell + poll)`), when it ran.
pub(crate) fn device_us(out: &str) -> Option<f64> {
    let line = out.lines().find(|l| l.contains("direct 64-byte RDMA WRITEs on "))?;
    let (_, after) = line.rsplit_once(": ")?;
    after.split_whitespace().next()?.parse().ok().filter(|v: &f64| v.is_finite() && *v > 0.0)
}

/// The device row's table; `Err` with the run's output when it failed.
pub(crate) fn device_report(out: &str) -> Result<(), String> {
    let Some(us) = device_us(out) else {
        return Err(format!("mlx5_direct_write on the device (the WRITE row on its ring):\n{out}"));
    };
    println!(
        "\nbench-wqe's WRITE row on the device's own ring (examples/mlx5_direct_write.rs, {DEVICE_WRITES} WQEs, \
         one outstanding: SqRing::write, a 64 B data segment, post with the doorbell, the CQ polled directly)\n"
    );
    println!("| row | on the device |");
    println!("|---|---|");
    println!("| write (RC RDMA WRITE, one 64 B data segment) | {us:.2} us per WQE (post + doorbell + completion) |");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn rows_run_only_on_a_connectx_host_device() {
        let host = |d: &str| Place::Host { device: d.into() };
        assert_eq!(plan(&host("mlx5_0"), "mlx5_core"), WqeRows::Run);
        let skip = |p: &Place, driver: &str| match plan(p, driver) {
            WqeRows::Skip(s) => s,
            WqeRows::Run => panic!("{p:?} with {driver} runs the direct-path rows"),
        };
        let s = skip(&host("bnxt_re0"), "bnxt_en");
        assert!(s.contains("bnxt_re0's driver is bnxt_en, not mlx5") && s.contains("skipped"), "{s}");
        // A host device named like mlx5 but driven by something else.
        assert!(skip(&host("mlx5_0"), "-").contains("driver is -"));
        for p in [Place::HostRxe, Place::Vm { kernel: PathBuf::from("/boot/vmlinuz") }] {
            let s = skip(&p, "rdma_rxe");
            assert!(s.contains("rxe0 is SoftRoCE") && s.contains("bench-wqe"), "{s}");
        }
    }

    #[test]
    fn the_device_row_is_read_from_the_example() {
        let out = "100000 direct 64-byte RDMA WRITEs on mlx5_0: 1.93 us each (post + doorbell + poll)\n";
        assert_eq!(device_us(out), Some(1.93));
        assert!(device_report(out).is_ok());
        assert_eq!(device_us("unsupported: rxe0 is not an mlx5 device; direct WQE posting needs ConnectX\n"), None);
        assert!(device_report("Error: WRITE failed").unwrap_err().contains("WRITE failed"));
        assert_eq!(device_us("5 direct 64-byte RDMA WRITEs on mlx5_0: NaN us each"), None);
    }
}
