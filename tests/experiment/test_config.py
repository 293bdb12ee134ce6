"""Configuration loading, defaults, validation errors and per-job resolution."""

from __future__ import annotations

import copy

import pytest

from codyra.experiment.config import ConfigError, load_config, resolve_job
from codyra.store.io import fingerprint


def test_defaults_are_filled_from_the_schema(tiny_cfg):
    assert tiny_cfg["results"].endswith("results")
    assert tiny_cfg["train"]["betas"] == [0.9, 0.999]
    assert tiny_cfg["data"]["label_space"] == "task"
    assert tiny_cfg["eval"]["batch_size"] == 64  # given in the test config, not defaulted


def test_layers_resolve_in_order(tiny_cfg_dict):
    tiny_cfg_dict["tasks"][1]["train"] = {"lr": 0.01, "iterations": 9}
    tiny_cfg_dict["tasks"][1]["methods"] = {"codyra": {"dense_ratio": 0.9, "train": {"iterations": 11}}}
    cfg = load_config(tiny_cfg_dict)
    job = resolve_job(cfg, "codyra", 2)
    assert job["method"]["dense_ratio"] == 0.9 and job["method"]["kind"] == "codyra"
    assert job["train"]["lr"] == 0.01 and job["train"]["iterations"] == 11
    assert resolve_job(cfg, "codyra", 1)["method"]["dense_ratio"] == 0.5
    assert resolve_job(cfg, "full-ft", 1)["train"]["lr"] == 0.0005  # method layer over top level
    assert resolve_job(cfg, "full-ft", 2)["train"]["lr"] == 0.01  # task layer over method layer


def test_fingerprint_changes_only_with_the_job(tiny_cfg):
    a = fingerprint(resolve_job(tiny_cfg, "codyra", 1))
    assert a == fingerprint(resolve_job(copy.deepcopy(tiny_cfg), "codyra", 1))
    tiny_cfg["method_configs"]["codyra"]["kappa_max"] = 0.5
    assert fingerprint(resolve_job(tiny_cfg, "codyra", 1)) != a


def test_reference_data_is_a_setting_of_zscl_only(tiny_cfg_dict):
    from codyra.experiment.fingerprints import eval_fingerprint, heldout_fingerprint, train_fingerprint

    tiny_cfg_dict["methods"].append("zscl")
    tiny_cfg_dict["method_configs"]["zscl"] = {"kind": "zscl"}
    plain = load_config(tiny_cfg_dict)
    tiny_cfg_dict["data"]["reference"] = {"kind": "mini-corpus", "size": 50}
    with_reference = load_config(tiny_cfg_dict)
    for method in ("codyra", "full-ft", "lora-r4"):  # a grid that adds ZSCL keeps these runs ...
        assert train_fingerprint(with_reference, method, 2) == train_fingerprint(plain, method, 2)
    assert eval_fingerprint(with_reference, 1) == eval_fingerprint(plain, 1)  # ... and every cell
    assert heldout_fingerprint(with_reference) == heldout_fingerprint(plain)
    assert train_fingerprint(with_reference, "zscl", 1) != train_fingerprint(plain, "zscl", 1)
    tiny_cfg_dict["data"]["reference"]["size"] = 60
    assert train_fingerprint(load_config(tiny_cfg_dict), "zscl", 1) != train_fingerprint(with_reference, "zscl", 1)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["methods"].append("sgd"), "methods: 'sgd' has no entry in method_configs"),
        (
            lambda c: c["method_configs"]["lora-r4"].update(kind="vera"),
            "method_configs.lora-r4.kind: unknown method kind 'vera'",
        ),
        (
            lambda c: c["method_configs"]["codyra"].update(kappa=1),
            (
                "config key method_configs.codyra.kappa: method kind 'codyra' has no option 'kappa'; "
                "its options: alpha, dense_ratio"
            ),
        ),
        (lambda c: c.pop("tasks"), "'tasks' is a required property"),
        (lambda c: c.update(tasks=[]), "config key tasks: .*non-empty|should be non-empty|too short"),
        (lambda c: c["train"].update(lr="fast"), "config key train.lr: 'fast' is not of type 'number'"),
        (lambda c: c["train"].update(iterations=0), "config key train.iterations"),
        (lambda c: c.update(seeds=[]), "config key seeds"),
        (lambda c: c["tasks"].append({"name": "colour"}), "task names must be unique"),
        (
            lambda c: c["tasks"][0].update(train={"lrr": 1}),
            "config key tasks\\[0\\].train.lrr: unknown key; did you mean 'lr'",
        ),
        (lambda c: c.update(model={"name": "codyra-mini", "weights": "x"}), "config key model.weights: unknown key"),
    ],
)
def test_bad_config_names_the_key(tiny_cfg_dict, mutate, message):
    mutate(tiny_cfg_dict)
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_cfg_dict)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_shipped_configs_are_valid():
    from pathlib import Path

    for path in sorted(Path(__file__).resolve().parents[2].glob("config/*.yaml")):
        load_config(path)


@pytest.mark.parametrize("name", ["mtil_5shot", "mtil_5shot_order2", "mtil_full", "xtail_16shot"])
def test_clip_paper_configs_run_in_fp32_as_the_released_code(name):
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / f"{name}.yaml")
    assert cfg["train"]["precision"] == "fp32" and cfg["eval"]["precision"] == "fp32"


def test_gradient_accumulation_is_validated(tiny_cfg_dict):
    cfg = copy.deepcopy(tiny_cfg_dict)
    cfg["train"]["gradient_accumulation"] = 2
    with pytest.raises(
        ConfigError, match="gradient_accumulation for method .*CLIP training takes each batch in one pass"
    ):
        load_config(cfg)
    cfg = copy.deepcopy(tiny_cfg_dict)
    first = next(iter(cfg["method_configs"]))
    cfg["method_configs"][first]["train"] = {"gradient_accumulation": "8"}
    with pytest.raises(
        ConfigError,
        match=rf"config key method_configs\.{first}\.train\.gradient_accumulation: '8' is not of type 'integer'",
    ):
        load_config(cfg)
