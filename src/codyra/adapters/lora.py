"""Rank-selective LoRA: dW = scale * sum_i w_i B[:, i] A[i, :] (paper Eq. 3).

The adapter computes its contribution to a layer's output from the input directly,
``((x A^T) * w * scale) B^T``, so training never materialises a dense d x k delta.
With ``gated=False`` the gates are a constant buffer of ones: plain fixed-rank LoRA.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

W_INITS = ("normal", "uniform", "ones")


class RankSelectiveLoRA(nn.Module):
    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        alpha: float,
        *,
        gated: bool,
        w_init: str = "normal",
        dropout: float = 0.0,
        generator: torch.Generator | None = None,
        device=None,
    ):
        super().__init__()
        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        if w_init not in W_INITS:
            raise ValueError(f"unknown w_init {w_init!r}; choose one of {', '.join(W_INITS)}")
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.scale = alpha / rank
        self.A = nn.Parameter(torch.empty(rank, in_features, device=device))
        self.B = nn.Parameter(torch.zeros(out_features, rank, device=device))
        # Same bound as nn.init.kaiming_uniform_(a=sqrt(5)), drawn from our own generator so
        # initialisation is reproducible without touching torch's global RNG.
        bound = 1.0 / math.sqrt(in_features)
        with torch.no_grad():
            self.A.uniform_(-bound, bound, generator=generator)
        w = torch.ones(rank, device=device)
        if gated and w_init == "normal":
            w.normal_(generator=generator)
        elif gated and w_init == "uniform":
            w.uniform_(-1.0, 1.0, generator=generator)
        if gated:
            self.w = nn.Parameter(w)
        else:
            self.register_buffer("w", w)
        self.dropout = GeneratorDropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def gated(self) -> bool:
        return isinstance(self.w, nn.Parameter)

    @property
    def fusable(self) -> bool:
        """Whether a fused forward (codyra.adapters.attach) may share this adapter's input with the
        base product: not with dropout, whose mask is the adapter's own."""
        return isinstance(self.dropout, nn.Identity)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.linear(self.dropout(x), cast_to(self.A, x.dtype))
        return F.linear(h * cast_to(self.w * self.scale, x.dtype), cast_to(self.B, x.dtype))

    def frobenius_sq(self) -> torch.Tensor:
        """||dW||_F^2 in fp32, differentiable, from r x r Gram matrices (no dense d x k delta):
        ||B diag(s) A||_F^2 = sum_ij s_i s_j (B^T B)_ij (A A^T)_ij with s = w * scale."""
        s = self.w.float() * self.scale
        A, B = self.A.float(), self.B.float()
        return ((B.T @ B) * (A @ A.T) * torch.outer(s, s)).sum()

    def active(self) -> torch.Tensor:
        """Boolean mask of the components that survive thresholding (w_i != 0)."""
        return self.w.detach() != 0

    def active_rank(self) -> int:
        return int(self.active().sum())

    @torch.no_grad()
    def factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A, B, w * scale) of the surviving components only, fp32 on the CPU, detached."""
        keep = self.active()
        # on the CPU: merging and storage happen there, whatever device trained
        return (
            self.A[keep].float().cpu().clone(),
            self.B[:, keep].float().cpu().clone(),
            (self.w[keep] * self.scale).float().cpu().clone(),
        )

    def extra_repr(self) -> str:
        return (
            f"in={self.in_features}, out={self.out_features}, rank={self.rank}, "
            f"scale={self.scale:g}, gated={self.gated}"
        )


def cast_to(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``, without the call (and its profiler event) when it already is."""
    return t if t.dtype == dtype else t.to(dtype)


def gated_B(B: torch.Tensor, adapter: RankSelectiveLoRA, w: torch.Tensor | None) -> torch.Tensor:
    """``B diag(w * scale)`` (``w`` broadcast over B's last axis; read only when ``adapter`` is
    gated): the gate and scale folded into B, so the low-rank product needs no multiply of the
    activations. Skips the multiplies that would change nothing (LoRA's gates of ones, a scale of
    1), each a kernel launch."""
    if adapter.gated:
        return B * (w * adapter.scale if adapter.scale != 1 else w)
    return B * adapter.scale if adapter.scale != 1 else B


class GeneratorDropout(nn.Module):
    """Dropout whose masks come from an explicit generator, never torch's global RNG (jobs may run
    as threads of one process, and a resumed run must draw the masks an uninterrupted one drew)."""

    def __init__(self, p: float):
        super().__init__()
        self.p, self.generator = p, None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        if self.generator is None:
            raise RuntimeError(
                "adapter dropout has no generator: call seed_adapter_dropout(model, device) before training"
            )
        keep = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator)
        return x * keep / (1 - self.p)


def seed_adapter_dropout(model: nn.Module, device) -> torch.Generator | None:
    """Give every adapter dropout one shared generator on ``device`` (reseed it before each step);
    None when no adapter uses dropout."""
    layers = [m for m in model.modules() if isinstance(m, GeneratorDropout)]
    if not layers:
        return None
    generator = torch.Generator(device=device)
    for layer in layers:
        layer.generator = generator
    return generator
