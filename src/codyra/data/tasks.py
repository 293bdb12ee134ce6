"""The task abstraction every benchmark provides to training and evaluation.

A classification task is a set of class names, a template ensemble and two datasets.
Training uses ``templates[0]``; evaluation averages the L2-normalised embeddings of all
templates (CLIP's prompt ensembling).

Training datasets are indexed by ``(index, aug_seed)`` pairs: augmentation randomness
comes from ``aug_seed`` through an explicit ``torch.Generator``, never from a global RNG,
so a resumed run sees exactly the images an uninterrupted run would, and jobs that run
as threads of one process cannot disturb each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class TrainDataset(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, key: tuple[int, int]):  # -> (image tensor [C,H,W], label)
        ...


class EvalDataset(Protocol):
    def __len__(self) -> int: ...

    def __getitem__(self, index: int):  # -> (image tensor [C,H,W], label)
        ...


@dataclass(frozen=True)
class ImageConfig:
    """What a benchmark's transforms need to know about the model's image input."""

    size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


@dataclass(frozen=True)
class ClassificationTask:
    name: str
    classnames: tuple[str, ...]
    templates: tuple[str, ...]
    train_set: Callable[[], TrainDataset]
    test_set: Callable[[], EvalDataset]
    # the training images under the evaluation transform (LwF's distillation batches, as ZSCL
    # reads the task's training set with its test preprocessing)
    train_eval_set: Callable[[], EvalDataset]
    # images in the training split a few-shot subset was drawn from (None: train_set is that split)
    full_train_size: int | None = None

    def __post_init__(self):
        if not self.classnames:
            raise ValueError(f"task {self.name!r} has no class names")
        if not self.templates or any("{}" not in t for t in self.templates):
            raise ValueError(f"task {self.name!r}: every template must contain '{{}}'")

    @property
    def num_classes(self) -> int:
        return len(self.classnames)

    def prompts(self, template: str) -> list[str]:
        return [template.format(c) for c in self.classnames]
