"""Every paper config's datasets as fixtures in their real layouts (codyra.rehearsal.datasets),
read by the readers of the paper grid."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from codyra.data.check import check_config, inspect_config
from codyra.data.registry import build_task
from codyra.data.sources import load_splits
from codyra.experiment.config import load_config, read_config_file
from codyra.rehearsal.datasets import TEST_PER_CLASS, write_datasets

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
PAPER_CONFIGS = (
    "mtil_5shot.yaml",
    "mtil_5shot_order2.yaml",
    "mtil_5shot_uniform.yaml",
    "mtil_5shot_ablations.yaml",
    "mtil_full.yaml",
    "xtail_16shot.yaml",
    "blip_xtail_16shot.yaml",
    "trace.yaml",
)
TRAIN_PER_CLASS = 4  # below every few-shot k of the paper configs: the writers give each class max(k, this)


def paper_config(name: str, root: Path, results: Path) -> dict:
    """A paper config at its own data settings, its data.root the fixture folder."""
    raw = read_config_file(CONFIG_DIR / name)
    raw["results"] = str(results)
    raw["data"]["root"] = str(root)
    return load_config(raw)


@pytest.mark.slow
@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_every_dataset_of_a_paper_config_is_written_complete(tmp_path, image_config, name):
    cfg = paper_config(name, tmp_path / "data", tmp_path / "results")
    k = cfg["data"]["fewshot"]
    per_class = max(k or 0, TRAIN_PER_CLASS)
    write_datasets(cfg, tmp_path / "data", train_per_class=per_class)
    report = inspect_config(cfg)
    assert report.problems == [], report.text
    if cfg["data"]["kind"] == "trace":
        assert "8 of 8 tasks usable" in report.text
        for task in cfg["tasks"]:
            counts = [
                len(json.loads((tmp_path / "data" / task / f"{s}.json").read_text())) for s in ("train", "eval", "test")
            ]
            assert counts == [per_class, TEST_PER_CLASS, TEST_PER_CLASS]
        return
    protocol = cfg["data"]["kind"]
    studied = [study["task"] for study in cfg["single_task"].get("studies", {}).values()]
    names = set(cfg["tasks"]) | set(studied)
    expected = len(names | set(cfg["heldout_tasks"]) | set(cfg["single_task"].get("reference_tasks", [])))
    assert f"{expected} of {expected} datasets usable" in report.text
    if cfg["data"]["reference"] is not None:
        assert "reference data (data.reference, kind zscl): ok" in report.text
    for dataset in sorted(names):
        splits = load_splits(dataset, protocol, tmp_path / "data")
        test = Counter(splits.test.labels)
        assert min(test.values()) >= TEST_PER_CLASS and len(test) == len(Counter(splits.train.labels)), dataset
        if k is None:
            assert min(Counter(splits.train.labels).values()) >= per_class, dataset
            continue
        drawn = build_task(dataset, protocol, tmp_path / "data", image_config, fewshot_k=k).train_set()
        assert Counter(drawn.labels) == dict.fromkeys(Counter(splits.train.labels), k), dataset  # k of every class


def test_the_xtail_grid_s_datasets_take_seconds(tmp_path):
    cfg = paper_config("xtail_16shot.yaml", tmp_path / "data", tmp_path / "results")
    began = time.monotonic()
    write_datasets(cfg, tmp_path / "data", train_per_class=16)
    assert time.monotonic() - began < 60  # about 5,000 small images: a few seconds on a laptop
    assert check_config(cfg) == []


def test_a_kind_without_datasets_on_disk_is_refused(tmp_path):
    cfg = load_config(CONFIG_DIR / "config.yaml")
    with pytest.raises(ValueError, match="data.kind 'mini' reads no datasets from disk"):
        write_datasets(cfg, tmp_path, train_per_class=4)
