"""The training loop's step records, read from the device one step late.

A step's record (the loss, the family's and the method's step values) may hold 0-d tensors that
live on the device. Reading one there (``.item()``) blocks the host until the device has run all
it was given; read at the end of its own step, the device then idles while the host does the
rest of the iteration (the record, the progress bar, the next batch, the next step's launches),
a large share of a step replayed as CUDA graphs. A :class:`StepLog` queues a copy of each device
value to the host behind its step and reads the copies once the next step has been queued, so
the device always has a step to run. Checkpoints flush the log first: a saved history is whole.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import torch

from codyra.store.paths import TIME

# steps by which a step's record is read after the step: 1 keeps one step queued on the device
READ_LAG = 1
# the profiler's name for reading a record's host copies (host memory: no kernel, no device sync)
READ = "codyra.step_log.read"


class StagedRecord:
    """A step's record with its tensors' copies to the host queued (non-blocking from a GPU)."""

    def __init__(self, record: dict):
        self.values = {k: _copy_to_host(v) if isinstance(v, torch.Tensor) else v for k, v in record.items()}
        on_gpu = any(isinstance(v, torch.Tensor) and v.is_cuda for v in record.values())
        self.copied = torch.cuda.Event() if on_gpu else None
        if self.copied is not None:
            self.copied.record()
        self.ready = None if on_gpu else time.time()  # host values are known at once

    def read(self) -> dict:
        """The record with plain numbers: its tensors' values, and when they were known (``TIME``)."""
        with torch.profiler.record_function(READ):
            if self.copied is not None:
                self.copied.synchronize()  # waits for this step only: later steps stay queued
                self.ready = time.time()
            values = {k: v.item() if isinstance(v, torch.Tensor) else v for k, v in self.values.items()}
        return {"step": values.pop("step"), TIME: self.ready, **values}


def _copy_to_host(value: torch.Tensor) -> torch.Tensor:
    value = value.detach()
    host = torch.empty(value.shape, dtype=value.dtype, pin_memory=value.is_cuda)
    return host.copy_(value, non_blocking=True)


class StepLog:
    """Step records in step order: ``add`` a step's record after the step has been queued; each is
    read ``lag`` steps later (or at ``flush``), appended to ``history`` and handed to ``emit``."""

    def __init__(self, history: list[dict], emit: Callable[[dict], None], lag: int = READ_LAG):
        self.history, self.emit, self.lag = history, emit, lag
        self.pending: deque[StagedRecord] = deque()

    def add(self, record: dict) -> None:
        self.pending.append(StagedRecord(record))
        while len(self.pending) > self.lag:
            self._read_oldest()

    def flush(self) -> None:
        """Read every pending record (before a checkpoint saves the history, and at the end)."""
        while self.pending:
            self._read_oldest()

    def _read_oldest(self) -> None:
        record = self.pending.popleft().read()
        self.history.append(record)
        self.emit(record)
