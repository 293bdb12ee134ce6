"""Few-shot subsets: deterministic, k per class, pinned by a manifest that every job reads."""

import json
import threading
from collections import Counter

import pytest

from codyra.data.errors import ManifestMismatchError
from codyra.data.fewshot import (
    FewShotManifest,
    load_or_create_manifest,
    read_manifest,
    sample_fewshot,
    write_manifest,
)
from codyra.data.registry import build_task
from codyra.data.sources import load_splits

from .fixtures import SIZES


def test_sample_fewshot_takes_k_per_class_or_all_of_a_small_class():
    labels = [0] * 10 + [1] * 3 + [2] * 7
    chosen = sample_fewshot(labels, k=5, seed=42)
    assert Counter(labels[p] for p in chosen) == {0: 5, 1: 3, 2: 5}
    assert len(set(chosen)) == len(chosen)
    assert chosen == sample_fewshot(labels, k=5, seed=42)
    assert chosen != sample_fewshot(labels, k=5, seed=7)


@pytest.mark.parametrize(("protocol", "k"), [("mtil", 5), ("xtail", 16)])
def test_fewshot_train_size_is_k_per_class(data_root, image_config, protocol, k):
    for name in SIZES[protocol]:
        train = load_splits(name, protocol, data_root).train
        per_class = Counter(train.labels)
        task = build_task(name, protocol, data_root, image_config, fewshot_k=k)
        assert len(task.train_set()) == sum(min(k, n) for n in per_class.values()), name


def test_mtil_5shot_size_is_5_times_the_classes_when_every_class_has_5(data_root, image_config):
    for name in ("Aircraft", "CIFAR100", "DTD", "Food", "MNIST", "OxfordPet", "StanfordCars"):
        classes = SIZES["mtil"][name][0]
        task = build_task(name, "mtil", data_root, image_config, fewshot_k=5)
        assert len(task.train_set()) == 5 * classes
        assert Counter(task.train_set().labels) == {label: 5 for label in range(classes)}


def test_manifest_round_trip_and_task_uses_it(data_root, image_config, tmp_path):
    path = tmp_path / "fewshot" / "Food.json"
    first = build_task("Food", "mtil", data_root, image_config, fewshot_k=5, manifest_path=path)
    content = json.loads(path.read_text())
    assert {key: content[key] for key in ("dataset", "protocol", "k", "seed")} == {
        "dataset": "Food",
        "protocol": "mtil",
        "k": 5,
        "seed": 42,
    }
    assert sorted(content["chosen"]) == ["0", "1", "2"]
    assert all(len(keys) == 5 for keys in content["chosen"].values())
    assert len(content["content_sha256"]) == 64

    manifest = read_manifest(path)
    train_keys = first.train_set().samples.keys
    assert list(train_keys) == [key for label in sorted(manifest.chosen) for key in manifest.chosen[label]]
    second = build_task("Food", "mtil", data_root, image_config, fewshot_k=5, manifest_path=path)
    assert second.train_set().samples == first.train_set().samples


def test_manifest_keys_are_indices_for_in_memory_datasets(data_root, tmp_path):
    train = load_splits("CIFAR100", "mtil", data_root).train
    manifest = load_or_create_manifest(
        tmp_path / "c.json", dataset="CIFAR100", protocol="mtil", k=2, seed=42, train=train
    )
    assert all(isinstance(key, int) for keys in manifest.chosen.values() for key in keys)
    assert read_manifest(tmp_path / "c.json") == manifest


def test_an_existing_manifest_wins_over_a_new_draw(data_root, tmp_path):
    train = load_splits("DTD", "mtil", data_root).train
    path = tmp_path / "dtd.json"
    pinned = FewShotManifest.draw("DTD", "mtil", 2, 42, train)
    assert write_manifest(path, pinned)
    assert not write_manifest(path, FewShotManifest.draw("DTD", "mtil", 2, 42, train))
    # A job with another sampler would draw differently; the file still decides.
    assert load_or_create_manifest(path, dataset="DTD", protocol="mtil", k=2, seed=42, train=train) == pinned


def test_concurrent_jobs_agree_on_one_manifest(data_root, tmp_path):
    train = load_splits("SUN397", "mtil", data_root).train
    path = tmp_path / "sun.json"
    results = []

    def job():
        manifest = load_or_create_manifest(path, dataset="SUN397", protocol="mtil", k=5, seed=42, train=train)
        results.append(manifest)

    threads = [threading.Thread(target=job) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and all(result == results[0] for result in results)
    assert [p.name for p in tmp_path.iterdir()] == ["sun.json"]  # no temporary files left


def test_manifest_for_other_settings_is_refused(data_root, tmp_path):
    train = load_splits("Aircraft", "mtil", data_root).train
    path = tmp_path / "a.json"
    load_or_create_manifest(path, dataset="Aircraft", protocol="mtil", k=5, seed=42, train=train)
    with pytest.raises(ManifestMismatchError, match=r"not \('Aircraft', 'mtil', 2, 42\)"):
        load_or_create_manifest(path, dataset="Aircraft", protocol="mtil", k=2, seed=42, train=train)


def test_manifest_for_another_train_split_is_refused(data_root, tmp_path):
    train = load_splits("Aircraft", "mtil", data_root).train
    path = tmp_path / "a.json"
    load_or_create_manifest(path, dataset="Aircraft", protocol="mtil", k=5, seed=42, train=train)
    shrunk = train.subset(range(1, len(train)))
    with pytest.raises(ManifestMismatchError, match="different Aircraft train split"):
        load_or_create_manifest(path, dataset="Aircraft", protocol="mtil", k=5, seed=42, train=shrunk)


def test_edited_manifest_is_refused(data_root, tmp_path):
    train = load_splits("Aircraft", "mtil", data_root).train
    path = tmp_path / "a.json"
    load_or_create_manifest(path, dataset="Aircraft", protocol="mtil", k=5, seed=42, train=train)
    content = json.loads(path.read_text())
    content["chosen"]["0"][0] = train.keys[-1]
    path.write_text(json.dumps(content))
    with pytest.raises(ManifestMismatchError, match="content_sha256"):
        read_manifest(path)


def test_manifest_path_without_k_is_an_error(data_root, image_config, tmp_path):
    with pytest.raises(ValueError, match="fewshot_k"):
        build_task("Food", "mtil", data_root, image_config, manifest_path=tmp_path / "m.json")
