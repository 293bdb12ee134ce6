"""The codyra command line: a tiny mini stream end to end, and clear errors for bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from codyra.cli import main
from codyra.store.paths import cell_path, run_dir

from .conftest import write_yaml


@pytest.fixture
def tiny_yaml(tmp_path, tiny_cfg_dict, tiny_pretrained):
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    return write_yaml(tmp_path / "tiny.yaml", tiny_cfg_dict), tiny_cfg_dict


def test_help_imports_no_torch():
    code = "import sys; from codyra.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_stream_through_the_installed_entry_point(tiny_yaml, tmp_path):
    path, cfg = tiny_yaml
    log = tmp_path / "logs" / "run.log"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "codyra.cli",
            "--log",
            str(log),
            "run",
            "--config",
            path,
            "--method",
            "codyra",
            "--seed",
            "0",
        ],
        check=True,
        capture_output=True,
    )
    matrix = json.loads((run_dir(cfg, "codyra", 0) / "matrix.json").read_text())
    assert len(matrix["A"]) == 4 and all(len(row) == 3 for row in matrix["A"])
    assert matrix["A"][2][1] == json.loads(cell_path(cfg, "codyra", 0, 2, 2).read_text())["accuracy"]
    assert set(matrix["metrics"]) >= {"transfer", "average", "last", "forgetting", "bwt", "op"}
    text = log.read_text()
    assert "codyra/seed0/task3 count" in text and "A[3,3]" in text


def test_single_commands_and_set_overrides(tiny_yaml):
    path, cfg = tiny_yaml
    assert (
        main(
            [
                "train",
                "--config",
                path,
                "--method",
                "lora-r4",
                "--seed",
                "0",
                "--task",
                "1",
                "--set",
                "train.iterations=3",
            ]
        )
        == 0
    )
    summary = json.loads((run_dir(cfg, "lora-r4", 0) / "task1" / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["job"]["train"]["iterations"] == 3
    assert main(["cell", "--config", path, "--method", "lora-r4", "--seed", "0", "--i", "1", "--j", "1"]) == 0
    assert main(["cell", "--config", path, "--method", "pretrained", "--i", "0", "--j", "2"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--method", "adamw", "--seed", "0", "--task", "1"], "unknown method 'adamw'"),
        (["train", "--method", "codyra", "--seed", "0", "--task", "9"], "task index 9 out of range 1..3"),
        (
            ["cell", "--method", "codyra", "--seed", "0", "--i", "2", "--j", "1"],
            r"missing task update\(s\).*task1/update.safetensors",
        ),
        (["cell", "--method", "pretrained", "--i", "1", "--j", "1"], "only has row i = 0"),
        (
            ["cell", "--method", "pretrained", "--seed", "0", "--i", "0", "--j", "1"],
            "--seed does not apply to the pretrained model",
        ),
        (["cell", "--method", "codyra", "--i", "1", "--j", "1"], "--seed is required for method 'codyra'"),
        (
            [
                "train",
                "--method",
                "codyra",
                "--seed",
                "0",
                "--task",
                "1",
                "--set",
                "method_configs.codyra.placement=[vision, ffn]",
            ],
            "unknown placement token 'ffn'",
        ),
        (
            ["train", "--method", "codyra", "--seed", "0", "--task", "1", "--set", "data.kind=imagenet"],
            "config key data.kind",
        ),
        (
            ["train", "--method", "codyra", "--seed", "0", "--task", "1", "--set", "tasks=[cifar]"],
            "'cifar' is not a dataset of the mini protocol",
        ),
        (
            [
                "train",
                "--method",
                "codyra",
                "--seed",
                "0",
                "--task",
                "1",
                "--set",
                "model.pretrained=/nowhere/theta0.safetensors",
            ],
            "model weights not found: /nowhere/theta0.safetensors",
        ),
        (
            ["train", "--method", "codyra", "--seed", "0", "--task", "1", "--set", "model.pretrained=weights.pt"],
            "not a .safetensors file",
        ),
        (
            ["train", "--method", "codyra", "--seed", "0", "--task", "1", "--set", "model.name=ViT-Q-99"],
            "unknown open_clip model 'ViT-Q-99'",
        ),
    ],
)
def test_bad_input_gives_a_clear_error(tiny_yaml, capsys, argv, message):
    path, _ = tiny_yaml
    command, *rest = argv
    assert main([command, "--config", path, *rest]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codyra: error: "), err
    assert re.search(message, err), err


def test_missing_config_and_corrupted_pretrained_weights(tiny_yaml, tmp_path, capsys):
    assert (
        main(["train", "--config", str(tmp_path / "none.yaml"), "--method", "codyra", "--seed", "0", "--task", "1"])
        == 2
    )
    assert "config file not found" in capsys.readouterr().err
    path, _cfg = tiny_yaml
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    argv = [
        "train",
        "--config",
        path,
        "--method",
        "codyra",
        "--seed",
        "0",
        "--task",
        "1",
        "--set",
        f"model.pretrained={broken}",
    ]
    assert main(argv) == 2
    assert "corrupted or truncated" in capsys.readouterr().err


def test_version_help_and_examples_for_every_command(capsys):
    from codyra import __version__
    from codyra.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith(f"codyra {__version__}")
    import argparse

    def walk(parser, name):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(sub, f"{name} {sub_name}")

    commands = dict(walk(build_parser(), "codyra"))
    assert {"codyra train", "codyra cell", "codyra tables", "codyra fetch-weights", "codyra data check"} <= set(
        commands
    )
    for name, parser in commands.items():
        assert (parser.epilog or "").startswith("example: codyra "), name
        for action in parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help text"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tables", "--device", "cpu"], "unrecognized arguments: --device cpu"),  # no model runs in tables
        (["summarize", "--method", "codyra", "--seed", "0", "--threads", "2"], "unrecognized arguments: --threads 2"),
        (["fetch-weights", "--device", "cpu"], "unrecognized arguments: --device cpu"),
        (["cell", "codyra", "0", "1", "1"], "required: --method, --i"),  # the old positional style
    ],
)
def test_options_exist_only_where_they_act(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_log_option_before_or_after_the_command(tiny_yaml, tmp_path):
    path, _ = tiny_yaml
    before, after = tmp_path / "before.log", tmp_path / "after.log"
    assert main(["--log", str(before), "cell", "--config", path, "--method", "pretrained", "--i", "0", "--j", "1"]) == 0
    assert main(["cell", "--config", path, "--method", "pretrained", "--i", "0", "--j", "1", "--log", str(after)]) == 0
    for log in (before, after):
        assert "eval colour" in log.read_text()


@pytest.mark.parametrize("family", ["clip", "llm"])
def test_unavailable_weights_of_either_family_are_one_clear_line(tiny_yaml, monkeypatch, capsys, family):
    """Both families raise the one WeightsUnavailableError (a FileNotFoundError), which the CLI reports."""
    import importlib

    from codyra import cli
    from codyra.errors import WeightsUnavailableError

    error = importlib.import_module(f"codyra.{family}.model").WeightsUnavailableError
    assert error is WeightsUnavailableError

    def handler(args):
        raise error(f"{family} weights are not in cache /x; run codyra fetch-weights")

    monkeypatch.setattr(cli, "cmd_summarize", handler)
    assert main(["summarize", "--config", tiny_yaml, "--method", "codyra", "--seed", "0"]) == 2
    assert capsys.readouterr().err == f"codyra: error: {family} weights are not in cache /x; run codyra fetch-weights\n"
