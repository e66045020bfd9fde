"""PEDA's policy networks: MODT, MORvS and BC, each with a (P) variant.

Every agent acts on a normalised state ``s_t`` and may be conditioned on the trajectory's
preference ``w`` and on the preference-weighted multi-objective return-to-go

    g_t = w * (sum_{t' >= t} r_t') * return_scale        (elementwise, one entry per objective)

(PEDA, Zhu et al. 2023, section 4). The six variants differ only in what they see:

==========  =========  ==============================================================
name        display    policy input
==========  =========  ==============================================================
``dt``      MODT       tokens (g_t, s_t, a_t) of the last K steps (w only through g)
``dt-p``    MODT(P)    tokens ([g_t, w], [s_t, w], [a_t, w]) of the last K steps
``rvs``     MORvS      [s_t, g_t / (T - t)]               (average return-to-go)
``rvs-p``   MORvS(P)   [s_t, w, g_t / (T - t)]
``bc``      BC         s_t                                  (one policy for every w)
``bc-p``    BC(P)      [s_t, w]
==========  =========  ==============================================================

``T`` is the episode cap (``max_episode_steps``, 500 in D4MORL). All networks end in a tanh
squashed to the action bounds. The modules here are pure networks: state normalisation and
return-to-go bookkeeping live in :mod:`morl.families.peda` (for batches of data) and
:mod:`morl.families.peda_agent` (for rollouts).

Both families share one call signature, ``model(states, actions, preferences, returns_to_go,
timesteps, mask=None)``; the MLPs take one step per row (tensors ``(B, dim)``), MODT takes a
window of ``K`` steps per row (tensors ``(B, K, dim)``) and predicts an action at every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from morl.families.base import Dims

#: PEDA's six models, in table order.
MODEL_NAMES = ("dt-p", "rvs-p", "bc-p", "dt", "rvs", "bc")


def check_model_name(name: str) -> str:
    """Return ``name`` if it is one of :data:`MODEL_NAMES`, else raise a ValueError listing them."""
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; PEDA's models: {', '.join(MODEL_NAMES)}")
    return name


def is_transformer(name: str) -> bool:
    """True for the MODT variants, which act on a context window instead of a single step."""
    return check_model_name(name) in ("dt", "dt-p")


def is_bc(name: str) -> bool:
    """True for BC and BC(P), which act on the stacked states of the last ``context_length`` steps."""
    return check_model_name(name) in ("bc", "bc-p")


def window_length(name: str, settings: dict) -> int | None:
    """Steps per training sample: ``context_length`` for MODT and BC, None (one step) for MORvS."""
    return None if check_model_name(name).startswith("rvs") else int(settings["context_length"])


def uses_preference(name: str) -> bool:
    """True for the (P) variants, which receive the preference ``w`` as an explicit input."""
    return check_model_name(name).endswith("-p")


def average_return_to_go(returns_to_go: torch.Tensor, timesteps: torch.Tensor, max_episode_steps: int) -> torch.Tensor:
    """MORvS's conditioning: g_t (B, n_obj) divided by the steps left, ``T - t`` (at least 1), t (B,)."""
    steps_left = (max_episode_steps - timesteps).clamp(min=1).to(returns_to_go.dtype)
    return returns_to_go / steps_left.unsqueeze(-1)


class ActionBox(nn.Module):
    """The action box ``[act_low, act_high]``: pre-activations squashed onto it by a tanh, and
    actions mapped back onto the tanh's [-1, 1] (for networks whose last layer is computed
    elsewhere, e.g. from weights generated per sample)."""

    def __init__(self, act_low: Sequence[float], act_high: Sequence[float]):
        super().__init__()
        low = torch.as_tensor(act_low, dtype=torch.float32)
        high = torch.as_tensor(act_high, dtype=torch.float32)
        if low.ndim != 1 or low.shape != high.shape or not torch.all(high > low):
            raise ValueError(f"invalid action bounds low={list(act_low)} high={list(act_high)}")
        self.register_buffer("act_center", (high + low) / 2)
        self.register_buffer("act_half_range", (high - low) / 2)

    @property
    def act_dim(self) -> int:
        return int(self.act_center.shape[0])

    def squash(self, pre: torch.Tensor) -> torch.Tensor:
        """``center + half_range * tanh(pre)``: actions inside the box."""
        return self.act_center + self.act_half_range * torch.tanh(pre)

    def to_unit(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions in the tanh's units: the box ``[act_low, act_high]`` mapped onto [-1, 1] (for
        bounds symmetric about 0, as in D4MORL, this is ``a / act_high``)."""
        return (actions - self.act_center) / self.act_half_range


class ActionHead(ActionBox):
    """Linear layer, tanh, then an affine map onto the box ``[act_low, act_high]``."""

    def __init__(self, in_dim: int, act_low: Sequence[float], act_high: Sequence[float]):
        super().__init__(act_low, act_high)
        self.linear = nn.Linear(in_dim, self.act_dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.squash(self.linear(h))


@dataclass(frozen=True)
class NetworkEnv(Dims):
    """The env a network with PEDA's call signature is built for: its sizes (:class:`Dims`), its
    action box ``[act_low, act_high]`` and its episode cap ``T`` (``max_episode_steps``)."""

    act_low: Sequence[float]
    act_high: Sequence[float]
    max_episode_steps: int


class PolicyNetwork(nn.Module):
    """What the networks with PEDA's call signature share: the :class:`NetworkEnv` they are built
    for, a check that its action bounds have ``act_dim`` entries, and its episode cap ``T``
    (``max_episode_steps``) that MORvS's average return-to-go divides by and MODT's timestep
    embedding is sized for."""

    def __init__(self, env: NetworkEnv):
        super().__init__()
        if len(env.act_low) != env.act_dim:
            raise ValueError(f"action bounds have {len(env.act_low)} entries, act_dim is {env.act_dim}")
        self.max_episode_steps = int(env.max_episode_steps)

    def average_return_to_go(self, returns_to_go: torch.Tensor, timesteps: torch.Tensor) -> torch.Tensor:
        """MORvS's conditioning: g_t divided by the number of steps left, ``T - t`` (at least 1)."""
        return average_return_to_go(returns_to_go, timesteps, self.max_episode_steps)


class MLPPolicy(PolicyNetwork):
    """BC, BC(P), MORvS and MORvS(P): an MLP on the concatenation of the enabled inputs.

    MORvS (``history=None``) sees one step: ``s`` and the average return-to-go ``g_t / (T - t)``,
    plus ``w`` for MORvS(P). BC sees the last ``history`` steps, ``s`` (with ``w`` appended to
    each for BC(P)) stacked into one vector, padded steps zero. ``depth`` hidden layers of width
    ``hidden``, each followed by ReLU and dropout, then the tanh action head.
    """

    def __init__(
        self,
        env: NetworkEnv,
        *,
        condition_on_preference: bool,
        condition_on_return: bool,
        hidden: int,
        depth: int,
        dropout: float,
        history: int | None = None,
    ):
        super().__init__(env)
        self.condition_on_preference = condition_on_preference
        self.condition_on_return = condition_on_return
        self.history = history
        step_dim = env.obs_dim + env.n_obj * int(condition_on_preference)
        in_dim = step_dim * (history or 1) + env.n_obj * int(condition_on_return)
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(in_dim if i == 0 else hidden, hidden), nn.ReLU(), nn.Dropout(dropout)]
        self.trunk = nn.Sequential(*layers)
        self.action_head = ActionHead(hidden, env.act_low, env.act_high)

    def forward(self, states, actions, preferences, returns_to_go, timesteps, mask=None):
        """Predict one action per row; ``actions`` are unused.

        MORvS: states (B, obs_dim), preferences (B, n_obj), returns_to_go (B, n_obj) = scaled g_t,
        timesteps (B,) integer t. BC: states (B, history, obs_dim), preferences (B, n_obj) or
        (B, history, n_obj), mask (B, history) bool False on left padding (or None). -> (B, act_dim).
        """
        if self.history is None:
            parts = [states]
            if self.condition_on_preference:
                parts.append(preferences)
            if self.condition_on_return:
                parts.append(self.average_return_to_go(returns_to_go, timesteps))
            return self.action_head(self.trunk(torch.cat(parts, dim=-1)))
        b, k, _ = states.shape
        if k != self.history:
            raise ValueError(f"BC takes windows of {self.history} steps, got {k}")
        x = states
        if self.condition_on_preference:
            w = preferences if preferences.dim() == 3 else preferences.unsqueeze(1).expand(b, k, -1)
            x = torch.cat([x, w], dim=-1)
        if mask is not None:
            x = x * mask.unsqueeze(-1).to(x.dtype)
        return self.action_head(self.trunk(x.reshape(b, -1)))


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which a token attends only to itself and earlier tokens."""

    def __init__(self, embed_dim: int, n_head: int, dropout: float):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.attn_dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        """x (B, L, E); ``allowed`` (B, 1, L, L) bool (True = may attend) or None = plain causal."""
        b, length, e = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, self.n_head, e // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=allowed,
            dropout_p=self.attn_dropout if self.training else 0.0,
            is_causal=allowed is None,
        )
        y = y.transpose(1, 2).reshape(b, length, e)
        return self.resid_dropout(self.proj(y))


class TransformerBlock(nn.Module):
    """GPT-2 block with pre-layer-norm: x + Attn(LN(x)), then x + MLP(LN(x)) with a 4x ReLU MLP
    (PEDA's GPT-2 configuration: ``activation_function="relu"``, ``n_inner = 4 * embed_dim``)."""

    def __init__(self, embed_dim: int, n_head: int, dropout: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed_dim)
        self.attn = CausalSelfAttention(embed_dim, n_head, dropout)
        self.ln_2 = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(
            nn.Linear(embed_dim, 4 * embed_dim),
            nn.ReLU(),
            nn.Linear(4 * embed_dim, embed_dim),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), allowed)
        return x + self.mlp(self.ln_2(x))


class DecisionTransformer(PolicyNetwork):
    """MODT and MODT(P): a causal transformer over interleaved (g_t, s_t, a_t) tokens.

    Each step t of the context contributes three tokens, the return-to-go ``g_t``, the state
    ``s_t`` and the action ``a_t``, each embedded by its own linear layer; MODT(P) appends ``w``
    to the input of all three. A learned embedding of the timestep ``t`` is added to all three
    tokens (there is no other position embedding), followed by a layer norm. The token sequence
    ``g_0, s_0, a_0, g_1, s_1, a_1, ...`` passes through ``n_layer`` causal pre-LN blocks; the
    action ``a_t`` is predicted from the output at the state token ``s_t``, which has seen
    ``g_<=t``, ``s_<=t`` and ``a_<t`` but not ``a_t``.
    """

    def __init__(
        self,
        env: NetworkEnv,
        *,
        condition_on_preference: bool,
        embed_dim: int,
        n_layer: int,
        n_head: int,
        dropout: float,
    ):
        super().__init__(env)
        self.condition_on_preference = condition_on_preference
        extra = env.n_obj if condition_on_preference else 0
        self.embed_timestep = nn.Embedding(self.max_episode_steps, embed_dim)
        self.embed_return = nn.Linear(env.n_obj + extra, embed_dim)
        self.embed_state = nn.Linear(env.obs_dim + extra, embed_dim)
        self.embed_action = nn.Linear(env.act_dim + extra, embed_dim)
        self.embed_ln = nn.LayerNorm(embed_dim)
        self.embed_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(TransformerBlock(embed_dim, n_head, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(embed_dim)
        self.action_head = ActionHead(embed_dim, env.act_low, env.act_high)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """GPT-2 initialisation: N(0, 0.02) weights, zero biases, unit layer norms."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    @staticmethod
    def attention_mask(step_mask: torch.Tensor) -> torch.Tensor:
        """(B, 1, 3K, 3K) bool: token i may attend to token j <= i if j is a real (unpadded) step.

        Each token may always attend to itself, so a padded token's attention row is never empty
        (its output is discarded anyway); real tokens never see padded ones.
        """
        token_mask = step_mask.repeat_interleave(3, dim=1)  # (B, 3K)
        length = token_mask.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=step_mask.device).tril()
        eye = torch.eye(length, dtype=torch.bool, device=step_mask.device)
        return (causal & (token_mask[:, None, :] | eye)).unsqueeze(1)

    def forward(self, states, actions, preferences, returns_to_go, timesteps, mask=None):
        """Predict ``a_t`` at every step of each context window.

        states (B, K, obs_dim) normalised, actions (B, K, act_dim), preferences (B, K, n_obj) or
        (B, n_obj), returns_to_go (B, K, n_obj) = scaled g_t, timesteps (B, K) integer,
        mask (B, K) bool with False on left padding, or None for no padding -> (B, K, act_dim).
        """
        b, k, _ = states.shape
        if self.condition_on_preference:
            if preferences.dim() == 2:
                preferences = preferences.unsqueeze(1).expand(b, k, preferences.shape[-1])
            returns_to_go = torch.cat([returns_to_go, preferences], dim=-1)
            states = torch.cat([states, preferences], dim=-1)
            actions = torch.cat([actions, preferences], dim=-1)
        time = self.embed_timestep(timesteps.clamp(0, self.max_episode_steps - 1))
        tokens = torch.stack(
            [
                self.embed_return(returns_to_go) + time,
                self.embed_state(states) + time,
                self.embed_action(actions) + time,
            ],
            dim=2,
        ).reshape(b, 3 * k, -1)
        h = self.embed_dropout(self.embed_ln(tokens))
        allowed = None if mask is None else self.attention_mask(mask)
        for block in self.blocks:
            h = block(h, allowed)
        h = self.ln_f(h).view(b, k, 3, -1)
        return self.action_head(h[:, :, 1])  # outputs at the state tokens


def build_model(
    name: str,
    obs_dim: int,
    act_dim: int,
    n_obj: int,
    settings: dict,
    *,
    act_low: Sequence[float] | None = None,
    act_high: Sequence[float] | None = None,
    max_episode_steps: int = 500,
) -> nn.Module:
    """Build the network for one of :data:`MODEL_NAMES`.

    ``settings`` (PEDA's, resolved) give ``hidden``/``depth``/``dropout`` for the MLPs and
    ``embed_dim``/``n_layer``/``n_head``/``dropout`` for MODT. Action bounds default
    to [-1, 1] per dimension; ``max_episode_steps`` is ``T`` in MORvS's ``g / (T - t)`` and the
    size of MODT's timestep embedding. BC stacks ``context_length`` states.
    """
    check_model_name(name)
    dims = {"obs_dim": obs_dim, "act_dim": act_dim, "n_obj": n_obj, "max_episode_steps": max_episode_steps}
    for key, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
    act_low = [-1.0] * act_dim if act_low is None else [float(x) for x in act_low]
    act_high = [1.0] * act_dim if act_high is None else [float(x) for x in act_high]
    env = NetworkEnv(obs_dim, act_dim, n_obj, act_low, act_high, max_episode_steps)
    if is_transformer(name):
        return DecisionTransformer(
            env,
            condition_on_preference=uses_preference(name),
            embed_dim=settings["embed_dim"],
            n_layer=settings["n_layer"],
            n_head=settings["n_head"],
            dropout=settings["dropout"],
        )
    return MLPPolicy(
        env,
        condition_on_preference=uses_preference(name),
        condition_on_return=name.startswith("rvs"),
        hidden=settings["hidden"],
        depth=settings["depth"],
        dropout=settings["dropout"],
        history=window_length(name, settings),
    )


def build_env_model(name: str, dims: Dims, settings: dict, facts: Mapping[str, Any]) -> nn.Module:
    """:func:`build_model` for an env of sizes ``dims`` whose ``facts`` give the action bounds and the
    episode cap (``act_low``, ``act_high``, ``max_episode_steps``: the training core's facts of a
    dataset, which its checkpoints record under the same keys)."""
    return build_model(
        name,
        dims.obs_dim,
        dims.act_dim,
        dims.n_obj,
        settings,
        act_low=facts["act_low"],
        act_high=facts["act_high"],
        max_episode_steps=facts["max_episode_steps"],
    )
