"""Tables of ours named as the paper's, compared cell by cell: the single-task studies (config key
single_task) named supp_dtd, supp_eurosat, supp_flowers, supp_norm_matched, their summary table
peft, and an ablation sweep's ``table`` supp_placement_matched (X-TAIL's numbers, rows matched by
placement and rank); on a mini benchmark, the order of the rows per column, ours against the
paper's."""

from __future__ import annotations

import math
import re
from pathlib import Path

from codyra.analysis.paper_metrics import (
    COMPARED,
    NO_NUMBER,
    NOT_RUN,
    PAPER_COLUMNS,
    kendall,
    paper_row,
    paper_setting,
    ranking,
    read_csv_table,
)
from codyra.analysis.published import mean_std, table, value

# our single-task studies named as the paper's tables: the task the paper trained (None: not named)
SINGLE_TASK_TABLES = {
    "supp_dtd": "DTD",
    "supp_eurosat": "EuroSAT",
    "supp_flowers": "Flowers",
    "supp_norm_matched": None,
}
SINGLE_TASK_REFERENCE = ["ImageNet"]
SINGLE_TASK_COLUMNS = {  # the paper's column -> ours (codyra.analysis.single_task)
    "eff-rank": "eff. rank",
    "||DeltaW||_F": "Frobenius dW (task)",
    "Deltaplasticity": "Delta-plasticity",
    "Forgetting": "Forgetting",
}
PLACEMENT_MATCHED = "supp_placement_matched"
PEFT = "peft"  # a single-task summary table (codyra.analysis.single_task.summary_table)
PLACEMENT_ROWS = {"Attn-only": "attn", "MLP-only": "mlp", "All (ours)": "all"}  # the paper's row -> our placement
PLACEMENT_COLUMNS = {"Transfer": "Transfer", "Avg.": "Average", "Last": "Last"}


def named_tables(cfg: dict) -> list[str]:
    """Our tables named as a paper table and compared with it: the single-task studies, their
    summary table peft and ablation tables."""
    from codyra.analysis.single_task import summaries
    from codyra.experiment.single_task import studies

    names = [n for n in studies(cfg) if n in SINGLE_TASK_TABLES] + [n for n in summaries(cfg) if n == PEFT]
    return names + [s["table"] for s in cfg["ablations"].values() if s.get("table") == PLACEMENT_MATCHED]


def _single_task_column(column: str) -> str | None:
    """Our column of the paper's: "DeltaP r4" -> "Delta-plasticity rank=4", "Fgt r4" -> "Forgetting rank=4"."""
    match = re.fullmatch(r"(DeltaP|Fgt) r(\d+)", column)
    if match:
        return f"{'Delta-plasticity' if match[1] == 'DeltaP' else 'Forgetting'} rank={match[2]}"
    return SINGLE_TASK_COLUMNS.get(column)


def cell_pairs(cfg: dict, name: str) -> tuple[list[tuple[str, str, tuple]], str | None]:
    """([(paper row, paper column, our (block, row, column))]) of a named table, and why the paper's
    numbers do not apply to the config (None where they do)."""
    from codyra.analysis.ablation import option_label, sweep_options
    from codyra.experiment.single_task import studies

    published = table(name)
    pairs = []
    if name == PEFT:
        return _peft_pairs(cfg, published), _single_task_why(cfg, None)
    if name == PLACEMENT_MATCHED:
        sweep = next(s for s in cfg["ablations"].values() if s.get("table") == name)
        keys, base = sweep_options(sweep), cfg["method_configs"][sweep["method"]]
        for row in published["rows"]:
            rank = int(row["values"][published["columns"].index("Rank")])
            options = {**base, "placement": PLACEMENT_ROWS[row["row"]], "rank": rank, "alpha": base.get("alpha")}
            if "alpha" in keys:
                options["alpha"] = rank  # the paper's scale alpha / r = 1
            label = option_label(options, keys)
            pairs += [(f"{row['row']} r={rank}", c, ("", label, ours)) for c, ours in PLACEMENT_COLUMNS.items()]
        setting = paper_setting(cfg)
        why = setting.why_not or (
            None
            if setting.benchmark == published["benchmark"]
            else f"the paper measured it on {published['benchmark']}"
        )
        return pairs, why
    for row in published["rows"]:
        pairs += [
            (row["row"], c, ("", row["row"], ours))
            for c in published["columns"]
            if (ours := _single_task_column(c)) is not None
        ]
    task = studies(cfg)[name]["task"]
    paper_task = SINGLE_TASK_TABLES[name]
    if paper_task is not None and PAPER_COLUMNS.get(task, task) != paper_task:
        return pairs, f"the paper trained {paper_task}; this study trains {task}"
    if cfg["single_task"]["reference_tasks"] != SINGLE_TASK_REFERENCE:
        return pairs, _single_task_why(cfg, "the paper's reference set is ImageNet-1k")
    return pairs, _single_task_why(cfg, None)


def _single_task_why(cfg: dict, otherwise: str | None) -> str | None:
    if (cfg["model"]["name"], cfg["model"]["pretrained"]) != ("ViT-B-16", "openai"):
        return "the paper's numbers are for CLIP ViT-B/16 with OpenAI's weights"
    return otherwise


def _peft_pairs(cfg: dict, published: dict) -> list[tuple[str, str, tuple]]:
    """Table peft's accuracies against ours: each paper column's task (its study), each paper row
    the run whose paper row it is (or the zero-shot row). The parameter counts are shown, not
    compared: the paper prints them to two digits (4.4M)."""
    import copy

    from codyra.analysis.single_task import ACCURACY, summaries
    from codyra.experiment.single_task import studies, study_runs

    names = summaries(cfg)[PEFT]
    ours_column = {PAPER_COLUMNS.get(t, t): t for t in (studies(cfg)[n]["task"] for n in names)}
    aliases, labels = published.get("aliases", {}), {"Zero-shot": "Zero-shot"}
    for name in names:
        with_variants = copy.deepcopy(cfg)
        for method, label in study_runs(with_variants, name):
            row = paper_row(with_variants, method)[0]
            labels.setdefault(aliases.get(row, row), label)
    return [
        (r["row"], c, (ACCURACY, labels.get(r["row"], r["row"]), ours_column.get(c, c)))
        for r in published["rows"]
        if r["block"] == ACCURACY
        for c in published["columns"]
    ]


def _published_cell(name: str, row: str, column: str, block: str = "") -> tuple[float, float | None] | None:
    """(mean, std) the paper prints at (row, column) of a named table; rows of supp_placement_matched
    are "<placement row> r=<Rank>" (its placement rows repeat, one per rank)."""
    if name != PLACEMENT_MATCHED:
        return mean_std(value(name, row, column, block))
    published = table(name)
    placement, rank = row.rsplit(" r=", 1)
    for r in published["rows"]:
        if r["row"] == placement and int(r["values"][published["columns"].index("Rank")]) == int(rank):
            return mean_std(r["values"][published["columns"].index(column)])
    return None


def named_table_rows(cfg: dict, tables_dir: Path) -> list[list[str]]:
    """The comparison_table rows of the named tables, cell by cell."""
    out = []
    for name in named_tables(cfg):
        ours_table = read_csv_table(tables_dir / f"{name}.csv")
        pairs, why = cell_pairs(cfg, name)
        for paper_row_name, column, key in pairs:
            stat = _published_cell(name, paper_row_name, column, key[0])
            ours = ours_table.get(key)
            status = NO_NUMBER if why or stat is None else NOT_RUN if ours is None else COMPARED
            cells, flag = ["n/a"] * 4, "n/a"
            if stat is not None:
                cells[:2] = [
                    table(name)["source"],
                    f"{stat[0]:.2f}" + (f" ± {stat[1]:.2f}" if stat[1] is not None else ""),
                ]
            if ours is not None:
                cells[2] = f"{ours[0]:.2f} ± {ours[1]:.2f}"
            if status == COMPARED:
                diff = ours[0] - stat[0]
                cells[3] = f"{diff:+.2f}"
                flag = "DIFFERS" if abs(diff) > 2 * math.hypot(ours[1], stat[1] or 0.0) else "ok"
            note = why or ""
            out.append([f"{name} / {column}", key[1], status, paper_row_name, *cells, flag, note])
    return out


def named_table_orders(cfg: dict, tables_dir: Path) -> list[list[str]]:
    """ordering_table rows of the named tables: per published column, the order of the rows both
    tables have (a mini study stands in for the paper's task: the comparison is qualitative)."""
    out = []
    for name in named_tables(cfg):
        ours_table = read_csv_table(tables_dir / f"{name}.csv")
        by_column: dict[str, list[tuple[str, float, float]]] = {}
        for paper_row_name, column, key in cell_pairs(cfg, name)[0]:
            stat, ours = _published_cell(name, paper_row_name, column, key[0]), ours_table.get(key)
            if stat is not None and ours is not None:
                by_column.setdefault(column, []).append((paper_row_name, stat[0], ours[0]))
        for column, common in by_column.items():
            if len(common) < 2:
                continue
            higher = not column.startswith(("Fgt", "Forgetting"))
            concordant, pairs, tau = kendall([c[1] for c in common], [c[2] for c in common])
            orders = [ranking(common, k, higher) for k in (1, 2)]
            tau_text = "n/a" if tau is None else f"{tau:.2f}"
            out.append([f"{name} / {column}", table(name)["source"], *orders, f"{concordant}/{pairs}", tau_text])
    return out
