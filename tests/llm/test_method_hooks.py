"""The method interface (codyra.methods.base) through the one training engine, in both model
families: a method written once (a LoRA that records its hooks, forwards a theta_0 teacher and
stores a state) runs on the tiny CLIP and the tiny LLaMA alike. Here, beside the LM fixtures;
the CLIP fixtures come from tests/conftest.py."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from codyra.evaluation import evaluate as evaluation
from codyra.evaluation.evaluate import evaluate_cell
from codyra.experiment import train_job
from codyra.methods.lora import LoRA
from codyra.store.io import ResultError
from codyra.store.paths import HISTORY_FILE, METHOD_STATE_FILE, UPDATE_FILE, task_dir
from codyra.store.updates import load_method_state

INFERENCE_STATES = []
CASES = {"clip": ("tiny_run", "lora-r4"), "causal_lm": ("tiny_trace", "lora-qv")}


class Recorder(LoRA):
    """LoRA plus every hook: records the calls, checks what the context offers."""

    def setup(self, ctx):
        self.calls, self.task_losses = ["setup"], []
        self.previous_state = ctx.previous_state
        self.teacher = ctx.theta_0().to(ctx.device).requires_grad_(False)
        self.trained = None
        return super().setup(ctx)

    def extra_loss(self, ctx, batch, outputs):
        assert set(ctx.family.batch_keys) <= set(batch)
        teacher = ctx.forward(self.teacher, batch)
        assert teacher["logits"].shape == outputs["logits"].shape
        self.task_losses.append(float(ctx.task_loss(batch, outputs).detach()))
        self.calls.append("extra_loss")
        return 0.1 * (outputs["logits"].float() - teacher["logits"].float()).pow(2).mean()  # distillation to theta_0

    def before_optimizer_step(self, ctx):
        self.calls.append("before_optimizer_step")
        grads = [a.B.grad for a in self.adapters.values()]  # B starts at 0: A's first gradients are 0
        assert any(g is not None and bool(g.abs().sum() > 0) for g in grads), "gradients are present"

    def after_step(self, step, total_steps):
        self.calls.append(("after_step", step, total_steps))

    def finish(self, model):
        self.calls.append("finish")
        return super().finish(model)

    def state_to_store(self):
        self.calls.append("state_to_store")
        return {"marker": torch.arange(3.0) + len(self.calls)}

    @classmethod
    def for_inference(cls, model, states):
        INFERENCE_STATES.append(states)
        return model


def recording(built: list) -> type[Recorder]:
    """A Recorder class whose instances are appended to ``built`` (the training job builds its method)."""

    class Recording(Recorder):
        def __init__(self, spec):
            super().__init__(spec)
            built.append(self)

    return Recording


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(CASES))
def test_one_method_runs_its_hooks_in_order_in_both_families(family, request, monkeypatch):
    fixture, method = CASES[family]
    cfg = request.getfixturevalue(fixture)
    built = []
    monkeypatch.setattr(train_job, "method_of", lambda cfg, name: recording(built))

    first = train_job.train_task(cfg, method, 0, 1, device="cpu")
    total = first.summary["steps"]
    recorder = built[0]
    per_step = [
        c for s in range(1, total + 1) for c in ("extra_loss", "before_optimizer_step", ("after_step", s, total))
    ]
    assert recorder.calls == ["setup", *per_step, "finish", "state_to_store"]
    assert recorder.previous_state is None
    # the family's task loss of a batch is what the engine trained on (one micro-batch per step)
    history = (task_dir(cfg, method, 0, 1) / HISTORY_FILE).read_text().splitlines()
    assert recorder.task_losses == pytest.approx([json.loads(r)["loss"] for r in history], rel=1e-5)

    out = task_dir(cfg, method, 0, 1)
    sizes = (out / UPDATE_FILE).stat().st_size + (out / METHOD_STATE_FILE).stat().st_size
    assert first.summary["stored_bytes"] == sizes
    assert first.summary["inference_extra_params"] == 0 and first.summary["step_seconds"] > 0

    train_job.train_task(cfg, method, 0, 2, device="cpu")
    stored = {"marker": torch.arange(3.0) + len(recorder.calls)}
    torch.testing.assert_close(built[1].previous_state, stored, rtol=0, atol=0)

    # evaluation hands the method every task's stored state when it rebuilds theta_2
    monkeypatch.setattr(evaluation, "method_of", lambda cfg, name: Recorder)
    INFERENCE_STATES.clear()
    evaluate_cell(cfg, method, 0, 2, 1, device="cpu")
    [states] = INFERENCE_STATES
    torch.testing.assert_close(states, [stored, {"marker": torch.arange(3.0) + len(built[1].calls)}], rtol=0, atol=0)


def test_a_changed_method_state_is_detected(tiny_trace, monkeypatch):
    monkeypatch.setattr(train_job, "method_of", lambda cfg, name: Recorder)
    train_job.train_task(tiny_trace, "lora-qv", 0, 1, device="cpu")
    out = task_dir(tiny_trace, "lora-qv", 0, 1)
    save_file({"marker": torch.zeros(3)}, str(out / METHOD_STATE_FILE))
    with pytest.raises(ResultError, match="does not match the digest"):
        load_method_state(out)
