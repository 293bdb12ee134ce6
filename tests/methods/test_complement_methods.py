"""The model-complementation methods wired into the grid: MoE-Adapters and CoDyRA + RAIL on the tiny
CLIP run (two tasks end to end, cells rebuilt from the stored files)."""

from __future__ import annotations

import pytest
import torch

from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.train_job import train_task
from codyra.methods import _routing as routing
from codyra.methods.moe_adapters import layer as moe
from codyra.store.cells import read_cell
from codyra.store.paths import cell_path, task_dir
from codyra.store.updates import load_method_state, load_update


def test_moe_layer_routes_by_the_active_tasks_router_on_hand_made_features():
    control = moe.Control()
    layer = moe.MoELayer(
        torch.nn.Identity(), torch.nn.Identity(), 2, control, experts=3, top_k=1, bottleneck=2, scale=1.0, dropout=0.0
    )
    for e, expert in enumerate(layer.experts):  # expert e adds e + 1 to every coordinate
        torch.nn.init.constant_(expert.up_proj.bias, float(e + 1))
    layer.add_router()
    layer.add_router()
    with torch.no_grad():
        layer.routers[0].copy_(
            torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
        )  # task 1: x_0 -> expert 0, x_1 -> expert 2
        layer.routers[1].copy_(torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]))  # task 2: always expert 1
    layer.eval()
    x = torch.tensor([[[5.0, 0.0], [9.0, 9.0]], [[0.0, 5.0], [9.0, 9.0]]])  # (B=2, L=2, D=2): the first token decides
    control.route = None
    torch.testing.assert_close(layer(x), x)  # the plain block: no expert
    control.route = 0
    torch.testing.assert_close(layer(x), x + torch.tensor([1.0, 3.0]).view(2, 1, 1))
    control.route = 1
    torch.testing.assert_close(layer(x), x + 2.0)
    with pytest.raises(ValueError, match="top_k must be in 1..3"):
        moe.MoELayer(
            torch.nn.Identity(),
            torch.nn.Identity(),
            2,
            control,
            experts=3,
            top_k=4,
            bottleneck=2,
            scale=1.0,
            dropout=0.0,
        )


def test_ddas_selector_on_hand_made_features_picks_its_own_domain_or_zero_shot():
    g = torch.Generator().manual_seed(0)
    domains = [torch.randn(1, 8, generator=g) * 3 + torch.randn(64, 8, generator=g) * 0.1 for _ in range(2)]
    aes, worst = [], []
    for k, feats in enumerate(domains):
        ae = routing.DomainAutoencoder(8, 4, generator=torch.Generator().manual_seed(k))
        worst.append(
            routing.fit_autoencoder(
                ae, list(feats.split(16)), iterations=400, lr=0.01, weight_decay=0.0, decay_epochs=1000
            )
        )
        aes.append(ae)
    thresholds = torch.tensor(worst) * 1.5
    for k, feats in enumerate(domains):
        losses = routing.reconstruction_losses(aes, feats[:16]).detach()
        assert routing.ddas_route(losses, thresholds) == k
    far = torch.full((16, 8), -6.0)  # a domain neither autoencoder knows
    assert routing.ddas_route(routing.reconstruction_losses(aes, far).detach(), thresholds) == routing.ZERO_SHOT


MOE = {
    "kind": "moe_adapters",
    "experts": 4,
    "bottleneck": 8,
    "ae_iterations": 6,
    "freeze_top": 1,
    "train": {"lr": 0.01, "weight_decay": 0.0},
}


def test_moe_adapters_trains_two_tasks_and_evaluates_routed_from_the_stored_state(tiny_run):
    cfg = tiny_run
    cfg["method_configs"]["moe"] = MOE
    summaries = [train_task(cfg, "moe", 0, i).summary for i in (1, 2)]
    state = load_method_state(task_dir(cfg, "moe", 0, 2))
    assert load_update(task_dir(cfg, "moe", 0, 2)).kind == "none"  # the backbone never changes
    layers = sorted({k.rsplit(".experts.", 1)[0] for k in state if ".experts." in k})
    assert len(layers) == 3  # codyra-mini: 2 vision blocks + 1 text block
    assert {k for k in state if k.startswith(layers[0] + ".routers.")} == {
        f"{layers[0]}.routers.0",
        f"{layers[0]}.routers.1",
    }
    # task 1 froze its most used expert per layer, task 2 one more (or the same one again)
    frozen1 = load_method_state(task_dir(cfg, "moe", 0, 1))[f"{layers[0]}.frozen"]
    assert int(frozen1.sum()) == 1 and bool((state[f"{layers[0]}.frozen"] >= frozen1).all())
    assert 1 <= int(state[f"{layers[0]}.frozen"].sum()) <= 2
    # experts frozen after task 1 did not move in task 2
    before = load_method_state(task_dir(cfg, "moe", 0, 1))
    e = int(frozen1.nonzero()[0])
    torch.testing.assert_close(
        state[f"{layers[0]}.experts.{e}.down_proj.weight"], before[f"{layers[0]}.experts.{e}.down_proj.weight"]
    )
    assert state["ddas.threshold"].shape == (2,) and summaries[1]["ddas_threshold"] == float(state["ddas.threshold"][1])
    # cost: every expert of the 4 layers, the two routers' gates, the two autoencoders
    experts = sum(v.numel() for k, v in state.items() if ".experts." in k)
    gates = sum(v.numel() for k, v in state.items() if ".routers." in k)
    aes = sum(v.numel() for k, v in state.items() if k.startswith("ddas.") and k != "ddas.threshold")
    assert summaries[1]["inference_extra_params"] == experts + gates + aes
    assert summaries[0]["trainable_params"] > 0 and summaries[1]["trainable_params"] < summaries[0]["trainable_params"]

    cells = evaluate_row(cfg, "moe", 0, 2)
    cell = read_cell(cfg, cell_path(cfg, "moe", 0, 2, 1), "moe", 0, 2, 1, classifies=True)
    assert cell["routing"]["router"] == "ddas" and cell["routing"]["samples"] == cell["num_samples"]
    assert [c["accuracy"] for c in cells] == [
        c["accuracy"] for c in evaluate_row(cfg, "moe", 0, 2)
    ]  # rebuilt identically


def test_moe_adapters_zero_shot_route_is_the_pretrained_model(tiny_run, monkeypatch):
    cfg = tiny_run
    cfg["method_configs"]["moe"] = MOE
    train_task(cfg, "moe", 0, 1)
    monkeypatch.setattr("codyra.methods.moe_adapters.clip.ddas_route", lambda losses, thresholds: routing.ZERO_SHOT)
    routed = evaluate_row(cfg, "moe", 0, 1)
    pretrained = evaluate_row(cfg, "pretrained", None, 0)
    assert [c["accuracy"] for c in routed] == [c["accuracy"] for c in pretrained]
    assert all(c["routing"]["to_zero_shot"] == 100.0 for c in routed)


@pytest.mark.slow
def test_codyra_rail_fits_rail_on_theta_i_and_keeps_codyras_transfer(tiny_run):
    from codyra.clip.features import task_feature_batches
    from codyra.clip.rebuild import rebuild_clip
    from codyra.methods.rail import clip as analytic
    from codyra.methods.rail.method import RAILOptions

    cfg = tiny_run
    # prompts: dataset, CoDyRA's own zero-shot head (RAIL's 'a photo of a {}.' is the default)
    cfg["method_configs"]["codyra-rail"] = {
        **cfg["method_configs"]["codyra"],
        "kind": "codyra_rail",
        "hidden_dim": 32,
        "prompts": "dataset",
    }
    for method in ("codyra", "codyra-rail"):
        for i in (1, 2):
            summary = train_task(cfg, method, 0, i).summary
    # RAIL's head after task 2: task 2 absorbed on theta_2's features, from the head after task 1
    state1 = load_method_state(task_dir(cfg, "codyra-rail", 0, 1))
    theta_2 = rebuild_clip(cfg, "codyra-rail", 0, 2).model
    batches, classes = task_feature_batches(cfg, 0, 2, cfg["train"], torch.device("cpu"), model=theta_2)
    expected = analytic.fit(RAILOptions(hidden_dim=32), state1, batches, classes, seed=0)
    state2 = load_method_state(task_dir(cfg, "codyra-rail", 0, 2))
    torch.testing.assert_close(state2["W"], expected["W"])
    assert summary["inference_extra_params"] == 64 * 32 + state2["W"].numel()
    # the backbone is CoDyRA's: theta_2 equals the plain run's, and the unseen task keeps its accuracy
    plain = evaluate_row(cfg, "codyra", 0, 2)
    routed = evaluate_row(cfg, "codyra-rail", 0, 2)
    assert routed[2]["accuracy"] == plain[2]["accuracy"] and "routing" in routed[0]


def test_rail_aggregation_table_pairs_rail_with_codyra_rail_per_variant():
    import numpy as np

    from codyra.evaluation import tables

    methods = ["codyra", "rail-primal", "rail-dual", "codyra-rail-primal", "codyra-rail-dual"]
    kinds = ["codyra", "rail", "rail", "codyra_rail", "codyra_rail"]
    cfg = {
        "benchmark": "b",
        "seeds": [0],
        "tasks": ["a", "b"],
        "model": {"family": "clip"},
        "data": {"kind": "mini"},
        "methods": methods,
        "method_configs": {m: {"kind": k} for m, k in zip(methods, kinds, strict=True)},
        "analysis": {},
    }
    cfg["method_configs"]["rail-dual"]["variant"] = cfg["method_configs"]["codyra-rail-dual"]["variant"] = "dual"
    A = {m: [[50, 40], [80, 45], [70, 90]] for m in methods}
    A["codyra-rail-primal"] = [[50, 40], [85, 50], [80, 95]]
    runs = {m: [{"A": np.asarray(a, float).tolist(), "seed": 0}] for m, a in A.items()}
    table = tables.rail_aggregation_table(cfg, runs, tables.grid_layout(cfg))
    assert [(b, table.methods[label], label) for b, label, _ in table.rows] == [
        ("RAIL-Primal", "rail-primal", "RAIL-Primal†"),
        ("RAIL-Primal", "codyra-rail-primal", "CoDyRA + RAIL-Primal†"),
        ("RAIL-Dual", "rail-dual", "RAIL-Dual†"),
        ("RAIL-Dual", "codyra-rail-dual", "CoDyRA + RAIL-Dual†"),
    ]
    stats = {table.methods[label]: [s[0] for s in cells] for _, label, cells in table.stats()}
    # Transfer: A[1,2]; Average: mean over j of the mean of A[1..N, j]; Last: mean of A[N, :]
    assert stats["codyra-rail-primal"] == [50.0, pytest.approx(((85 + 80) / 2 + (50 + 95) / 2) / 2), 87.5]
    assert stats["rail-primal"] == [45.0, pytest.approx(((80 + 70) / 2 + (45 + 90) / 2) / 2), 80.0]
    assert ("RAIL-Primal", "CoDyRA + RAIL-Primal†", 0) in table.best()
    assert "rail_aggregation" in tables.table_names(cfg)
    assert "rail_aggregation" not in tables.table_names({**cfg, "methods": methods[:3]})
