"""The norm-matched probe (LoRA's ||dW||_F penalty and its table), the A-matrix cosine (fig. orth)
and the analyses a config skips, against hand-computed values on small tensors."""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path

import pytest
import torch

from codyra.adapters.lora import RankSelectiveLoRA
from codyra.analysis import orth
from codyra.analysis.norm_matched import norm_matched_table
from codyra.analysis.registry import available, skipped, write
from codyra.experiment.config import ConfigError, load_config
from codyra.methods import method_classes
from codyra.methods.lora import LoRA, norm_target_value
from codyra.store.io import ResultError
from codyra.store.updates import delta_from_factors
from tests.analysis.test_analysis import lora, store_run
from tests.conftest import ROOT


def adapter(A, B, alpha, w=None) -> RankSelectiveLoRA:
    A, B = torch.tensor(A), torch.tensor(B)
    a = RankSelectiveLoRA(A.shape[1], B.shape[0], A.shape[0], alpha, gated=w is not None)
    with torch.no_grad():
        a.A.copy_(A)
        a.B.copy_(B)
        if w is not None:
            a.w.copy_(torch.tensor(w))
    return a


def test_frobenius_of_an_adapter_by_hand_and_against_the_dense_delta():
    # scale alpha / r = 2: dW = 2 [[1], [0]] [[3, 4]] = [[6, 8], [0, 0]], ||dW||_F = 10
    assert float(adapter([[3.0, 4.0]], [[1.0], [0.0]], alpha=2.0).frobenius_sq().detach()) == pytest.approx(100.0)
    gen = torch.Generator().manual_seed(0)
    a = adapter(
        torch.randn(3, 5, generator=gen).tolist(), torch.randn(4, 3, generator=gen).tolist(), 6.0, w=[0.5, -2.0, 0.0]
    )
    dense = delta_from_factors(*a.factors())
    assert float(a.frobenius_sq().detach()) == pytest.approx(float(dense.square().sum()), rel=1e-5)


def norm_matched(target, penalty, *adapters) -> LoRA:
    method = LoRA({"kind": "lora", "rank": 1, "norm_target": target, "norm_penalty": penalty})
    method.adapters = {f"m{k}": a for k, a in enumerate(adapters)}
    method.norm_goal = target
    return method


def test_the_penalty_is_weight_times_squared_distance_of_the_task_norm():
    ten = adapter([[3.0, 4.0]], [[1.0], [0.0]], alpha=2.0)
    assert norm_matched(5.0, 2.0, ten).extra_loss(None, {}, {}).item() == pytest.approx(2.0 * (10.0 - 5.0) ** 2)
    # two matrices with norms 3 and 4: the task's norm is 5, on target
    three, four = adapter([[3.0]], [[1.0]], alpha=1.0), adapter([[4.0]], [[1.0]], alpha=1.0)
    assert norm_matched(5.0, 2.0, three, four).extra_loss(None, {}, {}).item() == pytest.approx(0.0, abs=1e-9)
    assert LoRA({"kind": "lora", "rank": 1}).extra_loss(None, {}, {}) is None  # no probe: no term


def test_a_step_on_the_penalty_moves_the_norm_to_the_target_and_is_zero_safe_at_b_zero():
    for start, target in ((10.0, 5.0), (1.0, 5.0)):
        a = adapter([[start, 0.0]], [[1.0], [0.0]], alpha=1.0)
        method = norm_matched(target, 1.0, a)
        method.extra_loss(None, {}, {}).backward()
        with torch.no_grad():
            for p in (a.A, a.B):
                p -= 0.001 * p.grad
        assert abs(method.frobenius().item() - target) < abs(start - target)
    fresh = adapter([[1.0, 2.0]], [[0.0], [0.0]], alpha=1.0)  # LoRA's start: B = 0, dW = 0
    norm_matched(5.0, 1.0, fresh).extra_loss(None, {}, {}).backward()
    assert torch.isfinite(fresh.B.grad).all() and torch.isfinite(fresh.A.grad).all()


def test_norm_options_go_together_and_references_must_be_other_methods(tiny_cfg_dict):
    with pytest.raises(ValueError, match="norm_target and a norm_penalty > 0 go together"):
        LoRA({"kind": "lora", "norm_target": 3.0})
    with pytest.raises(ValueError, match="has no option 'norm_target'"):
        load_config(
            {
                **tiny_cfg_dict,
                "method_configs": {**tiny_cfg_dict["method_configs"], "codyra": {"kind": "codyra", "norm_target": 1.0}},
            }
        )
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"]["nm"] = {"kind": "lora", "rank": 2, "norm_target": ["lora-r8"], "norm_penalty": 1.0}
    cfg["methods"].append("nm")
    with pytest.raises(
        ConfigError, match=r"method_configs.nm.norm_target: 'lora-r8' must be another method of the grid"
    ):
        load_config(cfg)
    cfg["method_configs"]["nm"]["norm_target"] = ["lora-r4", "codyra"]
    assert load_config(cfg)["method_configs"]["nm"]["norm_target"] == ["lora-r4", "codyra"]


def test_the_target_is_the_median_of_the_references_norms_of_the_same_task_and_seed():
    summaries = {
        m: {"method": m, "seed": 0, "task_index": 2, "dW_fro_total": norm}
        for m, norm in (("lora-r4", 1.0), ("codyra", 3.0), ("full-ft", 10.0))
    }

    def run_summary(m):  # TaskContext.run_summary of task 2, seed 0
        if m not in summaries:
            raise FileNotFoundError(f"{m}/seed_0/task_2/summary.json missing")
        return summaries[m]

    assert norm_target_value(run_summary, ["lora-r4", "codyra", "full-ft"], 0, 2) == 3.0
    assert norm_target_value(run_summary, ["lora-r4", "codyra"], 0, 2) == 2.0
    with pytest.raises(
        FileNotFoundError, match="task 2 \\(seed 0\\) is not trained: sora/seed_0/task_2/summary.json missing"
    ):
        norm_target_value(run_summary, ["sora"], 0, 2)
    summaries["full-ft"]["dW_fro_total"] = None
    with pytest.raises(ResultError, match="no finite dW_fro_total"):
        norm_target_value(run_summary, ["full-ft"], 0, 2)


def test_norm_matched_table_by_hand(tiny_cfg_dict):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"]["nm"] = {"kind": "lora", "rank": 2, "norm_target": ["lora-r4"], "norm_penalty": 1.0}
    cfg["methods"] = ["lora-r4", "nm"]
    cfg = load_config(cfg)
    summaries = lambda norms, targets, rank: [
        {"active_rank_mean": rank, "dW_fro_total": n, "norm_target": t} for n, t in zip(norms, targets, strict=True)
    ]
    store_run(
        cfg, "lora-r4", 0, [lora(t=([[1.0]], [[1.0]], [1.0], "p", None))] * 3, summaries([2.0, 4.0, 6.0], [None] * 3, 4)
    )
    store_run(
        cfg, "nm", 0, [lora(t=([[1.0]], [[1.0]], [1.0], "p", None))] * 3, summaries([2.0, 4.5, 6.0], [2.0, 4.0, 6.0], 2)
    )
    # rows 0..3 of A (3 tasks): plasticity A[j+1,j] - A[0,j] = 10, 20, 30; forgetting A[j+1,j] - A[3,j] = 4, 8
    A = [[50, 40, 30], [60, 0, 0], [58, 60, 0], [56, 52, 60]]
    table = norm_matched_table(cfg, {"lora-r4": [{"A": A}], "nm": [{"A": A}]}, method_classes(cfg, cfg["methods"]))
    rows = {label: [None if c is None else c[0] for c in cells] for _, label, cells in table.rows}
    assert (
        rows["lora-r4"][:2] == pytest.approx([4, 4.0])
        and rows["lora-r4"][2] is None
        and rows["lora-r4"][3:] == pytest.approx([20.0, 6.0])
    )
    assert rows["nm"] == pytest.approx([2, 12.5 / 3, 4.0, 20.0, 6.0])
    assert "nm seed 0 tasks [2]" in table.caption  # 4.5 is 12.5 % off its target 4
    assert "Learnt less" not in table.caption  # as much Delta-plasticity as its reference
    # nm learns 4 points a task against lora-r4's 20: below 25 %, named
    flat = [[50, 40, 30], [54, 0, 0], [52, 44, 0], [50, 42, 34]]
    table = norm_matched_table(cfg, {"lora-r4": [{"A": A}], "nm": [{"A": flat}]}, method_classes(cfg, cfg["methods"]))
    assert "Learnt less than 25% of the natural runs' Delta-plasticity (lower norm_penalty): nm seed 0" in table.caption


def test_row_cosine_by_hand():
    assert orth.row_cosine(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])) == pytest.approx(0.5)
    assert orth.row_cosine(torch.tensor([[2.0, 2.0]]), torch.tensor([[-3.0, 0.0]])) == pytest.approx(
        1 / math.sqrt(2)
    )  # |cos|, scale-free
    with pytest.raises(ValueError, match="same number of columns"):
        orth.row_cosine(torch.ones(1, 2), torch.ones(1, 3))


def test_per_task_similarity_averages_over_the_other_tasks_and_shared_weights():
    e1, e2, d = [[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]
    B = [[1.0], [1.0]]
    t1 = lora(a=(e1, B, [1.0], "p", None), b=(e1, B, [1.0], "q", None))
    t2 = lora(a=(e1, B, [1.0], "p", None), b=(e2, B, [1.0], "q", None))  # a: cos 1 with t1; b: 0 -> 0.5
    t3 = lora(a=(d, B, [1.0], "p", None))  # only a: cos 1/sqrt2 with t1 and t2
    c = 1 / math.sqrt(2)
    assert orth.per_task_similarity([t1, t2, t3]) == pytest.approx([(0.5 + c) / 2, (0.5 + c) / 2, c])
    pruned = lora(a=(torch.zeros(0, 2).tolist(), torch.zeros(2, 0).tolist(), [], "p", None))
    pruned.tensors["a.A"], pruned.tensors["a.B"] = torch.zeros(0, 2), torch.zeros(2, 0)
    assert orth.per_task_similarity([t3, pruned]) == [None, None]  # nothing updated in common


def test_a_cosine_table_and_figure_from_stored_updates(tiny_cfg):
    cfg = {**tiny_cfg, "methods": ["lora-r4"]}
    B = [[1.0], [1.0]]
    store_run(cfg, "lora-r4", 0, [lora(a=(e, B, [1.0], "p", None)) for e in ([[1.0, 0.0]], [[1.0, 0.0]], [[0.0, 1.0]])])
    write(cfg, "orth")
    rows = [
        line.split(",") for line in Path(cfg["results"], "tables", "tiny", "a_cosine.csv").read_text().splitlines()[1:]
    ]
    # task 1: (1 + 0) / 2, task 2: the same, task 3: 0; mean 1/3
    assert [(r[1], r[2]) for r in rows] == [
        ("lora-r4", "colour"),
        ("lora-r4", "digits"),
        ("lora-r4", "count"),
        ("lora-r4", "Mean"),
    ]
    assert [float(r[3]) for r in rows] == pytest.approx([0.5, 0.5, 0.0, 1 / 3])
    assert all(os.path.isfile(os.path.join(cfg["results"], "figures", "tiny", f"a_cosine.{e}")) for e in ("png", "pdf"))


def test_trace_skips_the_clip_only_analyses_with_the_reason(tmp_path, caplog):
    cfg = load_config(os.path.join(ROOT, "config", "mini_trace.yaml"))
    cfg["results"] = str(tmp_path)
    why = skipped(cfg)
    assert "CLIP only" in why["conflict"] and "CLIP only" in why["probes"]
    assert "conflict" not in available(cfg) and "cka" in available(cfg)  # CKA reads stored updates: any family
    write(cfg, "conflict")
    assert "analysis conflict skipped for mini-trace" in caplog.text and not any(tmp_path.rglob("*"))


@pytest.mark.slow
def test_training_at_a_matched_norm_reads_the_references_and_pulls_the_norm(tiny_run):
    from codyra.experiment.train_job import train_task

    cfg = copy.deepcopy(tiny_run)
    cfg["method_configs"]["nm-median"] = {"kind": "lora", "rank": 4, "norm_target": ["lora-r4"], "norm_penalty": 1.0}
    cfg["method_configs"]["nm-far"] = {"kind": "lora", "rank": 4, "norm_target": 1.0, "norm_penalty": 100.0}
    cfg["methods"] += ["nm-median", "nm-far"]
    cfg = load_config(cfg)
    natural = train_task(cfg, "lora-r4", 0, 1).summary
    assert train_task(cfg, "nm-median", 0, 1).summary["norm_target"] == natural["dW_fro_total"]  # median of one
    far = train_task(cfg, "nm-far", 0, 1).summary
    assert far["norm_target"] == 1.0 and abs(far["dW_fro_total"] - 1.0) < abs(natural["dW_fro_total"] - 1.0)
