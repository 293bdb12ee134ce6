"""CL-LoRA (codyra.methods.cl_lora): its distillation, gradient reassignment and block-weight
orthogonality against hand-computed values, its options, and two tasks of the tiny CLIP run
through the training loop and the row evaluation."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.train_job import train_task
from codyra.methods.cl_lora.clip import random_orthonormal
from codyra.methods.cl_lora.losses import kd_loss, orthogonality, reassign, reassignment_weights
from codyra.store.cells import read_cell
from codyra.store.paths import cell_path, task_dir
from codyra.store.updates import load_method_state, load_update

SPEC = {"kind": "cl_lora"}


def test_distillation_is_the_soft_cross_entropy_at_temperature_two_without_t_squared():
    # row 1: teacher / 2 = [0, ln 3] -> softmax [1/4, 3/4]; student / 2 = [0, 0] -> log 1/2 each: loss ln 2
    # row 2: student = teacher: the entropy of [1/4, 3/4]
    teacher = torch.tensor([[0.0, 2 * math.log(3)], [0.0, 2 * math.log(3)]])
    student = torch.tensor([[0.0, 0.0], [0.0, 2 * math.log(3)]])
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert kd_loss(student, teacher, 2.0).item() == pytest.approx((math.log(2) + entropy) / 2)


def test_gradient_reassignment_scales_each_output_row_by_its_previous_norm_at_mean_one():
    previous_up = torch.tensor([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])  # row norms 5, 0, 1: sum 6 over 3 rows
    weights = reassignment_weights(previous_up)
    assert weights.tolist() == [2.5, 0.0, 0.5]
    grad = torch.tensor([[1.0, -2.0], [5.0, 5.0], [4.0, 2.0]])
    assert reassign(grad, weights).tolist() == [[2.5, -5.0], [0.0, 0.0], [2.0, 1.0]]
    assert reassignment_weights(torch.zeros(3, 2)).tolist() == [1.0, 1.0, 1.0]  # nothing learned: unchanged


def test_block_weight_orthogonality_is_the_mean_absolute_cosine_with_earlier_tasks():
    current = torch.tensor([[1.0, 1.0]])
    earlier = [torch.tensor([[1.0, 0.0]]), torch.tensor([[-1.0, -1.0]])]  # |cos| 1/sqrt(2) and 1
    assert orthogonality(earlier, current).item() == pytest.approx((1 / math.sqrt(2) + 1) / 2, rel=1e-6)


def test_down_projections_have_orthonormal_rows():
    a = random_orthonormal(3, 8, torch.Generator().manual_seed(0))
    assert a.shape == (3, 8)
    torch.testing.assert_close(a @ a.T, torch.eye(3))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"projections": ["q", "x"]}, r"projections: must be distinct items of q, k, v, got \['q', 'x'\]"),
        ({"projections": ["v", "v"]}, r"projections: must be distinct items of q, k, v, got \['v', 'v'\]"),
        ({"temperature": 0}, "temperature: must be > 0, got 0"),
        ({"unseen_branch": "zero_shot"}, "unseen_branch: must be one of 'shared', 'last', got 'zero_shot'"),
    ],
)
def test_bad_options_are_named_at_config_validation(tiny_cfg_dict, options, message):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"]["cl-lora"] = {**SPEC, **options}
    cfg["methods"] = [*cfg["methods"], "cl-lora"]
    with pytest.raises(ConfigError, match=rf"config key method_configs\.cl-lora(\.|: ){message}"):
        load_config(cfg)


def test_a_split_without_task_specific_blocks_fails_at_setup(tiny_run):
    tiny_run["method_configs"]["cl-lora"] = {**SPEC, "shared_blocks": 2}
    with pytest.raises(ValueError, match="shared_blocks must leave task-specific blocks in the 2-block image tower"):
        train_task(tiny_run, "cl-lora", 0, 1)


def test_cl_lora_trains_two_tasks_and_scores_each_task_by_its_own_branch(tiny_run):
    cfg = tiny_run
    cfg["method_configs"]["cl-lora"] = SPEC
    summaries = [train_task(cfg, "cl-lora", 0, i).summary for i in (1, 2)]
    assert load_update(task_dir(cfg, "cl-lora", 0, 2)).kind == "none"  # the backbone never changes
    first, second = (load_method_state(task_dir(cfg, "cl-lora", 0, i)) for i in (1, 2))
    # codyra-mini's image tower has 2 blocks: block 0 shared, block 1 task-specific; Q and V, rank 10
    shared_q = "shared.visual.transformer.resblocks.0.attn.q"
    assert set(second) == {f"shared.visual.transformer.resblocks.0.attn.{p}.{f}" for p in "qv" for f in "AB"} | {
        f"branch.{k}.visual.transformer.resblocks.1.attn.{p}.{f}" for k in (0, 1) for p in "qv" for f in "AB"
    } | {
        "branch.0.block_weights",
        "branch.1.block_weights",
    }
    assert second[f"{shared_q}.B"].shape == (64, 10) and second["branch.1.block_weights"].shape == (3, 1)
    torch.testing.assert_close(second[f"{shared_q}.A"], first[f"{shared_q}.A"])  # the shared down stays frozen
    assert not torch.equal(second[f"{shared_q}.B"], first[f"{shared_q}.B"])  # the shared up keeps training
    for key in first:  # task 1's branch and block weights are frozen after it
        if key.startswith("branch.0."):
            torch.testing.assert_close(second[key], first[key])
    # trainable: shared ups 2 x 64 x 10, the branch's A and B 2 x 2 x 64 x 10, its block weights 3
    assert summaries[0]["trainable_params"] == summaries[1]["trainable_params"] == 1280 + 2560 + 3
    assert summaries[1]["inference_extra_params"] == sum(t.numel() for t in second.values())
    history = [json.loads(line) for line in (task_dir(cfg, "cl-lora", 0, 2) / "history.jsonl").read_text().splitlines()]
    assert all(r["kd_loss"] >= 0 and r["orth_loss"] > 0 for r in history)  # distillation from task 2 on

    cells = evaluate_row(cfg, "cl-lora", 0, 2)
    assert [c["j"] for c in cells] == [1, 2, 3]
    routing = [
        read_cell(cfg, cell_path(cfg, "cl-lora", 0, 2, j), "cl-lora", 0, 2, j, classifies=True)["routing"]
        for j in (1, 2, 3)
    ]
    # each task's own label space: its classes are all its own (task 3, not learned: the shared LoRA)
    assert [r["routes"] for r in routing] == [{"0": 40}, {"1": 40}, {"-1": 40}]
    assert [c["accuracy"] for c in evaluate_row(cfg, "cl-lora", 0, 2)] == [c["accuracy"] for c in cells]


def test_an_unseen_task_is_scored_by_the_shared_lora_or_the_last_branch(tiny_run, monkeypatch):
    """After task 1, task 2's classes: ``shared`` embeds with no specific LoRA, ``last`` with task 1's."""
    from codyra.methods import build_method
    from codyra.methods.cl_lora import clip

    cfg = tiny_run
    cfg["method_configs"]["cl-lora"] = SPEC
    train_task(cfg, "cl-lora", 0, 1)
    state = load_method_state(task_dir(cfg, "cl-lora", 0, 1))
    used = []
    forward = clip._SpecificSlot.forward

    def spy(self, x):
        used.append(self._modules_ref[0].branch)
        return forward(self, x)

    monkeypatch.setattr(clip._SpecificSlot, "forward", spy)
    for unseen, branch in (("shared", None), ("last", 0)):
        used.clear()
        options = build_method({**SPEC, "unseen_branch": unseen}).options
        cell = next(clip.cl_lora_row(cfg, "cl-lora", options, 0, 1, [2], torch.device("cpu"), state))
        assert set(used) == {branch} and cell["routing"]["routes"] == {"-1": 40}


def test_the_reassigned_distillation_gradient_is_added_to_the_cross_entropys_before_the_step():
    from codyra.methods import build_method

    method = build_method(SPEC)
    up = torch.nn.Parameter(torch.zeros(2, 1))
    up.grad = torch.tensor([[1.0], [2.0]])  # the cross-entropy's
    method.shared_up, method.pending = {"t": up}, {"t": torch.tensor([[0.5], [0.0]])}
    method.before_optimizer_step(None)
    assert up.grad.tolist() == [[1.5], [2.0]] and method.pending == {}
