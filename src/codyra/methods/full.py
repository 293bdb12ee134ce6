"""Full fine-tuning: every backbone parameter trains; the stored update is the dense delta.

``logit_scale`` stays frozen (the temperature is part of the zero-shot head, not of the
representation). Weight decay applies to matrices and embeddings, not to biases, norms
or other vectors.
"""

from __future__ import annotations

import math

from codyra.methods.base import Method

FROZEN = ("logit_scale",)


class FullFineTune(Method):
    kind = "full"
    paper_row = None  # the paper has no plain full fine-tuning row

    def setup(self, ctx):
        from codyra.optim import decay_groups

        self.params = {n: p for n, p in ctx.model.named_parameters() if n not in FROZEN}
        for name, p in ctx.model.named_parameters():
            p.requires_grad_(name in self.params)
        self.before = {n: p.detach().float().cpu().clone() for n, p in self.params.items()}
        return decay_groups(self.params.values(), ctx.weight_decay)

    def finish(self, model):
        from codyra.updates import TaskUpdate, apply_update

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


METHOD = FullFineTune
