"""ZSCL's and TRACE's baselines (LwF, LwF-VR, WiSE-FT, ZSCL, EWC, GEM) in the training loop on the
tiny mini benchmark: each trains two tasks from stored files (resuming a killed job:
tests/methods/test_resume_methods.py)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from codyra.experiment.train_job import train_task
from codyra.store.paths import METHOD_STATE_FILE, UPDATE_FILE, task_dir

BASELINES = {
    "lwf": {"kind": "lwf"},
    "lwf-vr": {"kind": "lwf_vr", "vocabulary_size": 64},
    "wise-ft": {"kind": "wise_ft"},
    "zscl": {"kind": "zscl", "ensemble_every": 2},
    "ewc": {"kind": "ewc"},
    "gem": {"kind": "gem"},
}


@pytest.fixture
def baselines_run(tiny_run):
    tiny_run["method_configs"].update({name: {**spec, "train": {"lr": 0.0005}} for name, spec in BASELINES.items()})
    tiny_run["data"]["reference"] = {"kind": "mini-corpus", "size": 48}
    return tiny_run


def stored(cfg, method, task):
    folder = task_dir(cfg, method, 0, task)
    state = folder / METHOD_STATE_FILE
    return load_file(str(folder / UPDATE_FILE)), (load_file(str(state)) if state.is_file() else {})


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(BASELINES))
def test_baseline_trains_two_tasks_from_stored_files(baselines_run, method):
    first = train_task(baselines_run, method, 0, 1).summary
    second = train_task(baselines_run, method, 0, 2).summary
    for summary in (first, second):
        assert summary["trainable_params"] > 0 and summary["step_seconds"] > 0
        assert summary["stored_bytes"] == sum(
            (task_dir(baselines_run, method, 0, summary["task_index"]) / f).stat().st_size
            for f in (UPDATE_FILE, METHOD_STATE_FILE)
            if (task_dir(baselines_run, method, 0, summary["task_index"]) / f).is_file()
        )
    _, state = stored(baselines_run, method, 2)
    if method == "gem":
        assert all(v.shape[0] == 2 and v.dtype == torch.bfloat16 for v in state.values())
    if method == "ewc":
        _, before = stored(baselines_run, method, 1)
        assert before.keys() == state.keys() and all((state[k] >= before[k]).all() for k in state)
