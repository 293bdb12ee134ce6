"""Paper vs reproduced.

The config's paper benchmark (``published.yaml``'s ``benchmarks``) is the one with its model
family, data kind and shots; its numbers apply when the config also trains the paper's task order (and, for TRACE,
one of Table 2's backbones). Its tables are those whose ``benchmark`` it is: Table 1's layout
(Transfer / Average / Last per task), the appendix tables of means, forgetting, drift, update
magnitude, CKA and held-out retention (X-TAIL), TRACE's OP and Forgetting.

Paper benchmarks: per metric, EVERY configured method with its status: ``compared`` (the
published number, ours as mean ± std over seeds, the difference, and a flag where |difference| >
2 x spread, spread = sqrt(std_ours^2 + std_paper^2), the paper's std where it reports one),
``no published row`` (the paper has no such method: the kind's ``paper_row`` is None, or an
ablation variant), ``no published number`` (the paper's tables for this benchmark lack it), or
``not run`` (our table has no value). A published cell the paper contradicts elsewhere (its row's
``inconsistent`` note) is shown and flagged, never judged ok or DIFFERS. Per-task and per-step
breakdowns are listed where compared. The mini benchmarks (own pretrained theta_0) cannot match
the paper's numbers; there the comparison is qualitative, against X-TAIL's tables (CLIP) or
LLaMA-2's TRACE block: per metric, the order of the methods both have, ours against the
paper's, with the fraction of concordant pairs and Kendall's tau.

Our numbers come from the CSV tables the DAG wrote (``table1``, ``forgetting``, ``table2``,
``drift``, ``magnitude``, ``cka``, ``general_capability``, ``heldout_tracking``). A method's paper
row is its kind's ``paper_row`` (codyra.methods.base), or config key ``analysis.paper_names``.

Which published number each of ours is compared with is ``codyra.analysis.paper_metrics``; the
tables of ours named as the paper's (the single-task studies, their summary table peft, an
ablation sweep's supp_placement_matched), compared cell by cell or, on a mini, row order by row
order, are ``codyra.analysis.named_tables``.
"""

from __future__ import annotations

import math
from pathlib import Path

from codyra.analysis.common import PlainTable
from codyra.analysis.named_tables import named_table_orders, named_table_rows
from codyra.analysis.paper_metrics import (
    COMPARED,
    comparison_status,
    kendall,
    metrics,
    our_value,
    paper_row,
    paper_setting,
    ranking,
)
from codyra.analysis.published import table
from codyra.evaluation.tables import grid_layout
from codyra.experiment.pretraining import own_pretraining


def comparison_table(cfg: dict, tables_dir: Path) -> PlainTable:
    if own_pretraining(cfg):
        return ordering_table(cfg, tables_dir)
    setting = paper_setting(cfg)
    out = PlainTable(
        "paper_vs_reproduced",
        f"{cfg['benchmark']}: published (paper, {setting.benchmark or 'no benchmark'}) vs reproduced "
        f"(mean ± std over seeds {cfg['seeds']}); flagged where |difference| > 2 x spread",
        ["Metric", "Method", "Status", "Paper row", "Paper table", "Published", "Ours", "Difference", "Flag", "Note"],
    )
    layout = grid_layout(cfg)
    labels, rows = dict(layout.rows), {m: paper_row(cfg, m, cls) for m, cls in layout.classes.items()}
    cache: dict = {}
    for metric in metrics(cfg, setting):
        for method in cfg["methods"]:
            ours = our_value(tables_dir, metric, labels[method], method, cache)
            status, paper, note = comparison_status(metric, rows[method], ours, setting)
            if metric.detail and status != COMPARED:
                continue
            cells, d = ["n/a"] * 4, metric.decimals
            if paper is not None:
                cells[:2] = [
                    table(paper.source.table)["source"],
                    f"{paper.mean:.{d}f}" + (f" ± {paper.std:.{d}f}" if paper.std is not None else ""),
                ]
            if ours is not None:
                cells[2] = f"{ours[0]:.{d}f} ± {ours[1]:.{d}f}"
            flag = "n/a"
            if status == COMPARED:
                diff = ours[0] - paper.mean
                cells[3] = f"{diff:+.{d}f}"
                flag = (
                    "paper inconsistent"
                    if paper.inconsistent
                    else "DIFFERS"
                    if abs(diff) > 2 * math.hypot(ours[1], paper.std or 0.0)
                    else "ok"
                )
                note = paper.inconsistent or ""
            out.rows.append(
                [metric.name, method, status, paper.name if paper else rows[method][0] or "n/a", *cells, flag, note]
            )
    out.rows += named_table_rows(cfg, tables_dir)
    if setting.why_not:
        out.notes.append(f"no published number applies: {setting.why_not}")
    out.notes.append(
        "per-task and per-step rows are listed where compared; the headline rows list every configured method"
    )
    out.notes.append(
        "spread = sqrt(std_ours^2 + std_paper^2); with one seed and no published std any difference is flagged"
    )
    out.notes.append(
        "paper inconsistent: the paper prints a contradicting number for this cell elsewhere (Note); "
        "the difference is shown, not judged"
    )
    return out


def ordering_table(cfg: dict, tables_dir: Path) -> PlainTable:
    setting = paper_setting(cfg)
    out = PlainTable(
        "paper_vs_reproduced",
        f"{cfg['benchmark']} (mini: its own theta_0 and tasks): order of the methods per metric, "
        f"paper ({setting.benchmark}) vs ours (best first)",
        ["Metric", "Paper table", "Paper order", "Our order", "Concordant pairs", "Kendall tau"],
    )
    layout = grid_layout(cfg)
    labels, rows = dict(layout.rows), {m: paper_row(cfg, m, cls) for m, cls in layout.classes.items()}
    cache: dict = {}
    for metric in (m for m in metrics(cfg, setting) if not m.detail):
        common, left_out = [], {}
        for method in cfg["methods"]:
            ours = our_value(tables_dir, metric, labels[method], method, cache)
            status, paper, _ = comparison_status(metric, rows[method], ours, setting)
            if status == COMPARED:
                common.append((method, paper.mean, ours[0], paper.source.table))
            else:
                left_out.setdefault(status, []).append(method)
        if left_out:
            out.notes.append(
                f"{metric.name}: "
                + "; ".join(f"{status}: {', '.join(methods)}" for status, methods in left_out.items())
            )
        if len(common) < 2:
            out.notes.append(
                f"{metric.name}: fewer than two of our methods have a published value "
                f"({', '.join(dict.fromkeys(s.table for s in metric.sources)) or 'no table'})"
            )
            continue
        concordant, pairs, tau = kendall([c[1] for c in common], [c[2] for c in common])
        orders = [ranking([c[:3] for c in common], k, metric.higher_is_better) for k in (1, 2)]
        sources = ", ".join(table(t)["source"] for t in dict.fromkeys(c[3] for c in common))
        out.rows.append(
            [metric.name, sources, *orders, f"{concordant}/{pairs}", "n/a" if tau is None else f"{tau:.2f}"]
        )
    out.rows += named_table_orders(cfg, tables_dir)
    return out
