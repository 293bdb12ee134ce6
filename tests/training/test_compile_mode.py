"""``train.compile_mode``: torch.compile's mode for the compiled step; reduce-overhead replays the
compiled forward and backward as CUDA graphs, so the loop marks each step's start. Its config
errors, and what the loop hands torch."""

from __future__ import annotations

import copy

import pytest
import torch

from codyra.experiment.config import ConfigError, load_config

from ..conftest import with_train


@pytest.mark.parametrize(
    "train, family, message",
    [
        ({"compile_mode": "reduce-overhead"}, "clip", r"compile_mode .*a mode of the compiled step; set train.compile"),
        (
            {"compile": True, "compile_mode": "reduce-overhead"},
            "causal_lm",
            "causal LMs train under DeepSpeed.*set it to default",
        ),
        ({"compile": True, "compile_mode": "max-autotune"}, "clip", r"compile_mode.*default.*reduce-overhead"),
    ],
)
def test_compile_modes_that_cannot_apply_are_refused(tiny_cfg_dict, train, family, message):
    with pytest.raises(ConfigError, match=message):
        load_config(with_train(tiny_cfg_dict, train, family))


@pytest.mark.parametrize("mode, marks", [("default", 0), ("reduce-overhead", 3)])
def test_the_loop_compiles_in_the_configured_mode_and_marks_each_graphed_step(
    tiny_run, tmp_path, monkeypatch, mode, marks
):
    from codyra.experiment.train_job import train_task

    modes, marked = [], []

    def compile_(fn, mode):  # torch.compile's call, recorded; the step runs eagerly
        modes.append(mode)
        return fn

    monkeypatch.setattr(torch, "compile", compile_)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marked.append(1))
    cfg = copy.deepcopy(tiny_run)
    cfg["results"] = str(tmp_path / "results")
    cfg["train"] |= {"iterations": 3, "compile": True, "compile_mode": mode}
    train_task(cfg, "lora-r4", 0, 1)
    assert modes == [mode] and len(marked) == marks
