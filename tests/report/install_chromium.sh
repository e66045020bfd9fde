#!/usr/bin/env bash
# Install Debian's `chromium` for tests/test_report.py, which opens the Snakemake report in
# headless Chromium. Idempotent: does nothing when chromium is already on PATH. Exits non-zero
# (and says why) where it cannot be installed; the test then skips with that reason.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "install_chromium: already installed: $(command -v chromium)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium: no apt-get on this machine; install Chromium by hand" >&2
    exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "install_chromium: not root and no password-less sudo; cannot apt-get install chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq || echo "install_chromium: apt-get update failed; trying the cached package lists" >&2
"${SUDO[@]}" apt-get install -y -qq chromium
command -v chromium >/dev/null 2>&1 || { echo "install_chromium: chromium not on PATH after install" >&2; exit 1; }
echo "install_chromium: installed $(chromium --version 2>/dev/null || echo chromium)"
