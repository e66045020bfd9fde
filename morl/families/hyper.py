"""MORvS-HN (``rvs-hn``): MORvS whose last layers take their weights from the preference, through a
hypernetwork.

Sources: Pareto HyperNetworks (A. Navon, A. Shamsian, G. Chechik, E. Fetaya, "Learning the Pareto
Front with Hypernetworks", ICLR 2021; code github.com/AvivNavon/pareto-hypernetworks), where a
hypernetwork maps a preference to the weights of a target network, and Hyper-MORL (T. Shu, K.
Shang, C. Gong, Y. Nan, H. Ishibuchi, "Learning Pareto Set for Multi-Objective Continuous Robot
Control", IJCAI 2024; code github.com/HisaoLabSUSTC/Hyper-MORL at dd3414f, ``Hyper-MORL/hypernet.py``
and the arguments of its released runs), which does so for control policies with generated weights
``theta(w) = b + f(w) W``: an MLP ``f`` maps w to ``k`` features and ``W`` (k rows) spans a
``k``-dimensional family of policies around the base weights ``b``. The backbone, the data and
the training are PEDA's MORvS(P) (:mod:`morl.families.peda`, ``docs/protocol.md``).

The policy (:class:`HyperPolicy`):

- the trunk, ``depth - 1`` layers of width ``hidden`` (ReLU, dropout), sees MORvS's inputs without
  w, ``[s_t, g_t / (T - t)]``. The trunk is not blind to the preference: PEDA's agents are
  conditioned on the preference-weighted return-to-go ``g = w * (R(w) - rewards so far)`` at
  evaluation, and trained on ``w * return`` under ``returns_to_go: weighted`` (under ``peda`` on
  the unweighted mean reward, see :mod:`morl.families.peda`);
- the last hidden layer (width ``hidden``, ReLU, dropout) and the action head (tanh onto the action
  box) have weights generated from w: for each, ``theta(w) = b + sum_j f_j(w) W_j`` with
  ``f = Linear(n_obj, hyper_hidden), ReLU, Linear(hyper_hidden, hyper_hidden), ReLU,
  Linear(hyper_hidden, hyper_dim)`` (Hyper-MORL's ``pref_mlp``), shared by both layers;
- applied per sample without forming the weights: ``theta(w) x = b x + sum_j f_j(w) (W_j x)``, one
  matrix product of the batch with the ``hyper_dim + 1`` stacked weight sets and a contraction
  with ``[1, f(w)]`` (exact for a linear layer). A step costs about ``hyper_dim + 1`` times a plain
  layer for each generated one.

Departures, each with its reason:

- only the last hidden layer and the head are generated (PHN and Hyper-MORL generate the whole
  target network): every generated layer costs ``hyper_dim + 1`` plain ones, and the shared trunk
  keeps MORvS's representation of ``[s, g]``;
- ``b`` starts from PyTorch's default initialisation of a linear layer, as MORvS's layers (Hyper-MORL
  sets it to a policy trained in a warm-up stage, which offline data has no counterpart of) and
  is trained with the rest; ``W`` starts at ``U(-hyper_init, hyper_init)``, 0 by default as in
  Hyper-MORL's runs (``--W-variance 0``), so every preference starts from the same policy;
- trained by PEDA's supervised action regression on each transition's own behaviour preference
  (PHN and Hyper-MORL sample preferences and optimise the scalarised objective).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from morl import settings as rules
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
    """MORvS(P)'s settings (PEDA's defaults) and the hypernetwork's (Hyper-MORL's)."""

    lr: float = setting(1e-4, "AdamW learning rate, hypernetwork included (PEDA's code)")
    hidden: int = setting(512, "width of the trunk and of the generated hidden layer (PEDA's MORvS)")
    depth: int = setting(3, "hidden layers, the last one generated (PEDA's MORvS)")
    hyper_hidden: int = setting(128, "width of f's two hidden layers (Hyper-MORL's hypernet.py; PHN's code: 100)")
    hyper_dim: int = setting(10, "k, the features of f(w) and rows of W (Hyper-MORL's runs, --hypernet-dim 10)")
    hyper_init: float = setting(
        0.0, "W starts U(-x, x); 0: the same policy for every w (Hyper-MORL's runs, --W-variance 0)"
    )


#: The ranges of the settings shared with MORvS(P) are PEDA's.
RULES = {
    **peda.REGRESSION_RULES,
    "hyper_hidden": rules.at_least(1),
    "hyper_dim": rules.at_least(1),
    "hyper_init": rules.non_negative(),
}


class GeneratedLinear(nn.Module):
    """A linear layer whose weights are ``b + sum_j f_j W_j`` for per-sample features ``f`` (B, k):
    ``base`` holds ``b``, ``weight_delta`` (k, out, in) and ``bias_delta`` (k, out) hold ``W``."""

    def __init__(self, in_dim: int, out_dim: int, k: int, init: float):
        super().__init__()
        self.base = nn.Linear(in_dim, out_dim)
        self.weight_delta = nn.Parameter(torch.empty(k, out_dim, in_dim).uniform_(-init, init))
        self.bias_delta = nn.Parameter(torch.empty(k, out_dim).uniform_(-init, init))

    def weights(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The generated weight (B, out, in) and bias (B, out) of each sample."""
        weight = self.base.weight + torch.einsum("bk,koi->boi", f, self.weight_delta)
        return weight, self.base.bias + f @ self.bias_delta

    def forward(self, x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """``theta(f) x`` for each row: x (B, in), f (B, k) -> (B, out), without forming the weights."""
        k, out_dim, in_dim = self.weight_delta.shape
        per_set = (x @ self.weight_delta.reshape(k * out_dim, in_dim).T).view(-1, k, out_dim)  # W_j x
        return self.base(x) + torch.einsum("bk,bko->bo", f, per_set) + f @ self.bias_delta


class HyperPolicy(PolicyNetwork):
    """MORvS-HN's network (module docstring), with PEDA's call signature
    ``model(states, actions, preferences, returns_to_go, timesteps, mask=None)`` on single steps."""

    def __init__(
        self,
        env: NetworkEnv,
        *,
        hidden: int,
        depth: int,
        dropout: float,
        hyper_hidden: int,
        hyper_dim: int,
        hyper_init: float,
    ):
        super().__init__(env)
        in_dim = env.obs_dim + env.n_obj
        layers: list[nn.Module] = []
        for i in range(depth - 1):
            layers += [nn.Linear(in_dim if i == 0 else hidden, hidden), nn.ReLU(), nn.Dropout(dropout)]
        self.trunk = nn.Sequential(*layers)
        self.embed = nn.Sequential(
            nn.Linear(env.n_obj, hyper_hidden),
            nn.ReLU(),
            nn.Linear(hyper_hidden, hyper_hidden),
            nn.ReLU(),
            nn.Linear(hyper_hidden, hyper_dim),
        )
        self.layer = GeneratedLinear(in_dim if depth == 1 else hidden, hidden, hyper_dim, hyper_init)
        self.dropout = nn.Dropout(dropout)
        self.head = GeneratedLinear(hidden, env.act_dim, hyper_dim, hyper_init)
        self.action_head = ActionBox(env.act_low, env.act_high)

    def generated_weights(self, preferences: torch.Tensor) -> dict[str, torch.Tensor]:
        """The weights the hypernetwork gives each preference (B, n_obj): ``layer.weight`` (B, hidden,
        in), ``layer.bias``, ``head.weight`` (B, act_dim, hidden), ``head.bias``."""
        f = self.embed(preferences)
        out = {}
        for name, layer in (("layer", self.layer), ("head", self.head)):
            out[f"{name}.weight"], out[f"{name}.bias"] = layer.weights(f)
        return out

    def forward(self, states, actions, preferences, returns_to_go, timesteps, mask=None):
        """One action per row: states (B, obs_dim), preferences (B, n_obj), returns_to_go (B, n_obj)
        the scaled g_t, timesteps (B,) -> (B, act_dim) in the action box; ``actions`` are unused."""
        x = torch.cat([states, self.average_return_to_go(returns_to_go, timesteps)], dim=-1)
        f = self.embed(preferences)
        h = self.dropout(torch.relu(self.layer(self.trunk(x), f)))
        return self.action_head.squash(self.head(h, f))


#: The family's network from its settings.
network = peda.network_of(HyperPolicy, "hidden", "depth", "dropout", "hyper_hidden", "hyper_dim", "hyper_init")
Learner, build_agent = peda.sequence_family(network)
