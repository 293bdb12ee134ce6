"""A job resolves its methods once, where it starts: past the config's validation (which checks
every method's options), a training job, a row of cells or of held-out accuracies looks its
method's class up one time, whatever it computes, copies or reads back; the tables job and the
grid's status look each method of the grid up one time."""

from __future__ import annotations

from collections import Counter

import pytest

from codyra import methods
from codyra.cli import run_stream
from codyra.evaluation.evaluate import evaluate_row, row_of
from codyra.evaluation.heldout import evaluate_heldout
from codyra.evaluation.tables import write_tables
from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.grid.status import grid_status
from codyra.methods.lora import LoRA
from codyra.store.paths import PRETRAINED


@pytest.fixture
def lookups(monkeypatch):
    """The kinds looked up while a test runs (every resolution of a method goes through method_class)."""
    calls = []
    real = methods.method_class
    monkeypatch.setattr(methods, "method_class", lambda kind: calls.append(kind) or real(kind))
    return calls


def test_a_cell_job_of_a_trained_row_resolves_its_method_once(tiny_run, lookups):
    train_task(tiny_run, "lora-r4", 0, 1)
    lookups.clear()
    evaluate_row(tiny_run, "lora-r4", 0, 1)
    assert lookups == ["lora"]


def test_a_training_job_resolves_its_method_once(tiny_run, lookups):
    lookups.clear()
    train_task(tiny_run, "lora-r4", 0, 1)
    assert lookups == ["lora"]


def test_the_tables_and_the_status_resolve_each_method_once(tiny_run, lookups):
    cfg = load_config({**tiny_run, "tasks": tiny_run["tasks"][:2], "methods": ["zeroshot", "lora-r4"]})
    for method in cfg["methods"]:
        run_stream(cfg, method, 0)
    kinds = Counter(cfg["method_configs"][m]["kind"] for m in cfg["methods"])
    lookups.clear()
    write_tables(cfg)
    assert Counter(lookups) == kinds
    lookups.clear()
    assert grid_status(cfg).tables["state"] == "done"
    assert Counter(lookups) == kinds


def test_a_copied_row_and_a_held_out_row_resolve_theirs_once(tiny_run, lookups):
    lookups.clear()
    evaluate_row(tiny_run, "zeroshot", 0, 2)  # copies row 0, computing it first
    assert lookups == ["zeroshot"]
    cfg = load_config({**tiny_run, "heldout_tasks": ["shape"]})
    train_task(cfg, "lora-r4", 0, 1)
    lookups.clear()
    evaluate_heldout(cfg, "lora-r4", 0, 1)
    assert lookups == ["lora"]


def test_a_row_carries_its_resolved_method_and_the_pretrained_row_none(tiny_cfg):
    row = row_of(tiny_cfg, "lora-r4", 0, 2, [1, 3])
    assert (row.method, row.seed, row.i, row.js, row.kind) == ("lora-r4", 0, 2, (1, 3), LoRA)
    assert row.options.rank == 4
    pretrained = row_of(tiny_cfg, PRETRAINED, None, 0, [1])
    assert pretrained.kind is None and pretrained.spec is None
    with pytest.raises(ValueError, match="no method options"):
        _ = pretrained.options
    with pytest.raises(ValueError, match="unknown method 'nope'; configured: codyra, full-ft"):
        row_of(tiny_cfg, "nope", 0, 1, [1])
