"""environment.yml mirrors pyproject.toml: same packages, same version bounds, each once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}  # conda-forge's name for the same package


def conda_requirement(entry: str) -> tuple[str, SpecifierSet]:
    """'pytorch[version='>=2.4',build=cuda*]' or 'numpy>=1.26' -> (name, specifier)."""
    bracket = re.fullmatch(r"([\w.-]+)\[version='([^']*)'.*\]", entry)
    if bracket:
        return bracket.group(1), SpecifierSet(bracket.group(2))
    req = Requirement(entry)
    return req.name, req.specifier


def test_environment_mirrors_pyproject_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = {
        Requirement(r).name: Requirement(r).specifier
        for r in [*project["dependencies"], *extras["workflow"], *extras["llm"]]
    }
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    listed = [
        conda_requirement(item)
        for entry in env
        for item in (entry["pip"] if isinstance(entry, dict) else [entry])
        if item not in ("pip", "-e .") and not item.startswith("python=")
    ]
    names = [name for name, _ in listed]
    assert sorted({n for n in names if names.count(n) > 1}) == []  # each package once
    have = dict(listed)
    assert {CONDA_NAMES.get(n, n): s for n, s in wanted.items()} == have
    assert "build=cuda*" in next(e for e in env if isinstance(e, str) and e.startswith("pytorch"))
