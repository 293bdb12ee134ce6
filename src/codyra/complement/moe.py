"""MoE-Adapters' mixture-of-experts adapter layer (Yu et al., JiazuoYu/MoE-Adapters4CL
``mtil/clip/model.py`` ``ResidualAttentionBlock``, ``mtil/clip/adapter.py``).

Per transformer block, in parallel with the MLP: x <- x + MLP(LN_2(x)) + sum_e g_e(x) A_e(x),
where every expert A_e is a bottleneck adapter (down 64, ReLU, dropout 0.1, up, times 0.1;
``lora`` init: down Kaiming-uniform(a=sqrt 5), up and biases zero) applied to the block's
residual stream (not the normalised one), and the gates come from one router per task:
noisy top-k gating (Shazeer et al.) of the sequence's first token, k = 2, noise only in
training, softmax over the k kept logits. The load-balancing loss is
1e-2 (cv^2(importance) + cv^2(load)), importance the gates summed over the batch, load the
number of samples each expert receives (its smooth estimate under noise).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions.normal import Normal

BALANCE_WEIGHT = 1e-2


class Adapter(nn.Module):
    def __init__(self, d_model: int, bottleneck: int = 64, dropout: float = 0.1, scale: float = 0.1):
        super().__init__()
        self.down_proj = nn.Linear(d_model, bottleneck)
        self.up_proj = nn.Linear(bottleneck, d_model)
        self.dropout, self.scale = dropout, scale
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.down_proj.weight, a=math.sqrt(5))
            nn.init.zeros_(self.up_proj.weight)
            nn.init.zeros_(self.down_proj.bias)
            nn.init.zeros_(self.up_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = nn.functional.dropout(torch.relu(self.down_proj(x)), p=self.dropout, training=self.training)
        return self.up_proj(hidden) * self.scale


def cv_squared(x: torch.Tensor) -> torch.Tensor:
    """Squared coefficient of variation (0 for a single expert), as the reference."""
    if x.shape[0] == 1:
        return torch.zeros((), device=x.device)
    return x.float().var() / (x.float().mean() ** 2 + 1e-10)


def top_k_gates(x: torch.Tensor, w_gate: torch.Tensor, w_noise: torch.Tensor, top_k: int, noise: torch.Tensor | None = None, noise_epsilon: float = 1e-2):
    """(gates (B, E): softmax over each row's k largest logits, zero elsewhere; load (E,)).

    ``noise`` (B, E) standard normal draws switch on training-time noisy gating; None is inference."""
    experts = w_gate.shape[1]
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k must be in 1..{experts} (the number of experts), got {top_k}")
    clean = x @ w_gate.to(x)
    if noise is not None:
        stddev = nn.functional.softplus(x @ w_noise.to(x)) + noise_epsilon
        logits = clean + noise * stddev
    else:
        logits = clean
    top_logits, top_indices = logits.topk(min(top_k + 1, experts), dim=1)
    gates = torch.zeros_like(logits).scatter(1, top_indices[:, :top_k], top_logits[:, :top_k].softmax(dim=1))
    if noise is not None and top_k < experts:
        load = _prob_in_top_k(clean, logits, stddev, top_logits, top_k).sum(0)
    else:
        load = (gates > 0).sum(0).to(gates.dtype)
    return gates, load


def _prob_in_top_k(clean, noisy, stddev, noisy_top, top_k):
    """P(each expert stays in the top k under fresh noise): the differentiable load estimate."""
    threshold_in = noisy_top[:, top_k : top_k + 1]
    threshold_out = noisy_top[:, top_k - 1 : top_k]
    normal = Normal(torch.zeros((), device=clean.device), torch.ones((), device=clean.device))
    return torch.where(noisy > threshold_in, normal.cdf((clean - threshold_in) / stddev), normal.cdf((clean - threshold_out) / stddev))


def balance_loss(gates: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
    return BALANCE_WEIGHT * (cv_squared(gates.sum(0)) + cv_squared(load))


def mixture(x: torch.Tensor, gates: torch.Tensor, experts: nn.ModuleList) -> torch.Tensor:
    """sum_e gates[b, e] * experts[e](x[b]) for x (B, ..., D); experts with no sample are not run."""
    out = torch.zeros_like(x)
    for e in gates.sum(0).nonzero().flatten().tolist():
        rows = gates[:, e].nonzero().flatten()
        weight = gates[rows, e].view(-1, *([1] * (x.dim() - 1)))
        out[rows] += weight.to(x.dtype) * experts[e](x[rows])
    return out
