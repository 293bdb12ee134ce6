"""`codyra status` on a half-finished results folder written here, and what `codyra invalidate`
refuses before it asks the workflow anything (tests/workflow/test_grid_commands.py runs both on a
real grid)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codyra.cli import main
from codyra.experiment.fingerprints import expected_cell_fingerprints, train_fingerprint
from codyra.grid.invalidate import outdated_by, selected_paths
from codyra.grid.status import grid_status, render
from codyra.methods import method_of
from codyra.methods.codyra import CoDyRA
from codyra.store.paths import cell_path, row0_cell_path, run_dir, tables_dir, task_dir

from ..conftest import write_yaml

LOGS = "logs/tiny"


@pytest.fixture
def grid_yaml(tmp_path, tiny_cfg_dict):
    """The tiny grid's config file: 3 methods x 2 seeds, 3 tasks."""
    tiny_cfg_dict.update(methods=["zeroshot", "codyra", "full-ft"], seeds=[0, 1])
    return write_yaml(tmp_path / "grid.yaml", tiny_cfg_dict)


@pytest.fixture
def grid(grid_yaml):
    from codyra.experiment.config import load_config

    return load_config(grid_yaml)


def write(path, obj, mtime=None):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def train(cfg, method, seed, i, seconds, settings=None, mtime=1000.0):
    """Task i's files as a training writes them: its update and a summary chained to the tasks before."""
    folder = task_dir(cfg, method, seed, i)
    previous = [json.loads((task_dir(cfg, method, seed, k) / "summary.json").read_text()) for k in range(1, i)]
    summary = {
        "settings": settings or train_fingerprint(cfg, method, i),
        "previous_updates": [p["update_digest"] for p in previous],
        "update_digest": f"{method}{seed}-{i}",
        "seconds": seconds,
    }
    write(folder / "update.safetensors", "", mtime)
    write(folder / "summary.json", summary, mtime)


def evaluate(cfg, method, seed, i, seconds, mtime=2000.0, copied=False):
    """Row i's cells as a row job writes them (a copy of row 0: no seconds of its own)."""
    expected = expected_cell_fingerprints(cfg, method, method_of(cfg, method))
    for j in range(1, len(cfg["tasks"]) + 1):
        cell = {"accuracy": 50.0, "settings": expected[i][j - 1], "seconds": seconds}
        if copied:
            cell["copied_from"] = str(row0_cell_path(cfg, j))
        write(cell_path(cfg, method, seed, i, j), cell, mtime)


def half_finished(cfg):
    """codyra seed 0 done; codyra seed 1 after task 1 (task 2 stale, task 3 failed); full-ft failed on
    the cluster (seed 0) and started (seed 1); zeroshot's copies made for seed 0 only."""
    results = cfg["results"]
    for j in range(1, 4):  # the shared row 0: 3 s per cell, computed
        write(
            row0_cell_path(cfg, j),
            {"settings": expected_cell_fingerprints(cfg, "codyra", CoDyRA)[0][j - 1], "seconds": 3.0},
        )
    for i, seconds in enumerate((10.0, 20.0, 30.0), 1):
        train(cfg, "codyra", 0, i, seconds)
    for i in range(4):
        evaluate(cfg, "codyra", 0, i, 1.0, copied=i == 0)
    write(run_dir(cfg, "codyra", 0) / "matrix.json", {}, 3000.0)
    train(cfg, "codyra", 1, 1, 40.0)
    train(cfg, "codyra", 1, 2, 50.0, settings="another-lr")
    evaluate(cfg, "codyra", 1, 0, 1.0, copied=True)
    evaluate(cfg, "codyra", 1, 1, 2.0)
    evaluate(cfg, "codyra", 1, 2, 1.5)  # computed from the stale task 2
    write(
        f"{results}/{LOGS}/train/codyra/seed1/task3.log",
        "x 1/6\nTraceback (most recent call last):\n  File a\n    f()\nValueError: boom\n",
    )
    log = f"{results}/{LOGS}/train/full-ft/seed0/task1.log"
    write(log, "Traceback (most recent call last):\n  File b\nRuntimeError: CUDA out of memory\n")
    write(
        f"{results}/{LOGS}/failed-jobs/0123.json", {"log": log, "error": "OutOfMemoryError: CUDA out of memory.\nmore"}
    )
    write(f"{results}/{LOGS}/train/full-ft/seed1/task1.log", "full-ft/seed1/task1 colour: 2/6 (33%)\n")
    for i in range(4):
        evaluate(cfg, "zeroshot", 0, i, 0.0, copied=True)
    write(f"{results}/{LOGS}/cells/zeroshot/seed0/row2.log", "copied\n")  # a finished job's log


def test_status_of_a_half_finished_grid(grid, capsys):
    half_finished(grid)
    state = grid_status(grid)
    runs = {(r.method, r.seed): r for r in state.runs}
    assert runs["codyra", 0].tasks == ["done"] * 3 and runs["codyra", 0].cells == 12
    assert runs["codyra", 0].matrix == "done"
    assert runs["codyra", 1].tasks == ["done", "stale", "missing"]
    assert runs["codyra", 1].rows == ["done", "done", "stale", "missing"]
    assert (runs["codyra", 1].cells, runs["codyra", 1].stale_cells) == (6, 3)
    assert (runs["zeroshot", 0].cells, runs["zeroshot", 0].matrix, runs["zeroshot", 0].left) == (
        12,
        "missing",
        {"training": 0, "row": 0},
    )
    assert runs["full-ft", 1].left == {"training": 3, "row": 3}
    assert state.row0 == "done"
    failed = {(j.run, j.job): (j.error, j.log) for j in state.failed}
    assert failed == {
        ("codyra seed 1", "train task 3"): (
            "ValueError: boom",
            f"{grid['results']}/{LOGS}/train/codyra/seed1/task3.log",
        ),
        ("full-ft seed 0", "train task 1"): (
            "OutOfMemoryError: CUDA out of memory.",  # the failure record's first line
            f"{grid['results']}/{LOGS}/train/full-ft/seed0/task1.log",
        ),
    }
    assert [(j.run, j.job) for j in state.started] == [("full-ft seed 1", "train task 1")]
    # trainings: codyra's own mean (10+20+30+40+50)/5 = 30 s x 2 left; full-ft has none finished: every
    # method's (the same 30 s) x 6 left. rows: codyra's (3+3+3+6+4.5)/5 = 3.9 s x 2 left; full-ft every
    # row's, the pretrained row 0 (9 s) included: (19.5+9)/6 = 4.75 s x 6 left
    assert state.eta == {
        "seconds": pytest.approx(2 * 30 + 6 * 30 + 2 * 3.9 + 6 * 4.75),
        "jobs": {"training": 8, "row": 8},
        "without_timing": {"training": 0, "row": 0},
    }
    text = render(state)
    lines = text.splitlines()
    assert lines[1:9] == [
        "method    seed  trained         cells            matrix  failed  started",
        "zeroshot  0     -               12/12            -",
        "zeroshot  1     -               0/12             -",
        "codyra    0     3/3             12/12            yes",
        "codyra    1     1/3 (1 stale)   6/12 (3 stale)   -       1",
        "full-ft   0     0/3             0/12             -       1",
        "full-ft   1     0/3             0/12             -               1",
        "total           4/12 (1 stale)  30/72 (3 stale)  1/6     2       1",
    ]
    # 5 tables x 4 formats, 4 of them also wide, 5 figures (3 heatmaps, 2 comparisons) x 2 formats, the summary
    assert lines[9] == "pretrained row 0: done; tables: 0/35 files, missing"
    log = f"{grid['results']}/{LOGS}/train/codyra/seed1/task3.log"
    assert lines[11] == f"  codyra seed 1 train task 3: ValueError: boom (log {log})"
    assert lines[14] == f"  full-ft seed 1 train task 1 (log {grid['results']}/{LOGS}/train/full-ft/seed1/task1.log)"
    assert "serial compute remaining: 4 min 36 s for 8 trainings and 8 rows" in text  # 276.3 s
    assert (
        len(lines) == 1 + 1 + 6 + 1 + 1 + 3 + 2 + 1
    )  # header, columns, runs, total, row 0 and tables, failed, started, ETA


def test_a_file_the_grid_would_recompute_is_stale(grid):
    half_finished(grid)
    update = task_dir(grid, "codyra", 0, 3) / "update.safetensors"
    os.utime(update, (2500.0, 2500.0))  # task 3 retrained after its row's cells were written
    run = next(r for r in grid_status(grid).runs if (r.method, r.seed) == ("codyra", 0))
    assert run.rows == ["done", "done", "done", "stale"] and run.matrix == "stale"
    assert run.left == {"training": 0, "row": 1}
    summary = task_dir(grid, "codyra", 0, 1) / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "settings": "old"}))
    run = next(r for r in grid_status(grid).runs if (r.method, r.seed) == ("codyra", 0))
    assert run.tasks == ["stale"] * 3 and run.cells == 3  # only row 0's copies stay


def test_status_command_json_and_no_torch(grid, grid_yaml):
    half_finished(grid)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "codyra.cli", "status", "--config", grid_yaml, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    state = json.loads(done.stdout)
    assert state["eta"]["jobs"] == {"training": 8, "row": 8} and len(state["failed"]) == 2
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "codyra.grid.status" in imported and not {"torch", "open_clip", "transformers"} & imported


def test_time_left_without_finished_jobs_of_a_kind(grid):
    for j in range(1, 4):
        write(row0_cell_path(grid, j), {"settings": "old", "seconds": 2.0})  # computed, now stale
    state = grid_status(grid)
    assert state.row0 == "stale" and (state.tables["present"], state.tables["state"]) == (0, "missing")
    # no training finished anywhere: 2 methods x 2 seeds x 3 tasks unknown; every row left (codyra's and
    # full-ft's 2 x 2 x 3, and row 0) at the one row timed, row 0's 6 s
    assert state.eta == {
        "seconds": 13 * 6.0,
        "jobs": {"training": 12, "row": 13},
        "without_timing": {"training": 12, "row": 0},
    }
    assert render(state).splitlines()[-1] == (
        "serial compute remaining: 1 min 18 s for 12 trainings and 13 rows (each method's mean recorded seconds "
        "per finished job; loading, queueing and jobs side by side not counted); not estimated: 12 training(s) "
        "(none of their kind finished yet)"
    )


@pytest.mark.parametrize(
    "selection, message",
    [
        (("seqlora-r4", 0, None, None), "method 'seqlora-r4' is not in the grid"),
        (("codyra", 5, None, None), "seed 5 is not one of the grid's seeds [0, 1]"),
        (("codyra", None, 2, None), "give its --seed too"),
        (("codyra", 0, 4, None), "task 4 out of range 1..3"),
        (("zeroshot", 0, 1, None), "method 'zeroshot' never trains"),
        (("codyra", 0, None, [4, 1]), r"cell A[4, 1] out of range: i in 0..3"),
        (("pretrained", 0, None, None), "give no --seed"),
        (("pretrained", None, None, [1, 1]), "only has cells A[0, j]"),
    ],
)
def test_invalidate_refuses_what_is_not_the_grids(grid, selection, message):
    with pytest.raises(ValueError) as err:
        selected_paths(grid, *selection)
    assert message in str(err.value)


def test_invalidate_names_files_and_folders(grid):
    results = grid["results"]
    assert selected_paths(grid, "codyra", None, None, None) == [f"{results}/tiny/codyra"]
    assert selected_paths(grid, "codyra", 1, None, None) == [f"{results}/tiny/codyra/seed1"]
    assert selected_paths(grid, "codyra", 1, 2, None) == [f"{results}/tiny/codyra/seed1/task2"]
    assert selected_paths(grid, "codyra", 1, None, [2, 3]) == [f"{results}/tiny/codyra/seed1/cells/A_2_3.json"]
    assert selected_paths(grid, "pretrained", None, None, [0, 2]) == [f"{results}/tiny/pretrained/cells/A_0_2.json"]


def test_what_a_direct_run_leaves_out_of_date(grid):
    half_finished(grid)
    run0 = run_dir(grid, "codyra", 0)
    assert outdated_by(grid, "codyra", 0, task=2) == [f"{run0}: task 3, rows 2-3, matrix.json"]
    assert outdated_by(grid, "codyra", 0) == [f"{run0}: matrix.json"]  # a cell: the matrix that reads it
    assert outdated_by(grid, "codyra", 1, task=3) == []  # nothing after it exists
    tables_dir(grid).mkdir(parents=True)
    (tables_dir(grid) / "notes.txt").write_text("")  # not a file of the tables job
    assert outdated_by(grid, "codyra", 0) == [f"{run0}: matrix.json"]
    (tables_dir(grid) / "table1.md").write_text("")
    assert outdated_by(grid, "pretrained", None) == [
        f"{run_dir(grid, 'zeroshot', 0)}: row 0",
        f"{run0}: row 0, matrix.json",
        f"{run_dir(grid, 'codyra', 1)}: row 0",
        f"the tables in {tables_dir(grid)}",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--seed", "0", "--task", "1"],
        ["cell", "--seed", "0", "--i", "1"],
        ["heldout", "--seed", "0", "--i", "1"],
        ["summarize", "--seed", "0"],
        ["run", "--seed", "0"],
        ["sweep", "--grid", "kappa_max=0.1"],
        ["probe", "--seed", "0"],
        ["analysis", "rank"],
        ["invalidate", "--seed", "0"],
    ],
)
def test_every_command_names_an_unknown_method_and_the_nearest(grid_yaml, tmp_path, capsys, argv):
    assert main([argv[0], "--config", grid_yaml, "--method", "codyr", *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codyra: error: unknown method 'codyr' (did you mean 'codyra'?); configured: "), err
    assert ("pretrained" in err) == (argv[0] in ("cell", "heldout", "invalidate"))  # the shared row 0's name
    assert not (tmp_path / "results").exists()  # refused before any work


def test_invalidate_without_the_workflow_extra_names_it(grid_yaml):
    code = (
        "import sys; sys.modules['snakemake'] = None; from codyra.cli import main; raise SystemExit(main(sys.argv[1:]))"
    )
    argv = ["invalidate", "--config", grid_yaml, "--method", "codyra"]
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "needs the package 'snakemake'" in done.stderr
    assert "pip install 'codyra[workflow]'" in done.stderr
