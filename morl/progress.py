"""Progress bars and logging for long-running stages.

Each stage shows a tqdm bar (rate and ETA) on stderr and writes a line to its log every tenth of
the work, so a rule's log file tells how far a job got even when nobody watched the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from pathlib import Path

from tqdm import tqdm

log = logging.getLogger("morl")


class Progress:
    """A progress bar over ``total`` units that also logs milestones."""

    def __init__(self, total: int, desc: str, unit: str = "step", enabled: bool = True, initial: int = 0):
        self.total = int(total)
        self.desc = desc
        self.n = int(initial)
        self._next_log = self._milestone_after(self.n)
        self._t0 = time.perf_counter()
        self._n0 = self.n
        self._postfix: dict = {}
        self.bar = tqdm(
            total=self.total,
            initial=self.n,
            desc=desc,
            unit=unit,
            unit_scale=self.total >= 10_000,
            mininterval=2.0,
            file=sys.stderr,
            disable=not enabled,
            dynamic_ncols=True,
        )

    def _milestone_after(self, n: int) -> int:
        tenth = max(1, self.total // 10)
        return (n // tenth + 1) * tenth

    def update(self, n: int = 1, **postfix) -> None:
        self.n += n
        self.bar.update(n)
        if postfix:
            self._postfix = postfix
            self.bar.set_postfix(postfix, refresh=False)
        if self.n >= self._next_log or self.n >= self.total:
            self._next_log = self._milestone_after(self.n)
            rate = (self.n - self._n0) / max(time.perf_counter() - self._t0, 1e-9)
            extra = " ".join(f"{k}={v}" for k, v in self._postfix.items())
            log.info(
                "%s: %d/%d (%.0f%%) %.1f/s %s",
                self.desc,
                self.n,
                self.total,
                100.0 * self.n / max(self.total, 1),
                rate,
                extra,
            )

    def advance_to(self, n: int) -> None:
        """Move the bar forward to ``n`` units done (e.g. when work ends earlier than budgeted)."""
        if n > self.n:
            self.update(n - self.n)

    @property
    def rate(self) -> float:
        return (self.n - self._n0) / max(time.perf_counter() - self._t0, 1e-9)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def log_to(path: str | Path | None, level: int = logging.INFO):
    """Send the ``morl`` logger to ``path`` (if given) and to stderr for the duration of a stage."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="a"))
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S")
    for h in handlers:
        h.setFormatter(fmt)
        log.addHandler(h)
    old_level = log.level
    log.setLevel(level)
    log.propagate = False
    try:
        yield log
    except BaseException as exc:
        from morl.errors import debug_requested, expected_errors

        # An expected error is reported as one line by whoever runs the stage (morl.errors); a bug
        # keeps its traceback, in the log file too.
        if debug_requested() or not isinstance(exc, expected_errors()):
            log.exception("stage failed")
        raise
    finally:
        for h in handlers:
            log.removeHandler(h)
            h.close()
        log.setLevel(old_level)
