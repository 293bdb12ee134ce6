"""The paper's published numbers (``published.yaml``: every table, with its source line, caption
and the benchmark it was measured on; the paper's benchmarks with their settings)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

PUBLISHED = Path(__file__).with_name("published.yaml")


@cache
def _document() -> dict:
    return yaml.safe_load(PUBLISHED.read_text())


def published() -> dict:
    """Table label -> table."""
    return _document()["tables"]


def benchmarks() -> dict:
    """The paper's benchmarks: name -> {data, fewshot, tasks (the stream, in the paper's column names), ...}."""
    return _document()["benchmarks"]


def table(label: str) -> dict:
    tables = published()
    if label not in tables:
        raise KeyError(f"the paper has no table {label!r}; tables: {', '.join(tables)}")
    return tables[label]


def tables_of(benchmark: str) -> list[str]:
    """The labels of the tables measured on ``benchmark``, in the paper's order."""
    return [label for label, t in published().items() if t["benchmark"] == benchmark]


def _row(label: str, row: str, column: str, block: str) -> tuple[dict, dict]:
    t = table(label)
    if column not in t["columns"]:
        raise KeyError(f"table {label} has no column {column!r}; columns: {t['columns']}")
    for r in t["rows"]:
        if r["row"] == row and r["block"] == block:
            return t, r
    raise KeyError(f"table {label} has no row {row!r} in block {block!r}")


def value(label: str, row: str, column: str, block: str = ""):
    """One published cell: a number, [mean, std], None ("--") or text; KeyError naming what is missing."""
    t, r = _row(label, row, column, block)
    return r["values"][t["columns"].index(column)]


def inconsistency(label: str, row: str, column: str, block: str = "") -> str | None:
    """Where the paper contradicts itself at this cell (the row's ``inconsistent`` note), else None."""
    note = _row(label, row, column, block)[1].get("inconsistent")
    return note.get(column) if isinstance(note, dict) else note


def mean_std(cell) -> tuple[float, float | None] | None:
    """(mean, published std or None) of a numeric cell; None for "--" and text."""
    if isinstance(cell, list):
        return float(cell[0]), float(cell[1])
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return float(cell), None
    return None
