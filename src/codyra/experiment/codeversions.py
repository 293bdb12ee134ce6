"""Code versions: a hash of the code that determines a job's output.

A rule's params carry the version of its job's entry module (``codyra.experiment.jobs.JOBS``), so
Snakemake reruns a job when that code changes (params are a default rerun trigger), and
only then: editing ``codyra/evaluation/tables.py`` reruns the tables, not the training.

The code of an entry module is the closure of the ``codyra`` modules it imports, found by
a static walk of the source (imports inside functions included, ``if TYPE_CHECKING:``
blocks excluded; a parent package is included since Python runs it, but followed only
through its module-level imports: its functions run only for a module that imports it by
name), plus the data files (model configs, the config schema) of every package in the
closure. A module that
imports by name at run time (``importlib.import_module``, a registry such as
``codyra.methods``) depends on every module of its package. ``codyra.experiment.config`` is hashed
but its imports are not followed: it imports the method kinds, placement vocabularies and
dataset catalogs only to validate a config, and a job receives the validated values, which
its settings fingerprint holds (so editing a method does not rerun the mini pretraining).
Third-party code is not hashed: the environment pins it.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = "codyra"
ROOT = Path(__file__).resolve().parents[1]  # src/codyra
VALIDATION_ONLY = frozenset({"codyra.experiment.config"})  # hashed, imports not followed (see above)


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The source file of module ``name`` (``codyra.x.y``), or None if it is not a module of the package."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = root.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _nodes(tree: ast.AST, module_level: bool):
    """Every node, skipping the bodies of ``if TYPE_CHECKING:`` (never run) and, for
    ``module_level``, of functions (run only when called)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _is_type_checking(node):
            stack.extend(node.orelse)
        elif not (module_level and isinstance(node, _FUNCTIONS)):
            stack.extend(ast.iter_child_nodes(node))


@cache  # every module is parsed once per process, whichever entries share it
def direct_imports(name: str, root: Path = ROOT, module_level: bool = False) -> frozenset[str]:
    """The ``codyra`` modules module ``name`` imports (statically), itself excluded;
    ``module_level``: only the imports that run when it is imported."""
    path = module_file(name, root)
    package = _package(name, root)
    found: set[str] = set()
    dynamic = False
    for node in _nodes(ast.parse(path.read_text(), filename=str(path)), module_level):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            dynamic = dynamic or called in ("import_module", "__import__")
    if dynamic:
        found.update(_package_modules(package, root))
    return frozenset({m for m in found if module_file(m, root) is not None} - {name})


def _package_modules(package: str, root: Path) -> set[str]:
    folder = root.joinpath(*package.split(".")[1:])
    return {
        ".".join([package, *p.relative_to(folder).with_suffix("").parts]).removesuffix(".__init__")
        for p in folder.rglob("*.py")
        if "__pycache__" not in p.parts
    }


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


@cache
def module_closure(entry: str, root: Path = ROOT) -> frozenset[str]:
    """``entry`` and every ``codyra`` module it imports, directly or not."""
    if module_file(entry, root) is None:
        raise ValueError(f"no module {entry} under {root}: fix the entry of its job in codyra.experiment.jobs.JOBS")
    imported, as_parent = set(), set()  # followed fully / through module-level imports only
    todo = [(entry, False)]
    while todo:
        name, parent = todo.pop()
        if name in imported or (parent and name in as_parent):
            continue
        (as_parent if parent else imported).add(name)
        todo.extend((p, True) for p in _parents(name) if module_file(p, root))
        if name not in VALIDATION_ONLY:
            todo.extend((m, False) for m in direct_imports(name, root, module_level=parent))
    return frozenset(imported | as_parent)


def _package(name: str, root: Path) -> str:
    return name if module_file(name, root).name == "__init__.py" else name.rpartition(".")[0]


@cache
def _data_file_owners(root: Path) -> tuple[tuple[Path, str], ...]:
    """Every non-Python file with its nearest enclosing package (a folder with Python modules,
    namespace packages included)."""
    owned = []
    for path in root.rglob("*"):
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        folder = path.parent
        while folder != root and not any(folder.glob("*.py")):
            folder = folder.parent
        owned.append((path, ".".join([PACKAGE, *folder.relative_to(root).parts])))
    return tuple(owned)


@cache
def code_version(*entries: str, root: Path = ROOT) -> str:
    """Short hash of the source of the ``entries``' closure and its packages' data files."""
    modules = frozenset().union(*(module_closure(entry, root) for entry in entries))
    packages = {_package(m, root) for m in modules}
    data = {path for path, owner in _data_file_owners(root) if owner in packages}
    files = sorted({module_file(m, root) for m in modules} | data)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
