"""How far is a training step from its floor? The full step of `morl train` against the work it
cannot avoid, side by side in one run.

* **MORvS(P) at PEDA's size** (3 x 512, batch 64; configs/paper.yaml): the full step (sample and
  gather a batch, forward, loss, backward, AdamW, learning-rate schedule) against the floor: a plain
  ``nn.Sequential`` of the same layer shapes, its forward and backward on a fixed batch of the same
  size, and one fused AdamW update of the same parameters; and against the same floor with the
  dropout PEDA's MLP applies after each hidden layer (part of its update rule, not overhead).
* **MODT(P)** at configs/paper-cpu.yaml's size and **CQL(P)** at configs/unseen.yaml's: the full step
  against the same learner's update on one fixed, already gathered batch (the floor of the loop
  around the networks: sampling, gathering and bookkeeping are what it leaves out).
* **MODULI's front model** (``morl.front_model``: 2 -> 128 -> 512 -> 512 -> 2 with Mish, batch 512,
  fused AdamW): a step of ``fit_front_model`` itself (its wall time over the steps, on 4,096 points
  that all lie on the front, so every batch is full) against the same network's update on one fixed
  batch, and against that update with ReLU in place of Mish (the matmuls and the optimiser alone).

Each is timed ``--rounds`` times for ``--steps`` steps, the two taking turns, and the median is
reported. One torch thread, the runtime set up as ``morl train`` sets it.

    python benchmarks/step_floor.py [--steps 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from synthetic import synthetic_dataset  # noqa: E402

from morl.config import train_settings  # noqa: E402
from morl.cpu import configure  # noqa: E402
from morl.data import load_dataset  # noqa: E402
from morl.families import family_of  # noqa: E402
from morl.families.base import Dims  # noqa: E402
from morl.normalisation import dataset_facts, observation_stats  # noqa: E402


def learner_of(model: str, config: str, data_path: Path):
    settings = train_settings(yaml.safe_load((ROOT / config).read_text()), "MO-HalfCheetah-v2", model)
    fam = family_of(model)
    settings = fam.resolve_settings(settings)
    module = fam.load()
    ds = load_dataset(data_path)
    dev = torch.device("cpu")
    facts = dataset_facts(ds, data_path)
    data = module.prepare(ds, settings, dev, observation_stats(ds.observations), facts)
    torch.manual_seed(0)
    return module.Learner(model, data, Dims(ds.obs_dim, ds.act_dim, ds.n_obj), settings, dev, facts), settings


def mlp_floor(learner, batch_size: int, dropout: float = 0.0):
    """A plain MLP of the policy's layer shapes (with ``dropout`` after each hidden layer, as PEDA's
    MLP has), a fixed batch, one fused AdamW update."""
    shapes = [m.weight.shape for m in learner.policy.modules() if isinstance(m, torch.nn.Linear)]
    layers = []
    for i, (out, inp) in enumerate(shapes):
        layers.append(torch.nn.Linear(inp, out))
        if i < len(shapes) - 1:
            layers.append(torch.nn.ReLU())
            if dropout:
                layers.append(torch.nn.Dropout(dropout))
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    x, y = torch.randn(batch_size, shapes[0][1]), torch.randn(batch_size, shapes[-1][0])

    def step(_):
        loss = ((net(x) - y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def full_step(learner, gen):
    def step(i):
        learner.update(learner.sample(gen), i)

    return step


def fixed_batch_step(learner, gen):
    batch = learner.sample(gen)

    def step(i):
        learner.update(batch, i)

    return step


def front_model_cases():
    """(full, floor, matmul floor) of the front model: ``full(n)`` is a whole ``n``-step fit's
    seconds per step; the floors are steps, as :func:`timed` takes them."""
    import numpy as np

    from morl.front_model import BATCH_SIZE, LR, build_network, fit_front_model

    rng = np.random.default_rng(0)
    theta = rng.uniform(0.0, np.pi / 2, 4096)
    prefs = np.stack([np.cos(theta), np.sin(theta)], axis=1) ** 2  # on the simplex
    returns = 1000.0 * np.stack([np.cos(theta), np.sin(theta)], axis=1)  # a quarter circle: all on the front

    def full(n: int) -> float:
        t0 = time.perf_counter()
        fit_front_model(prefs, returns, steps=n)
        return (time.perf_counter() - t0) / n

    def update(activation):
        net = build_network(2)
        if activation is not None:
            net = torch.nn.Sequential(*[activation() if isinstance(m, torch.nn.Mish) else m for m in net])
        opt = torch.optim.AdamW(net.parameters(), lr=LR, fused=True)
        x = torch.from_numpy(prefs[:BATCH_SIZE].astype(np.float32))
        y = torch.from_numpy(returns[:BATCH_SIZE].astype(np.float32))

        def step(_):
            loss = torch.nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    return full, update(None), update(torch.nn.ReLU)


def timed(step, n: int) -> float:
    for i in range(3):
        step(i)
    t0 = time.perf_counter()
    for i in range(n):
        step(i)
    return (time.perf_counter() - t0) / n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300, help="steps per timing")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--trajectories", type=int, default=200, help="of the synthetic dataset (500 steps each)")
    args = p.parse_args(argv)
    configure(threads=1)
    with tempfile.TemporaryDirectory() as tmp:
        data = synthetic_dataset(Path(tmp) / "synthetic.parquet", n_traj=args.trajectories)
        cases = []
        learner, s = learner_of("rvs-p", "configs/paper.yaml", data)
        gen = torch.Generator().manual_seed(0)
        # each case: name, floor, the full step's seconds per step over n steps, the floor's step
        cases.append(("MORvS(P), PEDA's size", "plain MLP + fused AdamW", partial(timed, full_step(learner, gen)),
                      mlp_floor(learner, s["batch_size"])))  # fmt: skip
        cases.append(("MORvS(P), PEDA's size", f"the same with PEDA's dropout ({s['dropout']})",
                      partial(timed, full_step(learner, gen)),
                      mlp_floor(learner, s["batch_size"], s["dropout"])))  # fmt: skip
        for model, config, name in (
            ("dt-p", "configs/paper-cpu.yaml", "MODT(P)"),
            ("cql-p", "configs/unseen.yaml", "CQL(P)"),
        ):
            learner, _ = learner_of(model, config, data)
            gen = torch.Generator().manual_seed(0)
            cases.append(
                (
                    name,
                    "the update on one fixed batch",
                    partial(timed, full_step(learner, gen)),
                    fixed_batch_step(learner, gen),
                )
            )
        front_full, front_floor, front_matmul = front_model_cases()
        cases.append(("front model (MODULI)", "its update on one fixed batch", front_full, front_floor))
        cases.append(("front model (MODULI)", "the same with ReLU for Mish", front_full, front_matmul))
        print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread; median of "
              f"{args.rounds} rounds of {args.steps} steps\n")  # fmt: skip
        print("| model | floor | full step (ms) | floor (ms) | full / floor |")
        print("|---|---|---|---|---|")
        for name, floor_name, full, floor in cases:
            a, b = [], []
            for _ in range(args.rounds):
                a.append(full(args.steps))
                b.append(timed(floor, args.steps))
            fa, fb = statistics.median(a), statistics.median(b)
            print(f"| {name} | {floor_name} | {1e3 * fa:.2f} | {1e3 * fb:.2f} | {fa / fb:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
