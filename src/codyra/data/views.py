"""Dataset views that `codyra.data.tasks` consumers index: lazy, picklable, RNG-free.

Each item is decoded when it is asked for, so a DataLoader with workers streams even the
largest test sets; the views hold only keys, labels and picklable transforms.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from codyra.data.samples import Samples
from codyra.data.transforms import EvalTransform, TrainTransform


class _View(Dataset):
    """Images of a split, loaded lazily per item (so DataLoader workers stream large test sets)."""

    def __init__(self, samples: Samples, transform):
        self.samples = samples
        self.transform = transform

    @property
    def labels(self) -> tuple[int, ...]:
        return self.samples.labels

    def __len__(self) -> int:
        return len(self.samples)


class EvalView(_View):
    """Indexed by int; returns (float tensor [3, H, W], int label)."""

    transform: EvalTransform

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.samples.images.load(self.samples.keys[index])
        return self.transform(image), self.samples.labels[index]


class TrainView(_View):
    """Indexed by (index, aug_seed); the augmentation is a function of aug_seed alone."""

    transform: TrainTransform

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int]:
        index, aug_seed = key
        image = self.samples.images.load(self.samples.keys[index])
        generator = torch.Generator().manual_seed(aug_seed)
        return self.transform(image, generator), self.samples.labels[index]
