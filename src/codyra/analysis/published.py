"""The paper's published numbers (``published.yaml``: every table, with its source line and caption)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

PUBLISHED = Path(__file__).with_name("published.yaml")


@cache
def published() -> dict:
    return yaml.safe_load(PUBLISHED.read_text())


def table(label: str) -> dict:
    tables = published()
    if label not in tables:
        raise KeyError(f"the paper has no table {label!r}; tables: {', '.join(tables)}")
    return tables[label]


def value(label: str, row: str, column: str, block: str = ""):
    """One published cell: a number, [mean, std], None ("--") or text; KeyError naming what is missing."""
    t = table(label)
    if column not in t["columns"]:
        raise KeyError(f"table {label} has no column {column!r}; columns: {t['columns']}")
    for r in t["rows"]:
        if r["row"] == row and r["block"] == block:
            return r["values"][t["columns"].index(column)]
    raise KeyError(f"table {label} has no row {row!r} in block {block!r}")


def mean_std(cell) -> tuple[float, float | None] | None:
    """(mean, published std or None) of a numeric cell; None for "--" and text."""
    if isinstance(cell, list):
        return float(cell[0]), float(cell[1])
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        return float(cell), None
    return None
