"""environment.yml installs what CI tested: the packages pyproject.toml needs, each once, at the
versions constraints.txt locks (within pyproject's bounds), and pip's other packages held to them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}  # conda-forge's name for the same package


def environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def environment_pins() -> list[tuple[str, str]]:
    """(package, pinned version) of every package environment.yml lists, conda's and pip's, as pip names them;
    an entry that pins no exact version fails here."""
    pins = []
    for entry in environment()["dependencies"]:
        for item in entry["pip"] if isinstance(entry, dict) else [entry]:
            if item in ("pip", "-e .", "-c constraints.txt") or item.startswith("python="):
                continue
            bracket = re.fullmatch(r"([\w.-]+)\[version='==([^']*)'.*\]", item)  # pytorch[version='==X',build=...]
            name, version = bracket.groups() if bracket else re.fullmatch(r"([\w.-]+)==([^=<>!~*,\s]+)", item).groups()
            pins.append((canonicalize_name(CONDA_NAMES.get(name, name)), version))
    return pins


def constraints() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {canonicalize_name(name): version for name, version in pairs}


def test_environment_pins_the_versions_ci_tested():
    locked = constraints()
    pins = environment_pins()
    assert {name: version for name, version in pins if locked.get(name) != version} == {}
    pip = environment()["dependencies"][-1]["pip"]
    assert "-c constraints.txt" in pip  # what the listed packages pull in, at CI's versions too
    assert "build=cuda*" in next(e for e in environment()["dependencies"] if str(e).startswith("pytorch"))


def test_environment_lists_what_pyproject_needs_each_once_within_its_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = {
        canonicalize_name(Requirement(r).name): Requirement(r).specifier
        for r in [*project["dependencies"], *extras["workflow"], *extras["llm"]]
    }
    names = [name for name, _ in environment_pins()]
    assert sorted({n for n in names if names.count(n) > 1}) == []  # each package once
    pins = dict(environment_pins())
    assert set(pins) == set(wanted)
    assert {name: pins[name] for name, bounds in wanted.items() if Version(pins[name]) not in bounds} == {}
