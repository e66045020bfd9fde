"""MORvS-PML (``rvs-pml``): MORvS with one weight set per objective, the policy for a preference
w using the w-weighted combination of the sets.

Source: Pareto Manifold Learning (N. Dimitriadis, P. Frossard, F. Fleuret, "Pareto Manifold
Learning: Tackling multiple tasks via ensembles of single-task models", ICML 2023; code
github.com/nik-dim/pamal, ``src/ll/weight_ensemble.py`` and ``src/ll/subspace_modules.py`` at
e915a9b, the experiments' ``configs/experiment/*/method/pamal.yaml`` at 497622e):
an ensemble in weight space, one member per task, whose convex combinations
``theta(alpha) = sum_i alpha_i theta_i`` trace a continuous Pareto front. The backbone, the data
and the training are PEDA's MORvS(P) (:mod:`morl.families.peda`, ``docs/protocol.md``).

The policy (:class:`ManifoldPolicy`): ``n_obj`` copies ``theta_i`` of MORvS's network (``depth``
layers of width ``hidden``, ReLU and dropout, the tanh action head) on MORvS's inputs without w,
``[s_t, g_t / (T - t)]`` (the return-to-go still carries the preference: see
:mod:`morl.families.hyper`). Every linear layer, head included, uses the combined weights
``sum_i w_i W_i`` and bias ``sum_i w_i b_i`` of the sample's own preference, computed per sample
as ``sum_i w_i (W_i x + b_i)``, which is exact for a linear layer: one matrix product of the batch
with the stacked sets and a contraction with w; the nonlinearities follow the combined layer, so
the network for w is exactly MORvS with weights theta(w). A step costs about ``n_obj`` MORvS steps.
At a corner of the simplex the policy is one weight set alone (:meth:`ManifoldPolicy.member_state_dict`).

Initialisation: the weight sets are initialised independently, each as MORvS's layers (PyTorch's
default for a linear layer), as PML's code does in all five of its experiments' configurations
(``reinit_flag: true``, "each ensemble member is initialized independently";
``SubspaceModule._create_new_`` resets each copy). The paper's own text could not be consulted
here; we follow the code.

Departures, each with its reason:

- PML draws one combination ``alpha ~ Dirichlet(p)`` per batch and weights the task losses by it;
  offline, every transition already carries the behaviour preference it was collected under, so
  each sample uses its own preference as its coefficients, and the loss is PEDA's one action
  regression (the objectives enter through the data, not through a weighting of losses);
- PML's multi-forward regularisation (several alphas per batch, a penalty on task losses that do
  not fall as their task's weight grows; ``reg_coefficient`` 0 to 5 in its configurations) is left
  out: it orders per-task losses, and the one action regression here has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from morl.families import peda
from morl.families.base import setting

# PEDA's training definitions, checkpoint keys (the agent applies the return scale itself) and data
# (normalised states, [-1, 1] actions, its returns-to-go); the checkpoint format is this family's own
from morl.families.peda import CHECKPOINT_KEYS, DEFINITIONS, prepare  # noqa: E402, F401
from morl.families.peda_networks import ActionBox, NetworkEnv, PolicyNetwork

FORMAT_VERSION = 1
READS_VERSIONS = (1,)


@dataclass(frozen=True)
class Settings(peda.StepSettings):
    """MORvS(P)'s settings, PEDA's defaults; the number of weight sets is the number of objectives."""

    weight_decay: float = setting(1e-3, "AdamW weight decay, every weight set (PEDA's code)")
    hidden: int = setting(512, "width of each weight set's hidden layers (PEDA's MORvS)")
    depth: int = setting(3, "hidden layers of each weight set (PEDA's MORvS)")


#: The ranges of the settings shared with MORvS(P) are PEDA's.
RULES = peda.REGRESSION_RULES


class CombinedLinear(nn.Module):
    """``n`` linear layers (``weight`` (n, out, in), ``bias`` (n, out)), applied to each sample with
    the weights ``sum_i c_i W_i`` and bias ``sum_i c_i b_i`` of its coefficients c (B, n)."""

    def __init__(self, in_dim: int, out_dim: int, n: int):
        super().__init__()
        members = [nn.Linear(in_dim, out_dim) for _ in range(n)]  # each initialised independently
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in members]))
        self.bias = nn.Parameter(torch.stack([m.bias.detach() for m in members]))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """x (B, in), c (B, n) -> (B, out): ``sum_i c_i (W_i x + b_i)``, i.e. the combined layer on x."""
        n, out_dim, in_dim = self.weight.shape
        per_set = (x @ self.weight.reshape(n * out_dim, in_dim).T).view(-1, n, out_dim) + self.bias
        return torch.einsum("bn,bno->bo", c, per_set)


class ManifoldPolicy(PolicyNetwork):
    """MORvS-PML's network (module docstring), with PEDA's call signature
    ``model(states, actions, preferences, returns_to_go, timesteps, mask=None)`` on single steps."""

    def __init__(self, env: NetworkEnv, *, hidden: int, depth: int, dropout: float):
        super().__init__(env)
        n_obj = env.n_obj  # one weight set per objective
        in_dim = env.obs_dim + n_obj
        self.layers = nn.ModuleList(CombinedLinear(in_dim if i == 0 else hidden, hidden, n_obj) for i in range(depth))
        self.dropout = nn.Dropout(dropout)
        self.head = CombinedLinear(hidden, env.act_dim, n_obj)
        self.action_head = ActionBox(env.act_low, env.act_high)

    def member_state_dict(self, i: int) -> dict[str, torch.Tensor]:
        """Weight set ``i`` as the state dict of PEDA's MORvS (``rvs``: ``MLPPolicy`` without w, with
        the same ``hidden``, ``depth`` and action bounds)."""
        out = {
            "action_head.act_center": self.action_head.act_center,
            "action_head.act_half_range": self.action_head.act_half_range,
        }
        for j, layer in enumerate(self.layers):
            out[f"trunk.{3 * j}.weight"], out[f"trunk.{3 * j}.bias"] = layer.weight[i], layer.bias[i]
        out["action_head.linear.weight"], out["action_head.linear.bias"] = self.head.weight[i], self.head.bias[i]
        return {k: v.detach().clone() for k, v in out.items()}

    def forward(self, states, actions, preferences, returns_to_go, timesteps, mask=None):
        """One action per row: states (B, obs_dim), preferences (B, n_obj) the combination's
        coefficients, returns_to_go (B, n_obj) the scaled g_t, timesteps (B,) -> (B, act_dim) in the
        action box; ``actions`` are unused."""
        h = torch.cat([states, self.average_return_to_go(returns_to_go, timesteps)], dim=-1)
        c = preferences.to(h.dtype)
        for layer in self.layers:
            h = self.dropout(torch.relu(layer(h, c)))
        return self.action_head.squash(self.head(h, c))


#: The family's network from its settings.
network = peda.network_of(ManifoldPolicy, "hidden", "depth", "dropout")
Learner, build_agent = peda.sequence_family(network)
