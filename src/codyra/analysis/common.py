"""What the analyses share: a run's stored updates and summaries, plain tables, figures.

Import-light (no torch at import): the CLI reads the analyses' names from the registry.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from codyra.store.io import atomic_write, write_text
from codyra.store.paths import tables_dir

if TYPE_CHECKING:
    from codyra.store.updates import TaskUpdate


def trained_methods(cfg: dict) -> list[str]:
    from codyra.methods import method_classes

    return [m for m, cls in method_classes(cfg, cfg["methods"]).items() if cls.trains]


def adapter_methods(cfg: dict) -> list[str]:
    """Trained methods whose updates are low-rank adapters, as their kind declares (``stores_low_rank_update``)."""
    from codyra.methods import method_classes

    classes = method_classes(cfg, cfg["methods"])
    return [m for m, cls in classes.items() if cls.trains and cls.stores_low_rank_update]


def norm_methods(cfg: dict) -> list[str]:
    """The grid's methods trained at a matched norm (kind lora with ``norm_target``: the norm-matched probe)."""
    return [m for m in cfg["methods"] if cfg["method_configs"][m].get("norm_target") is not None]


def run_updates(cfg: dict, method: str, seed: int) -> Iterator[TaskUpdate]:
    """The verified updates of tasks 1..N of a run, one at a time (full fine-tuning deltas are model-sized)."""
    from codyra.store.updates import stored_update

    for i in range(1, len(cfg["tasks"]) + 1):
        yield stored_update(cfg, method, seed, i)


def run_summaries(cfg: dict, method: str, seed: int) -> list[dict]:
    """The summary.json of tasks 1..N of a run, each checked against where it sits
    (:func:`codyra.store.updates.task_summary`); a missing one is an error naming the job to run."""
    from codyra.store.updates import task_summary

    return [task_summary(cfg, method, seed, i) for i in range(1, len(cfg["tasks"]) + 1)]


@dataclass
class PlainTable:
    """A table of preformatted cells (text, ``n/a``), for analyses whose cells are not mean +- std."""

    name: str
    caption: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # printed under the table (why a cell is n/a)

    def markdown(self) -> str:
        lines = [f"**{self.caption}**", "", "| " + " | ".join(self.columns) + " |", "|---" * len(self.columns) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines + [""] + [f"- {n}" for n in self.notes]) + "\n"

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        return out.getvalue()

    def latex(self, benchmark: str) -> str:
        from codyra.evaluation.table_formats import latex_label, latex_table, tex_text

        head = [" & ".join(tex_text(c) for c in self.columns) + r" \\"]
        body = [" & ".join(tex_text(c) for c in row) + r" \\" for row in self.rows]
        caption = " ".join([self.caption, *self.notes])
        return latex_table(latex_label(benchmark, self.name), caption, len(self.columns), head, body)

    def html(self) -> str:
        head = "".join(f"<th>{escape(c)}</th>" for c in self.columns)
        body = "\n".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        notes = "".join(f"<li>{escape(n)}</li>" for n in self.notes)
        return (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(self.name)}</title>'
            "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
            "td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
            f"</head><body>\n<p><b>{escape(self.caption)}</b></p>\n<table><tr>{head}</tr>\n{body}\n</table>"
            f"<ul>{notes}</ul></body></html>\n"
        )


def write_any_table(cfg: dict, table) -> None:
    """A ``codyra.evaluation.table_formats.Table`` (mean +- std over seeds) or a ``PlainTable`` in Markdown, CSV, LaTeX
    and HTML, in ``cfg``'s tables folder."""
    from codyra.evaluation.table_formats import Table, write_table

    out = tables_dir(cfg)
    if isinstance(table, Table):
        write_table(out, table, cfg["benchmark"])
        return
    for ext, text in (
        ("md", table.markdown()),
        ("csv", table.csv()),
        ("tex", table.latex(cfg["benchmark"])),
        ("html", table.html()),
    ):
        write_text(out / f"{table.name}.{ext}", text)


def fmt(value, decimals: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{decimals}f}"


def new_figure(*args, **kwargs):
    """A matplotlib figure on the non-interactive Agg backend (jobs have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, stem: Path) -> None:
    """``stem``.png and ``stem``.pdf, atomically; the figure is closed."""
    import matplotlib.pyplot as plt

    for ext in ("png", "pdf"):
        atomic_write(
            Path(f"{stem}.{ext}"), lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=150, bbox_inches="tight")
        )
    plt.close(fig)
