"""HiDe-LoRA as the TRACE comparison runs it (ZinYY/TreeLoRA ``model/Regular/HideLoRA.py``, the
implementation behind the TRACE table's HiDeLoRA row): O-LoRA's recipe with its orthogonality
term replaced by a contrastive one. Per adapted matrix the rows of M = [A_prev; A_new] are
pushed apart:

    loss_m = cross_entropy(M M^T / 0.8, arange(rows))   (mean over rows)

summed over matrices, weighted lambda_1 = 0.5, plus O-LoRA's unsquared L2 term with
lambda_2 = 0 (the reference's defaults).

As the reference runs it (its ``training/main.py`` wraps the model with peft once): one adapter
(``loranew``) trained through all tasks, never merged or re-initialised (``adapter: stream``,
:class:`~codyra.methods.seqlora.CarriedAdapter`), and its ``lora_A`` of r_sum = 0 rows, so
M = A_new alone (``previous_subspaces: false``); one optimizer through all tasks is
``train.carry_optimizer``. Our variant, ``adapter: per_task_merge``: each task learns its own
LoRA, merged after the task like O-LoRA's, where ``previous_subspaces: true`` stacks the
earlier tasks' A rows as O-LoRA does. Not carried over: HiDe-PET's task-identity inference and
its task-adaptive prediction (the CLIP/ViT class-incremental parts).
"""

from __future__ import annotations

from dataclasses import dataclass

from codyra.methods.olora import OLoRA, OLoRAOptions
from codyra.methods.options import option
from codyra.methods.seqlora import ADAPTER_MODES, CarriedAdapter

TEMPERATURE = 0.8  # HideLoRA.py: sim = M M^T / 0.8


def contrastive_orthogonality_loss(previous_A: dict, adapters: dict, temperature: float = TEMPERATURE):
    import torch
    import torch.nn.functional as F

    terms = []
    for name, adapter in adapters.items():
        M = adapter.A if name not in previous_A else torch.cat([previous_A[name].to(adapter.A), adapter.A])
        sim = M @ M.T / temperature
        terms.append(F.cross_entropy(sim, torch.arange(sim.shape[0], device=sim.device)))
    return sum(terms[1:], terms[0])


@dataclass(frozen=True)
class HiDeLoRAOptions(OLoRAOptions):
    adapter: str = option(
        "stream",
        choices=ADAPTER_MODES,
        doc="stream: one adapter through all tasks (the reference); "
        "per_task_merge: ours, a fresh LoRA merged after each task",
    )
    previous_subspaces: bool = option(
        False, doc="contrast with earlier tasks' A rows (per_task_merge only); false: the reference as run"
    )

    def check(self):
        if self.previous_subspaces and self.adapter == "stream":
            return [
                (
                    "previous_subspaces",
                    (
                        "stacks earlier tasks' LoRAs, which adapter: stream does not keep (one adapter continues); "
                        "use adapter: per_task_merge"
                    ),
                )
            ]
        return super().check()


class HiDeLoRA(CarriedAdapter, OLoRA):
    kind = "hidelora"
    families = ("clip", "causal_lm")
    paper_row = "HiDeLoRA"
    Options = HiDeLoRAOptions

    def carries(self) -> bool:
        return self.options.adapter == "stream"

    def _previous_subspaces(self, ctx):
        return super()._previous_subspaces(ctx) if self.options.previous_subspaces else {}

    def kept_tasks(self) -> int:
        """The reference trains one adapter through the stream and keeps it unmerged: one LoRA."""
        return 1

    def orthogonality_term(self):
        return contrastive_orthogonality_loss(self.previous_A, self.adapters)


METHOD = HiDeLoRA
