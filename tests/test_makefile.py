"""`make run` / `make test` set up .venv themselves: created when missing, reinstalled when
pyproject.toml or constraints.txt changed, left alone otherwise (pip and venv stand-ins log their calls)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture
def checkout(tmp_path):
    """A folder with the repository's Makefile, pyproject.toml and constraints.txt, and stand-ins
    for `python3 -m venv` (a venv whose python is this interpreter) and pip that log their arguments."""
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    log = tmp_path / "calls.log"
    python = tmp_path / "fake-python"
    python.write_text(
        f'#!/bin/sh\necho "venv $*" >> {log}\nmkdir -p "$3/bin" && ln -s {sys.executable} "$3/bin/python"\n'
    )
    pip = tmp_path / "fake-pip"
    pip.write_text(f'#!/bin/sh\necho "pip $*" >> {log}\n')
    python.chmod(0o755)
    pip.chmod(0o755)
    return tmp_path


def make_env(folder: Path) -> list[str]:
    """`make env` in ``folder``; the calls it made."""
    log = folder / "calls.log"
    log.unlink(missing_ok=True)
    subprocess.run(
        ["make", "-s", "env", f"PYTHON={folder / 'fake-python'}", f"PIP={folder / 'fake-pip'}"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return log.read_text().splitlines() if log.exists() else []


def test_first_call_creates_and_installs_then_nothing_until_the_pins_change(checkout):
    assert make_env(checkout) == [
        "venv -m venv .venv",
        "pip install -q torch==2.14.1 torchvision==0.29.1",
        "pip install -q -e .[dev,docs] -c constraints.txt",
    ]
    assert make_env(checkout) == []  # the same command again: nothing reinstalled
    (checkout / "pyproject.toml").touch()
    assert make_env(checkout) == []  # a newer file with the same content (a git checkout): nothing either
    with open(checkout / "constraints.txt", "a") as f:
        f.write("tabulate==0.10.0\n")
    assert make_env(checkout) == [  # changed pins: reinstalled into the existing .venv
        "pip install -q torch==2.14.1 torchvision==0.29.1",
        "pip install -q -e .[dev,docs] -c constraints.txt",
    ]
    assert make_env(checkout) == []


def test_a_failed_install_is_retried(checkout):
    (checkout / "fake-pip").write_text("#!/bin/sh\nexit 1\n")
    with pytest.raises(subprocess.CalledProcessError):
        make_env(checkout)
    assert not (checkout / ".venv" / ".codyra-env").exists()
    (checkout / "fake-pip").write_text(f'#!/bin/sh\necho "pip $*" >> {checkout / "calls.log"}\n')
    assert len(make_env(checkout)) == 2  # the venv is kept, the install runs again


def test_ci_runs_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## The two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["make run", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text().splitlines()
    targets = re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert {"run", "test", "env"} <= set(targets)
