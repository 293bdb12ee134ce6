"""Method registry: a method kind ``x`` is the module (or folder) ``codyra.methods.x`` exposing
``METHOD``; private modules (``_routing``, ``_prompting``) hold helpers shared by methods."""

from __future__ import annotations

import importlib
import pkgutil

from codyra.methods.base import Method

_NOT_METHODS = {"base", "options"}


def available_kinds() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_METHODS and not m.name.startswith("_")
    )


def method_class(kind: str) -> type[Method]:
    if kind not in available_kinds():
        raise ValueError(f"unknown method kind {kind!r}; available: {', '.join(available_kinds())}")
    return importlib.import_module(f"{__name__}.{kind}").METHOD


def method_of(cfg: dict, name: str) -> type[Method]:
    """The class of the grid's method ``name`` (a key of ``method_configs``)."""
    if name not in cfg["method_configs"]:
        raise ValueError(f"unknown method {name!r}; configured: {', '.join(sorted(cfg['method_configs']))}")
    return method_class(cfg["method_configs"][name]["kind"])


def build_method(spec: dict) -> Method:
    return method_class(spec["kind"])(spec)
