"""theta_{i-1} sits on the training device before the method's ``setup``, so what setup allocates
beside a parameter (EWC's Fisher and anchor: ``zeros_like(p)``, ``p.clone()``) lives where the
parameter's gradients will. On a GPU, an LM left on the CPU until the backend moved it had EWC add
CUDA gradients into CPU tensors; here the session's device is the meta device, which, unlike the
CPU, no model starts on."""

from __future__ import annotations

import copy

import pytest
import torch

from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.methods.ewc import EWC


class SetUp(Exception):
    """Raised by the recording setup: the test needs nothing after it."""


def test_the_model_is_on_the_session_device_when_the_method_sets_up(tiny_trace_dict, monkeypatch):
    tiny_trace_dict["method_configs"]["ewc"] = {"kind": "ewc"}
    cfg = load_config(copy.deepcopy(tiny_trace_dict))
    meta = torch.device("meta")
    monkeypatch.setattr("codyra.llm.train.pick_device", lambda device: meta)
    seen = {}

    def setup(self, ctx):
        seen.update(context=ctx.device, parameters={p.device for p in ctx.model.parameters()})
        raise SetUp

    monkeypatch.setattr(EWC, "setup", setup)
    with pytest.raises(SetUp):
        train_task(cfg, "ewc", 0, 1)
    assert seen == {"context": meta, "parameters": {meta}}
