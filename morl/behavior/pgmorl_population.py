"""Acting with a trained PGMORL population, and thinning it: :class:`PopulationPolicy` acts by
PEDA's nearest-policy rule with the archive of a population file (or of a run in progress, its
``<output>.partial``); :func:`thin_population` writes the file with at most a given number of
policies."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from morl.behavior.pgmorl_networks import ACTOR_KEYS, EPS, actor_mean
from morl.behavior.pgmorl_state import KIND, PARTIAL_KIND, load_run_state
from morl.envs import check_file_identity, get_spec
from morl.errors import InputError
from morl.progress import log
from morl.torch_io import load_torch, save_torch

# ------------------------------------------------------------------------------------------
# Acting with a population: PEDA's nearest-policy rule
# ------------------------------------------------------------------------------------------


def _population_of_partial(path: Path, st: dict) -> dict:
    """The archive of a run in progress (``<output>.partial``) laid out like a final file, so that
    it can be evaluated or collected from (``morl behavior-front --policy X.pt.partial``)."""
    try:
        spec = get_spec(st["env_id"])
        return {
            "kind": KIND,
            "env_id": st["env_id"],
            "physics_version": st.get("physics_version"),
            "method": "pgmorl",
            "obs_dim": spec.obs_dim,
            "act_dim": spec.act_dim,
            "n_obj": spec.n_obj,
            "hidden": st["settings"]["hidden"],
            "act_low": np.asarray(spec.act_low, np.float32).tolist(),
            "act_high": np.asarray(spec.act_high, np.float32).tolist(),
            "obs_clip": st["settings"]["obs_clip"],
            "settings": st["settings"],
            "partial": True,
            "iterations": st["iteration"],
            "env_steps": int(st.get("env_steps", st["history"][-1][1] if st["history"] else 0)),
            "archive": st["archive"],
            "objs": st["archive_objs"],
            "history": st["history"],
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: incomplete partial PGMORL file ({exc!r})") from None


class PopulationPolicy:
    """A trained PGMORL population: for each (observation, preference) row the deterministic action
    of the archive policy whose sum-normalised objective vector is nearest to the preference
    (PEDA's ``collect_env_new.py``), on observations normalised by that policy's statistics.

    ``pref_low`` / ``pref_high``: the per-objective range of the normalised objective vectors, the
    box D4MORL's preference distributions are drawn in.
    """

    def __init__(self, path: str | os.PathLike, expect_env: str | None = None, state: dict | None = None):
        self.path = Path(path)
        st = state if state is not None else load_torch(self.path, "behavior checkpoint")
        if isinstance(st, dict) and st.get("kind") == PARTIAL_KIND:
            st = _population_of_partial(self.path, st)
        check_file_identity(self.path, st, KIND, expect_env, "PGMORL population", "population")
        try:
            self.env_id = st["env_id"]
            self.n_obj, self.obs_dim, self.act_dim = int(st["n_obj"]), int(st["obs_dim"]), int(st["act_dim"])
            hidden = int(st["hidden"])
            self.act_low = np.asarray(st["act_low"], np.float32)
            self.act_high = np.asarray(st["act_high"], np.float32)
            self.obs_clip = float(st["obs_clip"])
            arch = {k: st["archive"][k].to(torch.float32) for k in (*ACTOR_KEYS, "ob_mean", "ob_var")}
            objs = st["objs"].numpy().astype(np.float64)
        except (KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{self.path}: incomplete PGMORL population ({exc!r})") from None
        n = objs.shape[0] if objs.ndim == 2 else -1
        if n < 1:
            raise InputError(f"{self.path}: the population's archive is empty; there is no policy to act")
        want = {
            "a_w1": (n, self.obs_dim, hidden),
            "a_b1": (n, hidden),
            "a_w2": (n, hidden, hidden),
            "a_b2": (n, hidden),
            "a_wm": (n, hidden, self.act_dim),
            "a_bm": (n, self.act_dim),
            "ob_mean": (n, self.obs_dim),
            "ob_var": (n, self.obs_dim),
        }
        bad = [
            f"{k} {tuple(arch[k].shape)} (expected {shape})"
            for k, shape in want.items()
            if tuple(arch[k].shape) != shape
        ]
        if objs.shape[1] != self.n_obj:
            bad.append(f"objs {objs.shape} (expected ({n}, {self.n_obj}))")
        if bad:
            raise InputError(f"{self.path}: PGMORL population with mismatched sizes: {', '.join(bad)}")
        if not all(torch.isfinite(v).all() for v in arch.values()) or not np.all(np.isfinite(objs)):
            raise InputError(f"{self.path}: PGMORL population holds non-finite weights or objectives")
        if np.any(objs < 0) or np.any(objs.sum(1) <= 0):
            raise InputError(f"{self.path}: PGMORL population objectives must be non-negative with a positive sum")
        spec = get_spec(self.env_id)
        if (spec.obs_dim, spec.act_dim, spec.n_obj) != (self.obs_dim, self.act_dim, self.n_obj):
            raise InputError(
                f"{self.path}: the population takes {self.obs_dim} observations and {self.n_obj} "
                f"objectives and gives {self.act_dim} actions, but {self.env_id} has {spec.obs_dim}, "
                f"{spec.n_obj} and {spec.act_dim}"
            )
        self.arch = arch
        self.objs = objs
        self.norm_objs = objs / objs.sum(axis=1, keepdims=True)
        self.pref_low = self.norm_objs.min(axis=0)
        self.pref_high = self.norm_objs.max(axis=0)
        self.meta = {k: v for k, v in st.items() if k not in ("archive", "objs")}
        self.meta["archive_size"] = n

    def nearest(self, prefs: np.ndarray) -> np.ndarray:
        """(N,) index of the archive policy that acts for each preference row."""
        w = np.asarray(prefs, np.float64)
        d = ((self.norm_objs[None, :, :] - w[:, None, :]) ** 2).sum(-1)
        return np.argmin(d, axis=1)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, prefs: np.ndarray) -> np.ndarray:
        idx = torch.from_numpy(self.nearest(prefs))
        a = self.arch
        o = torch.from_numpy(np.asarray(obs, np.float32))
        z = ((o - a["ob_mean"][idx]) / torch.sqrt(a["ob_var"][idx] + EPS)).clamp(-self.obs_clip, self.obs_clip)
        rows = {k: a[k][idx] for k in ACTOR_KEYS}
        return actor_mean(rows, z.unsqueeze(1))[:, 0].numpy()


# ------------------------------------------------------------------------------------------
# Thinning an archive to a file size
# ------------------------------------------------------------------------------------------


#: How :func:`thin_population` picks the policies it keeps (recorded in the thinned file).
THINNING_RULE = (
    "the policies at each objective's smallest and largest sum-normalised value, then farthest-point "
    "sampling in the sum-normalised objective simplex (squared distance, as the nearest-policy rule)"
)


def thinned_indices(norm_objs: np.ndarray, max_policies: int) -> np.ndarray:
    """Sorted indices of at most ``max_policies`` rows of ``norm_objs`` (the archive's sum-normalised
    objective vectors): first the rows holding each objective's smallest and largest value, so the
    box preferences are drawn in stays the same, then, one at a time, the row farthest (squared
    distance) from every row kept so far, the first such row on a tie. The kept rows cover the
    simplex region the nearest-policy rule maps preferences to, as evenly as greedy covering can."""
    n = len(norm_objs)
    if n <= max_policies:
        return np.arange(n)
    keep = sorted({int(i) for i in (*np.argmin(norm_objs, axis=0), *np.argmax(norm_objs, axis=0))})
    if len(keep) > max_policies:
        raise ValueError(f"max_policies {max_policies} is below the {len(keep)} policies that span the preference box")
    nearest = np.min(((norm_objs[:, None, :] - norm_objs[None, keep, :]) ** 2).sum(-1), axis=1)
    while len(keep) < max_policies:
        j = int(np.argmax(nearest))
        keep.append(j)
        nearest = np.minimum(nearest, ((norm_objs - norm_objs[j]) ** 2).sum(-1))
    return np.sort(np.asarray(keep))


def thin_population(
    path: str | os.PathLike, max_policies: int, output: str | os.PathLike, expect_env: str | None = None
) -> dict[str, Any]:
    """Write to ``output`` the population file ``path`` with at most ``max_policies`` archive
    policies (:func:`thinned_indices`), for a file size limit: each policy of a 64 x 64 actor takes
    about 20 KB, and a three-objective archive holds thousands. Collection from the thinned file
    uses the nearest of the kept policies, a departure from the full archive that its behavior
    front measures. The file records the original archive size, the rule and the source's SHA-256.
    ``path`` may be a run in progress (``<output>.partial``): the output is then the archive at its
    last saved iteration, and says so (``partial``, ``iterations``, ``env_steps``)."""
    from morl.data import file_sha256

    path = Path(path)
    if max_policies < 1:
        raise InputError(f"max_policies must be at least 1, got {max_policies}")
    st = load_torch(path, "behavior checkpoint")
    if isinstance(st, dict) and st.get("kind") == PARTIAL_KIND:
        # a run in progress (<output>.partial): its archive so far, as a population file that
        # records where the run stood ("partial": True, "iterations", "env_steps")
        load_run_state(path, PARTIAL_KIND, expect_env)  # the run state's own identity checks first
        st = _population_of_partial(path, st)
    policy = PopulationPolicy(path, expect_env=expect_env, state=st)  # every check of a population file
    try:
        keep = thinned_indices(policy.norm_objs, max_policies)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    index = torch.from_numpy(keep)
    thinned = dict(st)
    thinned["archive"] = {k: v.index_select(0, index).clone() for k, v in st["archive"].items()}
    thinned["objs"] = st["objs"].index_select(0, index).clone()
    thinned["thinned"] = {
        "archive_size": len(policy.objs),
        "kept": len(keep),
        "rule": THINNING_RULE,
        "source_sha256": file_sha256(path),
    }
    save_torch(output, thinned)
    kept = policy.norm_objs[keep]
    summary = {
        "env_id": policy.env_id,
        "archive_size": len(policy.objs),
        "kept": len(keep),
        "pref_box_unchanged": bool(
            np.array_equal(kept.min(0), policy.pref_low) and np.array_equal(kept.max(0), policy.pref_high)
        ),
        "bytes": os.path.getsize(output),
    }
    log.info("thinned %s: %s", path, summary)
    return summary
