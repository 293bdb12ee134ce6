"""`codyra status` and `codyra invalidate` on a real finished grid, checked against Snakemake's own plan:
what invalidate removes is exactly what `snakemake -n` then reruns, and a direct `codyra cell` or
`codyra train` names what Snakemake will update."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from codyra.cli import main
from codyra.experiment.config import load_config
from codyra.grid.status import grid_status

from .conftest import REPO, job_counts, snakemake

SNAKEFILE = str(REPO / "workflow" / "Snakefile")


@pytest.fixture
def grid(finished_grid, tmp_path, monkeypatch):
    """A copy of the finished tiny grid (3 methods x 2 seeds x 3 tasks), its config file, and the
    copy as the working directory."""
    workdir, cfg, _ = finished_grid
    copied = tmp_path / "grid"
    shutil.copytree(workdir, copied, symlinks=True)
    cfg = copy.deepcopy(cfg)
    cfg["results"] = str(copied / "results")
    (copied / "config.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(copied)
    return copied, cfg, str(copied / "config.yaml")


def files(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*") if p.is_file()}


def test_status_of_the_finished_grid(grid):
    _, cfg, _ = grid
    state = grid_status(load_config(cfg))
    assert all(r.tasks in ([], ["done"] * 3) and r.rows == ["done"] * 4 and r.matrix == "done" for r in state.runs)
    assert state.row0 == "done" and state.tables["state"] == "done" and state.tables["present"] > 0
    assert (state.failed, state.started, state.eta["jobs"]) == ([], [], {"training": 0, "row": 0})


@pytest.mark.slow
def test_invalidate_removes_exactly_what_snakemake_then_reruns(grid, capsys):
    workdir, cfg, path = grid
    results = Path(cfg["results"])
    run = results / "tiny" / "codyra" / "seed0"
    argv = ["invalidate", "--config", path, "--method", "codyra", "--seed", "0", "--task", "2"]
    before = files(results)
    assert main([*argv, "--snakefile", SNAKEFILE, "--dry-run"]) == 0
    assert files(results) == before and "would remove" in capsys.readouterr().out
    assert main([*argv, "--snakefile", SNAKEFILE]) == 0
    out = capsys.readouterr().out
    removed = before - files(results)
    logs = results / "logs" / "tiny"
    expected = {
        str(run / f"task{i}" / f) for i in (2, 3) for f in ("update.safetensors", "summary.json", "history.jsonl")
    }
    expected |= {str(run / "cells" / f"A_{i}_{j}.json") for i in (2, 3) for j in (1, 2, 3)}
    expected |= {str(run / f) for f in ("matrix.json", "A_heatmap.png", "A_heatmap.pdf")}
    expected |= {str(logs / "train" / "codyra" / "seed0" / f"task{i}.log") for i in (2, 3)}
    expected |= {str(logs / "cells" / "codyra" / "seed0" / f"row{i}.log") for i in (2, 3)}
    expected |= {str(logs / "summarize" / "codyra" / "seed0.log"), str(logs / "tables.log")}
    tables = {f for f in removed if f.startswith((f"{results}/tables/", f"{results}/figures/"))}
    assert removed - tables == expected
    assert {f"{results}/tables/tiny/table1.{ext}" for ext in ("md", "csv", "tex", "html")} <= tables
    assert {f"{results}/figures/tiny/A_codyra.{ext}" for ext in ("png", "pdf")} <= tables
    assert f"remake them: snakemake --cores 2 all_tables --configfile {path}" in out
    counts = job_counts(snakemake(workdir, cfg, "-n", "all_tables").stdout)
    assert counts == {"train_task": 2, "eval_row": 2, "summarize_run": 1, "tables": 1, "all_tables": 1}
    state = grid_status(load_config(cfg))
    codyra = next(r for r in state.runs if (r.method, r.seed) == ("codyra", 0))
    assert (codyra.tasks, codyra.rows, codyra.matrix) == (
        ["done", "missing", "missing"],
        ["done"] * 2 + ["missing"] * 2,
        "missing",
    )
    assert state.started == [] and state.eta["jobs"] == {"training": 2, "row": 2}


def test_a_running_snakemake_keeps_its_files(grid, capsys):
    workdir, cfg, path = grid
    matrix = Path(cfg["results"]) / "tiny" / "codyra" / "seed1" / "matrix.json"
    locks = workdir / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.output.lock").write_text(f"{matrix}\n")
    assert main(["invalidate", "--config", path, "--method", "codyra", "--seed", "1", "--snakefile", SNAKEFILE]) == 2
    assert "a Snakemake run holds this working directory" in capsys.readouterr().err
    assert matrix.is_file()


@pytest.mark.slow
def test_a_direct_cell_or_training_names_what_snakemake_updates(grid, capsys):
    workdir, cfg, path = grid
    run = Path(cfg["results"]) / "tiny" / "codyra" / "seed0"
    assert main(["cell", "--config", path, "--method", "codyra", "--seed", "0", "--i", "1", "--j", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"out of date now (older than what this command wrote): {run}: matrix.json; the tables in "
        f"{cfg['results']}/tables/tiny; update them: snakemake --cores 2 all_tables --configfile {path}"
    )
    assert job_counts(snakemake(workdir, cfg, "-n", "all_tables").stdout) == {
        "summarize_run": 1,
        "tables": 1,
        "all_tables": 1,
    }
    assert main(["train", "--config", path, "--method", "codyra", "--seed", "0", "--task", "2", "--force"]) == 0
    assert f"{run}: task 3, rows 2-3, matrix.json; the tables" in capsys.readouterr().out
    counts = job_counts(snakemake(workdir, cfg, "-n", "all_tables").stdout)
    assert counts == {"train_task": 1, "eval_row": 2, "summarize_run": 1, "tables": 1, "all_tables": 1}


def test_status_reads_the_workflows_logs(grid):
    _, cfg, _ = grid
    results = Path(cfg["results"])
    task = results / "tiny" / "codyra" / "seed1" / "task3"
    for name in ("summary.json", "update.safetensors"):
        (task / name).unlink()  # its log stays: a training started and stopped
    (results / "tiny" / "codyra" / "seed1" / "cells" / "A_3_1.json").unlink()
    with open(results / "logs" / "tiny" / "cells" / "codyra" / "seed1" / "row3.log", "a") as log:
        log.write("Traceback (most recent call last):\n  File x\nRuntimeError: shape mismatch\n")
    (results / "tiny" / "full-ft" / "seed1" / "matrix.json").unlink()
    state = grid_status(load_config(cfg))
    assert [(j.run, j.job, j.error) for j in state.failed] == [
        ("codyra seed 1", "row 3", "RuntimeError: shape mismatch")
    ]
    assert [(j.run, j.job) for j in state.started] == [("full-ft seed 1", "summary"), ("codyra seed 1", "train task 3")]
