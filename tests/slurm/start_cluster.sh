#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on this machine, for tests: munged, slurmctld and slurmd
# from Debian's slurm-wlm and munge packages, with every file (munge key, slurm.conf, state,
# spool, logs, pid files) under one directory. Nothing system-wide is touched.
#
#   tests/slurm/start_cluster.sh DIR
#   export SLURM_CONF=DIR/etc/slurm.conf PATH=DIR/bin:$PATH   # sbatch, squeue, scancel, srun
#                                                             # then talk to this cluster
#   tests/slurm/stop_cluster.sh DIR          # stops exactly the daemons started here, by pid
#
# Settings (environment variables):
#   SLURM_PARTITIONS  comma-separated partition names, all on this node; the first is the default
#                     [debug]
#   NODE_CPUS         CPUs the node offers [this host's: nproc]
#   NODE_MEMORY_MB    memory the node offers [this host's MemTotal minus 512 MB]
#   NODE_GPUS         GPUs (gres "gpu") the node offers [0]
#
# A node may offer more CPUs, memory or GPUs than the machine has (SlurmdParameters=
# config_overrides): SLURM then schedules requests the size of a real cluster's (a GPU, many cores)
# on this one node. Nothing confines a job to its allocation (task/none, proctrack/linuxproc), so
# jobs simply share the machine; a declared GPU has no device behind it.
# No accounting database: job state comes from slurmctld (squeue), kept for MinJobAge seconds.
set -euo pipefail

DIR=${1:?usage: start_cluster.sh DIR}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
for exe in munged slurmctld slurmd sbatch scontrol; do
    command -v "$exe" >/dev/null || { echo "start_cluster.sh: $exe not found (run tests/slurm/install.sh)" >&2; exit 2; }
done

HOST=$(hostname -s)
PARTITIONS=${SLURM_PARTITIONS:-debug}
HOST_MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
NODE_CPUS=${NODE_CPUS:-$(nproc)}
NODE_MEMORY_MB=${NODE_MEMORY_MB:-$((HOST_MEM_MB - 512))}
NODE_GPUS=${NODE_GPUS:-0}
USER_NAME=$(id -un)

mkdir -p "$DIR"/{etc,munge,state,spool,log,run}
chmod 711 "$DIR/munge"

# Two free TCP ports for slurmctld and slurmd.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
    local p
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 20000))
        if port_free "$p" && [ "$p" != "${1:-}" ]; then echo "$p"; return 0; fi
    done
    echo "start_cluster.sh: no free port found" >&2; return 1
}
CTLD_PORT=$(pick_port)
SLURMD_PORT=$(pick_port "$CTLD_PORT")

# --- munge -------------------------------------------------------------------------------------
MUNGE_SOCKET="$DIR/munge/munge.socket"
head -c 1024 /dev/urandom > "$DIR/munge/munge.key"
chmod 400 "$DIR/munge/munge.key"
munged --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"

# --- slurm.conf --------------------------------------------------------------------------------
GRES_NODE=""
if [ "$NODE_GPUS" -gt 0 ]; then
    # A gpu gres needs one device file per GPU: copies of /dev/null (or, where mknod is not
    # allowed, empty files, which slurmd logs as an error but accepts) stand in for them.
    mkdir -p "$DIR/dev"
    GRES_NODE="Gres=gpu:$NODE_GPUS"
    : > "$DIR/etc/gres.conf"
    for ((i = 0; i < NODE_GPUS; i++)); do
        mknod "$DIR/dev/gpu$i" c 1 3 2>/dev/null || : > "$DIR/dev/gpu$i"
        echo "NodeName=$HOST Name=gpu File=$DIR/dev/gpu$i" >> "$DIR/etc/gres.conf"
    done
else
    : > "$DIR/etc/gres.conf"
fi
{
cat <<CONF
# Written by tests/slurm/start_cluster.sh: a throw-away single-node cluster.
ClusterName=morltest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in a container: track processes by parent pid, do not bind or confine tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# Keep finished jobs visible to squeue for an hour (there is no sacct here).
MinJobAge=3600
DefMemPerCPU=1000
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=300
InactiveLimit=0
KillWait=5
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$NODE_MEMORY_MB $GRES_NODE State=UNKNOWN
CONF
first=1
IFS=',' read -ra parts <<< "$PARTITIONS"
for p in "${parts[@]}"; do
    if [ $first -eq 1 ]; then def=YES; first=0; else def=NO; fi
    echo "PartitionName=$p Nodes=$HOST Default=$def MaxTime=INFINITE State=UP"
done
} > "$DIR/etc/slurm.conf"
export SLURM_CONF="$DIR/etc/slurm.conf"

# Inside a job, snakemake's slurm-jobstep executor runs the rule with `srun` after removing every
# SLURM_* variable from the environment, SLURM_CONF included. On a real cluster srun then reads
# /etc/slurm/slurm.conf (or a configless slurmd's cache); this throw-away cluster leaves /etc alone
# and instead puts DIR/bin, holding an srun that knows this cluster's config, first on the PATH
# that jobs inherit (the caller adds DIR/bin to PATH).
mkdir -p "$DIR/bin"
cat > "$DIR/bin/srun" <<WRAP
#!/bin/sh
SLURM_CONF="$SLURM_CONF" exec $(command -v srun) "\$@"
WRAP
chmod +x "$DIR/bin/srun"

# --- daemons -----------------------------------------------------------------------------------
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N "$HOST"

# Wait until the node takes jobs.
for _ in $(seq 300); do
    state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -1 || true)
    case "$state" in
        idle*|mixed*|allocated*) echo "SLURM_CONF=$SLURM_CONF"; exit 0 ;;
    esac
    sleep 0.2
done
echo "start_cluster.sh: node $HOST did not become idle (state '${state:-?}'); logs in $DIR/log" >&2
tail -n 20 "$DIR"/log/*.log >&2 || true
exit 1
