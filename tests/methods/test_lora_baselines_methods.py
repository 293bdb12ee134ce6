"""The LoRA-family baselines through the method interface on a toy two-layer model: two tasks in the
engine's hook order (setup, forward + extra_loss, before_optimizer_step, optimizer step,
after_step, finish, state_to_store), task 2 reading task 1's stored state."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from codyra.adapters.targets import PlacementVocabulary, Target
from codyra.methods import build_method
from codyra.methods.base import TaskContext, standalone_context, summary_defaults

TARGETS = [Target("l1", "l1.weight", None, 8, 8, "lm", "q_proj"), Target("l2", "l2.weight", None, 8, 4, "lm", "v_proj")]
VOCAB = PlacementVocabulary(towers=("lm",), groups={"attn": ("q_proj", "v_proj")})
STEPS = 12


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


def task_batches(task: int) -> list[dict]:
    """Task t's inputs live on coordinates 3(t-1)..3t-1 (plus small noise); targets a fixed linear map."""
    g = torch.Generator().manual_seed(100 + task)
    W = torch.randn(4, 8, generator=g)
    batches = []
    for _ in range(STEPS):
        x = 0.05 * torch.randn(16, 8, generator=g)
        x[:, 3 * (task - 1) : 3 * task] += torch.randn(16, 3, generator=g)
        batches.append({"x": x, "y": x @ W.T})
    return batches


def context(model, task: int, previous_state, batches, previous_update=None) -> TaskContext:
    """Task ``task`` of a two-task stream (the standalone context with this toy's data and loss)."""
    family = SimpleNamespace(targets=lambda _m: TARGETS, vocabulary=VOCAB)
    base = standalone_context(model, family, torch.Generator().manual_seed(task), 0.0, STEPS)
    return dataclasses.replace(
        base,
        task_index=task,
        previous_state=previous_state,
        stored_update=base.stored_update if previous_update is None else {task - 1: previous_update}.__getitem__,
        forward=lambda m, b: {"logits": m(b["x"])},
        task_loss=lambda b, o: ((o["logits"] - b["y"]) ** 2).mean(),
        task_batches=lambda: iter(batches),
        cfg={"tasks": ["t1", "t2"]},
    )


def run_task(spec: dict, model, task: int, previous_state, previous_update=None):
    method = build_method(spec)
    batches = task_batches(task)
    ctx = context(model, task, previous_state, batches, previous_update)
    optimizer = torch.optim.AdamW(method.setup(ctx), lr=0.02)
    metrics = []
    for step, batch in enumerate(batches, start=1):
        outputs = ctx.forward(model, batch)
        loss = ctx.task_loss(batch, outputs)
        extra = method.extra_loss(ctx, batch, outputs)
        if extra is not None:
            assert torch.isfinite(extra)
        (loss if extra is None else loss + extra).backward()
        method.before_optimizer_step(ctx)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # as the engine's backend, before after_step
        method.after_step(step, STEPS)
        metrics.append(method.step_metrics())
    update, summary = method.finish(model)
    method.update = update
    state = method.state_to_store()
    assert all(torch.isfinite(t.float()).all() for t in state.values())
    return method, summary_defaults(summary), state, metrics


SPECS = {
    "olora": {"kind": "olora", "rank": 2},
    "hidelora": {"kind": "hidelora", "rank": 2},
    "hidelora-merge": {"kind": "hidelora", "rank": 2, "adapter": "per_task_merge", "previous_subspaces": True},
    "treelora": {"kind": "treelora", "rank": 2},
    "treelora-merge": {"kind": "treelora", "rank": 2, "adapter": "per_task_merge"},
    "inflora": {"kind": "inflora", "rank": 2, "lamb": 0.9},
    "adalora": {"kind": "adalora", "rank": 4, "target_r": 2, "tinit": 0.25, "tfinal": 0.25},
    "dylora": {"kind": "dylora", "rank": 4, "frozen": True, "merge_rank": 3},
    "sora": {"kind": "sora", "rank": 4, "lambda_prox": 0.02},
}


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_method_runs_two_tasks_through_the_interface(kind):
    torch.manual_seed(0)
    model = Toy()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    method1, summary1, state1, _ = run_task(SPECS[kind], model, 1, None)
    assert isinstance(summary1["trainable_params"], int) and summary1["trainable_params"] > 0
    assert summary1["inference_extra_params"] >= 0
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert changed == ["l1.weight", "l2.weight"]  # the update merged, biases untouched
    assert not any(isinstance(m, nn.Linear) and type(m) is not nn.Linear for m in model.modules())  # adapters detached
    method2, summary2, state2, metrics2 = run_task(SPECS[kind], model, 2, state1 or None, method1.update)
    CHECKS[kind](method2, summary1, summary2, state1, state2, metrics2)


def check_olora(method, s1, s2, state1, state2, metrics):
    assert state1["l1.A"].shape == (2, 8) and state2["l1.A"].shape == (4, 8)  # all tasks' A rows
    assert torch.equal(state2["l1.A"][:2], state1["l1.A"])
    per_task = 2 * (8 + 8) + 2 * (8 + 4)  # rank 2 on l1 (8 -> 8) and l2 (8 -> 4)
    # the earlier tasks' LoRAs beside the task's own (paper: 44.32M = 10 x 4.43M after 11 tasks)
    assert (s1["inference_extra_params"], s2["inference_extra_params"]) == (0, per_task)


def continues_task_1_adapter(method) -> bool:
    """Task 2's update is [A_2; A_1]: it trained task 1's adapter further (``adapter: stream``)."""
    A = method.update.tensors["l1.A"]
    return A.shape[0] == 4 and torch.equal(A[2:], method.carried["l1"][0])


def check_hidelora(method, s1, s2, state1, state2, metrics):
    # the reference as run: M = A alone, the one adapter continued
    assert state2["l2.A"].shape == (2, 8) and method.previous_A == {} and continues_task_1_adapter(method)
    assert float(method.penalty().detach()) > 0


def check_hidelora_merge(method, s1, s2, state1, state2, metrics):
    assert state2["l2.A"].shape == (4, 8) and float(method.penalty().detach()) > 0
    assert method.update.tensors["l1.A"].shape[0] == 2  # a fresh LoRA, merged


def check_treelora(method, s1, s2, state1, state2, metrics):
    assert state1["l1.A_tasks"].shape == (1, 16) and state2["l1.A_tasks"].shape == (2, 16)
    assert torch.equal(state2["l1.A_tasks"][:1], state1["l1.A_tasks"])
    assert method.bandit.counts.sum() == STEPS * 2  # one pick per micro-batch (one per step here) and depth
    assert s2["inference_extra_params"] == 16 + 16  # task 1's A-sized vectors of l1 and l2 (2 x 8 each)
    assert continues_task_1_adapter(method) == (method.options.adapter == "stream")


def check_inflora(method, s1, s2, state1, state2, metrics):
    # task 2's l1 update is blind to task 1's protected input subspace
    feature, retain = state1["l1.feature"].double(), bool(state1["l1.retain"])
    assert not retain and feature.shape[1] >= 1
    adapter = method.adapters["l1"]
    dW = (adapter.B @ adapter.A).detach().double()
    assert float((dW @ feature).abs().max()) < 1e-5
    assert s2["trainable_params"] == 2 * 8 + 2 * 4  # only B trains


def check_adalora(method, s1, s2, state1, state2, metrics):
    assert s2["active_rank_total"] == 2 * 2  # target_r x matrices after the final allocation
    assert metrics[-1]["budget"] == 4.0


def check_dylora(method, s1, s2, state1, state2, metrics):
    assert s2["active_rank_total"] == 3 * 2  # merged at merge_rank
    assert {m["sampled_rank"] for m in metrics} <= {1.0, 2.0, 3.0, 4.0}


def check_sora(method, s1, s2, state1, state2, metrics):
    assert metrics[0]["prox_lambda"] == 0.02
    assert s2["active_rank_total"] < 4 * 2  # the proximal step pruned gates


CHECKS = {
    "olora": check_olora,
    "hidelora": check_hidelora,
    "hidelora-merge": check_hidelora_merge,
    "treelora": check_treelora,
    "treelora-merge": check_treelora,
    "inflora": check_inflora,
    "adalora": check_adalora,
    "dylora": check_dylora,
    "sora": check_sora,
}


def test_olora_task_2_needs_task_1_state():
    with pytest.raises(ValueError, match="method state"):
        run_task(SPECS["olora"], Toy(), 2, None)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "adalora", "rank": 4, "target_r": 4}, "target_r: must be < rank"),
        ({"kind": "adalora", "tinit": 0.6, "tfinal": 0.5}, "tinit \\+ tfinal must be < 1"),
        ({"kind": "dylora", "rank": 4, "merge_rank": 5}, "merge_rank: must be <= rank"),
        ({"kind": "sora", "lambda_schedule": "linear"}, "needs max_lambda and lambda_num"),
        ({"kind": "inflora", "lamb": 1.5}, "lamb: must be <= 1"),
        ({"kind": "treelora", "reg": -1}, "reg: must be >= 0"),
        ({"kind": "treelora", "adapter": "merged"}, "adapter: must be one of"),
        (
            {"kind": "hidelora", "previous_subspaces": True},
            "previous_subspaces: stacks earlier tasks' LoRAs.*adapter: per_task_merge",
        ),
    ],
)
def test_bad_options_name_the_key(spec, message):
    with pytest.raises(ValueError, match=message):
        build_method(spec)


def test_adalora_refuses_a_task_without_a_step_before_its_final_allocation():
    ctx = dataclasses.replace(context(Toy(), 1, None, task_batches(1)), total_steps=1)
    with pytest.raises(ValueError, match="no step before its final allocation.*train.iterations"):
        build_method({"kind": "adalora", "rank": 4, "target_r": 2}).setup(ctx)


def test_treelora_searches_every_micro_batch_and_restarts_every_epoch():
    """Tree_LoRA.py: per epoch ``new_epoch_init(len(train_dataloader))``, then per micro-batch
    ``step`` (round t from 0, tmp_reg = reg t / T), ``insert_grad`` (+ n_depth A / T) and
    ``tree_search``. Here 2 epochs of 2 steps x 3 micro-batches: T = 6."""
    spec = {"kind": "treelora", "rank": 2, "reg": 0.5}
    model = Toy()
    first, _, state1, _ = run_task(spec, model, 1, None)
    method = build_method(spec)
    batches = task_batches(2)
    ctx = dataclasses.replace(
        context(model, 2, state1, batches, first.update), total_steps=4, steps_per_epoch=2, micro_batches_per_step=3
    )
    optimizer = torch.optim.AdamW(method.setup(ctx), lr=0.02)
    seen, extras = [], []  # A per micro-batch, extra loss per micro-batch
    for step in range(1, 5):
        for batch in batches[3 * step - 3 : 3 * step]:
            seen.append([method.adapters[n].A.detach().clone() for n in ("l1", "l2")])
            outputs = ctx.forward(model, batch)
            extra = method.extra_loss(ctx, batch, outputs)
            extras.append(float(extra.detach()))
            (ctx.task_loss(batch, outputs) + extra / 3).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.after_step(step, 4)
    # tmp_reg = 0 at each epoch's first micro-batch: no pull; afterwards the term is -tmp_reg * L (R / (R + 1e-5) ~ 1)
    assert extras[0] == 0 and extras[6] == 0 and all(e < 0 for i, e in enumerate(extras) if i % 6)
    # the bandit restarted with epoch 2: its 6 rounds x 2 depths of picks, nothing of epoch 1's
    assert method.epoch == 1 and method.round == 5 and method.bandit.counts.sum() == 12
    # the stored accumulator: epoch 2's micro-batches only, each adding n_depth * A / T = 2 A / 6
    expected = sum(2 * A[0].reshape(-1).double() / 6 for A in seen[6:])
    torch.testing.assert_close(method.state_to_store()["l1.A_tasks"][1], expected.float())


def test_inflora_refuses_a_rank_above_a_matrixs_input_width():
    """Its design takes rank directions of the input space: the toy's matrices read 8 features."""
    with pytest.raises(ValueError, match="inflora: rank 9 exceeds the input width of 2 adapted matrices.*8"):
        build_method({"kind": "inflora", "rank": 9}).setup(context(Toy(), 1, None, task_batches(1)))
