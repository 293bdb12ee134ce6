"""The shipped MTIL / X-TAIL configs on the fixture datasets: `build_tasks`, few-shot
manifests shared by every job, label spaces, and an evaluation cell through the real loaders."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from codyra.clip import evaluate
from codyra.clip.model import create_clip
from codyra.clip.streams import build_tasks
from codyra.data import fewshot
from codyra.data.errors import DataRootNotFoundError
from codyra.data.registry import fewshot_manifest_path, label_space
from codyra.data.templates import templates
from codyra.experiment.config import ConfigError, load_config, read_config_file
from codyra.experiment.resolve import resolve_job

from .fixtures import SIZES

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


def shipped(name: str, data_root, results, **data) -> dict:
    """A shipped benchmark config, pointed at the fixture datasets and a temporary results dir."""
    cfg = read_config_file(CONFIG_DIR / name)
    cfg["results"] = str(results)
    cfg["data"].update(root=None if data_root is None else str(data_root), **data)
    return load_config(cfg)


def test_mtil_tasks_follow_the_config_with_the_registry_s_names_and_templates(data_root, image_config, tmp_path):
    cfg = shipped("mtil_5shot_order2.yaml", data_root, tmp_path)
    tasks = build_tasks(cfg, image_config)
    assert [task.name for task in tasks] == list(cfg["tasks"])
    for task in tasks:
        assert task.num_classes == SIZES["mtil"][task.name][0]
        assert task.templates == templates(task.name, "mtil")
    assert (
        tasks[-1].name == "CIFAR100" and tasks[-1].prompts(tasks[-1].templates[0])[1] == "a photo of a aquarium fish."
    )


def test_tasks_are_built_on_first_access_only(data_root, image_config, tmp_path):
    cfg = shipped("mtil_5shot.yaml", data_root, tmp_path)
    tasks = build_tasks(cfg, image_config)
    assert len(tasks) == 11
    dtd = tasks[3]
    assert tasks[3] is dtd and tasks[-8] is dtd
    assert fewshot_manifest_path(cfg, "DTD").is_file()
    assert not fewshot_manifest_path(cfg, "Aircraft").exists()  # never asked for


def test_fewshot_manifest_is_written_once_then_reused(data_root, image_config, tmp_path, monkeypatch):
    cfg = shipped("mtil_5shot.yaml", data_root, tmp_path)
    path = tmp_path / "mtil-5shot" / "fewshot" / "Food.json"
    assert fewshot_manifest_path(cfg, "Food") == path

    first = build_tasks(cfg, image_config)[6].train_set()
    assert json.loads(path.read_text())["k"] == 5
    assert Counter(first.labels) == {label: 5 for label in range(SIZES["mtil"]["Food"][0])}
    written = path.read_bytes()

    def no_second_draw(*args, **kwargs):
        raise AssertionError("a later job must read the manifest, not draw again")

    monkeypatch.setattr(fewshot, "write_manifest", no_second_draw)
    again = build_tasks(cfg, image_config)[6].train_set()  # e.g. the next method's or seed's job
    assert again.samples.keys == first.samples.keys
    assert path.read_bytes() == written


def test_one_subset_serves_every_seed_unless_each_seed_draws_its_own(data_root, image_config, tmp_path):
    """data.fewshot_seed 42: one draw, one manifest for the benchmark; per_seed: seed s draws with s and
    pins it under fewshot/seed{s}/, so seeds train on different images (the references' per-run draws)."""
    from codyra.data.fewshot import sample_fewshot
    from codyra.data.sources import load_splits

    shared = shipped("mtil_5shot.yaml", data_root, tmp_path / "shared")
    keys = {seed: build_tasks(shared, image_config, seed)[3].train_set().samples.keys for seed in (0, 1)}
    assert keys[0] == keys[1] and fewshot_manifest_path(shared, "DTD", 1) == fewshot_manifest_path(shared, "DTD")

    per_seed = shipped("mtil_5shot.yaml", data_root, tmp_path / "per-seed", fewshot_seed="per_seed")
    full = load_splits("DTD", "mtil", data_root).train
    for seed in (0, 1):
        drawn = build_tasks(per_seed, image_config, seed)[3].train_set().samples.keys
        assert drawn == tuple(full.keys[p] for p in sample_fewshot(full.labels, 5, seed))  # drawn with the run's seed
        path = tmp_path / "per-seed" / "mtil-5shot" / "fewshot" / f"seed{seed}" / "DTD.json"
        assert fewshot_manifest_path(per_seed, "DTD", seed) == path and json.loads(path.read_text())["seed"] == seed
        keys[seed] = drawn
    assert keys[0] != keys[1]
    no_run = build_tasks(per_seed, image_config)[3]  # an evaluation: its test split only
    assert len(no_run.test_set()) == SIZES["mtil"]["DTD"][2]
    with pytest.raises(ValueError, match=r"DTD's few-shot subset is drawn per seed \(config key data.fewshot_seed"):
        no_run.train_set()
    with pytest.raises(ValueError, match="give the seed"):
        fewshot_manifest_path(per_seed, "DTD")


def test_a_job_s_augmentation_reaches_its_training_images(data_root, image_config, tmp_path):
    """train.augmentation, per method: zscl's crop without flips, the paper's with them."""
    cfg = shipped("mtil_5shot.yaml", data_root, tmp_path)
    assert build_tasks(cfg, image_config, 0)[3].train_set().transform.flips
    assert not build_tasks(cfg, image_config, 0, "zscl")[3].train_set().transform.flips
    cfg["method_configs"]["zscl"]["train"] = {**cfg["method_configs"]["zscl"].get("train", {}), "augmentation": "zscl"}
    cfg = load_config(cfg)
    assert resolve_job(cfg, "zscl", 1)["train"]["augmentation"] == "zscl"
    assert resolve_job(cfg, "codyra", 1)["train"]["augmentation"] == "paper"


def test_sun397_in_the_file_system_s_order_keeps_its_own_caches_and_subsets(data_root, tmp_path):
    from codyra.store.paths import eval_cache_dir

    cfg = shipped("mtil_5shot.yaml", data_root, tmp_path)
    listed = shipped("mtil_5shot.yaml", data_root, tmp_path, sun397_order="filesystem")
    assert eval_cache_dir(cfg, "DTD") == tmp_path / "eval_cache" / "mtil" / "ViT-B-16" / "DTD"
    assert eval_cache_dir(listed, "DTD") == tmp_path / "eval_cache" / "mtil-sun397-filesystem" / "ViT-B-16" / "DTD"
    assert fewshot_manifest_path(listed, "SUN397").name == "SUN397.filesystem-order.json"
    assert fewshot_manifest_path(listed, "DTD") == fewshot_manifest_path(cfg, "DTD")


def test_full_shot_trains_on_every_image_and_writes_no_manifest(data_root, image_config, tmp_path):
    cfg = shipped("mtil_full.yaml", data_root, tmp_path)
    tasks = build_tasks(cfg, image_config)
    assert [len(task.train_set()) for task in tasks] == [SIZES["mtil"][task.name][1] for task in tasks]
    assert not (tmp_path / "mtil-full" / "fewshot").exists()


def test_xtail_union_label_space_holds_every_dataset_s_classes(data_root, image_config, tmp_path):
    cfg = shipped("xtail_16shot.yaml", data_root, tmp_path)
    tasks = build_tasks(cfg, image_config)
    space = label_space(tasks)
    assert len(space) == sum(SIZES["xtail"][name][0] for name in space.datasets)  # 1,100 on the real data
    assert space.datasets == tuple(cfg["tasks"])
    assert all(task.templates == templates(task.name, "xtail") for task in tasks)
    assert sorted(path.name for path in (tmp_path / "xtail-16shot" / "fewshot").iterdir()) == sorted(
        f"{name}.json" for name in space.datasets
    )


def test_missing_data_root_says_which_key_to_set(image_config, tmp_path):
    with pytest.raises(ConfigError, match="config key data.root is not set.*codyra data check"):
        build_tasks(shipped("mtil_5shot.yaml", None, tmp_path), image_config)


def test_absent_data_root_names_the_directory(image_config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = shipped("xtail_16shot.yaml", "data", tmp_path)
    with pytest.raises(DataRootNotFoundError) as error:
        build_tasks(cfg, image_config)
    message = str(error.value)
    assert f"data root {tmp_path / 'data'} does not exist" in message
    assert f"relative to the working directory {tmp_path}" in message
    assert "codyra data check --config" in message


@pytest.fixture(scope="module")
def tiny_clip():
    """A random tiny CLIP: the cell's arithmetic and data path, not its accuracy, is under test."""
    return create_clip("codyra-mini", None)


@pytest.fixture
def classified_spaces(monkeypatch):
    """The label spaces evaluation builds its classifiers from, in call order."""
    spaces, build = [], evaluate.label_space_classifier

    def record(model, tokenizer, space, device):
        spaces.append(space)
        return build(model, tokenizer, space, device)

    monkeypatch.setattr(evaluate, "label_space_classifier", record)
    return spaces


def test_xtail_cell_classifies_over_the_registry_label_space(data_root, tmp_path, tiny_clip, classified_spaces):
    cfg = shipped("xtail_16shot.yaml", data_root, tmp_path, num_workers=2)  # workers get the pickled view
    cfg["eval"]["batch_size"] = 4
    tasks = build_tasks(cfg, tiny_clip.image)
    j = 7  # MNIST, whose X-TAIL class names the registry wraps
    hits = evaluate.hits_on_task(tiny_clip, tasks, j, cfg, torch.device("cpu"))
    assert (hits.total, hits.space_classes) == (SIZES["xtail"]["MNIST"][2], len(label_space(tasks)))
    assert 0 <= hits.accuracy <= 100
    [space] = classified_spaces
    assert space.prompts() == label_space(tasks).prompts()
    assert 'a photo of the number: "number: "7 - seven"".' in space.prompts()[space.offset("MNIST") + 7]


def test_mtil_cell_classifies_over_the_task_s_own_ensemble(data_root, tmp_path, tiny_clip, classified_spaces):
    cfg = shipped("mtil_5shot.yaml", data_root, tmp_path, num_workers=0)
    tasks = build_tasks(cfg, tiny_clip.image)
    hits = evaluate.hits_on_task(tiny_clip, tasks, 2, cfg, torch.device("cpu"))
    assert (hits.total, hits.space_classes) == (SIZES["mtil"]["Caltech101"][2], 101)
    [space] = classified_spaces
    assert space.datasets == ("Caltech101",)
    assert all(len(prompts) == 34 for prompts in space.prompts())
