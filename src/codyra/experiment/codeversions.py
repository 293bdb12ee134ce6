"""Code versions: a hash of the code that determines a job's output.

A rule's params carry the version of its job (``codyra.experiment.jobs.job_version``), so
Snakemake reruns a job when that code changes (params are a default rerun trigger), and
only then: editing ``codyra/evaluation/tables.py`` reruns the tables, not the training.

What is hashed is the code, not its text: each module's syntax tree without docstrings (nor
any other bare string statement) and without comments or formatting, which the tree does not
hold. A comment, a docstring or a reflowed line reruns nothing; the one reader of a docstring
is the CLI's help text. (The tree's dump depends on the Python version, which the environment
pins, like all third-party code, which is not hashed.)

A job's code is the closure of the ``codyra`` modules its entry modules import, found by a
static walk of the source (imports inside functions included, ``if TYPE_CHECKING:`` blocks
excluded; a parent package is included since Python runs it, but followed only through its
module-level imports: its functions run only for a module that imports it by name), plus the
data files (model configs, the config schema) of every package in the closure, plus the code
of the method kinds the job runs. Left out of the walk, neither hashed nor followed:

- modules that cannot change a result (``NOT_RESULTS``): the MLflow mirror and its sync
  (``codyra.tracking``: they copy results elsewhere, best-effort) and the per-job logs and
  progress bars (``codyra.progress``), and this module: its one output, a version, is a rule
  param itself, so a change here that changes a version reruns those jobs already, and one that
  changes none (a faster way to the same versions) reruns nothing. The CLI's argument parsing
  (``codyra.cli``) is no job's entry and no entry imports it;
- the method kinds, unless the job runs them. A kind ``x`` is the module or package
  ``codyra.methods.x`` that exposes ``METHOD`` (the registry's contract), or the module that
  another distribution registers as ``x`` (entry-point group ``codyra.methods``), whose
  top-level package is hashed like ``codyra`` (its modules and data files). Its code is the
  closure of that module: its class, the modules of the kinds it builds on (``lwf_vr`` ->
  ``lwf`` -> ``full``, and ``base``), its private helpers (``methods/_routing``). The
  shared code never brings a kind in: the registry's import by name loads the kind of the
  job's method, and a static import of a kind from shared code (a family service a method
  calls through its context) runs for that method only. So editing LwF reruns LwF's jobs and
  none of CoDyRA's, editing the training loop reruns every training, and a new method module
  that no config names reruns nothing. Which kinds a job runs, its caller says: a training
  its method's (``train_fingerprint``); a row of cells those of the updates it reads, whose
  settings hold their training's version (a method that never trains: its stand-in for
  them, ``untrained_settings``); summaries, tables and analyses those of the methods they
  cover.

Any other module that imports by name at run time (``importlib.import_module``) depends on
every module of its package. ``codyra.experiment.config`` and ``codyra.experiment.validation``
are hashed but their imports are not followed: they import the method kinds, placement
vocabularies and dataset catalogs only to validate a config, and a job receives the validated
values, which its settings fingerprint holds (so editing a method does not rerun the mini
pretraining).

Parsing is the cost of a version (about a second for the training's closure, paid by every job and
every Snakemake start), so what a module's source yields (its normalised tree's dump, its imports,
whether it binds ``METHOD``) is kept across processes in ``cache_folder()``, one gzip file per
module source, named by the hash of its bytes, of the Python version and of this module's own
code: an edit, another Python or a change here makes another name, never a stale hit. An entry
that fails its gzip CRC or does not hold those facts is parsed again and rewritten; a cache that
cannot be written is skipped.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.util
import json
import os
import sys
import zlib
from functools import cache
from pathlib import Path

from codyra.store.io import atomic_write

PACKAGE = "codyra"
ROOT = Path(__file__).resolve().parents[1]  # src/codyra
VALIDATION_ONLY = frozenset({"codyra.experiment.config", "codyra.experiment.validation"})  # hashed, not followed
NOT_RESULTS = (
    "codyra.tracking",
    "codyra.progress",
    "codyra.experiment.codeversions",
)  # packages and modules neither hashed nor followed (see above)
REGISTRY = "codyra.methods"  # its modules and packages that expose METHOD are the method kinds
CACHE_ENV = "CODYRA_CACHE_DIR"
FACTS = ("code", "imports", "module_level_imports", "binds_method")  # what a module's entry holds


@cache
def _plugins() -> dict[str, str]:
    """The module of each method kind another distribution registers (``codyra.methods.plugins``)."""
    from codyra.methods import plugin_modules

    return plugin_modules()


@cache
def _plugin_roots() -> dict[str, Path]:
    """The top-level package (folder) or module (file) of each registered kind's module."""
    roots = {}
    for module in _plugins().values():
        top = module.split(".")[0]
        spec = importlib.util.find_spec(top)
        if spec is None:
            raise ValueError(f"method module {module} is registered but {top} is not importable: reinstall it")
        roots[top] = Path(spec.submodule_search_locations[0]) if spec.submodule_search_locations else Path(spec.origin)
    return roots


def _roots(root: Path) -> dict[str, Path]:
    """The packages whose code is hashed: ``codyra`` at ``root`` and, for the installed package,
    those of the method kinds other distributions register (hashed like a kind of codyra's)."""
    return {PACKAGE: root, **(_plugin_roots() if root == ROOT else {})}


@cache  # asked for every import of every module: a stat per candidate file otherwise
def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The source file of module ``name`` (``codyra.x.y``, or a registered kind's), or None if it
    is not a module of a hashed package."""
    parts = name.split(".")
    top = _roots(root).get(parts[0])
    if top is None:
        return None
    if top.is_file():  # a registered kind that is a single top-level module
        return top if len(parts) == 1 else None
    registry = REGISTRY.split(".")
    if parts[: len(registry)] == registry and len(parts) > len(registry):
        bases = [folder.joinpath(*parts[len(registry) :]) for folder in _registry_folders(root)]
    else:
        bases = [top.joinpath(*parts[1:])]
    for base in bases:
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def _registry_folders(root: Path) -> list[Path]:
    """The registry's folders: under ``root``, plus those added to the installed package's
    ``__path__`` (a method kind that lives outside src/codyra is hashed like one inside)."""
    folders = [root.joinpath(*REGISTRY.split(".")[1:])]
    if root == ROOT:
        import codyra.methods

        folders += [Path(p) for p in codyra.methods.__path__ if Path(p) not in folders]
    return folders


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


@cache  # every module's imports are resolved once per process, whichever entries share it
def direct_imports(name: str, root: Path = ROOT, module_level: bool = False) -> frozenset[str]:
    """The ``codyra`` modules module ``name`` imports (statically), itself excluded;
    ``module_level``: only the imports that run when it is imported. An import by name at run
    time brings the whole package, but for the method registry's (the job's kinds, see above)."""
    package = _package(name, root)
    imports = _facts(module_file(name, root))["module_level_imports" if module_level else "imports"]
    found: set[str] = set()
    for module, level, names in imports["statements"]:
        if level:
            anchor = package.split(".")[: len(package.split(".")) - level + 1]
            module = ".".join([*anchor, *([module] if module else [])])
        found.add(module)
        found.update(f"{module}.{alias}" for alias in names)  # `from pkg import submodule`
    if imports["by_name"] and package != REGISTRY:
        found.update(_package_modules(package, root))
    return frozenset({m for m in found if module_file(m, root) is not None} - {name})


def _imports(tree: ast.Module, module_level: bool) -> dict:
    """The import statements of ``tree`` as (module, level, names) (``import a.b``: ("a.b", 0, [])),
    and whether it imports by name at run time (``import_module``, ``__import__``)."""
    statements, by_name = [], False
    for node in _nodes(tree, module_level):
        if isinstance(node, ast.Import):
            statements += [(alias.name, 0, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            statements.append((node.module or "", node.level, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            by_name = by_name or called in ("import_module", "__import__")
    return {"statements": statements, "by_name": by_name}


def _package_modules(package: str, root: Path) -> set[str]:
    folder = _roots(root)[package.split(".")[0]].joinpath(*package.split(".")[1:])
    return {
        ".".join([package, *p.relative_to(folder).with_suffix("").parts]).removesuffix(".__init__")
        for p in folder.rglob("*.py")
        if "__pycache__" not in p.parts
    }


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _exposes_method(path: Path) -> bool:
    """Whether the module at ``path`` binds ``METHOD`` at module level (assigned or imported)."""
    return _facts(path)["binds_method"]


def _binds_method(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "METHOD" for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "METHOD":
            return True
        if isinstance(node, ast.ImportFrom) and any((alias.asname or alias.name) == "METHOD" for alias in node.names):
            return True
    return False


def method_kinds(root: Path = ROOT) -> frozenset[str]:
    """The method kinds: the modules and packages directly in the registry that expose ``METHOD``,
    and (for the installed package) those other distributions register."""
    return _kinds_in(tuple(_registry_folders(root))) | (frozenset(_plugins()) if root == ROOT else frozenset())


def _kind_module(kind: str, root: Path) -> str:
    return _plugins()[kind] if root == ROOT and kind in _plugins() else f"{REGISTRY}.{kind}"


@cache
def _kinds_in(folders: tuple[Path, ...]) -> frozenset[str]:
    kinds = set()
    for folder in folders:
        for path in folder.iterdir():
            source = path / "__init__.py" if path.is_dir() else path
            if path.name != "__init__.py" and source.suffix == ".py" and source.is_file() and _exposes_method(source):
                kinds.add(path.stem if path.suffix == ".py" else path.name)
    return frozenset(kinds)


def _kind(name: str, root: Path) -> str | None:
    """The method kind module ``name`` belongs to, if any."""
    prefix = f"{REGISTRY}."
    if not name.startswith(prefix):  # a registered kind's module, or a module in it
        plugins = _plugins() if root == ROOT else {}
        return next((k for k, m in plugins.items() if name == m or name.startswith(f"{m}.")), None)
    kind = name.removeprefix(prefix).split(".")[0]
    return kind if kind in method_kinds(root) else None


def _not_results(name: str) -> bool:
    return any(name == m or name.startswith(f"{m}.") for m in NOT_RESULTS)


@cache
def module_closure(entry: str, root: Path = ROOT) -> frozenset[str]:
    """``entry`` and every ``codyra`` module it imports, directly or not, but for modules that
    cannot change a result and for method kinds imported by a module of no kind (see above)."""
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
        if name in VALIDATION_ONLY:
            continue
        in_kind = _kind(name, root) is not None
        todo.extend(
            (m, False)
            for m in direct_imports(name, root, module_level=parent)
            if not _not_results(m) and (in_kind or _kind(m, root) is None)
        )
    return frozenset(imported | as_parent)


def _package(name: str, root: Path) -> str:
    return name if module_file(name, root).name == "__init__.py" else name.rpartition(".")[0]


@cache
def _data_file_owners(root: Path, package: str = PACKAGE) -> tuple[tuple[Path, str], ...]:
    """Every non-Python file under the folder ``root`` of ``package`` with its nearest enclosing
    package (a folder with Python modules, namespace packages included)."""
    owned = []
    for path in root.rglob("*") if root.is_dir() else ():
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        folder = path.parent
        while folder != root and not any(folder.glob("*.py")):
            folder = folder.parent
        owned.append((path, ".".join([package, *folder.relative_to(root).parts])))
    return tuple(owned)


def cache_folder() -> Path:
    """Where modules' facts are kept across processes: ``$CODYRA_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/codyra``, else ``~/.cache/codyra``; in its ``code-versions`` folder."""
    base = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "codyra"
    return Path(base) / "code-versions"


@cache
def _salt() -> bytes:
    """What a module's facts depend on besides its source: the Python version (the tree's dump
    differs between versions) and this module's code (which derives them)."""
    return hashlib.sha256(sys.version.encode() + b"\0" + Path(__file__).read_bytes()).digest()


@cache  # every module is read once per process, for its imports, its METHOD and its code
def _facts(path: Path) -> dict:
    """What the module at ``path`` yields (``FACTS``): from the cache when an intact entry holds
    its source's, else parsed (and cached)."""
    source = path.read_bytes()
    key = hashlib.sha256(_salt() + source).hexdigest()
    entry = cache_folder() / f"{key}.json.gz"
    try:
        facts = json.loads(gzip.decompress(entry.read_bytes()))
        if isinstance(facts, dict) and sorted(facts) == sorted(FACTS):
            return facts
    except (OSError, EOFError, ValueError, zlib.error):  # absent, or a failed CRC, a truncated or unreadable file
        pass
    tree = _without_bare_strings(ast.parse(source, filename=str(path)))
    facts = {
        "code": ast.dump(tree),
        "imports": _imports(tree, module_level=False),
        "module_level_imports": _imports(tree, module_level=True),
        "binds_method": _binds_method(tree),
    }
    text = json.dumps(facts)
    try:
        atomic_write(entry, lambda tmp: Path(tmp).write_bytes(gzip.compress(text.encode(), mtime=0)))
    except OSError:  # a read-only or full cache folder: parsed again next time
        pass
    return json.loads(text)  # as an entry reads back (lists, not tuples)


def normalised_source(source: str) -> str:
    """The code of a module's ``source``: its syntax tree, without docstrings and other bare
    strings (statements that do nothing), comments and formatting (which the tree never holds)."""
    return ast.dump(_without_bare_strings(ast.parse(source)))


def _without_bare_strings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and any(isinstance(s, ast.stmt) for s in value):
                setattr(node, field, [s for s in value if not _is_bare_string(s)])
    return tree


def _is_bare_string(statement: ast.stmt) -> bool:
    value = getattr(statement, "value", None)
    return isinstance(statement, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)


@cache
def _file_code(path: Path) -> bytes:
    """What a file contributes to a version: a module's normalised source, a data file's bytes."""
    return _facts(path)["code"].encode() if path.suffix == ".py" else path.read_bytes()


@cache
def code_version(*entries: str, methods: tuple[str, ...] = (), root: Path = ROOT) -> str:
    """Short hash of the code of the ``entries``' closure and of the method kinds ``methods``,
    with their packages' data files."""
    kinds = method_kinds(root)
    unknown = sorted(set(methods) - kinds)
    if unknown:
        raise ValueError(f"no method kind {', '.join(unknown)} in {REGISTRY}; kinds: {', '.join(sorted(kinds))}")
    starts = [*entries, *(_kind_module(kind, root) for kind in methods)]
    modules = frozenset().union(*(module_closure(start, root) for start in starts))
    packages = {_package(m, root) for m in modules}
    # labelled by module name (a method kind may live outside root) and a data file's path in
    # root (in a registered kind's package: prefixed by the package's name)
    files = {m: module_file(m, root) for m in modules}
    for package, folder in _roots(root).items():
        prefix = "" if package == PACKAGE else f"{package}/"
        files |= {
            prefix + path.relative_to(folder).as_posix(): path
            for path, owner in _data_file_owners(folder, package)
            if owner in packages
        }
    digest = hashlib.sha256()
    for label, path in sorted(files.items()):
        digest.update(label.encode() + b"\0" + _file_code(path) + b"\0")
    return digest.hexdigest()[:16]
