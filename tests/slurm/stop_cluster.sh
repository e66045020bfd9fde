#!/usr/bin/env bash
# Stop the cluster that tests/slurm/start_cluster.sh started in DIR: cancel its jobs, then stop
# slurmd, slurmctld and munged by the process ids in DIR/run/*.pid. Nothing else is touched.
set -uo pipefail
DIR=${1:?usage: stop_cluster.sh DIR}
export SLURM_CONF="$DIR/etc/slurm.conf"

if [ -f "$DIR/run/slurmctld.pid" ] && [ -f "$SLURM_CONF" ]; then
    scancel --user "$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
        [ -z "$(squeue -h -t PENDING,RUNNING,COMPLETING,CONFIGURING -o %i 2>/dev/null)" ] && break
        sleep 0.2
    done
fi

stop_pid() {  # stop_pid NAME: TERM the pid in DIR/run/NAME.pid, KILL it after 10 s
    local file="$DIR/run/$1.pid" pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$file"
}
stop_pid slurmd
stop_pid slurmctld
stop_pid munged
exit 0
