"""The package's modules import each other without cycles (lazy imports included)."""

from __future__ import annotations

from pathlib import Path

from .conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_the_checker_finds_a_cycle_and_its_members(tmp_path):
    script = load_script("import-cycles")
    pkg = tmp_path / "codyra"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from codyra.sub import b  # lazy: still an edge\n")
    (pkg / "sub" / "b.py").write_text("from codyra import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from codyra import a\n")
    assert script.cycles(script.graph(pkg)) == [["codyra.a", "codyra.sub.b"]]


def test_src_codyra_has_no_import_cycle():
    script = load_script("import-cycles")
    assert script.package_cycles(script.graph(ROOT / "src" / "codyra")) == []
