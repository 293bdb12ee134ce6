"""A row job that fails keeps the cells it finished: its retry computes only the rest.

Snakemake deletes a failed job's outputs; the row's partial folder (outside them) keeps each
finished cell and its predictions, keyed by the row's settings and updates, so a changed setting
or a retrained update recomputes everything."""

from __future__ import annotations

import json

import pytest

from codyra.clip import evaluate as clip_evaluate
from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.store.paths import PRETRAINED, cell_path, row0_cell_path, run_dir

TIMES = {"seconds"}  # what differs between two computations of the same cell


class Killed(RuntimeError):
    """The job's end in the middle of a row (a timeout, a node failure)."""


def counting(monkeypatch, module, name: str, kill_after: int | None = None) -> list:
    """Record each call of ``module.name`` (the family's computation of one cell); with
    ``kill_after``, the call after that many raises as a killed job would stop."""
    calls, original = [], getattr(module, name)

    def wrapped(*args, **kwargs):
        if kill_after is not None and len(calls) == kill_after:
            raise Killed("the job ended here")
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


def outputs(paths) -> dict:
    """Each file's content, its cell JSON without the timings."""
    found = {}
    for path in paths:
        if path.suffix == ".json":
            found[path.name] = {k: v for k, v in json.loads(path.read_text()).items() if k not in TIMES}
        else:
            found[path.name] = path.read_text()
    return found


def row_files(cells_folder, i: int) -> list:
    return sorted(cells_folder.glob(f"A_{i}_*"))


def fail_then_retry(cfg, method, seed, i, monkeypatch, module, name):
    """Row i killed after its first cell; its outputs deleted as Snakemake does; the retry's computed cells."""
    with monkeypatch.context() as patch:
        counting(patch, module, name, kill_after=1)
        with pytest.raises(Killed):
            evaluate_row(cfg, method, seed, i)
    folder = (row0_cell_path(cfg, 1) if method == PRETRAINED else cell_path(cfg, method, seed, i, 1)).parent
    assert [p.name for p in row_files(folder, i) if p.suffix == ".json"] == [f"A_{i}_1.json"]
    for path in row_files(folder, i):  # Snakemake removes the outputs of the failed job
        path.unlink()
    with monkeypatch.context() as patch:
        calls = counting(patch, module, name)
        evaluate_row(cfg, method, seed, i)
    return folder, calls


@pytest.mark.slow
def test_a_clip_row_killed_after_its_first_cell_reruns_only_the_rest(tiny_run, tmp_path, monkeypatch):
    cfg = tiny_run
    train_task(cfg, "lora-r4", 0, 1)
    folder, calls = fail_then_retry(cfg, "lora-r4", 0, 1, monkeypatch, clip_evaluate, "hits_on_task")
    assert [args[2] for args in calls] == [2, 3]  # hits_on_task(bundle, tasks, j, ...): cell 1 was kept
    assert not (run_dir(cfg, "lora-r4", 0) / "partial").exists()  # the whole row is in place: nothing kept

    whole = load_config({**cfg, "results": str(tmp_path / "uninterrupted")})
    whole["model"]["pretrained"] = cfg["model"]["pretrained"]
    train_task(whole, "lora-r4", 0, 1)
    evaluate_row(whole, "lora-r4", 0, 1)
    assert outputs(row_files(folder, 1)) == outputs(row_files(cell_path(whole, "lora-r4", 0, 1, 1).parent, 1))


def test_the_pretrained_row_keeps_its_cells_too(tiny_run, monkeypatch):
    folder, calls = fail_then_retry(tiny_run, PRETRAINED, None, 0, monkeypatch, clip_evaluate, "hits_on_task")
    assert [args[2] for args in calls] == [2, 3]
    assert len(row_files(folder, 0)) == 3


@pytest.mark.slow
@pytest.mark.parametrize(
    "section, key, value",
    [("eval", "batch_size", 32), ("train", "lr", 0.01)],  # an evaluation setting; the training of the update
    ids=["evaluation-setting", "retrained-update"],
)
def test_a_changed_setting_recomputes_every_cell_of_the_row(tiny_run, monkeypatch, section, key, value):
    cfg = tiny_run
    train_task(cfg, "lora-r4", 0, 1)
    with monkeypatch.context() as patch:
        counting(patch, clip_evaluate, "hits_on_task", kill_after=1)
        with pytest.raises(Killed):
            evaluate_row(cfg, "lora-r4", 0, 1)
    (kept,) = (run_dir(cfg, "lora-r4", 0) / "partial" / "row1").iterdir()  # cell 1 of the failed attempt
    changed = {**cfg, section: {**cfg[section], key: value}}
    if section == "train":
        train_task(changed, "lora-r4", 0, 1)
    calls = counting(monkeypatch, clip_evaluate, "hits_on_task")
    evaluate_row(changed, "lora-r4", 0, 1)
    assert [args[2] for args in calls] == [1, 2, 3]
    assert not kept.exists()
