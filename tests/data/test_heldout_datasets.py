"""The X-TAIL held-out sets (CIFAR100, Places365, ImageNet) in their real on-disk layouts."""

from __future__ import annotations

import pytest
from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES

from codyra.data.errors import DatasetNotFoundError
from codyra.data.registry import build_task, check_dataset
from codyra.rehearsal.datasets import write_cifar100, write_imagenet, write_places365

PLACES = ("/a/airfield", "/b/bakery/shop", "/y/youth_hostel")


def test_places365_reads_its_validation_split_and_names_from_the_folder(tmp_path, image_config):
    write_places365(tmp_path, PLACES)  # no MD5 check: these are not the real files
    task = build_task("Places365", "xtail", tmp_path, image_config)
    assert task.classnames == ("airfield", "bakery shop", "youth hostel")
    assert task.templates == ("a photo of a {}.",)
    test = task.test_set()
    assert len(test) == 6 and [test[k][1] for k in range(6)] == [0, 0, 1, 1, 2, 2]
    assert len(task.train_set()) == 0  # held out: never trained on
    assert check_dataset("Places365", "xtail", tmp_path).usable


def test_imagenet_uses_clips_class_names_in_wordnet_id_order(tmp_path, image_config):
    write_imagenet(tmp_path)
    task = build_task("ImageNet", "mtil", tmp_path, image_config)
    assert task.classnames == tuple(IMAGENET_CLASSNAMES) and task.classnames[:2] == ("tench", "goldfish")
    assert len(task.templates) == 80 and "a photo of a {}." in task.templates  # CLIP's ensemble
    assert build_task("ImageNet", "xtail", tmp_path, image_config).templates == ("a photo of a {}.",)
    assert task.test_set()[999][1] == 999


def test_imagenet_with_wrong_class_folders_is_named(tmp_path, image_config):
    write_imagenet(tmp_path, classes=3)
    with pytest.raises(DatasetNotFoundError, match="3 class folders, ImageNet-1k has 1000"):
        build_task("ImageNet", "xtail", tmp_path, image_config)


def test_missing_heldout_dataset_says_what_to_get(tmp_path, image_config):
    with pytest.raises(DatasetNotFoundError, match="valprep.sh"):
        build_task("ImageNet", "xtail", tmp_path, image_config)
    with pytest.raises(DatasetNotFoundError, match="categories_places365.txt"):
        build_task("Places365", "xtail", tmp_path, image_config)


def test_cifar100_is_an_xtail_heldout_set(tmp_path, image_config):
    write_cifar100(tmp_path)
    task = build_task("CIFAR100", "xtail", tmp_path, image_config)
    assert task.templates == ("a photo of a {}.",) and len(task.test_set()) == 8
