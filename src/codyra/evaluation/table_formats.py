"""A table of per-seed values and its four renderings: Markdown, CSV, LaTeX and HTML.

A cell is a list of per-seed values, printed as mean +- sample standard deviation (ddof = 1; 0 with
one seed). The best mean of each column (or row) within a block and group is marked: bold in
Markdown, LaTeX and HTML, ``best = true`` in the CSV; a reference row never takes it. A negative
number is printed with a minus sign (U+2212 in Markdown and HTML, ``$-$`` in LaTeX); the CSV stays
machine-readable: ASCII ``-``, each mean and std rounded to ``CSV_EXTRA_DECIMALS`` more decimals
than the table prints. The LaTeX is a ``table`` (or ``table*``) with a caption and the label
``tab:<benchmark>-<table>``, its tabular in booktabs rules, shrunk to the line width where it is
wider; the file's first lines name the packages it needs. The paper's tables built on it are
``codyra.evaluation.tables``; the analyses' tables too (``codyra.analysis``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np

from codyra.store.io import write_text


@dataclass
class Table:
    name: str
    caption: str
    columns: list[str]
    # rows of (block, label, cells); a cell is a list of per-seed values or None (not defined)
    rows: list[tuple[str, str, list[list[float] | None]]] = field(default_factory=list)
    higher_is_better: dict[str, bool] = field(default_factory=dict)  # per column (or row label); default True
    best_along: str = "column"  # "row" when the columns are methods (TRACE's Table 2)
    mark_best: bool = True  # False where no value is "best": one method's matrix, sizes, norms
    row_header: str = ""  # what the rows are (the head of the label column), e.g. "Method"
    decimals: int = 1
    # method group of a row label (best_along column) or of a column (best_along row); {}: no groups
    groups: dict[str, str] = field(default_factory=dict)
    # row labels (best_along column) or columns (best_along row) of the zero-shot reference: never best
    reference: set[str] = field(default_factory=set)
    # the config method of a row label or column (the CSV's ``method``); {}: the label itself
    methods: dict[str, str] = field(default_factory=dict)
    # (row label, why) of each method the grid left out (config key left_out): a line under the table
    left_out: list[tuple[str, str]] = field(default_factory=list)

    def notes(self) -> list[str]:
        return [f"Left out: {label}: {why}" for label, why in self.left_out]

    def stats(self):
        """(block, label, [(mean, std, n) or None per column])."""
        for block, label, cells in self.rows:
            yield block, label, [None if c is None else _mean_std(c) for c in cells]

    def best(self) -> set[tuple[str, str, int]]:
        """(block, label, column) of the best mean per column within each block (or per row)."""
        marked = set()
        if not self.mark_best:
            return marked
        rows = list(self.stats())
        if self.best_along == "row":
            for block, label, stats in rows:
                for group in dict.fromkeys(self.group_of(c) for c in self.columns):
                    means = [
                        (s[0], col)
                        for col, s in enumerate(stats)
                        if s is not None
                        and self.group_of(self.columns[col]) == group
                        and self.columns[col] not in self.reference
                    ]
                    if len(means) > 1:
                        target = (max if self.higher_is_better.get(label, True) else min)(m for m, _ in means)
                        marked.update((block, label, col) for m, col in means if np.isclose(m, target))
            return marked
        for block, group in dict.fromkeys((b, self.group_of(label)) for b, label, _ in rows):
            for col, name in enumerate(self.columns):
                means = [
                    (s[col][0], label)
                    for b, label, s in rows
                    if b == block
                    and self.group_of(label) == group
                    and s[col] is not None
                    and label not in self.reference
                ]
                if len(means) < 2:
                    continue
                target = (max if self.higher_is_better.get(name, True) else min)(m for m, _ in means)
                marked.update((block, label, col) for m, label in means if np.isclose(m, target))
        return marked

    def group_of(self, name: str) -> str:
        return self.groups.get(name, "")

    def row_groups(self):
        """(block, label, stats, group heading or None): the heading where a row group starts."""
        current = None
        for block, label, stats in self.stats():
            group = self.group_of(label) if self.best_along == "column" else ""
            start = (block, group)
            yield block, label, stats, group if group and start != current else None
            current = start


def defined(values: list) -> list[float] | None:
    """The per-seed values of a cell, or None where the metric is undefined (e.g. Transfer of task 1)."""
    return None if any(v is None for v in values) else values


def _mean_std(values: list[float]) -> tuple[float, float, int]:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0, len(arr)


MINUS = "\u2212"  # the minus sign of displayed numbers (LaTeX: $-$, see tex_text)


def _number(value: float, decimals: int) -> str:
    """``value`` printed to ``decimals``, a negative one with a minus sign; one that rounds to 0 without a sign."""
    text = f"{value:.{decimals}f}"
    return text.lstrip("-") if float(text) == 0 else text.replace("-", MINUS)


def _fmt(stat, decimals: int = 1) -> str:
    if stat is None:
        return "--"
    mean, std, n = stat
    return _number(mean, decimals) if n == 1 else f"{_number(mean, decimals)} ± {_number(std, decimals)}"


def to_markdown(table: Table) -> str:
    best = table.best()
    lines = [
        f"**{table.caption}**",
        "",
        f"| {table.row_header} | " + " | ".join(table.columns) + " |",
        "|---" * (len(table.columns) + 1) + "|",
    ]
    if table.best_along == "row" and table.groups:
        lines.append("| *group* | " + " | ".join(table.group_of(c) for c in table.columns) + " |")
    current = None
    for block, label, stats, group in table.row_groups():
        if block and block != current:
            lines.append(f"| *{block}* |" + " |" * len(table.columns))
            current = block
        if group:
            lines.append(f"| ***{group}*** |" + " |" * len(table.columns))
        cells = [
            f"**{_fmt(s, table.decimals)}**" if (block, label, c) in best else _fmt(s, table.decimals)
            for c, s in enumerate(stats)
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ([""] + [f"*{note}*" for note in table.notes()]) if table.left_out else []
    return "\n".join(lines) + "\n"


# a hyphen-minus that is a number's sign: before a digit, not after a word (``lora-r16``, ``Llama-2``, dates)
_SIGN = re.compile(r"(?<![\w.-])-(?=\.?\d)")


def tex_text(text: str) -> str:
    for char, escaped in (
        ("\\", r"\textbackslash{}"),
        ("_", r"\_"),
        ("%", r"\%"),
        ("&", r"\&"),
        ("#", r"\#"),
        ("±", r"$\pm$"),  # one notation for mean ± std, in cells and captions alike
        ("†", r"$^\dagger$"),  # the paper's dagger (a method that predicts the domain)
        ("<", "$<$"),  # text-mode < and > are other glyphs in pdflatex's default font encoding
        (">", "$>$"),
        (MINUS, "$-$"),  # a math minus: set in every font, no package needed
    ):
        text = text.replace(char, escaped)
    return _SIGN.sub("$-$", text)


LATEX_PACKAGES = ("booktabs", "adjustbox", "xcolor")


def latex_table(
    label: str,
    caption: str,
    columns: int,
    head: list[str],
    body: list[str],
    notes=(),
    wide: bool = False,
    remark: str = "",
) -> str:
    """A LaTeX ``table`` (``wide``: a ``table*``, across both columns of a two-column paper): caption
    and label above, a booktabs tabular of ``columns`` columns (the first left-aligned), shrunk to
    the line width when it is wider (never enlarged), ``notes`` below it. The first line names the
    packages it needs, the second the ``remark`` (a comment for the author, where given)."""
    packages = ", ".join(rf"\usepackage{{{p}}}" for p in LATEX_PACKAGES)
    env = "table*" if wide else "table"
    return (
        "\n".join(
            [
                f"% needs {packages}",
                *([f"% {remark}"] if remark else []),
                rf"\begin{{{env}}}[t]",
                r"\centering",
                rf"\caption{{{tex_text(caption)}}}",
                rf"\label{{{label}}}",
                r"\begin{adjustbox}{max width=\linewidth}",
                r"\begin{tabular}{l" + "c" * (columns - 1) + "}",
                r"\toprule",
                *head,
                r"\midrule",
                *body,
                r"\bottomrule",
                r"\end{tabular}",
                r"\end{adjustbox}",
                *(rf"\par\footnotesize {tex_text(note)}" for note in notes),
                rf"\end{{{env}}}",
            ]
        )
        + "\n"
    )


def latex_label(benchmark: str, name: str) -> str:
    return f"tab:{benchmark}-{name}"


def _grey(text: str) -> str:
    return rf"\textcolor{{gray}}{{{text}}}"


def to_latex(table: Table, benchmark: str, wide: bool = False, remark: str = "") -> str:
    best = table.best()
    width = len(table.columns) + 1
    head = [tex_text(table.row_header) + " & " + " & ".join(tex_text(c) for c in table.columns) + r" \\"]
    if table.best_along == "row" and table.groups:
        head.insert(0, "Group & " + " & ".join(tex_text(table.group_of(c)) for c in table.columns) + r" \\")
    body, current = [], None
    for block, label, stats, group in table.row_groups():
        if block and block != current:
            if current is not None:
                body.append(r"\midrule")
            body.append(rf"\multicolumn{{{width}}}{{l}}{{\emph{{{tex_text(block)}}}}} \\")
            current = block
        if group:
            body.append(rf"\multicolumn{{{width}}}{{l}}{{\textbf{{\textit{{{tex_text(group)}}}}}}} \\")
        cells = [tex_text(_fmt(s, table.decimals)) for s in stats]
        cells = [rf"\textbf{{{c}}}" if (block, label, k) in best else c for k, c in enumerate(cells)]
        if table.best_along == "row":
            cells = [_grey(c) if table.columns[k] in table.reference else c for k, c in enumerate(cells)]
        row = [tex_text(label), *cells]
        if label in table.reference and table.best_along == "column":
            row = [_grey(c) for c in row]
        body.append(" & ".join(row) + r" \\")
    label = latex_label(benchmark, table.name)
    return latex_table(label, table.caption, width, head, body, table.notes(), wide, remark)


def to_html(table: Table) -> str:
    """A standalone page (the Snakemake report shows HTML results inline; Markdown, CSV and LaTeX only as downloads)."""
    best = table.best()
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    rows, current = [], None
    if table.best_along == "row" and table.groups:
        rows.append(
            "<tr><th><em>group</em></th>"
            + "".join(f"<td>{escape(table.group_of(c))}</td>" for c in table.columns)
            + "</tr>"
        )
    for block, label, stats, group in table.row_groups():
        if block and block != current:
            rows.append(f'<tr class="block"><td colspan="{len(table.columns) + 1}"><em>{escape(block)}</em></td></tr>')
            current = block
        if group:
            rows.append(
                f'<tr class="block"><td colspan="{len(table.columns) + 1}"><b><em>{escape(group)}</em></b></td></tr>'
            )
        cells = "".join(
            f"<td{_html_class(table, label, c)}><b>{_fmt(s, table.decimals)}</b></td>"
            if (block, label, c) in best
            else f"<td{_html_class(table, label, c)}>{_fmt(s, table.decimals)}</td>"
            for c, s in enumerate(stats)
        )
        rows.append(f"<tr><th{_html_class(table, label)}>{escape(label)}</th>{cells}</tr>")
    style = (
        "body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}tr.block td{text-align:left}"
        ".reference{color:#888}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(table.name)}</title>'
        f"<style>{style}</style></head><body>\n"
        f"<p><b>{escape(table.caption)}</b></p>\n<table><tr><th>{escape(table.row_header)}</th>{head}</tr>\n"
        + "\n".join(rows)
        + "\n</table>"
        + "".join(f"\n<p><em>{escape(note)}</em></p>" for note in table.notes())
        + "</body></html>\n"
    )


def _html_class(table: Table, label: str, column: int | None = None) -> str:
    """` class="reference"` on the zero-shot reference's cells (greyed out), else nothing."""
    along_row = table.best_along == "row"
    if along_row and column is None:
        return ""
    name = table.columns[column] if along_row else label
    return ' class="reference"' if name in table.reference else ""


CSV_EXTRA_DECIMALS = 3  # the CSV's values: rounded to this many more decimals than the table prints


def _csv_stat(stat: tuple[float, float, int], decimals: int) -> tuple[float, float, int]:
    """(mean, std, n) rounded for the CSV: no float noise (29.399999999999995 -> 29.4), no negative zero."""
    mean, std, n = stat
    return round(mean, decimals + CSV_EXTRA_DECIMALS) + 0.0, round(std, decimals + CSV_EXTRA_DECIMALS) + 0.0, n


def to_csv(table: Table) -> str:
    best = table.best()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    grouped, named = bool(table.groups), bool(table.methods)
    writer.writerow(
        ["block", *(["group"] if grouped else []), "row", *(["method"] if named else []), "column"]
        + ["mean", "std", "n_seeds", "best"]
    )
    for block, label, stats in table.stats():
        for col, stat in enumerate(stats):
            mean, std, n = ("", "", 0) if stat is None else _csv_stat(stat, table.decimals)
            key = label if table.best_along == "column" else table.columns[col]
            group = [table.group_of(key)] if grouped else []
            method = [table.methods.get(key, "")] if named else []
            writer.writerow(
                [block, *group, label, *method, table.columns[col], mean, std, n, (block, label, col) in best]
            )
    for label, why in table.left_out:  # block "left out", the reason as its column, no value
        group, method = [""] if grouped else [], [""] if named else []
        writer.writerow(["left out", *group, label, *method, why, "", "", 0, False])
    return out.getvalue()


TABLE_FORMATS = ("md", "csv", "tex", "html")  # the files of one table, ``write_table``


def write_table(out: Path, table: Table, benchmark: str, wide: bool = False) -> None:
    """``table`` as ``out/<name>.{md,csv,tex,html}`` (its LaTeX label names ``benchmark``); ``wide``:
    also ``<name>-wide.tex``, its LaTeX in a ``table*``, each .tex naming the other."""
    one_column = f"one column wide; {table.name}-wide.tex: the same in a table* for a two-column paper"
    for ext, text in (
        ("md", to_markdown(table)),
        ("csv", to_csv(table)),
        ("tex", to_latex(table, benchmark, remark=one_column if wide else "")),
        ("html", to_html(table)),
    ):
        write_text(out / f"{table.name}.{ext}", text)
    if wide:
        across = f"a table* across both columns of a two-column paper; {table.name}.tex: the one-column form"
        write_text(out / f"{table.name}-wide.tex", to_latex(table, benchmark, wide=True, remark=across))
