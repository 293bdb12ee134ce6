"""The codyra command's version, help texts and the up-to-date check of `codyra train`."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

from codyra.analysis.registry import ANALYSES, available, outputs
from codyra.checkout import git_commit
from codyra.cli import build_parser, main, version_text
from codyra.experiment.config import load_config
from codyra.store.paths import run_dir

from .conftest import write_yaml

ROOT = Path(__file__).resolve().parents[1]


def commands() -> dict[str, argparse.ArgumentParser]:
    def walk(parser, name):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(sub, f"{name} {sub_name}")

    return dict(walk(build_parser(), "codyra"))


def git(folder: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=folder, capture_output=True, text=True, check=True).stdout.strip()


def test_version_names_the_commit_of_a_checkout(tmp_path, monkeypatch):
    package = tmp_path / "checkout" / "src" / "codyra"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    git(tmp_path / "checkout", "init", "-q")
    git(tmp_path / "checkout", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", "--allow-empty")
    assert git_commit(package) == git(package, "rev-parse", "--short=12", "HEAD")
    git(tmp_path / "checkout", "add", "src")
    assert git_commit(package) == git(package, "rev-parse", "--short=12", "HEAD") + "+changes"
    elsewhere = tmp_path / "checkout" / "site-packages" / "codyra"  # an installed copy inside some repository
    elsewhere.mkdir(parents=True)
    assert git_commit(elsewhere) is None
    plain = tmp_path / "plain" / "src" / "codyra"  # no repository
    plain.mkdir(parents=True)
    assert git_commit(plain) is None
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))  # no git at all
    assert git_commit(package) is None
    assert re.fullmatch(r"codyra \d+\.\d+\.\d+", version_text())


def test_version_of_this_checkout(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    commit = git(ROOT, "rev-parse", "--short=12", "HEAD")
    assert re.fullmatch(rf"codyra \d+\.\d+\.\d+ \(git {commit}(\+changes)?\)\n", capsys.readouterr().out)


def test_help_texts_are_plain_and_metavars_read_well(capsys):
    for name, parser in commands().items():
        text = parser.format_help()
        assert "`" not in text and not re.search(r":(func|class|mod):", text), name
        usage = parser.format_usage()
        assert not re.search(r"[A-Z]+_[A-Z_]+", usage), f"{name}: a metavar made of an option's name: {usage}"
    cell = commands()["codyra cell"].format_usage()
    assert "--i ROW" in cell and "--j TASK" in cell
    assert "HTML" in commands()["codyra tables"].format_help()


def test_analysis_help_lists_every_analysis_of_the_registry():
    text = commands()["codyra analysis"].format_help()
    for name, analysis in ANALYSES.items():
        assert re.search(rf"^  {name} +{re.escape(analysis.description)}$", text, re.MULTILINE), name
    for config in ("config.yaml", "mini_ablations.yaml", "mini_trace.yaml"):  # every analysis a config can run
        cfg = load_config(ROOT / "config" / config)
        assert set(available(cfg)) <= set(ANALYSES), config
        for name in available(cfg):
            outputs(cfg, name, cfg["methods"][-1])  # known to the registry's outputs


def test_an_unknown_analysis_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["analysis", "drfit"])
    assert exit_.value.code == 2 and "invalid choice: 'drfit'" in capsys.readouterr().err


@pytest.fixture
def tiny_yaml(tmp_path, tiny_cfg_dict, tiny_pretrained):
    tiny_cfg_dict["model"]["pretrained"] = str(tiny_pretrained)
    tiny_cfg_dict["tracking"] = {"enabled": False}
    return write_yaml(tmp_path / "tiny.yaml", tiny_cfg_dict), tiny_cfg_dict


def test_train_does_nothing_when_the_task_is_up_to_date(tiny_yaml, capsys):
    path, cfg = tiny_yaml
    summary = run_dir(cfg, "lora-r4", 0) / "task1" / "summary.json"

    def train(*extra: str) -> str:
        argv = ["train", "--config", path, "--method", "lora-r4", "--seed", "0", "--task", "1"]
        assert main([*argv, "--set", "train.iterations=2", *extra]) == 0
        return capsys.readouterr().out

    assert "up to date" not in train()
    first = summary.read_text()
    assert "task 1 of lora-r4 seed 0 is up to date" in train()
    assert summary.read_text() == first  # not retrained: the same file, its timings included
    assert "up to date" not in train("--set", "train.iterations=3")  # a changed setting retrains
    assert json.loads(summary.read_text())["steps"] == 3
    third = summary.read_text()
    assert "up to date" in train("--set", "train.iterations=3")
    assert "up to date" not in train("--set", "train.iterations=3", "--force")
    assert summary.read_text() != third  # retrained (its timings differ)
