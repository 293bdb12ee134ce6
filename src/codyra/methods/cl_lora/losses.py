"""CL-LoRA's defining computations (``codyra.methods.cl_lora.method``), on tensors: the
distillation term, the gradient reassignment and the block-weights' orthogonality
(JiangpengHe/CL-LoRA ``models/cllora.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the method module, which config validation reads: torch stays lazy
    import torch

PROJECTIONS = ("q", "k", "v")  # the attention projections, in the reference's msa order


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """The reference's ``_KD_loss``: -sum(softmax(teacher / T) * log_softmax(student / T)) / batch
    (no T^2 factor)."""
    return -(teacher.div(temperature).softmax(dim=1) * student.div(temperature).log_softmax(dim=1)).sum() / len(student)


def reassignment_weights(previous_up: torch.Tensor) -> torch.Tensor:
    """(out,) the gradient reassignment of a shared up-projection (out x rank): each row's L2 norm
    in the previous task's up-projection, scaled to mean 1 (``cllora.py``: ``len(w) * w / sum(w)``).
    An all-zero previous up-projection (nothing learned) gives no importance: every weight is 1,
    where the reference would divide by zero."""
    norms = previous_up.float().norm(dim=1)
    total = norms.sum()
    if total == 0:
        return norms.new_ones(norms.shape)
    return len(norms) * norms / total


def reassign(grad: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The distillation gradient of a shared up-projection (out x rank), each row times its weight."""
    return weights.to(grad)[:, None] * grad


def orthogonality(previous: list[torch.Tensor], current: torch.Tensor, epsilon: float = 1e-8) -> torch.Tensor:
    """``compute_orthogonality_loss``: the mean over earlier tasks of |cos| between the flattened
    block weights, each divided by its norm + ``epsilon``."""
    unit = current.flatten() / (current.norm() + epsilon)
    terms = [(unit * (p.flatten() / (p.norm() + epsilon))).sum().abs() for p in previous]
    return sum(terms) / len(terms)
