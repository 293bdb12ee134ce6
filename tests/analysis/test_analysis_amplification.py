"""Amplification factors ||dW||_F / ||U_r^T W V_r||_F against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from codyra.analysis import amplification as amp
from codyra.store.updates import TaskUpdate

W = torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 1.0, 1.0]])


def outer(scale: float, i: int, j: int) -> torch.Tensor:
    m = torch.zeros(3, 3)
    m[i, j] = scale
    return m


def test_rank_one_update_along_a_strong_direction_is_damped():
    # dW = 0.5 e1 e1^T: u = v = e1, u^T W v = 3
    assert amp.amplification(W, outer(0.5, 0, 0)) == pytest.approx(0.5 / 3)


def test_rank_one_update_along_a_weak_direction_is_amplified():
    # dW = 2 e3 e2^T: u = e3, v = e2, u^T W v = W[2, 1] = 1
    assert amp.amplification(W, outer(2.0, 2, 1)) == pytest.approx(2.0)


def test_rank_two_update_and_the_rank_cap():
    delta = torch.diag(torch.tensor([4.0, 1.0, 0.0]))  # U = V = [e1, e2] (by singular value)
    assert amp.amplification(W, delta) == pytest.approx(math.sqrt(17) / math.sqrt(3**2 + 2**2))
    assert amp.amplification(W, delta, rank=1) == pytest.approx(math.sqrt(17) / 3)  # top direction only
    assert amp.amplification(W, delta, rank=5) == amp.amplification(W, delta)  # a cap above the rank


def test_a_zero_update_amplifies_nothing_and_shapes_must_match():
    assert amp.amplification(W, torch.zeros(3, 3)) == 0.0
    with pytest.raises(ValueError, match="two matrices of one shape"):
        amp.amplification(W, torch.zeros(3, 2))


def lora_update(A, B, w, param="weight", rows=None) -> TaskUpdate:
    tensors = {"t.A": torch.tensor(A), "t.B": torch.tensor(B), "t.w": torch.tensor(w)}
    return TaskUpdate("lora", tensors, {"t": {"param": param, "rows": rows}})


def test_each_task_is_measured_against_the_weights_it_was_trained_from(monkeypatch):
    model = torch.nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        model.weight.copy_(W)
    first = lora_update([[0.0, 1.0, 0.0]], [[0.0], [0.0], [2.0]], [1.0])  # 2 e3 e2^T: W[2, 1] = 1 -> 2
    second = lora_update([[0.0, 1.0, 0.0]], [[0.0], [0.0], [1.0]], [1.0])  # e3 e2^T: (W + dW1)[2, 1] = 3 -> 1/3
    monkeypatch.setattr(amp, "run_updates", lambda cfg, method, seed: iter([first, second]))
    per_task = amp.run_amplification({"analysis": {"amplification_rank": None}}, "lora", 0, model)
    assert [f["t"] for f in per_task] == pytest.approx([2.0, 1 / 3])


def test_a_row_block_of_a_fused_parameter_is_measured_against_its_rows():
    model = torch.nn.Linear(3, 6, bias=False)  # rows 3..5 hold W, the rest zeros
    with torch.no_grad():
        model.weight.zero_()
        model.weight[3:6] = W
    update = lora_update([[1.0, 0.0, 0.0]], [[0.5], [0.0], [0.0]], [1.0], rows=[3, 6])  # 0.5 e1 e1^T on W
    assert amp.update_amplification(model, update) == {"t": pytest.approx(0.5 / 3)}
