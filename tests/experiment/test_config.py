"""Configuration loading, defaults, validation errors and per-job resolution."""

from __future__ import annotations

import copy

import pytest

from codyra.experiment.config import ConfigError, load_config
from codyra.experiment.resolve import resolve_job
from codyra.store.io import fingerprint


def test_defaults_are_filled_from_the_schema(tiny_cfg):
    assert tiny_cfg["results"].endswith("results")
    assert tiny_cfg["train"]["betas"] == [0.9, 0.999]
    assert tiny_cfg["data"]["label_space"] == "task"
    assert tiny_cfg["eval"]["batch_size"] == 64  # given in the test config, not defaulted


def test_layers_resolve_in_order(tiny_cfg_dict):
    assert tiny_cfg_dict["tasks"][1] == "digits"
    tiny_cfg_dict["task_settings"] = {
        "digits": {
            "train": {"lr": 0.01, "iterations": 9},
            "methods": {"codyra": {"dense_ratio": 0.9, "train": {"iterations": 11}}},
        }
    }
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
        (lambda c: c["tasks"].append("colour"), "config key tasks: .* has non-unique elements"),
        (
            lambda c: c.update(task_settings={"colour": {"train": {"lrr": 1}}}),
            "config key task_settings.colour.train.lrr: unknown key; did you mean 'lr'",
        ),
        (
            lambda c: c.update(task_settings={"colour": {"methods": {"sgd": {"train": {"lr": 1.0}}}}}),
            "config key task_settings.colour.methods: 'sgd' is not a method in method_configs",
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


def test_per_task_settings_follow_their_task_wherever_the_stream_puts_it(tiny_cfg_dict):
    tiny_cfg_dict["task_settings"] = {"digits": {"methods": {"codyra": {"dense_ratio": 0.9}}}}
    first = load_config(copy.deepcopy(tiny_cfg_dict))
    tiny_cfg_dict["tasks"] = ["digits", "count", "colour"]
    moved = load_config(tiny_cfg_dict)
    assert resolve_job(first, "codyra", 2) == resolve_job(moved, "codyra", 1)
    assert [resolve_job(moved, "codyra", i)["method"]["dense_ratio"] for i in (1, 2, 3)] == [0.9, 0.5, 0.5]


def test_a_stream_of_entries_is_refused_with_the_form_that_replaces_it(tiny_cfg_dict):
    tiny_cfg_dict["tasks"] = [{"name": "colour", "methods": {"codyra": {"dense_ratio": 0.9}}}, "digits"]
    with pytest.raises(ConfigError, match=r"config key tasks\[0\]: tasks lists task names .* task_settings, keyed"):
        load_config(tiny_cfg_dict)


def test_settings_of_a_task_that_is_no_dataset_of_the_stream_are_named(tiny_cfg_dict):
    tiny_cfg_dict["task_settings"] = {"digit": {"train": {"lr": 0.01}}}
    with pytest.raises(
        ConfigError, match=r"task_settings.digit: 'digit' is not a task of the stream .*did you mean 'digits'"
    ):
        load_config(tiny_cfg_dict)


def test_settings_of_a_dataset_the_stream_leaves_out_are_kept_unused(tiny_cfg_dict):
    # a variant that shortens its base's stream need not drop the settings of the tasks it leaves out
    tiny_cfg_dict["task_settings"] = {"shape": {"train": {"lr": 0.01}}}
    cfg = load_config(tiny_cfg_dict)
    assert all(resolve_job(cfg, "codyra", i)["train"]["lr"] != 0.01 for i in (1, 2, 3))


def test_trace_settings_are_keyed_by_a_task_of_the_stream_or_of_trace():
    from pathlib import Path

    from codyra.experiment.config import read_config_file

    raw = read_config_file(Path(__file__).resolve().parents[2] / "config" / "mini_trace.yaml")
    raw["tasks"] = raw["tasks"][:2]  # TRACE's other six keep their settings, unused
    assert resolve_job(load_config(copy.deepcopy(raw)), "lora-r8-qv", 2)["train"]["epochs"] == 3
    raw["task_settings"]["C-STANSE"] = raw["task_settings"].pop("C-STANCE")
    with pytest.raises(ConfigError, match=r"task_settings.C-STANSE: .*did you mean 'C-STANCE'\? .*: null"):
        load_config(raw)
