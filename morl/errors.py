"""The errors a user can act on, and how a stage reports them.

:class:`InputError` is an expected failure: a bad config, a bad or damaged file, two files that do
not belong together, an output that cannot be written. Its message is complete (it names the
file and the problem), so the ``morl`` command and the Snakemake rules print it as one line,
``morl <stage>: error: <message>``, without a traceback. Anything else is a bug and keeps its
traceback. ``--debug`` (or ``MORL_DEBUG=1`` in the environment, e.g. for a Snakemake run) shows the
traceback of an expected error too.

Every specific error class of the package (``ConfigError``, ``DataFileError``,
``FileMismatchError``, ``CheckpointError``, ...) is an :class:`InputError`, and an
:class:`InputError` is a ``ValueError``.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

#: Set to 1 to see the traceback of an expected error too.
DEBUG_ENV = "MORL_DEBUG"


class InputError(ValueError):
    """An expected failure whose message says what is wrong and with which file."""


class OutputError(InputError):
    """An output could not be written (full disk, no permission, a folder in the way)."""

    def __init__(self, path: os.PathLike | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def debug_requested() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def expected_errors() -> tuple[type[BaseException], ...]:
    """The exceptions reported as one line: :class:`InputError`, and a missing input file."""
    return (InputError, FileNotFoundError)


def report(stage: str, exc: BaseException, stream=None) -> None:
    """Print ``morl <stage>: error: <message>``; with debugging on, the traceback before it."""
    stream = sys.stderr if stream is None else stream
    if debug_requested():
        traceback.print_exception(exc, file=stream)
    print(f"morl {stage}: error: {exc}", file=stream, flush=True)


def run_stage(stage: str, fn: Callable[[], object], log_path: str | os.PathLike | None = None) -> None:
    """Run a Snakemake rule's work; an expected error ends the job with one line and exit status 1.

    The line goes to stderr (Snakemake shows it with the failed job) and to the rule's log file.
    The runtime is set up first (:func:`morl.cpu.configure`).
    """
    from morl.cpu import configure

    configure()
    try:
        fn()
    except expected_errors() as exc:
        report(stage, exc)
        if log_path is not None:
            with open(log_path, "a") as f:
                report(stage, exc, stream=f)
        raise SystemExit(1) from None
