"""ZSCL (Zheng et al. 2023) as its MTIL code runs it (Thunderbeee/ZSCL, mtil/scripts/ZSCL.sh):
full fine-tuning with three constraints toward the pretrained model.

1. Distillation from theta_0 (``--ref-model`` unset: the zero-shot CLIP) on *reference data*:
   images of ``--ref-dataset ImageNet`` (train split, evaluation transform, one batch per step)
   scored against the text features of ``--ref-sentences conceptual_captions`` (every caption of
   the GCC validation file), both directions (``--image_loss --text_loss``), temperature 2;
   the same term as LwF (:func:`codyra.methods.lwf.clip_distillation`), other teacher and data.
   Here the reference data is the config entry ``data.reference``.
2. An L2 pull toward theta_{i-1}: ``--l2 1`` adds 1 * sum (theta - theta_{i-1})^2 over every
   parameter (``l2_loss``, reduction "sum").
3. Weight ensembling (``--we --avg_freq 100``): a running mean of the weights, initialised to
   theta_{i-1} and updated after steps 1, 101, 201, ... (``iteration % avg_freq == 0`` with
   0-based iterations) by ``merge_we``: avg <- (avg * n + theta) / (n + 1), n = merges so far.
   ZSCL's loop runs iterations 0..T (T + 1 steps, finetune.py line 180) and its last step has
   learning rate 0 (cosine schedule at its end); it merges after iteration T only when
   ``avg_freq`` divides T (line 310). Our step s is its iteration s - 1 and our step T stands for
   its last two: we merge after step T exactly when ``ensemble_every`` divides T (1,000 / 100:
   11 merges). The task's result is the running mean, not the last weights.

The task loss is label-smoothed as ZSCL.sh's ``--ls 0.2`` (option ``label_smoothing``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune
from codyra.methods.lwf import DistillOptions, ImageStream, KeyedImages, clip_distillation, frozen_copy
from codyra.methods.options import option

if TYPE_CHECKING:
    import torch

ENCODE_CHUNK = 256  # reference captions per teacher text forward (encoded once per task)
REFERENCE_STREAM = 0x2E5  # seed part of the reference batches, apart from the task's batch stream


def ensemble_due(step: int, total_steps: int, every: int) -> bool:
    """Whether the weight ensemble absorbs the weights after optimizer step ``step`` (1-based):
    ZSCL's ``iteration % avg_freq == 0`` for iterations 0..T, iteration s - 1 after our step s,
    its iteration T after our last step T."""
    if every < 1:
        raise ValueError(f"weight-ensembling interval must be >= 1 step, got {every}")
    return (step - 1) % every == 0 or (step == total_steps and total_steps % every == 0)


def merge_into_average_(average: Iterable[torch.Tensor], current: Iterable[torch.Tensor], count: int) -> None:
    """ZSCL's ``merge_we``: average <- (average * count + current) / (count + 1), in place.

    ``count`` is the number of the merge (ZSCL's ``we_n`` after its increment: 1 at the first),
    which is how many weights the average holds, its initial theta_{i-1} included; after k
    merges it weighs theta_{i-1} and each merged snapshot 1 / (k + 1).
    """
    if count < 1:
        raise ValueError(f"the first weight-ensemble merge has count 1, got {count}")
    for avg, cur in zip(average, current, strict=True):
        avg.mul_(count).add_(cur.detach().to(avg.dtype)).div_(count + 1)


def l2_penalty(params: Iterable[torch.Tensor], reference: Iterable[torch.Tensor]) -> torch.Tensor:
    """ZSCL's ``l2_loss``: sum over parameters of sum (theta - theta_ref)^2."""
    terms = [(p - r.to(p.dtype)).pow(2).sum() for p, r in zip(params, reference, strict=True)]
    if not terms:
        raise ValueError("l2_penalty needs at least one parameter")
    return sum(terms[1:], terms[0])


@dataclass(frozen=True)
class ZSCLOptions(DistillOptions):
    l2: float = option(1.0, minimum=0, doc="weight of sum (theta - theta_{i-1})^2 (ZSCL --l2 1)")
    ensemble_every: int | None = option(
        100, minimum=1, doc="weight-ensembling interval in steps (ZSCL --we --avg_freq 100); null: off"
    )
    reference_batch_size: int | None = option(
        None, minimum=1, doc="reference images per step; null: train.batch_size (ZSCL)"
    )


class ZSCL(FullFineTune):
    kind = "zscl"
    families = ("clip",)
    paper_row = "ZSCL"
    Options = ZSCLOptions
    reads_reference_data = True

    def setup(self, ctx):
        import torch

        from codyra.data.reference import load_reference
        from codyra.methods._distillation.clip import text_embeddings

        groups = super().setup(ctx)
        o, device = self.options, ctx.device
        bundle = ctx.family.pretrained(ctx.cfg)  # theta_0: ZSCL's reference model is the zero-shot CLIP
        self.teacher = frozen_copy(bundle.model.to(device))
        reference = load_reference(ctx.cfg, bundle.image, ctx.method_name)
        tokens = bundle.tokenizer(reference.texts).to(device)
        with torch.no_grad():  # theta_0 is frozen: ZSCL re-encodes the same captions every step
            self.reference_text = text_embeddings(self.teacher, tokens, ENCODE_CHUNK)
        batch_size = o.reference_batch_size or ctx.train["batch_size"]
        images = KeyedImages(reference.images, labelled=False)
        self.reference = ImageStream(
            images,
            batch_size,
            ctx.seed,
            REFERENCE_STREAM,
            ctx.task_index,
            ctx.total_steps,
            ctx.cfg["data"]["num_workers"],
        )
        self.anchor = [p.detach().clone() for p in self.params.values()]  # theta_{i-1}, ZSCL's l2_model
        self.average = [p.detach().clone() for p in self.params.values()]  # ZSCL's we_model
        self.merges = 0
        return groups

    def extra_loss(self, ctx, batch, outputs):
        import torch

        from codyra.methods._distillation.clip import image_embeddings, logit_scale

        o = self.options
        images = self.reference.next(ctx.device)
        student = image_embeddings(ctx.model, images)
        with torch.no_grad():
            teacher = image_embeddings(self.teacher, images)
        scale = logit_scale(self.teacher)
        loss = clip_distillation(
            student, teacher, self.reference_text, scale, o.temperature, o.image_weight, o.text_weight
        )
        if o.l2:
            loss = loss + o.l2 * l2_penalty(self.params.values(), self.anchor)
        smoothing = super().extra_loss(ctx, batch, outputs)
        return loss if smoothing is None else loss + smoothing

    def after_step(self, step, total_steps):
        every = self.options.ensemble_every
        if every is not None and ensemble_due(step, total_steps, every):
            self.merges += 1
            merge_into_average_(self.average, self.params.values(), self.merges)

    def step_metrics(self):
        return {"ensemble_merges": float(self.merges)}

    def checkpoint_state(self):
        import torch

        state = {f"average.{n}": a for n, a in zip(self.params, self.average, strict=True)}
        return {**state, "merges": torch.tensor(self.merges)}

    def restore_checkpoint(self, state, step):
        import torch

        with torch.no_grad():
            for n, a in zip(self.params, self.average, strict=True):
                a.copy_(state[f"average.{n}"])
        self.merges = int(state["merges"])
        self.reference.resume(step)

    def finish(self, model):
        import torch

        if self.options.ensemble_every is not None:  # ZSCL keeps the ensemble, not the last weights
            with torch.no_grad():
                for p, a in zip(self.params.values(), self.average, strict=True):
                    p.copy_(a)
        self.teacher = self.anchor = self.average = self.reference = None
        return super().finish(model)

    @classmethod
    def footprint(cls, options, task_index):
        """Full fine-tuning's, with theta_0 as teacher, the fp32 anchor and weight average on the device, the
        reference image stream; a step adds the reference batch's student pass (3 forwards) and teacher forward."""
        from dataclasses import replace

        full = super().footprint(options, task_index)
        return replace(full, device_bytes=8.0, teachers=1, extra_loaders=1, step_cost=(3 + 3 + 1) / 2)


METHOD = ZSCL
