"""Every checkpoint the repository ships or commits still loads and acts as it did when it was made.

The shipped behavior policies (``behaviors/``, the retired ones included) and the committed front
models (``docs/**/*.front_model.pt``) are loaded with today's code and asked for their response to
fixed inputs: the behavior policies' actions at seeded observations and preferences, the front
models' predicted returns on a preference grid. ``tests/data/checkpoint_responses.json`` holds the
responses recorded with the code that made them (run this file as a script, from the checkout whose
code should answer, to record them again). A refactor that renames a network's weights, reorders a
layer or changes what a policy computes fails here, naming the file.

The networks run in float32, whose last bits differ between CPU kinds, so the comparison allows a
relative 1e-5 (the recorded values are rounded to 9 significant digits).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "checkpoint_responses.json"
RTOL, ATOL = 1e-5, 1e-6


def checkpoint_files(root: Path = ROOT) -> list[Path]:
    behaviors = sorted((root / "behaviors").glob("**/*.pt"))
    fronts = sorted((root / "docs").glob("**/*.front_model.pt"))
    return behaviors + fronts


def response(path: Path) -> list[list[float]]:
    """What the checkpoint at ``path`` answers to its fixed inputs, as nested lists of floats."""
    from morl.envs import get_spec
    from morl.preferences import simplex_grid

    if path.name.endswith(".front_model.pt"):
        from morl.front_model import load_front_model

        model = load_front_model(path)
        return model.predict(simplex_grid(model.n_obj, 10)).tolist()
    from morl.behavior import load_behavior

    env_id = path.name.split(".")[0]
    spec = get_spec(env_id)
    rng = np.random.default_rng(7)
    obs = rng.normal(size=(8, spec.obs_dim)).astype(np.float32)
    prefs = rng.dirichlet(np.ones(spec.n_obj), size=8).astype(np.float32)
    return np.asarray(load_behavior(path).act(obs, prefs), np.float64).tolist()


@pytest.mark.parametrize("path", checkpoint_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_shipped_or_committed_checkpoint_acts_as_when_it_was_made(path):
    recorded = json.loads(RECORDED.read_text())
    name = str(path.relative_to(ROOT))
    assert name in recorded, f"{name}: no recorded response; record it with `python {Path(__file__).name}`"
    got, want = np.asarray(response(path)), np.asarray(recorded[name])
    assert got.shape == want.shape, f"{name}: response of shape {got.shape}, recorded {want.shape}"
    worst = np.max(np.abs(got - want) / (ATOL + RTOL * np.abs(want)))
    assert worst <= 1, f"{name}: the response differs from the recorded one by {worst:.3g} times the tolerance"


def test_every_recorded_checkpoint_is_still_in_the_repository():
    recorded = json.loads(RECORDED.read_text())
    assert sorted(recorded) == sorted(str(p.relative_to(ROOT)) for p in checkpoint_files())


if __name__ == "__main__":
    # the answers of this checkout's code (an editable install of another checkout does not fill in)
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", ""))]
    sys.path.insert(0, str(ROOT))
    out = {
        str(p.relative_to(ROOT)): np.vectorize(lambda x: float(f"{x:.9g}"))(response(p)).tolist()
        for p in checkpoint_files()
    }
    RECORDED.parent.mkdir(exist_ok=True)
    RECORDED.write_text(json.dumps(out, indent=1) + "\n")
    print(f"recorded {len(out)} checkpoints in {RECORDED}")
