"""The mini benchmark's classification tasks, generated in memory from a seed.

Covered by the pretraining captions: shape, colour, count, position, texture (weakly).
Not covered: digits (scikit-learn's bundled 8x8 handwritten digits, names "zero".."nine"
never occur in a caption).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from codyra.mini import TASK_NAMES
from codyra.mini.render import (
    COLOURS,
    COUNTS,
    POSITIONS,
    SHAPES,
    SIZE,
    TEXTURES,
    random_scene,
    render,
    texture,
)
from codyra.tasks import ClassificationTask, ImageConfig

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

# name -> (class names, templates, the scene attribute the label fixes)
SCENE_TASKS = {
    "shape": (SHAPES, ("a photo of a {}.", "a picture of a {}.", "an image of a {}."), "shape"),
    "colour": (tuple(COLOURS), ("a photo of a {} object.", "a picture of a {} shape.", "a {} object."), "colour"),
    "texture": (TEXTURES, ("a photo of a shape on a {} background.", "an object on a {} background."), "texture"),
    "count": (COUNTS, ("a photo of {} shapes.", "a picture of {} objects."), "count"),
    "position": (tuple(POSITIONS), ("a photo of a shape in the {}.", "an object in the {}."), "position"),
}
DIGIT_TEMPLATES = ("a photo of the number {}.", "a picture of the digit {}.", "an image of a handwritten {}.")
DIGITS_TEST_POOL = 500
_SPLIT_IDS = {"train": 1, "test": 2}


class TensorTaskData(torch.utils.data.Dataset):
    """Normalised image tensors in memory; train indexing by (index, aug_seed) ignores the seed."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, image: ImageConfig):
        x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
        if x.shape[-1] != image.size:
            x = torch.nn.functional.interpolate(x, size=image.size, mode="bilinear", antialias=True)
        mean = torch.tensor(image.mean).view(1, 3, 1, 1)
        std = torch.tensor(image.std).view(1, 3, 1, 1)
        self.images, self.labels = (x - mean) / std, torch.from_numpy(labels).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, key):
        index = key[0] if isinstance(key, tuple) else key
        return self.images[index], int(self.labels[index])


def _scene_split(name: str, split: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    classes, _, attribute = SCENE_TASKS[name]
    rng = np.random.default_rng([seed, TASK_NAMES.index(name), _SPLIT_IDS[split]])
    labels = np.arange(n) % len(classes)
    rng.shuffle(labels)
    images = []
    for label in labels:
        value = label + 1 if attribute == "count" else classes[label]
        fixed = {attribute: value, **({"count": 1} if attribute == "position" else {})}
        images.append(render(random_scene(rng, **fixed), rng))
    return np.stack(images), labels


@lru_cache(maxsize=1)
def _sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target


def _digit_split(split: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Digits drawn as light strokes on a random texture, upscaled 8x8 -> 32x32.

    scikit-learn bundles 1,797 digits: a fixed permutation reserves the first
    ``DIGITS_TEST_POOL`` for testing (the test split takes ``n`` of them) and trains on the rest.
    """
    pixels, targets = _sklearn_digits()
    order = np.random.default_rng([seed, 77]).permutation(len(targets))
    chosen = order[: min(n, DIGITS_TEST_POOL)] if split == "test" else order[DIGITS_TEST_POOL:]
    rng = np.random.default_rng([seed, TASK_NAMES.index("digits"), _SPLIT_IDS[split]])
    images = []
    for k in chosen:
        stroke = np.kron(pixels[k] / 16.0, np.ones((SIZE // 8, SIZE // 8)))
        grey = texture(TEXTURES[rng.integers(len(TEXTURES))], rng)
        canvas = grey * (1 - stroke) + 0.95 * stroke + rng.normal(0, 0.02, stroke.shape)
        images.append((np.clip(np.repeat(canvas[..., None], 3, axis=2), 0, 1) * 255).round().astype(np.uint8))
    return np.stack(images), targets[chosen].astype(np.int64)


@lru_cache(maxsize=32)
def split_arrays(name: str, split: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 NHWC images, int labels) of a task split; deterministic in ``seed``."""
    if name == "digits":
        return _digit_split(split, n, seed)
    return _scene_split(name, split, n, seed)


def build_mini_task(name: str, mini_cfg: dict, image: ImageConfig) -> ClassificationTask:
    if name not in TASK_NAMES:
        raise ValueError(f"unknown mini task {name!r}; available: {', '.join(TASK_NAMES)}")
    if name == "digits":
        classes, templates = DIGITS, DIGIT_TEMPLATES
    else:
        classes, templates, _ = SCENE_TASKS[name]
    seed = mini_cfg["data_seed"]

    def data(split: str, n: int):
        return lambda: TensorTaskData(*split_arrays(name, split, n, seed), image)

    return ClassificationTask(
        name=name,
        classnames=tuple(classes),
        templates=templates,
        train_set=data("train", mini_cfg["train_per_task"]),
        test_set=data("test", mini_cfg["test_per_task"]),
    )
