"""Code versions: a job's version changes with the code it runs, and only with that."""

from __future__ import annotations

import pytest

from codyra.experiment import codeversions as codeversion
from codyra.experiment.codeversions import code_version, module_closure
from codyra.experiment.jobs import JOBS

PACKAGE = {
    "__init__.py": "",
    "entry.py": (
        "from typing import TYPE_CHECKING\n"
        "from . import helper\n"
        "from codyra.experiment.config import resolve\n"
        "from codyra.lib.used import U\n"
        "if TYPE_CHECKING:\n    from codyra import typing_only\n"
        "def run():\n    from codyra.reg import build\n    import codyra.sub.deep\n    return build()\n"
    ),
    "helper.py": "import os\nVALUE = 1\n",
    "typing_only.py": "X = 1\n",
    "experiment/__init__.py": "",
    "experiment/config.py": "def resolve():\n    pass\ndef validate():\n    from codyra import validation_only\n",
    "validation_only.py": "V = 1\n",
    "unrelated.py": "import codyra.entry\n",
    "reg/__init__.py": "import importlib\ndef build():\n    return importlib.import_module('codyra.reg.plugin')\n",
    "reg/plugin.py": "P = 1\n",
    "reg/other.py": "O = 1\n",
    "lib/__init__.py": "from codyra.lib import top\ndef later():\n    import importlib\n    from codyra import lazy_in_parent\n",
    "lib/top.py": "T = 1\n",
    "lib/used.py": "U = 1\n",
    "lib/unused.py": "N = 1\n",
    "lazy_in_parent.py": "L = 1\n",
    "sub/deep.py": "D = 1\n",  # sub/ is a namespace package (no __init__.py)
    "sub/configs/model.json": "{}",
    "other/__init__.py": "",
    "other/configs/model.json": "{}",
}


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "codyra"
    for name, text in PACKAGE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    yield root
    for cached in (code_version, module_closure, codeversion.direct_imports, codeversion._data_file_owners):
        cached.cache_clear()


def version_after(root, edit: str | None) -> str:
    for cached in (code_version, module_closure, codeversion.direct_imports, codeversion._data_file_owners):
        cached.cache_clear()
    if edit:
        (root / edit).write_text((root / edit).read_text() + "\n# edited\n")
    return code_version("codyra.entry", root=root)


def test_closure_follows_relative_lazy_and_dynamic_imports_but_not_type_checking(package):
    assert module_closure("codyra.entry", package) == {
        "codyra",
        "codyra.experiment",  # the parent package of ...
        "codyra.experiment.config",  # hashed; what it imports to validate a config is not followed
        "codyra.entry",
        "codyra.helper",  # from . import helper
        "codyra.reg",  # imported inside a function
        "codyra.reg.other",
        "codyra.reg.plugin",  # reg imports by name at run time: its whole package
        "codyra.sub.deep",  # in a namespace package
        "codyra.lib.used",
        "codyra.lib",  # a parent package, run on import: its module-level imports count ...
        "codyra.lib.top",
    }  # ... not those of its functions (lazy_in_parent), nor its siblings (lib.unused)


@pytest.mark.parametrize("edit", ["helper.py", "reg/plugin.py", "sub/deep.py", "__init__.py", "sub/configs/model.json", "experiment/config.py", "lib/__init__.py", "lib/top.py"])
def test_editing_code_the_entry_runs_changes_its_version(package, edit):
    assert version_after(package, None) != version_after(package, edit)


@pytest.mark.parametrize(
    "edit", ["typing_only.py", "validation_only.py", "unrelated.py", "other/__init__.py", "other/configs/model.json", "lazy_in_parent.py", "lib/unused.py"]
)
def test_editing_code_the_entry_never_runs_keeps_its_version(package, edit):
    assert version_after(package, None) == version_after(package, edit)


def test_an_entry_that_is_no_module_is_named():
    with pytest.raises(ValueError, match="no module codyra.trian .*codyra.experiment.jobs.JOBS"):
        module_closure("codyra.trian")


def test_every_job_entry_exists_and_tables_code_is_not_training_code():
    for job in JOBS.values():
        assert len(code_version(*job.entries)) == 16
    closure = {rule: frozenset().union(*(module_closure(e) for e in job.entries)) for rule, job in JOBS.items()}
    assert "codyra.evaluation.tables" in closure["tables"]
    assert "codyra.evaluation.tables" not in closure["train_task"]
    assert "codyra.methods.codyra" in closure["train_task"]  # through the method registry
    assert not any(m.startswith(("codyra.methods", "codyra.training.loop")) for m in closure["pretrain_mini"])  # a method edit keeps theta_0
    assert {"codyra.mini.clip.pretrain", "codyra.mini.trace.pretrain"} <= closure["pretrain_mini"]
