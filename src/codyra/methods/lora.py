"""Fixed-rank LoRA, merged per task: rank-r adapters with gates fixed at 1, merged into the
backbone after each task and re-initialised for the next. With CoDyRA's rank, placement and
schedule it is the paper's "same rank, no gates" comparison. TRACE's SeqLoRA, one adapter
carried through all tasks, is the ``seqlora`` kind (:mod:`codyra.methods.seqlora`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from codyra.methods.base import Method, freeze
from codyra.methods.options import MethodOptions, option


@dataclass(frozen=True)
class LoRAOptions(MethodOptions):
    rank: int = option(16, minimum=1)
    alpha: float | None = option(None, exclusive_minimum=0, doc="LoRA alpha (scale alpha / rank); null = rank")
    placement: str | list[str] = option("all", min_items=1, doc="'all', or tokens such as [attn] or [vision, mlp] (codyra.adapters.targets)")
    dropout: float = option(0.0, minimum=0, exclusive_maximum=1)


class LoRA(Method):
    kind = "lora"
    gated = False
    Options = LoRAOptions

    def setup(self, ctx):
        from codyra.adapters.attach import attach_adapters
        from codyra.adapters.lora import RankSelectiveLoRA
        from codyra.adapters.targets import select_targets

        opts = self.options
        model = ctx.model
        freeze(model)
        self.targets = select_targets(ctx.targets, opts.placement, ctx.vocab)
        alpha = opts.alpha if opts.alpha is not None else opts.rank
        device = next(model.parameters()).device
        self.adapters = {
            t.name: RankSelectiveLoRA(
                t.in_features,
                t.out_features,
                opts.rank,
                alpha,
                gated=self.gated,
                w_init=opts.w_init if self.gated else "ones",
                dropout=opts.dropout,
                generator=ctx.generator,
            ).to(device)
            for t in self.targets
        }
        attach_adapters(model, self.targets, self.adapters)
        factors = [p for a in self.adapters.values() for p in (a.A, a.B)]
        groups = [{"params": factors, "weight_decay": ctx.weight_decay, "name": "lora_AB"}]
        gates = [a.w for a in self.adapters.values() if a.gated]
        if gates:
            groups.append({"params": gates, "weight_decay": 0.0, "name": "gates"})
        return groups

    def step_metrics(self):
        ranks = [a.active_rank() for a in self.adapters.values()]
        return {"active_rank_mean": sum(ranks) / len(ranks), "active_rank_total": float(sum(ranks))}

    def stored_factors(self, name: str, adapter) -> tuple:
        """(A, B, w) of one target's update: the surviving components."""
        return adapter.factors()

    def restore_base(self, model) -> None:
        """Put back the backbone weights ``setup`` changed (none here), before the merge."""

    def finish(self, model):
        import torch

        from codyra.adapters.attach import detach_adapters
        from codyra.adapters.lora import delta_from_factors
        from codyra.updates import TaskUpdate, apply_update

        tensors, where, matrices = {}, {}, {}
        for t in self.targets:
            adapter = self.adapters[t.name]
            A, B, w = self.stored_factors(t.name, adapter)
            tensors.update({f"{t.name}.A": A, f"{t.name}.B": B, f"{t.name}.w": w})
            where[t.name] = {"param": t.param, "rows": list(t.rows) if t.rows else None}
            matrices[t.name] = {
                "tower": t.tower,
                "kind": t.kind,
                "rank_init": adapter.rank,
                "active_rank": adapter.active_rank(),
                "dW_fro": float(torch.linalg.matrix_norm(delta_from_factors(A, B, w))),
            }
        detach_adapters(model)
        self.restore_base(model)
        update = TaskUpdate("lora", tensors, where)
        apply_update(model, update)
        trainable = sum(a.A.numel() + a.B.numel() + (a.w.numel() if a.gated else 0) for a in self.adapters.values())
        summary = {
            "trainable_params": trainable,
            "stored_params": update.num_stored(),
            "active_rank_total": sum(m["active_rank"] for m in matrices.values()),
            "active_rank_mean": sum(m["active_rank"] for m in matrices.values()) / len(matrices),
            "dW_fro_total": math.sqrt(sum(m["dW_fro"] ** 2 for m in matrices.values())),
            "matrices": matrices,
        }
        return update, summary


METHOD = LoRA
