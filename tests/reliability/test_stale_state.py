"""Results of other settings are never resumed, mixed or labelled as this config's."""

from __future__ import annotations

import logging

import pytest
import torch

from codyra.cli import run, run_stream
from codyra.evaluation.evaluate import evaluate_cell
from codyra.evaluation.results import summarize_run
from codyra.evaluation.tables import write_tables
from codyra.experiment.fingerprints import expected_cell_fingerprints, train_fingerprint
from codyra.experiment.train_job import train_task
from codyra.methods.lora import LoRA
from codyra.store.io import ResultError, read_json
from codyra.store.paths import SUMMARY_FILE, cell_path, task_dir
from codyra.store.updates import load_update


class Killed(Exception):
    pass


def kill_at(step):
    def hook(s):
        if s == step:
            raise Killed

    return hook


def test_changed_hyperparameter_discards_the_checkpoint_instead_of_resuming(tiny_run, tmp_path, caplog):
    tiny_run["tracking"]["enabled"] = False
    with pytest.raises(Killed):
        train_task(tiny_run, "lora-r4", 0, 1, on_step=kill_at(5))  # checkpoint at step 4, lr 0.003
    changed = {**tiny_run, "train": {**tiny_run["train"], "lr": 0.03}}
    with caplog.at_level(logging.WARNING, logger="codyra.store.checkpoints"):
        resumed = train_task(changed, "lora-r4", 0, 1)
    assert "discarding checkpoint" in caplog.text and "other settings" in caplog.text
    assert resumed.summary["steps"] == 6 and resumed.summary["job"]["train"]["lr"] == 0.03
    assert (
        resumed.summary["settings"]
        == train_fingerprint(changed, "lora-r4", 1)
        != train_fingerprint(tiny_run, "lora-r4", 1)
    )

    fresh = {**changed, "results": str(tmp_path / "fresh")}
    train_task(fresh, "lora-r4", 0, 1)  # never killed, lr 0.03 throughout
    a, b = (load_update(task_dir(c, "lora-r4", 0, 1)).tensors for c in (changed, fresh))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_tables_refuse_results_of_an_out_of_band_retraining(tiny_run):
    cfg = {
        **tiny_run,
        "tasks": tiny_run["tasks"][:2],
        "methods": ["lora-r4"],
        "tracking": {**tiny_run["tracking"], "enabled": False},
    }
    run_stream(cfg, "lora-r4", 0)
    write_tables(cfg)  # every cell has the config's settings

    # codyra train --set into a grid path: task 2 now has other settings; its cells are recomputed
    run(["train", "--method", "lora-r4", "--seed", "0", "--task", "2", "--set", "train.lr=3e-2"], config=cfg)
    assert read_json(task_dir(cfg, "lora-r4", 0, 2) / SUMMARY_FILE)["job"]["train"]["lr"] == 0.03
    for j in (1, 2):
        evaluate_cell(cfg, "lora-r4", 0, 2, j)
    summarize_run(cfg, "lora-r4", 0)
    with pytest.raises(
        ResultError, match=r"other settings than this config.*lora-r4/seed0 \(cells A_2_1, A_2_2; first stale row i=2\)"
    ):
        write_tables(cfg)

    assert read_json(task_dir(cfg, "lora-r4", 0, 2) / SUMMARY_FILE)["settings"] != train_fingerprint(cfg, "lora-r4", 2)

    train_task(cfg, "lora-r4", 0, 2)  # rerun from the config: the tables accept the run again
    for j in (1, 2):
        evaluate_cell(cfg, "lora-r4", 0, 2, j)
    summarize_run(cfg, "lora-r4", 0)
    write_tables(cfg)
    assert read_json(task_dir(cfg, "lora-r4", 0, 2) / SUMMARY_FILE)["settings"] == train_fingerprint(cfg, "lora-r4", 2)
    assert (
        read_json(cell_path(cfg, "lora-r4", 0, 2, 1))["settings"]
        == expected_cell_fingerprints(cfg, "lora-r4", LoRA)[2][0]
    )
