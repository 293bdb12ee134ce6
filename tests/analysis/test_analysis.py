"""The analyses on hand-made stored updates, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from codyra.analysis import cka, drift, magnitude
from codyra.analysis.common import run_updates
from codyra.analysis.probes import scaled, without_tower
from codyra.analysis.significance import mean_ci, paired_p
from codyra.methods.lora import LoRA
from codyra.store.io import ResultError
from codyra.store.paths import task_dir
from codyra.store.updates import TaskUpdate, placement, save_update


def lora(**targets) -> TaskUpdate:
    """A lora update; each target name -> (A, B, w, param, rows)."""
    tensors, where = {}, {}
    for name, (A, B, w, param, rows) in targets.items():
        tensors.update(
            {
                f"{name}.A": torch.tensor(A, dtype=torch.float32),
                f"{name}.B": torch.tensor(B, dtype=torch.float32),
                f"{name}.w": torch.tensor(w, dtype=torch.float32),
            }
        )
        where[name] = {"param": param, "rows": rows}
    return TaskUpdate("lora", tensors, where)


def store_run(cfg, method, seed, updates, summaries=None):
    for i, update in enumerate(updates, 1):
        summary = {
            **placement(cfg, method, seed, i),
            "task": cfg["tasks"][i - 1],
            **((summaries or [{}] * len(updates))[i - 1]),
        }
        save_update(task_dir(cfg, method, seed, i), update, summary)


# dW1 = [[1, 0], [0, 0]], dW2 = [[0, 0], [0, 2]] on the same matrix; dW3 = dW1 again
U1 = lora(t=([[1.0, 0.0]], [[1.0], [0.0]], [1.0], "p", None))
U2 = lora(t=([[0.0, 1.0]], [[0.0], [1.0]], [2.0], "p", None))


def test_drift_of_two_known_updates_is_the_norm_of_their_sum():
    assert drift.cumulative_drift([U1, U2]) == pytest.approx([1.0, math.sqrt(5.0)])
    assert drift.cumulative_drift([U1, U1]) == pytest.approx([1.0, 2.0])  # same direction: adds linearly
    assert drift.cumulative_drift([U1, scaled(U1, -1.0)]) == pytest.approx([1.0, 0.0])  # undone


def test_drift_adds_row_blocks_of_a_fused_parameter_apart_and_refuses_overlaps():
    q = lora(q=([[1.0]], [[3.0]], [1.0], "in_proj", [0, 1]))
    k = lora(k=([[1.0]], [[4.0]], [1.0], "in_proj", [1, 2]))
    assert drift.cumulative_drift([q, k]) == pytest.approx([3.0, 5.0])
    overlapping = lora(x=([[1.0]], [[1.0], [1.0]], [1.0], "in_proj", [0, 2]))
    with pytest.raises(ResultError, match="overlapping row blocks of in_proj"):
        drift.cumulative_drift([q, overlapping])
    with pytest.raises(ResultError, match="both whole and by row blocks"):
        drift.cumulative_drift([q, TaskUpdate("delta", {"in_proj": torch.ones(3, 1)})])


def test_drift_table_reads_the_stored_updates(tiny_cfg):
    store_run(tiny_cfg, "lora-r4", 0, [U1, U2, U1])
    table, curves = drift.drift_table({**tiny_cfg, "methods": ["lora-r4"]})
    assert curves["lora-r4"][0] == pytest.approx([1.0, math.sqrt(5.0), math.sqrt(8.0)])
    assert [label for _, label, _ in table.rows] == ["lora-r4"]


def test_linear_cka_identical_orthogonal_and_a_hand_value():
    x = torch.tensor([[1.0], [2.0], [3.0]])
    assert cka.linear_cka(x, x) == pytest.approx(1.0)
    assert cka.linear_cka(x, 5 * x + 2) == pytest.approx(1.0)  # invariant to scale and offset
    assert cka.linear_cka(x, torch.tensor([[1.0], [-2.0], [1.0]])) == pytest.approx(
        0.0, abs=1e-12
    )  # centred: orthogonal
    # centred x = (-1, 0, 1), y = (-1, 1, 0): cos = 1/2, CKA = cos^2
    assert cka.linear_cka(x, torch.tensor([[1.0], [3.0], [2.0]])) == pytest.approx(0.25)


def test_linear_cka_matches_the_hsic_form():
    gen = torch.Generator().manual_seed(0)
    X, Y = (
        torch.randn(20, 3, generator=gen, dtype=torch.float64),
        torch.randn(20, 5, generator=gen, dtype=torch.float64),
    )
    H = np.eye(20) - 1 / 20
    K, L = H @ (X @ X.T).numpy() @ H, H @ (Y @ Y.T).numpy() @ H
    assert cka.linear_cka(X, Y) == pytest.approx(np.trace(K @ L) / math.sqrt(np.trace(K @ K) * np.trace(L @ L)))


def test_consecutive_cka_of_stored_updates(tiny_cfg):
    # dW1 and dW2 flatten to (1,0,0,0) and (0,0,0,2): centred, cos = -1/3, CKA = 1/9; then dW2 -> dW2: 1
    store_run(tiny_cfg, "lora-r4", 0, [U1, U2, scaled(U2, 3.0)])
    assert cka.consecutive_cka(run_updates(tiny_cfg, "lora-r4", 0)) == pytest.approx([1 / 9, 1.0])
    assert cka.consecutive_cka([U1, scaled(U1, 0.0)]) == [None]  # a zero update: undefined, not a crash
    empty = TaskUpdate("delta", {})  # a method that never updates the backbone (RAIL): no block at all
    assert cka.consecutive_cka([empty, empty, U1]) == [None, None]


def test_update_magnitude_operator_norms_and_effective_rank():
    update = lora(
        a=([[3.0, 0.0], [0.0, 4.0]], [[1.0, 0.0], [0.0, 0.5]], [1.0, 1.0], "p", None),  # dW = [[3, 0], [0, 2]]
        b=(torch.zeros(0, 2).tolist(), torch.zeros(2, 0).tolist(), [], "q", None),  # every component pruned
    )
    update.tensors["b.A"], update.tensors["b.B"] = torch.zeros(0, 2), torch.zeros(2, 0)
    m = magnitude.update_magnitude(update)
    assert m["A_op"] == pytest.approx(4.0) and m["B_op"] == pytest.approx(1.0)  # over updated matrices only
    assert m["eff_rank"] == pytest.approx(1.0)  # (2 + 0) / 2 matrices
    assert m["dW_fro_task"] == pytest.approx(math.sqrt(13.0))
    assert m["dW_fro_matrix"] == pytest.approx(math.sqrt(13.0) / 2)
    dense = magnitude.update_magnitude(
        TaskUpdate("delta", {"w": torch.tensor([[1.0, 1.0], [1.0, 1.0]]), "bias": torch.ones(2)})
    )
    assert dense["eff_rank"] == 1 and dense["A_op"] is None
    assert dense["dW_fro_task"] == pytest.approx(math.sqrt(4 + 2))


def test_interpolation_scales_and_removal_drops_one_tower():
    update = lora(
        **{
            "visual.t": ([[1.0]], [[2.0]], [3.0], "visual.w", None),
            "transformer.t": ([[1.0]], [[1.0]], [1.0], "transformer.w", None),
        }
    )
    half = scaled(update, 0.5).dense_deltas()
    assert float(half["visual.t"][2]) == pytest.approx(3.0)
    vision_only = without_tower(update, "text")
    assert set(vision_only.targets) == {"visual.t"} and set(vision_only.tensors) == {
        "visual.t.A",
        "visual.t.B",
        "visual.t.w",
    }
    delta = TaskUpdate("delta", {"visual.x": torch.ones(1), "token_embedding.weight": torch.ones(1)})
    assert set(without_tower(delta, "vision").tensors) == {"token_embedding.weight"}


def test_significance_against_hand_values():
    mean, std, (low, high) = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t_{0.975, 2} x s / sqrt(n), s = 1
    assert (mean, std) == pytest.approx((2.0, 1.0)) and (low, high) == pytest.approx((2 - half, 2 + half))
    # differences (1, 2, 2): t = 5 with 2 degrees of freedom, two-sided p = 1 - t / sqrt(2 + t^2)
    assert paired_p([1.0, 2.0, 3.0], [0.0, 0.0, 1.0]) == pytest.approx(1 - 5 / math.sqrt(27))
    assert paired_p([1.0, 2.0], [0.0, 1.0]) is None  # constant difference: no test
    assert mean_ci([4.0])[2] is None


def test_kind_layer_grid_lays_out_kind_by_layer():
    from codyra.analysis.rank import kind_layer_grid

    summary = {"matrices": {
        "visual.transformer.resblocks.0.attn.q": {"tower": "vision", "kind": "q", "active_rank": 3, "rank_init": 4},
        "visual.transformer.resblocks.1.attn.q": {"tower": "vision", "kind": "q", "active_rank": 1, "rank_init": 4},
        "visual.transformer.resblocks.1.mlp.c_fc": {"tower": "vision", "kind": "fc", "active_rank": 0, "rank_init": 4},
        "transformer.resblocks.0.attn.q": {"tower": "text", "kind": "q", "active_rank": 4, "rank_init": 4},
    }}  # fmt: skip
    ranks = {name: m["active_rank"] for name, m in summary["matrices"].items()}
    kinds, layers, grid = kind_layer_grid(summary, "vision", ranks)
    assert kinds == ["q", "fc"] and layers == [0, 1]
    np.testing.assert_array_equal(grid, [[3, 1], [np.nan, 0]])
    with pytest.raises(ResultError, match="no per-matrix active ranks"):
        kind_layer_grid({"task_index": 1}, "vision", ranks)


def test_cost_reports_missing_summary_keys_and_measures_stored_bytes(tiny_cfg):
    from codyra.analysis.cost import cost_table

    cfg = {**tiny_cfg, "methods": ["lora-r4"], "analysis": {**tiny_cfg["analysis"], "cost_reference": "lora-r4"}}
    store_run(
        cfg,
        "lora-r4",
        0,
        [U1, U2, U1],
        [
            {"trainable_params": 10, "step_seconds": 0.5},
            {"trainable_params": 20, "step_seconds": 1.5},
            {"trainable_params": 30},
        ],
    )
    table = cost_table(cfg)
    files = [task_dir(cfg, "lora-r4", 0, i) / "update.safetensors" for i in (1, 2, 3)]
    assert table.rows == [
        ["lora-r4", "20", f"{np.mean([f.stat().st_size for f in files]):.0f}", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"]
    ]
    assert any(
        "step_seconds, inference_extra_params, inference_memory, steps x step_seconds, seconds" in note
        for note in table.notes
    )


def test_cost_reports_inference_extras_after_the_last_task(tiny_cfg):
    """The paper's "Add. Inf. Params. / Mem." describe the model the stream ends with (O-LoRA's
    44.32M after 11 tasks): the last task's values, mean over seeds; train params and step time
    are means over tasks and seeds."""
    from codyra.analysis.cost import cost_table

    cfg = {
        **tiny_cfg,
        "seeds": [0, 1],
        "methods": ["lora-r4"],
        "analysis": {**tiny_cfg["analysis"], "cost_reference": "lora-r4"},
    }
    for seed, scale in ((0, 1), (1, 3)):
        summaries = [
            {
                "trainable_params": 10,
                "step_seconds": 0.5 * scale,
                "inference_extra_params": 100 * (i - 1) * scale,
                "inference_memory": 7 * i * scale,
                "steps": 4,
                "seconds": 10 * scale,
            }
            for i in (1, 2, 3)
        ]
        store_run(cfg, "lora-r4", seed, [U1, U2, U1], summaries)
    row = cost_table(cfg).rows[0]
    # task 3: extras 200 (seed 0) and 600 (seed 1) -> 400; memory 21 and 63 -> 42; step time (0.5 + 1.5) / 2;
    # per run, 3 tasks: steps 3 x 4 x 0.5 = 6 s and 3 x 4 x 1.5 = 18 s -> 12; job time 30 s and 90 s -> 60
    assert row[0:2] == ["lora-r4", "10"] and row[3:] == ["400", "42", "1.0000", "1.00", "12.0", "60.0"]


def test_heldout_reader_refuses_a_mislabelled_file(tiny_cfg):
    from codyra.analysis.retention import read_heldout
    from codyra.store.io import write_json
    from codyra.store.paths import heldout_path

    path = heldout_path(tiny_cfg, "codyra", 0, 2, "shape")
    write_json(path, {"accuracy": 55.0, "benchmark": "tiny", "method": "codyra", "seed": 0, "i": 2, "task": "shape"})
    assert read_heldout(tiny_cfg, "codyra", 0, 2, "shape") == 55.0
    write_json(path, {"accuracy": 155.0, "benchmark": "tiny", "method": "codyra", "seed": 0, "i": 1, "task": "shape"})
    with pytest.raises(ResultError, match=r"i is 1, expected 2; accuracy 155.0 is not a finite number in 0..100"):
        read_heldout(tiny_cfg, "codyra", 0, 2, "shape")


def test_truncation_keeps_the_top_singular_directions_and_conflict_is_mean_abs_cos():
    from codyra.analysis.conflict import conflict, truncate

    g = torch.diag(torch.tensor([3.0, 2.0, 1.0]))
    assert torch.allclose(truncate(g, 1), torch.diag(torch.tensor([3.0, 0.0, 0.0])))
    assert torch.equal(truncate(g, None), g) and torch.equal(truncate(g, 5), g)
    # task gradients e1, -e1, e2 (one 1 x 2 matrix each): |cos| = 1, 0, 0 over the three pairs
    grads = [{"m": torch.tensor([[1.0, 0.0]])}, {"m": torch.tensor([[-1.0, 0.0]])}, {"m": torch.tensor([[0.0, 1.0]])}]
    assert conflict(grads, None) == pytest.approx(1 / 3)


@pytest.mark.slow
def test_interpolation_endpoints_are_theta_0_and_theta_n(tiny_run):
    """alpha = 0 rebuilds theta_0 and alpha = 1 theta_N exactly, so the table takes their held-out
    results from H_0 and H_N and the probe job computes only the alphas between."""
    from codyra.analysis.probe_tables import interpolation_table
    from codyra.analysis.probes import probe_model, read_probe, run_probes
    from codyra.clip.model import pretrained_clip
    from codyra.clip.rebuild import rebuild_clip
    from codyra.evaluation.heldout import evaluate_heldout
    from codyra.experiment.train_job import train_task
    from codyra.store.paths import probe_path

    alphas = {"interpolation_alphas": [0.0, 0.5, 1.0], "remove_towers": ["text"]}
    cfg = {
        **tiny_run,
        "methods": ["lora-r4"],
        "heldout_tasks": ["shape"],
        "analysis": {**tiny_run["analysis"], **alphas},
    }
    for i in (1, 2, 3):
        train_task(cfg, "lora-r4", 0, i)
    start, end = (
        probe_model(cfg, "lora-r4", 0, lambda u: scaled(u, 0.0), LoRA)[0],
        probe_model(cfg, "lora-r4", 0, lambda u: scaled(u, 1.0), LoRA)[0],
    )
    for probe, reference in ((start, pretrained_clip(cfg)), (end, rebuild_clip(cfg, "lora-r4", 0, 3))):
        ours, theirs = probe.model.state_dict(), reference.model.state_dict()
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert [r["probe"] for r in run_probes(cfg, "lora-r4", 0)] == ["interp-0.5", "remove-text"]
    assert (
        not probe_path(cfg, "lora-r4", 0, "interp-0").exists()
        and not probe_path(cfg, "lora-r4", 0, "interp-1").exists()
    )
    h0, hn = evaluate_heldout(cfg, "lora-r4", 0, 0)[0], evaluate_heldout(cfg, "lora-r4", 0, 3)[0]
    row = next(cells for block, method, cells in interpolation_table(cfg).rows if block == "shape")
    assert row == [
        [h0["accuracy"]],
        [read_probe(cfg, "lora-r4", 0, "interp-0.5")["heldout"]["shape"]],
        [hn["accuracy"]],
    ]
    save_update(
        task_dir(cfg, "lora-r4", 0, 3), U1, {"method": "lora-r4", "seed": 0, "task_index": 3}
    )  # another update 3
    with pytest.raises(ResultError, match="stale"):
        read_probe(cfg, "lora-r4", 0, "interp-0.5")
