"""AdaLoRA (Zhang et al. 2023) as PEFT implements it (``peft/tuners/adalora``, PEFT >= 0.15),
reproduced on our adapter and tested against PEFT on an ``nn.Linear``.

- SVD-style update: dW = B diag(E) A * alpha / (r + 1e-5) (``SVDLinear``: ``lora_B @ (lora_A *
  lora_E) * scaling / (ranknum + 1e-5)``): our adapter with gates w = E and that scale; E starts
  at 0, A and B at N(0, 0.02) (``reset_lora_parameters``).
- Orthogonal regularisation added to the loss: orth_reg_weight * mean over the A and B matrices
  of ||A A^T - I||_F and ||B^T B - I||_F (``AdaLoraModel.forward``; unsquared Frobenius norms).
- Budget allocation after every optimizer step, with the gradients still present
  (``update_and_allocate``): sensitivity |p * grad| smoothed by EMAs (beta1, beta2), score =
  smoothed sensitivity x uncertainty; the score of component i is s(E_i) + mean s(A_i,:) +
  mean s(B_:,i); the cubic budget schedule from init_bgt = r x #matrices to target_r x #matrices
  between tinit and total - tfinal; every deltaT steps the gates of the init_bgt - budget
  lowest-scoring components (ties included) are set to 0; from total - tfinal on, the final
  pattern is re-applied after every step. ``tinit`` and ``tfinal`` are fractions of the task's
  steps here (PEFT takes step counts; the task length varies by benchmark).
"""

from __future__ import annotations

from typing import ClassVar

from codyra.methods.lora import LoRA

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

    def update_ipt(self) -> None:
        import torch

        with torch.no_grad():
            for key, p in self._params():
                if p.grad is None:
                    raise RuntimeError(f"adalora: {key} has no gradient when the budget is allocated")
                ipt = (p * p.grad).abs()
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

    def step(self, step: int) -> int:
        """PEFT's ``AdaLoraModel.update_and_allocate(step)``, after the optimizer step; returns the budget."""
        final = self.total - self.tfinal
        if step < final:
            self.update_ipt()
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


class AdaLoRA(LoRA):
    kind = "adalora"
    gated = True
    defaults: ClassVar[dict] = {
        **LoRA.defaults,
        "target_r": 8,  # AdaLoraConfig default
        "tinit": 0.1,  # fractions of the task's steps (PEFT's docstring example: 10 / 20 of 100)
        "tfinal": 0.2,
        "delta_t": 1,  # AdaLoraConfig defaults from here on
        "beta1": 0.85,
        "beta2": 0.85,
        "orth_reg_weight": 0.5,
    }

    def __init__(self, spec):
        super().__init__(spec)
        o = self.options
        if not 0 < o["target_r"] < o["rank"]:
            raise ValueError(f"adalora: target_r must lie in [1, rank - 1] = [1, {o['rank'] - 1}], got {o['target_r']}")
        if not (o["tinit"] >= 0 and o["tfinal"] >= 0 and o["tinit"] + o["tfinal"] < 1):
            raise ValueError(
                f"adalora: need tinit, tfinal >= 0 and tinit + tfinal < 1 (fractions of the steps), got {o['tinit']}, {o['tfinal']}"
            )

    def setup(self, ctx):
        import torch

        groups = super().setup(ctx)
        alpha = self.options["alpha"] if self.options["alpha"] is not None else self.options["rank"]
        with torch.no_grad():
            for a in self.adapters.values():
                a.scale = alpha / (a.rank + PEFT_EPS)
                a.A.normal_(0.0, 0.02, generator=ctx.generator)
                a.B.normal_(0.0, 0.02, generator=ctx.generator)
                a.w.zero_()
        self.allocator = None
        return groups

    def extra_loss(self, ctx, batch, outputs):
        w = self.options["orth_reg_weight"]
        return w * orthogonal_regularizer(self.adapters) if w else None

    def after_step(self, step, total_steps):
        if self.allocator is None:
            o = self.options
            self.allocator = RankAllocator(
                self.adapters,
                o["target_r"],
                total_steps,
                round(o["tinit"] * total_steps),
                round(o["tfinal"] * total_steps),
                o["delta_t"],
                o["beta1"],
                o["beta2"],
            )
        self.budget = self.allocator.step(step)

    def step_metrics(self):
        return {**super().step_metrics(), "budget": float(getattr(self, "budget", 0))}


METHOD = AdaLoRA
