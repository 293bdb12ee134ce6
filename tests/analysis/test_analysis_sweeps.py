"""Ablation sweeps: expansion of config key ``ablations`` into ordinary methods of the grid."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.sweeps import expand_ablations, value_label
from codyra.yaml_loader import load_yaml

ROOT = Path(__file__).resolve().parents[2]


def test_a_sweep_expands_into_methods_with_the_base_options_and_is_idempotent(tiny_cfg_dict):
    tiny_cfg_dict["ablations"] = {
        "grid": {"method": "codyra", "vary": {"placement": ["attn", ["vision", "mlp"]], "kappa_max": [0.01, 0.1]}}
    }
    cfg = load_config(tiny_cfg_dict)
    names = [
        "codyra-placement-attn-kappa_max-0.01",
        "codyra-placement-attn-kappa_max-0.1",
        "codyra-placement-vision_mlp-kappa_max-0.01",
        "codyra-placement-vision_mlp-kappa_max-0.1",
    ]
    assert cfg["methods"][-4:] == names
    variant = cfg["method_configs"]["codyra-placement-vision_mlp-kappa_max-0.1"]
    assert (
        variant["placement"] == ["vision", "mlp"] and variant["kappa_max"] == 0.1 and variant["rank"] == 4
    )  # base option kept
    assert load_config(copy.deepcopy(cfg)) == cfg  # expanding an expanded config changes nothing


def test_sweep_errors_name_the_key(tiny_cfg_dict):
    tiny_cfg_dict["ablations"] = {"bad": {"method": "nope", "vary": {"rank": [2]}}}
    with pytest.raises(ConfigError, match=r"ablations.bad.method: 'nope' is not an entry of method_configs"):
        load_config(copy.deepcopy(tiny_cfg_dict))
    tiny_cfg_dict["ablations"] = {"bad": {"method": "codyra", "vary": {"rank": []}}}
    with pytest.raises(ConfigError, match=r"ablations.bad.vary.rank: must be a non-empty list"):
        load_config(copy.deepcopy(tiny_cfg_dict))
    tiny_cfg_dict["ablations"] = {"bad": {"method": "codyra", "vary": {"prox": ["nonsense"]}}}
    with pytest.raises(ConfigError, match="codyra-prox-nonsense"):  # a variant is validated like any method
        load_config(copy.deepcopy(tiny_cfg_dict))
    cfg = {
        "method_configs": {"codyra": {"kind": "codyra"}, "codyra-rank-2": {"kind": "lora"}},
        "methods": [],
        "ablations": {"r": {"method": "codyra", "vary": {"rank": [2]}}},
    }
    with pytest.raises(ConfigError, match="already a different entry"):
        expand_ablations(cfg)


def test_value_labels_are_path_safe():
    assert [value_label(v) for v in (0.005, 16, True, ["vision", "attn"], "a b/c")] == [
        "0.005",
        "16",
        "true",
        "vision_attn",
        "a_b_c",
    ]


def _merged(base: dict, overlay: dict) -> dict:
    """The documented overlay rule (mappings merge recursively, other values replace)."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = _merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def test_the_mini_ablations_config_expands_to_valid_methods():
    overlay = load_yaml((ROOT / "config" / "mini_ablations.yaml").read_text())
    assert overlay.pop("extends") == "config.yaml"
    cfg = load_config(_merged(load_yaml((ROOT / "config" / "config.yaml").read_text()), overlay))
    # the stream's sweeps: placements 4, initial ranks 3, kappa_max 3, dense ratios 4, placement-matched 2, LoRA ranks 4
    assert len(cfg["methods"]) == 2 + 4 + 3 + 3 + 4 + 2 + 4
    assert cfg["method_configs"]["codyra-placement-attn-rank-36"] == {
        **cfg["method_configs"]["codyra"],
        "placement": "attn",
        "rank": 36,
    }
    # the single-task studies: texture (lora_forgetting 4 x 5, prune_motivation's lora-r16, norm-matched 5 + 5),
    # shape / position / digits (5 placements x 3 ranks each); peft adds codyra on every task, and on shade
    # (trained by no other study) lora-r16 too
    from codyra.experiment.single_task import targets
    from codyra.experiment.validation import single_task_config

    runs = {task: single_task_config(cfg, task)["methods"] for task in targets(cfg)}
    assert {task: len(methods) for task, methods in runs.items()} == {
        "texture": 20 + 1 + 10 + 1,
        "shape": 15 + 2,
        "position": 15 + 2,
        "digits": 15 + 2,
        "shade": 2,
    }
    assert cfg["method_configs"]["codyra-dense_ratio-0.9"]["dense_ratio"] == 0.9
