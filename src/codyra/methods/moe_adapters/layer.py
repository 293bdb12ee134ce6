"""MoE-Adapters' mixture-of-experts adapter layer (Yu et al., JiazuoYu/MoE-Adapters4CL
``mtil/clip/model.py`` ``ResidualAttentionBlock``, ``mtil/clip/adapter.py``).

Per transformer block, in parallel with the MLP: x <- x + MLP(LN_2(x)) + sum_e g_e(x) A_e(x),
where every expert A_e is a bottleneck adapter (down 64, ReLU, dropout 0.1, up, times 0.1;
``lora`` init: down Kaiming-uniform(a=sqrt 5), up and biases zero) applied to the block's
residual stream (not the normalised one), and the gates come from one router per task
(gate and noise weights, both zero at creation): noisy top-k gating (Shazeer et al.) of the
sequence's first token, k = 2, noise only in training, softmax over the k kept logits. The
experts are shared by all tasks; each task trains its own router. The load-balancing loss is
1e-2 (cv^2(importance) + cv^2(load)), importance the gates summed over the batch, load the
number of samples each expert receives (its smooth estimate under noise); the reference
computes it in every block and never adds it to the objective (``mtil/src/models/finetune.py``
backpropagates the cross-entropy alone), so adding it is an option.

:class:`MoELayer` is one block's MLP with its experts beside it; every layer of a model shares
one :class:`Control` saying which task's router is active (None: the plain block, MoE-Adapters'
zero-shot path) and collecting the balance terms of a forward.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions.normal import Normal

from codyra.adapters.lora import GeneratorDropout

BALANCE_WEIGHT = 1e-2


class Adapter(nn.Module):
    def __init__(
        self,
        d_model: int,
        bottleneck: int = 64,
        dropout: float = 0.1,
        scale: float = 0.1,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.down_proj = nn.Linear(d_model, bottleneck)
        self.up_proj = nn.Linear(bottleneck, d_model)
        # masks from the engine's per-step generator (a resumed run draws the masks an uninterrupted one drew)
        self.dropout, self.scale = GeneratorDropout(dropout), scale
        with torch.no_grad():
            # from the job's generator: the global RNG's state depends on what ran before in the process
            nn.init.kaiming_uniform_(self.down_proj.weight, a=math.sqrt(5), generator=generator)
            nn.init.zeros_(self.up_proj.weight)
            nn.init.zeros_(self.down_proj.bias)
            nn.init.zeros_(self.up_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.dropout(torch.relu(self.down_proj(x)))
        return self.up_proj(hidden) * self.scale


def cv_squared(x: torch.Tensor) -> torch.Tensor:
    """Squared coefficient of variation (0 for a single expert), as the reference."""
    if x.shape[0] == 1:
        return torch.zeros((), device=x.device)
    return x.float().var() / (x.float().mean() ** 2 + 1e-10)


def top_k_gates(
    x: torch.Tensor,
    w_gate: torch.Tensor,
    w_noise: torch.Tensor,
    top_k: int,
    noise: torch.Tensor | None = None,
    noise_epsilon: float = 1e-2,
):
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
    return torch.where(
        noisy > threshold_in, normal.cdf((clean - threshold_in) / stddev), normal.cdf((clean - threshold_out) / stddev)
    )


def balance_loss(gates: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
    return BALANCE_WEIGHT * (cv_squared(gates.sum(0)) + cv_squared(load))


def mixture(x: torch.Tensor, gates: torch.Tensor, experts: nn.ModuleList) -> torch.Tensor:
    """``sum_e gates[b, e] * experts[e](x[b])`` for x (B, ..., D); experts with no sample are not run."""
    out = torch.zeros_like(x)
    for e in gates.sum(0).nonzero().flatten().tolist():
        rows = gates[:, e].nonzero().flatten()
        weight = gates[rows, e].view(-1, *([1] * (x.dim() - 1)))
        out[rows] += weight.to(x.dtype) * experts[e](x[rows])
    return out


class Control:
    """What every MoE layer of one model reads: the active task's router (0-based; None = the plain
    block) and, while training, the balance terms of the current forward."""

    def __init__(self):
        self.route: int | None = None
        self.balance: list[torch.Tensor] = []


class MoELayer(nn.Module):
    """A transformer block's LN_2 + MLP with the experts beside them: returns MLP(LN_2(x)) +
    sum_e g_e(x) A_e(x), so the block (x + its output) computes MoE-Adapters' parallel branch.

    ``frozen`` marks experts frozen by earlier tasks; ``counts`` how often each expert was chosen
    (samples times top-k) in this task's training, from which the task freezes its top experts."""

    def __init__(
        self,
        ln_2: nn.Module,
        mlp: nn.Module,
        d_model: int,
        control: Control,
        experts: int,
        top_k: int,
        bottleneck: int,
        scale: float,
        dropout: float,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k must be in 1..{experts} (the number of experts), got {top_k}")
        self.ln_2, self.mlp, self.control, self.top_k = ln_2, mlp, control, top_k
        self.experts = nn.ModuleList(Adapter(d_model, bottleneck, dropout, scale, generator) for _ in range(experts))
        self.routers = nn.ParameterList()
        self.noise = nn.ParameterList()
        self.register_buffer("frozen", torch.zeros(experts, dtype=torch.bool))
        self.register_buffer("counts", torch.zeros(experts))

    @property
    def c_fc(self) -> nn.Module:
        """The wrapped MLP's first layer: open_clip reads the block's weight dtype from ``mlp.c_fc``."""
        return self.mlp.c_fc

    def add_router(self) -> None:
        d_model, experts = self.experts[0].down_proj.in_features, len(self.experts)
        device = self.counts.device
        self.routers.append(nn.Parameter(torch.zeros(d_model, experts, device=device)))
        self.noise.append(nn.Parameter(torch.zeros(d_model, experts, device=device)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.mlp(self.ln_2(x))
        task = self.control.route
        if task is None:
            return out
        token = x[:, 0]  # batch first: the class / start-of-text token of each sequence
        noise = None
        if self.training:
            # the experts' dropout generator, reseeded by the engine every step
            generator = self.experts[0].dropout.generator
            noise = torch.randn((token.shape[0], len(self.experts)), generator=generator, device=token.device).to(
                token.dtype
            )
        gates, load = top_k_gates(token, self.routers[task], self.noise[task], self.top_k, noise)
        if self.training:
            self.counts += (gates > 0).sum(0).to(self.counts.dtype)
            self.control.balance.append(balance_loss(gates, load))
        return out + mixture(x, gates, self.experts)


def attach(towers, control: Control, **expert_options) -> list[MoELayer]:
    """Put a :class:`MoELayer` into every residual block of ``towers`` (open_clip ``Transformer``s,
    batch first, blocks ``x + ls_1(attn(ln_1 x))`` then ``x + ls_2(mlp(ln_2 x))`` with identity
    layer scale): the block's ``ln_2`` becomes the identity and its ``mlp`` the layer."""
    layers = []
    for tower in towers:
        if not getattr(tower, "batch_first", False):
            raise ValueError("MoE-Adapters needs batch-first open_clip transformers (open_clip >= 2.24)")
        for block in tower.resblocks:
            if not isinstance(block.ls_2, nn.Identity):
                raise TypeError(
                    "MoE-Adapters' parallel experts assume a block without layer scale (ls_2 is not the identity)"
                )
            layer = MoELayer(block.ln_2, block.mlp, block.ln_2.normalized_shape[0], control, **expert_options)
            block.ln_2, block.mlp = nn.Identity(), layer
            layers.append(layer.to(block.ln_1.weight.device))
    return layers
