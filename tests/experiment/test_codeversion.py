"""Code versions: a job's version changes with the code it runs, and only with that."""

from __future__ import annotations

import gzip

import pytest

from codyra.analysis.registry import ANALYSES
from codyra.experiment import codeversions as codeversion
from codyra.experiment.codeversions import code_version, method_kinds, module_closure, normalised_source
from codyra.experiment.jobs import JOBS, MINI_PRETRAINING

from ..conftest import clear_code_version_caches

PACKAGE = {
    "__init__.py": "",
    "entry.py": (
        "from typing import TYPE_CHECKING\n"
        "from . import helper\n"
        "from codyra.experiment.config import resolve\n"
        "from codyra.lib.used import U\n"
        "from codyra.tracking.mirror import log_run\n"
        "from codyra.progress import bar\n"
        "if TYPE_CHECKING:\n    from codyra import typing_only\n"
        "def run():\n    from codyra.reg import build\n    import codyra.sub.deep\n    return build()\n"
        "def train(kind):\n    from codyra.methods import method_class\n    return method_class(kind)\n"
        "def feature_pass():\n    from codyra.methods.folder.clip import C\n    return C\n"  # a kind's family service
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
    "lib/__init__.py": (
        "from codyra.lib import top\ndef later():\n    import importlib\n    from codyra import lazy_in_parent\n"
    ),
    "lib/top.py": "T = 1\n",
    "lib/used.py": "U = 1\n",
    "lib/unused.py": "N = 1\n",
    "lazy_in_parent.py": "L = 1\n",
    "sub/deep.py": "D = 1\n",  # sub/ is a namespace package (no __init__.py)
    "sub/configs/model.json": "{}",
    "other/__init__.py": "",
    "other/configs/model.json": "{}",
    "tracking/__init__.py": "",
    "tracking/mirror.py": "from codyra import only_tracking\ndef log_run():\n    pass\n",
    "only_tracking.py": "O = 1\n",
    "progress.py": "def bar():\n    pass\n",
    # the method registry and its kinds (modules or packages exposing METHOD)
    "methods/__init__.py": (
        "import importlib\nfrom codyra.methods.base import Method\n"
        "def method_class(kind):\n    return importlib.import_module(f'codyra.methods.{kind}').METHOD\n"
    ),
    "methods/base.py": "class Method:\n    pass\n",
    "methods/_helper.py": "def distill():\n    return 1\n",
    "methods/full.py": "from codyra.methods.base import Method\nclass Full(Method):\n    pass\nMETHOD = Full\n",
    "methods/lwf.py": (
        "from codyra.methods import _helper\nfrom codyra.methods.full import Full\n"
        "class LwF(Full):\n    pass\nMETHOD = LwF\n"
    ),
    "methods/lwf_vr.py": "from codyra.methods.lwf import LwF\nclass LwFVR(LwF):\n    pass\nMETHOD = LwFVR\n",
    "methods/folder/__init__.py": "from codyra.methods.folder.method import METHOD\n",
    "methods/folder/method.py": (
        "from codyra.methods.base import Method\nclass Folder(Method):\n"
        "    def row(self):\n        from codyra.methods.folder.clip import C\n        return C\nMETHOD = Folder\n"
    ),
    "methods/folder/clip.py": "C = 1\n",
    "methods/other.py": "from codyra.methods.base import Method\nclass Other(Method):\n    pass\nMETHOD = Other\n",
}


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "codyra"
    for name, text in PACKAGE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    yield root
    clear_code_version_caches()


def version_after(root, edit: str | None, text: str = "\n# edited\n", methods: tuple[str, ...] = ()) -> str:
    clear_code_version_caches()
    if edit:
        (root / edit).write_text((root / edit).read_text() + text)
    return code_version("codyra.entry", methods=methods, root=root)


SHARED = {
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
    "codyra.lib.top",  # ... not those of its functions (lazy_in_parent), nor its siblings (lib.unused)
    "codyra.methods",  # the registry, whose import by name brings no kind ...
    "codyra.methods.base",  # ... but its module-level imports
}


def test_closure_follows_relative_lazy_and_dynamic_imports_but_not_type_checking(package):
    # no tracking, progress, or method kind (methods.folder.clip: imported by shared code, run for its kind only)
    assert module_closure("codyra.entry", package) == SHARED


def test_the_kinds_are_the_registry_modules_and_packages_that_expose_method(package):
    assert method_kinds(package) == {"full", "lwf", "lwf_vr", "folder", "other"}  # not base, _helper


def test_a_method_closure_holds_its_base_classes_and_private_helpers_not_other_kinds(package):
    assert module_closure("codyra.methods.lwf_vr", package) == {
        "codyra",
        "codyra.methods",
        "codyra.methods.base",
        "codyra.methods._helper",
        "codyra.methods.full",
        "codyra.methods.lwf",
        "codyra.methods.lwf_vr",
    }
    assert module_closure("codyra.methods.folder", package) == {
        "codyra",
        "codyra.methods",
        "codyra.methods.base",
        "codyra.methods.folder",
        "codyra.methods.folder.method",
        "codyra.methods.folder.clip",
    }


@pytest.mark.parametrize(
    "edit",
    [
        "helper.py",
        "reg/plugin.py",
        "sub/deep.py",
        "__init__.py",
        "sub/configs/model.json",
        "experiment/config.py",
        "lib/__init__.py",
        "lib/top.py",
        "methods/__init__.py",
        "methods/base.py",
    ],
)
def test_editing_code_the_entry_runs_changes_its_version(package, edit):
    assert version_after(package, None) != version_after(package, edit, "\nEDITED = 1\n")


@pytest.mark.parametrize(
    "edit",
    [
        "typing_only.py",
        "validation_only.py",
        "unrelated.py",
        "other/__init__.py",
        "other/configs/model.json",
        "lazy_in_parent.py",
        "lib/unused.py",
        "tracking/mirror.py",
        "only_tracking.py",
        "progress.py",
        "methods/lwf.py",
        "methods/_helper.py",
        "methods/folder/clip.py",
    ],
)
def test_editing_code_the_entry_never_runs_keeps_its_version(package, edit):
    assert version_after(package, None) == version_after(package, edit, "\nEDITED = 1\n")


@pytest.mark.parametrize(
    "edit, changed",
    [
        ("methods/lwf.py", {"lwf", "lwf_vr"}),  # and the method built on it
        ("methods/_helper.py", {"lwf", "lwf_vr"}),  # a private helper: the kinds that import it
        ("methods/full.py", {"full", "lwf", "lwf_vr"}),  # a base class
        ("methods/lwf_vr.py", {"lwf_vr"}),
        ("methods/folder/clip.py", {"folder"}),  # a kind's family part
        ("methods/base.py", {"full", "lwf", "lwf_vr", "folder", "other"}),
        ("tracking/mirror.py", set()),
    ],
)
def test_editing_a_method_changes_the_versions_of_the_jobs_that_run_it_and_only_those(package, edit, changed):
    kinds = sorted(method_kinds(package))
    before = {kind: version_after(package, None, methods=(kind,)) for kind in kinds}
    version_after(package, edit, "\nEDITED = 1\n")
    after = {kind: version_after(package, None, methods=(kind,)) for kind in kinds}
    assert {kind for kind in kinds if before[kind] != after[kind]} == changed


def test_a_new_method_module_changes_no_version(package):
    kinds = sorted(method_kinds(package))
    before = [version_after(package, None, methods=(kind,)) for kind in kinds]
    new = "from codyra.methods.lwf import LwF\nclass New(LwF):\n    pass\nMETHOD = New\n"
    (package / "methods" / "new.py").write_text(new)
    assert [version_after(package, None, methods=(kind,)) for kind in kinds] == before
    assert "new" in method_kinds(package)


@pytest.mark.parametrize(
    "before, after, same",
    [
        ("VALUE = 1\n", "VALUE = 1  # one\n", True),  # a comment
        ("def f():\n    return 2\n", 'def f():\n    """Two."""\n    return 2\n', True),  # a docstring added ...
        ('def f():\n    """Two."""\n    return 2\n', 'def f():\n    """2."""\n    return 2\n', True),  # ... edited
        ("X = [1, 2]\n", "X = [\n    1,\n    2,\n]\n\n\n", True),  # layout
        ("VALUE = 1\n", "VALUE = 2\n", False),  # code
        ("def f():\n    return 2\n", "def f():\n    return 2.0\n", False),
    ],
)
def test_only_code_edits_change_the_version(package, before, after, same):
    (package / "helper.py").write_text(before)
    original = version_after(package, None)
    (package / "helper.py").write_text(after)
    assert (version_after(package, None) == original) is same


def test_normalised_source_drops_comments_docstrings_and_layout_not_code():
    code = "import os\nVALUE = 1\n\n\ndef f(x):\n    return x + VALUE\n"
    same = (
        '"""Module docstring."""\n'
        "import os  # the OS\n"
        "VALUE = (\n    1\n)\n"
        'def f(x):\n    """Adds VALUE."""\n'
        "    # a comment\n"
        '    "a bare string does nothing"\n'
        "    return x+VALUE\n"
    )
    assert normalised_source(same) == normalised_source(code)
    edits = (code.replace("1", "2"), code.replace("x + VALUE", "VALUE + x"), code + "W = 0\n", code.replace("x)", "y)"))
    for edited in edits:
        assert normalised_source(edited) != normalised_source(code)
    string_value = 'def f():\n    return "a string the code returns"\n'
    assert normalised_source(string_value) != normalised_source(string_value.replace("returns", "gives"))


def test_an_entry_that_is_no_module_is_named():
    with pytest.raises(ValueError, match="no module codyra.trian .*codyra.experiment.jobs.JOBS"):
        module_closure("codyra.trian")


def test_an_unknown_method_kind_is_named_with_the_kinds():
    with pytest.raises(ValueError, match="no method kind lfw in codyra.methods; kinds: .*lwf, lwf_vr"):
        code_version("codyra.training.loop", methods=("lfw",))


def test_every_job_entry_exists_and_each_job_runs_only_its_code():
    for job in JOBS.values():
        assert len(code_version(*job.entries)) == 16
    closure = {rule: frozenset().union(*(module_closure(e) for e in job.entries)) for rule, job in JOBS.items()}
    for analysis in ANALYSES.values():  # each analysis's job: its module
        assert len(analysis.version()) == 16
        closure[f"analysis_{analysis.name}"] = module_closure(f"codyra.analysis.{analysis.module}")
    assert "codyra.analysis.registry" not in closure["analysis_drift"]  # the registry only declares and dispatches
    assert "codyra.evaluation.tables" in closure["tables"]
    assert "codyra.evaluation.tables" not in closure["train_task"]
    assert "codyra.training.loop" in closure["train_task"]
    # a method edit keeps theta_0
    assert not any(m.startswith(("codyra.methods", "codyra.training.loop")) for m in closure["pretrain_mini"])
    minis = {"codyra.mini.clip.pretrain", "codyra.mini.blip.pretrain", "codyra.mini.trace.pretrain"}
    assert minis <= closure["pretrain_mini"]
    # each mini's theta_0 rests on its own pretraining: editing the mini TRACE's keeps the mini CLIP's
    own = {family: module_closure(module) for family, module in MINI_PRETRAINING.items()}
    assert "codyra.mini.trace.pretrain" not in own["clip"] | own["blip"]
    assert not {"codyra.mini.blip.pretrain", "codyra.blip.model"} & own["clip"]
    assert "codyra.mini.clip.pretrain" in own["blip"]  # the mini BLIP runs the mini CLIP's loop
    every = frozenset().union(*closure.values())
    # the MLflow mirror, logs and progress bars, argument parsing change no result
    assert not {m for m in every if m.startswith("codyra.tracking")} | ({"codyra.progress", "codyra.cli"} & every)
    assert not {f"codyra.methods.{kind}" for kind in method_kinds()} & every  # a job runs the kinds it names only
    lwf_vr = module_closure("codyra.methods.lwf_vr")
    assert {"codyra.methods.lwf_vr", "codyra.methods.lwf", "codyra.methods.full", "codyra.methods.base"} <= lwf_vr
    assert "codyra.methods.codyra" not in lwf_vr
    rail = module_closure("codyra.methods.rail")  # a method folder: its family part, its private helpers
    assert {"codyra.methods.rail.clip", "codyra.methods.rail.regression", "codyra.methods._routing"} <= rail


def test_the_cells_of_an_untrained_method_that_rewrites_prompts_rest_on_its_code(monkeypatch):
    """FIX(ICL) never trains: no update's settings carry its code, its cells' stand-in for them does."""
    from codyra.experiment.fingerprints import untrained_settings
    from codyra.methods import method_of

    cfg = {"method_configs": {"icl": {"kind": "icl", "demonstrations": 2}, "zs": {"kind": "zeroshot"}}}
    versions = {("icl",): "before"}
    monkeypatch.setattr(codeversion, "code_version", lambda *entries, methods=(), root=None: versions[methods])

    def settings(name):
        return untrained_settings(method_of(cfg, name), cfg["method_configs"][name])

    before = settings("icl")
    versions[("icl",)] = "edited"
    assert settings("icl") != before
    assert settings("zs") == []  # its cells are row 0's copies: no code of its own


def test_a_modules_facts_are_read_back_from_the_cache_in_a_later_process(package, tmp_path, monkeypatch):
    monkeypatch.setenv("CODYRA_CACHE_DIR", str(tmp_path / "cache"))
    first = version_after(package, None, methods=("lwf_vr",))
    entries = sorted((tmp_path / "cache" / "code-versions").glob("*.json.gz"))
    assert entries  # one per distinct module source read
    clear_code_version_caches()  # a later process: nothing parsed yet
    monkeypatch.setattr(codeversion.ast, "parse", lambda *a, **k: pytest.fail("parsed a cached module"))
    assert code_version("codyra.entry", methods=("lwf_vr",), root=package) == first


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-6],  # truncated
        lambda data: data[:40] + bytes([data[40] ^ 0xFF]) + data[41:],  # a flipped byte: the CRC fails
        lambda data: gzip.compress(b'{"code": "x"}'),  # intact, but not a module's facts
    ],
)
def test_a_damaged_cache_entry_is_parsed_again_and_rewritten(package, tmp_path, monkeypatch, damage):
    monkeypatch.setenv("CODYRA_CACHE_DIR", str(tmp_path / "cache"))
    first = version_after(package, None)
    entries = sorted((tmp_path / "cache" / "code-versions").glob("*.json.gz"))
    intact = {entry: entry.read_bytes() for entry in entries}
    for entry in entries:
        entry.write_bytes(damage(entry.read_bytes()))
    assert version_after(package, None) == first
    assert {entry: entry.read_bytes() for entry in entries} == intact


def test_an_edit_gets_its_own_cache_entry_and_a_cache_that_cannot_be_written_is_skipped(package, tmp_path, monkeypatch):
    monkeypatch.setenv("CODYRA_CACHE_DIR", str(tmp_path / "cache"))
    first = version_after(package, None)
    folder = tmp_path / "cache" / "code-versions"
    before = set(folder.glob("*.json.gz"))
    edited = version_after(package, "helper.py", "VALUE = 2\n")
    assert edited != first and len(set(folder.glob("*.json.gz")) - before) == 1  # the edited helper's
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("CODYRA_CACHE_DIR", str(tmp_path / "file"))  # no folder can be made under a file
    assert version_after(package, None) == edited
