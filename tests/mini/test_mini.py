"""The mini benchmark: deterministic data and pretraining, task definitions."""

from __future__ import annotations

import numpy as np
import torch
from safetensors.torch import load_file

from codyra.data.scenes import TASK_NAMES
from codyra.data.scenes.corpus import make_corpus
from codyra.data.scenes.render import COLOURS, HUES, TONES, tone_rgb
from codyra.data.scenes.tasks import SCENE_TASKS, build_mini_task, split_arrays
from codyra.data.tasks import ImageConfig
from codyra.mini.clip.pretrain import pretrain_mini

IMAGE = ImageConfig(32, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))


def test_task_names_match_the_task_definitions():
    assert set(TASK_NAMES) == {*SCENE_TASKS, "digits"}


def test_splits_are_deterministic_balanced_and_disjoint():
    for name in TASK_NAMES:
        split_arrays.cache_clear()
        a_images, a_labels = split_arrays(name, "test", 60, 0)
        split_arrays.cache_clear()
        b_images, b_labels = split_arrays(name, "test", 60, 0)
        assert np.array_equal(a_images, b_images) and np.array_equal(a_labels, b_labels), name
        assert a_images.shape == (60, 32, 32, 3) and a_images.dtype == np.uint8
        if name != "digits":
            counts = np.bincount(a_labels)
            assert counts.max() - counts.min() <= 1, name  # round-robin labels
        train_images, _ = split_arrays(name, "train", 60, 0)
        assert not any((train_images == img).all(axis=(1, 2, 3)).any() for img in a_images), name
    other, _ = split_arrays("shape", "test", 60, 1)
    assert not np.array_equal(other, split_arrays("shape", "test", 60, 0)[0])


def test_digit_task_uses_the_bundled_scikit_learn_digits():
    task = build_mini_task("digits", {"data_seed": 0, "train_per_task": 10, "test_per_task": 50}, IMAGE)
    assert task.classnames[:3] == ("zero", "one", "two")
    assert len(task.test_set()) == 50 and len(task.train_set()) == 1797 - 500
    image, label = task.train_set()[(3, 12345)]
    assert image.shape == (3, 32, 32) and 0 <= label <= 9
    assert torch.equal(image, task.train_set()[(3, 999)][0])  # no augmentation: aug_seed is ignored


def test_captions_mention_some_attributes_only_rarely():
    images, captions = make_corpus(3000, seed=3)
    assert images.shape == (3000, 32, 32, 3)
    assert captions == make_corpus(3000, seed=3)[1]
    words = [set(c.rstrip(".").split()) for c in captions]

    def share(*names):
        return sum(bool(w & set(names)) for w in words) / len(words)

    assert share(*COLOURS) > 0.3 and share("triangle", "circle", "ring") > 0.1  # well known
    assert 0.002 < share(*HUES) < 0.02  # hues: 1 in 4 scenes, named in about 1 in 10 of those
    assert 0.005 < share("dark", "light") < 0.04
    assert 0.02 < share("background") < 0.08
    assert 0.05 < share("handwritten") < 0.15 and share("zero", "four") > 0.005
    assert share("five", "six", "seven", "eight", "nine") == 0  # shown, never named
    edge = sum(" center left" in c or " top center" in c for c in captions) / len(captions)
    coarse = sum(" top left" in c for c in captions) / len(captions)
    assert edge < 0.01 < coarse


def test_hues_and_tones_are_distinct_colours():
    base = [np.array(tone_rgb(c, t)) for c in COLOURS for t in TONES]
    for hue in HUES:
        assert min(np.abs(np.array(tone_rgb(hue, "normal")) - b).max() for b in base) >= 0.15, (
            hue
        )  # render jitter is +-0.05
    assert SCENE_TASKS["shade"].classes[0] == ("dark red", {"colour": "red", "tone": "dark"})


def test_pretraining_is_deterministic(tiny_cfg, tmp_path):
    tiny_cfg["mini"]["pretrain_steps"] = 3
    pretrain_mini(tiny_cfg, tmp_path / "a.safetensors")
    pretrain_mini(tiny_cfg, tmp_path / "b.safetensors")
    a, b = load_file(str(tmp_path / "a.safetensors")), load_file(str(tmp_path / "b.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
