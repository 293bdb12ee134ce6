"""Typed method options: each method kind declares its options as a dataclass.

As PEFT types its tuner configs (``LoraConfig``), a method class names its options type
(``Method.Options``); the config is checked against it before any job runs. The fields'
annotations give the types (``int``, ``float``, ``str``, ``bool``, ``None``, ``list[...]``,
``Literal[...]`` and unions of these), ``option(...)`` adds choices and ranges, and a
``check`` method adds rules between fields. A new method kind gets unknown-key, type and
range errors naming the config key path without code of its own:

    @dataclass(frozen=True)
    class MyOptions(MethodOptions):
        rank: int = option(16, minimum=1)
        mode: str = option("fast", choices=("fast", "exact"))
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, Literal, Union

# keys every method config has, checked by the config schema: its kind and its train overrides
COMMON_KEYS = ("kind", "train")


def option(
    default,
    *,
    choices=None,
    minimum=None,
    maximum=None,
    exclusive_minimum=None,
    exclusive_maximum=None,
    min_items=None,
    doc="",
):
    """A dataclass field with a default and the bounds its value must keep."""
    bounds = {
        "choices": choices,
        "minimum": minimum,
        "maximum": maximum,
        "exclusive_minimum": exclusive_minimum,
        "exclusive_maximum": exclusive_maximum,
        "min_items": min_items,
    }
    return field(default=default, metadata={"doc": doc, **{k: v for k, v in bounds.items() if v is not None}})


@dataclass(frozen=True)
class MethodOptions:
    """The options of a method kind without any (zero-shot, full fine-tuning)."""

    def check(self) -> list[tuple[str, str]]:
        """Rules between fields: (key, message) for each broken one. Single values are checked already."""
        return []


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_name(tp) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is list:
        return f"a list of {_type_name(args[0])}" if args else "a list"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}.get(
        tp, str(tp)
    )


def _matches(value, tp) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(_matches(v, args[0]) for v in value) if args else isinstance(value, list)
    if tp is float:  # JSON numbers: 1 is a float option's 1.0; true is not a number
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _bound_errors(value, meta) -> str | None:
    if "choices" in meta and value not in meta["choices"]:
        return f"must be one of {', '.join(map(repr, meta['choices']))}, got {value!r}"
    if "min_items" in meta and isinstance(value, list) and len(value) < meta["min_items"]:
        return f"must have at least {meta['min_items']} item(s), got {value!r}"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    for key, ok, sign in (
        ("minimum", lambda b: value >= b, ">="),
        ("maximum", lambda b: value <= b, "<="),
        ("exclusive_minimum", lambda b: value > b, ">"),
        ("exclusive_maximum", lambda b: value < b, "<"),
    ):
        if key in meta and not ok(meta[key]):
            return f"must be {sign} {meta[key]}, got {value!r}"
    return None


def option_errors(cls: type[MethodOptions], spec: dict, *, kind: str) -> list[tuple[str, str]]:
    """(key, message) for every key of ``spec`` that ``cls`` does not accept, has the wrong type
    or leaves its range; ``kind`` and ``train`` are the schema's to check. ``spec`` may hold a
    subset of the options (a per-task override)."""
    known = {f.name: f for f in fields(cls)}
    hints = _hints(cls)
    errors = []
    for key, value in spec.items():
        if key in COMMON_KEYS:
            continue
        if key not in known:
            valid = ", ".join(sorted(known)) or "none besides kind and train"
            errors.append((key, f"method kind {kind!r} has no option {key!r}; its options: {valid}"))
        elif not _matches(value, hints[key]):
            errors.append((key, f"must be {_type_name(hints[key])}, got {value!r}"))
        elif (message := _bound_errors(value, known[key].metadata)) is not None:
            errors.append((key, message))
    return errors


def parse_options(cls: type[MethodOptions], spec: dict, *, kind: str) -> MethodOptions:
    """The options of a method config (defaults filled in); ValueError naming every bad key."""
    errors = option_errors(cls, spec, kind=kind)
    if not errors:
        options = cls(**{k: v for k, v in spec.items() if k not in COMMON_KEYS})
        errors = options.check()
    if errors:
        raise ValueError("; ".join(f"{key}: {message}" for key, message in errors))
    return options
