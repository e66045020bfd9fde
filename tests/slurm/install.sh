#!/usr/bin/env bash
# Install the Debian packages that tests/slurm/start_cluster.sh needs (slurm-wlm, munge).
# Idempotent and non-interactive; exits non-zero if the packages cannot be installed.
# The test does not use daemons the packages may start system-wide: it starts its own, in a
# temporary directory.
set -euo pipefail

have_all() { command -v slurmctld && command -v slurmd && command -v munged && command -v sbatch; } >/dev/null 2>&1

if have_all; then
    echo "slurm-wlm and munge are already installed"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install.sh: apt-get not found; install slurm-wlm and munge by hand" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install.sh: need root (or password-less sudo) to install slurm-wlm and munge" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
have_all || { echo "install.sh: slurm-wlm/munge installed but slurmctld, slurmd, munged or sbatch is missing" >&2; exit 1; }
echo "installed: $(slurmctld -V), munge $(munged -V 2>&1 | head -1)"
