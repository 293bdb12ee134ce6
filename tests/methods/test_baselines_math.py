"""The defining math of the reference-constrained baselines against hand-computed
values of the reference formulas (ZSCL's mtil/src/models/helpers.py and finetune.py; TRACE's
model/Regular/{EWC,GEM,OGD}.py)."""

from __future__ import annotations

import math

import pytest
import torch

from codyra.methods.ewc import accumulate_fisher_, ewc_penalty
from codyra.methods.gem import gem_dual, project_gradient
from codyra.methods.lwf import clip_distillation, soft_cross_entropy
from codyra.methods.lwf_vr import random_vocabulary
from codyra.methods.ogd import extend_basis, project_out, project_parameters
from codyra.methods.wise_ft import interpolate
from codyra.methods.zscl import ensemble_due, l2_penalty, merge_into_average_

# --- LwF / ZSCL distillation -------------------------------------------------------------


def test_soft_cross_entropy_temperature_and_t_squared():
    # teacher [0, 2 ln 3] / T=2 -> p = (1/4, 3/4); student uniform -> log q = -ln 2 each: CE = ln 2, x T^2 = 4
    teacher = torch.tensor([[0.0, 2 * math.log(3)]])
    student = torch.zeros(1, 2)
    assert soft_cross_entropy(teacher, student, 2.0).item() == pytest.approx(4 * math.log(2))


def test_soft_cross_entropy_averages_rows():
    teacher = torch.tensor([[0.0, math.log(3)], [0.0, 0.0]])  # p = (1/4, 3/4) and (1/2, 1/2)
    student = torch.tensor([[0.0, 0.0], [0.0, math.log(3)]])  # q = (1/2, 1/2) and (1/4, 3/4)
    row1 = math.log(2)
    row2 = -(0.5 * math.log(0.25) + 0.5 * math.log(0.75))
    assert soft_cross_entropy(teacher, student, 1.0).item() == pytest.approx((row1 + row2) / 2)


def test_clip_distillation_both_directions_hand_value():
    # student rows score text 1 resp. 2, teacher rows the other: every row and column has
    # teacher p = softmax(0, 1) and student q = softmax(1, 0): CE = log(1 + e) - 1 / (1 + e)
    student = torch.eye(2, requires_grad=True)
    teacher_image = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    teacher_text = torch.eye(2)
    per_direction = math.log(1 + math.e) - 1 / (1 + math.e)
    loss = clip_distillation(student, teacher_image, teacher_text, 1.0, 1.0, image_weight=1.0, text_weight=0.5)
    assert loss.item() == pytest.approx(1.5 * per_direction)
    loss.backward()
    assert student.grad.abs().sum() > 0  # distillation trains the student image features


def test_clip_distillation_zero_when_student_is_teacher():
    g = torch.Generator().manual_seed(0)
    img = torch.nn.functional.normalize(torch.randn(4, 8, generator=g), dim=-1)
    txt = torch.nn.functional.normalize(torch.randn(5, 8, generator=g), dim=-1)
    same = clip_distillation(img, img, txt, 100.0, 2.0)
    entropy_rows = soft_cross_entropy(100.0 * img @ txt.T, 100.0 * img @ txt.T, 2.0)
    entropy_cols = soft_cross_entropy(100.0 * txt @ img.T, 100.0 * txt @ img.T, 2.0)
    # soft CE of a distribution with itself = its entropy (times T^2): the minimum over students
    assert same.item() == pytest.approx((entropy_rows + entropy_cols).item(), rel=1e-5)


def test_random_vocabulary_layout():
    g = torch.Generator().manual_seed(0)
    rows = random_vocabulary(1000, 10, 49408, 49406, 49407, 77, g)
    assert rows.shape == (1000, 77)
    assert (rows[:, 0] == 49406).all() and (rows[:, 11] == 49407).all() and (rows[:, 12:] == 0).all()
    words = rows[:, 1:11]
    assert words.min() >= 0 and words.max() < 49408 and len(words.unique()) > 5000
    again = random_vocabulary(1000, 10, 49408, 49406, 49407, 77, torch.Generator().manual_seed(0))
    assert torch.equal(rows, again)
    with pytest.raises(ValueError, match="context length is 11"):
        random_vocabulary(3, 10, 100, 1, 2, 11, g)


# --- WiSE-FT, ZSCL weight ensembling and L2 --------------------------------------------


def test_wise_ft_interpolation():
    assert interpolate(torch.tensor(1.0), torch.tensor(6.0), 0.8).item() == pytest.approx(5.0)
    with pytest.raises(ValueError, match="alpha"):
        interpolate(torch.tensor(1.0), torch.tensor(6.0), 1.5)


def test_zscl_ensemble_schedule_matches_zscl_iterations():
    # ZSCL: iterations 0..1000 merge when iteration % 100 == 0 (11 merges); its iteration 1000 has lr 0
    due = [s for s in range(1, 1001) if ensemble_due(s, 1000, 100)]
    assert due == [1, 101, 201, 301, 401, 501, 601, 701, 801, 901, 1000]
    assert [s for s in range(1, 6) if ensemble_due(s, 5, 2)] == [1, 3, 5]
    # iterations 0..4, every 2: 0, 2, 4 -> after steps 1, 3 and the last (iteration 4 is T)
    assert [s for s in range(1, 5) if ensemble_due(s, 4, 2)] == [1, 3, 4]
    # finetune.py l.310: the final iteration T merges only when avg_freq divides T (1,050: not)
    due = [s for s in range(1, 1051) if ensemble_due(s, 1050, 100)]
    assert due == [1, 101, 201, 301, 401, 501, 601, 701, 801, 901, 1001]
    with pytest.raises(ValueError):
        ensemble_due(1, 10, 0)


def test_zscl_running_average_weighs_start_and_snapshots_equally():
    avg = [torch.tensor([0.0, 3.0])]  # theta_{i-1}
    merge_into_average_(avg, [torch.tensor([3.0, 3.0])], 1)
    assert avg[0].tolist() == [1.5, 3.0]
    merge_into_average_(avg, [torch.tensor([6.0, 0.0])], 2)
    assert avg[0].tolist() == pytest.approx([3.0, 2.0])  # mean of (0, 3, 6) and (3, 3, 0)
    with pytest.raises(ValueError):
        merge_into_average_(avg, avg, 0)


def test_zscl_l2_penalty_sums_squares():
    value = l2_penalty([torch.tensor([1.0, 2.0]), torch.tensor([3.0])], [torch.zeros(2), torch.tensor([1.0])])
    assert value.item() == pytest.approx(9.0)


# --- EWC (TRACE) ---------------------------------------------------------------------------


def test_ewc_fisher_accumulates_squared_gradients_over_steps_per_epoch():
    fisher = {"a": torch.zeros(3), "b": torch.ones(1)}
    accumulate_fisher_(fisher, {"a": torch.tensor([1.0, float("nan"), 2.0]), "b": None}, 2)
    assert fisher["a"].tolist() == [0.5, 0.0, 2.0] and fisher["b"].tolist() == [1.0]
    accumulate_fisher_(fisher, {"a": torch.tensor([1.0, 1.0, 0.0])}, 2)
    assert fisher["a"].tolist() == [1.0, 0.5, 2.0]  # never reset: a running sum
    with pytest.raises(ValueError):
        accumulate_fisher_(fisher, {}, 0)


class _Weights(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, 1.0]))


def _ewc_task(task_index, previous_state=None, fisher_gradient="total", strength=2.0):
    """An EWC method set up on a two-weight model inside a step of 2 micro-batches, 4 per epoch."""
    from types import SimpleNamespace

    from codyra.methods import build_method

    model = _Weights()
    method = build_method({"kind": "ewc", "strength": strength, "fisher_gradient": fisher_gradient})
    ctx = SimpleNamespace(
        model=model, weight_decay=0.0, previous_state=previous_state, task_index=task_index,
        steps_per_epoch=2, micro_batches_per_step=2, micro_batches_per_epoch=4,
    )  # fmt: skip
    method.setup(ctx)
    return method, model, ctx


def test_ewc_fisher_squares_each_micro_batch_gradient_over_micro_batches_per_epoch():
    """TRACE: a hook squares every micro-batch's gradient as DeepSpeed's backward leaves it (loss /
    accumulation steps), F += g^2 / len(dataloader) after each. Micro-batch gradients [1, 2] and
    [3, -2], halved by the step's 2 micro-batches: F = ([0.5, 1]^2 + [1.5, -1]^2) / 4 = [0.625, 0.5]
    (the step's mean gradient [2, 0] squared over 2 steps per epoch would give [2, 0])."""
    method, model, _ = _ewc_task(1)
    for g in ([1.0, 2.0], [3.0, -2.0]):
        ((model.w * torch.tensor(g)).sum() / 2).backward()  # the engine's share of the step's loss
    assert method.fisher["w"].tolist() == pytest.approx([0.625, 0.5])
    torch.testing.assert_close(model.w.grad, torch.tensor([2.0, 0.0]))  # the optimizer's gradient is untouched
    method.finish(model)
    model.w.grad = None
    (model.w * 10).sum().backward()  # the hooks go with the task
    assert method.fisher["w"].tolist() == pytest.approx([0.625, 0.5])


@pytest.mark.parametrize(("fisher_gradient", "expected"), [("total", [1.25, 3.0]), ("task", [1.0625, 2.25])])
def test_ewc_fisher_of_a_penalised_micro_batch(fisher_gradient, expected):
    """Task 2, F = [1, 2], theta moved by 0.5 from theta_1, lambda 2: the penalty's gradient
    lambda F dtheta = [1, 2] enters the micro-batch halved, [0.5, 1], beside the task's [1, 2] / 2.
    total: F += ([0.5, 1] + [0.5, 1])^2 / 4 = [0.25, 1]; task: F += [0.5, 1]^2 / 4 = [0.0625, 0.25]."""
    method, model, ctx = _ewc_task(2, {"fisher.w": torch.tensor([1.0, 2.0])}, fisher_gradient)
    with torch.no_grad():
        model.w.add_(0.5)
    loss = (model.w * torch.tensor([1.0, 2.0])).sum() + method.extra_loss(ctx, None, None)
    (loss / 2).backward()
    assert method.fisher["w"].tolist() == pytest.approx(expected)


def test_ewc_penalty_half_lambda_fisher_weighted():
    theta = {"w": torch.tensor([1.0, 1.0], requires_grad=True)}
    value = ewc_penalty(theta, {"w": torch.tensor([0.0, 3.0])}, {"w": torch.tensor([1.0, 2.0])}, 400.0)
    assert value.item() == pytest.approx(0.5 * 400 * (1 * 1 + 2 * 4))
    value.backward()  # d/dtheta = lambda * F * (theta - prev)
    assert theta["w"].grad.tolist() == pytest.approx([400 * 1 * 1, 400 * 2 * -2])
    with pytest.raises(KeyError, match="Fisher"):
        ewc_penalty({"x": torch.zeros(1)}, {"x": torch.zeros(1)}, {}, 1.0)


# --- GEM (TRACE) ---------------------------------------------------------------------------


def test_gem_projection_one_memory_hand_values():
    m = torch.tensor([[1.0, 0.0]])
    # conflict -1: v = max(margin, 1 / (1 + eps)) = 1/1.001; g + v m
    out = project_gradient(torch.tensor([-1.0, 1.0]), m, margin=0.5, eps=1e-3)
    assert out.tolist() == pytest.approx([-1 + 1 / 1.001, 1.0], abs=1e-6)
    # small conflict: the margin binds, v = 0.5
    out = project_gradient(torch.tensor([-0.2, 1.0]), m, margin=0.5, eps=1e-3)
    assert out.tolist() == pytest.approx([0.3, 1.0], abs=1e-6)
    # TRACE's qpth port: u = 1/1.001 >= -margin, result g - u m (moves against the memory)
    out = project_gradient(torch.tensor([-1.0, 1.0]), m, margin=0.5, eps=1e-3, qp="trace-qpth")
    assert out.tolist() == pytest.approx([-1 - 1 / 1.001, 1.0], abs=1e-6)
    g = torch.tensor([1.0, 1.0])
    assert project_gradient(g, m) is g  # no conflict: untouched


def test_gem_projection_orthogonal_memories_and_shape():
    M = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    g = torch.tensor([[-1.0, -2.0], [3.0, 4.0]])  # a 2x2 parameter, flattened row-major
    out = project_gradient(g, M, margin=0.5, eps=0.0 + 1e-12)
    assert out.shape == g.shape and out.flatten().tolist() == pytest.approx([0.0, 0.0, 3.0, 4.0], abs=1e-6)
    with pytest.raises(ValueError, match="do not match"):
        project_gradient(g, torch.ones(1, 3))
    with pytest.raises(ValueError, match="qp"):
        project_gradient(g, M, qp="cvxpy")


def test_gem_dual_satisfies_kkt():
    g = torch.Generator().manual_seed(3)
    M = torch.randn(4, 30, generator=g, dtype=torch.float64)
    grad = -M.sum(0) + 0.1 * torch.randn(30, generator=g, dtype=torch.float64)
    P = M @ M.T + 1e-3 * torch.eye(4, dtype=torch.float64)
    Mg = M @ grad
    v = gem_dual(P, Mg, 0.5)
    multipliers = P @ v + Mg  # stationarity: P v + Mg = lambda >= 0, lambda_k (v_k - 0.5) = 0
    assert (v >= 0.5 - 1e-9).all() and (multipliers >= -1e-7).all()
    assert (multipliers * (v - 0.5)).abs().max() < 1e-7
    projected = grad + v @ M
    # M x = M g + (P - eps I) v = lambda - eps v: no memory's loss rises beyond the eps regulariser
    assert torch.allclose(M @ projected, multipliers - 1e-3 * v, atol=1e-9)
    assert (M @ projected >= -1e-3 * v - 1e-9).all()


# --- OGD (TRACE) ---------------------------------------------------------------------------


def test_ogd_gram_schmidt_hand_values_and_dependent_vectors():
    basis = extend_basis(torch.zeros(3, 0), torch.tensor([[3.0, 1.0, 6.0], [4.0, 0.0, 8.0], [0.0, 0.0, 0.0]]))
    # [3,4,0] -> [.6,.8,0]; [1,0,0] - .6 [.6,.8,0] = [.64,-.48,0] -> [.8,-.6,0]; [6,8,0] is in the span: dropped
    assert basis.shape == (3, 2)
    assert basis[:, 0].tolist() == pytest.approx([0.6, 0.8, 0.0])
    assert basis[:, 1].tolist() == pytest.approx([0.8, -0.6, 0.0])
    more = extend_basis(basis, torch.tensor([[1.0], [1.0], [2.0]]))
    assert more.shape == (3, 3) and torch.allclose(more.T @ more, torch.eye(3), atol=1e-6)


def test_ogd_projection_per_parameter_vs_global():
    b = torch.tensor([[0.6], [0.0], [0.8]])
    assert project_out(torch.tensor([1.0, 1.0, 1.0]), b).tolist() == pytest.approx([0.16, 1.0, -0.12], abs=1e-6)
    grads = [torch.tensor([1.0, 1.0]), torch.tensor([[1.0]])]
    glob = project_parameters(grads, b, "global")
    assert glob[0].tolist() == pytest.approx([0.16, 1.0], abs=1e-6) and glob[1].item() == pytest.approx(-0.12, abs=1e-6)
    per = project_parameters(grads, b, "per_parameter")  # TRACE slices the basis per parameter
    assert per[0].tolist() == pytest.approx([0.64, 1.0], abs=1e-6) and per[1].item() == pytest.approx(0.36, abs=1e-6)
    with pytest.raises(ValueError, match="rows"):
        project_parameters([torch.ones(2)], b)
