"""Method kinds from other distributions (entry-point group ``codyra.methods``): the example
package examples/codyra-mylora installed offline, seen by config validation and code versions;
two sources of one kind and a plugin that fails to import are clear errors."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codyra.experiment import codeversions
from codyra.experiment.config import ConfigError, load_config
from codyra.methods import available_kinds, method_class

from ..conftest import ROOT, TINY, clear_code_version_caches
from .contract import contract_problems

EXAMPLE = Path(ROOT) / "examples" / "codyra-mylora"


def install(source: Path, target: Path) -> Path:
    """pip-install the package at ``source`` into ``target`` (offline: no index, no build isolation)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--target", str(target), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def dist_info(site: Path, name: str, entry_points: str) -> None:
    """A distribution's metadata alone, as installed: enough for importlib.metadata."""
    folder = site / f"{name.replace('-', '_')}-0.1.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (folder / "entry_points.txt").write_text(f"[codyra.methods]\n{entry_points}\n")


def copied_example(tmp_path: Path) -> Path:
    source = tmp_path / "codyra-mylora"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    return source


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The example installed from a copy (so a test may edit the installed module); its site on sys.path."""
    site = install(copied_example(tmp_path), tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    clear_code_version_caches()
    yield site / "codyra_mylora" / "method.py"
    for module in [m for m in sys.modules if m.startswith("codyra_mylora")]:
        del sys.modules[module]
    clear_code_version_caches()


def tiny_with(method_config: dict) -> dict:
    cfg = copy.deepcopy(TINY)
    cfg["methods"] = [*cfg["methods"], "rs-lora"]
    cfg["method_configs"]["rs-lora"] = method_config
    return cfg


def test_a_plugin_kind_is_a_kind_of_the_registry_and_the_config(plugin, tmp_path):
    assert "mylora" in available_kinds()
    cls = method_class("mylora")
    assert cls.__module__ == "codyra_mylora.method" and cls.kind == "mylora"
    assert contract_problems(cls) == []
    assert cls({"kind": "mylora", "rank": 4}).options.alpha == 8.0  # alpha / rank * sqrt(rank): 4 * 2
    assert cls({"kind": "mylora", "rank": 16, "alpha": 2.0}).options.alpha == 8.0  # 2 * sqrt(16)
    cfg = load_config({**tiny_with({"kind": "mylora", "rank": 4}), "results": str(tmp_path / "results")})
    assert cfg["method_configs"]["rs-lora"]["kind"] == "mylora"
    with pytest.raises(ConfigError, match="method_configs.rs-lora.rank: must be >= 1"):  # LoRA's options, checked
        load_config({**tiny_with({"kind": "mylora", "rank": 0}), "results": str(tmp_path / "results")})


def test_a_plugin_kind_has_a_code_version_of_its_own(plugin):
    train = ("codyra.experiment.train_job",)
    before = {k: codeversions.code_version(*train, methods=(k,)) for k in ("mylora", "lora", "codyra")}
    assert "codyra_mylora.method" in codeversions.module_closure("codyra_mylora.method")
    assert "codyra.methods.lora" in codeversions.module_closure("codyra_mylora.method")  # built on LoRA: hashed too

    plugin.write_text(plugin.read_text() + "\n# a comment reruns nothing\n")
    clear_code_version_caches()
    assert {k: codeversions.code_version(*train, methods=(k,)) for k in before} == before

    plugin.write_text(plugin.read_text() + "\nEDITED = 1\n")
    clear_code_version_caches()
    after = {k: codeversions.code_version(*train, methods=(k,)) for k in before}
    assert after["mylora"] != before["mylora"]  # its own jobs rerun
    assert {k: after[k] for k in ("lora", "codyra")} == {k: before[k] for k in ("lora", "codyra")}  # no other's


def test_installing_a_plugin_changes_no_other_code_version(tmp_path, monkeypatch):
    clear_code_version_caches()
    kinds = ("lora", "codyra", "full")
    before = {k: codeversions.code_version("codyra.experiment.train_job", methods=(k,)) for k in kinds}
    monkeypatch.syspath_prepend(str(install(copied_example(tmp_path), tmp_path / "site")))
    clear_code_version_caches()
    try:
        assert "mylora" in codeversions.method_kinds()
        assert {k: codeversions.code_version("codyra.experiment.train_job", methods=(k,)) for k in kinds} == before
    finally:
        clear_code_version_caches()


def test_one_kind_from_two_sources_is_an_error_naming_both(plugin, tmp_path, monkeypatch):
    other = tmp_path / "other"
    dist_info(other, "codyra-other", "mylora = codyra_other")
    monkeypatch.syspath_prepend(str(other))
    with pytest.raises(ValueError, match=r"'mylora' is defined twice: by distribution codyra-(mylora|other) ") as err:
        available_kinds()
    assert "distribution codyra-mylora" in str(err.value) and "distribution codyra-other" in str(err.value)


def test_a_plugin_named_like_a_built_in_kind_is_an_error(tmp_path, monkeypatch):
    dist_info(tmp_path, "codyra-lora2", "lora = codyra_lora2")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'lora' is defined twice: by codyra \(codyra.methods.lora\) and by "):
        method_class("lora")


def test_a_plugin_that_fails_to_import_names_its_distribution(tmp_path, monkeypatch):
    dist_info(tmp_path, "codyra-broken", "broken = codyra_broken")
    (tmp_path / "codyra_broken.py").write_text("import a_package_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="'broken' of distribution codyra-broken .*ModuleNotFoundError"):
        method_class("broken")
    with pytest.raises(ImportError, match="distribution codyra-broken"):
        load_config({**tiny_with({"kind": "broken"}), "results": str(tmp_path / "results")})
