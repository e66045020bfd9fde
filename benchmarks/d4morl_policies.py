"""Run D4MORL's original PGMORL behavior policies in this project's environments and compare the
returns with the objective vectors PGMORL recorded for them.

D4MORL's behavior policies are PGMORL's final archives, shipped in PEDA's repository
(github.com/baitingzbt/PEDA, ``data_generation/Precomputed_Results/<Task>/final/``; commit
fc06d0738f74 holds all six tasks, 2139e286c203 four of them). A ``final/`` folder holds, per
archive policy ``i``, ``EP_policy_<i>.pt`` (the state dict of ``a2c_ppo_acktr.model.Policy``),
``EP_env_params_<i>.pkl`` (its ``ob_rms``, ``ret_rms`` and ``obj_rms``, baselines'
``RunningMeanStd``) and line ``i`` of ``objs.txt`` (its objective vector). Extract a folder and run:

    python benchmarks/d4morl_policies.py --final /tmp/d4morl/Hopper-v2/final --env MO-Hopper-v2
    python benchmarks/d4morl_policies.py --final DIR --env MO-Walker2d-v2 --policies 30 --reset peda --episodes 3

What PGMORL did when it wrote ``objs.txt`` (PGMORL's source, github.com/mit-gfx/PGMORL):

* ``morl/morl.py`` (end of ``run``) writes ``final/objs.txt`` from ``ep.obj_batch``, one line per
  archive policy in the order of ``EP_policy_<i>.pt``, each entry with ``'{:5f}'``;
  ``morl/ep.py`` keeps ``sample.objs`` of every non-dominated sample.
* ``sample.objs`` comes from ``evaluation`` in ``morl/mopg.py``, run after every PPO iteration:
  ``gym.make(env_name)`` (``environments/__init__.py`` registers the tasks with
  ``max_episode_steps=500``), ``eval_env.seed(args.seed + eval_id)``, ``eval_env.reset()``; each
  step ``ob = clip((ob - ob_rms.mean) / sqrt(ob_rms.var + 1e-8), -10, 10)`` (the same eps and clip
  as the training wrapper, baselines' ``VecNormalize`` in
  ``externals/baselines/baselines/common/vec_env/vec_normalize.py``: ``epsilon=1e-8``,
  ``clipob=10.``, applied by ``VecNormalize._obfilt`` in
  ``externals/pytorch-a2c-ppo-acktr-gail/a2c_ppo_acktr/envs.py``), then
  ``policy.act(torch.Tensor(ob).unsqueeze(0), None, None, deterministic=True)``: the mean of the
  Gaussian (``FixedNormal.mode = mean`` in ``a2c_ppo_acktr/distributions.py``), not clipped by the
  policy, in float64 (``morl/run.py`` calls ``torch.set_default_dtype(torch.float64)``). The
  environment clips the action to its bounds (``np.clip`` in each ``environments/<task>.py``
  ``step``) and its reward terms use the clipped action. ``objs += info['obj']`` undiscounted
  (the scripts ``scripts/<task>.py`` pass ``--raw``) over ``--eval-num 1`` episode.
* PGMORL's environments reset **without noise** (``reset_model`` sets ``init_qpos``,
  ``init_qvel``), so the seed changes nothing and each recorded vector is one deterministic
  episode of at most 500 steps from the rest state, simulated by mujoco-py (MuJoCo 2.0, solver
  warm start on). PEDA's copies of the environments (``data_generation/environments``) add the
  reset noise that ``morl.envs`` reproduces; otherwise their reward code is PGMORL's.

What this script compares. It loads each policy's actor (64x64 tanh MLP and mean head; the
critic is not needed) in float64 with one torch thread, normalises observations with that
policy's ``ob_rms`` exactly as above (eps 1e-8, clip 10), takes the mean action, and steps the
project's single environment ``morl.envs.make_env(env_id)`` (``MOMujocoEnv``, the env that
``morl.rollout.rollout_sequential`` uses as the reference of the batched evaluation; it clips the
action to the D4MORL bounds and computes the rewards from the clipped action, as PGMORL's env did).
Its objective order and reward formulas are D4MORL's ``info['obj']`` (docs/environments.md,
``morl/envs/rewards.py``: HalfCheetah [run, energy], Hopper-v2 [run, jump], Walker2d [speed,
energy], ...), the order of ``objs.txt``, so the vectors are compared entry by entry, unweighted
and undiscounted, over the episode (terminated or cut at 500 steps).

* ``--reset pgmorl`` (default): each episode starts at the rest state without noise (``qpos0``,
  zero ``qvel``), PGMORL's start, so the comparison with ``objs.txt`` is like for like except
  for the simulator (MuJoCo 2.0 through mujoco-py there, the installed MuJoCo here, with the
  project's model files; see docs/environments.md). Episodes are identical, so ``--episodes``
  above 1 only repeats them.
* ``--reset peda``: episode ``k`` starts with ``env.reset(seed=seed + k)``, PEDA's reset noise
  (what D4MORL's collection ran); the table then shows the mean over the episodes.
* ``--obs float64`` (default) rebuilds the observation in float64 from the MuJoCo state, as
  mujoco-py gave it to PGMORL (checked to round to the env's float32 observation every step);
  ``--obs float32`` feeds the env's float32 observation, as this project's pipeline does.
* ``--warmstart`` turns MuJoCo's solver warm start back on in this script's env (mujoco-py had
  it on; the project turns it off, docs/environments.md), to see whether it matters.
* ``--capsules mujoco200`` gives this script's model the body masses and inertias MuJoCo 2.0
  compiled from the same geoms: before MuJoCo 2.1.2 ``inertiafromgeom`` treated a capsule as a
  cylinder of its middle section extended by half the radius at both ends (changelog 2.1.2,
  "Computed capsule inertias are now exact"). The recomputation is first checked to give the
  current model's own values back with the exact rule. It gives mujoco-py's well-known masses
  (Hopper torso 3.534 instead of 3.665).
* ``--margins mujoco200`` gives contacts the margin MuJoCo 2.0 used: the larger of the two geoms'
  margins, which MuJoCo 3.5.0 replaced by their sum (changelog 3.5.0). Only Hopper (0.001) and
  Ant (0.01) have margins.

What it measured is in docs/environments.md ("D4MORL's own behavior policies in these envs").

Output: a markdown table (policy index, the ``objs.txt`` vector, our mean return vector, the
relative difference ``(ours - objs) / |objs|`` per objective, the mean episode length), then a
summary line: per objective the median and the largest absolute relative difference, and the
share of policies whose every objective lies within 5% (and within 0.1%). ``--policies K`` runs K policies spread
evenly over the archive's order (by default all of them). ``--json PATH`` also writes the rows.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import mujoco
import numpy as np
import torch

from morl.d4morl import RestrictedUnpickler
from morl.envs import assets_dir, get_spec, make_env
from morl.envs.rewards import observe_without_x_clip_qvel

OBS_EPS = 1e-8  # baselines' VecNormalize epsilon, and mopg.evaluation's
OBS_CLIP = 10.0  # VecNormalize clipob, and mopg.evaluation's
WITHIN = 0.05
ACTOR_KEYS = (
    "base.actor.0.weight",
    "base.actor.0.bias",
    "base.actor.2.weight",
    "base.actor.2.bias",
    "dist.fc_mean.weight",
    "dist.fc_mean.bias",
)


class RunningMeanStd:
    """Stand-in for ``baselines.common.running_mean_std.RunningMeanStd``: holds the pickled
    attributes (``mean``, ``var``, ``count``) and runs nothing."""


class ParamsUnpickler(RestrictedUnpickler):
    """The project's restricted unpickler (numpy arrays, scalars, dtypes, plain containers), which
    also maps baselines' ``RunningMeanStd`` to the inert stand-in above."""

    def find_class(self, module: str, name: str):
        if (module, name) == ("baselines.common.running_mean_std", "RunningMeanStd"):
            return RunningMeanStd
        return super().find_class(module, name)


def load_env_params(path: Path) -> dict:
    with open(path, "rb") as f:
        params = ParamsUnpickler(f, path).load()
    if not isinstance(params, dict) or not isinstance(params.get("ob_rms"), RunningMeanStd):
        raise ValueError(f"{path}: expected a dict with an 'ob_rms' RunningMeanStd")
    return params


class Actor:
    """The mean action of one ``a2c_ppo_acktr`` policy (``MLPBase`` with ``layernorm=False``: two
    tanh layers, then ``DiagGaussian.fc_mean``) on its own normalised observations, float64."""

    def __init__(self, policy_path: Path, params_path: Path, obs_dim: int, act_dim: int):
        sd = torch.load(policy_path, map_location="cpu", weights_only=True)
        missing = [k for k in ACTOR_KEYS if k not in sd]
        if missing:
            raise ValueError(f"{policy_path}: missing {missing}")
        self.w1, self.b1, self.w2, self.b2, self.wm, self.bm = (sd[k].to(torch.float64) for k in ACTOR_KEYS)
        if self.w1.shape[1] != obs_dim or self.wm.shape[0] != act_dim:
            raise ValueError(
                f"{policy_path}: the policy takes {self.w1.shape[1]} observations and gives "
                f"{self.wm.shape[0]} actions; the env has {obs_dim} and {act_dim}"
            )
        rms = load_env_params(params_path)["ob_rms"]
        self.mean = torch.as_tensor(np.asarray(rms.mean, np.float64))
        self.std = torch.sqrt(torch.as_tensor(np.asarray(rms.var, np.float64)) + OBS_EPS)
        if self.mean.shape != (obs_dim,):
            raise ValueError(f"{params_path}: ob_rms.mean has shape {tuple(self.mean.shape)}, expected ({obs_dim},)")

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = ((torch.as_tensor(obs, dtype=torch.float64) - self.mean) / self.std).clamp(-OBS_CLIP, OBS_CLIP)
        h = torch.tanh(torch.nn.functional.linear(x, self.w1, self.b1))
        h = torch.tanh(torch.nn.functional.linear(h, self.w2, self.b2))
        return torch.nn.functional.linear(h, self.wm, self.bm).numpy()


def _geom_mass_inertia(gtype: int, size: np.ndarray, rho: float, capsule: str) -> tuple[float, np.ndarray]:
    """Mass and principal inertia (geom frame, axis z) of one geom of density ``rho``, by MuJoCo's
    ``inertiafromgeom`` formulas: ``capsule="exact"`` as MuJoCo >= 2.1.2 computes capsules,
    ``"mujoco200"`` as MuJoCo 2.0 did (a cylinder of the capsule's middle section extended on both
    ends by half the radius; MuJoCo 2.1.2 changelog, "Computed capsule inertias are now exact")."""
    G = mujoco.mjtGeom
    gtype = int(gtype)
    r, h = float(size[0]), float(size[1])
    if gtype == G.mjGEOM_SPHERE:
        m = rho * 4 / 3 * np.pi * r**3
        return m, np.full(3, 0.4 * m * r * r)
    if gtype == G.mjGEOM_CAPSULE and capsule == "exact":
        mc, ms = rho * np.pi * r * r * 2 * h, rho * 4 / 3 * np.pi * r**3
        perp = mc * (3 * r * r + 4 * h * h) / 12 + ms * (0.4 * r * r + h * h + 0.75 * h * r)
        return mc + ms, np.array([perp, perp, mc * r * r / 2 + ms * 0.4 * r * r])
    if gtype in (G.mjGEOM_CAPSULE, G.mjGEOM_CYLINDER):
        length = 2 * h + (r if gtype == G.mjGEOM_CAPSULE else 0.0)
        m = rho * np.pi * r * r * length
        perp = m * (3 * r * r + length * length) / 12
        return m, np.array([perp, perp, m * r * r / 2])
    if gtype == G.mjGEOM_BOX:
        a, b, c = (float(s) for s in size)
        m = rho * 8 * a * b * c
        return m, m / 3 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    if gtype == G.mjGEOM_ELLIPSOID:
        a, b, c = (float(s) for s in size)
        m = rho * 4 / 3 * np.pi * a * b * c
        return m, m / 5 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    raise ValueError(f"geom type {gtype} is not handled")


def body_inertials(model: mujoco.MjModel, capsule: str, total_mass: float | None) -> dict[str, np.ndarray]:
    """Every body's mass, centre of mass, principal inertia and its frame, recomputed from the
    body's geoms with the capsule rule ``capsule`` (see :func:`_geom_mass_inertia`). Each body's
    density is taken from the compiled model (its mass over its geoms' exact volume: one density per
    body, as in these files). ``total_mass``: rescale masses and inertias to it (``settotalmass``)."""
    out = {k: getattr(model, k).copy() for k in ("body_mass", "body_ipos", "body_iquat", "body_inertia")}
    for b in range(1, model.nbody):
        geoms = np.flatnonzero(model.geom_bodyid == b)
        if len(geoms) == 0:
            continue
        unit = [_geom_mass_inertia(model.geom_type[g], model.geom_size[g], 1.0, "exact")[0] for g in geoms]
        rho = model.body_mass[b] / sum(unit)
        parts = [_geom_mass_inertia(model.geom_type[g], model.geom_size[g], rho, capsule) for g in geoms]
        masses = np.array([m for m, _ in parts])
        com = (masses[:, None] * model.geom_pos[geoms]).sum(0) / masses.sum()
        tensor = np.zeros((3, 3))
        for g, (m, inertia) in zip(geoms, parts):
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, model.geom_quat[g])
            rot = rot.reshape(3, 3)
            d = model.geom_pos[g] - com
            tensor += rot @ np.diag(inertia) @ rot.T + m * (d @ d * np.eye(3) - np.outer(d, d))
        eigval, eigvec = np.linalg.eigh(tensor)
        if np.linalg.det(eigvec) < 0:
            eigvec[:, 0] = -eigvec[:, 0]
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, eigvec.reshape(-1))
        out["body_mass"][b], out["body_ipos"][b] = masses.sum(), com
        out["body_inertia"][b], out["body_iquat"][b] = eigval, quat
    if total_mass is not None:
        scale = total_mass / out["body_mass"].sum()
        out["body_mass"] *= scale
        out["body_inertia"] *= scale
    return out


def inertia_tensors(model_or_arrays) -> np.ndarray:
    """(nbody, 3, 3) inertia tensors in body frames, to compare two frames' descriptions."""
    get = model_or_arrays.get if isinstance(model_or_arrays, dict) else lambda k: getattr(model_or_arrays, k)
    out = []
    for quat, inertia in zip(get("body_iquat"), get("body_inertia")):
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, quat)
        rot = rot.reshape(3, 3)
        out.append(rot @ np.diag(inertia) @ rot.T)
    return np.array(out)


def use_mujoco200_capsules(env) -> str:
    """Give ``env``'s model the masses and inertias MuJoCo 2.0 compiled for the same geoms (the
    simulator of D4MORL's mujoco-py); returns a line that says what changed. The same
    recomputation with the exact capsule rule must give the model's own values back first."""
    model = env.model
    xml = (Path(assets_dir()) / env.spec_morl.xml).read_text()
    total = float(model.body_mass.sum()) if "settotalmass" in xml else None
    check = body_inertials(model, "exact", total)
    err = max(
        float(np.max(np.abs(check["body_mass"] - model.body_mass))),
        float(np.max(np.abs(check["body_ipos"] - model.body_ipos))),
        float(np.max(np.abs(inertia_tensors(check) - inertia_tensors(model)))),
    )
    if err > 1e-9:
        raise RuntimeError(f"{env.spec_morl.id}: recomputing the current inertials is off by {err:.2e}")
    old = model.body_mass.copy()
    new = body_inertials(model, "mujoco200", total)
    for key, value in new.items():
        getattr(model, key)[:] = value
    mujoco.mj_setConst(model, env.data)
    return (
        f"MuJoCo 2.0 capsule inertials: body masses {np.round(old[1:], 4).tolist()} -> "
        f"{np.round(model.body_mass[1:], 4).tolist()} (recomputation checked to {err:.0e})"
    )


def use_mujoco200_margins(env) -> str:
    """Make ``env``'s contacts use the margin MuJoCo 2.0 gave them. MuJoCo before 3.5.0 took the
    larger of the two geoms' margins for a contact, MuJoCo 3.5.0 and later sum them (changelog
    3.5.0, "When combining the margin or gap parameters of two geoms ... now summed rather than
    taking the maximum"). Where every geom has the same margin and no gap (Hopper 0.001, Ant 0.01),
    halving every geom's margin gives the old contact margin under the new rule."""
    model = env.model
    version = tuple(int(p) for p in mujoco.__version__.split(".")[:2])
    margins = np.unique(model.geom_margin)
    if version < (3, 5) or np.all(margins == 0):
        return f"contact margins: nothing to change (mujoco {mujoco.__version__}, geom margins {margins.tolist()})"
    if len(margins) != 1 or np.any(model.geom_gap != 0):
        raise RuntimeError(
            f"{env.spec_morl.id}: geoms with different margins or a gap; max cannot be emulated by a sum"
        )
    model.geom_margin[:] = margins[0] / 2
    return f"contact margins: geom margin {margins[0]} -> {margins[0] / 2}, so that a contact's (summed) margin is {margins[0]}"


def read_objs(path: Path) -> np.ndarray:
    rows = [[float(v) for v in line.split(",")] for line in path.read_text().splitlines() if line.strip()]
    return np.asarray(rows, np.float64)


def run_episode(env, actor: Actor, reset: str, seed: int, obs_dtype: str) -> tuple[np.ndarray, int]:
    """One deterministic episode; returns (return vector float64, length)."""
    spec = env.spec_morl
    model, data = env.model, env.data
    obs32, _ = env.reset(seed=seed)
    if reset == "pgmorl":  # PGMORL's reset_model: set_state(init_qpos, init_qvel), no noise
        mujoco.mj_resetData(model, data)
        data.qpos[:] = model.qpos0
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)
        obs32 = spec.observation_fn(data.qpos[None], data.qvel[None])[0]
    skip = model.nq + model.nv - spec.obs_dim  # root coordinates left out of the observation
    clip_qvel = spec.observation_fn is observe_without_x_clip_qvel
    total = np.zeros(spec.n_obj, np.float64)
    t = 0
    while True:
        if obs_dtype == "float64":
            qvel = np.clip(data.qvel, -10.0, 10.0) if clip_qvel else data.qvel
            obs = np.concatenate([data.qpos[skip:], qvel])
            if not np.array_equal(obs.astype(np.float32), obs32):
                raise RuntimeError(f"{spec.id}: the float64 observation does not match the env's")
        else:
            obs = obs32
        action = actor(obs)
        obs32, reward, terminated, truncated, info = env.step(action)
        total += np.asarray(info["obj"], np.float64)
        t += 1
        if terminated or truncated:
            return total, t


def fmt(v: np.ndarray, digits: int = 1) -> str:
    return "[" + ", ".join(f"{x:.{digits}f}" for x in v) + "]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--final", type=Path, required=True, help="a PGMORL final/ folder")
    ap.add_argument("--env", required=True, help="this project's env id, e.g. MO-Hopper-v2")
    ap.add_argument("--episodes", type=int, default=1)
    ap.add_argument("--policies", type=int, default=None, help="K policies spread over the archive (default all)")
    ap.add_argument("--reset", choices=("pgmorl", "peda"), default="pgmorl")
    ap.add_argument("--seed", type=int, default=0, help="episode k resets with seed + k")
    ap.add_argument("--obs", choices=("float64", "float32"), default="float64")
    ap.add_argument("--warmstart", action="store_true", help="turn MuJoCo's solver warm start on (as mujoco-py had)")
    ap.add_argument(
        "--capsules",
        choices=("current", "mujoco200"),
        default="current",
        help="mujoco200: give the model the capsule masses and inertias MuJoCo 2.0 (mujoco-py) compiled",
    )
    ap.add_argument(
        "--margins",
        choices=("current", "mujoco200"),
        default="current",
        help="mujoco200: give contacts the margin MuJoCo 2.0 did (the larger geom margin, not the sum)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    if args.episodes < 1:
        ap.error("--episodes must be at least 1")

    torch.set_num_threads(1)
    spec = get_spec(args.env)
    objs = read_objs(args.final / "objs.txt")
    if objs.ndim != 2 or objs.shape[1] != spec.n_obj:
        raise SystemExit(f"{args.final}/objs.txt has shape {objs.shape}; {args.env} has {spec.n_obj} objectives")
    n = len(objs)
    k = n if args.policies is None else max(1, min(args.policies, n))
    indices = sorted({int(i) for i in np.linspace(0, n - 1, k).round()})
    env = make_env(args.env)
    if args.warmstart:
        env.model.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
    if args.capsules == "mujoco200":
        print(use_mujoco200_capsules(env))
    if args.margins == "mujoco200":
        print(use_mujoco200_margins(env))

    print(
        f"{args.env}: {len(indices)} of {n} policies from {args.final}, reset {args.reset}, "
        f"{args.episodes} episode(s), seeds {args.seed}..{args.seed + args.episodes - 1}, obs {args.obs}, "
        f"warm start {'on' if args.warmstart else 'off'}, capsules {args.capsules}, margins {args.margins}, mujoco {mujoco.__version__}\n"
    )
    print("| policy | objs.txt | ours | rel. diff | length |")
    print("|---:|---|---|---|---:|")
    rows = []
    start = time.perf_counter()
    for i in indices:
        actor = Actor(
            args.final / f"EP_policy_{i}.pt", args.final / f"EP_env_params_{i}.pkl", spec.obs_dim, spec.act_dim
        )
        episodes = [run_episode(env, actor, args.reset, args.seed + e, args.obs) for e in range(args.episodes)]
        ours = np.mean([r for r, _ in episodes], axis=0)
        length = float(np.mean([t for _, t in episodes]))
        rel = (ours - objs[i]) / np.abs(objs[i])
        rows.append({"policy": i, "objs": objs[i].tolist(), "ours": ours.tolist(), "rel": rel.tolist(),
                     "length": length, "lengths": [t for _, t in episodes]})  # fmt: skip
        print(f"| {i} | {fmt(objs[i])} | {fmt(ours)} | {fmt(100 * rel)}% | {length:.0f} |", flush=True)

    rel = np.abs(np.array([r["rel"] for r in rows]))
    within = float(np.mean(np.all(rel <= WITHIN, axis=1)))
    print(
        f"\nsummary {args.env} ({len(rows)} policies, reset {args.reset}, {args.episodes} ep.): "
        f"|rel. diff| median {fmt(100 * np.median(rel, axis=0), 2)}%, max {fmt(100 * rel.max(axis=0), 2)}%; "
        f"within {100 * WITHIN:.0f}% on every objective: {100 * within:.0f}% of policies "
        f"(within 0.1%: {100 * np.mean(np.all(rel <= 1e-3, axis=1)):.0f}%); "
        f"full-length episodes {sum(r['length'] == spec.max_episode_steps for r in rows)}/{len(rows)} "
        f"({time.perf_counter() - start:.0f} s)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps({"env": args.env, "args": {k: str(v) for k, v in vars(args).items()},
                                         "rows": rows}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
