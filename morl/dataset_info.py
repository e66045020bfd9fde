"""A dataset card: what a dataset file holds, in numbers (``morl dataset-info FILE``).

:func:`dataset_info` reads a dataset file (checked by :func:`morl.data.load_dataset`) and returns a
plain dict; :func:`summarize_dataset` computes the same from an in-memory
:class:`~morl.data.Dataset`; :func:`format_card` renders the dict as text. The card holds:

* **size**: trajectories, steps, episode lengths (min / mean / max) and how episodes ended: by
  termination (``terminal`` set on the last step), by the time limit (``timeout`` set on the last
  step) or neither (e.g. imported data without flags);
* **returns**: per objective, the mean / std (population, ddof 0) / min / max of the trajectory
  returns (sums of the raw reward vectors);
* **preference spread**: an entropy estimate of the distribution of the per-trajectory
  preferences (see :func:`knn_preference_entropy`), next to the histogram estimate of
  :func:`morl.preferences.preference_entropy` and the value of the uniform distribution on the
  whole simplex;
* **data HV**: the hypervolume (reference point: the origin, as in the evaluation protocol) of
  the trajectory returns, i.e. of the Pareto front the data itself covers. This is "B" as the
  PEDA paper's tables define it (one per dataset; lower on amateur than on expert data), the
  denominator of HV / B in this project's tables (:func:`read_card` reads it back). The behavior
  policy's own front, from evaluating it on the preference grid (``behavior_front`` stage), is
  reported beside it when that file is given (``front=``) or found next to the behavior
  checkpoint named in the dataset's metadata.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from morl.data import DataFileError, Dataset, FileMismatchError, load_dataset, read_meta, short_hash
from morl.envs import get_spec
from morl.metrics import hypervolume, pareto_front
from morl.preferences import KNN_K, knn_preference_entropy, preference_entropy

__all__ = ["dataset_info", "summarize_dataset", "format_card", "read_card", "HISTOGRAM_BINS"]

#: Bins per coordinate of the histogram estimate (morl.preferences.preference_entropy's default).
HISTOGRAM_BINS = 20


def _stats(x: np.ndarray) -> dict[str, Any]:
    return {"min": x.min(0).tolist(), "mean": x.mean(0).tolist(), "max": x.max(0).tolist()}


def summarize_dataset(ds: Dataset) -> dict[str, Any]:
    """The card's numbers for an in-memory dataset (see the module docstring)."""
    meta = ds.meta
    ends = ds.traj_starts + ds.traj_lengths - 1
    by_termination = ds.terminals[ends]
    by_timeout = ds.timeouts[ends] & ~by_termination
    returns = ds.traj_returns
    prefs = ds.traj_preferences
    n_obj = ds.n_obj
    objectives = meta.get("objectives")
    if objectives is None:
        try:
            objectives = list(get_spec(meta["env_id"]).objectives)
        except (KeyError, ValueError):
            objectives = [f"objective {i}" for i in range(n_obj)]
    lengths = ds.traj_lengths.astype(np.float64)
    info: dict[str, Any] = {
        "env_id": meta.get("env_id"),
        "quality": meta.get("quality"),
        "entropy_label": meta.get("entropy"),
        "n_obj": n_obj,
        "objectives": list(objectives),
        "obs_dim": ds.obs_dim,
        "act_dim": ds.act_dim,
        "trajectories": ds.n_trajectories,
        "steps": ds.n_steps,
        "episode_length": {"min": int(lengths.min()), "mean": float(lengths.mean()), "max": int(lengths.max())},
        "ended_by": {
            "termination": int(by_termination.sum()),
            "timeout": int(by_timeout.sum()),
            "neither": int((~by_termination & ~by_timeout).sum()),
        },
        "returns": {
            "mean": returns.mean(0).tolist(),
            "std": returns.std(0).tolist(),
            "min": returns.min(0).tolist(),
            "max": returns.max(0).tolist(),
        },
        "preferences": _stats(prefs),
        "preference_entropy": {
            "knn": knn_preference_entropy(prefs) if len(prefs) >= 2 else None,
            "knn_k": int(min(KNN_K, len(prefs) - 1)),
            "histogram": preference_entropy(prefs, bins=HISTOGRAM_BINS),
            "histogram_bins": HISTOGRAM_BINS,
            "uniform_simplex": -math.lgamma(n_obj) + 0.0,  # -log((n_obj - 1)!); + 0.0 turns -0.0 into 0.0
        },
        "data_hv": hypervolume(returns),
        "data_front_points": int(len(pareto_front(returns))),
        "behavior_front": None,
    }
    return info


def _behavior_front_hv(front: Path, dataset: Path, env_id: str | None, behavior_sha256: str | None) -> dict[str, Any]:
    """HV of the behavior policy's grid evaluation ("B") from a ``behavior_front`` file; a front of
    another env or behavior policy than the dataset's is refused, naming both files."""
    # here: morl.evaluate imports torch, which a dataset card without a behavior front never needs
    from morl.evaluate import read_evaluation

    meta = read_meta(front)
    if meta.get("kind") != "behavior":
        raise DataFileError(front, f"not a behavior front file (its metadata kind is {meta.get('kind')!r})")
    if env_id is not None and meta.get("env_id") != env_id:
        raise FileMismatchError(
            dataset, front, [f"the dataset is for env {env_id!r}, the front for {meta.get('env_id')!r}"]
        )
    if behavior_sha256 and meta.get("checkpoint_sha256") and meta["checkpoint_sha256"] != behavior_sha256:
        raise FileMismatchError(
            dataset,
            front,
            [
                f"the dataset was collected by behavior policy sha256 "
                f"{short_hash(behavior_sha256)}, the front evaluates "
                f"{short_hash(meta['checkpoint_sha256'])}"
            ],
        )
    try:
        meta, arrays = read_evaluation(front)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise DataFileError(front, f"not a readable behavior front file ({exc})") from exc
    returns = arrays["return"]
    if "policy" in arrays:
        returns = returns[arrays["policy"] == "behavior"]
    same = True if behavior_sha256 and meta.get("checkpoint_sha256") else None  # None: not recorded in both
    return {
        "path": str(front),
        "hv": hypervolume(returns),
        "points": int(len(returns)),
        "front_points": int(len(pareto_front(returns))),
        "same_behavior_checkpoint": same,
    }


def dataset_info(path: str | os.PathLike, front: str | os.PathLike | None = None) -> dict[str, Any]:
    """The card of the dataset file ``path`` as a dict.

    ``front``: a ``behavior_front`` file whose behavior HV ("B") to report; a problem with it (or
    with ``path``) raises :class:`~morl.data.DataFileError` naming the file, a front of another env
    or behavior policy :class:`~morl.data.FileMismatchError` naming both. Without it, the
    ``front.parquet`` beside the behavior checkpoint named in the dataset's metadata is used if it
    exists; a problem with that one is reported in the card (``behavior_front.error``) instead.
    """
    path = Path(path)
    ds = load_dataset(path)
    info = {"path": str(path), "size_bytes": path.stat().st_size, **summarize_dataset(ds)}
    env_id, sha = ds.meta.get("env_id"), ds.meta.get("behavior_sha256")
    if front is not None:
        info["behavior_front"] = _behavior_front_hv(Path(front), path, env_id, sha)
    elif ds.meta.get("behavior_path"):
        guess = Path(ds.meta["behavior_path"]).parent / "front.parquet"
        if guess.exists():
            try:
                info["behavior_front"] = _behavior_front_hv(guess, path, env_id, sha)
            except (DataFileError, FileMismatchError) as exc:
                info["behavior_front"] = {"path": str(guess), "error": str(exc)}
    return info


def _vec(values, fmt: str = "{:.1f}") -> str:
    return "  ".join(fmt.format(v) for v in values)


def format_card(info: dict[str, Any]) -> str:
    """The dict of :func:`dataset_info` as a short text card."""
    lines = []
    title = info.get("path", "dataset")
    lines.append(f"{title}")
    desc = ", ".join(f"{k} {info[k]}" for k in ("env_id", "quality") if info.get(k) is not None)
    if info.get("entropy_label"):
        desc += f", preference entropy label {info['entropy_label']!r}"
    lines.append(f"  {desc}" if desc else "  (no env/quality/entropy in the metadata)")
    el, ends = info["episode_length"], info["ended_by"]
    lines.append(
        f"  trajectories     {info['trajectories']:,}   steps {info['steps']:,}"
        + (f"   file {info['size_bytes'] / 1e6:,.1f} MB" if "size_bytes" in info else "")
    )
    lines.append(f"  episode length   min {el['min']}  mean {el['mean']:.1f}  max {el['max']}")
    lines.append(
        f"  episodes ended   by termination {ends['termination']}, by timeout {ends['timeout']}, "
        f"neither {ends['neither']}"
    )
    r = info["returns"]
    width = max(len("objective"), *(len(o) for o in info["objectives"]))
    lines.append(f"  returns per trajectory ({info['n_obj']} objectives):")
    lines.append(f"    {'objective':<{width}}  {'mean':>10} {'std':>10} {'min':>10} {'max':>10}")
    for i, name in enumerate(info["objectives"]):
        lines.append(
            f"    {name:<{width}}  {r['mean'][i]:>10.1f} {r['std'][i]:>10.1f} {r['min'][i]:>10.1f} {r['max'][i]:>10.1f}"
        )
    pe = info["preference_entropy"]
    knn = "n/a" if pe["knn"] is None else f"{pe['knn']:.3f}"
    lines.append(
        f"  preference entropy (nats)  kNN {knn} (k={pe['knn_k']})   histogram {pe['histogram']:.3f} "
        f"({pe['histogram_bins']} bins)   uniform on the simplex: {pe['uniform_simplex']:.3f}"
    )
    p = info["preferences"]
    lines.append(f"  preference range  min [{_vec(p['min'], '{:.3f}')}]  max [{_vec(p['max'], '{:.3f}')}]")
    lines.append(
        f"  data HV          {info['data_hv']:{CARD_HV_FORMAT}}  (trajectory returns, reference point 0; "
        f"{info['data_front_points']} non-dominated of {info['trajectories']})"
    )
    bf = info.get("behavior_front")
    if bf and "error" in bf:
        lines.append(f"  behavior front   not known: {bf['error']}")
    elif bf:
        lines.append(f"  behavior front   HV {bf['hv']:.6g}  ({bf['points']}-point grid, {bf['path']})")
        if bf["hv"] > 0:
            lines.append(f"  data HV / behavior front HV  {info['data_hv'] / bf['hv']:.3f}")
    else:
        lines.append("  behavior front   not known (pass --front results/<env>/behavior/front.parquet)")
    return "\n".join(lines) + "\n"


#: How a card prints the data HV: six significant digits, which :func:`read_card` reads back (a
#: relative error under 5e-6, far below the two decimals of HV / B in the tables).
CARD_HV_FORMAT = ".6g"

_CARD_HEADER = re.compile(
    r"^\s*env_id (?P<env>\S+), quality (?P<quality>\S+), preference entropy label '(?P<entropy>[^']+)'"
)
_CARD_HV = re.compile(r"^\s*data HV\s+(?P<hv>[-+0-9.eE]+|nan|inf)\s")


def read_card(path: str | os.PathLike) -> dict[str, Any]:
    """The dataset a card (``*.card.md``, :func:`format_card`) describes and its data HV: a dict with
    ``env``, ``quality``, ``entropy`` and ``data_hv``, the HV of the data's own front, which the
    tables divide by (B, as the PEDA paper defines it). A card without them raises
    :class:`~morl.data.DataFileError` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFileError(path, f"cannot read the dataset card ({exc.__class__.__name__}: {exc})") from None
    found: dict[str, Any] = {}
    for line in text.splitlines():
        if (m := _CARD_HEADER.match(line)) and "env" not in found:
            found.update(m.groupdict())
        elif (m := _CARD_HV.match(line)) and "data_hv" not in found:
            found["data_hv"] = float(m["hv"])
    if "env" not in found:
        raise DataFileError(path, "not a dataset card: no line 'env_id ..., quality ..., preference entropy label ...'")
    if "data_hv" not in found:
        raise DataFileError(path, "the dataset card has no 'data HV' line")
    if not math.isfinite(found["data_hv"]) or found["data_hv"] < 0:
        raise DataFileError(path, f"the dataset card's data HV is {found['data_hv']}, not a finite non-negative number")
    return {**found, "path": str(path)}
