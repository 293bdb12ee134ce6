"""The defining rules of the LoRA-family baselines against hand-computed values and,
for AdaLoRA, against PEFT's own implementation on an nn.Linear."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from codyra.adapters.attach import LoRALinear
from codyra.adapters.lora import RankSelectiveLoRA
from codyra.store.updates import delta_from_factors


def ns_adapter(A, B=None, w=None):
    A = torch.tensor(A, dtype=torch.float64, requires_grad=True)
    B = torch.zeros(1, A.shape[0], dtype=torch.float64) if B is None else torch.tensor(B, dtype=torch.float64)
    return SimpleNamespace(A=A, B=B, w=w)


# --- O-LoRA ------------------------------------------------------------------------------


def test_olora_orthogonality_and_l2_terms_match_hand_values():
    from codyra.methods.olora import OLoRA, l2_loss, orthogonality_loss

    adapters = {
        "m1": ns_adapter([[1.0, 2.0, 3.0]], B=[[3.0], [4.0]]),
        "m2": ns_adapter([[1.0, 1.0, 0.0]], B=[[0.0], [0.0]]),
    }
    previous = {
        "m1": torch.tensor([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]], dtype=torch.float64),
        "m2": torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64),
    }
    # m1: A_prev A_new^T = [1, -2] -> |.| sums to 3; m2: orthogonal -> 0
    assert float(orthogonality_loss(previous, adapters).detach()) == pytest.approx(3.0)
    # ||A||_F unsquared: sqrt(14) + 5 (B of m1) + sqrt(2) + 0
    assert float(l2_loss(adapters).detach()) == pytest.approx(math.sqrt(14) + 5 + math.sqrt(2))
    method = OLoRA({"kind": "olora", "lambda_orth": 0.5, "lambda_l2": 0.1})
    method.adapters, method.previous_A = adapters, previous
    assert float(method.penalty().detach()) == pytest.approx(0.5 * 3 + 0.1 * (math.sqrt(14) + 5 + math.sqrt(2)))
    defaults = OLoRA({"kind": "olora"})  # the references' lambda_1 = 0.5, lambda_2 = 0
    assert (defaults.options.lambda_orth, defaults.options.lambda_l2) == (0.5, 0.0)
    defaults.adapters, defaults.previous_A = adapters, {}  # task 1: nothing to be orthogonal to
    assert defaults.penalty() is None
    with pytest.raises(ValueError, match="lambda_orth: must be >= 0"):
        OLoRA({"kind": "olora", "lambda_orth": -1.0})


def test_olora_orthogonality_gradient_pushes_new_rows_out_of_the_old_span():
    from codyra.methods.olora import orthogonality_loss

    adapters = {"m": ns_adapter([[0.6, 0.8]])}
    previous = {"m": torch.tensor([[1.0, 0.0]], dtype=torch.float64)}
    orthogonality_loss(previous, adapters).backward()
    # d|a . e1| / da = sign(0.6) e1
    assert adapters["m"].A.grad.tolist() == [[1.0, 0.0]]


# --- HiDe-LoRA -----------------------------------------------------------------------------


def test_hidelora_contrastive_term_matches_hand_values():
    from codyra.methods.hidelora import contrastive_orthogonality_loss

    # orthonormal rows: sim = I / 0.8, each row's CE = log(1 + e^{-1.25})
    adapters = {"m": ns_adapter([[0.0, 1.0]])}
    previous = {"m": torch.tensor([[1.0, 0.0]], dtype=torch.float64)}
    assert float(contrastive_orthogonality_loss(previous, adapters).detach()) == pytest.approx(
        math.log(1 + math.exp(-1.25))
    )
    # identical rows: every logit 1.25, CE = log 2; without earlier rows a single row has CE 0
    previous = {"m": torch.tensor([[0.0, 1.0]], dtype=torch.float64)}
    assert float(contrastive_orthogonality_loss(previous, adapters).detach()) == pytest.approx(math.log(2))
    assert float(contrastive_orthogonality_loss({}, adapters).detach()) == pytest.approx(0.0)


# --- SoRA ------------------------------------------------------------------------------------


def test_sora_lambda_schedules_and_l1_term():
    from codyra.methods.sora import SoRAOptions, l1_mean, lambda_values, prox_lambda

    assert lambda_values(0.1, 0.3, 3, "linear") == pytest.approx([0.1, 0.2, 0.3])
    assert lambda_values(0.01, 1.0, 3, "exp_linear") == pytest.approx([0.01, 0.1, 1.0])
    assert lambda_values(0.0, 1.0, 2, "log_linear") == pytest.approx([0.0, 1.0])
    options = SoRAOptions(lambda_prox=0.1, max_lambda=0.3, lambda_num=2, lambda_schedule="linear")
    assert [prox_lambda(s, 10, options) for s in (1, 5, 6, 10)] == pytest.approx([0.1, 0.1, 0.3, 0.3])
    assert prox_lambda(7, 10, SoRAOptions(lambda_prox=0.1)) == 0.1
    assert float(l1_mean([torch.tensor([1.0, -2.0]), torch.tensor([3.0])])) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="lambda_num"):
        lambda_values(0.1, 0.3, 0, "linear")


def test_sora_prox_step_is_the_reference_operator_from_the_first_step():
    from codyra.methods.sora import SoRA

    method = SoRA({"kind": "sora", "lambda_prox": 0.25})
    adapter = RankSelectiveLoRA(3, 2, 4, 4, gated=True)
    with torch.no_grad():
        adapter.w.copy_(torch.tensor([1.0, 0.25, -0.375, 0.625]))
    method.adapters = {"m": adapter}
    method.after_step(1, 100)  # no dense phase: thresholded at step 1
    # 1 -> 0.75; 0.25 == lambda is untouched (strict comparisons); -0.375 -> -0.125 -> 0; 0.625 -> 0.375 kept
    assert adapter.w.tolist() == [0.75, 0.25, 0.0, 0.375]
    with pytest.raises(ValueError, match="max_lambda and lambda_num"):
        SoRA({"kind": "sora", "lambda_schedule": "linear"})


# --- DyLoRA ------------------------------------------------------------------------------------


def test_dylora_truncated_forward_and_reference_scaling():
    from codyra.methods.dylora import truncate_

    r, alpha = 4, 8.0
    adapter = RankSelectiveLoRA(3, 2, r, alpha, gated=False)
    A = torch.arange(12.0).reshape(4, 3) / 10
    B = torch.arange(8.0).reshape(2, 4) / 10
    with torch.no_grad():
        adapter.A.copy_(A)
        adapter.B.copy_(B)
    x = torch.tensor([[1.0, -1.0, 2.0]])
    truncate_(adapter, 2, alpha)
    expected = x @ (B[:, :2] @ A[:2]).T * alpha / 2
    torch.testing.assert_close(adapter(x), expected)
    # the official ``dynamic`` module: both factors times sqrt(r / b), LoRA scale alpha / r
    s = math.sqrt(r / 2)
    torch.testing.assert_close(adapter(x), x @ ((B[:, :2] * s) @ (A[:2] * s)).T * alpha / r)
    with pytest.raises(ValueError, match="truncated rank"):
        truncate_(adapter, 5, alpha)


def test_dylora_frozen_mode_trains_only_the_sampled_component():
    from codyra.methods.dylora import freeze_lower_, truncate_

    adapter = RankSelectiveLoRA(3, 2, 4, 4.0, gated=False)
    with torch.no_grad():
        adapter.B.normal_()
    truncate_(adapter, 3, 4.0)
    adapter(torch.randn(5, 3)).sum().backward()
    freeze_lower_(adapter, 3)
    nonzero_A = (adapter.A.grad.abs().sum(dim=1) > 0).tolist()
    nonzero_B = (adapter.B.grad.abs().sum(dim=0) > 0).tolist()
    assert nonzero_A == [False, False, True, False] and nonzero_B == [False, False, True, False]


def test_dylora_trains_as_the_official_run_glue_by_default():
    """run_glue.py calls set_rank(b, frozen=True) before every step: frozen is the default of the
    option and of every shipped config that runs DyLoRA."""
    from pathlib import Path

    from codyra.experiment.config import load_config
    from codyra.methods import build_method

    assert build_method({"kind": "dylora", "rank": 4}).options.frozen is True
    runs = 0
    for path in sorted((Path(__file__).resolve().parents[2] / "config").glob("*.yaml")):
        cfg = load_config(path)
        for name, spec in cfg["method_configs"].items():
            if spec["kind"] == "dylora" and name in cfg["methods"]:
                runs += 1
                assert spec.get("frozen", True) is True, f"{path.name}: {name}"
    assert runs >= 3  # the CLIP paper configs, the mini baselines, the mini TRACE baselines


def test_dylora_rank_sampling_is_uniform_over_the_range():
    from codyra.methods.dylora import sample_rank

    g = torch.Generator().manual_seed(0)
    draws = [sample_rank(g, 2, 5) for _ in range(4000)]
    counts = {b: draws.count(b) for b in range(1, 7)}
    assert counts[1] == counts[6] == 0
    assert all(900 < counts[b] < 1100 for b in range(2, 6))


# --- AdaLoRA against PEFT -------------------------------------------------------------------------


class _Regression(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x, y):
        return SimpleNamespace(loss=((self.lin(x) - y) ** 2).mean())


def test_adalora_update_rule_and_budget_allocation_match_peft():
    from peft import AdaLoraConfig, get_peft_model

    from codyra.methods.adalora import PEFT_EPS, RankAllocator, orthogonal_regularizer

    torch.manual_seed(0)
    base = _Regression()
    ours = LoRALinear(nn.Linear(6, 5), RankSelectiveLoRA(6, 5, 4, 8.0, gated=True))
    ours.weight.data.copy_(base.lin.weight.data)
    ours.bias.data.copy_(base.lin.bias.data)
    total, tinit, tfinal = 12, 2, 3
    config = AdaLoraConfig(
        target_modules=["lin"],
        init_r=4,
        target_r=2,
        lora_alpha=8,
        lora_dropout=0.0,
        total_step=total,
        tinit=tinit,
        tfinal=tfinal,
        deltaT=2,
        beta1=0.85,
        beta2=0.85,
        orth_reg_weight=0.5,
    )
    peft_model = get_peft_model(base, config)
    layer = peft_model.base_model.model.lin
    adapter = ours.lora
    adapter.scale = 8.0 / (4 + PEFT_EPS)
    with torch.no_grad():
        layer.lora_E["default"].copy_(torch.randn(4, 1))  # PEFT starts E at 0: give the test something to rank
        adapter.A.copy_(layer.lora_A["default"])
        adapter.B.copy_(layer.lora_B["default"])
        adapter.w.copy_(layer.lora_E["default"].view(-1))
    x, y = torch.randn(16, 6), torch.randn(16, 5)
    torch.testing.assert_close(ours(x), layer(x))

    peft_params = [layer.lora_A["default"], layer.lora_B["default"], layer.lora_E["default"]]
    opt_peft = torch.optim.SGD(peft_params, lr=0.05)
    opt_ours = torch.optim.SGD([adapter.A, adapter.B, adapter.w], lr=0.05)
    allocator = RankAllocator({"lin": adapter}, 2, total, tinit, tfinal, 2, 0.85, 0.85)
    masked_steps = []
    for step in range(total):  # the reference trainer's global_step: 0 after the first optimizer step
        # AdaLoraModel.forward adds its orthogonal regulariser to .loss (PeftModel.forward would skip it)
        peft_model.base_model(x=x, y=y).loss.backward()
        loss = ((ours(x) - y) ** 2).mean() + 0.5 * orthogonal_regularizer({"lin": adapter})
        loss.backward()
        torch.testing.assert_close(adapter.w.grad, layer.lora_E["default"].grad.view(-1))
        opt_peft.step()
        opt_ours.step()
        peft_model.base_model.update_and_allocate(step)
        allocator.step(step)
        opt_peft.zero_grad()
        opt_ours.zero_grad()
        torch.testing.assert_close(adapter.w.detach(), layer.lora_E["default"].detach().view(-1))
        torch.testing.assert_close(adapter.A.detach(), layer.lora_A["default"].detach())
        torch.testing.assert_close(adapter.B.detach(), layer.lora_B["default"].detach())
        masked_steps.append(int((adapter.w == 0).sum()))
    # the budget fell from 4 to target_r = 2 and the final pattern holds to the end
    assert masked_steps[:tinit] == [0] * tinit and masked_steps[-tfinal:] == [2] * tfinal
    dW_ours = delta_from_factors(*adapter.factors())
    torch.testing.assert_close(dW_ours, layer.get_delta_weight("default").detach(), rtol=1e-5, atol=1e-6)


def test_adalora_engine_step_s_is_the_reference_global_step_s_minus_1():
    """total 12, tinit 2, tfinal 3: the final allocation (EMAs cleared, pattern fixed) runs at
    global_step 12 - 3 = 9, which the reference trainer passes after its 10th optimizer step."""
    from codyra.methods import build_method
    from codyra.methods.adalora import RankAllocator

    torch.manual_seed(0)
    method = build_method({"kind": "adalora", "rank": 4, "target_r": 2})
    adapter = RankSelectiveLoRA(6, 5, 4, 4.0, gated=True)
    with torch.no_grad():
        for p in (adapter.A, adapter.B, adapter.w):
            p.normal_()
    method.allocator = RankAllocator({"lin": adapter}, 2, 12, 2, 3, 1, 0.85, 0.85)
    scored = []
    for step in range(1, 11):
        (adapter(torch.randn(8, 6)) ** 2).sum().backward()
        method.grads = method.allocator.gradients()
        method.after_step(step, 12)
        adapter.A.grad = adapter.B.grad = adapter.w.grad = None
        scored.append(bool(method.allocator.exp_avg_ipt))
    assert scored == [True] * 9 + [False]  # engine step 10 = global_step 9: the final allocation
    assert int((adapter.w == 0).sum()) == 2  # init_r 4 -> target_r 2


def test_adalora_budget_schedule_is_cubic_between_warmups():
    from codyra.methods.adalora import budget_schedule

    args = {"total": 100, "tinit": 10, "tfinal": 20, "init_bgt": 64, "target_bgt": 32, "delta_t": 5}
    assert budget_schedule(10, **args) == (64, False)
    assert budget_schedule(45, **args) == (int(32 * (1 - 35 / 70) ** 3 + 32), True)  # 36
    assert budget_schedule(46, **args)[1] is False
    assert budget_schedule(81, **args) == (32, True)


# --- InfLoRA ---------------------------------------------------------------------------------------


def test_inflora_gram_and_threshold():
    from codyra.methods.inflora import threshold_at, update_gram

    gram, n = update_gram(None, 0, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert n == 2 and gram.tolist() == [[5.0, 7.0], [7.0, 10.0]]
    gram, n = update_gram(gram, n, torch.tensor([[[1.0, 0.0]]]))
    torch.testing.assert_close(gram, torch.tensor([[11.0, 14.0], [14.0, 20.0]]) / 3)
    assert threshold_at(1, 5, 0.95, 1.0) == pytest.approx(0.95)
    assert threshold_at(3, 5, 0.95, 1.0) == pytest.approx(0.97)


def _inputs(energies, n=200, seed=0):
    """Inputs whose Gram has the given energy per coordinate direction (exactly, by construction)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, len(energies), generator=g, dtype=torch.float64)
    z = torch.linalg.qr(z - z.mean(0)).Q * math.sqrt(n)  # orthonormal columns: Gram = diag(energies)
    return z * torch.tensor(energies, dtype=torch.float64).sqrt()


# the reference ranks the squared singular values of the Gram: energies^2 / sum energies^2
# [0.5, 0.45, 0.15]: cumulative [0.526, 0.953, 1] -> 2 directions below 0.99, a narrow ("remove") basis;
# [0.3, ..., 0.02]: cumulative [0.406, 0.688, 0.868, 0.970, 0.998, 1] -> 4 of 6, kept as the complement
@pytest.mark.parametrize(
    ("energies", "protected", "retain"),
    [([0.5, 0.45, 0.15, 0, 0, 0], 2, False), ([0.3, 0.25, 0.2, 0.15, 0.08, 0.02], 4, True)],
)
def test_inflora_designed_down_projection_leaves_earlier_inputs_unchanged(energies, protected, retain):
    from codyra.methods.inflora import design_down_projection, update_dualgpm, update_gram

    old = _inputs(energies)
    gram1, _ = update_gram(None, 0, old)
    feature, kind = update_dualgpm(None, False, gram1, 0.99)
    assert kind == retain
    assert feature.shape[1] == (6 - protected if retain else protected)
    mask = torch.zeros(len(energies), dtype=torch.float64)
    mask[:protected] = 1
    old_protected = old * mask  # earlier inputs inside the protected subspace
    new = torch.randn(300, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    gram2, _ = update_gram(None, 0, new)
    A = design_down_projection(gram2, feature, retain, 2)
    assert A.shape == (2, 6)
    B = torch.randn(4, 2, dtype=torch.float64)
    dW = B @ A  # InfLoRA adds B A to W, unscaled
    assert float((old_protected @ dW.T).abs().max()) < 1e-10
    assert float((new @ dW.T).abs().max()) > 1e-2  # it does change the new task's outputs
    # A's rows are the top singular directions / sqrt(3): unit norm / sqrt(3)
    torch.testing.assert_close(A.norm(dim=1), torch.full((2,), 1 / math.sqrt(3), dtype=torch.float64))


def test_inflora_first_task_at_half_the_width_keeps_the_top_directions_as_retain():
    """The reference's update_DualGPM, first task, r = k / 2: U[:, :r] marked 'retain' (its final
    assertion, width <= k / 2, holds); above k / 2 (where it asserts) ours keeps the complement."""
    from codyra.methods.inflora import update_dualgpm

    e = torch.eye(4, dtype=torch.float64)
    # singular values 4, 3, 2, 1: squared 16, 9, 4, 1 of 30, cumulative 0.533, 0.833, 0.967, 1
    gram = torch.diag(torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=torch.float64))
    feature, retain = update_dualgpm(None, False, gram, 0.95)  # 2 below 0.95: r = 2 = k / 2
    assert retain
    torch.testing.assert_close(feature.abs(), e[:, :2])
    feature, retain = update_dualgpm(None, False, gram, 0.99)  # 3 below 0.99: r = 3 > k / 2
    assert retain
    torch.testing.assert_close(feature.abs(), e[:, 3:])
    feature, retain = update_dualgpm(None, False, gram, 0.8)  # 1 below 0.8: r = 1 < k / 2
    assert not retain
    torch.testing.assert_close(feature.abs(), e[:, :1])


def test_inflora_dualgpm_update_grows_then_switches_to_the_complement():
    from codyra.methods.inflora import update_dualgpm

    e = torch.eye(6, dtype=torch.float64)
    feature = e[:, :1]
    feature, retain = update_dualgpm(
        feature, False, torch.diag(torch.tensor([0, 1.0, 0, 0, 0, 0], dtype=torch.float64)), 0.95
    )
    assert not retain
    torch.testing.assert_close(feature.abs(), e[:, :2])  # e1 kept, e2 added
    gram = torch.diag(torch.tensor([0, 0, 0.4, 0.35, 0.25, 0], dtype=torch.float64))
    feature, retain = update_dualgpm(feature, False, gram, 0.99)
    # acc 0 -> 0.4 -> 0.75 -> 1.0: three directions added, 5 > 6 / 2: the free complement (e6) is kept
    assert retain and feature.shape == (6, 1)
    torch.testing.assert_close(feature.abs(), e[:, 5:])


# --- TreeLoRA ----------------------------------------------------------------------------------------


def test_treelora_tree_on_a_hand_made_gradient_set():
    from codyra.methods.treelora import build_tree

    d0 = torch.tensor([[1.0, 0.0], [1.0, 1.0], [3.0, 1.0]])  # differences: [1,0], [0,1], [2,0]
    d1 = torch.tensor([[0.0, 1.0], [0.0, 2.0], [5.0, 5.0]])  # differences: [0,1], [0,1], [5,3]
    root = build_tree([d0, d1])
    # depth 0: mean [1, 1/3], similarities [1, 1/3, 2], median 1 -> left {0, 2}, right {1}
    assert root.median == pytest.approx(1.0)
    assert root.left.tasks == [0, 2] and root.right.tasks == [1]
    # depth 1 of {0, 2}: similarities to mean [2.5, 2] are [2, 18.5]; lower median 2 puts both left,
    # so the list is split in halves
    assert root.left.median == pytest.approx(2.0)
    assert root.left.left.tasks == [0] and root.left.right.tasks == [2]
    assert root.right.left is None and root.right.median is None  # a single task is a leaf


def test_treelora_bandit_probabilities_and_picks():
    from codyra.methods.treelora import TreeBandit

    previous = [torch.tensor([[0.0, 0.0], [2.0, 3.0]], dtype=torch.float64)]
    bandit = TreeBandit(previous, None, total_rounds=1, generator=torch.Generator().manual_seed(0))
    bandit.sim[:, 0] = torch.tensor([-2.0, -6.0], dtype=torch.float64)
    bandit.counts[:, 0] = torch.tensor([1.0, 2.0], dtype=torch.float64)
    first, sim = bandit.probabilities(rounds=0)
    bonus = math.sqrt(math.log(4))
    raw = [2 + bonus / math.sqrt(2.00001), 3 + bonus / math.sqrt(4.00001)]  # -(mean - bonus / sqrt(2n))
    shifted = [v + min(raw) for v in raw]
    assert sim[:, 0].tolist() == pytest.approx(shifted)
    expected = [math.exp(v) / sum(math.exp(u) for u in shifted) for v in shifted]
    assert first.tolist() == pytest.approx(expected)
    # a pick is counted and records minus its L1 distance to the current accumulator
    current = [torch.tensor([1.0, 1.0], dtype=torch.float64)]
    (pick,) = bandit.search(0, current)
    assert bandit.counts[pick, 0] == (2.0 if pick == 0 else 3.0)
    assert bandit.sim[pick, 0] == (-2.0 - 2.0 if pick == 0 else -6.0 - 3.0)


def test_treelora_search_follows_the_reference_sign():
    from codyra.methods.treelora import TreeBandit, build_tree

    previous = [torch.tensor([[1.0, 1.0], [9.0, -9.0]], dtype=torch.float64)]
    bandit = TreeBandit(previous, build_tree(previous), total_rounds=200, generator=torch.Generator().manual_seed(0))
    current = [torch.tensor([1.0, 1.2], dtype=torch.float64)]
    picks = [bandit.search(t, current)[0] for t in range(200)]
    # the reference ranks -(-distance - bonus) = distance + bonus: once measured, the task whose
    # accumulator is farther in L1 dominates (the paper describes the nearer one; we follow the code)
    assert picks[-100:].count(1) > 70


def test_treelora_regulariser_value_and_gradient():
    from codyra.methods.treelora import scaled_regularizer, tree_regularizer

    A = [torch.tensor([[1.0, 2.0]], requires_grad=True)]
    previous = [torch.tensor([[0.0, 0.0], [3.0, 4.0]])]
    R = tree_regularizer(A, previous, [1])
    assert float(R.detach()) == pytest.approx(-11.0)
    term = scaled_regularizer(R, torch.tensor(2.0), 0.25)
    assert float(term.detach()) == pytest.approx(-11 / (-11 + 1e-5) * 2 * 0.25)
    (-term).backward()  # the reference subtracts it from the loss
    torch.testing.assert_close(A[0].grad, torch.tensor([[3.0, 4.0]]) * 2 * 0.25 / (-11 + 1e-5))
