"""A full disk or an unwritable results folder stops a job before its work with one line naming
the folder; a failed checkpoint write leaves no temporary folder behind."""

from __future__ import annotations

import errno
import logging
import os

import pytest

import codyra.store.checkpoints
import codyra.store.io
from codyra.cli import main
from codyra.errors import NotWritableError
from codyra.evaluation.evaluate import evaluate_cell
from codyra.experiment.config import load_config
from codyra.experiment.train_job import task_checkpoint_dir, train_task
from codyra.store.paths import HISTORY_FILE, cell_path, task_dir
from tests.conftest import write_yaml

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FullDisk:
    """``os`` as codyra.store.io sees it on a full disk: files are created, no byte is written."""

    def write(self, fd, data):
        raise ENOSPC

    def __getattr__(self, name):
        return getattr(os, name)


@pytest.fixture
def config_file(tiny_cfg_dict, tiny_pretrained, tmp_path):
    raw = {**tiny_cfg_dict, "tracking": {"enabled": False}}
    raw["model"] = {**raw["model"], "pretrained": str(tiny_pretrained)}
    return load_config(raw), write_yaml(tmp_path / "c.yaml", raw)


def test_a_full_disk_stops_training_and_evaluation_before_their_work(config_file, monkeypatch, capsys):
    cfg, path = config_file
    monkeypatch.setattr(codyra.store.io, "os", FullDisk())
    steps = []
    folder = task_dir(cfg, "lora-r4", 0, 1)
    with pytest.raises(
        NotWritableError, match=rf"cannot write results to {folder}: No space left on device\. Free space there"
    ):
        train_task(cfg, "lora-r4", 0, 1, on_step=steps.append)
    assert steps == [] and not (folder / HISTORY_FILE).exists()
    assert sorted(p.name for p in folder.iterdir()) == []  # the probe is gone too
    with pytest.raises(
        NotWritableError, match=rf"cannot write results to {cell_path(cfg, 'zeroshot', 0, 1, 1).parent}"
    ):
        evaluate_cell(cfg, "zeroshot", 0, 1, 1)

    assert main(["train", "--config", path, "--method", "lora-r4", "--seed", "0", "--task", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"codyra: error: cannot write results to {folder}: No space left on device")
        and "Traceback" not in err
    )


def test_a_results_path_that_is_no_folder_is_one_line(config_file, capsys, tmp_path):
    cfg, _ = config_file
    blocker = tmp_path / "results" / "tiny" / "lora-r4"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")
    with pytest.raises(
        NotWritableError, match=rf"cannot write results to {task_dir(cfg, 'lora-r4', 0, 1)}: Not a directory"
    ):
        train_task(cfg, "lora-r4", 0, 1)


def test_a_failed_checkpoint_write_leaves_no_temporary_folder(config_file, monkeypatch):
    cfg, _ = config_file

    def full(*args, **kwargs):
        raise ENOSPC

    monkeypatch.setattr(
        codyra.store.checkpoints, "save_safetensors", full
    )  # the first checkpoint (step 2) hits a full disk
    with pytest.raises(OSError, match="No space left on device"):
        train_task(cfg, "lora-r4", 0, 1)
    folder = task_dir(cfg, "lora-r4", 0, 1)
    assert [p.name for p in folder.iterdir() if "checkpoint" in p.name] == []


def test_a_killed_checkpoint_write_s_temporary_folder_is_removed_on_the_next_start(config_file, caplog):
    cfg, _ = config_file
    mine = task_checkpoint_dir(cfg, "lora-r4", 0, 1)
    left = [mine.with_name(f".{mine.name}.0a1b2c3d"), mine.with_name(".checkpoint-otherkey.99aa88bb")]
    for path in left:
        path.mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="codyra.store.checkpoints"):
        train_task(cfg, "lora-r4", 0, 1)
    assert not any(path.exists() for path in left)
    assert f"removing {left[0]}: a checkpoint write that never finished" in caplog.text
