"""Typed method options: a kind declares a dataclass, the config gets its checks for free."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

import pytest

from codyra.experiment.config import ConfigError, load_config
from codyra.methods import available_kinds, build_method, method_class
from codyra.methods.options import MethodOptions, option, option_errors, parse_options

from .contract import contract_problems


@dataclass(frozen=True)
class ToyOptions(MethodOptions):
    """Every feature a method kind can declare."""

    steps: int = option(3, minimum=1)
    rate: float = option(0.5, exclusive_minimum=0, maximum=1)
    scale: float | None = option(None)
    mode: str = option("a", choices=("a", "b"))
    norm: Literal["l1", "l2"] = option("l2")
    layers: str | list[str] = option("all", min_items=1)
    flag: bool = option(False)

    def check(self):
        return [("steps", f"must be even when flag is set, got {self.steps}")] if self.flag and self.steps % 2 else []


def test_defaults_fill_what_the_config_leaves_out():
    options = parse_options(ToyOptions, {"kind": "toy", "train": {"lr": 1.0}, "rate": 1}, kind="toy")
    assert options == ToyOptions(steps=3, rate=1, scale=None, mode="a", norm="l2", layers="all", flag=False)


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"stepz": 2},
            "method kind 'toy' has no option 'stepz'; its options: flag, layers, mode, norm, rate, scale, steps",
        ),
        ({"steps": 1.5}, "must be an integer, got 1.5"),
        ({"steps": True}, "must be an integer, got True"),  # a YAML boolean is no number
        ({"steps": 0}, "must be >= 1, got 0"),
        ({"rate": 0}, "must be > 0, got 0"),
        ({"rate": 1.5}, "must be <= 1, got 1.5"),
        ({"rate": float("nan")}, "must be a finite number, got nan"),
        ({"rate": "0.1"}, "must be a number, got '0.1'"),
        ({"scale": "x"}, "must be a number or null, got 'x'"),
        ({"mode": "c"}, "must be one of 'a', 'b', got 'c'"),
        ({"norm": "l3"}, "must be one of 'l1', 'l2', got 'l3'"),
        ({"layers": []}, "must have at least 1 item(s), got []"),
        ({"layers": ["attn", 3]}, "must be a string or a list of a string, got ['attn', 3]"),
        ({"flag": "yes"}, "must be true or false, got 'yes'"),
    ],
)
def test_each_bad_value_is_named_with_its_key(spec, message):
    key = next(iter(spec))
    assert option_errors(ToyOptions, spec, kind="toy") == [(key, message)]
    with pytest.raises(ValueError, match=f"^{key}: "):
        parse_options(ToyOptions, spec, kind="toy")


def test_rules_between_fields_come_from_check():
    with pytest.raises(ValueError, match="steps: must be even when flag is set, got 3"):
        parse_options(ToyOptions, {"flag": True}, kind="toy")
    assert parse_options(ToyOptions, {"flag": True, "steps": 4}, kind="toy").steps == 4


def test_methods_read_their_options_as_attributes():
    method = build_method({"kind": "codyra", "rank": 4, "kappa_max": 0.01, "train": {"lr": 0.1}})
    assert (method.options.rank, method.options.kappa_max, method.options.dense_ratio, method.options.alpha) == (
        4,
        0.01,
        0.5,
        None,
    )


@pytest.mark.parametrize(
    "where, options, message",
    [
        (
            "method_configs.codyra",
            {"kappa_max": -1},
            "config key method_configs.codyra.kappa_max: must be >= 0, got -1",
        ),
        ("method_configs.lora-r4", {"dropout": 1.0}, "config key method_configs.lora-r4.dropout: must be < 1, got 1.0"),
        (
            "method_configs.lora-r4",
            {"dense_ratio": 0.5},
            "config key method_configs.lora-r4.dense_ratio: method kind 'lora' has no option 'dense_ratio'",
        ),
        (
            "task_settings.digits.methods.codyra",
            {"schedule": "cosine"},
            (
                "config key task_settings.digits.methods.codyra.schedule: "
                "must be one of 'linear', 'staircase', got 'cosine'"
            ),
        ),
    ],
)
def test_config_validation_names_the_option_s_key_path(tiny_cfg_dict, where, options, message):
    cfg = copy.deepcopy(tiny_cfg_dict)
    layer = (
        cfg["method_configs"][where.split(".")[1]]
        if where.startswith("method_configs")
        else cfg.setdefault("task_settings", {})
        .setdefault("digits", {})
        .setdefault("methods", {})
        .setdefault("codyra", {})
    )
    layer.update(options)
    with pytest.raises(ConfigError, match=message):
        load_config(cfg)


def test_every_method_kind_keeps_the_contract():
    assert [p for kind in available_kinds() for p in contract_problems(method_class(kind))] == []


def test_the_contract_names_what_a_kind_lacks():
    class Bare(method_class("lora")):
        kind = "bare"

    class Odd(method_class("lora")):
        kind = "odd"
        families = ("clip", "vision")
        paper_row = 3

    assert contract_problems(Bare) == [
        "bare must declare families in its own class body",
        "bare must declare paper_row (its row in the paper's tables, or None)",
    ]
    assert contract_problems(Odd) == [
        "odd: families ('clip', 'vision') must name some of ['blip', 'causal_lm', 'clip']",
        "odd: paper_row must be a str or None, got 3",
    ]


def test_the_families_of_kinds_that_run_on_some_only():
    declared = {
        kind: method_class(kind).families for kind in ("codyra", "codyra_rail", "rail", "zscl", "icl", "l2p", "diki")
    }
    assert declared == {
        "codyra": ("clip", "causal_lm", "blip"),
        "codyra_rail": ("clip",),  # a subclass of CoDyRA that fits RAIL's head on image features
        "rail": ("clip", "blip"),
        "zscl": ("clip",),
        "icl": ("causal_lm",),
        "l2p": ("causal_lm", "clip"),  # prompts before the LM's input embeddings, or in CLIP's image encoder
        "diki": ("clip",),
    }


@pytest.mark.parametrize(
    "kind, family, supported",
    [("icl", "clip", "causal_lm"), ("rail", "causal_lm", "clip")],
)
def test_config_validation_rejects_a_method_on_a_family_it_does_not_support(tiny_cfg_dict, kind, family, supported):
    from tests.llm.conftest import TINY_TRACE

    cfg = copy.deepcopy(tiny_cfg_dict if family == "clip" else {**TINY_TRACE, "results": tiny_cfg_dict["results"]})
    cfg["method_configs"]["odd"] = {"kind": kind}
    cfg["methods"] = [*cfg["methods"], "odd"]
    message = (
        f"config key methods: method 'odd' (kind '{kind}') does not run on model family '{family}'; "
        f"kind '{kind}' supports {supported}"
    )
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(cfg)
    cfg["methods"].remove("odd")  # configured but not in the grid: nothing runs it
    assert "odd" in load_config(cfg)["method_configs"]


def test_method_of_names_the_grid_s_method_class_or_the_configured_ones(tiny_cfg):
    from codyra.methods import method_of
    from codyra.methods.codyra import CoDyRA
    from codyra.methods.lora import LoRA

    assert method_of(tiny_cfg, "codyra") is CoDyRA and method_of(tiny_cfg, "lora-r4") is LoRA
    with pytest.raises(ValueError, match=r"unknown method 'nope'; configured: codyra, "):
        method_of(tiny_cfg, "nope")


def test_a_backend_sees_which_hooks_a_method_defines():
    from codyra.methods.codyra import CoDyRA
    from codyra.methods.gem import GEM
    from codyra.methods.lora import LoRA

    assert CoDyRA.overrides("after_step") and not LoRA.overrides("after_step")
    assert GEM.overrides("before_optimizer_step") and not CoDyRA.overrides("before_optimizer_step")
