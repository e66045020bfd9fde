"""PEDA's trained agents, and other networks with their call signature, as batched policies for evaluation.

:func:`build_agent` makes, from a checked final checkpoint (:func:`morl.checkpoints.load_agent`),
an :class:`Agent` that acts for ``B`` environments at once (one network forward per step for
the whole batch). The evaluation loop is::

    agent.reset(preferences, target_returns)      # (B, n_obj) each; g_0 = target_returns (raw)
    while not env.done:
        actions = agent.act(obs)                   # (B, obs_dim) float32 -> (B, act_dim) float32
        obs, rewards, *_ = env.step(actions)
        agent.observe(actions, rewards)            # g <- g - w * r (raw), t <- t + 1

The agent keeps the preference-weighted return-to-go ``g`` in raw reward units (float64) and
applies the checkpoint's ``return_scale`` itself: ``w * (R(w) - rewards so far) * return_scale``,
whichever ``returns_to_go`` definition the network was trained with (``docs/protocol.md``).
States are normalised with the checkpoint's statistics and clipped to [-10, 10] as in training.
MODT keeps, per slot, the last ``eval_context_length`` steps of (g, s, a), actions in the [-1, 1]
units it was trained on; BC the last ``context_length`` states, left-padded with zeros. All slots
share the timestep because they start together.

What the agent feeds its network is its ``kind`` (:data:`KINDS`), not the model's name:

- ``window``: MODT's rolling window of (g, s, a) tokens and their timesteps;
- ``stacked``: BC's last ``model.history`` states, left-padded with zeros, and ``w``;
- ``step``: one step, ``model(s, None, w, g, t)`` (MORvS, and any network with MORvS's inputs,
  e.g. the families that put ``w`` into the weights, :mod:`morl.families.hyper` and
  :mod:`morl.families.manifold`).

PEDA's :func:`build_agent` derives the kind from the model's name (:func:`agent_kind`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from morl.families.base import Dims
from morl.families.peda_networks import build_env_model, is_bc, is_transformer
from morl.rollout import TrainedAgent

#: What an agent feeds its network each step (module docstring).
KINDS = ("window", "stacked", "step")


def agent_kind(model_name: str) -> str:
    """The kind of agent one of PEDA's models acts as: MODT a window, BC stacked states, MORvS a step."""
    return "window" if is_transformer(model_name) else "stacked" if is_bc(model_name) else "step"


class Agent(TrainedAgent):
    """A batched, deterministic policy for evaluation (eval mode, no gradients).

    ``reset(preferences, target_returns)`` starts ``B`` episodes; then alternate
    ``act(obs)`` and ``observe(actions, rewards)`` once per environment step. ``kind`` (one of
    :data:`KINDS`) says what the network is fed; ``context_length`` is the window of a ``window``
    agent (a ``stacked`` one takes its network's ``history``, a ``step`` one needs none).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        model_name: str,
        kind: str,
        obs_mean: torch.Tensor,
        obs_std: torch.Tensor,
        return_scale: float,
        max_episode_steps: int,
        context_length: int = 1,
        n_obj: int,
        act_dim: int,
        device: torch.device,
    ):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        super().__init__(
            model,
            obs_mean=obs_mean,
            obs_std=obs_std,
            n_obj=n_obj,
            act_dim=act_dim,
            max_episode_steps=max_episode_steps,
            device=device,
            model_name=model_name,
        )
        self.return_scale = float(return_scale)
        self.kind = kind
        self.is_transformer = kind == "window"
        self.is_bc = kind == "stacked"
        # MODT's rolling context; BC's window is the one its network was built for.
        self.context_length = int(model.history if self.is_bc else context_length)
        self._to_unit = model.action_head.to_unit  # observed actions -> MODT's [-1, 1] action tokens

    def _start(self, preferences: torch.Tensor, target_returns: torch.Tensor) -> None:
        """g_0 = ``target_returns``, the initial preference-weighted return-to-go ``w * R(w)`` in raw
        reward units (unscaled); MODT's and BC's contexts start empty."""
        self._g = target_returns
        if self.is_transformer or self.is_bc:
            b = self.batch_size
            self._ctx_states = torch.zeros(b, 0, self.obs_dim, device=self.device)
            self._ctx_actions = torch.zeros(b, 0, self.act_dim, device=self.device)
            self._ctx_returns = torch.zeros(b, 0, self.n_obj, device=self.device)

    def _scaled_return_to_go(self) -> torch.Tensor:
        return (self._g * self.return_scale).float()

    def _act(self, s: torch.Tensor) -> torch.Tensor:
        g = self._scaled_return_to_go()
        k = self.context_length
        if self.is_transformer or self.is_bc:
            self._ctx_states = torch.cat([self._ctx_states, s[:, None]], dim=1)[:, -k:]
        if self.is_bc:
            n = self._ctx_states.shape[1]
            states = torch.cat([self._ctx_states.new_zeros(self.batch_size, k - n, self.obs_dim), self._ctx_states], 1)
            mask = (torch.arange(k, device=self.device) >= k - n).expand(self.batch_size, k)
            return self.model(states, None, self._w32, None, None, mask)
        if self.is_transformer:
            zero_action = torch.zeros(self.batch_size, 1, self.act_dim, device=self.device)
            self._ctx_returns = torch.cat([self._ctx_returns, g[:, None]], dim=1)[:, -k:]
            self._ctx_actions = torch.cat([self._ctx_actions, zero_action], dim=1)[:, -k:]
            length = self._ctx_states.shape[1]
            timesteps = torch.arange(self.timestep - length + 1, self.timestep + 1, device=self.device)
            return self.model(
                self._ctx_states,
                self._ctx_actions,
                self._w32,
                self._ctx_returns,
                timesteps.expand(self.batch_size, length),
            )[:, -1]
        timesteps = torch.full((self.batch_size,), self.timestep, device=self.device, dtype=torch.long)
        return self.model(s, None, self._w32, g, timesteps)

    def _record(self, actions: torch.Tensor, rewards: torch.Tensor) -> None:
        """g <- g - w * r (raw); MODT's last action token becomes the action applied."""
        if self.is_transformer:
            self._ctx_actions[:, -1] = self._to_unit(actions).clamp(-1.0, 1.0)
        self._g = self._g - self._w * rewards

    @property
    def return_to_go(self) -> np.ndarray:
        """The current raw preference-weighted return-to-go g (B, n_obj), float64."""
        if self._w is None:
            raise RuntimeError("call reset() first")
        return self._g.cpu().numpy()


def build_agent(ckpt: dict[str, Any], device: torch.device) -> Agent:
    """The :class:`Agent` of a checked final checkpoint (:func:`morl.checkpoints.load_checkpoint`)."""
    settings = ckpt["settings"]
    dims = Dims(ckpt["obs_dim"], ckpt["act_dim"], ckpt["n_obj"])
    model = build_env_model(ckpt["model_name"], dims, settings, ckpt)
    return sequence_agent(model, ckpt, device, agent_kind(ckpt["model_name"]), settings["eval_context_length"])


def sequence_agent(
    model: torch.nn.Module, ckpt: dict[str, Any], device: torch.device, kind: str, context_length: int = 1
) -> Agent:
    """The agent of ``kind`` (a ``window`` agent acting on its last ``context_length`` steps, as
    MODT(P); a ``stacked`` one on its network's ``history`` states, as BC(P); a ``step`` agent, as
    MORvS(P)) of a checked final checkpoint whose network is ``model`` (PEDA's, or another family's
    with PEDA's call signature), its weights loaded from the checkpoint."""
    return Agent.from_checkpoint(
        model,
        ckpt,
        device,
        model_name=ckpt["model_name"],
        kind=kind,
        return_scale=ckpt["return_scale"],
        context_length=context_length,
        act_dim=ckpt["act_dim"],
    )
