"""The TD3 behavior method: one preference-conditioned TD3 agent per environment.

The original D4MORL data came from a PGMORL population that is not available, so the pipeline
trains its own behavior policy. We use TD3 (Fujimoto et al., 2018) with two changes that make a
single network cover the whole preference simplex:

* **Preference as input.** Actor ``pi(s, w)`` and critics ``Q(s, w, a)`` both receive the
  preference ``w``; a new ``w ~ Dirichlet(1)`` is drawn at the start of every episode.
* **Vector critic.** Each critic predicts one return per objective, ``Q(s, w, a) in R^n_obj``, and
  is trained on the raw reward vector. The actor maximises the scalarised value ``w . Q``; of the
  twin critics the target uses, per sample, the one with the lower scalarised value. Because the
  reward vector does not depend on ``w``, a stored transition is valid for every preference, so
  each batch relabels half its preferences with fresh draws: every transition teaches every part
  of the front.

Training is resumable: every ``checkpoint_every`` environment steps the networks, optimisers,
replay buffer, random states and the episodes in flight (each env's seed, preference and the
actions it has taken, replayed on resume) go to ``<output>.partial``; a rerun continues from
there and writes the same file as a run never stopped (same machine).

Device: the networks train on CUDA when it is present (``device="auto"``), in float32; the replay
buffer and the environments stay on the CPU and each update moves one sampled batch. bf16 autocast
is left off on purpose: the critics regress returns in the thousands, where bf16's 8-bit mantissa
rounds targets by several units, and these small networks gain no speed from it. The written
policy is always a CPU checkpoint, wherever it was trained.

Progress: the bar shows env-steps/s and, from the first checkpoint on, a cheap hypervolume
estimate of the current policy (``HV~``): the deterministic actor run for one episode at each point
of a preference lattice (101 points for 2 objectives, 91 for 3; :func:`estimate_hv`), in
separate environments with fixed seeds. It draws nothing from the training random streams, so
runs with and without it, and resumed runs, train identically.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from morl import __version__
from morl.behavior.td3_settings import TD3Settings
from morl.cpu import flush_subnormals
from morl.envs import check_file_identity, get_spec, make_env, physics_version
from morl.errors import InputError
from morl.families.value import mlp
from morl.metrics import hypervolume
from morl.preferences import simplex_grid
from morl.progress import Progress, log
from morl.rollout import BehaviorAgent, episode_seeds, rollout
from morl.runtime import resolve_device, torch_threads
from morl.torch_io import load_torch, save_torch

if TYPE_CHECKING:
    from morl.behavior import TrainOptions

CHECKPOINT_KIND = "morl-behavior"
#: The kinds of file :class:`BehaviorPolicy` reads: a final checkpoint and a run's partial one share it.
POLICY_KINDS = (CHECKPOINT_KIND,)
#: Lattice divisions of the HV estimate shown while training: 101 points for 2 objectives, 91 for 3.
#: Thin fronts need the density: on a Hopper-v2 policy 11 points gave 1.4e6 against 7.3e6 on the
#: protocol's 501, and 101 points gave 7.0e6 (docs/datasets.md). The batched stepper runs all
#: points in one batch, so 101 points cost ~6x the time of 11 (2.3 s against 0.35 s), not 10x.
HV_ESTIMATE_DIVISIONS = {2: 100, 3: 12}
#: The estimate's environment seeds come from ``seed + HV_ESTIMATE_SEED_OFFSET`` (fixed over a
#: run, so successive estimates start from the same states and differ only by the policy).
HV_ESTIMATE_SEED_OFFSET = 10_007


class Actor(nn.Module):
    """Deterministic policy a = pi(s, w), squashed by tanh into the action bounds."""

    def __init__(self, obs_dim: int, act_dim: int, n_obj: int, hidden: int, act_low, act_high):
        super().__init__()
        self.net = mlp(obs_dim + n_obj, act_dim, hidden, depth=2)
        low = torch.as_tensor(act_low, dtype=torch.float32)
        high = torch.as_tensor(act_high, dtype=torch.float32)
        self.register_buffer("act_center", (high + low) / 2)
        self.register_buffer("act_scale", (high - low) / 2)

    def forward(self, obs: torch.Tensor, pref: torch.Tensor) -> torch.Tensor:
        return self.act_center + self.act_scale * torch.tanh(self.net(torch.cat([obs, pref], -1)))

    @torch.no_grad()
    def act(self, obs: np.ndarray, prefs: np.ndarray) -> np.ndarray:
        """The actions for a batch of (observation, preference) rows, computed on the actor's device:
        the live actor as a behavior policy, for :class:`morl.rollout.BehaviorAgent`."""
        device = self.act_scale.device
        obs = torch.as_tensor(np.asarray(obs, np.float32), device=device)
        prefs = torch.as_tensor(np.asarray(prefs, np.float32), device=device)
        return self(obs, prefs).cpu().numpy()


class VectorCritic(nn.Module):
    """Twin critics, each returning one value per objective: Q_k(s, w, a) in R^n_obj."""

    def __init__(self, obs_dim: int, act_dim: int, n_obj: int, hidden: int):
        super().__init__()
        self.q1 = mlp(obs_dim + n_obj + act_dim, n_obj, hidden, depth=2)
        self.q2 = mlp(obs_dim + n_obj + act_dim, n_obj, hidden, depth=2)

    def forward(self, obs, pref, act):
        x = torch.cat([obs, pref, act], -1)
        return self.q1(x), self.q2(x)


class ReplayBuffer:
    """Fixed-size ring buffer of transitions with raw reward vectors."""

    FIELDS = ("obs", "act", "rew", "next_obs", "term", "pref")

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, n_obj: int):
        self.capacity = int(capacity)
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.act = np.zeros((capacity, act_dim), np.float32)
        self.rew = np.zeros((capacity, n_obj), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.term = np.zeros((capacity, 1), np.float32)
        self.pref = np.zeros((capacity, n_obj), np.float32)
        self.pos = 0
        self.size = 0

    def add_batch(self, obs, act, rew, next_obs, term, pref) -> None:
        n = len(obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx], self.act[idx], self.rew[idx] = obs, act, rew
        self.next_obs[idx], self.term[idx, 0], self.pref[idx] = next_obs, term, pref
        self.pos = int((self.pos + n) % self.capacity)
        self.size = int(min(self.size + n, self.capacity))

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, self.size, size=batch_size)
        return {f: torch.from_numpy(getattr(self, f)[idx]) for f in self.FIELDS}

    def state(self) -> dict[str, Any]:
        n = self.size
        return {**{f: torch.from_numpy(getattr(self, f)[:n].copy()) for f in self.FIELDS}, "pos": self.pos}

    def load_state(self, state: dict[str, Any]) -> None:
        n = state["obs"].shape[0]
        for f in self.FIELDS:
            getattr(self, f)[:n] = state[f].numpy()
        self.size, self.pos = n, int(state["pos"])


class PreferenceTD3:
    """The learner: networks, optimisers and one gradient update."""

    def __init__(self, obs_dim, act_dim, n_obj, act_low, act_high, s: TD3Settings, device: torch.device | str = "cpu"):
        self.s = s
        self.n_obj = n_obj
        self.device = torch.device(device)
        # Built on the CPU and then moved, so that a seed gives the same initial weights on any device.
        self.actor = Actor(obs_dim, act_dim, n_obj, s.hidden, act_low, act_high).to(self.device)
        self.critic = VectorCritic(obs_dim, act_dim, n_obj, s.hidden).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=s.lr, fused=True)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=s.lr, fused=True)
        self.updates = 0

    def update(self, batch: dict[str, torch.Tensor], relabel: torch.Tensor) -> float:
        s = self.s
        obs, act, rew, nxt, term = batch["obs"], batch["act"], batch["rew"], batch["next_obs"], batch["term"]
        pref = relabel
        scale = self.actor.act_scale
        with torch.no_grad():
            noise = (torch.randn_like(act) * s.policy_noise).clamp(-s.noise_clip, s.noise_clip) * scale
            low, high = self.actor.act_center - scale, self.actor.act_center + scale
            nxt_act = torch.max(torch.min(self.actor_target(nxt, pref) + noise, high), low)
            tq1, tq2 = self.critic_target(nxt, pref, nxt_act)
            use_q1 = ((tq1 * pref).sum(-1, keepdim=True) <= (tq2 * pref).sum(-1, keepdim=True)).float()
            target_q = use_q1 * tq1 + (1 - use_q1) * tq2
            target = rew + s.gamma * (1 - term) * target_q
        q1, q2 = self.critic(obs, pref, act)
        critic_loss = ((q1 - target) ** 2).mean() + ((q2 - target) ** 2).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        if self.updates % s.policy_delay == 0:
            q = self.critic.q1(torch.cat([obs, pref, self.actor(obs, pref)], -1))
            actor_loss = -(q * pref).sum(-1).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            with torch.no_grad():
                for net, tgt in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
                    for p, tp in zip(net.parameters(), tgt.parameters()):
                        tp.lerp_(p, s.tau)
        return float(critic_loss.detach())

    def state(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "updates": self.updates,
        }

    def load_state(self, st: dict[str, Any]) -> None:
        for name in ("actor", "critic", "actor_target", "critic_target", "actor_opt", "critic_opt"):
            getattr(self, name).load_state_dict(st[name])
        self.updates = int(st["updates"])


def estimate_hv(env_id: str, actor: Actor, seed: int, divisions: int | None = None) -> float:
    """Hypervolume (reference point 0) of ``actor`` on a small preference lattice: one episode per
    point, deterministic actions, environments seeded from ``seed``. A cheap progress signal, not
    the protocol's 501/325-point evaluation (that is the ``behavior_front`` stage).

    Runs in its own environments and uses no random generator, so it leaves training untouched.
    """
    n_obj = get_spec(env_id).n_obj
    prefs = simplex_grid(n_obj, divisions or HV_ESTIMATE_DIVISIONS.get(n_obj, 2))
    seeds = episode_seeds(seed, len(prefs), 1)[0]
    # A forward pass over ~100 rows is slower on several threads than on one (thread handoff costs
    # more than the work; 10x for ~10 rows on a busy 2-core machine), so the estimate runs on one.
    with torch_threads(1):
        returns, _ = rollout(env_id, BehaviorAgent(actor), prefs, np.zeros_like(prefs), seeds)
    return float(hypervolume(returns))


def _dirichlet(rng: np.random.Generator, n: int, n_obj: int) -> np.ndarray:
    return rng.dirichlet(np.ones(n_obj), size=n).astype(np.float32)


def train(env_id: str, settings: dict[str, Any], output: str | os.PathLike, options: TrainOptions) -> dict[str, Any]:
    """The behavior registry's entry (:data:`morl.behavior.METHODS`): :func:`train_td3`, whose
    keyword arguments are the options' fields."""
    return train_td3(env_id, settings, output, **dataclasses.asdict(options))


def train_td3(
    env_id: str,
    cfg: dict[str, Any],
    output: str | os.PathLike,
    threads: int | None = None,
    progress: bool = True,
    hv_every: int | None = None,
    device: str | torch.device = "auto",
) -> dict[str, Any]:
    """Train the TD3 behavior policy of ``env_id`` with the ``behavior`` config section; write ``output``.

    Returns a summary (steps, episodes, wall time, HV estimates, device). Resumes from
    ``<output>.partial`` if present, on whichever device this run has. ``hv_every``: environment
    steps between HV estimates (:func:`estimate_hv`, shown in the progress bar and the log, and once
    more at the end); default ``checkpoint_every``, 0: none. ``device``: ``"auto"`` (CUDA if
    present), ``"cpu"`` or ``"cuda[:i]"``.
    """
    s = TD3Settings.from_config(cfg)
    spec = get_spec(env_id)
    output = Path(output)
    partial = output.with_name(output.name + ".partial")
    dev = resolve_device(device)
    flush_subnormals()  # a long fit keeps its speed (morl.cpu)
    if threads:
        torch.set_num_threads(int(threads))
    rng = np.random.default_rng(s.seed)
    torch.manual_seed(s.seed)
    envs = [make_env(env_id) for _ in range(s.n_envs)]
    obs_dim, act_dim, n_obj = spec.obs_dim, len(spec.act_low), spec.n_obj
    act_low, act_high = np.asarray(spec.act_low, np.float32), np.asarray(spec.act_high, np.float32)
    agent = PreferenceTD3(obs_dim, act_dim, n_obj, act_low, act_high, s, device=dev)
    buffer = ReplayBuffer(min(s.buffer_size, s.total_steps), obs_dim, act_dim, n_obj)
    step, episodes = 0, 0
    recent: list[float] = []
    episodes_in_flight = None  # from a partial checkpoint: what the envs were doing when it was written
    hv_every = s.checkpoint_every if hv_every is None else int(hv_every)
    hv_history: list[list[float]] = []  # [step, HV estimate] pairs
    hv_seconds = 0.0

    if partial.exists():
        st = _load_checkpoint(partial, expect_env=env_id)
        if st["settings"] != vars(s):
            log.warning("%s: settings changed since the checkpoint; starting over", partial)
        else:
            agent.load_state(st["agent"])
            buffer.load_state(st["buffer"])
            rng.bit_generator.state = st["np_rng"]
            torch.set_rng_state(st["torch_rng"])
            if dev.type == "cuda" and st.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(st["cuda_rng"], dev)
            step, episodes = int(st["step"]), int(st["episodes"])
            hv_history = [list(x) for x in st.get("hv_history", [])]
            log.info("resuming behavior training of %s from step %d (%s)", env_id, step, partial)
            episodes_in_flight = st.get("in_flight")

    if episodes_in_flight is None:
        prefs = _dirichlet(rng, s.n_envs, n_obj)
        ep_seeds = [int(rng.integers(2**31)) for _ in envs]
        obs = np.stack([e.reset(seed=seed)[0] for e, seed in zip(envs, ep_seeds)]).astype(np.float32)
        ep_actions: list[list[np.ndarray]] = [[] for _ in envs]
        ep_ret = np.zeros((s.n_envs, n_obj))
        update_debt, recent = 0.0, []
    else:
        prefs, ep_seeds, ep_actions, obs, ep_ret, update_debt, recent = _replay_in_flight(
            partial, envs, episodes_in_flight
        )
    t0 = time.perf_counter()
    steps_at_start = step
    bar = Progress(s.total_steps, f"behavior {env_id}", unit="env-step", enabled=progress, initial=step)

    def hv_estimate() -> None:
        nonlocal hv_seconds
        t = time.perf_counter()
        hv = estimate_hv(env_id, agent.actor, s.seed + HV_ESTIMATE_SEED_OFFSET)
        hv_seconds += time.perf_counter() - t
        hv_history.append([step, hv])
        log.info(
            "behavior %s: step %d, HV estimate %.4g (deterministic policy on the %d-point preference grid, %.1f s)",
            env_id,
            step,
            hv,
            _n_hv_points(n_obj),
            time.perf_counter() - t,
        )

    while step < s.total_steps:
        if step < s.start_steps:
            act = rng.uniform(act_low, act_high, size=(s.n_envs, act_dim)).astype(np.float32)
        else:
            with torch.no_grad():
                act = agent.actor(torch.from_numpy(obs).to(dev), torch.from_numpy(prefs).to(dev)).cpu().numpy()
            act = act + rng.normal(size=act.shape).astype(np.float32) * s.expl_noise * (act_high - act_low) / 2
            act = np.clip(act, act_low, act_high)
        nxt = np.empty_like(obs)
        rew = np.empty((s.n_envs, n_obj), np.float32)
        term = np.zeros(s.n_envs, np.float32)
        done = np.zeros(s.n_envs, bool)
        for i, env in enumerate(envs):
            ep_actions[i].append(act[i].copy())
            o, r, terminated, truncated, _ = env.step(act[i])
            nxt[i], rew[i], term[i], done[i] = o, r, float(terminated), terminated or truncated
        buffer.add_batch(obs, act, rew, nxt, term, prefs)
        ep_ret += rew
        obs = nxt
        for i in np.flatnonzero(done):
            recent = (recent + [float(ep_ret[i] @ prefs[i])])[-20:]
            episodes += 1
            ep_ret[i] = 0.0
            prefs[i] = _dirichlet(rng, 1, n_obj)[0]
            ep_seeds[i] = int(rng.integers(2**31))
            ep_actions[i] = []
            obs[i] = envs[i].reset(seed=ep_seeds[i])[0]
        step += s.n_envs

        if step >= s.start_steps and buffer.size >= s.batch_size:
            update_debt += s.updates_per_step * s.n_envs
            while update_debt >= 1.0:
                batch = {k: v.to(dev) for k, v in buffer.sample(s.batch_size, rng).items()}
                fresh = torch.from_numpy(_dirichlet(rng, s.batch_size, n_obj)).to(dev)
                keep = torch.from_numpy(rng.random((s.batch_size, 1)) < 0.5).to(dev)
                agent.update(batch, torch.where(keep, batch["pref"], fresh))
                update_debt -= 1.0
        if hv_every and step % hv_every < s.n_envs and step < s.total_steps:
            hv_estimate()
        postfix = {"episodes": episodes, "w.R": f"{np.mean(recent):.0f}" if recent else "-"}
        if hv_history:
            postfix["HV~"] = f"{hv_history[-1][1]:.4g}"
        bar.update(s.n_envs, **postfix)
        if s.checkpoint_every and step % s.checkpoint_every < s.n_envs and step < s.total_steps:
            in_flight = {
                "prefs": torch.from_numpy(prefs.copy()),
                "seeds": list(ep_seeds),
                "actions": [torch.from_numpy(np.stack(a)) if a else torch.zeros(0, act_dim) for a in ep_actions],
                "returns": torch.from_numpy(ep_ret.copy()),
                "update_debt": update_debt,
                "recent": list(recent),
            }
            _save_partial(
                partial, env_id, s, agent, buffer, rng, step, episodes, hv_history=hv_history, in_flight=in_flight
            )

    if hv_every and (not hv_history or hv_history[-1][0] != step):
        hv_estimate()  # the final policy's estimate
        bar.update(
            0,
            episodes=episodes,
            **{"w.R": f"{np.mean(recent):.0f}" if recent else "-", "HV~": f"{hv_history[-1][1]:.4g}"},
        )
    bar.close()
    wall = time.perf_counter() - t0
    meta = _policy_meta(env_id, vars(s), step, episodes)
    state = {**meta, "actor": {k: v.cpu() for k, v in agent.actor.state_dict().items()}}
    save_torch(output, state)
    if partial.exists():
        partial.unlink()
    summary = {
        "env_id": env_id,
        "steps": step,
        "episodes": episodes,
        "wall_s": wall,
        "env_steps_per_s": (step - steps_at_start) / max(wall, 1e-9),
        "updates": agent.updates,
        "hv_estimate": hv_history[-1][1] if hv_history else None,
        "hv_estimates": hv_history,
        "hv_estimate_s": hv_seconds,
        "device": str(dev),
    }
    log.info("behavior %s done: %s", env_id, summary)
    return summary


def _n_hv_points(n_obj: int) -> int:
    return len(simplex_grid(n_obj, HV_ESTIMATE_DIVISIONS.get(n_obj, 2)))


def _replay_in_flight(partial: Path, envs, st: dict):
    """The envs of a resumed run put back where they were when ``partial`` was written: each is
    reset with its episode's seed and fed the actions it had taken (the physics is deterministic),
    so the resumed run continues the same episodes with the same preferences as if never stopped."""
    try:
        prefs = st["prefs"].numpy().copy()
        seeds = [int(x) for x in st["seeds"]]
        actions = [a.numpy() for a in st["actions"]]
        returns = st["returns"].numpy().copy()
        obs, replayed = [], np.zeros_like(returns)
        for i, env in enumerate(envs):
            o = env.reset(seed=seeds[i])[0]
            for a in actions[i]:
                o, r, _, _, _ = env.step(a)
                replayed[i] += r
            obs.append(o)
    except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
        raise InputError(f"{partial}: incomplete partial behavior checkpoint ({exc!r})") from None
    if not np.allclose(replayed, returns, rtol=1e-5, atol=1e-3):
        raise InputError(
            f"{partial}: replaying the episodes in flight does not give their recorded returns "
            "(another physics or simulator build?); delete it to start over"
        )
    ep_actions = [list(a) for a in actions]
    return (
        prefs,
        seeds,
        ep_actions,
        np.stack(obs).astype(np.float32),
        returns,
        float(st["update_debt"]),
        [float(x) for x in st["recent"]],
    )


def _save_partial(
    path: Path, env_id, s: TD3Settings, agent, buffer, rng, step, episodes, hv_history=(), in_flight=None
) -> None:
    state = {
        "kind": CHECKPOINT_KIND,
        "env_id": env_id,
        "physics_version": physics_version(env_id),
        "settings": vars(s),
        "agent": agent.state(),
        "buffer": buffer.state(),
        "np_rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(agent.device) if agent.device.type == "cuda" else None,
        "step": step,
        "episodes": episodes,
        "hv_history": [list(x) for x in hv_history],
        "in_flight": in_flight,
    }
    save_torch(path, state)


class BehaviorPolicy:
    """A trained TD3 behavior policy: deterministic actions for a batch of (state, preference) pairs
    (the :class:`morl.behavior.Behavior` interface)."""

    def __init__(self, path: str | os.PathLike, expect_env: str | None = None, state: dict | None = None):
        """``expect_env``: the env id the caller needs; a checkpoint of another env is refused.
        ``state``: the file's contents, if the caller has loaded them already."""
        self.path = Path(path)
        st = _load_checkpoint(self.path, expect_env=expect_env, state=state)
        if "agent" in st and "actor" not in st:
            st = _policy_of_partial(self.path, st)
        try:
            self.env_id = st["env_id"]
            self.n_obj, self.obs_dim, self.act_dim = int(st["n_obj"]), int(st["obs_dim"]), int(st["act_dim"])
            self.act_low = np.asarray(st["act_low"], np.float32)
            self.act_high = np.asarray(st["act_high"], np.float32)
            self.pref_low = np.asarray(st["pref_low"], np.float64)
            self.pref_high = np.asarray(st["pref_high"], np.float64)
            self.actor = Actor(self.obs_dim, self.act_dim, self.n_obj, int(st["hidden"]), self.act_low, self.act_high)
            self.actor.load_state_dict(st["actor"])
        except (KeyError, RuntimeError) as exc:
            raise InputError(f"{self.path}: incomplete or mismatched behavior checkpoint ({exc})") from exc
        self.actor.eval()
        self.meta = {k: v for k, v in st.items() if k != "actor"}

    @torch.inference_mode()
    def act(self, obs: np.ndarray, prefs: np.ndarray) -> np.ndarray:
        o = torch.tensor(np.asarray(obs, np.float32))
        w = torch.tensor(np.asarray(prefs, np.float32))
        return self.actor(o, w).numpy()


def _policy_meta(env_id: str, settings: dict[str, Any], step: int, episodes: int) -> dict[str, Any]:
    """What a behavior checkpoint records besides the actor's weights."""
    spec = get_spec(env_id)
    n_obj = spec.n_obj
    return {
        "kind": CHECKPOINT_KIND,
        "env_id": env_id,
        "physics_version": physics_version(env_id),
        "obs_dim": spec.obs_dim,
        "act_dim": len(spec.act_low),
        "n_obj": n_obj,
        "hidden": int(settings["hidden"]),
        "act_low": np.asarray(spec.act_low, np.float32).tolist(),
        "act_high": np.asarray(spec.act_high, np.float32).tolist(),
        # preferences the policy was trained on: the whole simplex
        "pref_low": [0.0] * n_obj,
        "pref_high": [1.0] * n_obj,
        "settings": settings,
        "steps": step,
        "episodes": episodes,
        "morl_version": __version__,
    }


def _policy_of_partial(path: Path, st: dict[str, Any]) -> dict[str, Any]:
    """The policy part of a ``.partial`` training checkpoint, laid out like a final one, so that
    a run still in progress can be evaluated (``morl behavior-front --policy X.pt.partial``)."""
    try:
        meta = _policy_meta(st["env_id"], st["settings"], int(st["step"]), int(st["episodes"]))
        return {**meta, "partial": True, "actor": st["agent"]["actor"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: incomplete partial behavior checkpoint ({exc!r})") from exc


def _load_checkpoint(path: Path, expect_env: str | None = None, state: dict | None = None) -> dict[str, Any]:
    st = load_torch(path, "behavior checkpoint") if state is None else state
    return check_file_identity(path, st, CHECKPOINT_KIND, expect_env, "behavior checkpoint", "checkpoint")
