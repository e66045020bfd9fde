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
