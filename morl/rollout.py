"""The agent protocol and the rollouts every stage runs agents with.

A controller is a batched, stateful policy: :meth:`Controller.reset` starts ``B`` episodes with
one preference and one target return each, then :meth:`Controller.act` and
:meth:`Controller.observe` alternate once per step. A trained :class:`Agent` also says what it
is and how it was trained, which the evaluator records and checks. :func:`rollout` runs one
episode per preference in lockstep in a :class:`~morl.envs.batched.BatchedEnv`;
:func:`rollout_sequential` is its slow reference, one environment and one policy call per step.
"""

from __future__ import annotations

from typing import Any, Protocol, Self

import numpy as np
import torch

from morl.envs import BatchedEnv, get_spec, make_env
from morl.normalisation import STATE_CLIP
from morl.progress import Progress


class Controller(Protocol):
    """What a rollout needs from a policy: a batched, stateful controller."""

    def reset(
        self, preferences: np.ndarray, target_returns: np.ndarray, generator: torch.Generator | None = None
    ) -> None:
        """Start one episode per row; ``generator``: a seeded CPU generator, the only source of
        randomness of an agent that samples (the rollouts always pass one)."""
        ...

    def act(self, obs: np.ndarray) -> np.ndarray: ...
    def observe(self, actions: np.ndarray, rewards: np.ndarray) -> None: ...


class Agent(Controller, Protocol):
    """A trained agent of any family: a controller that also says what the evaluator records."""

    model_name: str  # the registry's model name
    seed: int | None  # the training seed
    obs_dim: int
    act_dim: int
    n_obj: int
    #: how and on what it was trained: the training definitions, the reference dataset and its
    #: hash, the training dataset's path and hash, the env id and the settings
    training: dict[str, Any]


class TrainedAgent:
    """What every family's evaluation agent shares: the :class:`Agent` bookkeeping, one network
    forward per step for the batch, in eval mode and without gradients.

    :meth:`reset`, :meth:`act` and :meth:`observe` check what the evaluator hands them (shapes,
    finiteness, the order of the calls), keep the preferences ``_w`` (B, n_obj, float64; ``_w32``
    in float32 for the networks) and the timestep, and normalise states with the checkpoint's statistics, clipped to ±``STATE_CLIP`` as
    in training. A family says what its network is fed in three hooks: :meth:`_start` (the
    preferences and the raw target returns, float64), :meth:`_act` (normalised states -> actions)
    and :meth:`_record` (the actions applied and the raw rewards received).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        obs_mean: torch.Tensor,
        obs_std: torch.Tensor,
        n_obj: int,
        act_dim: int,
        max_episode_steps: int,
        device: torch.device,
        model_name: str = "",
    ):
        self.model = model.to(device).eval()
        self.model_name = model_name
        self.device = device
        self.obs_mean = obs_mean.to(device=device, dtype=torch.float32)
        self.obs_std = obs_std.to(device=device, dtype=torch.float32)
        self.obs_dim = int(obs_mean.shape[0])
        self.n_obj = int(n_obj)
        self.act_dim = int(act_dim)
        self.max_episode_steps = int(max_episode_steps)
        # what it is and how it was trained (the training core sets these when it loads a checkpoint)
        self.seed: int | None = None
        self.source: str | None = None
        self.training: dict[str, Any] = {}
        self.batch_size = 0
        self.timestep = 0
        self._awaiting_observe = False
        self._w: torch.Tensor | None = None
        self.generator: torch.Generator | None = None

    @classmethod
    def from_checkpoint(cls, model: torch.nn.Module, ckpt: dict[str, Any], device: torch.device, **own: Any) -> Self:
        """The agent of a checked final checkpoint whose network is ``model``: the checkpoint's weights
        loaded into it, its state statistics, objectives and episode cap; ``own``: the class's other
        arguments."""
        model.load_state_dict(ckpt["state_dict"], strict=True)
        return cls(
            model,
            obs_mean=ckpt["obs_mean"],
            obs_std=ckpt["obs_std"],
            n_obj=ckpt["n_obj"],
            max_episode_steps=ckpt["max_episode_steps"],
            device=device,
            **own,
        )

    def _as_batch(self, name: str, array, width: int, dtype=torch.float32) -> torch.Tensor:
        return as_batch(name, array, width, self.batch_size, self.device, dtype)

    def reset(self, preferences, target_returns, generator: torch.Generator | None = None) -> None:
        """Start a batch of episodes: preferences w (B, n_obj) and the raw target returns (B, n_obj);
        ``generator`` (kept as ``self.generator``) for a family whose agent samples."""
        self.generator = generator
        self.batch_size = 0
        w = self._as_batch("preferences", preferences, self.n_obj, torch.float64)
        self.batch_size = int(w.shape[0])
        if self.batch_size == 0:
            raise ValueError("preferences must hold at least one row")
        g = self._as_batch("target_returns", target_returns, self.n_obj, torch.float64)
        self._w = w
        self._w32 = w.float()  # what the networks take
        self.timestep = 0
        self._awaiting_observe = False
        self._start(w, g)

    @torch.no_grad()
    def act(self, obs) -> np.ndarray:
        """Actions (B, act_dim) float32 for observations (B, obs_dim), one forward for the batch."""
        if self._w is None:
            raise RuntimeError("call reset() before act()")
        if self._awaiting_observe:
            raise RuntimeError("act() called twice without observe() in between")
        s = (self._as_batch("obs", obs, self.obs_dim) - self.obs_mean) / self.obs_std
        actions = self._act(s.clamp(-STATE_CLIP, STATE_CLIP))
        self._awaiting_observe = True
        return actions.float().cpu().numpy()

    def observe(self, actions, rewards) -> None:
        """Record the step: the actions applied (B, act_dim) and the raw rewards (B, n_obj) received."""
        if not self._awaiting_observe:
            raise RuntimeError("observe() must follow act()")
        a = self._as_batch("actions", actions, self.act_dim)
        r = self._as_batch("rewards", rewards, self.n_obj, torch.float64)
        self._record(a, r)
        self.timestep += 1
        self._awaiting_observe = False

    def _start(self, preferences: torch.Tensor, target_returns: torch.Tensor) -> None:
        """A family's own state for new episodes (nothing by default)."""

    def _act(self, states: torch.Tensor) -> torch.Tensor:
        """The actions (B, act_dim) for normalised, clipped states (B, obs_dim)."""
        raise NotImplementedError

    def _record(self, actions: torch.Tensor, rewards: torch.Tensor) -> None:
        """A family's own record of a step (nothing by default)."""


class BehaviorAgent:
    """A behavior policy's deterministic action for each slot's preference."""

    def __init__(self, policy):
        self.policy = policy
        self.prefs: np.ndarray | None = None

    def reset(self, preferences, target_returns, generator=None) -> None:
        self.prefs = np.asarray(preferences, np.float32)

    def act(self, obs):
        return self.policy.act(obs, self.prefs)

    def observe(self, actions, rewards) -> None:
        pass


def as_batch(name: str, array, width: int, batch_size: int, device: torch.device, dtype=torch.float32) -> torch.Tensor:
    """``array`` as a ``(batch_size, width)`` tensor on ``device`` (any batch size while ``batch_size`` is
    0); a wrong shape or a NaN/infinite value raises a ValueError naming ``name``. Every batched
    evaluation agent checks what the evaluator hands it with this."""
    arr = np.asarray(array)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (batch, {width}), got shape {arr.shape}")
    expected = (batch_size or arr.shape[0], width)
    if arr.shape != expected:
        raise ValueError(f"{name} must have shape {expected}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return torch.as_tensor(arr, dtype=dtype).to(device)


def episode_seeds(seed: int, n_points: int, episodes: int) -> np.ndarray:
    """Deterministic environment seeds, shape ``(episodes, n_points)``."""
    ss = np.random.SeedSequence(seed)
    return ss.generate_state(episodes * n_points, dtype=np.uint32).reshape(episodes, n_points).astype(np.int64)


def agent_generator(seeds: np.ndarray) -> torch.Generator:
    """The CPU generator an agent gets for episodes started with the env seeds ``seeds``: seeded
    from all of them, so each episode set gets its own stream and a rerun the same one."""
    seed = np.random.SeedSequence([int(s) for s in np.asarray(seeds).reshape(-1)]).generate_state(2, np.uint32)
    return torch.Generator(device="cpu").manual_seed(int(seed[0]) << 32 | int(seed[1]))


def rollout(
    env_id: str,
    agent: Controller,
    preferences: np.ndarray,
    targets: np.ndarray,
    seeds: np.ndarray,
    progress: Progress | None = None,
    workers: int = 1,
):
    """Run one episode per row of ``preferences`` in lockstep (physics on ``workers`` cores);
    return (returns (B, n_obj), lengths (B,))."""
    B = len(preferences)
    with BatchedEnv(env_id, B, num_workers=workers) as env:
        obs = env.reset(seeds)
        agent.reset(np.asarray(preferences, np.float32), np.asarray(targets, np.float32), agent_generator(seeds))
        returns = np.zeros((B, env.n_obj), np.float64)
        while not env.done:
            act = agent.act(obs)
            obs, rew, _, _ = env.step(act)
            returns += rew
            agent.observe(act, rew)
            if progress is not None:
                progress.update(1)
        return returns, env.lengths


def rollout_sequential(
    env_id: str,
    agent: Controller,
    preferences: np.ndarray,
    targets: np.ndarray,
    seeds: np.ndarray,
    progress: Progress | None = None,
):
    """The reference for :func:`rollout`: one episode per row, one after another, in the style of
    the original D4MORL/PEDA evaluation loop (one ``MOMujocoEnv``, one policy call with batch
    size 1 per step, stop at ``terminated or truncated``). Same return value as :func:`rollout`."""
    spec = get_spec(env_id)
    env = make_env(env_id)
    preferences = np.asarray(preferences, np.float32)
    targets = np.asarray(targets, np.float32)
    B = len(preferences)
    returns = np.zeros((B, spec.n_obj), np.float64)
    lengths = np.zeros(B, np.int64)
    for i in range(B):
        agent.reset(preferences[i : i + 1], targets[i : i + 1], agent_generator(seeds[i : i + 1]))
        obs, _ = env.reset(seed=int(seeds[i]))
        episode_return = np.zeros(spec.n_obj, np.float64)
        t = 0
        while True:
            action = agent.act(obs[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            episode_return += reward
            agent.observe(action[None], reward[None])
            t += 1
            if progress is not None:
                progress.update(1)
            if terminated or truncated:
                break
        returns[i] = episode_return
        lengths[i] = t
    return returns, lengths
