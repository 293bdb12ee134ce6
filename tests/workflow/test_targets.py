"""The default target: a bare `snakemake` runs the grid; --rulegraph, --dag and --report see it."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from .conftest import grid_config, job_counts, snakemake

pytestmark = pytest.mark.slow


def test_bare_snakemake_ran_the_whole_grid(finished_grid):
    workdir, cfg, result = finished_grid
    assert "all_tables" in result.stdout + result.stderr  # the default target, not the first included rule
    assert (workdir / "results" / "tables" / cfg["benchmark"] / "table1.md").is_file()
    assert "Nothing to be done" in snakemake(workdir, cfg, "-n").stdout


def rule_of_each_node(dot: str) -> list[str]:
    return re.findall(r'^\s*\d+\[label = "([\w]+)', dot, re.MULTILINE)


def test_graphs_of_the_default_target(tmp_path):
    cfg = grid_config(tmp_path)
    jobs = job_counts(snakemake(tmp_path, cfg, "-n").stdout)
    assert jobs["all_tables"] == 1
    rules = rule_of_each_node(snakemake(tmp_path, cfg, "--rulegraph").stdout)
    assert sorted(rules) == sorted(jobs)  # one node per rule of the default target's DAG
    dag = Counter(rule_of_each_node(snakemake(tmp_path, cfg, "--dag").stdout))
    assert dag == jobs  # one node per job
    assert not (tmp_path / "results").exists()


def test_report_of_the_finished_grid(finished_grid, tmp_path):
    workdir, cfg, _ = finished_grid
    report = tmp_path / "report.html"
    snakemake(workdir, cfg, "--report", str(report))
    assert report.stat().st_size > 10_000
