"""A task folder is checked against where it sits: one copied from another task, or trained
from other updates than those before it, is refused by every job that reads it."""

from __future__ import annotations

import shutil

import pytest

from codyra.analysis.common import run_summaries
from codyra.cli import main, run_stream
from codyra.evaluation.evaluate import evaluate_cell
from codyra.evaluation.results import summarize_run
from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.store.io import ResultError, read_json
from codyra.store.paths import SUMMARY_FILE, cell_path, task_dir
from codyra.store.updates import load_update, stored_update
from tests.conftest import write_yaml

METHOD = "lora-r4"


@pytest.fixture
def grid(tiny_cfg_dict, tiny_pretrained, tmp_path):
    """A finished two-task run of lora-r4 (seed 0) and its config file."""
    raw = {**tiny_cfg_dict, "tasks": tiny_cfg_dict["tasks"][:2], "methods": [METHOD], "tracking": {"enabled": False}}
    raw["model"] = {**raw["model"], "pretrained": str(tiny_pretrained)}
    cfg = load_config(raw)
    run_stream(cfg, METHOD, 0)
    return cfg, write_yaml(tmp_path / "grid.yaml", raw)


def test_summary_records_where_the_update_sits(grid):
    cfg, _ = grid
    first, second = (read_json(task_dir(cfg, METHOD, 0, i) / SUMMARY_FILE) for i in (1, 2))
    assert (first["benchmark"], first["method"], first["seed"], first["task_index"]) == ("tiny", METHOD, 0, 1)
    assert first["previous_updates"] == [] and second["previous_updates"] == [first["update_digest"]]


def test_task_folder_copied_over_another_task_is_refused_by_cells_summarize_training_and_analyses(grid, capsys):
    cfg, config_file = grid
    task1, task2 = task_dir(cfg, METHOD, 0, 1), task_dir(cfg, METHOD, 0, 2)
    shutil.rmtree(task1)
    shutil.copytree(task2, task1)
    load_update(task1)  # update and summary still match each other: the digest alone cannot tell
    cell = cell_path(cfg, METHOD, 0, 1, 1)
    computed = cell.read_text()  # A[1,1] of the true task 1, computed before the copy

    claim = (
        rf"task folder {task1} does not belong where it sits: "
        r"summary.json claims task_index 2, previous_updates \['[0-9a-f]{64}'\]; "
        r"expected task_index 1, previous_updates \[\]"
    )
    with pytest.raises(ResultError, match=claim):
        evaluate_cell(cfg, METHOD, 0, 1, 1)
    assert main(["cell", "--config", config_file, "--method", METHOD, "--seed", "0", "--i", "1", "--j", "1"]) == 2
    err = capsys.readouterr().err
    assert str(task1) in err and "claims task_index 2" in err and f"snakemake -f {task1 / 'update.safetensors'}" in err
    assert cell.read_text() == computed

    with pytest.raises(ResultError, match=claim):
        summarize_run(cfg, METHOD, 0)  # its cells predate the copy: no matrix beside a misplaced update either
    with pytest.raises(ResultError, match=claim):
        train_task(cfg, METHOD, 0, 2)
    with pytest.raises(ResultError, match=claim):
        run_summaries(cfg, METHOD, 0)
    with pytest.raises(ResultError, match=claim):
        stored_update(cfg, METHOD, 0, 1)


def test_update_trained_from_other_earlier_updates_is_refused(grid):
    cfg, _ = grid
    recorded = read_json(task_dir(cfg, METHOD, 0, 2) / SUMMARY_FILE)["previous_updates"]
    train_task({**cfg, "train": {**cfg["train"], "lr": 0.03}}, METHOD, 0, 1)  # task 1 retrained alone, out of band
    retrained = read_json(task_dir(cfg, METHOD, 0, 1) / SUMMARY_FILE)["update_digest"]
    assert [retrained] != recorded
    with pytest.raises(
        ResultError,
        match=(
            r"task2 does not belong where it sits: summary.json claims previous_updates .* "
            r"\(the updates of the tasks before it changed"
        ),
    ):
        evaluate_cell(cfg, METHOD, 0, 2, 1)
    evaluate_cell(cfg, METHOD, 0, 1, 1)  # task 1 itself sits where it belongs

    train_task(cfg, METHOD, 0, 2)  # retrained from the new task 1: accepted again
    assert read_json(task_dir(cfg, METHOD, 0, 2) / SUMMARY_FILE)["previous_updates"] == [retrained]
    evaluate_cell(cfg, METHOD, 0, 2, 1)
