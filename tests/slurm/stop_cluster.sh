#!/usr/bin/env bash
# Stop the cluster that tests/slurm/start_cluster.sh started in DIR: cancel its jobs, stop what
# their processes left running, then stop slurmd, slurmctld and munged by the process ids in
# DIR/run/*.pid. Nothing else is touched.
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

# proctrack/linuxproc finds a job's processes through their parents, so a process whose parent
# ended first (a daemonised child, an orphan of a cancelled step) outlives scancel. Every process
# a job starts inherits the PATH the caller gave the cluster, DIR/bin first (start_cluster.sh):
# those still running are named on stderr and stopped (TERM, KILL after 5 s); this script's own
# session (it may have been given that PATH too) is left alone.
OWN_SESSION=$(ps -o sid= -p $$ | tr -d ' ')
left_by_jobs() {
    local environ pid
    for environ in /proc/[0-9]*/environ; do
        pid=${environ#/proc/}; pid=${pid%/environ}
        case $'\n'"$(tr '\0' '\n' 2>/dev/null < "$environ")" in
            *$'\n'"PATH=$DIR/bin:"*)
                [ "$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$OWN_SESSION" ] || echo "$pid" ;;
        esac
    done
}
leftover=$(left_by_jobs)
if [ -n "$leftover" ]; then
    for pid in $leftover; do
        echo "stop_cluster.sh: a job of the cluster left process $pid running: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" >&2
    done
    kill -TERM $leftover 2>/dev/null
    for _ in $(seq 50); do
        alive=0; for pid in $leftover; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && break; sleep 0.1
    done
    kill -KILL $leftover 2>/dev/null
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
