"""Helpers for the tests' synthetic datasets."""

from __future__ import annotations

import numpy as np

from morl.envs import get_spec, rest_observation


def at_rest(observations, lengths, env_id: str) -> np.ndarray:
    """``observations`` (float32 copy) with each trajectory's first row set to the rest observation
    of ``env_id``, as every real trajectory of that task starts (the loaders check it)."""
    obs = np.array(observations, dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
    obs[starts] = rest_observation(get_spec(env_id))
    return obs
