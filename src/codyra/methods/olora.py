"""O-LoRA (Wang et al. 2023): each task learns a new fixed-rank LoRA kept orthogonal to the
earlier tasks' LoRA subspaces; earlier LoRAs are frozen.

As the reference trains it (cmnfriend/O-LoRA ``src/uie_trainer_lora.py`` ``training_step``;
the same terms in BeyonderXX/TRACE ``model/Regular/O_LoRA.py``):

    loss = task_loss + lambda_1 * sum_m |A_prev^m A_new^m^T|.sum()
                     + lambda_2 * sum_m (||A_new^m||_F + ||B_new^m||_F)

with A_prev^m the earlier tasks' down-projections of matrix m stacked row-wise (``lora_A``,
r_sum x k) and the norms *not* squared (``torch.norm(param, p=2)``). Both references run
lambda_1 = 0.5 and lambda_2 = 0 (``scripts/order_*.sh``, ``train_llama_lora.sh``).
ZinYY/TreeLoRA's ``model/Regular/O_LoRA.py`` computes the same terms but has the per-task
merge into ``lora_A``/``lora_B`` commented out (end of ``train_one_task``), so its O-LoRA trains
one adapter through the stream against an empty ``lora_A``: effectively SeqLoRA. This method
follows TRACE and cmnfriend.

The reference keeps every earlier LoRA beside the backbone, unmerged (``lora_A``/``lora_B`` of
rank r_sum plus ``loranew``). Its forward is linear in them, so merging each task's LoRA into
the backbone gives the same function; we merge (theta_i = theta_0 + updates 1..i, as every
method) and report as ``inference_extra_params`` the earlier tasks' LoRAs the reference keeps
beside the current one, (i - 1) x one task's A and B, as the paper's cost counts them (App.
"Compute cost": O-LoRA trains 4.4M and keeps 44.32M, 10 x 4.43M after 5-shot MTIL's 11 tasks).
The earlier A rows the loss needs are this method's stored state (``{target}.A``, all tasks so
far), so task i+1 and any rebuild read them from files.
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.lora import LoRA, LoRAOptions
from codyra.methods.options import option


def orthogonality_loss(previous_A: dict, adapters: dict):
    """sum over targets with earlier subspaces of |A_prev A_new^T|, summed over entries; A_prev (kept
    in fp32) in the new A's dtype, which DeepSpeed's bf16 casts after ``setup``."""
    terms = [
        (previous_A[name].to(adapters[name].A) @ adapters[name].A.T).abs().sum()
        for name in adapters
        if name in previous_A
    ]
    return sum(terms[1:], terms[0]) if terms else None


def l2_loss(adapters: dict):
    """sum of the (unsquared) Frobenius norms of every new A and B."""
    terms = [p.norm() for a in adapters.values() for p in (a.A, a.B)]
    return sum(terms[1:], terms[0])


@dataclass(frozen=True)
class OLoRAOptions(LoRAOptions):
    lambda_orth: float = option(0.5, minimum=0, doc="weight of sum |A_prev A_new^T| (O-LoRA lamda_1)")
    lambda_l2: float = option(0.0, minimum=0, doc="weight of the unsquared L2 norms of the new A, B (lamda_2)")


class OLoRA(LoRA):
    kind = "olora"
    families = ("clip", "causal_lm")
    paper_row = "O-LoRA"
    Options = OLoRAOptions

    def setup(self, ctx):
        groups = super().setup(ctx)
        self.previous_A = self._previous_subspaces(ctx)
        self.task_index = ctx.task_index
        return groups

    def _previous_subspaces(self, ctx) -> dict:
        """Earlier tasks' stacked A rows per target, from task i-1's stored state."""
        if ctx.task_index == 1:
            return {}
        state = ctx.previous_state
        if not state:
            raise ValueError(
                f"{self.kind}: task {ctx.task_index - 1}'s method state (earlier LoRA subspaces) is missing; "
                f"retrain task {ctx.task_index - 1} of this method"
            )
        previous = {}
        for t in self.targets:
            A = state.get(f"{t.name}.A")
            if A is None or A.shape[1] != t.in_features:
                raise ValueError(
                    f"{self.kind}: task {ctx.task_index - 1}'s state has no subspace of width {t.in_features} "
                    f"for {t.name!r}: was it trained with this placement? Retrain it"
                )
            previous[t.name] = A.to(ctx.device)
        return previous

    def orthogonality_term(self):
        """The unweighted orthogonality term (None when there is nothing to be orthogonal to)."""
        return orthogonality_loss(self.previous_A, self.adapters) if self.previous_A else None

    def penalty(self):
        """The method's term added to the task loss (None when it is zero)."""
        o = self.options
        ortho = self.orthogonality_term() if o.lambda_orth else None
        loss = None if ortho is None else o.lambda_orth * ortho
        if o.lambda_l2:
            l2 = o.lambda_l2 * l2_loss(self.adapters)
            loss = l2 if loss is None else loss + l2
        return loss

    def extra_loss(self, ctx, batch, outputs):
        return self.penalty()

    def state_to_store(self):
        import torch

        state = {}
        for name, adapter in self.adapters.items():
            new = adapter.A.detach().float().cpu()
            old = self.previous_A.get(name)
            state[f"{name}.A"] = new.clone() if old is None else torch.cat([old.float().cpu(), new])
        return state

    def kept_tasks(self) -> int:
        """How many tasks' LoRAs the reference keeps at inference besides the task's trainable one:
        the i - 1 earlier tasks' (the paper's 44.32M = 10 x 4.43M after 11 tasks)."""
        return self.task_index - 1

    def finish(self, model):
        update, summary = super().finish(model)
        per_task = sum(a.rank * (a.in_features + a.out_features) for a in self.adapters.values())
        return update, {**summary, "inference_extra_params": self.kept_tasks() * per_task}


METHOD = OLoRA
