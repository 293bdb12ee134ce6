"""Held-out tasks: one file per (method, seed, i, task), theta_0's accuracy at i = 0, bad config entries."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from codyra.clip.model import pretrained_clip
from codyra.clip.rebuild import rebuild_clip
from codyra.data.scenes.tasks import build_mini_task
from codyra.evaluation.heldout import evaluate_heldout
from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.train_job import train_task
from codyra.store.paths import heldout_path, row0_heldout_path

HELDOUT = ["shape", "texture"]


@pytest.fixture
def heldout_run(tiny_run):
    tiny_run["heldout_tasks"] = list(HELDOUT)
    return load_config(tiny_run)


@torch.no_grad()
def reference_accuracy(bundle, cfg, name) -> float:
    """Zero-shot accuracy written out from open_clip's encoders: mean of the normalised
    template embeddings per class, argmax of cosine similarity."""
    task = build_mini_task(name, cfg["mini"], bundle.image)
    model = bundle.model.eval()
    classes = []
    for classname in task.classnames:
        emb = F.normalize(model.encode_text(bundle.tokenizer([t.format(classname) for t in task.templates])), dim=-1)
        classes.append(F.normalize(emb.mean(0), dim=-1))
    data = task.test_set()
    images = torch.stack([data[k][0] for k in range(len(data))])
    labels = torch.tensor([data[k][1] for k in range(len(data))])
    predicted = (F.normalize(model.encode_image(images), dim=-1) @ torch.stack(classes).T).argmax(1)
    return 100.0 * (predicted == labels).float().mean().item()


def test_heldout_files_after_each_task(heldout_run):
    cfg = heldout_run
    train_task(cfg, "lora-r4", 0, 1)
    zero = evaluate_heldout(cfg, "lora-r4", 0, 0)
    after = evaluate_heldout(cfg, "lora-r4", 0, 1)
    theta0, theta1 = pretrained_clip(cfg), rebuild_clip(cfg, "lora-r4", 0, 1)
    for k, name in enumerate(HELDOUT):
        for i, records, bundle in ((0, zero, theta0), (1, after, theta1)):
            record = json.loads(heldout_path(cfg, "lora-r4", 0, i, name).read_text())
            assert record == records[k]
            assert (record["benchmark"], record["method"], record["seed"], record["i"], record["task"]) == (
                "tiny",
                "lora-r4",
                0,
                i,
                name,
            )
            assert record["num_classes"] == len(build_mini_task(name, cfg["mini"], bundle.image).classnames)
            assert record["num_samples"] == cfg["mini"]["test_per_task"]
            assert record["accuracy"] == pytest.approx(reference_accuracy(bundle, cfg, name), abs=1e-6)
        # i = 0 is the pretrained model's accuracy, computed once per benchmark and copied
        shared = json.loads(row0_heldout_path(cfg, name).read_text())
        assert shared["method"] == "pretrained" and shared["accuracy"] == zero[k]["accuracy"]
    assert not list(heldout_path(cfg, "lora-r4", 0, 0, "x").parent.glob("*.tmp*"))


def test_a_method_that_never_trains_copies_theta0(heldout_run):
    cfg = heldout_run
    first = evaluate_heldout(cfg, "zeroshot", 0, 0)
    third = evaluate_heldout(cfg, "zeroshot", 0, 3)
    assert [r["accuracy"] for r in third] == [r["accuracy"] for r in first]
    assert all(r["i"] == 3 and r["copied_from"].endswith(f"H_0_{r['task']}.json") for r in third)


def test_missing_updates_fail_before_any_file(heldout_run):
    with pytest.raises(FileNotFoundError, match="train those tasks first"):
        evaluate_heldout(heldout_run, "full-ft", 0, 2)
    assert not heldout_path(heldout_run, "full-ft", 0, 2, "shape").exists()


@pytest.mark.parametrize(
    "heldout, message",
    [
        (["shape", "digits"], r"config key heldout_tasks\[1\]: 'digits' is a task of the stream"),
        (["cifar"], r"config key heldout_tasks\[0\]: 'cifar' is not a held-out dataset of the mini protocol"),
        (["shape", "shape"], "config key heldout_tasks: .*non-unique"),
        ("shape", "config key heldout_tasks: 'shape' is not of type 'array'"),
        ([3], r"config key heldout_tasks\[0\]: 3 is not of type 'string'"),
    ],
)
def test_bad_heldout_entries_name_the_key(tiny_cfg_dict, heldout, message):
    tiny_cfg_dict["heldout_tasks"] = heldout
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_cfg_dict)


def test_real_benchmarks_know_the_papers_heldout_sets(tiny_cfg_dict):
    xtail = {**tiny_cfg_dict, "data": {"kind": "xtail"}, "tasks": ["DTD"]}
    assert (
        load_config({**xtail, "heldout_tasks": ["CIFAR100", "Places365", "ImageNet"]})["heldout_tasks"][2] == "ImageNet"
    )
    with pytest.raises(
        ConfigError, match=r"heldout_tasks\[0\]: 'Places' is not a held-out dataset of the xtail protocol"
    ):
        load_config({**xtail, "heldout_tasks": ["Places"]})
    mtil = {**xtail, "data": {"kind": "mtil"}}
    with pytest.raises(
        ConfigError, match=r"heldout_tasks\[0\]: 'CIFAR100' is not a held-out dataset of the mtil protocol"
    ):
        load_config({**mtil, "heldout_tasks": ["CIFAR100"]})  # a stream dataset of MTIL


def test_empty_heldout_list_is_a_clear_error(tiny_run):
    with pytest.raises(ValueError, match="config key heldout_tasks is empty"):
        evaluate_heldout(tiny_run, "lora-r4", 0, 0)
