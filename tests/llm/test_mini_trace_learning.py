"""The mini TRACE is a continual-learning benchmark: its tasks are new to the pretrained LM,
learnable by a small adapter in a few steps, and forgotten when a later task is trained.

One seed and a shortened schedule of config/mini_trace.yaml (pretraining, sizes, steps);
the effects pinned are the ones the full grid shows (README, "The mini TRACE"), with margins
wide enough to hold for this schedule, narrow enough that a task made trivial (solved by the
pretrained LM) or unlearnable (not learnt by the adapter) fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from codyra.config import load_config
from codyra.engine import train_task
from codyra.evaluate import evaluate_cell, evaluate_row0
from codyra.mini.trace.pretrain import pretrain_mini_lm
from codyra.trace.metrics import TRACE_TASKS

pytestmark = pytest.mark.slow
MINI_TRACE = Path(__file__).resolve().parents[2] / "config" / "mini_trace.yaml"
METHOD = "lora-r16-all"


@pytest.fixture(scope="module")
def mini_trace(tmp_path_factory):
    raw = yaml.safe_load(MINI_TRACE.read_text())
    raw["results"] = str(tmp_path_factory.mktemp("mini_trace_learning"))
    raw["tracking"] = {"enabled": False}
    raw["mini"].update(train_per_task=64, test_per_task=30, corpus_size=1500, pretrain_steps=200)
    raw["llm"]["mini"]["eval_per_task"] = 2
    cfg = load_config(raw)
    pretrain_mini_lm(cfg)
    return cfg


def stream(cfg: dict, names: list[str], steps: int) -> dict:
    """The config restricted to the tasks ``names``, each trained ``steps`` optimizer steps."""
    tasks = [{"name": name, "train": {"epochs": None, "iterations": steps}} for name in names]
    return {**cfg, "tasks": tasks}


def test_every_task_is_new_to_the_pretrained_lm(mini_trace):
    cfg = stream(mini_trace, list(TRACE_TASKS), 1)
    zero_shot = {task: evaluate_row0(cfg, j)["accuracy"] for j, task in enumerate(TRACE_TASKS, 1)}
    # measured: 10, 0, 0, 20, 0, 0, 0, 39 (a copied sentence earns SARI for its kept words)
    assert all(zero_shot[task] < 25 for task in ("C-STANCE", "FOMC", "ScienceQA", "NumGLUE-cm", "NumGLUE-ds")), zero_shot
    assert max(zero_shot.values()) < 50 and sum(zero_shot.values()) / len(zero_shot) < 20, zero_shot


def test_a_short_lora_run_learns_a_task_and_a_later_task_makes_it_forget(mini_trace):
    cfg = stream(mini_trace, ["FOMC", "MeetingBank"], 48)
    before = [evaluate_row0(cfg, j)["accuracy"] for j in (1, 2)]
    train_task(cfg, METHOD, 0, 1)
    learnt = evaluate_cell(cfg, METHOD, 0, 1, 1)["accuracy"]
    train_task(cfg, METHOD, 0, 2)
    after = [evaluate_cell(cfg, METHOD, 0, 2, j)["accuracy"] for j in (1, 2)]
    # measured: FOMC 0 -> 60 -> 33, MeetingBank 0 -> 53 (ROUGE-L)
    assert learnt >= before[0] + 40, (before, learnt)
    assert after[1] >= before[1] + 30, (before, after)
    assert after[0] <= learnt - 15, (learnt, after)
