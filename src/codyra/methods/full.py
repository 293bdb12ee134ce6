"""Full fine-tuning: every backbone parameter trains; the stored update is the dense delta.

``logit_scale`` stays frozen (the temperature is part of the zero-shot head, not of the
representation). Weight decay applies to matrices and embeddings, not to biases, norms
or other vectors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.base import Method
from codyra.methods.options import MethodOptions, option

if TYPE_CHECKING:
    import torch

FROZEN = ("logit_scale",)


def label_smoothing_correction(outputs: dict, batch: dict, smoothing: float) -> torch.Tensor | None:
    """What turns the family's plain cross-entropy of ``outputs["logits"]`` into the label-smoothed
    one (``F.cross_entropy(..., label_smoothing=smoothing)``, ZSCL's and MoE-Adapters' ``--ls``):
    their difference, added to the task loss. None for 0."""
    import torch.nn.functional as F

    if not smoothing:
        return None
    if "image_features" not in outputs:
        raise ValueError(
            "label_smoothing smooths a classification cross-entropy: it needs an image-text model (CLIP); set it to 0"
        )
    logits, labels = outputs["logits"], batch["labels"]
    return F.cross_entropy(logits, labels, label_smoothing=smoothing) - F.cross_entropy(logits, labels)


@dataclass(frozen=True)
class FullOptions(MethodOptions):
    label_smoothing: float = option(
        0.0,
        minimum=0,
        exclusive_maximum=1,
        doc="label smoothing of the task's cross-entropy (ZSCL's scripts: --ls 0.2; 0: the platform's plain loss)",
    )


class FullFineTune(Method):
    kind = "full"
    families = ("clip", "causal_lm")
    paper_row = None  # the paper has no plain full fine-tuning row
    display_name = "Full FT"
    Options = FullOptions

    def setup(self, ctx):
        from codyra.steps.optim import decay_groups

        self.params = {n: p for n, p in ctx.model.named_parameters() if n not in FROZEN}
        for name, p in ctx.model.named_parameters():
            p.requires_grad_(name in self.params)
        self.before = {n: p.detach().float().cpu().clone() for n, p in self.params.items()}
        return decay_groups(self.params.values(), ctx.weight_decay)

    def extra_loss(self, ctx, batch, outputs):
        """The label-smoothing correction; kinds built on this one whose options are not
        ``FullOptions`` (TRACE's GEM and EWC) train on the plain task loss."""
        smoothing = self.options.label_smoothing if isinstance(self.options, FullOptions) else 0.0
        return label_smoothing_correction(outputs, batch, smoothing)

    def finish(self, model):
        from codyra.store.updates import TaskUpdate, apply_update

        deltas = {n: p.detach().float().cpu() - self.before[n] for n, p in self.params.items()}
        # Restore theta_{i-1} and merge through apply_update, so the in-memory model is bit-identical
        # to the one rebuilt from stored updates.
        for n, p in self.params.items():
            p.data.copy_(self.before[n].to(p.dtype))
        update = TaskUpdate("delta", deltas)
        apply_update(model, update)
        norms = {n: float(d.norm()) for n, d in deltas.items()}
        summary = {
            "trainable_params": sum(d.numel() for d in deltas.values()),
            "stored_params": update.num_stored(),
            "dW_fro_total": math.sqrt(sum(v**2 for v in norms.values())),
            "params": {n: {"dW_fro": v} for n, v in norms.items()},
        }
        return update, summary

    @classmethod
    def footprint(cls, options, task_index):
        """Every parameter trains; theta_{i-1} in fp32 on the host (``before``), and the fp32 delta it stores;
        a step also computes the weights' gradients (3 forwards' compute to LoRA's 2)."""
        from codyra.methods.base import Footprint

        return Footprint(full_backbone=True, host_bytes=4.0, stored_bytes=4.0, step_cost=1.5)


METHOD = FullFineTune
