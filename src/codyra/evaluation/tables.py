"""The paper's tables from a benchmark's per-run matrices, in Markdown, CSV, LaTeX and HTML.

Every number is mean +- sample standard deviation over seeds (ddof = 1; 0 with one seed),
computed by ``codyra.evaluation.metrics`` from the A matrices the DAG produced. The best mean of
each column of a method comparison is marked (bold in Markdown, LaTeX and HTML, ``best = true``
in the CSV); the zero-shot reference row never takes it (it is greyed out in LaTeX and HTML, as
the paper does), and a method's own A matrix marks nothing. Rows carry the methods' display names
(``Method.row_label``: the paper's row, e.g. ``LoRA (r=16)``, ``CoDyRA†``); the CSV also names
each row's config method. Captions name the benchmark by its display name
(:func:`benchmark_title`, e.g. ``MTIL (5-shot)``) and the seeds by their count.

Numbers: a negative one is printed with a minus sign (U+2212 in Markdown and HTML, ``$-$`` in
LaTeX, which plain pdflatex typesets in any font); the CSV stays machine-readable: ASCII ``-``,
each mean and std rounded to three more decimals than the table prints (``CSV_EXTRA_DECIMALS``).

The LaTeX is a ``table`` with a caption and the label ``tab:<benchmark>-<table>``, its tabular in
booktabs rules, shrunk to the line width where it is wider (``adjustbox``); the file's first lines
name the packages it needs. A table with a column per task (``wide_table_names``) is also written
as ``<name>-wide.tex``: the same table in a ``table*``, spanning both columns of a two-column
paper, where ``<name>.tex`` would shrink it to one column's width.

- ``table1``: the paper's Table 1 layout: blocks Transfer / Average / Last, rows = methods,
  columns = tasks + Average.
- ``forgetting``: Forgetting (paper, lower is better) and BWT (TreeLoRA, higher is better)
  beside the means Transfer / Average / Last (Last, the mean of A[N,j], is what TRACE calls OP;
  paper Table 4 and the TRACE Table 2 metrics).
- ``table2``: TRACE's layout: rows OP and Forgetting, columns = methods.
- ``A_<method>``: the accuracy matrix, rows i = 0..N, columns j = 1..N.
- ``routing`` (only when a configured method predicts the domain at inference): the router's
  accuracy per task, averaged over the rows i = 1..N of each such method.
- ``blip`` (only for a BLIP model, ``Family.means_table``): the appendix's table "Averaged
  performance using BLIP": Transfer / Average / Last, each the mean over tasks, per method.
- ``rail_aggregation`` (only with a CoDyRA + RAIL method, kind ``codyra_rail``): the appendix's
  table "integrating aggregation-based adapters": Transfer / Average / Last of RAIL on the frozen
  backbone and of CoDyRA + RAIL, a block per RAIL variant, best within each block.

Beside the tables, ``write_tables`` draws each method's mean heatmap and the figures comparing the
methods (``comparison_names``, ``codyra.evaluation.figures``) from the same numbers.

When a configured method belongs to the model-complementation group (frozen backbone plus
modules kept per task), the tables split methods into the paper's groups (the zero-shot
reference, model complementation, model continually learned): a sub-block per group, best per
column within each group, and a dagger after every method that predicts the domain. A config
without such methods gets exactly the tables it always had.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import NamedTuple

import numpy as np

from codyra.evaluation.figures import Curve, Point, method_styles, save_curves, save_heatmap, save_scatter
from codyra.evaluation.metrics import summarize
from codyra.family import family_of
from codyra.methods import method_of
from codyra.store.io import read_json, write_json, write_text
from codyra.store.paths import MATRIX_FILE, figures_dir, run_dir, tables_dir


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


def _defined(values: list) -> list[float] | None:
    """The per-seed values of a cell, or None where the metric is undefined (e.g. Transfer of task 1)."""
    return None if any(v is None for v in values) else values


def _mean_std(values: list[float]) -> tuple[float, float, int]:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0, len(arr)


MINUS = "\u2212"  # the minus sign of displayed numbers (LaTeX: $-$, see _tex)


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


def _tex(text: str) -> str:
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
                rf"\caption{{{_tex(caption)}}}",
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
                *(rf"\par\footnotesize {_tex(note)}" for note in notes),
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
    head = [_tex(table.row_header) + " & " + " & ".join(_tex(c) for c in table.columns) + r" \\"]
    if table.best_along == "row" and table.groups:
        head.insert(0, "Group & " + " & ".join(_tex(table.group_of(c)) for c in table.columns) + r" \\")
    body, current = [], None
    for block, label, stats, group in table.row_groups():
        if block and block != current:
            if current is not None:
                body.append(r"\midrule")
            body.append(rf"\multicolumn{{{width}}}{{l}}{{\emph{{{_tex(block)}}}}} \\")
            current = block
        if group:
            body.append(rf"\multicolumn{{{width}}}{{l}}{{\textbf{{\textit{{{_tex(group)}}}}}}} \\")
        cells = [_tex(_fmt(s, table.decimals)) for s in stats]
        cells = [rf"\textbf{{{c}}}" if (block, label, k) in best else c for k, c in enumerate(cells)]
        if table.best_along == "row":
            cells = [_grey(c) if table.columns[k] in table.reference else c for k, c in enumerate(cells)]
        row = [_tex(label), *cells]
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


def load_runs(cfg: dict) -> dict[str, list[dict]]:
    """method -> the matrix.json of each seed (in config order), refused if computed with other settings."""
    from codyra.evaluation.results import check_settings

    matrices = {(m, s): read_json(run_dir(cfg, m, s) / MATRIX_FILE) for m in cfg["methods"] for s in cfg["seeds"]}
    check_settings(cfg, matrices)
    return {m: [matrices[m, s] for s in cfg["seeds"]] for m in cfg["methods"]}


# the paper's method groups (Method.group), in table order
GROUPS = {
    "reference": "Zero-shot reference",
    "complementation": "Model complementation",
    "continual": "Model continually learned",
}
DAGGER = "†"


def row_labels(cfg: dict, methods) -> dict[str, str]:
    """method -> its row label: config ``analysis.paper_names``, else its kind's ``Method.row_label``
    (its paper row or display name filled in with its options; an ablation variant keeps its own
    name), else the method's name. Labels that two methods would share fall back to their names."""
    from codyra.experiment.sweeps import variant_names

    explicit, variants = cfg["analysis"].get("paper_names", {}), set(variant_names(cfg))
    labels = {}
    for m in methods:
        declared = None if m in variants else method_of(cfg, m).row_label(cfg["method_configs"][m])
        labels[m] = explicit.get(m) or declared or m
    shared = Counter(labels.values())
    return {m: label if shared[label] == 1 else m for m, label in labels.items()}


class Layout(NamedTuple):
    rows: list[tuple[str, str]]  # (method, row label) in table order
    groups: dict[str, str]  # row label -> group title; {}: no groups
    reference: set[str]  # the row labels of the zero-shot reference (never best)

    def table_fields(self) -> dict:
        """A ``Table``'s groups, reference rows and config method per label."""
        return {"groups": self.groups, "reference": self.reference, "methods": {label: m for m, label in self.rows}}


def method_layout(cfg: dict, methods) -> Layout:
    """The methods' rows, labelled by :func:`row_labels`. Without a model-complementation method:
    config order, no groups. With one: grouped as the paper (stable within a group), a dagger
    after each method the paper marks with one (``Method.daggered``)."""
    classes = {m: method_of(cfg, m) for m in methods}
    labels = row_labels(cfg, methods)
    reference = {labels[m] for m, c in classes.items() if c.group == "reference"}
    if not any(c.group == "complementation" or c.predicts_domain for c in classes.values()):
        return Layout([(m, labels[m]) for m in methods], {}, reference)
    order = sorted(methods, key=lambda m: list(GROUPS).index(classes[m].group))
    family = family_of(cfg)
    rows = [(m, _daggered(labels[m]) if classes[m].daggered(family) else labels[m]) for m in order]
    return Layout(rows, {label: GROUPS[classes[m].group] for m, label in rows}, reference)


def _daggered(label: str) -> str:
    return label if label.endswith(DAGGER) else label + DAGGER


DATA_TITLES = {"mtil": "MTIL", "xtail": "X-TAIL", "trace": "TRACE"}  # the paper's names of its benchmarks


def benchmark_title(cfg: dict) -> str:
    """The benchmark's display name in captions and figures: the paper's name with its shots
    (``MTIL (5-shot)``, ``MTIL (full-shot)``, ``X-TAIL (16-shot)``) or, on TRACE, its backbone
    (``TRACE (Llama-2-7b-chat-hf)``); a benchmark with its own pretrained model is ``the mini
    benchmark`` (``the mini TRACE benchmark``); `` with BLIP`` after it for a BLIP model."""
    family, kind = family_of(cfg), cfg["data"]["kind"]
    if kind == "mini" or family.own_pretraining(cfg) is not None:
        title = "the mini TRACE benchmark" if kind == "trace" else "the mini benchmark"
    elif kind == "trace":
        title = f"TRACE ({cfg['model']['name'].rsplit('/', 1)[-1]})"
    else:
        shots = cfg["data"].get("fewshot")
        title = f"{DATA_TITLES[kind]} ({f'{shots}-shot' if shots else 'full-shot'})"
    return title + (" with BLIP" if family.name == "blip" else "")


def seeds_text(cfg: dict) -> str:
    """``3 seeds``, or ``seed 0`` for one."""
    seeds = cfg["seeds"]
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds"


def spread_text(cfg: dict) -> str:
    """What a cell holds: ``mean ± std over 3 seeds``, or ``seed 0`` for one (its value)."""
    return seeds_text(cfg) if len(cfg["seeds"]) == 1 else f"mean ± std over {seeds_text(cfg)}"


def table1(cfg: dict, runs: dict[str, list[dict]]) -> Table:
    tasks = [t["name"] for t in cfg["tasks"]]
    layout = method_layout(cfg, runs)
    table = Table(
        "table1",
        f"Transfer, Average and Last accuracy (%) per task and their mean on {benchmark_title(cfg)}; "
        f"{spread_text(cfg)}",
        tasks + ["Average"],
        row_header="Method",
        **layout.table_fields(),
    )
    for block, key in (("Transfer", "transfer"), ("Average", "average"), ("Last", "last")):
        for method, label in layout.rows:
            summaries = [summarize(m["A"]) for m in runs[method]]
            cells = [_defined([s["per_task"][key][j] for s in summaries]) for j in range(len(tasks))]
            table.rows.append((block, label, cells + [_defined([s[key] for s in summaries])]))
    return table


def forgetting_table(cfg: dict, runs: dict[str, list[dict]]) -> Table:
    columns = ["Forgetting", "BWT", "Transfer", "Average", "Last"]
    layout = method_layout(cfg, runs)
    table = Table(
        "forgetting",
        "Forgetting (the paper's: the mean over tasks j < N of A[j,j] − A[N,j]; lower is better), "
        "BWT (TreeLoRA's: the mean over all tasks of min(A[N,j] − A[j,j], 0); higher is better) and the means "
        "over tasks of Transfer (A[i,j] over i < j), Average (A[i,j] over i = 1..N) and Last (A[N,j]; "
        f"its mean is TRACE's Overall Performance, OP), in %, on {benchmark_title(cfg)}; {spread_text(cfg)}",
        columns,
        higher_is_better={"Forgetting": False},
        row_header="Method",
        **layout.table_fields(),
    )
    for method, label in layout.rows:
        summaries = [summarize(m["A"]) for m in runs[method]]
        table.rows.append(("", label, [_defined([s[c.lower()] for s in summaries]) for c in columns]))
    return table


def table2(cfg: dict, runs: dict[str, list[dict]]) -> Table:
    layout = method_layout(cfg, runs)
    table = Table(
        "table2",
        "Overall Performance (OP: the mean over tasks of A[N,j]; higher is better) and Forgetting (the mean over "
        f"tasks j < N of A[j,j] − A[N,j]; lower is better), in %, on {benchmark_title(cfg)}; {spread_text(cfg)}",
        [label for _, label in layout.rows],
        higher_is_better={"Forgetting": False},
        best_along="row",
        row_header="Metric",
        **layout.table_fields(),
    )
    summaries = {m: [summarize(x["A"]) for x in matrices] for m, matrices in runs.items()}
    for label, key in (("OP", "op"), ("Forgetting", "forgetting")):
        table.rows.append(("", label, [_defined([s[key] for s in summaries[m]]) for m, _ in layout.rows]))
    return table


def routed_methods(cfg: dict) -> list[str]:
    return [m for m in cfg["methods"] if method_of(cfg, m).predicts_domain]


def routing_table(cfg: dict, runs: dict[str, list[dict]]) -> Table:
    """Router accuracy (%) per task: the share of task j's test samples routed where they belong
    (their own task once learned, the zero-shot model before), averaged over rows i = 1..N."""
    tasks = [t["name"] for t in cfg["tasks"]]
    labels = dict(method_layout(cfg, cfg["methods"]).rows)
    table = Table(
        "routing",
        f"Domain-router accuracy (%) per task on {benchmark_title(cfg)}: the share of task j's test samples routed "
        f"where they belong, averaged over the rows i = 1..N; {spread_text(cfg)}",
        tasks + ["Average"],
        row_header="Method",
        methods={labels[m]: m for m in routed_methods(cfg)},
    )
    for method in routed_methods(cfg):
        per_seed = []
        for matrix in runs[method]:
            routing = matrix.get("routing")
            if routing is None:
                raise ValueError(
                    f"{run_dir(cfg, method, matrix['seed']) / MATRIX_FILE} has no routing accuracies; "
                    "rerun its matrix job"
                )
            per_seed.append(
                [float(np.mean([routing[i][j] for i in range(1, len(routing))])) for j in range(len(tasks))]
            )
        table.rows.append(
            (
                "",
                labels[method],
                [[s[j] for s in per_seed] for j in range(len(tasks))] + [[float(np.mean(s)) for s in per_seed]],
            )
        )
    return table


RAIL_KINDS = ("rail", "codyra_rail")  # RAIL's head on the frozen backbone, then on CoDyRA's


def rail_aggregation_methods(cfg: dict) -> dict[str, list[str]]:
    """{RAIL variant: its rail methods, then its codyra_rail methods}; {} without a codyra_rail method."""
    kinds = {m: cfg["method_configs"][m]["kind"] for m in cfg["methods"]}
    if RAIL_KINDS[1] not in kinds.values():
        return {}
    blocks: dict[str, list[str]] = {}
    for kind in RAIL_KINDS:
        for m in (m for m in cfg["methods"] if kinds[m] == kind):
            variant = method_of(cfg, m)(cfg["method_configs"][m]).options.variant
            blocks.setdefault(variant, []).append(m)
    return blocks


def rail_aggregation_table(cfg: dict, runs: dict[str, list[dict]]) -> Table:
    columns, blocks = ["Transfer", "Average", "Last"], rail_aggregation_methods(cfg)
    labels = dict(method_layout(cfg, cfg["methods"]).rows)
    table = Table(
        "rail_aggregation",
        f"CoDyRA + RAIL's aggregation-based adapters on {benchmark_title(cfg)}: Transfer, Average and Last, "
        f"means over tasks (%); {spread_text(cfg)}",
        columns,
        row_header="Method",
        methods={labels[m]: m for methods in blocks.values() for m in methods},
    )
    for variant, methods in blocks.items():
        for method in methods:
            summaries = [summarize(m["A"]) for m in runs[method]]
            table.rows.append(
                (
                    f"RAIL-{variant.title()}",
                    labels[method],
                    [_defined([s[c.lower()] for s in summaries]) for c in columns],
                )
            )
    return table


MEANS_CAPTIONS = {"blip": "Averaged performance using BLIP"}  # the paper's caption of a family's means table


def means_table(cfg: dict, runs: dict[str, list[dict]]) -> Table:
    """The family's table of means (``Family.means_table``): Transfer / Average / Last over tasks
    per method, the rows labelled and grouped as Table 1's."""
    name, columns = family_of(cfg).means_table, ["Transfer", "Average", "Last"]
    layout = method_layout(cfg, runs)
    table = Table(
        name,
        f"{MEANS_CAPTIONS[name]} on {benchmark_title(cfg)}: Transfer, Average and Last, means over tasks (%); "
        f"{spread_text(cfg)}",
        columns,
        row_header="Method",
        **layout.table_fields(),
    )
    for method, label in layout.rows:
        summaries = [summarize(m["A"]) for m in runs[method]]
        table.rows.append(("", label, [_defined([s[c.lower()] for s in summaries]) for c in columns]))
    return table


def matrix_table(cfg: dict, method: str, label: str, matrices: list[dict]) -> Table:
    """``method``'s A matrix (its row label ``label`` in the caption), mean ± std over seeds."""
    tasks = [t["name"] for t in cfg["tasks"]]
    stack = np.asarray([m["A"] for m in matrices], dtype=float)  # (seeds, N+1, N)
    table = Table(
        f"A_{method}",
        f"Accuracy matrix A of {label} on {benchmark_title(cfg)}: A[i,j] (%), the accuracy on task j (column) of "
        f"the model after training tasks 1..i (row; pretrained: the model before any); {spread_text(cfg)}",
        tasks,
        mark_best=False,  # one method's matrix: nothing to compare
        row_header="Model",
    )
    for i in range(stack.shape[1]):
        label = "pretrained" if i == 0 else f"after {i}: {tasks[i - 1]}"
        table.rows.append(("", label, [list(stack[:, i, j]) for j in range(len(tasks))]))
    return table


def table_names(cfg: dict) -> list[str]:
    """The tables ``write_tables`` produces for ``cfg`` (the workflow declares them as outputs)."""
    trace = ["table2"] if cfg["data"]["kind"] == "trace" else []
    means = [family_of(cfg).means_table] if family_of(cfg).means_table else []
    routing = ["routing"] if routed_methods(cfg) else []
    rail = ["rail_aggregation"] if rail_aggregation_methods(cfg) else []
    return ["table1", "forgetting", *trace, *means, *routing, *rail, *(f"A_{m}" for m in cfg["methods"])]


def wide_table_names(cfg: dict) -> list[str]:
    """The tables with a column per task, which ``write_tables`` also writes as ``<name>-wide.tex``
    (a ``table*``, across both columns of a two-column paper)."""
    return [n for n in table_names(cfg) if n in ("table1", "routing") or n.startswith("A_")]


def heatmap_names(cfg: dict) -> list[str]:
    """The mean-over-seeds heatmaps ``write_tables`` draws (PNG and PDF, under results/figures/<benchmark>/)."""
    return [f"A_{m}" for m in cfg["methods"]]


def comparison_names(cfg: dict) -> list[str]:
    """The figures comparing the methods that ``write_tables`` draws (PNG and PDF, under
    results/figures/<benchmark>/): Last against Forgetting, and the accuracy on each task after
    each task; none for a stream of one task (no forgetting)."""
    return ["comparison_last_forgetting", "comparison_per_task"] if len(cfg["tasks"]) > 1 else []


TABLE_FORMATS = ("md", "csv", "tex", "html")  # the files of one table, ``write_table``
SUMMARY_NAME = "summary.json"  # every run's summary metrics, for scripts


def output_files(cfg: dict) -> list[Path]:
    """Every file ``write_tables`` writes for ``cfg`` (the workflow's tables rule declares each)."""
    tables, figures = tables_dir(cfg), figures_dir(cfg)
    files = [tables / f"{name}.{ext}" for name in table_names(cfg) for ext in TABLE_FORMATS]
    files += [tables / f"{name}-wide.tex" for name in wide_table_names(cfg)]
    drawn = heatmap_names(cfg) + comparison_names(cfg)
    files += [figures / f"{name}.{ext}" for name in drawn for ext in ("png", "pdf")]
    return [*files, tables / SUMMARY_NAME]


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


def save_comparisons(cfg: dict, forgetting: Table, matrices: list[Table]) -> dict:
    """The figures of ``comparison_names`` from the tables' own numbers: each method's Last against
    its Forgetting (``forgetting``'s columns) and its accuracy on each task after each task (its
    A matrix, ``matrices`` in the grid's order); {name: the matplotlib figure}."""
    if not comparison_names(cfg):
        return {}
    label_of = {m: label for label, m in forgetting.methods.items()}
    reference = {forgetting.methods[label] for label in forgetting.reference}
    styles = method_styles(cfg["methods"], reference)
    forget, last = forgetting.columns.index("Forgetting"), forgetting.columns.index("Last")
    points = [
        Point(label, styles[forgetting.methods[label]], stats[forget][:2], stats[last][:2])
        for _, label, stats in forgetting.stats()
    ]
    curves = [
        Curve(label_of[m], styles[m], [[stat[:2] for stat in stats] for _, _, stats in table.stats()])
        for m, table in zip(cfg["methods"], matrices, strict=True)
    ]
    title, spread, out = benchmark_title(cfg), spread_text(cfg), figures_dir(cfg)
    scatter, per_task = comparison_names(cfg)
    y_label = "OP = Last (%)" if cfg["data"]["kind"] == "trace" else "Last (%)"
    return {
        scatter: save_scatter(
            points,
            "Forgetting (%; lower is better)",
            y_label,
            f"Last against Forgetting on {title}; {spread}",
            out / f"{scatter}.png",
        ),
        per_task: save_curves(
            curves,
            [t["name"] for t in cfg["tasks"]],
            f"Accuracy on each task after each task on {title}; {spread}",
            out / f"{per_task}.png",
        ),
    }


def write_tables(cfg: dict) -> Path:
    """Every table of ``cfg``'s benchmark under results/tables/<benchmark>/; returns that folder."""
    runs = load_runs(cfg)
    forgetting = forgetting_table(cfg, runs)
    tables = [table1(cfg, runs), forgetting]
    if cfg["data"]["kind"] == "trace":
        tables.append(table2(cfg, runs))
    if family_of(cfg).means_table:
        tables.append(means_table(cfg, runs))
    if routed_methods(cfg):
        tables.append(routing_table(cfg, runs))
    if rail_aggregation_methods(cfg):
        tables.append(rail_aggregation_table(cfg, runs))
    left_out = list(row_labels(cfg, cfg["left_out"]).items())
    for table in tables:  # the method tables (a method's matrix is its own)
        table.left_out = [(label, cfg["left_out"][m]) for m, label in left_out]
    labels = row_labels(cfg, cfg["methods"])
    matrices = [matrix_table(cfg, m, labels[m], runs[m]) for m in cfg["methods"]]
    tables += matrices
    assert [t.name for t in tables] == table_names(cfg)
    wide = set(wide_table_names(cfg))
    for table in tables:
        write_table(tables_dir(cfg), table, cfg["benchmark"], wide=table.name in wide)
    tasks, title = [t["name"] for t in cfg["tasks"]], benchmark_title(cfg)
    for method, name in zip(cfg["methods"], heatmap_names(cfg), strict=True):
        mean = np.mean([m["A"] for m in runs[method]], axis=0)
        caption = f"A[i,j] of {labels[method]} on {title}, mean over {seeds_text(cfg)}"
        save_heatmap(mean.tolist(), tasks, caption, figures_dir(cfg) / f"{name}.png")
    save_comparisons(cfg, forgetting, matrices)
    out = tables_dir(cfg)
    write_json(out / SUMMARY_NAME, {m: [summarize(x["A"]) for x in matrices] for m, matrices in runs.items()})
    return out
