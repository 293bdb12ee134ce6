"""L2-anchored fine-tuning: full fine-tuning pulled towards the model the task started from.

The task loss gets ``strength / 2 * sum_p ||p - p_{i-1}||^2`` over every trained parameter,
the plain "L2" baseline of the continual-learning literature (the isotropic penalty that EWC
weights by the Fisher information). The stored update is full fine-tuning's dense delta
theta_i - theta_{i-1}, so theta_i is rebuilt and evaluated like every other method's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune, FullOptions
from codyra.methods.options import option

if TYPE_CHECKING:
    import torch


def anchor_penalty(params: dict[str, torch.Tensor], anchors: dict[str, torch.Tensor], strength: float) -> torch.Tensor:
    """strength / 2 * the sum over the parameters of ||p - anchor||^2."""
    return 0.5 * strength * sum(((p - anchors[name]) ** 2).sum() for name, p in params.items())


@dataclass(frozen=True)
class L2AnchorOptions(FullOptions):
    strength: float = option(1.0, minimum=0, doc="weight of the pull towards theta_{i-1} (0: plain full fine-tuning)")


class L2Anchor(FullFineTune):
    kind = "l2_anchor"
    # tried on CLIP; on a causal LM its anchors would be a second fp32 copy of the model, which
    # footprint() must declare before the family is added here
    families = ("clip",)
    paper_row = None  # the paper has no such row
    Options = L2AnchorOptions

    def setup(self, ctx):
        groups = super().setup(ctx)  # every parameter but logit_scale trains (self.params)
        self.anchors = {name: p.detach().clone() for name, p in self.params.items()}
        self.penalty = 0.0
        return groups

    def extra_loss(self, ctx, batch, outputs):
        penalty = anchor_penalty(self.params, self.anchors, self.options.strength)
        self.penalty = penalty.detach()
        smoothing = super().extra_loss(ctx, batch, outputs)  # full fine-tuning's label smoothing, if set
        return penalty if smoothing is None else penalty + smoothing

    def step_metrics(self):
        return {"anchor_penalty": float(self.penalty)}


METHOD = L2Anchor
