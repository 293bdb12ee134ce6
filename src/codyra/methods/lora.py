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
    placement: str | list[str] = option(
        "all", min_items=1, doc="'all', or tokens such as [attn] or [vision, mlp] (codyra.adapters.targets)"
    )
    dropout: float = option(0.0, minimum=0, exclusive_maximum=1)


@dataclass(frozen=True)
class NormMatchedOptions(LoRAOptions):
    """Kind ``lora`` alone adds the paper's norm-matched probe (appendix "supp_norm_matched": each
    rank retrained "with a penalty enforcing a common ||dW||_F", the median of the ranks' natural
    norms): the task loss plus norm_penalty * (||dW||_F - target)^2, ||dW||_F over all the task's
    adapted matrices (a summary's ``dW_fro_total``)."""

    norm_target: float | list[str] | None = option(
        None,
        exclusive_minimum=0,
        min_items=1,
        doc="the task update's ||dW||_F to match; "
        "a list of methods: the median of their ||dW||_F on the same task and seed",
    )
    norm_penalty: float = option(0.0, minimum=0, doc="weight of the penalty (||dW||_F - norm_target)^2")

    def check(self):
        if (self.norm_target is None) != (self.norm_penalty == 0):
            return [
                (
                    "norm_penalty",
                    "norm_target and a norm_penalty > 0 go together (the norm-matched probe); set both or neither",
                )
            ]
        return []


def norm_references(spec: dict) -> list[str]:
    """The methods whose ||dW||_F a method config's norm target is the median of (none: a number or unset)."""
    target = spec.get("norm_target")
    return list(target) if isinstance(target, list) else []


def norm_target_value(run_summary, methods: list[str], seed: int, task_index: int) -> float:
    """The median ||dW||_F (``dW_fro_total``) of ``methods``' updates of task ``task_index``, seed
    ``seed``; ``run_summary(m)`` reads method m's training summary of that task (``TaskContext.run_summary``)."""
    import statistics

    from codyra.store.io import ResultError

    norms = []
    for m in methods:
        try:
            summary = run_summary(m)
        except FileNotFoundError as err:
            raise FileNotFoundError(
                f"norm_target names {m!r}, whose task {task_index} (seed {seed}) is not trained: {err}"
            ) from err
        value = summary.get("dW_fro_total")
        if (
            summary.get("method") != m
            or summary.get("seed") != seed
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise ResultError(
                f"the training summary of {m!r}'s task {task_index} has no finite dW_fro_total of ({m}, seed {seed}): "
                "norm_target needs low-rank adapter methods; delete it and rerun its training"
            )
        norms.append(float(value))
    return statistics.median(norms)


class LoRA(Method):
    kind = "lora"
    families = ("clip", "causal_lm", "blip")
    paper_row = "LoRA (r={rank})"
    stores_low_rank_update = True  # every kind over LoRA stores its task's factors (``finish``)
    gated = False
    Options = NormMatchedOptions
    norm_goal: float | None = None  # the ||dW||_F the norm-matched probe pulls this task's update to

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
        target = getattr(opts, "norm_target", None)
        if target is not None:
            self.norm_goal = (
                float(target)
                if not isinstance(target, list)
                else norm_target_value(ctx.run_summary, target, ctx.seed, ctx.task_index)
            )
        factors = [p for a in self.adapters.values() for p in (a.A, a.B)]
        groups = [{"params": factors, "weight_decay": ctx.weight_decay, "name": "lora_AB"}]
        gates = [a.w for a in self.adapters.values() if a.gated]
        if gates:
            groups.append({"params": gates, "weight_decay": 0.0, "name": "gates"})
        return groups

    def frobenius(self):
        """The task update's ||dW||_F over all adapted matrices (differentiable; 0 at B = 0 with a zero gradient)."""
        from codyra.device import portable_sqrt  # imported here: the DAG build reads norm_references

        return portable_sqrt(sum(a.frobenius_sq() for a in self.adapters.values()).clamp_min(1e-12))

    def extra_loss(self, ctx, batch, outputs):
        if self.norm_goal is None:
            return None
        return self.options.norm_penalty * (self.frobenius() - self.norm_goal) ** 2

    def step_metrics(self):
        import torch

        # one count over every adapter's gates (w != 0, RankSelectiveLoRA.active), however many
        # matrices are adapted; float64, as Python divides; left on the device, where the loop reads
        # it a step later
        total = torch.count_nonzero(torch.cat([a.w.detach() for a in self.adapters.values()])).double()
        out = {"active_rank_mean": total / len(self.adapters), "active_rank_total": total}
        if self.norm_goal is not None:
            out["dW_fro_total"] = self.frobenius().detach()
        return out

    def stored_factors(self, name: str, adapter) -> tuple:
        """(A, B, w) of one target's update: the surviving components."""
        return adapter.factors()

    def restore_base(self, model) -> None:
        """Put back the backbone weights ``setup`` changed (none here), before the merge."""

    def finish(self, model):
        import torch

        from codyra.adapters.attach import detach_adapters
        from codyra.store.updates import TaskUpdate, apply_update, delta_from_factors

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
        if self.norm_goal is not None:
            summary["norm_target"] = self.norm_goal
        return update, summary

    @classmethod
    def footprint(cls, options, task_index):
        """Adapters of the configured rank (the estimate places them on every matrix: an upper bound)."""
        from codyra.methods.base import Footprint

        return Footprint(adapter_rank=options.rank)


METHOD = LoRA
