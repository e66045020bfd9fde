"""The CPU's floating-point mode and cores, set up once for every command and Snakemake job.

**Subnormal floats are flushed to zero.** A long fit leaves units whose gradient is always zero (a
dead ReLU, an unused input); Adam's moments for them decay geometrically until they are subnormal
(below ~1.2e-38 in float32), and x86 arithmetic on subnormal operands is many times slower. With
plain IEEE arithmetic a 200,000-step fit slowed down threefold as they accumulated; with flushing
on, they become exact zeros and the fit keeps its speed. :func:`configure` turns flushing on (the
x86 FTZ and DAZ bits, for the calling thread and the threads it starts afterwards); the ``morl``
command and every Snakemake job call it before any work, and every long fit calls
:func:`flush_subnormals` when it starts, so library callers get it too. It changes the lowest bits
of results that pass through a subnormal value, not their determinism: one kind of CPU still
repeats a run byte for byte. CUDA kernels run at full speed on subnormals and are not affected.

The module imports torch only when a function is called, so that importing it costs nothing.
"""

from __future__ import annotations

import os
import time


def flush_subnormals() -> bool:
    """Treat subnormal float inputs and results as zero on this thread (and the threads it starts
    from now on); True where the CPU supports it (every x86-64 CPU does). Idempotent and cheap."""
    import torch

    return bool(torch.set_flush_denormal(True))


def configure(threads: int | None = None) -> None:
    """Set the runtime up for a command or a Snakemake job: flush subnormals (module docstring) and,
    when ``threads`` is given, compute with that many torch threads."""
    flush_subnormals()
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, which a batch scheduler such as
    SLURM sets to the job's cores)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot, from /proc/stat; None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def idle_cores(interval: float = 0.25) -> float | None:
    """How many cores were idle over the next ``interval`` seconds (None where /proc/stat cannot
    be read)."""
    before = _cpu_times()
    if before is None:
        return None
    time.sleep(interval)
    after = _cpu_times()
    if after is None or after[1] <= before[1]:
        return None
    busy_share = (after[0] - before[0]) / (after[1] - before[1])
    return (os.cpu_count() or 1) * (1.0 - busy_share)


def usable_threads(requested: int) -> tuple[int, str | None]:
    """The torch threads a command computes with when asked for ``requested``, and why it is fewer,
    if it is: at most the cores this process may run on, and above one thread, at most the cores
    idle when it starts. Threads that outnumber the free cores wait on one another at every
    operation: beside one busy job on a 2-core machine, two threads trained MORvS(P) at a fiftieth
    of one thread's speed (docs/benchmarks.md). One thread is always allowed. The count changes the
    lowest bits of results (each count is deterministic), so it is recorded with them."""
    requested = max(1, int(requested))
    cores = available_cores()
    threads, reasons = min(requested, cores), []
    if requested > cores:
        reasons.append(f"this process may run on {cores} cores")
    if threads > 1:
        idle = idle_cores()
        if idle is not None and max(1, int(idle + 0.5)) < threads:
            threads = max(1, int(idle + 0.5))
            reasons.append(f"only {idle:.1f} of {os.cpu_count()} cores are idle now")
    why = f"{requested} threads asked for, but {' and '.join(reasons)}: computing with {threads}" if reasons else None
    return threads, why
