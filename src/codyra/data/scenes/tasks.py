"""The mini benchmark's classification tasks, generated in memory from a seed.

Each scene task fixes one or two scene attributes per class (``SceneTask.classes``) and may
fix others for all its images (``SceneTask.domain``); the digits task draws scikit-learn's
bundled handwritten digits. What the pretrained model knows of each task is decided by the
pretraining captions (see ``codyra.data.scenes.corpus``).

Stream tasks draw their images from a domain of their own (small objects on plain grey, tiny
objects on textures, large centred shapes, ...), as MTIL's datasets differ from each other:
when every task showed the same random scenes, training one attribute erased every other one
and no method kept anything of earlier tasks (docs/mini.md, "The CLIP mini").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from codyra.data.scenes import TASK_NAMES
from codyra.data.scenes.render import (
    COLOURS,
    COUNTS,
    DIGITS,
    HUES,
    POSITIONS,
    SHAPES,
    SIZES,
    TEXTURES,
    digit_pools,
    random_scene,
    render,
    render_digit,
    sklearn_digits,
)
from codyra.data.tasks import ClassificationTask, ImageConfig

OBJECT_TEMPLATES = ("a photo of a {} object.", "a picture of a {} shape.", "a {} object.")
CHROMATIC = ("red", "orange", "yellow", "green", "blue", "purple")


@dataclass(frozen=True)
class SceneTask:
    classes: tuple[tuple[str, dict], ...]  # (class name, the scene attributes it fixes)
    templates: tuple[str, ...]
    domain: tuple[tuple[str, object], ...] = ()  # attributes fixed for every image of the task


def _single(attribute: str, values, **extra) -> tuple[tuple[str, dict], ...]:
    return tuple((str(v), {attribute: v, **extra}) for v in values)


SCENE_TASKS = {
    # stream tasks: partly known from the captions
    "shade": SceneTask(
        tuple((f"{tone} {c}", {"colour": c, "tone": tone}) for tone in ("dark", "light") for c in CHROMATIC),
        OBJECT_TEMPLATES,
        domain=(("count", 1), ("texture", "plain"), ("size", "large")),
    ),
    "hue": SceneTask(_single("colour", HUES, tone="normal"), OBJECT_TEMPLATES),
    "position": SceneTask(
        _single("position", POSITIONS),
        ("a photo of a shape in the {}.", "an object in the {}."),
        domain=(("count", 1), ("texture", "plain"), ("size", "small")),
    ),
    "texture": SceneTask(
        _single("texture", TEXTURES),
        ("a photo of a shape on a {} background.", "an object on a {} background."),
        domain=(("count", 1), ("size", "tiny")),
    ),
    "size": SceneTask(
        _single("size", SIZES, count=1),
        ("a photo of a {} shape.", "a picture of a {} object."),
    ),
    "shape": SceneTask(
        _single("shape", SHAPES),
        ("a photo of a {}.", "a picture of a {}.", "an image of a {}."),
        domain=(("count", 1), ("texture", "plain"), ("size", "large"), ("position", "center")),
    ),
    # well known from the captions (the default config's held-out tasks)
    "colour": SceneTask(_single("colour", COLOURS, tone="normal"), OBJECT_TEMPLATES),
    "count": SceneTask(
        tuple((name, {"count": k}) for k, name in enumerate(COUNTS, start=1)),
        ("a photo of {} shapes.", "a picture of {} objects."),
    ),
}
DIGITS_BACKGROUND = "plain"  # the task's own domain; the pretraining corpus draws digits on every texture
DIGIT_TEMPLATES = ("a photo of a handwritten {}.", "a picture of the digit {}.", "an image of a handwritten {}.")
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
    classes = SCENE_TASKS[name].classes
    rng = np.random.default_rng([seed, TASK_NAMES.index(name), _SPLIT_IDS[split]])
    labels = np.arange(n) % len(classes)
    rng.shuffle(labels)
    domain = dict(SCENE_TASKS[name].domain)
    images = [render(random_scene(rng, **domain, **classes[label][1]), rng) for label in labels]
    return np.stack(images), labels


def _digit_split(split: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The test split takes ``n`` digits of the test pool; the train split is the whole train pool."""
    test_pool, train_pool = digit_pools(seed)
    chosen = test_pool[:n] if split == "test" else train_pool
    rng = np.random.default_rng([seed, TASK_NAMES.index("digits"), _SPLIT_IDS[split]])
    images = np.stack([render_digit(k, rng, DIGITS_BACKGROUND) for k in chosen])
    return images, sklearn_digits()[1][chosen].astype(np.int64)


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
        classes, templates = tuple(c for c, _ in SCENE_TASKS[name].classes), SCENE_TASKS[name].templates
    seed = mini_cfg["data_seed"]

    def data(split: str, n: int):
        return lambda: TensorTaskData(*split_arrays(name, split, n, seed), image)

    return ClassificationTask(
        name=name,
        classnames=classes,
        templates=templates,
        train_set=data("train", mini_cfg["train_per_task"]),
        test_set=data("test", mini_cfg["test_per_task"]),
        train_eval_set=data("train", mini_cfg["train_per_task"]),  # no augmentation: the training images as they are
    )
