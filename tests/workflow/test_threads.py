"""A job runs on the config's thread count whatever cores Snakemake allots: on a CPU the count
changes a reduction's order, so `--cores 1` must compute what `--cores 2` computes."""

from __future__ import annotations

import json

import pytest

from codyra.experiment.config import load_config
from codyra.store.paths import task_dir

from .conftest import grid_config, snakemake


@pytest.mark.slow
def test_a_training_job_uses_the_configs_threads_below_its_allotment(tmp_path):
    cfg = grid_config(tmp_path, methods=["codyra"], seeds=[0])
    cfg["train"]["threads"] = 2
    target = task_dir(load_config(cfg), "codyra", 0, 1) / "summary.json"
    snakemake(tmp_path, cfg, "--cores", "1", str(target))  # Snakemake caps the rule's 2 threads at 1 core
    assert json.loads(target.read_text())["torch_threads"] == 2
