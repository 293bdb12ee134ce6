"""The paper's tables from a benchmark's per-run matrices.

Every number is mean +- sample standard deviation over seeds (ddof = 1; 0 with one seed),
computed by ``codyra.evaluation.metrics`` from the A matrices the DAG produced. The best mean of
each column of a method comparison is marked (bold in Markdown, LaTeX and HTML, ``best = true``
in the CSV); the zero-shot reference row never takes it (it is greyed out in LaTeX and HTML, as
the paper does), and a method's own A matrix marks nothing. Rows carry the methods' display names
(``Method.row_label``: the paper's row, e.g. ``LoRA (r=16)``, ``CoDyRA†``); the CSV also names
each row's config method. Captions name the benchmark by its display name
(:func:`benchmark_title`, e.g. ``MTIL (5-shot)``) and the seeds by their count.

Each table is a ``codyra.evaluation.table_formats.Table``, written in its four formats there (how
numbers, bold and the LaTeX float are printed). A table with a column per task
(``wide_table_names``) is also written as ``<name>-wide.tex``: the same table in a ``table*``,
spanning both columns of a two-column paper, where ``<name>.tex`` would shrink it to one column's
width.

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

from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np

from codyra.evaluation.figures import Curve, Point, method_styles, save_curves, save_heatmap, save_scatter
from codyra.evaluation.metrics import summarize
from codyra.evaluation.table_formats import TABLE_FORMATS, Table, defined, write_table
from codyra.family import family_of
from codyra.methods import method_classes
from codyra.methods.base import Method
from codyra.store.io import read_json, write_json
from codyra.store.paths import MATRIX_FILE, figures_dir, run_dir, tables_dir

Classes = dict[str, type[Method]]  # method -> its class, looked up once per job (codyra.methods.method_classes)


# the names of the tables' metrics (columns, blocks and rows), which the paper comparison reads back
TRANSFER, AVERAGE, LAST, FORGETTING, BWT, OP = "Transfer", "Average", "Last", "Forgetting", "BWT", "OP"
MEANS = (TRANSFER, AVERAGE, LAST)  # means over tasks: Table 1's blocks, the means tables' columns


def load_runs(cfg: dict, classes: Classes) -> dict[str, list[dict]]:
    """method -> the matrix.json of each seed (in config order), refused if computed with other
    settings; ``classes``: the methods' classes (:func:`codyra.methods.method_classes`)."""
    from codyra.evaluation.results import check_settings

    matrices = {(m, s): read_json(run_dir(cfg, m, s) / MATRIX_FILE) for m in cfg["methods"] for s in cfg["seeds"]}
    check_settings(cfg, matrices, classes)
    return {m: [matrices[m, s] for s in cfg["seeds"]] for m in cfg["methods"]}


# the paper's method groups (Method.group), in table order
GROUPS = {
    "reference": "Zero-shot reference",
    "complementation": "Model complementation",
    "continual": "Model continually learned",
}
DAGGER = "†"


def row_labels(cfg: dict, classes: Classes) -> dict[str, str]:
    """method -> its row label, for the methods of ``classes``: config ``analysis.paper_names``, else
    its kind's ``Method.row_label`` (its paper row or display name filled in with its options; an
    ablation variant keeps its own name), else the method's name. Labels that two methods would
    share fall back to their names."""
    from codyra.experiment.sweeps import variant_names

    explicit, variants = cfg["analysis"].get("paper_names", {}), set(variant_names(cfg))
    labels = {}
    for m, cls in classes.items():
        declared = None if m in variants else cls.row_label(cfg["method_configs"][m])
        labels[m] = explicit.get(m) or declared or m
    shared = Counter(labels.values())
    return {m: label if shared[label] == 1 else m for m, label in labels.items()}


class Layout(NamedTuple):
    rows: list[tuple[str, str]]  # (method, row label) in table order
    groups: dict[str, str]  # row label -> group title; {}: no groups
    reference: set[str]  # the row labels of the zero-shot reference (never best)
    classes: Classes  # method -> its class, in config order

    def table_fields(self) -> dict:
        """A ``Table``'s groups, reference rows and config method per label."""
        return {"groups": self.groups, "reference": self.reference, "methods": {label: m for m, label in self.rows}}


def method_layout(cfg: dict, classes: Classes) -> Layout:
    """The rows of the methods of ``classes``, labelled by :func:`row_labels`. Without a
    model-complementation method: config order, no groups. With one: grouped as the paper (stable
    within a group), a dagger after each method the paper marks with one (``Method.daggered``)."""
    labels = row_labels(cfg, classes)
    reference = {labels[m] for m, c in classes.items() if c.group == "reference"}
    if not any(c.group == "complementation" or c.predicts_domain for c in classes.values()):
        return Layout([(m, labels[m]) for m in classes], {}, reference, classes)
    order = sorted(classes, key=lambda m: list(GROUPS).index(classes[m].group))
    family = family_of(cfg)
    rows = [(m, _daggered(labels[m]) if classes[m].daggered(family) else labels[m]) for m in order]
    return Layout(rows, {label: GROUPS[classes[m].group] for m, label in rows}, reference, classes)


def grid_layout(cfg: dict) -> Layout:
    """:func:`method_layout` of the grid's methods, each looked up once."""
    return method_layout(cfg, method_classes(cfg, cfg["methods"]))


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


def table1(cfg: dict, runs: dict[str, list[dict]], layout: Layout) -> Table:
    tasks = list(cfg["tasks"])
    table = Table(
        "table1",
        f"Transfer, Average and Last accuracy (%) per task and their mean on {benchmark_title(cfg)}; "
        f"{spread_text(cfg)}",
        tasks + [AVERAGE],
        row_header="Method",
        **layout.table_fields(),
    )
    for block in MEANS:
        key = block.lower()
        for method, label in layout.rows:
            summaries = [summarize(m["A"]) for m in runs[method]]
            cells = [defined([s["per_task"][key][j] for s in summaries]) for j in range(len(tasks))]
            table.rows.append((block, label, cells + [defined([s[key] for s in summaries])]))
    return table


def forgetting_table(cfg: dict, runs: dict[str, list[dict]], layout: Layout) -> Table:
    columns = [FORGETTING, BWT, *MEANS]
    table = Table(
        "forgetting",
        "Forgetting (the paper's: the mean over tasks j < N of A[j,j] − A[N,j]; lower is better), "
        "BWT (TreeLoRA's: the mean over all tasks of min(A[N,j] − A[j,j], 0); higher is better) and the means "
        "over tasks of Transfer (A[i,j] over i < j), Average (A[i,j] over i = 1..N) and Last (A[N,j]; "
        f"its mean is TRACE's Overall Performance, OP), in %, on {benchmark_title(cfg)}; {spread_text(cfg)}",
        columns,
        higher_is_better={FORGETTING: False},
        row_header="Method",
        **layout.table_fields(),
    )
    for method, label in layout.rows:
        summaries = [summarize(m["A"]) for m in runs[method]]
        table.rows.append(("", label, [defined([s[c.lower()] for s in summaries]) for c in columns]))
    return table


def table2(cfg: dict, runs: dict[str, list[dict]], layout: Layout) -> Table:
    table = Table(
        "table2",
        "Overall Performance (OP: the mean over tasks of A[N,j]; higher is better) and Forgetting (the mean over "
        f"tasks j < N of A[j,j] − A[N,j]; lower is better), in %, on {benchmark_title(cfg)}; {spread_text(cfg)}",
        [label for _, label in layout.rows],
        higher_is_better={FORGETTING: False},
        best_along="row",
        row_header="Metric",
        **layout.table_fields(),
    )
    summaries = {m: [summarize(x["A"]) for x in matrices] for m, matrices in runs.items()}
    for label, key in ((OP, "op"), (FORGETTING, "forgetting")):
        table.rows.append(("", label, [defined([s[key] for s in summaries[m]]) for m, _ in layout.rows]))
    return table


def routed_methods(classes: Classes) -> list[str]:
    """The methods that predict the domain at inference, in config order."""
    return [m for m, cls in classes.items() if cls.predicts_domain]


def routing_table(cfg: dict, runs: dict[str, list[dict]], layout: Layout) -> Table:
    """Router accuracy (%) per task: the share of task j's test samples routed where they belong
    (their own task once learned, the zero-shot model before), averaged over rows i = 1..N."""
    tasks = list(cfg["tasks"])
    labels = dict(layout.rows)
    table = Table(
        "routing",
        f"Domain-router accuracy (%) per task on {benchmark_title(cfg)}: the share of task j's test samples routed "
        f"where they belong, averaged over the rows i = 1..N; {spread_text(cfg)}",
        tasks + [AVERAGE],
        row_header="Method",
        methods={labels[m]: m for m in routed_methods(layout.classes)},
    )
    for method in routed_methods(layout.classes):
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


def rail_aggregation_methods(cfg: dict, classes: Classes) -> dict[str, list[str]]:
    """{RAIL variant: its rail methods, then its codyra_rail methods}; {} without a codyra_rail method."""
    kinds = {m: cls.kind for m, cls in classes.items()}
    if RAIL_KINDS[1] not in kinds.values():
        return {}
    blocks: dict[str, list[str]] = {}
    for kind in RAIL_KINDS:
        for m in (m for m in classes if kinds[m] == kind):
            variant = classes[m](cfg["method_configs"][m]).options.variant
            blocks.setdefault(variant, []).append(m)
    return blocks


def rail_aggregation_table(cfg: dict, runs: dict[str, list[dict]], layout: Layout) -> Table:
    columns, blocks = list(MEANS), rail_aggregation_methods(cfg, layout.classes)
    labels = dict(layout.rows)
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
                    [defined([s[c.lower()] for s in summaries]) for c in columns],
                )
            )
    return table


MEANS_CAPTIONS = {"blip": "Averaged performance using BLIP"}  # the paper's caption of a family's means table


def means_table(cfg: dict, runs: dict[str, list[dict]], layout: Layout) -> Table:
    """The family's table of means (``Family.means_table``): Transfer / Average / Last over tasks
    per method, the rows labelled and grouped as Table 1's."""
    name, columns = family_of(cfg).means_table, list(MEANS)
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
        table.rows.append(("", label, [defined([s[c.lower()] for s in summaries]) for c in columns]))
    return table


def matrix_table(cfg: dict, method: str, label: str, matrices: list[dict]) -> Table:
    """``method``'s A matrix (its row label ``label`` in the caption), mean ± std over seeds."""
    tasks = list(cfg["tasks"])
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


def table_names(cfg: dict, classes: Classes | None = None) -> list[str]:
    """The tables ``write_tables`` produces for ``cfg`` (the workflow declares them as outputs);
    ``classes``: the methods' classes where the caller has resolved them."""
    if classes is None:
        classes = method_classes(cfg, cfg["methods"])
    trace = ["table2"] if cfg["data"]["kind"] == "trace" else []
    means = [family_of(cfg).means_table] if family_of(cfg).means_table else []
    routing = ["routing"] if routed_methods(classes) else []
    rail = ["rail_aggregation"] if rail_aggregation_methods(cfg, classes) else []
    return ["table1", "forgetting", *trace, *means, *routing, *rail, *(f"A_{m}" for m in cfg["methods"])]


def wide_table_names(cfg: dict, classes: Classes | None = None) -> list[str]:
    """The tables with a column per task, which ``write_tables`` also writes as ``<name>-wide.tex``
    (a ``table*``, across both columns of a two-column paper)."""
    return [n for n in table_names(cfg, classes) if n in ("table1", "routing") or n.startswith("A_")]


def heatmap_names(cfg: dict) -> list[str]:
    """The mean-over-seeds heatmaps ``write_tables`` draws (PNG and PDF, under results/figures/<benchmark>/)."""
    return [f"A_{m}" for m in cfg["methods"]]


def comparison_names(cfg: dict) -> list[str]:
    """The figures comparing the methods that ``write_tables`` draws (PNG and PDF, under
    results/figures/<benchmark>/): Last against Forgetting, and the accuracy on each task after
    each task; none for a stream of one task (no forgetting)."""
    return ["comparison_last_forgetting", "comparison_per_task"] if len(cfg["tasks"]) > 1 else []


SUMMARY_NAME = "summary.json"  # every run's summary metrics, for scripts


def output_files(cfg: dict, classes: Classes | None = None) -> list[Path]:
    """Every file ``write_tables`` writes for ``cfg`` (the workflow's tables rule declares each);
    ``classes``: the methods' classes where the caller has resolved them."""
    if classes is None:
        classes = method_classes(cfg, cfg["methods"])
    tables, figures = tables_dir(cfg), figures_dir(cfg)
    files = [tables / f"{name}.{ext}" for name in table_names(cfg, classes) for ext in TABLE_FORMATS]
    files += [tables / f"{name}-wide.tex" for name in wide_table_names(cfg, classes)]
    drawn = heatmap_names(cfg) + comparison_names(cfg)
    files += [figures / f"{name}.{ext}" for name in drawn for ext in ("png", "pdf")]
    return [*files, tables / SUMMARY_NAME]


def save_comparisons(cfg: dict, forgetting: Table, matrices: list[Table]) -> dict:
    """The figures of ``comparison_names`` from the tables' own numbers: each method's Last against
    its Forgetting (``forgetting``'s columns) and its accuracy on each task after each task (its
    A matrix, ``matrices`` in the grid's order); {name: the matplotlib figure}."""
    if not comparison_names(cfg):
        return {}
    label_of = {m: label for label, m in forgetting.methods.items()}
    reference = {forgetting.methods[label] for label in forgetting.reference}
    styles = method_styles(cfg["methods"], reference)
    forget, last = forgetting.columns.index(FORGETTING), forgetting.columns.index(LAST)
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
            list(cfg["tasks"]),
            f"Accuracy on each task after each task on {title}; {spread}",
            out / f"{per_task}.png",
        ),
    }


def write_tables(cfg: dict) -> Path:
    """Every table of ``cfg``'s benchmark under results/tables/<benchmark>/; returns that folder."""
    every = method_classes(cfg, [*cfg["methods"], *cfg["left_out"]])  # the job's one lookup per method
    classes = {m: every[m] for m in cfg["methods"]}
    runs = load_runs(cfg, classes)
    layout = method_layout(cfg, classes)
    forgetting = forgetting_table(cfg, runs, layout)
    tables = [table1(cfg, runs, layout), forgetting]
    if cfg["data"]["kind"] == "trace":
        tables.append(table2(cfg, runs, layout))
    if family_of(cfg).means_table:
        tables.append(means_table(cfg, runs, layout))
    if routed_methods(classes):
        tables.append(routing_table(cfg, runs, layout))
    if rail_aggregation_methods(cfg, classes):
        tables.append(rail_aggregation_table(cfg, runs, layout))
    left_out = list(row_labels(cfg, {m: every[m] for m in cfg["left_out"]}).items())
    for table in tables:  # the method tables (a method's matrix is its own)
        table.left_out = [(label, cfg["left_out"][m]) for m, label in left_out]
    labels = row_labels(cfg, classes)
    matrices = [matrix_table(cfg, m, labels[m], runs[m]) for m in cfg["methods"]]
    tables += matrices
    assert [t.name for t in tables] == table_names(cfg, classes)
    wide = set(wide_table_names(cfg, classes))
    for table in tables:
        write_table(tables_dir(cfg), table, cfg["benchmark"], wide=table.name in wide)
    tasks, title = list(cfg["tasks"]), benchmark_title(cfg)
    for method, name in zip(cfg["methods"], heatmap_names(cfg), strict=True):
        mean = np.mean([m["A"] for m in runs[method]], axis=0)
        caption = f"A[i,j] of {labels[method]} on {title}, mean over {seeds_text(cfg)}"
        save_heatmap(mean.tolist(), tasks, caption, figures_dir(cfg) / f"{name}.png")
    save_comparisons(cfg, forgetting, matrices)
    out = tables_dir(cfg)
    write_json(out / SUMMARY_NAME, {m: [summarize(x["A"]) for x in matrices] for m, matrices in runs.items()})
    return out
