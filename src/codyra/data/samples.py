"""Lists of (image key, label) and the picklable objects that turn a key into an image.

A key is a path relative to the data root (file datasets) or an index into a torchvision
dataset held in memory (CIFAR100, MNIST). Nothing here decodes an image until asked, so
views over 20k-image test sets stream through DataLoader workers.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from PIL import Image


class ImageSource(Protocol):
    def load(self, key) -> Image.Image: ...

    def missing(self, keys) -> list[str]: ...

    def undecodable(self, keys, done) -> list[str]:
        """The images among ``keys`` that ``load`` cannot decode, each with its error;
        ``done(n)`` after every n decoded (a progress bar)."""


@dataclass(frozen=True)
class ImageFiles:
    """Images stored as files under the data root; keys are POSIX paths relative to it."""

    root: Path

    def load(self, key: str) -> Image.Image:
        with Image.open(self.root / key) as image:
            return image.convert("RGB")

    def missing(self, keys) -> list[str]:
        return [str(self.root / key) for key in keys if not (self.root / key).is_file()]

    def undecodable(self, keys, done) -> list[str]:
        def failure(key: str) -> str | None:
            try:
                self.load(key)
            except (
                OSError,
                SyntaxError,
                ValueError,
                Image.DecompressionBombError,
            ) as err:  # what PIL raises on bad data
                return f"{self.root / key} ({type(err).__name__}: {err})"
            return None

        failures = []
        with ThreadPoolExecutor() as pool:  # PIL decodes without the GIL
            for result in pool.map(failure, keys):
                done(1)
                if result is not None:
                    failures.append(result)
        return failures


@dataclass(frozen=True)
class TorchvisionImages:
    """Images held in memory by a torchvision dataset; keys are its indices."""

    dataset: object

    def load(self, key: int) -> Image.Image:
        image, _ = self.dataset[key]
        return image.convert("RGB")

    def missing(self, keys) -> list[str]:
        return []

    def undecodable(self, keys, done) -> list[str]:
        done(len(keys))  # torchvision decoded the whole dataset into memory when it was built
        return []


@dataclass(frozen=True)
class Samples:
    images: ImageSource
    keys: tuple
    labels: tuple[int, ...]

    def __post_init__(self):
        if len(self.keys) != len(self.labels):
            raise ValueError(f"{len(self.keys)} keys but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.keys)

    def subset(self, positions) -> Samples:
        return Samples(
            self.images,
            tuple(self.keys[p] for p in positions),
            tuple(self.labels[p] for p in positions),
        )

    def fingerprint(self) -> str:
        """Identifies exactly which images, labels and order this list holds."""
        payload = json.dumps([list(self.keys), list(self.labels)], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()


# ZSCL's split of datasets without an official one: torch.utils.data.random_split with
# lengths [int(0.8 n), n - int(0.8 n)] and a generator seeded with 42.
SPLIT_SEED = 42
SPLIT_TRAIN_FRACTION = 0.8


def random_split_80_20(samples: Samples) -> tuple[Samples, Samples]:
    """Deterministic 80/20 split, independent of the order the file system listed files in.

    Sorting by key first makes the split a function of the dataset's content only. For
    Caltech101 and EuroSAT the sorted order equals torchvision's own order, so the split is
    exactly ZSCL's; for SUN397 (whose torchvision order is the file system's) it is stable.
    """
    order = sorted(range(len(samples)), key=lambda position: samples.keys[position])
    permutation = torch.randperm(len(order), generator=torch.Generator().manual_seed(SPLIT_SEED))
    shuffled = [order[p] for p in permutation.tolist()]
    n_train = int(SPLIT_TRAIN_FRACTION * len(shuffled))
    return samples.subset(shuffled[:n_train]), samples.subset(shuffled[n_train:])
