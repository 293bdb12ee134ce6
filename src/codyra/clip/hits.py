"""The one tally of a classification cell and the one place its fields are made: every path that
classifies a task's test images (a plain row, a routed row, RAIL, CoDyRA†, held-out accuracy)
counts its hits here and writes what the tally says, so a new field of a cell is added once."""

from __future__ import annotations

import torch

from codyra.store.cells import cell_record


class ClassHits:
    """Correct predictions and test images per class of one task, counted on the predictions'
    device (no wait for a GPU between batches). ``offset``: where the task's classes start in the
    label space the predictions index (0 when it is the task's own); ``space_classes``: that label
    space's size, the cell's ``num_classes``."""

    def __init__(self, task_classes: int, space_classes: int, offset: int = 0):
        if not 0 <= offset <= space_classes - task_classes:
            raise ValueError(
                f"a task of {task_classes} classes at offset {offset} does not fit a label space of {space_classes}"
            )
        self.task_classes, self.space_classes, self.offset = task_classes, space_classes, offset
        self.hits: torch.Tensor | None = None
        self.images: torch.Tensor | None = None

    def add(self, predicted: torch.Tensor, labels: torch.Tensor) -> None:
        """Count a batch: ``predicted`` label-space indices, ``labels`` the task's own class indices."""
        labels = labels.to(predicted.device, non_blocking=True)
        if self.hits is None:
            self.hits = torch.zeros(self.task_classes, dtype=torch.long, device=predicted.device)
            self.images = torch.zeros_like(self.hits)
        self.hits.index_add_(0, labels, (predicted == labels + self.offset).long())
        self.images.index_add_(0, labels, torch.ones_like(labels))

    @classmethod
    def in_space(cls, task, space) -> ClassHits:
        """The tally of ``task``'s images classified over ``space``, a label space holding its classes
        (``codyra.data.registry.label_space``)."""
        return cls(task.num_classes, len(space), space.offset(task.name))

    @property
    def total(self) -> int:
        return 0 if self.images is None else int(self.images.sum())

    @property
    def accuracy(self) -> float:
        """Top-1 accuracy over every image counted, in %."""
        if not self.total:
            raise ValueError("no test image was counted: the cell's test set is empty")
        return 100.0 * int(self.hits.sum()) / self.total

    def fields(self) -> dict:
        """The classification fields of a cell or held-out record."""
        return {"num_classes": self.space_classes, "num_samples": self.total}


def classification_cell(
    cfg: dict, method: str, seed, i: int, j: int, hits: ClassHits, started: float, **fields
) -> dict:
    """Cell A[i, j] of a classifying family from its tally; ``fields``: what a path adds (routing)."""
    return cell_record(
        cfg,
        method,
        seed,
        i,
        j,
        hits.accuracy,
        started,
        **hits.fields(),
        label_space=cfg["data"]["label_space"],
        **fields,
    )
