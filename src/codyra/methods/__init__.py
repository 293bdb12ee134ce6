"""Method registry: a method kind ``x`` is the module (or folder) ``codyra.methods.x`` exposing
``METHOD``, or a module of another distribution that registers it under the entry-point group
``codyra.methods`` (``x = "its_package.module"``; docs/adding-a-method.md, "A method in a package
of its own"). Private modules (``_routing``, ``_prompting``) hold helpers shared by methods."""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
from importlib import metadata

from codyra.methods.base import Method

_NOT_METHODS = {"base", "options"}
ENTRY_POINTS = "codyra.methods"


def _builtin_kinds() -> tuple[str, ...]:
    """The package's own method modules."""
    return _modules_on(tuple(__path__))


@functools.cache
def _modules_on(path: tuple[str, ...]) -> tuple[str, ...]:
    # scanned once per package path, not once per lookup: the DAG looks up every job's method
    return tuple(
        m.name for m in pkgutil.iter_modules(path) if m.name not in _NOT_METHODS and not m.name.startswith("_")
    )


def _source(entry: metadata.EntryPoint) -> str:
    dist = entry.dist.name if entry.dist is not None else "an unknown distribution"
    return f"distribution {dist} (entry point {entry.name} = {entry.value!r})"


@functools.cache
def _registered(path: tuple[str, ...]) -> tuple[metadata.EntryPoint, ...]:
    """The group's entry points of the distributions on ``path`` (``sys.path``: scanned once per path)."""
    return tuple(metadata.entry_points(group=ENTRY_POINTS))


def plugins() -> dict[str, metadata.EntryPoint]:
    """The method kinds other distributions register, by name; a name defined twice (by codyra
    and a distribution, or by two distributions) is an error naming both."""
    builtin, found = set(_builtin_kinds()), {}
    rename = (
        f'; rename one (the entry point\'s name under [project.entry-points."{ENTRY_POINTS}"] '
        "in its pyproject.toml) or uninstall it"
    )
    for entry in _registered(tuple(sys.path)):
        if entry.name in builtin:
            raise ValueError(
                f"method kind {entry.name!r} is defined twice: by codyra (codyra.methods.{entry.name}) "
                f"and by {_source(entry)}{rename}"
            )
        other = found.get(entry.name)
        if other is not None and other.value != entry.value:
            raise ValueError(
                f"method kind {entry.name!r} is defined twice: by {_source(other)} and by {_source(entry)}{rename}"
            )
        if ":" in entry.value:
            raise ValueError(f"{_source(entry)} must name a module exposing METHOD, not an object in it")
        found[entry.name] = entry
    return found


def plugin_modules() -> dict[str, str]:
    """The module of each registered kind, by name (without importing it)."""
    return {name: entry.value for name, entry in plugins().items()}


def available_kinds() -> list[str]:
    return sorted([*_builtin_kinds(), *plugins()])


def method_class(kind: str) -> type[Method]:
    registered = plugins()
    if kind in registered:
        entry = registered[kind]
        try:
            module = importlib.import_module(entry.value)
        except Exception as err:
            raise ImportError(
                f"method kind {kind!r} of {_source(entry)} failed to import ({type(err).__name__}: {err}); "
                "fix that distribution or uninstall it"
            ) from err
        cls = getattr(module, "METHOD", None)
        if not (isinstance(cls, type) and issubclass(cls, Method) and cls.kind == kind):
            raise ValueError(
                f"{_source(entry)}: module {entry.value} must set METHOD to its Method subclass, whose kind is {kind!r}"
            )
        return cls
    if kind not in _builtin_kinds():
        raise ValueError(f"unknown method kind {kind!r}; available: {', '.join(available_kinds())}")
    return importlib.import_module(f"{__name__}.{kind}").METHOD


def method_of(cfg: dict, name: str) -> type[Method]:
    """The class of the grid's method ``name`` (a key of ``method_configs``)."""
    if name not in cfg["method_configs"]:
        raise ValueError(f"unknown method {name!r}; configured: {', '.join(sorted(cfg['method_configs']))}")
    return method_class(cfg["method_configs"][name]["kind"])


def method_classes(cfg: dict, names) -> dict[str, type[Method]]:
    """The classes of the grid's methods ``names``, in their order, each looked up once: a job that
    reads several methods resolves them where it starts and hands the classes on."""
    return {name: method_of(cfg, name) for name in dict.fromkeys(names)}


def build_method(spec: dict) -> Method:
    return method_class(spec["kind"])(spec)


def reference_readers(cfg: dict) -> list[str]:
    """The grid's methods that distil on the reference data (``Method.reads_reference_data``): the
    config's methods (ablation variants included) and those the single-task studies run, their
    sweeps' variants being of their base method's kind."""
    studies = (cfg.get("single_task") or {}).get("studies") or {}
    named = [*cfg["methods"]]
    named += [m for study in studies.values() for m in study.get("methods", [])]
    named += [sweep["method"] for study in studies.values() for sweep in study.get("sweeps", [])]
    return [m for m, cls in method_classes(cfg, named).items() if cls.reads_reference_data]
