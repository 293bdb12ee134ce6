"""CL-LoRA (He et al., CVPR 2025; JiangpengHe/CL-LoRA ``models/cllora.py``,
``backbone/vit_cllora.py``, ``exps/*.json``) on CLIP's image tower; the text tower and the
backbone stay frozen (the stored update is empty).

What the reference does, as its scripts run it (``main.py exps/<dataset>.json``):

- **Task-shared LoRA** on Q and V (``msa [1, 0, 1]``) of the first half of the blocks
  (``general_pos [0..5]`` of ViT-B/16's 12): its down-projection is a random orthonormal
  matrix (``Adapter_lora``: QR of ``torch.rand(d, r)``), frozen; its up-projection starts at
  zero and keeps training through every task. No LoRA scaling.
- **Task-specific LoRA** on Q and V of the other blocks (``specfic_pos [6..11]``): a new pair
  per task (down random orthonormal, up zero, both trained), scaled per block and projection by
  the task's block weights (``use_block_weight``: a 3 x blocks parameter drawn from
  U(0.5, 1.5)), kept frozen after its task.
- From task 2 on, per batch: a **distillation** of the shared part, ``kd_ratio`` 5 x the soft
  cross-entropy at T = 2 (no T^2) between the features of the shared blocks alone (the first
  half of the tower, then its final norm) with the current shared LoRA and with the copy taken
  after the previous task, both through the current task's classifier; its gradient on the
  shared up-projections is **reassigned** row by row, each output row scaled by its L2 norm in
  the previous task's up-projection, normalised to mean 1 (``_init_train``). The cross-entropy
  adds 1e-4 x the mean |cosine| between this task's block weights and each earlier task's.
- **Inference** (``forward_test``, ``CosineLinearFeature.forward_diagonal``): every learned
  task's branch (the final shared LoRA, that task's specific LoRA and block weights) embeds
  the image; the classes of task k are scored by the cosine of branch k's feature alone.

On CLIP, ours: the classifier is CLIP's text embeddings of the classes (logit scale x cosine;
the reference trains a cosine classifier per task, its scale learnt from 1, and replaces it by
class prototypes; so the distillation's logits here are at CLIP's scale, 100), and
the classes of a task not learned yet are scored by the shared LoRA alone (``unseen_branch:
shared``: the model the next task starts from, its specific LoRA zero) or by the last learned
branch (``last``). The reference takes two SGD steps per batch (the reassigned distillation
gradient, then the cross-entropy's); the platform's loop takes one optimizer step on their sum.
Evaluation is the method's own (``routed_cells``, as the domain-predicting methods): a class's
score depends on its task's branch, so no single image embedding serves every class; each
cell records, as the reference's ``Task correct`` log, which task the argmax class belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.base import Method, freeze
from codyra.methods.cl_lora.losses import PROJECTIONS
from codyra.methods.options import MethodOptions, option

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class CLLoRAOptions(MethodOptions):
    rank: int = option(10, minimum=1, doc="LoRA rank (exps/vtab.json, inr.json, ina.json ffn_num 10; cifar.json 8)")
    projections: list[str] = option(
        ("q", "v"), min_items=1, doc="attention projections adapted (exps/*.json msa [1, 0, 1]: Q and V)"
    )
    shared_blocks: int | None = option(
        None,
        minimum=1,
        doc="the first blocks of the image tower carry the task-shared LoRA, the others task-specific ones; "
        "null = half the tower (exps/*.json general_pos [0..5], specfic_pos [6..11] of 12 blocks)",
    )
    kd_weight: float = option(5.0, minimum=0, doc="distillation weight (models/cllora.py kd_ratio = 5.)")
    temperature: float = option(2.0, exclusive_minimum=0, doc="distillation temperature (cllora.py Temperature = 2)")
    orth_weight: float = option(
        1e-4, minimum=0, doc="block-weight orthogonality weight (cllora.py loss += 0.0001 * orth_loss_specific)"
    )
    block_weights: bool = option(True, doc="per-task block weights on the specific LoRA (exps/*.json use_block_weight)")
    unseen_branch: str = option(
        "shared",
        choices=("shared", "last"),
        doc="ours (the reference has no unseen classes): score a not yet learned task's classes with the shared "
        "LoRA alone (shared) or with the last learned task's branch (last)",
    )

    def check(self):
        unknown = [p for p in self.projections if p not in PROJECTIONS]
        if unknown or len(set(self.projections)) != len(self.projections):
            return [
                ("projections", f"must be distinct items of {', '.join(PROJECTIONS)}, got {list(self.projections)}")
            ]
        return []


class CLLoRA(Method):
    kind = "cl_lora"
    families = ("clip",)
    paper_row = "CL-LoRA"
    group = "complementation"
    predicts_domain = True  # its own rows: each class scored by its task's branch (module docstring)
    Options = CLLoRAOptions

    @classmethod
    def daggered(cls, family) -> bool:
        return False  # the paper prints CL-LoRA without one (X-TAIL tables: codyra.tex lines 727, 750, 773)

    def setup(self, ctx):
        from codyra.methods.cl_lora.clip import attach
        from codyra.methods.cl_lora.losses import reassignment_weights

        freeze(ctx.model)
        self.task_index = ctx.task_index
        self.micro_batches = ctx.micro_batches_per_step
        self.lora = attach(ctx.model, self.options, ctx.previous_state, ctx.task_index, ctx.generator)
        self.lora.to(ctx.device)
        m = self.lora
        self.shared_up = {name: lora.B for name, lora in m.shared.items()}
        self.weights = (
            {name: reassignment_weights(m.teacher[name].B.detach()) for name in m.shared} if m.teacher else {}
        )
        branch = m.branches[-1]
        params = [*self.shared_up.values(), *(p for lora in branch.values() for p in (lora.A, lora.B))]
        if m.block_weights is not None:
            params.append(m.block_weights[-1])
        for p in params:
            p.requires_grad_(True)
        self.trainable = sum(p.numel() for p in params)
        self.pending: dict[str, torch.Tensor] = {}
        self.metrics: dict[str, torch.Tensor] = {}
        return [{"params": params, "weight_decay": ctx.weight_decay}]

    def extra_loss(self, ctx, batch, outputs):
        import torch

        from codyra.methods.cl_lora.clip import shared_logits
        from codyra.methods.cl_lora.losses import kd_loss, orthogonality, reassign

        m, o = self.lora, self.options
        if not m.teacher:  # task 1: the cross-entropy alone
            return None
        if o.kd_weight:
            student = shared_logits(ctx.model, m, batch["images"], outputs["text_features"], teacher=False)
            with torch.no_grad():
                teacher = shared_logits(ctx.model, m, batch["images"], outputs["text_features"], teacher=True)
            kd = o.kd_weight * kd_loss(student, teacher, o.temperature)
            names = list(self.shared_up)
            grads = torch.autograd.grad(kd, [self.shared_up[n] for n in names])
            for name, grad in zip(names, grads, strict=True):
                reassigned = reassign(grad, self.weights[name]) / self.micro_batches
                self.pending[name] = reassigned if name not in self.pending else self.pending[name] + reassigned
            self.metrics["kd_loss"] = kd.detach()
        if m.block_weights is None or not o.orth_weight:
            return None
        orth = orthogonality(list(m.block_weights[:-1]), m.block_weights[-1])
        self.metrics["orth_loss"] = orth.detach()
        return o.orth_weight * orth

    def before_optimizer_step(self, ctx):
        """Add the reassigned distillation gradient to the cross-entropy's."""
        for name, grad in self.pending.items():
            p = self.shared_up[name]
            p.grad = grad if p.grad is None else p.grad + grad
        self.pending = {}

    def step_metrics(self):
        return dict(self.metrics)

    def finish(self, model):
        from codyra.methods.cl_lora.clip import detach, stored_state
        from codyra.store.updates import TaskUpdate

        detach(model)
        self.state = stored_state(self.lora)
        stored = sum(t.numel() for t in self.state.values())
        summary = {
            "trainable_params": self.trainable,
            "stored_params": stored,
            "inference_extra_params": stored,  # the shared LoRA and every task's branch
            "branches": len(self.lora.branches),
        }
        return TaskUpdate("none"), summary

    def state_to_store(self):
        return self.state

    @classmethod
    def routed_cells(cls, row):
        from codyra.methods.cl_lora.clip import cl_lora_row

        return row.from_stored_state(cl_lora_row)


METHOD = CLLoRA
