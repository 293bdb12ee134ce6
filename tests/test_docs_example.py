"""The worked example of docs/adding-a-method.md (docs/examples/l2_anchor.py) runs as a method kind."""

from __future__ import annotations

import copy
import json
import os
import sys

import pytest
import torch

import codyra.methods
from codyra.cli import main
from codyra.experiment.config import ConfigError, load_config
from codyra.store.paths import SUMMARY_FILE, cell_path, task_dir

from .conftest import ROOT, write_yaml
from .methods.contract import contract_problems

EXAMPLES = os.path.join(ROOT, "docs", "examples")


@pytest.fixture
def example_kind(monkeypatch):
    """The example as if its file sat in src/codyra/methods/: the registry finds it by its name."""
    monkeypatch.setattr(codyra.methods, "__path__", [*codyra.methods.__path__, EXAMPLES])
    yield "l2_anchor"
    sys.modules.pop("codyra.methods.l2_anchor", None)


@pytest.fixture
def example_yaml(tmp_path, tiny_cfg_dict, tiny_pretrained, example_kind):
    def write(strength):
        cfg = copy.deepcopy(tiny_cfg_dict)
        cfg["model"]["pretrained"] = str(tiny_pretrained)
        cfg["results"] = str(tmp_path / f"results-{strength}")
        cfg["methods"] = ["zeroshot", "l2-anchor"]
        # no weight decay: Adam turns a strong pull on the parameters a task leaves untouched (most of the
        # token embedding), once decay has moved them, into steps of about lr, which swamp the comparison
        train = {"lr": 0.0005, "weight_decay": 0.0}
        cfg["method_configs"]["l2-anchor"] = {"kind": example_kind, "strength": strength, "train": train}
        return write_yaml(tmp_path / f"strength-{strength}.yaml", cfg), cfg

    return write


def test_the_example_keeps_the_method_contract(example_kind):
    assert contract_problems(codyra.methods.method_class(example_kind)) == []


def test_penalty_and_its_gradient_by_hand(example_kind):
    from codyra.methods.l2_anchor import anchor_penalty

    w = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    anchors = {"w": torch.tensor([0.0, 0.0]), "b": torch.tensor([1.0])}
    penalty = anchor_penalty({"w": w, "b": b}, anchors, strength=2.0)
    assert penalty.item() == 9.0  # 0.5 * 2 * (1 + 4 + 4)
    penalty.backward()
    assert w.grad.tolist() == [2.0, 4.0] and b.grad.tolist() == [4.0]  # strength * (p - anchor)


def test_the_example_trains_and_evaluates_through_the_command_line(example_yaml):
    path, cfg = example_yaml(1.0)
    for task in ("1", "2"):
        assert main(["train", "--config", path, "--method", "l2-anchor", "--seed", "0", "--task", task]) == 0
    assert main(["cell", "--config", path, "--method", "l2-anchor", "--seed", "0", "--i", "2", "--j", "1"]) == 0
    summary = json.loads((task_dir(cfg, "l2-anchor", 0, 2) / SUMMARY_FILE).read_text())
    assert summary["update_kind"] == "delta" and summary["steps"] == 6
    history = [
        json.loads(line) for line in (task_dir(cfg, "l2-anchor", 0, 2) / "history.jsonl").read_text().splitlines()
    ]
    # step 1's loss is computed at theta_{i-1} itself; after it the model has moved away
    assert history[0]["anchor_penalty"] == 0.0 and history[-1]["anchor_penalty"] > 0.0
    cell = json.loads(cell_path(cfg, "l2-anchor", 0, 2, 1).read_text())
    assert 0.0 <= cell["accuracy"] <= 100.0


@pytest.mark.slow
def test_a_strong_pull_keeps_the_update_small(example_yaml):
    norms = {}
    for strength in (0.0, 1e4):
        path, cfg = example_yaml(strength)
        assert main(["train", "--config", path, "--method", "l2-anchor", "--seed", "0", "--task", "1"]) == 0
        norms[strength] = json.loads((task_dir(cfg, "l2-anchor", 0, 1) / SUMMARY_FILE).read_text())["dW_fro_total"]
    assert norms[1e4] < 0.5 * norms[0.0]


def test_a_negative_strength_is_named_with_its_key(example_yaml):
    _, cfg = example_yaml(-1.0)
    with pytest.raises(ConfigError, match="config key method_configs.l2-anchor.strength: must be >= 0, got -1.0"):
        load_config(cfg)
