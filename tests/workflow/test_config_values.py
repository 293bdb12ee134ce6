"""Snakemake's --config values reach the workflow as a config file's values would (YAML 1.2 numbers)."""

from __future__ import annotations

from .conftest import grid_config, job_counts, snakemake


def test_command_line_config_values_are_typed(tmp_path):
    cfg = grid_config(tmp_path, seeds=[0, 1])
    args = ("-n", "all_tables", "--config", "seeds=[0]", "train={lr: 1e-3, iterations: 2}", "check_data=false")
    out = snakemake(tmp_path, cfg, *args).stdout
    counts = job_counts(out)
    assert counts["summarize_run"] == len(cfg["methods"])  # one seed: the list [0], not the string "[0]"
    assert "seed0/matrix.json" in out and "seed1/" not in out
