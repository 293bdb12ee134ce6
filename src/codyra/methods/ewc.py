"""EWC as TRACE implements it (BeyonderXX/TRACE, model/Regular/EWC.py; full-parameter
training), in every model family.

- Fisher: one diagonal F for the whole stream, never reset. After every micro-batch's backward,
  F += g^2 / (micro-batches per epoch of the current task), g that micro-batch's gradient of the
  total loss (penalty included; NaN -> 0) as the backward leaves it, i.e. its share of the step's
  loss (about 1 / gradient_accumulation of its mean). TRACE registers a tensor hook on every
  parameter (``retain_grad`` / ``save_grad``) that sees each ``model.backward(loss)`` of DeepSpeed,
  which divides the loss by the accumulation steps, and calls ``_update_fisher`` (divide by
  ``train_length = len(dataloader)``, the micro-batches of an epoch) after every micro-batch
  (``train_one_task``). We square in the same tensor hook, so F sums over every micro-batch of
  every epoch of every task so far, and grows *during* the current task too (the next
  micro-batch's penalty already uses it). Under DeepSpeed ZeRO the hook's gradient is this rank's
  share of the micro-batch: it is averaged over the ranks first, as DeepSpeed averages gradients,
  so every rank squares the micro-batch's gradient of the plain path (TRACE squares each rank's
  own share, so its ranks' Fishers differ).
- Penalty from the second task on: loss += 0.5 * lambda * sum F (theta - theta_{i-1})^2, with
  theta_{i-1} the weights the task started from and the running F; lambda = 400 (TRACE's
  ``lambda_ewc`` default).
- ``fisher_gradient: task`` (not TRACE's) squares the task loss's gradient alone, as EWC's
  Fisher of the task's log-likelihood (Kirkpatrick et al. 2017): the penalty's own gradient
  lambda F (theta - theta_{i-1}) / (micro-batches per step) is taken back out of each
  micro-batch's. TRACE's F feeds on that gradient, so F_{t+1} ~ F_t + (lambda F_t dtheta)^2 / n:
  once lambda dtheta sqrt(F / n) > 1 it squares every micro-batch; under AdamW a rarely-seen
  weight moves by lr per step whatever its gradient, and on the mini CLIP (full fine-tuning at
  1e-4) token-embedding entries reached inf within 20 steps of task 3.

Stored per task beside the update: F after the task (theta_{i-1} is rebuilt from the updates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune
from codyra.methods.options import MethodOptions, option

if TYPE_CHECKING:
    import torch


def accumulate_fisher_(
    fisher: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor | None], micro_batches_per_epoch: int
) -> None:
    """TRACE's ``_update_fisher`` after one micro-batch: F[n] += nan_to_num(g[n], nan=0)^2 /
    micro_batches_per_epoch, in place, g[n] the micro-batch's gradient as its backward left it.

    A parameter without a gradient (None) adds nothing, as TRACE's hook never fires for it.
    """
    import torch

    if micro_batches_per_epoch < 1:
        raise ValueError(f"micro-batches per epoch must be >= 1, got {micro_batches_per_epoch}")
    for name, f in fisher.items():
        g = grads.get(name)
        if g is not None:
            f.add_(torch.nan_to_num(g.detach().to(f.dtype), nan=0.0).pow(2) / micro_batches_per_epoch)


def rank_mean(grad: torch.Tensor) -> torch.Tensor:
    """``grad`` averaged over the ranks of a running process group (itself in one process)."""
    import torch

    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return grad
    world = torch.distributed.get_world_size()
    if world == 1:
        return grad
    total = grad.detach().float().clone()
    torch.distributed.all_reduce(total)
    return total / world


def penalty_gradient(params, previous, fisher, strength: float) -> dict:
    """d/dtheta of ``ewc_penalty``: strength * F * (theta - previous), per parameter."""
    return {n: strength * fisher[n] * (p.detach() - previous[n].to(p.dtype)) for n, p in params.items()}


def ewc_penalty(
    params: Mapping[str, torch.Tensor],
    previous: Mapping[str, torch.Tensor],
    fisher: Mapping[str, torch.Tensor],
    strength: float,
) -> torch.Tensor:
    """0.5 * strength * sum_n sum F[n] (theta[n] - previous[n])^2 (TRACE: ``0.5 * lambda_ewc * penalty()``)."""
    missing = sorted(set(params) - set(fisher))
    if missing:
        raise KeyError(
            f"no Fisher diagonal for parameter(s) {missing[:3]}: was the stored state trained on this model?"
        )
    terms = [(fisher[n] * (p - previous[n].to(p.dtype)).pow(2)).sum() for n, p in params.items()]
    return 0.5 * strength * sum(terms[1:], terms[0])


def previous_tensors(
    state: Mapping[str, torch.Tensor] | None, prefix: str, params: Mapping[str, torch.Tensor], kind: str
):
    """``{name: state[prefix + name]}`` for every trainable parameter (None for task 1), checked."""
    if state is None:
        return None
    missing = [n for n in params if prefix + n not in state]
    if missing:
        raise ValueError(
            f"the previous task's stored {kind} state has no {prefix}{missing[0]} ({len(missing)} parameters missing): "
            "it was trained with other settings; retrain that task with this method"
        )
    return {n: state[prefix + n] for n in params}


@dataclass(frozen=True)
class EWCOptions(MethodOptions):
    strength: float = option(
        400.0, minimum=0, doc="lambda of 0.5 * lambda * sum F (theta - theta_{i-1})^2 (TRACE lambda_ewc)"
    )
    fisher_gradient: str = option(
        "total",
        choices=("total", "task"),
        doc="the gradient F squares: 'total' (TRACE: task loss + penalty) "
        "or 'task' (the task loss's alone, EWC's Fisher)",
    )


class EWC(FullFineTune):
    kind = "ewc"
    families = ("clip", "causal_lm")
    paper_row = "EWC"
    Options = EWCOptions

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        stored = previous_tensors(ctx.previous_state, "fisher.", self.params, self.kind)
        self.fisher = {
            n: (
                stored[n].to(p.device, torch.float32, copy=True) if stored else torch.zeros_like(p, dtype=torch.float32)
            )
            for n, p in self.params.items()
        }
        for n, f in self.fisher.items():
            if f.shape != self.params[n].shape:
                raise ValueError(
                    f"stored Fisher of {n} has shape {tuple(f.shape)}, the parameter {tuple(self.params[n].shape)}"
                )
        self.anchor = {n: p.detach().clone() for n, p in self.params.items()}  # theta_{i-1}
        self.penalise = ctx.task_index > 1  # TRACE: no penalty on the first task
        self.micro_batches_per_step = ctx.micro_batches_per_step
        self.micro_batches_per_epoch = ctx.micro_batches_per_epoch
        self.hooks = [p.register_hook(self._fisher_hook(n)) for n, p in self.params.items()]
        return groups

    def _fisher_hook(self, name: str):
        """TRACE's ``save_grad`` hook and ``_update_fisher``, for one parameter and one micro-batch."""

        def hook(grad):
            g = rank_mean(grad)
            if self.penalise and self.options.fisher_gradient == "task":
                # the penalty's share of this micro-batch (the engine adds penalty / micro-batches per
                # step), at the F its forward used (F[name] changes only here, after that)
                own = penalty_gradient({name: self.params[name]}, self.anchor, self.fisher, self.options.strength)[name]
                g = g - own.to(g.dtype) / self.micro_batches_per_step
            accumulate_fisher_({name: self.fisher[name]}, {name: g}, self.micro_batches_per_epoch)

        return hook

    def extra_loss(self, ctx, batch, outputs):
        if not self.penalise:
            return None
        return ewc_penalty(self.params, self.anchor, self.fisher, self.options.strength)

    def state_to_store(self):
        return {f"fisher.{n}": f.detach().cpu().contiguous() for n, f in self.fisher.items()}

    def checkpoint_state(self):
        return self.state_to_store()

    def restore_checkpoint(self, state, step):
        import torch

        with torch.no_grad():
            for n, f in self.fisher.items():
                f.copy_(state[f"fisher.{n}"])

    def finish(self, model):
        for handle in self.hooks:
            handle.remove()
        self.anchor = None
        return super().finish(model)

    @classmethod
    def footprint(cls, options, task_index):
        """Full fine-tuning's, with the fp32 Fisher and theta_{i-1} anchor beside the parameters, the previous
        task's Fisher as loaded on the host, and the Fisher it stores."""
        from dataclasses import replace

        full = super().footprint(options, task_index)
        return replace(full, device_bytes=8.0, host_bytes=full.host_bytes + 4.0, stored_bytes=full.stored_bytes + 4.0)


METHOD = EWC
