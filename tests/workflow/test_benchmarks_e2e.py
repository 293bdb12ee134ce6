"""The real benchmark pipelines through the grid, on data the tests generate:
MTIL (few-shot, own label space) and X-TAIL (union label space) on fixture datasets in their
on-disk layouts with a tiny open_clip model, and the mini TRACE with a tiny LLaMA."""

from __future__ import annotations

import copy
import json

import pytest

from codyra.clip.family import CLIP
from codyra.clip.streams import build_tasks
from codyra.data.eval_cache import has_eval_cache
from codyra.data.tasks import ImageConfig
from codyra.experiment.config import load_config
from codyra.rehearsal.datasets import write_dtd, write_eurosat, write_mnist
from codyra.store.paths import PRETRAINED, cell_path, eval_cache_dir, row0_cell_path, tables_dir
from codyra.yaml_loader import load_yaml
from tests.conftest import TINY
from tests.llm.conftest import TINY_TRACE

from .conftest import REPO, job_counts, snakemake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("clip-data")
    for write in (write_dtd, write_eurosat, write_mnist):
        write(root)
    return root


def clip_config(tmp_path, data_root, pretrained, kind: str) -> dict:
    return {
        "benchmark": f"fixture-{kind}",
        "results": str(tmp_path / "results"),
        "seeds": [0],
        "methods": ["zeroshot", "codyra"],
        "model": {"name": "codyra-mini", "pretrained": str(pretrained)},
        "data": {
            "kind": kind,
            "root": str(data_root),
            "fewshot": 2,
            "label_space": "task" if kind == "mtil" else "union",
        },
        "tasks": [{"name": "DTD"}, {"name": "EuroSAT"}, {"name": "MNIST"}],
        "train": {"iterations": 3, "batch_size": 4, "lr": 0.003, "checkpoint_every": 2},
        "eval": {"batch_size": 16},
        "method_configs": {"zeroshot": {"kind": "zeroshot"}, "codyra": copy.deepcopy(TINY["method_configs"]["codyra"])},
    }


@pytest.mark.parametrize("kind", ["mtil", "xtail"])
def test_clip_benchmark_on_fixture_datasets(tmp_path, fixture_root, tiny_pretrained, kind):
    cfg = clip_config(tmp_path, fixture_root, tiny_pretrained, kind)
    result = snakemake(tmp_path, cfg, "--cores", "2", "all_tables")
    counts = job_counts(result.stdout + result.stderr)
    assert (
        counts["train_task"] == 3 and counts["eval_row0"] == 1 and counts["eval_row"] == 3 and counts["copy_row0"] == 3
    )
    assert counts["eval_cache"] == 3  # each test set decoded once, by a job of its own
    loaded = load_config(cfg)
    caches = [eval_cache_dir(loaded, name) for name in ("DTD", "EuroSAT", "MNIST")]
    assert all(has_eval_cache(c) for c in caches)
    row_log = (tmp_path / "results" / "logs" / cfg["benchmark"] / "cells" / "codyra" / "seed0" / "row3.log").read_text()
    assert all(f"evaluation cache {c}" in row_log for c in caches)  # the rows read them
    # decoding the JPEGs instead gives the same cells, bit for bit
    uncached = load_config({**cfg, "eval": {**cfg["eval"], "cache": False}})
    for record in CLIP.cells(uncached, PRETRAINED, None, 0, [1, 2, 3], "cpu", None):
        stored = json.loads(row0_cell_path(loaded, record["j"]).read_text())
        assert record["accuracy"] == stored["accuracy"] and record["num_samples"] == stored["num_samples"]
    manifests = sorted(p.name for p in (tmp_path / "results" / cfg["benchmark"] / "fewshot").iterdir())
    assert manifests == ["DTD.json", "EuroSAT.json", "MNIST.json"]  # 2-shot subsets pinned once per dataset
    tasks = build_tasks(loaded, ImageConfig(32, (0.5,) * 3, (0.25,) * 3))
    mnist = json.loads(row0_cell_path(loaded, 3).read_text())
    if kind == "mtil":  # classified over its own classes
        assert mnist["num_classes"] == tasks[2].num_classes == 10
    else:  # over the union of every task's classes
        assert mnist["num_classes"] == sum(t.num_classes for t in tasks) > 10
    summary = json.loads(
        (tmp_path / "results" / cfg["benchmark"] / "codyra" / "seed0" / "task2" / "summary.json").read_text()
    )
    assert summary["task"] == "EuroSAT" and summary["steps"] == 3
    assert json.loads(cell_path(loaded, "codyra", 0, 3, 1).read_text())["task"] == "DTD"
    assert (tables_dir(loaded) / "table1.md").is_file()


def test_mini_trace_through_the_grid(tmp_path):
    cfg = copy.deepcopy(TINY_TRACE)
    cfg["results"] = str(tmp_path / "results")
    result = snakemake(tmp_path, cfg, "--cores", "2", "all_tables")
    counts = job_counts(result.stdout + result.stderr)
    assert counts["pretrain_mini"] == 1 and counts["train_lm_task"] == 2 * 2  # two trained methods, two tasks
    loaded = load_config(cfg)
    cell = json.loads(cell_path(loaded, "codyra", 0, 2, 1).read_text())
    assert cell["task"] == "C-STANCE" and 0 <= cell["accuracy"] <= 100 and cell["metric"]
    predictions = cell_path(loaded, "codyra", 0, 2, 1).with_suffix(".predictions.jsonl")
    assert len(predictions.read_text().splitlines()) == cfg["mini"]["test_per_task"]
    table2 = (tables_dir(loaded) / "table2.md").read_text()
    assert "OP" in table2 and "Forgetting" in table2
    assert load_yaml((REPO / "config" / "mini_trace.yaml").read_text())["data"]["kind"] == "trace"
