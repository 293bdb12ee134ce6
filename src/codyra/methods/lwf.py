"""LwF on CLIP as ZSCL's MTIL code runs it (Thunderbeee/ZSCL, mtil/scripts/lwf.sh): full
fine-tuning plus distillation from the previous model theta_{i-1} in CLIP's image-text
logit space.

The distillation batch is its own draw of the current task's training images with the
evaluation transform (ZSCL builds the "reference dataset" from the training dataset with
``test_preprocess``); the texts are the current task's class prompts. Teacher and student
image features are scored against the *teacher's* text features, so the distillation
gradient reaches the image tower only (mtil/src/models/finetune.py, the ``ZSCL`` branch):

    current   = s * f_student(x) @ t_teacher^T        reference = s * f_teacher(x) @ t_teacher^T
    loss_LwF  = D(reference, current) + D(reference^T, current^T)      (--image_loss, --text_loss)

with D the soft-target cross-entropy at temperature T (``distillation``) and s the frozen
logit scale. LwF-VR (:mod:`codyra.methods.lwf_vr`) swaps the class prompts for random token
sequences; ZSCL (:mod:`codyra.methods.zscl`) distils from theta_0 on reference data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codyra.methods.full import FullFineTune
from codyra.methods.options import MethodOptions, option

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
class DistillOptions(MethodOptions):
    temperature: float = option(2.0, exclusive_minimum=0, doc="distillation temperature (ZSCL --T, mtil/src/args.py)")
    image_weight: float = option(1.0, minimum=0, doc="weight of the image->text rows (ZSCL --image_loss: 1)")
    text_weight: float = option(1.0, minimum=0, doc="weight of the text->image columns (ZSCL --text_loss: 1)")


def frozen_copy(model: nn.Module) -> nn.Module:
    """A teacher: a copy of ``model`` in eval mode that never trains."""
    import copy

    teacher = copy.deepcopy(model).eval()
    teacher.requires_grad_(False)
    return teacher


class LwF(FullFineTune):
    """Full fine-tuning + distillation from theta_{i-1} on the task's class prompts.

    Distils on the training batch itself (whose image features the task loss computes anyway),
    where ZSCL draws a second batch of the task's images with the evaluation transform: one
    teacher forward per step instead of a teacher and a student forward.
    """

    kind = "lwf"
    paper_row = "LwF"
    Options = DistillOptions

    def setup(self, ctx):
        self.teacher = frozen_copy(ctx.model)  # theta_{i-1} (task 1: theta_0, as ZSCL's lwf.sh)
        return super().setup(ctx)

    def teacher_text(self, teacher_outputs: dict):
        """The texts the logits range over, as the teacher encodes them: the task's class prompts."""
        return teacher_outputs["text_features"]

    def extra_loss(self, ctx, batch, outputs):
        import torch

        if "image_features" not in outputs:
            raise ValueError(f"method kind {self.kind!r} distils image-text logits: it needs an image-text model (CLIP)")
        with torch.no_grad():
            teacher = ctx.forward(self.teacher, batch)
        o = self.options
        scale = self.teacher.logit_scale.exp()  # frozen, so the student's too (ZSCL scores both with it)
        return clip_distillation(
            outputs["image_features"], teacher["image_features"], self.teacher_text(teacher), scale,
            o.temperature, o.image_weight, o.text_weight,
        )

    def finish(self, model):
        self.teacher = None
        return super().finish(model)


METHOD = LwF
