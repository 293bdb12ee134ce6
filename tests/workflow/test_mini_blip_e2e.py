"""The mini BLIP end to end through Snakemake: its own theta_0 pretrained by the workflow, the
stream trained and evaluated on it, and the paper's BLIP table written (tiny sizes)."""

from __future__ import annotations

import pytest

from codyra.yaml_loader import load_yaml

from .conftest import REPO, grid_config, job_counts, snakemake

pytestmark = pytest.mark.slow


def test_the_mini_blip_grid_pretrains_its_theta0_and_writes_the_blip_table(tmp_path):
    shipped = load_yaml((REPO / "config" / "mini_blip.yaml").read_text())
    cfg = grid_config(
        tmp_path,
        benchmark="mini-blip",
        model=shipped["model"],
        methods=["zeroshot", "codyra"],
        seeds=[0],
        tasks=["colour", "digits"],
        heldout_tasks=[],
    )
    cfg["train"]["iterations"] = 3
    planned = job_counts(snakemake(tmp_path, cfg, "-n", "all_tables").stdout)
    assert (planned["pretrain_mini"], planned["train_task"], planned["tables"]) == (1, 2, 1)
    snakemake(tmp_path, cfg, "--cores", "2", "all_tables")
    results = tmp_path / "results"
    assert (results / "mini-blip" / "pretrain" / "tokenizer.json").is_file()  # a Hugging Face model folder
    table = (results / "tables" / "mini-blip" / "blip.md").read_text()
    rows = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")}
    assert {"Zero-shot", "CoDyRA"} <= rows
    assert "not-run" not in table and "nan" not in table.lower()
