//! The launcher checks under a real Slurm: `tests/cluster/slurm.sh` starts
//! munged, slurmctld and one slurmd in the VM, then `srun -n 3` runs the
//! cluster example and `rrddmma-perf cluster`, one rxe device per rank.

use crate::cluster::{all_verified, built, q};
use crate::device::Check;
use crate::Result;

/// Where the Slurm daemons keep their state, sockets and logs in the VM.
const DIR: &str = "/dev/shm/rrddmma-slurm";

/// The namespace hosts' devices, then Slurm, each unless already up.
fn setup() -> String {
    format!(
        "{{ ip netns list | grep -q '^h1' || bash tests/cluster/hosts.sh 3 >/dev/null; }} && \
         {{ kill -0 \"$(cat {DIR}/slurmd.pid 2>/dev/null)\" 2>/dev/null || bash tests/cluster/slurm.sh {DIR}; }}"
    )
}

/// `srun` with three tasks on the one node's two CPUs; a rank that fails
/// ends the step.
fn srun() -> String {
    format!("SLURM_CONF={DIR}/slurm.conf timeout 180 srun -n 3 --overcommit --kill-on-bad-exit=1")
}

/// Device-session checks, after the namespace hosts' and mpirun's.
pub fn checks() -> Result<Vec<Check>> {
    let ex = q(&built("example", "cluster")?);
    // No RRDDMMA_COORDINATOR: rank 0's host is the first of the step's nodes.
    let example = format!("{} || exit 1; RRDDMMA_DEVICES=rxe_h1,rxe_h2,rxe_h3 {} {ex}", setup(), srun());
    Ok(vec![
        Check::verdict(
            "cluster example under srun -n 3 (Slurm: slurmctld + slurmd), coordinator from SLURM_STEP_NODELIST",
            example,
            |d| d.code == Some(0) && all_verified(&d.output, 3, "Slurm"),
        ),
        crate::perf_checks::srun_check(&setup(), &srun())?,
    ])
}

/// `cargo xtask slurm`: these checks alone, in the device session.
pub fn run() -> Result<()> {
    crate::device::run_alone("slurm checks", &checks()?)
}
