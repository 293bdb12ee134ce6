"""HiDe-LoRA as the TRACE comparison runs it (ZinYY/TreeLoRA ``model/Regular/HideLoRA.py``, the
implementation behind the TRACE table's HiDeLoRA row): O-LoRA's recipe with its orthogonality
term replaced by a contrastive one. Per adapted matrix the rows of M = [A_prev; A_new] are
pushed apart:

    loss_m = cross_entropy(M M^T / 0.8, arange(rows))   (mean over rows)

summed over matrices, weighted lambda_1 = 0.5, plus O-LoRA's unsquared L2 term with
lambda_2 = 0 (the reference's defaults).

``previous_subspaces``: true (default) stacks the earlier tasks' A rows as O-LoRA does; false is
the reference code as run, whose ``lora_A`` has r_sum = 0 rows, so M = A_new alone. Not carried
over: HiDe-PET's task-identity inference and its task-adaptive prediction (the CLIP/ViT
class-incremental parts); the reference's single adapter trained through all tasks (each task
here learns its own LoRA, merged after the task like O-LoRA's).
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.olora import OLoRA, OLoRAOptions
from codyra.methods.options import option

TEMPERATURE = 0.8  # HideLoRA.py: sim = M M^T / 0.8


def contrastive_orthogonality_loss(previous_A: dict, adapters: dict, temperature: float = TEMPERATURE):
    import torch
    import torch.nn.functional as F

    terms = []
    for name, adapter in adapters.items():
        M = adapter.A if name not in previous_A else torch.cat([previous_A[name], adapter.A])
        sim = M @ M.T / temperature
        terms.append(F.cross_entropy(sim, torch.arange(sim.shape[0], device=sim.device)))
    return sum(terms[1:], terms[0])


@dataclass(frozen=True)
class HiDeLoRAOptions(OLoRAOptions):
    previous_subspaces: bool = option(True, doc="contrast with earlier tasks' A rows (false: the reference as run)")


class HiDeLoRA(OLoRA):
    kind = "hidelora"
    paper_row = "HiDeLoRA"
    Options = HiDeLoRAOptions

    def _previous_subspaces(self, ctx):
        return super()._previous_subspaces(ctx) if self.options.previous_subspaces else {}

    def kept_tasks(self) -> int:
        """The reference trains one adapter through the stream and keeps it unmerged: one LoRA."""
        return 1

    def orthogonality_term(self):
        return contrastive_orthogonality_loss(self.previous_A, self.adapters)


METHOD = HiDeLoRA
