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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


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
