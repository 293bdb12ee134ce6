"""Result files honour the umask, like any file the user's tools create."""

from __future__ import annotations

import os
import stat

import pytest

from codyra.store.checkpoints import save_checkpoint
from codyra.store.io import write_json
from codyra.store.updates import TaskUpdate, save_update


@pytest.fixture(params=[0o022, 0o002])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_results_tables_and_updates_honour_the_umask(tmp_path, umask):
    import torch

    write_json(tmp_path / "tables" / "summary.json", {"a": 1})
    save_update(tmp_path / "task1", TaskUpdate("delta", {"w": torch.ones(2)}), {})
    for path in (
        tmp_path / "tables" / "summary.json",
        tmp_path / "task1" / "update.safetensors",
        tmp_path / "task1" / "summary.json",
    ):
        assert mode(path) == 0o666 & ~umask, path


def test_checkpoint_folders_honour_the_umask(tmp_path, umask):
    import torch

    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([param])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    save_checkpoint(
        tmp_path / "checkpoint-x", step=1, params={"p": param}, optimizer=optimizer, scheduler=scheduler, history=[]
    )
    assert mode(tmp_path / "checkpoint-x") == 0o777 & ~umask
    for name in ("state.json", "tensors.safetensors"):
        assert mode(tmp_path / "checkpoint-x" / name) == 0o666 & ~umask
