"""benchmarks/default_grid_time.py reads a finished grid's folder as the tables job does."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import load_benchmark


def test_the_benchmark_reads_every_job_and_matrix_of_a_finished_grid(finished_grid, tmp_path):
    _, cfg, _ = finished_grid
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(cfg))

    figures, matrices = load_benchmark("default_grid_time").read_grid(Path(cfg["results"]), configfile)

    tasks, seeds = len(cfg["tasks"]), len(cfg["seeds"])
    assert figures["jobs"]["train"] == 2 * seeds * tasks  # codyra and full-ft train; zeroshot does not
    assert figures["seconds"]["train_steps"] > 0 and figures["seconds"]["eval"] > 0
    assert set(matrices) == set(cfg["methods"])
    for runs in matrices.values():
        assert sorted(run["seed"] for run in runs) == cfg["seeds"]
        assert all(len(run["A"]) == tasks + 1 for run in runs)  # rows 0 (zero-shot) to T
