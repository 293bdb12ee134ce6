"""S-Prompts (codyra.methods.sprompts): K-means centroids and the L1 domain selection against
hand-computed values, its options, and two tasks of the tiny CLIP run through the training loop
and the routed row evaluation."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.train_job import train_task
from codyra.methods.sprompts.selector import best_candidate, kmeans, seeding_trials, select_domains
from codyra.store.paths import task_dir
from codyra.store.updates import load_method_state, load_update

SPEC = {"kind": "sprompts"}

# two squares of side 2, far apart: the K-means centroids are their centres
SQUARES = torch.tensor(
    [[0.0, 0.0], [0.0, 2.0], [2.0, 0.0], [2.0, 2.0], [10.0, 10.0], [10.0, 12.0], [12.0, 10.0], [12.0, 12.0]]
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kmeans_finds_the_centre_of_each_cluster(seed):
    centroids = kmeans(SQUARES, 2, torch.Generator().manual_seed(seed))
    assert sorted(centroids.tolist()) == [[1.0, 1.0], [11.0, 11.0]]
    assert kmeans(SQUARES, 1, torch.Generator().manual_seed(seed)).tolist() == [[6.0, 6.0]]  # the mean


def test_greedy_seeding_keeps_the_candidate_that_leaves_the_lowest_potential():
    """scikit-learn's greedy k-means++: 2 + floor(ln k) candidates per centroid (3 for S-Prompts' 5), the
    one whose addition leaves the smallest sum of squared distances to the nearest centroid kept."""
    assert [seeding_trials(k) for k in (1, 2, 5, 8, 20)] == [2, 2, 3, 4, 4]
    x = torch.tensor([[0.0], [1.0], [5.0], [6.0], [20.0]], dtype=torch.float64)
    closest = x[:, 0] ** 2  # one centroid so far, at 0: squared distances 0, 1, 25, 36, 400
    # candidate 20: leaves 0 + 1 + 25 + 36 + 0 = 62; candidate 5: 0 + 1 + 0 + 1 + 225 = 227; candidate 1: 0+0+16+25+361
    chosen, after = best_candidate(x, closest, torch.tensor([2, 4, 1]))
    assert chosen == 4 and after.tolist() == [0.0, 1.0, 25.0, 36.0, 0.0]


def test_kmeans_needs_as_many_samples_as_clusters():
    with pytest.raises(ValueError, match="K-means with 9 clusters needs at least 9 samples, got 8"):
        kmeans(SQUARES, 9, torch.Generator().manual_seed(0))


def test_the_domain_of_the_nearest_centroid_by_the_l1_distance_is_selected():
    centroids = [torch.tensor([[0.0, 3.0], [9.0, 9.0]]), torch.tensor([[2.0, 2.0]])]
    features = torch.tensor(
        [
            [0.0, 0.0],  # L1: 3 to domain 0, 4 to domain 1 (by L2 domain 1 would be nearer: 2.83 < 3)
            [2.0, 1.5],  # L1: 3.5 to domain 0, 0.5 to domain 1
            [1.0, 2.5],  # L1: 1.5 to both: the first domain
            [9.0, 8.0],  # L1: 1 to domain 0's second centroid
        ]
    )
    assert select_domains(features, centroids).tolist() == [0, 1, 0, 0]
    with pytest.raises(ValueError, match="no domain's centroids are stored"):
        select_domains(features, [])


def test_bad_options_are_named_at_config_validation(tiny_cfg_dict):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"]["sprompts"] = {**SPEC, "clusters": 0}
    cfg["methods"] = [*cfg["methods"], "sprompts"]
    with pytest.raises(ConfigError, match="config key method_configs.sprompts.clusters: must be >= 1, got 0"):
        load_config(cfg)


def test_a_context_longer_than_the_text_tower_reads_fails_at_setup(tiny_run):
    tiny_run["method_configs"]["sprompts"] = {**SPEC, "context_length": 22}
    with pytest.raises(ValueError, match=r"reads 24: lower the option context_length \(22\)"):
        train_task(tiny_run, "sprompts", 0, 1)


def test_sprompts_trains_two_domains_and_routes_each_image_to_one(tiny_run, monkeypatch):
    cfg = tiny_run
    cfg["method_configs"]["sprompts"] = SPEC
    summaries = [train_task(cfg, "sprompts", 0, i).summary for i in (1, 2)]
    assert load_update(task_dir(cfg, "sprompts", 0, 2)).kind == "none"  # the backbone never changes
    first, second = (load_method_state(task_dir(cfg, "sprompts", 0, i)) for i in (1, 2))
    assert set(second) == {f"{part}.{k}" for part in ("image", "context", "centroids") for k in (0, 1)}
    # codyra-mini: image width 64, text width 64, embedding 64; 10 prompts, 16 context vectors, 5 centroids
    assert [tuple(second[f"{p}.1"].shape) for p in ("image", "context", "centroids")] == [(10, 64), (16, 64), (5, 64)]
    for key in first:  # domain 1 is kept as task 1 left it
        torch.testing.assert_close(second[key], first[key])
    assert summaries[1]["trainable_params"] == 10 * 64 + 16 * 64
    assert summaries[1]["inference_extra_params"] == sum(t.numel() for t in second.values())
    history = [json.loads(r) for r in (task_dir(cfg, "sprompts", 0, 2) / "history.jsonl").read_text().splitlines()]
    assert all(r["sprompts_loss"] > 0 for r in history)

    cells = evaluate_row(cfg, "sprompts", 0, 2)
    assert all(c["routing"]["router"] == "kmeans" and c["routing"]["to_zero_shot"] == 0.0 for c in cells)
    assert [sum(c["routing"]["routes"].values()) for c in cells] == [c["num_samples"] for c in cells]
    assert [c["accuracy"] for c in evaluate_row(cfg, "sprompts", 0, 2)] == [c["accuracy"] for c in cells]

    # an image goes where the selector sends it: every image to domain 2 (index 1)
    monkeypatch.setattr(
        "codyra.methods.sprompts.clip.select_domains", lambda f, c: torch.ones(len(f), dtype=torch.long)
    )
    routed = evaluate_row(cfg, "sprompts", 0, 2)
    assert [c["routing"]["routes"] for c in routed] == [{"1": 40}] * 3
