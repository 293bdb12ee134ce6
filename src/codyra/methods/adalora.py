"""AdaLoRA (Zhang et al. 2023) as PEFT implements it (``peft/tuners/adalora``, PEFT >= 0.15),
reproduced on our adapter and tested against PEFT on an ``nn.Linear``.

- SVD-style update: dW = B diag(E) A * alpha / (r + 1e-5) (``SVDLinear``: ``lora_B @ (lora_A *
  lora_E) * scaling / (ranknum + 1e-5)``): our adapter with gates w = E and that scale; E starts
  at 0, A and B at N(0, 0.02) (``reset_lora_parameters``).
- Orthogonal regularisation added to the loss: orth_reg_weight * mean over the A and B matrices
  of ||A A^T - I||_F and ||B^T B - I||_F (``AdaLoraModel.forward``; unsquared Frobenius norms).
- Budget allocation after every optimizer step, with the gradients still present
  (``update_and_allocate(global_step)``, global_step 0 after the first step, as the reference
  trainer counts): sensitivity |p * grad| smoothed by EMAs (beta1, beta2), score =
  smoothed sensitivity x uncertainty; the score of component i is s(E_i) + mean s(A_i,:) +
  mean s(B_:,i); the cubic budget schedule from init_bgt = r x #matrices to target_r x #matrices
  between tinit and total - tfinal; every deltaT steps the gates of the init_bgt - budget
  lowest-scoring components (ties included) are set to 0; from total - tfinal on, the final
  pattern is re-applied after every step. ``tinit`` and ``tfinal`` are fractions of the task's
  steps here (PEFT takes step counts; the task length varies by benchmark).
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option

PEFT_EPS = 1e-5  # ranknum + 1e-5 in SVDLinear


def orthogonal_regularizer(adapters: dict):
    """mean over all A and B of ||P P^T - I||_F (A) and ||P^T P - I||_F (B)."""
    import torch

    terms = []
    for a in adapters.values():
        for cov in (a.A @ a.A.T, a.B.T @ a.B):
            terms.append(torch.linalg.matrix_norm(cov - torch.eye(cov.shape[0], device=cov.device, dtype=cov.dtype)))
    return sum(terms) / len(terms)


def budget_schedule(step: int, total: int, tinit: int, tfinal: int, init_bgt: int, target_bgt: int, delta_t: int):
    """(budget, mask now) as PEFT's ``RankAllocator.budget_schedule``."""
    if step <= tinit:
        return init_bgt, False
    if step > total - tfinal:
        return target_bgt, True
    mul = 1 - (step - tinit) / (total - tfinal - tinit)
    return int((init_bgt - target_bgt) * mul**3 + target_bgt), step % delta_t == 0


class RankAllocator:
    """PEFT's ``RankAllocator`` over our adapters (name -> adapter with A, B, gates w = E)."""

    def __init__(
        self,
        adapters: dict,
        target_r: int,
        total: int,
        tinit: int,
        tfinal: int,
        delta_t: int,
        beta1: float,
        beta2: float,
    ):
        self.adapters = dict(sorted(adapters.items()))
        self.total, self.tinit, self.tfinal, self.delta_t = total, tinit, tfinal, delta_t
        self.beta1, self.beta2 = beta1, beta2
        self.init_bgt = sum(a.rank for a in self.adapters.values())
        self.target_bgt = target_r * len(self.adapters)
        self.exp_avg_ipt: dict = {}
        self.exp_avg_unc: dict = {}
        self.pattern: dict | None = None

    def _params(self):
        for name, a in self.adapters.items():
            yield from (((name, "A"), a.A), ((name, "B"), a.B), ((name, "E"), a.w))

    def gradients(self) -> dict:
        """The gradient tensors of A, B and E, referenced (not copied) before the optimizer step:
        the engine drops ``.grad`` after the step, PEFT reads it there; clipping acts in place on
        these very tensors, so ``step`` sees the clipped gradients PEFT sees."""
        grads = {key: p.grad for key, p in self._params()}
        missing = [key for key, g in grads.items() if g is None]
        if missing:
            raise RuntimeError(
                f"adalora: no gradient on {missing[:3]} this step: AdaLoRA needs one on every adapter "
                "(did the forward reach them all?)"
            )
        return {key: g.detach() for key, g in grads.items()}

    def update_ipt(self, grads: dict) -> None:
        import torch

        with torch.no_grad():
            for key, p in self._params():
                ipt = (p * grads[key]).abs()
                avg = self.exp_avg_ipt.get(key, torch.zeros_like(p))
                unc = self.exp_avg_unc.get(key, torch.zeros_like(p))
                avg = self.beta1 * avg + (1 - self.beta1) * ipt
                self.exp_avg_ipt[key] = avg
                self.exp_avg_unc[key] = self.beta2 * unc + (1 - self.beta2) * (ipt - avg).abs()

    def scores(self) -> dict:
        """Per adapter, the triplet score of each component."""

        def s(name, part):
            return self.exp_avg_ipt[(name, part)] * self.exp_avg_unc[(name, part)]

        return {name: s(name, "E") + s(name, "A").mean(dim=1) + s(name, "B").mean(dim=0) for name in self.adapters}

    def mask_to_budget(self, budget: int) -> dict:
        import torch

        scores = self.scores()
        threshold = torch.kthvalue(torch.cat(list(scores.values())), k=self.init_bgt - budget).values
        keep = {name: score > threshold for name, score in scores.items()}
        self.apply(keep)
        return keep

    def apply(self, keep: dict) -> None:
        import torch

        with torch.no_grad():
            for name, mask in keep.items():
                self.adapters[name].w.masked_fill_(~mask, 0.0)

    def state(self) -> dict:
        """The allocator's mid-task tensors: the EMAs (until the final allocation clears them) and
        the final pattern (once set), for a resumed job to continue bit-identically."""
        out = {f"ipt.{n}.{part}": t for (n, part), t in self.exp_avg_ipt.items()}
        out.update({f"unc.{n}.{part}": t for (n, part), t in self.exp_avg_unc.items()})
        out.update({f"pattern.{n}": keep for n, keep in (self.pattern or {}).items()})
        return out

    def load_state(self, state: dict, device) -> None:
        """Inverse of :meth:`state` (the checkpoint's tensors arrive on the CPU)."""
        keys = [key for key, _ in self._params()]
        for prefix, ema in (("ipt", "exp_avg_ipt"), ("unc", "exp_avg_unc")):
            names = {key: f"{prefix}.{key[0]}.{key[1]}" for key in keys}
            found = {key: state[name].to(device) for key, name in names.items() if name in state}
            if found and len(found) != len(keys):
                raise ValueError(
                    f"adalora: the checkpoint holds {len(found)} of {len(keys)} {prefix} EMAs; "
                    "delete its checkpoint folder to restart the task"
                )
            setattr(self, ema, found)
        self.pattern = {n: state[f"pattern.{n}"].to(device) for n in self.adapters if f"pattern.{n}" in state} or None

    def step(self, step: int, grads: dict | None = None) -> int:
        """PEFT's ``AdaLoraModel.update_and_allocate(step)`` after the optimizer step, with the step's
        gradients (default: those still on the parameters); returns the budget."""
        final = self.total - self.tfinal
        if step < final:
            self.update_ipt(self.gradients() if grads is None else grads)
            budget, mask_now = budget_schedule(
                step, self.total, self.tinit, self.tfinal, self.init_bgt, self.target_bgt, self.delta_t
            )
            if mask_now:
                self.pattern = self.mask_to_budget(budget)
            return budget
        if step == final:
            self.pattern = self.mask_to_budget(self.target_bgt)
            self.exp_avg_ipt, self.exp_avg_unc = {}, {}
        elif self.pattern is not None:
            self.apply(self.pattern)
        return self.target_bgt


@dataclass(frozen=True)
class AdaLoRAOptions(LoRAOptions):
    target_r: int = option(8, minimum=1, doc="target average rank (AdaLoraConfig default)")
    tinit: float = option(0.1, minimum=0, exclusive_maximum=1, doc="initial warm-up, fraction of the task's steps")
    tfinal: float = option(0.2, minimum=0, exclusive_maximum=1, doc="final fine-tuning, fraction of the task's steps")
    delta_t: int = option(1, minimum=1, doc="steps between budget allocations (AdaLoraConfig deltaT)")
    beta1: float = option(0.85, exclusive_minimum=0, exclusive_maximum=1, doc="sensitivity EMA")
    beta2: float = option(0.85, exclusive_minimum=0, exclusive_maximum=1, doc="uncertainty EMA")
    orth_reg_weight: float = option(0.5, minimum=0)

    @property
    def w_init(self) -> str:  # the adapter's gates start at 1; setup sets PEFT's E = 0
        return "ones"

    def check(self):
        errors = []
        if self.target_r >= self.rank:
            errors.append(("target_r", f"must be < rank ({self.rank}), got {self.target_r}"))
        if self.tinit + self.tfinal >= 1:
            errors.append(
                ("tfinal", f"tinit + tfinal must be < 1 (fractions of the steps), got {self.tinit} + {self.tfinal}")
            )
        return errors


class AdaLoRA(LoRA):
    kind = "adalora"
    families = ("clip", "causal_lm")
    paper_row = "AdaLoRA"
    gated = True
    Options = AdaLoRAOptions

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        alpha = self.options.alpha if self.options.alpha is not None else self.options.rank
        with torch.no_grad():
            for a in self.adapters.values():
                a.scale = alpha / (a.rank + PEFT_EPS)
                a.A.normal_(0.0, 0.02, generator=ctx.generator)
                a.B.normal_(0.0, 0.02, generator=ctx.generator)
                a.w.zero_()
        o = self.options
        total = ctx.total_steps
        tinit, tfinal = round(o.tinit * total), round(o.tfinal * total)
        if tinit >= total - tfinal:
            raise ValueError(
                f"adalora: tinit {o.tinit} and tfinal {o.tfinal} of {total} steps leave no step to allocate in"
            )
        if total - tfinal < 2:  # the final allocation ranks by the EMAs of the steps before it
            raise ValueError(
                f"adalora: a task of {total} step(s) with tfinal {o.tfinal} has no step before its final allocation to "
                "estimate importance from; give the task more steps (train.iterations or epochs) or lower tfinal"
            )
        self.allocator = RankAllocator(self.adapters, o.target_r, total, tinit, tfinal, o.delta_t, o.beta1, o.beta2)
        return groups

    def extra_loss(self, ctx, batch, outputs):
        w = self.options.orth_reg_weight
        return w * orthogonal_regularizer(self.adapters) if w else None

    def before_optimizer_step(self, ctx):
        self.grads = self.allocator.gradients()

    def after_step(self, step, total_steps):
        # PEFT's update_and_allocate(global_step) takes the reference trainer's 0-based count: AdaLoRA's
        # NLU/src/transformers/trainer.py calls it with self.state.global_step before `global_step += 1`
        # (run_summarization_no_trainer.py likewise, before `completed_steps += 1`); the engine's step is 1-based
        self.budget = self.allocator.step(step - 1, self.grads)

    def step_metrics(self):
        return {**super().step_metrics(), "budget": float(getattr(self, "budget", 0))}

    def checkpoint_state(self):
        return self.allocator.state()

    def restore_checkpoint(self, state, step):
        self.allocator.load_state(state, next(iter(self.adapters.values())).A.device)


METHOD = AdaLoRA
