"""The mini TRACE through the grid with a tiny LLaMA. (MTIL and X-TAIL run through the grid in the
rehearsals of their paper configs, tests/rehearsal/, on fixture copies of their datasets.)"""

from __future__ import annotations

import copy
import json

import pytest

from codyra.experiment.config import load_config
from codyra.store.paths import cell_path, tables_dir
from codyra.yaml_loader import load_yaml
from tests.llm.conftest import TINY_TRACE

from .conftest import REPO, job_counts, snakemake

pytestmark = pytest.mark.slow


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
