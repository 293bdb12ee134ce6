"""Lists of (image key, label) and the picklable objects that turn a key into an image.

A key is a path relative to the data root (file datasets) or an index into a split
held in memory (CIFAR100, MNIST). Nothing here decodes an image until asked, so
views over 20k-image test sets stream through DataLoader workers.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from PIL import Image

STAT_CHUNK = 256  # files one thread stats per task: a future per file costs more than its stat


class ImageSource(Protocol):
    def load(self, key) -> Image.Image: ...

    def missing(self, keys) -> list[str]: ...

    def undecodable(self, keys, done) -> list[str]:
        """The images among ``keys`` that ``load`` cannot decode, each with its error;
        ``done(n)`` after every n decoded (a progress bar)."""

    def state(self, keys) -> str:
        """A digest of what ``keys`` hold now: it changes when an image is replaced or edited
        (an evaluation cache records it, :mod:`codyra.data.eval_cache`)."""


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

    def state(self, keys) -> str:
        """Each file's size and modification time (nanoseconds): a stat per file, in threads, as a
        cluster file system answers many at once; the bytes are not read."""

        def stat(chunk) -> list[tuple[int, int]]:
            return [(info.st_size, info.st_mtime_ns) for info in (os.stat(self.root / key) for key in chunk)]

        keys = list(keys)
        chunks = [keys[k : k + STAT_CHUNK] for k in range(0, len(keys), STAT_CHUNK)]
        with ThreadPoolExecutor(max_workers=16) as pool:
            stats = [entry for chunk in pool.map(stat, chunks) for entry in chunk]
        return hashlib.sha256(json.dumps([keys, stats], separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class TorchvisionImages:
    """Images held in memory, indexed like a torchvision dataset (MNIST's; CIFAR100's arrays,
    :mod:`codyra.data.sources`): ``dataset[key]`` is (image, label), ``dataset.data`` the arrays."""

    dataset: object

    def load(self, key: int) -> Image.Image:
        image, _ = self.dataset[key]
        return image.convert("RGB")

    def missing(self, keys) -> list[str]:
        return []

    def undecodable(self, keys, done) -> list[str]:
        done(len(keys))  # torchvision decoded the whole dataset into memory when it was built
        return []

    def state(self, keys) -> str:
        """The digest of the arrays read into memory (CIFAR100: 30 MB, MNIST: 8 MB)."""
        data = np.ascontiguousarray(np.asarray(self.dataset.data))
        return hashlib.sha256(json.dumps(list(keys)).encode() + data.tobytes()).hexdigest()


@dataclass(frozen=True, eq=False)
class DecodedImages:
    """Another source's images, decoded once into memory (uint8 arrays): ``load`` returns them
    pixel for pixel as the source decodes them, so every transform sees the same image. A few-shot
    training set is read over and over (1,000 steps x 64 images of a few hundred): this is its one
    decode. DataLoader workers share the arrays (copy-on-write after the fork)."""

    source: ImageSource
    arrays: dict

    @classmethod
    def of(cls, source: ImageSource, keys) -> DecodedImages:
        unique = list(dict.fromkeys(keys))
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:  # PIL decodes without the GIL
            arrays = dict(zip(unique, pool.map(lambda key: np.asarray(source.load(key)), unique), strict=True))
        return cls(source, arrays)

    def __eq__(self, other) -> bool:  # the same images: decoded from the same source, the same keys
        same = isinstance(other, DecodedImages) and self.source == other.source
        return same and self.arrays.keys() == other.arrays.keys()

    def __hash__(self) -> int:
        return hash((self.source, frozenset(self.arrays)))

    def load(self, key) -> Image.Image:
        return Image.fromarray(self.arrays[key])  # H x W x 3 uint8: an RGB image

    def missing(self, keys) -> list[str]:
        return self.source.missing(keys)

    def undecodable(self, keys, done) -> list[str]:
        return self.source.undecodable(keys, done)

    def state(self, keys) -> str:
        return self.source.state(keys)


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


def random_split_80_20(samples: Samples, order: str = "sorted") -> tuple[Samples, Samples]:
    """ZSCL's 80/20 split of ``samples`` sorted by key (``sorted``: a function of the dataset's
    content only) or in their listed order (``listed``).

    For Caltech101 and EuroSAT the sorted order equals torchvision's own order, so either is
    exactly ZSCL's split; for SUN397, whose torchvision order is the file system's, ``sorted`` is
    the same on every machine and ``listed`` is ZSCL's split on this machine's file system.
    """
    if order not in ("sorted", "listed"):
        raise ValueError(f"a split's order is 'sorted' or 'listed', got {order!r}")
    positions = list(range(len(samples)))
    if order == "sorted":
        positions.sort(key=lambda position: samples.keys[position])
    permutation = torch.randperm(len(positions), generator=torch.Generator().manual_seed(SPLIT_SEED))
    shuffled = [positions[p] for p in permutation.tolist()]
    n_train = int(SPLIT_TRAIN_FRACTION * len(shuffled))
    return samples.subset(shuffled[:n_train]), samples.subset(shuffled[n_train:])
