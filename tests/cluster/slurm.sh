#!/bin/bash
# Starts a one-node Slurm cluster for tests (run as root, inside the SoftRoCE
# VM): munged with a key of its own, slurmctld and one slurmd, all keeping
# their state, sockets and logs in DIR, then waits until the node is idle.
# Afterwards `SLURM_CONF=DIR/slurm.conf srun -n 3 ...` runs three tasks.
#
# The ranks share the machine, as they do under `mpirun -np 3`; each opens
# the rxe device RRDDMMA_DEVICES names for its rank (SLURM_PROCID). The node
# is called `localhost`, so the step's node list (SLURM_STEP_NODELIST) names
# a host that resolves, and rank 0's address comes from it.
#
# No systemd and no cgroup limits: processes are tracked through /proc
# (proctrack/linuxproc), tasks are not bound (task/none), no accounting. The
# node declares the machine's CPUs and srun's --overcommit lets three tasks
# share two of them, as mpirun's --oversubscribe does.
#
# Usage: slurm.sh DIR
set -eu
d=${1:?usage: slurm.sh DIR}
rm -rf "$d" && mkdir -p "$d/state" "$d/spool" && chmod 711 "$d"
host=$(hostname -s)
cpus=$(nproc)

head -c 1024 /dev/urandom > "$d/munge.key" && chmod 400 "$d/munge.key"
# --force: munged refuses to run as root, and a key under a world-writable
# /tmp or /dev/shm, without it.
munged --force --key-file="$d/munge.key" --socket="$d/munge.sock" --pid-file="$d/munged.pid" \
    --log-file="$d/munged.log" --seed-file="$d/munged.seed"

cat > "$d/slurm.conf" <<EOF
ClusterName=rrddmma
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge.sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=10 State=UP
EOF
# slurmd 22.05 initialises its cgroup plugin even with proctrack/linuxproc
# and task/none: it needs a cgroup2 hierarchy (mounted here when the VM has
# none) and IgnoreSystemd=yes to create its scope itself, under
# system.slice, rather than ask systemd over D-Bus.
printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' > "$d/cgroup.conf"
grep -q '^cgroup2 /sys/fs/cgroup ' /proc/mounts || mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/system.slice
export SLURM_CONF=$d/slurm.conf
slurmctld -i
slurmd -N localhost
for _ in $(seq 120); do
    state=$(sinfo -h -N -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
done
if [ "$state" != idle ]; then
    echo "slurm.sh: node localhost is '${state:-unknown}' after 60 s" >&2
    tail -n 20 "$d"/*.log >&2
    exit 1
fi
sinfo -N
