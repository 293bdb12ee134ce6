"""The default target: a bare `snakemake` runs the grid; --rulegraph, --dag and --report see it."""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from codyra.evaluation.tables import output_files
from codyra.experiment.config import load_config

from .conftest import grid_config, job_counts, snakemake

pytestmark = pytest.mark.slow


def test_bare_snakemake_ran_the_whole_grid(finished_grid):
    workdir, cfg, result = finished_grid
    counts = job_counts(
        result.stdout + result.stderr
    )  # the run's plan: the default target, not the first included rule
    assert counts["all_tables"] == counts["tables"] == 1 and counts["train_task"] > 0
    assert (workdir / "results" / "tables" / cfg["benchmark"] / "table1.md").is_file()


def test_the_tables_job_writes_what_it_declares(finished_grid):
    workdir, cfg, _ = finished_grid
    written = {p for folder in ("tables", "figures") for p in (workdir / "results" / folder).rglob("*") if p.is_file()}
    summary = snakemake(workdir, cfg, "--summary").stdout.splitlines()
    declared = {Path(line.split("\t")[0]) for line in summary if line.split("\t")[2:3] == ["tables"]}
    # what status counts and invalidate removes (other targets of the shared grid add their own files)
    assert declared == set(output_files(load_config(cfg))) and declared <= written


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


def embedded_results(html: str) -> list[tuple[str, str, bytes]]:
    """(mime type, file name, content) of every file the self-contained report embeds."""
    uri = r'data:([^;"]+)(?:;[^;,"]+)*?;filename=([^;,"]+);base64,([A-Za-z0-9+/=]+)'
    return [(m.group(1), m.group(2), base64.b64decode(m.group(3))) for m in re.finditer(uri, html)]


def test_report_of_the_finished_grid_contains_the_tables_and_runs(finished_grid, tmp_path):
    workdir, cfg, _ = finished_grid
    report = tmp_path / "report.html"
    snakemake(workdir, cfg, "--report", str(report))
    html = report.read_text()
    embedded = embedded_results(html)
    tables = workdir / "results" / "tables" / cfg["benchmark"]
    names = ["table1", "forgetting", *(f"A_{m}" for m in cfg["methods"])]
    for name in names:  # each table rendered once, byte for byte the file the tables job wrote
        assert [content for mime, file, content in embedded if file == f"{name}.html"] == [
            (tables / f"{name}.html").read_bytes()
        ]
    assert b"Transfer" in (tables / "table1.html").read_bytes()
    runs = len(cfg["methods"]) * len(cfg["seeds"])
    figures = sorted(file for mime, file, _ in embedded if mime == "image/png")
    comparisons = ["comparison_last_forgetting.png", "comparison_per_task.png"]
    assert figures == sorted([*comparisons, *(f"A_{m}.png" for m in cfg["methods"])])  # a heatmap per method
    assert sum(file == "matrix.json" for _, file, _ in embedded) == runs
    categories = json.loads(re.search(r"var categories = (\{.*?\});?\n", html).group(1))
    assert set(categories) == {cfg["benchmark"]}  # one category per benchmark
    # in reading order (the report sorts subcategories by name, results by their labels): the paper's
    # tables, Table 1 first, the comparison figures, then a subcategory per method
    subcategories = categories[cfg["benchmark"]]
    assert sorted(subcategories) == ["1. tables", "2. comparison figures", *sorted(cfg["methods"])]
    results = json.loads(re.search(r"var results = (\{.*?\});?\n", html).group(1))
    order = sorted(subcategories["1. tables"], key=lambda path: results[path]["labels"]["table"])
    assert [path.rsplit("/", 1)[-1] for path in order] == ["table1.html", "forgetting.html"]
    method = cfg["methods"][0]
    assert sorted(results[path]["labels"]["result"] for path in subcategories[method]) == [
        "A heatmap",
        "A table",
        *["matrix (JSON)"] * len(cfg["seeds"]),
    ]
    assert "best mean of each column within a block" in html  # table1's caption (workflow/report/tables/)
