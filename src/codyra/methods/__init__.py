"""Method registry: a method kind ``x`` is the module ``codyra.methods.x`` exposing ``METHOD``."""

from __future__ import annotations

import importlib
import pkgutil

from codyra.methods.base import Method

_NOT_METHODS = {"base", "options"}


def available_kinds() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_METHODS and not m.name.startswith("_"))


def method_class(kind: str) -> type[Method]:
    if kind not in available_kinds():
        raise ValueError(f"unknown method kind {kind!r}; available: {', '.join(available_kinds())}")
    return importlib.import_module(f"{__name__}.{kind}").METHOD


def build_method(spec: dict) -> Method:
    return method_class(spec["kind"])(spec)
