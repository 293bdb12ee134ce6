"""``train.carry_optimizer``: task i's job continues task i-1's AdamW state, as TRACE and TreeLoRA
train every task with the one optimizer ``training/main.py`` builds. Checked against AdamW's
update computed by hand, and its stored form's checks."""

from __future__ import annotations

import math

import pytest
import torch

from codyra.steps.backends import PlainBackend
from codyra.steps.optim import pack_optimizer_state, unpack_optimizer_state

HP = {"optimizer": "adamw", "lr": 0.1, "betas": [0.9, 0.95], "eps": 1e-8, "precision": "fp32"}


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))


def backend_of(model) -> PlainBackend:
    return PlainBackend(model, [{"params": [model.w], "weight_decay": 0.0}], HP, torch.device("cpu"))


def test_a_carried_state_continues_adams_moments_and_step_count():
    carried = {
        "w": {"step": torch.tensor(3.0), "exp_avg": torch.tensor([0.5, -0.1]), "exp_avg_sq": torch.tensor([0.04, 0.01])}
    }
    model = Two()
    backend = backend_of(model)
    backend.load_moments(unpack_optimizer_state(pack_optimizer_state(carried), {"w": (2,)}, task_index=2))
    model.w.grad = torch.tensor([0.2, 0.3])
    backend.step()
    # AdamW's 4th step from the carried moments, by hand (no weight decay)
    expected = []
    for w, m0, v0, g in ((1.0, 0.5, 0.04, 0.2), (-2.0, -0.1, 0.01, 0.3)):
        m, v = 0.9 * m0 + 0.1 * g, 0.95 * v0 + 0.05 * g * g
        expected.append(w - 0.1 * (m / (1 - 0.9**4)) / (math.sqrt(v / (1 - 0.95**4)) + 1e-8))
    torch.testing.assert_close(model.w.detach(), torch.tensor(expected))
    state = backend.moments()["w"]
    assert float(state["step"]) == 4.0
    torch.testing.assert_close(state["exp_avg"], torch.tensor([0.9 * 0.5 + 0.02, 0.9 * -0.1 + 0.03]))
    # the stored form: one tensor per slot, fp32, the step as [1]
    packed = pack_optimizer_state({"w": state})
    assert sorted(packed) == ["optimizer.w.exp_avg", "optimizer.w.exp_avg_sq", "optimizer.w.step"]
    assert packed["optimizer.w.step"].shape == (1,)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"l1.A_tasks": torch.zeros(1)}, "holds no optimizer state.*train.carry_optimizer: true"),
        (
            {
                "optimizer.v.step": torch.ones(1),
                "optimizer.v.exp_avg": torch.zeros(2),
                "optimizer.v.exp_avg_sq": torch.zeros(2),
            },
            "missing \\['w'\\], unknown \\['v'\\]",
        ),
        ({"optimizer.w.step": torch.ones(1), "optimizer.w.exp_avg": torch.zeros(2)}, "slots \\['exp_avg', 'step'\\]"),
        (
            {
                "optimizer.w.step": torch.ones(1),
                "optimizer.w.exp_avg": torch.zeros(3),
                "optimizer.w.exp_avg_sq": torch.zeros(3),
            },
            "exp_avg has shape \\(3,\\), the parameter \\(2,\\)",
        ),
        (
            {
                "optimizer.w.step": torch.zeros(1),
                "optimizer.w.exp_avg": torch.zeros(2),
                "optimizer.w.exp_avg_sq": torch.zeros(2),
            },
            "step 0.0",
        ),
    ],
)
def test_a_stored_state_that_does_not_fit_is_refused(state, message):
    with pytest.raises(ValueError, match=f"task 1's stored method state.*{message}"):
        unpack_optimizer_state(state, {"w": (2,)}, task_index=2)
