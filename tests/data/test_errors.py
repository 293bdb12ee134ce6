"""A missing or half-present dataset fails early with a message that says what to do."""

import json
import pickle
import shutil

import pytest

from codyra.data.errors import DatasetNotFoundError
from codyra.data.registry import build_task, check_dataset
from codyra.data.sources import load_splits
from codyra.rehearsal.datasets import write_aircraft, write_caltech101, write_food, write_stanford_cars


def test_missing_dataset_names_directory_files_and_download(tmp_path, image_config):
    with pytest.raises(DatasetNotFoundError) as caught:
        build_task("Aircraft", "mtil", tmp_path, image_config)
    error = caught.value
    assert isinstance(error, FileNotFoundError)
    message = str(error)
    expected_in = tmp_path / "fgvc-aircraft-2013b"
    assert f"dataset 'Aircraft' (mtil) is missing: expected it in {expected_in}" in message
    assert str(tmp_path / "fgvc-aircraft-2013b/data/images_variant_test.txt") in message
    assert f"torchvision.datasets.FGVCAircraft(root='{tmp_path}', download=True)" in message
    assert error.dataset == "Aircraft" and len(error.missing) == 4
    assert str(pickle.loads(pickle.dumps(error))) == message


def test_missing_stanford_cars_says_which_files_to_place_where(tmp_path):
    with pytest.raises(DatasetNotFoundError) as caught:
        load_splits("StanfordCars", "mtil", tmp_path)
    message = str(caught.value)
    assert "can no longer download StanfordCars" in message
    for path in ("cars_train/", "devkit/", "cars_test_annos_withlabels.mat"):
        assert f"{tmp_path}/stanford_cars/{path}" in message
    assert "https://github.com/pytorch/vision/issues/7545" in message


def test_missing_coop_split_file_says_where_to_get_and_put_it(tmp_path):
    write_food(tmp_path)
    (tmp_path / "food-101" / "split_zhou_Food101.json").unlink()
    with pytest.raises(DatasetNotFoundError) as caught:
        load_splits("Food", "xtail", tmp_path)
    message = str(caught.value)
    assert "dataset 'Food' (xtail) is incomplete" in message
    assert f"missing (1):\n    {tmp_path}/food-101/split_zhou_Food101.json" in message
    assert "CoOp's DATASETS.md" in message
    assert f"place it at {tmp_path}/food-101/split_zhou_Food101.json" in message
    load_splits("Food", "mtil", tmp_path)  # MTIL does not need the split file


def test_half_present_dataset_lists_only_what_is_missing(tmp_path):
    write_stanford_cars(tmp_path)
    (tmp_path / "stanford_cars" / "cars_test_annos_withlabels.mat").unlink()
    shutil.rmtree(tmp_path / "stanford_cars" / "cars_test")
    with pytest.raises(DatasetNotFoundError) as caught:
        load_splits("StanfordCars", "mtil", tmp_path)
    error = caught.value
    assert "is incomplete" in str(error)
    assert error.missing == [
        f"{tmp_path}/stanford_cars/cars_test_annos_withlabels.mat",
        f"{tmp_path}/stanford_cars/cars_test/",
    ]


def test_missing_images_fail_when_the_view_is_built_not_mid_run(tmp_path, image_config):
    write_aircraft(tmp_path)
    test_list = (tmp_path / "fgvc-aircraft-2013b/data/images_variant_test.txt").read_text().split()
    lost = tmp_path / "fgvc-aircraft-2013b/data/images" / f"{test_list[0]}.jpg"
    lost.unlink()
    task = build_task("Aircraft", "mtil", tmp_path, image_config)  # metadata is intact
    task.train_set()
    with pytest.raises(DatasetNotFoundError) as caught:
        task.test_set()
    assert "1 of the 6 images this split lists are missing" in str(caught.value)
    assert str(lost) in str(caught.value)


def test_caltech_with_a_category_missing_is_incomplete(tmp_path):
    write_caltech101(tmp_path)
    shutil.rmtree(tmp_path / "caltech101" / "101_ObjectCategories" / "yin_yang")
    with pytest.raises(DatasetNotFoundError, match="found 100 classes, CLIP's class-name list has 101"):
        load_splits("Caltech101", "mtil", tmp_path)


def test_unreadable_split_file_is_reported_as_such(tmp_path):
    write_food(tmp_path)
    (tmp_path / "food-101" / "split_zhou_Food101.json").write_text(json.dumps({"train": [["a.jpg", 0]]}))
    with pytest.raises(DatasetNotFoundError, match="could not be read: .*not a CoOp split file"):
        load_splits("Food", "xtail", tmp_path)


def test_torchvision_rejecting_files_becomes_a_dataset_error(tmp_path):
    write_aircraft(tmp_path)
    (tmp_path / "fgvc-aircraft-2013b/data/variants.txt").write_text("707-320\n")  # drops two classes
    with pytest.raises(DatasetNotFoundError, match="could not be read"):
        load_splits("Aircraft", "mtil", tmp_path)


def test_check_reports_instead_of_raising(tmp_path):
    write_aircraft(tmp_path)
    images = sorted((tmp_path / "fgvc-aircraft-2013b/data/images").iterdir())
    images[0].unlink()
    report = check_dataset("Aircraft", "mtil", tmp_path)
    assert report.found and not report.usable
    assert (report.train_size, report.test_size, report.num_classes) == (18, 6, 3)
    assert "1 of the 24 images the splits list are missing" in report.problems[0]
    missing = check_dataset("SUN397", "mtil", tmp_path)
    assert not missing.found and not missing.usable and missing.train_size is None
    assert "dataset 'SUN397' (mtil) is missing" in missing.problems[0]
