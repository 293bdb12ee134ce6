"""The mini stream is a continual-learning benchmark: pinned cheaply on one seed with a
shorter pretraining, fewer iterations and smaller test sets than the default config.

A change that saturates a task before training, makes one unlearnable or trivial, stops
sequential training from learning, or stops it from forgetting fails here (the default methods'
numbers over 3 seeds are in docs/results/mini.md). Pretraining runs on one thread: the pretrained
weights depend on the thread count, and one thread is also the faster on a busy machine.
"""

from __future__ import annotations

import pytest

from codyra.cli import run_stream
from codyra.evaluation.metrics import forgetting
from codyra.experiment.config import load_config
from codyra.mini.clip.pretrain import pretrain_mini
from codyra.yaml_loader import load_yaml

from ..conftest import ROOT

pytestmark = pytest.mark.slow

CHEAP_MINI = {
    "corpus_size": 12000,
    "pretrain_steps": 500,
    "pretrain_threads": 1,
    "test_per_task": 200,
    "train_per_task": 1000,
}
CHEAP_ITERATIONS = 100
METHODS = ("full-ft", "lora-r16")
PARTLY_KNOWN = ("shade",)  # named in many captions: zero-shot far above chance


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    with open(f"{ROOT}/config/config.yaml") as f:
        raw = load_yaml(f)
    raw.update(
        results=str(tmp_path_factory.mktemp("mini-properties")),
        seeds=[0],
        methods=list(METHODS),
        tracking={"enabled": False},
    )
    raw["mini"].update(CHEAP_MINI)
    raw["train"]["iterations"] = CHEAP_ITERATIONS
    cfg = load_config(raw)
    pretrain_mini(cfg, f"{cfg['results']}/{cfg['benchmark']}/pretrain/model.safetensors")
    return cfg, {method: run_stream(cfg, method, 0) for method in METHODS}


def _gains(result) -> dict[str, float]:
    A = result["A"]
    return dict(zip(result["tasks"], (A[j + 1][j] - A[0][j] for j in range(len(A[0]))), strict=True))


def _mean(row) -> float:
    return sum(row) / len(row)


def test_no_task_is_saturated_and_the_designed_ones_are_partly_known(streams):
    cfg, results = streams
    from codyra.clip.streams import build_tasks
    from codyra.data.tasks import ImageConfig

    tasks = build_tasks(cfg, ImageConfig(32, (0.5,) * 3, (0.25,) * 3))
    zero_shot = dict(zip(results["full-ft"]["tasks"], results["full-ft"]["A"][0], strict=True))
    assert max(zero_shot.values()) <= 85, zero_shot
    for task in tasks:
        if task.name in PARTLY_KNOWN:
            assert zero_shot[task.name] >= 1.5 * 100 / task.num_classes, (task.name, zero_shot)


def test_the_tasks_are_learnt(streams):
    # Computed in this setting (gains A[j,j] - A[0,j] of texture, shape, position, shade,
    # digits; the same on every machine, see test_cpu_numerics): full-ft 17.5, 22.0, 11.5, 30.5,
    # 18.5; lora-r16 14.5, 23.0, 18.5, 29.5, 10.0. Learning is weaker than in the default grid,
    # but at most one task may gain less than 5 points, and shade (and lora-r16's texture) must
    # be clearly learnt.
    _, results = streams
    for method, result in results.items():
        gains = _gains(result)
        assert gains["shade"] >= 20 and sum(g >= 5 for g in gains.values()) >= 4, (method, gains)
        assert sum(gains.values()) >= 60, (method, gains)
    assert _gains(results["lora-r16"])["texture"] >= 10, _gains(results["lora-r16"])


def test_sequential_training_forgets_and_learning_pays(streams):
    # Computed in this setting: Forgetting full-ft 7.9, lora-r16 11.6; Last above zero-shot's
    # Last by 13.7 and 9.8. A task made trivial (nothing to forget) or unlearnable (nothing
    # to gain) moves these towards 0.
    _, results = streams
    for method, result in results.items():
        A = result["A"]
        assert forgetting(A) >= 2.5 and _mean(A[-1]) - _mean(A[0]) >= 5, (method, forgetting(A), A)
