"""Training curves: one CSV row per interval of optimiser steps, with the mean of every metric
the family's update reports, the learning rate, and the run the curve belongs to."""

from __future__ import annotations

import csv
import io
import os

from morl.data import atomic_write
from morl.errors import InputError


def curve_interval(steps: int) -> int:
    """How many optimiser steps one row of the training curve averages (100, fewer for short runs)."""
    return max(1, min(100, steps // 100))


#: The columns a training curve names its run by, repeated on every row (so that any CSV reader
#: reads the file as before): the model, the training seed and the dataset's SHA-256, as an
#: evaluation of the run records them (``model``, ``train_seed``, ``dataset_sha256``). A curve
#: written before these columns existed has step, loss and lr only.
CURVE_RUN_COLUMNS = ("model", "seed", "dataset_sha256")


def write_curve(
    path: os.PathLike | str, rows: list[list[float]], run: dict | None = None, metrics: tuple[str, ...] = ()
) -> None:
    """Write the training curve CSV atomically: step, loss, lr, then one column per further metric
    the family's update reports (``metrics``, the names of each row's values after the lr; a row
    whose interval never reported one has an empty cell), then the run's ``model``, ``seed`` and
    ``dataset_sha256`` on each row when ``run`` gives them."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    names = [] if run is None else [str(run[k]) for k in CURVE_RUN_COLUMNS]
    writer.writerow(["step", "loss", "lr", *metrics, *(CURVE_RUN_COLUMNS if run is not None else ())])
    for step, loss, lr, *values in rows:
        if len(values) != len(metrics):
            raise ValueError(f"a curve row has {len(values)} metric values for the {len(metrics)} metric columns")
        cells = ["" if v is None else repr(float(v)) for v in values]
        writer.writerow([int(step), repr(float(loss)), repr(float(lr)), *cells, *names])
    text = buf.getvalue()

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    atomic_write(path, write)


def read_curve_run(path: os.PathLike | str) -> dict | None:
    """The run a training curve names (``model``, ``seed``, ``dataset_sha256``), or None for a curve
    that names none (one written before curves named their run, or a curve with no rows). A curve
    whose rows name different runs, or that names only part of one, is refused with one line."""

    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            fields = reader.fieldnames or []
            present = [c for c in CURVE_RUN_COLUMNS if c in fields]
            if not present:
                return None
            if len(present) != len(CURVE_RUN_COLUMNS):
                missing = ", ".join(c for c in CURVE_RUN_COLUMNS if c not in fields)
                raise InputError(f"{path}: a training curve that names its run needs the column(s) {missing} too")
            runs = {tuple(row.get(c) for c in CURVE_RUN_COLUMNS) for row in reader}
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: not a readable training curve CSV ({exc})") from None
    if not runs:
        return None
    if len(runs) > 1 or None in next(iter(runs)):
        raise InputError(f"{path}: the rows of this training curve do not all name one run (model, seed, dataset)")
    model, seed, sha = next(iter(runs))
    try:
        seed = int(seed)
    except ValueError:
        raise InputError(f"{path}: the training curve's seed {seed!r} is not a whole number") from None
    return {"model": model, "seed": seed, "dataset_sha256": sha}
