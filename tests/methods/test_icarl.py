"""iCaRL on CLIP as ZSCL's MTIL code runs it: herding, the memory's sizes and its distillation
chunks by hand, bad options, and three tasks of the tiny mini benchmark through the real loop
(the stored exemplars against herding on the stored theta_2's features, the distillation term
against one computed by hand from theta_0 and theta_1)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from codyra.clip.family import CLIP
from codyra.clip.rebuild import rebuild_clip
from codyra.clip.streams import build_tasks
from codyra.evaluation.evaluate import evaluate_row
from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.train_job import train_task, training_task
from codyra.methods import build_method
from codyra.methods.icarl.method import distillation_chunk, herding, memory_sizes, stored_memory
from codyra.store.paths import task_dir
from codyra.store.updates import load_method_state
from codyra.training.loop import task_context

ROWS = torch.tensor([[0.0], [1.0], [3.0], [6.0]])  # mean 2.5


def test_herding_by_hand_and_the_references_position_indices():
    # k=0: (2.5 - f)^2 = 6.25, 2.25, 0.25, 12.25 -> row 2; S = 3
    # k=1: (2.5 - (f + 3) / 2)^2 over rows 0, 1, 3 = 1, 0.25, 4 -> row 1; S = 4
    # k=2: (2.5 - (f + 4) / 3)^2 over rows 0, 3 = 1.36, 0.69 -> row 3; then row 0
    assert herding(ROWS, 4, "exact") == [2, 1, 3, 0]
    # ZSCL stores the image at the pick's position in the shrunken pool: 2 of [0,1,2,3], 1 of [0,1,3],
    # 1 of [0,3], 0 of [0]
    assert herding(ROWS, 4, "reference") == [2, 1, 1, 0]
    assert herding(ROWS, 2, "exact") == [2, 1] and herding(ROWS, 9, "exact") == [2, 1, 3, 0]
    ties = torch.tensor([[1.0, 0.0], [3.0, 0.0]])  # both at distance 1 from the mean: the first wins
    assert herding(ties, 2, "exact") == [0, 1] and herding(ties, 2, "reference") == [0, 0]
    with pytest.raises(ValueError, match="unknown herding mode 'greedy'"):
        herding(ROWS, 2, "greedy")


def test_memory_sizes_are_zscls_k_over_t_and_k_minus_k_over_t():
    assert memory_sizes(10000, 2) == (5000, 5000)
    assert memory_sizes(10000, 3) == (3333, 6667)  # the newest set gets more than its share
    assert memory_sizes(40, 3) == (13, 27)
    with pytest.raises(ValueError, match="from the second learned task on"):
        memory_sizes(40, 1)


def test_distillation_chunks_run_through_the_memory_and_restart():
    assert [distillation_chunk(40, 16, s) for s in range(1, 6)] == [(0, 16), (16, 32), (32, 40), (0, 16), (16, 32)]
    assert distillation_chunk(3, 16, 7) == (0, 3)
    with pytest.raises(ValueError, match="need exemplars"):
        distillation_chunk(0, 16, 1)


def test_stored_memory_reads_tasks_in_order_and_rejects_other_keys():
    memory = stored_memory({"exemplars.10": torch.tensor([1]), "exemplars.2": torch.tensor([3, 4])})
    assert list(memory) == [2, 10] and memory[2].tolist() == [3, 4]
    assert stored_memory(None) == {}
    with pytest.raises(ValueError, match="iCaRL's stored state holds 'average.x'"):
        stored_memory({"average.x": torch.zeros(2)})


@pytest.mark.parametrize(
    "options, message",
    [
        ({"herding": "greedy"}, "herding: must be one of 'reference', 'exact', got 'greedy'"),
        ({"memory_size": 0}, "memory_size: must be >= 1, got 0"),
        ({"temperature": 0}, "temperature: must be > 0, got 0"),
    ],
)
def test_bad_options_are_named(tiny_cfg_dict, options, message):
    with pytest.raises(ValueError, match=message):
        build_method({"kind": "icarl", **options})
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["method_configs"]["icarl"] = {"kind": "icarl", **options}
    with pytest.raises(ConfigError, match=f"config key method_configs.icarl.{message}"):
        load_config(cfg)


def soft_ce(teacher, student, t):
    return -(F.softmax(teacher / t, dim=1) * F.log_softmax(student / t, dim=1)).sum(dim=1).mean() * t**2


@pytest.mark.slow
def test_icarl_trains_three_tasks_with_its_memory(tiny_run):
    """40 exemplars, batches of 16; the tiny stream: colour, digits (its whole training pool), count."""
    tiny_run["method_configs"]["icarl"] = {
        "kind": "icarl",
        "memory_size": 40,
        "image_weight": 1.0,
        "text_weight": 1.0,
        "train": {"lr": 0.0005},
    }
    cfg = load_config(tiny_run)
    train_task(cfg, "icarl", 0, 1)
    first = load_method_state(task_dir(cfg, "icarl", 0, 1))
    assert first.keys() == {"exemplars.1"} and first["exemplars.1"].tolist() == list(range(40))  # no selection

    # task 2's distillation at step 1: the first 16 exemplars (task 1's first images), theta_1 the student,
    # theta_0 the teacher, task 2's class prompts as theta_0 encodes them, temperature 2, both directions
    task = training_task(cfg, "icarl", 0, 2)
    session = CLIP.fit_session(cfg, task.job, "icarl", 0, 2, "cpu")
    ctx = task_context(task, session)
    method = build_method(cfg["method_configs"]["icarl"])
    method.setup(ctx)
    batch = next(session.batches(0))[0]
    with torch.no_grad():
        extra = method.extra_loss(ctx, batch, session.forward(session.model, batch))
        bundle = CLIP.pretrained(cfg)
        images = torch.stack([build_tasks(cfg, bundle.image)[0].train_eval_set()[i][0] for i in range(16)])
        teacher = bundle.model.eval()
        text = F.normalize(teacher.encode_text(bundle.tokenizer(session.prompts)), dim=-1)
        scale = teacher.logit_scale.exp()
        reference = scale * F.normalize(teacher.encode_image(images), dim=-1) @ text.T
        current = scale * F.normalize(session.model.encode_image(images), dim=-1) @ text.T
    expected = soft_ce(reference, current, 2.0) + soft_ce(reference.T, current.T, 2.0)
    assert extra.item() == pytest.approx(expected.item(), rel=1e-4)
    # the kind's defaults are icarl.sh's: no --image_loss / --text_loss, so no distillation and no teacher
    as_scripted = build_method({"kind": "icarl", "memory_size": 40})
    as_scripted.setup(ctx)
    with torch.no_grad():
        assert as_scripted.extra_loss(ctx, batch, session.forward(session.model, batch)) is None
    assert as_scripted.teacher is None

    train_task(cfg, "icarl", 0, 2)
    second = load_method_state(task_dir(cfg, "icarl", 0, 2))
    assert second["exemplars.1"].tolist() == list(range(20))  # K // 2 of task 1's, in order
    theta_2 = rebuild_clip(cfg, "icarl", 0, 2)
    candidates = build_tasks(cfg, theta_2.image)[1].train_eval_set()
    with torch.no_grad():
        features = F.normalize(
            theta_2.model.eval().encode_image(torch.stack([candidates[i][0] for i in range(len(candidates))])), dim=-1
        )
    assert second["exemplars.2"].tolist() == herding(features, 20, "reference")  # K - K // 2 by herding

    train_task(cfg, "icarl", 0, 3)
    third = load_method_state(task_dir(cfg, "icarl", 0, 3))
    assert third["exemplars.1"].tolist() == list(range(13))
    assert third["exemplars.2"].tolist() == second["exemplars.2"][:13].tolist()
    assert len(third["exemplars.3"]) == 27
    rows = evaluate_row(cfg, "icarl", 0, 3)
    assert [r["j"] for r in rows] == [1, 2, 3] and all(0 <= r["accuracy"] <= 100 for r in rows)
