"""Bad input is refused before any job runs, with one clear line naming the key or file."""

from __future__ import annotations

import copy
import socket
from types import SimpleNamespace

import pytest

from codyra.cli import main
from codyra.experiment.config import ConfigError, load_config, parse_value
from codyra.methods import method_class
from codyra.store.io import write_json
from codyra.store.paths import cell_path, run_dir
from tests.conftest import TINY, write_yaml


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda c: c["method_configs"]["codyra"].update(kappa_max=-0.01),
            r"method_configs\.codyra\.kappa_max: must be >= 0, got -0\.01",
        ),
        (
            lambda c: c.update(task_settings={"digits": {"methods": {"codyra": {"kappa_max": -1}}}}),
            r"task_settings\.digits\.methods\.codyra\.kappa_max: must be >= 0, got -1",
        ),
        (
            lambda c: c["method_configs"]["lora-r4"].update(rank=0),
            r"method_configs\.lora-r4\.rank: must be >= 1, got 0",
        ),
        (
            lambda c: c["method_configs"]["lora-r4"].update(rank=-4),
            r"method_configs\.lora-r4\.rank: must be >= 1, got -4",
        ),
        (
            lambda c: c["method_configs"]["lora-r4"].update(rank="16"),
            r"method_configs\.lora-r4\.rank: must be an integer, got '16'",
        ),
        (
            lambda c: c["method_configs"]["lora-r4"].update(alpha="sixteen"),
            r"method_configs\.lora-r4\.alpha: must be a number or null, got 'sixteen'",
        ),
        (
            lambda c: c["method_configs"]["codyra"].update(dense_ratio=5),
            r"method_configs\.codyra\.dense_ratio: must be <= 1, got 5",
        ),
        (
            lambda c: c.update(task_settings={"count": {"methods": {"lora-r4": {"dropout": 2.0}}}}),
            r"task_settings\.count\.methods\.lora-r4\.dropout: must be < 1, got 2\.0",
        ),
        (
            lambda c: c["method_configs"]["codyra"].update(w_init="bogus"),
            r"method_configs\.codyra\.w_init: must be one of 'normal', 'uniform', 'ones', got 'bogus'",
        ),
        (
            lambda c: c.update(task_settings={"colour": {"methods": {"full-ft": {"rank": 4}}}}),
            (
                r"task_settings\.colour\.methods\.full-ft\.rank: method kind 'full' has no option 'rank'; "
                "its options: label_smoothing"
            ),
        ),
        (
            lambda c: c.update(task_settings={"digits": {"methods": {"codyra": {"train": {"lr": "fast"}}}}}),
            r"task_settings\.digits\.methods\.codyra\.train\.lr: 'fast' is not of type 'number'",
        ),
        (
            lambda c: c["method_configs"]["full-ft"]["train"].update(lr=-1e-4),
            r"method_configs\.full-ft\.train\.lr: -0\.0001 is less than or equal to the minimum",
        ),
        (
            lambda c: c.update(task_settings={"count": {"train": {"batch_size": 0}}}),
            r"task_settings\.count\.train\.batch_size: 0 is less than the minimum of 1",
        ),
        (lambda c: c["train"].update(lr=float("nan")), r"train\.lr: nan is not a finite number"),
        (
            lambda c: c.update(task_settings={"digits": {"methods": {"codyra": {"placement": ["ffn"]}}}}),
            r"task_settings\.digits\.methods\.codyra: unknown placement token 'ffn'",
        ),
    ],
)
def test_every_method_option_and_override_is_checked_with_its_exact_key_path(tiny_cfg_dict, mutate, message):
    mutate(tiny_cfg_dict)
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_cfg_dict)


def test_option_choices_are_the_code_s_choices():
    import typing
    from dataclasses import fields

    from codyra.adapters.lora import W_INITS
    from codyra.adapters.sparsity import KAPPA_SCHEDULES, PROX_OPERATORS

    options = method_class("codyra").Options
    choices = {f.name: f.metadata.get("choices") for f in fields(options)}
    w_init = typing.get_args(typing.get_type_hints(options)["w_init"])
    assert (w_init, choices["prox"], choices["schedule"]) == (W_INITS, PROX_OPERATORS, KAPPA_SCHEDULES)


# --- names that become paths ---------------------------------------------------------------


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["method_configs"].update({"../../../x": {"kind": "lora"}}), "method_configs"),
        (lambda c: c.update(methods=[*c["methods"], "../x"]), r"methods\[4\]"),
        (lambda c: c["tasks"].__setitem__(0, "../../x"), r"tasks\[0\]"),
        (lambda c: c.update(task_settings={"../x": {}}), "task_settings"),
        (lambda c: c.update(task_settings={"colour": {"methods": {"a/b": {}}}}), r"task_settings\.colour\.methods"),
        (lambda c: c.update(benchmark="mini/../../x"), "benchmark"),
    ],
)
def test_names_that_become_path_components_must_be_safe(tiny_cfg_dict, mutate, key):
    mutate(tiny_cfg_dict)
    with pytest.raises(
        ConfigError, match=rf"config key {key}: .* is not a valid name: it becomes a folder under results/"
    ):
        load_config(tiny_cfg_dict)


def test_every_result_path_is_checked_to_stay_under_results(tiny_cfg, tmp_path):
    assert run_dir(tiny_cfg, "codyra", 0) == tmp_path / "results" / "tiny" / "codyra" / "seed0"
    with pytest.raises(ConfigError, match="leaves the results folder"):
        run_dir(tiny_cfg, "../../../x", 0)  # a name that bypassed the schema (library use)
    with pytest.raises(ConfigError, match="leaves the results folder"):
        cell_path({**tiny_cfg, "benchmark": "../.."}, "codyra", 0, 1, 1)


# --- errors a user meets on the command line ----------------------------------------------


def test_numbers_are_parsed_as_users_write_them():
    cases = {
        "1e-4": 1e-4,
        "5E-4": 5e-4,
        "-2e3": -2000.0,
        "1.0e-4": 1e-4,
        ".5": 0.5,
        "3": 3,
        "[a, b]": ["a", "b"],
        "abc": "abc",
        "1e-4x": "1e-4x",
        "null": None,
    }
    parsed = {text: parse_value(text) for text in cases}
    assert parsed == cases and all(type(parsed[t]) is type(v) for t, v in cases.items())


def test_set_accepts_the_readme_s_own_example(tiny_cfg_dict, tmp_path, capsys):
    tiny_cfg_dict["tracking"] = {"enabled": False}
    path = write_yaml(tmp_path / "c.yaml", tiny_cfg_dict)
    write_cells(load_config(tiny_cfg_dict), "codyra")
    assert main(["summarize", "--config", path, "--set", "train.lr=1e-4", "--method", "codyra", "--seed", "0"]) == 0, (
        capsys.readouterr().err
    )
    assert (run_dir(load_config(tiny_cfg_dict), "codyra", 0) / "matrix.json").is_file()


def test_sweep_grid_takes_numbers_as_users_write_them(tiny_cfg, monkeypatch):
    from codyra.experiment import slurm as launch

    ran = []
    monkeypatch.setattr(launch.CodyraJob, "__call__", lambda job: ran.append((job.argv, job.config)))
    args = SimpleNamespace(grid=["train.lr=1e-4,5e-4"], method="lora-r4", seeds=[0], slurm=False)
    launch.sweep(args, tiny_cfg, entry=None)
    names = [argv[2] for argv, _ in ran]
    assert names == ["lora-r4-lr0.0001", "lora-r4-lr0.0005"]
    assert [cfg["method_configs"][n]["train"]["lr"] for (_, cfg), n in zip(ran, names, strict=True)] == [1e-4, 5e-4]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is empty"),
        ("benchmark: [unclosed\n", "is not valid YAML at line"),
        ("- a\n- b\n", "must hold a YAML mapping"),
        (
            "methods: [a]\nseeds: [0]\nmethods: [b]\n",
            "is not valid YAML at line 3, column 1: key 'methods' appears twice",
        ),
    ],
)
def test_malformed_or_empty_config_file_is_one_line_naming_it(tmp_path, capsys, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["summarize", "--config", str(path), "--method", "codyra", "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and message in err


def write_cells(cfg: dict, method: str) -> None:
    n = len(cfg["tasks"])
    for i in range(n + 1):
        for j in range(1, n + 1):
            write_json(
                cell_path(cfg, method, 0, i, j),
                {
                    "accuracy": 10.0 * j,
                    "benchmark": cfg["benchmark"],
                    "method": method,
                    "seed": 0,
                    "i": i,
                    "j": j,
                    "task": cfg["tasks"][j - 1],
                    "num_classes": 5,
                },
            )


def test_summarize_on_a_broken_cell_names_the_file(tiny_cfg_dict, tmp_path, capsys):
    tiny_cfg_dict["tracking"] = {"enabled": False}
    cfg = load_config(tiny_cfg_dict)
    write_cells(cfg, "codyra")
    broken = cell_path(cfg, "codyra", 0, 2, 1)
    broken.write_text("")
    assert (
        main(
            [
                "summarize",
                "--config",
                write_yaml(tmp_path / "c.yaml", tiny_cfg_dict),
                "--method",
                "codyra",
                "--seed",
                "0",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(broken) in err and "not valid JSON" in err


def test_sync_mlflow_with_the_server_down_is_one_clear_line(tmp_path, capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = copy.deepcopy(TINY) | {"results": str(tmp_path / "results"), "tracking": {"uri": f"http://127.0.0.1:{port}"}}
    assert main(["sync-mlflow", "--config", write_yaml(tmp_path / "c.yaml", cfg)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and f"MLflow store http://127.0.0.1:{port} does not answer" in err
        and "tracking.uri" in err
    )


def test_set_into_a_non_mapping_is_a_clear_error(tmp_path, capsys):
    path = write_yaml(tmp_path / "c.yaml", copy.deepcopy(TINY) | {"results": str(tmp_path / "r")})
    assert main(["summarize", "--config", path, "--set", "seeds.x=1", "--method", "codyra", "--seed", "0"]) == 2
    assert "--set seeds.x: seeds is not a mapping" in capsys.readouterr().err
