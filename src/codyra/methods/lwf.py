"""LwF on CLIP as ZSCL's MTIL code runs it (Thunderbeee/ZSCL, mtil/scripts/lwf.sh): full
fine-tuning plus distillation from the previous model theta_{i-1} in CLIP's image-text
logit space.

The distillation batch is its own draw of the current task's training images with the
evaluation transform: lwf.sh passes ``--ref-dataset <current dataset>``, which
mtil/src/models/finetune.py (lines 140-145) builds with ``test_preprocess`` and reads through
its own shuffled ``train_loader`` iterator (``ref_iter``, lines 234-246, restarted when
exhausted), one batch of ``--batch-size`` per step beside the training batch. The texts are the
current task's class prompts (no ``--ref-sentences``: lines 172-175). Teacher and student
image features are scored against the *teacher's* text features, so the distillation
gradient reaches the image tower only (finetune.py lines 248-290, the ``ZSCL`` branch):

    current   = s * f_student(x) @ t_teacher^T        reference = s * f_teacher(x) @ t_teacher^T
    loss_LwF  = D(reference, current) + D(reference^T, current^T)      (--image_loss, --text_loss)

with D the soft-target cross-entropy at temperature T (``distillation``) and s the frozen
logit scale. The task loss is label-smoothed as the scripts' ``--ls 0.2`` (option
``label_smoothing``). LwF-VR (:mod:`codyra.methods.lwf_vr`) swaps the class prompts for random
token sequences; ZSCL (:mod:`codyra.methods.zscl`) distils from theta_0 on reference data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune, FullOptions
from codyra.methods.options import option

if TYPE_CHECKING:
    import torch
    from torch import nn


def soft_cross_entropy(teacher: torch.Tensor, student: torch.Tensor, temperature: float) -> torch.Tensor:
    """ZSCL's ``distillation(t, s, T)`` (mtil/src/models/helpers.py): the cross-entropy of
    softmax(student / T) against the targets softmax(teacher / T), row-wise, averaged over rows,
    times T^2. It differs from KL(teacher || student) by the teacher's entropy, a constant:
    the same gradient."""
    import torch.nn.functional as F

    targets = F.softmax(teacher / temperature, dim=1)
    return F.cross_entropy(student / temperature, targets, reduction="mean") * temperature**2


def clip_distillation(
    student_image: torch.Tensor,
    teacher_image: torch.Tensor,
    teacher_text: torch.Tensor,
    logit_scale: torch.Tensor | float,
    temperature: float,
    image_weight: float = 1.0,
    text_weight: float = 1.0,
) -> torch.Tensor:
    """The distillation term of ZSCL's MTIL code, features L2-normalised.

    ``image_weight`` scales the image->text rows (``--image_loss``), ``text_weight`` the
    text->image columns (``--text_loss``); ZSCL's scripts use 1 and 1 (``--weight_adjust``: 0.5).
    """
    current = logit_scale * student_image @ teacher_text.T
    reference = logit_scale * teacher_image @ teacher_text.T
    loss = current.new_zeros(())
    if image_weight:
        loss = loss + image_weight * soft_cross_entropy(reference, current, temperature)
    if text_weight:
        loss = loss + text_weight * soft_cross_entropy(reference.T, current.T, temperature)
    return loss


@dataclass(frozen=True)
class DistillOptions(FullOptions):
    temperature: float = option(2.0, exclusive_minimum=0, doc="distillation temperature (ZSCL --T, mtil/src/args.py)")
    image_weight: float = option(1.0, minimum=0, doc="weight of the image->text rows (ZSCL --image_loss: 1)")
    text_weight: float = option(1.0, minimum=0, doc="weight of the text->image columns (ZSCL --text_loss: 1)")


def frozen_copy(model: nn.Module) -> nn.Module:
    """A teacher: a copy of ``model`` in eval mode that never trains."""
    import copy

    teacher = copy.deepcopy(model).eval()
    teacher.requires_grad_(False)
    return teacher


class KeyedImages:
    """A dataset indexed by the (index, seed) keys of :class:`codyra.steps.batches.StepBatches`, giving
    the image alone (``labelled``: its items are (image, label) pairs)."""

    def __init__(self, dataset, labelled: bool):
        self.dataset, self.labelled = dataset, labelled

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, key):
        item = self.dataset[key[0]]
        return item[0] if self.labelled else item


class ImageStream:
    """Batches of images drawn apart from the task's training batches, one per optimizer step:
    shuffled epoch after epoch (ZSCL's ``ref_iter``, restarted when exhausted), a pure function of
    (seed, stream, task, step), so a resumed job draws what an uninterrupted one drew."""

    def __init__(
        self, images: KeyedImages, batch_size: int, seed: int, stream: int, task: int, total: int, workers: int
    ):
        from codyra.steps.batches import derive_seed

        self.images, self.batch_size, self.workers = images, batch_size, workers
        self.seed, self.task, self.total = derive_seed(seed, stream), task, total
        self.step, self._batches = 0, None

    def next(self, device) -> torch.Tensor:
        """The images of the next step."""
        import torch

        from codyra.steps.batches import StepBatches

        if self._batches is None:  # built at the first step after setup or a resume
            sampler = StepBatches(len(self.images), self.batch_size, self.seed, self.task, self.step, self.total)
            self._batches = iter(
                torch.utils.data.DataLoader(self.images, batch_sampler=sampler, num_workers=self.workers)
            )
        self.step += 1
        return next(self._batches).to(device, non_blocking=True)

    def resume(self, step: int) -> None:
        self.step, self._batches = step, None


DISTILL_STREAM = 0x1F3  # seed part of LwF's distillation batches, apart from the task's batch stream


@dataclass(frozen=True)
class LwFOptions(DistillOptions):
    distill_batch_size: int | None = option(
        None, minimum=1, doc="distillation images per step; null: train.batch_size (ZSCL: --batch-size for both)"
    )


class LwF(FullFineTune):
    """Full fine-tuning + distillation from theta_{i-1} on the task's class prompts, over a second
    batch of the task's training images under the evaluation transform (ZSCL's ``ref_iter``)."""

    kind = "lwf"
    families = ("clip",)
    paper_row = "LwF"
    Options = LwFOptions

    def setup(self, ctx):
        self.teacher = frozen_copy(ctx.model)  # theta_{i-1} (task 1: theta_0, as ZSCL's lwf.sh)
        batch_size = self.options.distill_batch_size or ctx.train["batch_size"]
        images = KeyedImages(ctx.task.train_eval_set(), labelled=True)
        self.distill = ImageStream(
            images,
            batch_size,
            ctx.seed,
            DISTILL_STREAM,
            ctx.task_index,
            ctx.total_steps,
            ctx.cfg["data"]["num_workers"],
        )
        return super().setup(ctx)

    def teacher_text(self, teacher_outputs: dict):
        """The texts the logits range over, as the teacher encodes them: the task's class prompts."""
        return teacher_outputs["text_features"]

    def extra_loss(self, ctx, batch, outputs):
        import torch

        from codyra.methods._distillation.clip import image_embeddings, logit_scale

        images = self.distill.next(ctx.device)
        with torch.no_grad():
            teacher = ctx.forward(self.teacher, {"images": images})
        student = image_embeddings(ctx.model, images)
        o = self.options
        scale = logit_scale(self.teacher)  # frozen, so the student's too (ZSCL scores both with it)
        loss = clip_distillation(
            student,
            teacher["image_features"],
            self.teacher_text(teacher),
            scale,
            o.temperature,
            o.image_weight,
            o.text_weight,
        )
        smoothing = super().extra_loss(ctx, batch, outputs)
        return loss if smoothing is None else loss + smoothing

    def restore_checkpoint(self, state, step):
        self.distill.resume(step)

    def finish(self, model):
        self.teacher = self.distill = None
        return super().finish(model)

    @classmethod
    def footprint(cls, options, task_index):
        """Full fine-tuning's, with theta_{i-1} as teacher and the distillation image stream; a step adds the
        distillation batch's student pass (3 forwards) and teacher forward."""
        from dataclasses import replace

        full = super().footprint(options, task_index)
        return replace(full, teachers=1, extra_loaders=1, step_cost=(3 + 3 + 1) / 2)


METHOD = LwF
