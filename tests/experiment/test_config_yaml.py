"""Configs read numbers as people write them, name unknown keys' nearest key and missing files' paths."""

from __future__ import annotations

import copy

import pytest
import yaml

from codyra.experiment.config import ConfigError, config_from_files, load_config, parse_value
from codyra.yaml_loader import load_yaml, scalar, scalars

from ..conftest import write_yaml


def test_exponent_numbers_are_floats():
    doc = load_yaml("a: 1e-3\nb: 5e-5\nc: 1E+2\nd: -2e2\ne: .5e1\nf: 1.5e-3\n")
    assert doc == {"a": 0.001, "b": 0.00005, "c": 100.0, "d": -200.0, "e": 5.0, "f": 0.0015}
    assert all(type(v) is float for v in doc.values())


def test_everything_else_reads_as_safe_load_reads_it():
    text = "i: 12\nj: 1_000\nf: 1.5\ns: 1e\nt: x1e3\nv: 1.2.3\nb: true\nn: null\nl: [1, '1e-3']\n"
    assert (
        load_yaml(text)
        == yaml.safe_load(text)
        == {
            "i": 12,
            "j": 1000,
            "f": 1.5,
            "s": "1e",
            "t": "x1e3",
            "v": "1.2.3",
            "b": True,
            "n": None,
            "l": [1, "1e-3"],  # quoted: a string
        }
    )
    assert yaml.safe_load("a: 1e-3") == {"a": "1e-3"}  # PyYAML's own loader is left as it was


def test_a_config_file_with_exponent_numbers_validates(tmp_path, tiny_cfg_dict):
    text = yaml.safe_dump(tiny_cfg_dict).replace("lr: 0.003", "lr: 3e-3").replace("lr: 0.0005", "lr: 5E-4")
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    cfg = load_config(path)
    assert cfg["train"]["lr"] == 0.003 and cfg["method_configs"]["full-ft"]["train"]["lr"] == 0.0005


def test_command_line_values_read_as_file_values():
    assert parse_value("1e-4") == 0.0001 and parse_value("[0, 1]") == [0, 1] and parse_value("codyra") == "codyra"
    # Snakemake's --config: its YAML base loader leaves the items of lists and mappings strings
    assert [scalar(t) for t in ("0", "-3", "1e-3", "true", "null", "lora-r4", "2020-01-01")] == [
        0,
        -3,
        0.001,
        True,
        None,
        "lora-r4",
        "2020-01-01",
    ]
    assert scalars({"seeds": ["0", "1"], "train": {"lr": "5e-5"}, "check_data": False}) == {
        "seeds": [0, 1],
        "train": {"lr": 0.00005},
        "check_data": False,
    }


def test_snakemake_config_values_pass_validation(tmp_path, tiny_cfg_dict):
    path = write_yaml(tmp_path / "exp.yaml", tiny_cfg_dict)
    cfg = load_config(config_from_files([path], {"seeds": ["0", "2"], "train": {"lr": "1e-3"}}))
    assert cfg["seeds"] == [0, 2] and cfg["train"]["lr"] == 0.001


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["train"].update(lrr=1), r"config key train\.lrr: unknown key; did you mean 'lr'\?"),
        (
            lambda c: c["train"].update(iteration=3),
            r"config key train\.iteration: unknown key; did you mean 'iterations'\?",
        ),
        (
            lambda c: c.update(task_settings={c["tasks"][0]: {"train": {"lrr": 1}}}),
            r"config key task_settings\.colour\.train\.lrr: unknown key; did you mean 'lr'\?",
        ),
        (lambda c: c.update(seed=[0]), r"config key seed: unknown key; did you mean 'seeds'\?"),
        (
            lambda c: c["train"].update(zzz=1),
            r"config key train\.zzz: unknown key; the keys here: augmentation, batch_size, betas",
        ),
        (
            lambda c: c["method_configs"]["codyra"].update(dense_ration=0.5),
            r"codyra\.dense_ration: method kind 'codyra' has no option .* \(did you mean 'dense_ratio'\?\)",
        ),
    ],
)
def test_unknown_keys_suggest_the_nearest(tiny_cfg_dict, mutate, message):
    cfg = copy.deepcopy(tiny_cfg_dict)
    mutate(cfg)
    with pytest.raises(ConfigError, match=message):
        load_config(cfg)


def test_a_missing_config_file_names_the_path_tried(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"config file not found: nope.yaml \\(looked for {tmp_path}/nope.yaml\\)"):
        load_config("nope.yaml")
    (tmp_path / "top.yaml").write_text("extends: base/missing.yaml\n")
    with pytest.raises(ConfigError, match=f"extends base/missing.yaml, which does not exist \\(looked for {tmp_path}"):
        load_config("top.yaml")
