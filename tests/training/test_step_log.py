"""The loop's step records: read a step late, in step order, whole before a checkpoint; and the
training loop reads no device value in a step that it could leave for the next one."""

from __future__ import annotations

import json

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils._python_dispatch import TorchDispatchMode

from codyra.experiment.train_job import train_task
from codyra.store.paths import TIME, task_dir
from codyra.training import step_log
from codyra.training.step_log import StepLog


def test_records_are_read_a_step_late_in_step_order_with_their_exact_values():
    history, emitted = [], []
    log = StepLog(history, emitted.append)
    loss = torch.tensor(0.1, dtype=torch.float32)  # read as .item() reads it: the float32 value
    mean = torch.tensor(7, dtype=torch.float64) / 3
    log.add({"step": 1, "loss": loss, "lr": 0.5, "count": torch.tensor(7), "mean": mean})
    assert history == [] and emitted == []  # queued behind step 1, read once step 2 is queued
    loss += 1  # the record holds its own copy: what a later step does to the tensor does not reach it
    log.add({"step": 2, "loss": torch.tensor(0.25), "lr": 0.25})
    assert [r["step"] for r in history] == [1] and emitted == history
    first = history[0]
    assert list(first) == ["step", TIME, "loss", "lr", "count", "mean"]  # the history's field order
    assert first["loss"] == torch.tensor(0.1).item() != 0.1 and isinstance(first["loss"], float)
    assert first["count"] == 7 and isinstance(first["count"], int)
    assert first["mean"] == 7 / 3 and first["lr"] == 0.5
    log.flush()
    assert [r["step"] for r in history] == [1, 2] and history[1]["loss"] == 0.25 and emitted == history
    log.flush()  # nothing pending: nothing read twice
    assert len(history) == 2


def test_lag_zero_reads_each_record_at_once():
    history = []
    StepLog(history, lambda record: None, lag=0).add({"step": 1, "loss": torch.tensor(2.0)})
    assert history[0]["loss"] == 2.0


class Reads(TorchDispatchMode):
    """The reads of a tensor's value into Python (``.item()``, ``float(t)``: a device sync on a GPU),
    by the optimizer steps taken when they happen: of the step log's host copies (with the steps
    taken when each was queued) and of any other tensor."""

    def __init__(self):
        super().__init__()
        self.steps, self.host_copies, self.of_copies, self.of_device = 0, [], [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            queued = [at for copy, at in self.host_copies if copy is args[0]]
            if queued:
                self.of_copies.append((queued[0], self.steps))
            else:
                self.of_device.append(self.steps)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("method", ["lora-r4", "codyra"])
def test_the_loop_reads_a_step_once_the_next_is_queued_and_never_the_device(tiny_run, monkeypatch, method):
    reads, copy = Reads(), step_log._copy_to_host

    def copy_to_host(value):
        reads.host_copies.append((copy(value), reads.steps))
        return reads.host_copies[-1][0]

    def stepped(optimizer, args, kwargs):
        reads.steps += 1

    monkeypatch.setattr(step_log, "_copy_to_host", copy_to_host)
    tiny_run["data"]["num_workers"] = 1  # the batches' own reads (a crop's size) in a worker, as on a GPU node
    hook = register_optimizer_step_post_hook(stepped)
    try:
        with reads:
            train_task(tiny_run, method, 0, 1)
    finally:
        hook.remove()
    total, every = tiny_run["train"]["iterations"], tiny_run["train"]["checkpoint_every"]
    # between optimizer steps 1 and total: no read of anything but a record's host copies
    assert [at for at in reads.of_device if 1 <= at < total] == []
    # step s's record (loss, active ranks) is read once step s+1 is queued; before a checkpoint
    # (steps 2, 4) and after the last step, at once
    assert {queued for queued, _ in reads.of_copies} == set(range(1, total + 1))
    flushed = {s for s in range(1, total + 1) if s % every == 0 or s == total}
    assert all(read == queued + 1 or (read == queued and queued in flushed) for queued, read in reads.of_copies)
    assert any(read == queued + 1 for queued, read in reads.of_copies)
    lines = (task_dir(tiny_run, method, 0, 1) / "history.jsonl").read_text().splitlines()
    history = [json.loads(line) for line in lines]
    assert [r["step"] for r in history] == list(range(1, total + 1))
    assert all(isinstance(r["loss"], float) and isinstance(r["active_rank_total"], float) for r in history)
