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

Tables of ours named as the paper's (:func:`named_tables`) are compared cell by cell: the
single-task studies (config key single_task) named supp_dtd, supp_eurosat, supp_flowers,
supp_norm_matched (their numbers apply to CLIP ViT-B/16 with OpenAI's weights, the paper's task
and ImageNet as the reference set; the paper does not name supp_norm_matched's task), their
summary table peft (its accuracies per task; the parameter counts, printed to two digits, are
shown, not compared), and an
ablation sweep's ``table`` supp_placement_matched (X-TAIL's numbers, rows matched by placement and
rank). On a mini benchmark, the order of the rows per column, ours against the paper's.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from codyra.analysis.common import PlainTable
from codyra.analysis.published import benchmarks, inconsistency, mean_std, table, tables_of, value
from codyra.evaluation.tables import method_layout
from codyra.experiment.pretraining import own_pretraining
from codyra.family import family_of
from codyra.methods import method_class

COMPARED, NO_ROW, NO_NUMBER, NOT_RUN = "compared", "no published row", "no published number", "not run"
PAPER_COLUMNS = {
    "StanfordCars": "Cars",
    "ImageNet": "ImageNet-1k",
}  # our task name -> the paper's column, where they differ
LAYOUT_TABLES = (
    "table1",
    "forgetting",
    "table2",
)  # our tables labelling methods as codyra.evaluation.tables.method_layout (dagger)
ACCURACY_TABLES = (
    "few_mtil",
    "full_mtil",
    "few_xtail",
)  # Table 1's layout: blocks Transfer / Average / Last, a column per task
MEANS_TABLES = (
    "supp_olora_treelora",
    "supp_adalora",
    "supp_ours+rail",
    "blip",
)  # columns Transfer / Average / Last (means over tasks)
ZERO_SHOT_BLOCK = "CLIP zero-shot reference"  # a zero-shot model's Average and Last equal its zero-shot accuracy


def paper_row(cfg: dict, method: str) -> tuple[str | None, str]:
    """(the paper's row of ``method``, or None and why it has none)."""
    from codyra.experiment.sweeps import variant_names

    explicit = cfg["analysis"].get("paper_names", {})
    if method in explicit:
        return explicit[method], ""
    if method in variant_names(cfg):
        return None, "an ablation variant (the paper's rows are the defaults)"
    spec = cfg["method_configs"][method]
    cls = method_class(spec["kind"])
    if "paper_row" not in vars(cls):
        return None, f"method kind {spec['kind']} declares no paper_row (codyra.methods.{spec['kind']})"
    if cls.paper_row is None:
        return None, f"the paper has no row for method kind {spec['kind']}"
    return cls.row_label(spec, cls.paper_row), ""


@dataclass(frozen=True)
class Setting:
    benchmark: str | None  # the paper's benchmark nearest the config (None: none of its data kind and shots)
    block: str  # TRACE: Table 2's block of the backbone
    why_not: str | None  # why the paper's numbers do not apply to the config, None where they do


def paper_setting(cfg: dict) -> Setting:
    """The paper benchmark a config reproduces: by model family, data kind and shots (or
    ``analysis.paper_benchmark``), its numbers applying only to the paper's task order and
    backbones. A mini benchmark is ranked against X-TAIL (CLIP) or TRACE's LLaMA-2 block,
    whatever its tasks."""
    kind, mini = cfg["data"]["kind"], own_pretraining(cfg) is not None
    family = family_of(cfg).name
    name = cfg["analysis"].get("paper_benchmark")
    if name is not None and name not in benchmarks():
        raise ValueError(
            f"config key analysis.paper_benchmark: {name!r} is not one of the paper's benchmarks "
            f"({', '.join(benchmarks())})"
        )
    if name is None and mini:
        name = "trace" if kind == "trace" else "xtail-16shot"
    if name is None:
        shots = cfg["data"].get("fewshot")
        name = next(
            (
                n
                for n, b in benchmarks().items()
                if b["family"] == family and b["data"] == kind and b.get("fewshot") == shots
            ),
            None,
        )
        if name is None:
            return Setting(None, "", f"the paper reports no {kind} benchmark with fewshot {shots} for a {family} model")
    bench = benchmarks()[name]
    blocks = list(bench.get("backbones", {}))
    block = next(
        (b for b, model in bench.get("backbones", {}).items() if model == cfg["model"].get("name")),
        blocks[0] if mini and blocks else "",
    )
    if mini:
        return Setting(name, block, None)
    tasks = [PAPER_COLUMNS.get(t["name"], t["name"]) for t in cfg["tasks"]]
    if tasks != bench["tasks"]:
        return Setting(
            name,
            block,
            f"the paper's {name} numbers are for the task order {', '.join(bench['tasks'])}; "
            f"this config trains {', '.join(tasks)}",
        )
    if blocks and not block:
        return Setting(
            name,
            block,
            f"the paper's {name} numbers are for the backbones {', '.join(bench['backbones'].values())}; "
            f"this config's model is {cfg['model'].get('name')}",
        )
    return Setting(name, block, None)


@dataclass(frozen=True)
class Source:
    """Where the paper prints a metric: a table's cell at (block, row, column); row or column None = the method's."""

    table: str
    block: str
    row: str | None
    column: str | None
    only: str | None = None  # the cell holds this paper row's number only (row and column fixed)


@dataclass(frozen=True)
class Published:
    source: Source
    name: str  # the method's name in that table
    mean: float
    std: float | None
    inconsistent: str | None


@dataclass(frozen=True)
class Metric:
    name: str
    sources: tuple[Source, ...]  # the first that has the method's number gives it
    ours: tuple[str, str, str | None, str | None]  # (our CSV table, block, row, column); None = the method
    higher_is_better: bool = True
    detail: bool = False  # a per-task or per-step breakdown: listed where compared
    decimals: int = 2  # as the paper prints it

    def published(self, name: str) -> Published | None:
        for s in self.sources:
            if s.only is not None and s.only != name:
                continue
            alias = table(s.table).get("aliases", {}).get(name, name)
            row, column = s.row or alias, s.column or alias
            try:
                stat = mean_std(value(s.table, row, column, s.block))
            except KeyError:
                continue
            if stat is not None:
                return Published(s, alias, *stat, inconsistency(s.table, row, column, s.block))
        return None


def read_csv_table(path: Path) -> dict[tuple[str, str, str], tuple[float, float, int]]:
    """(block, row, column) -> (mean, std, n_seeds) of a table CSV written by codyra.evaluation.tables."""
    if not path.is_file():
        raise FileNotFoundError(f"table {path} missing: build it first (snakemake {path})")
    with path.open() as f:
        return {
            (r["block"], r["row"], r["column"]): (float(r["mean"]), float(r["std"]), int(r["n_seeds"]))
            for r in csv.DictReader(f)
            if r["mean"] != ""
        }


def _clip_metrics(cfg: dict, tables: list[str]) -> list[Metric]:
    def sources(*candidates: Source) -> tuple[Source, ...]:
        return tuple(s for s in candidates if s.table in tables)

    tasks = [t["name"] for t in cfg["tasks"]]
    accuracy = next((t for t in ACCURACY_TABLES if t in tables), None)
    columns = table(accuracy)["columns"] if accuracy else []
    out = []
    for block in ("Transfer", "Average", "Last"):
        for ours in [*tasks, "Average"]:
            paper = PAPER_COLUMNS.get(ours, ours)
            if ours != "Average" and paper not in columns:
                continue
            candidates = [Source("supp_training_stability", "", f"CoDyRA {block}", paper, only="CoDyRA")]
            if accuracy:
                candidates.append(Source(accuracy, block, None, paper))
                if block != "Transfer":
                    candidates.append(Source(accuracy, ZERO_SHOT_BLOCK, None, paper))
            if ours == "Average":
                candidates += [Source(t, "", None, block) for t in MEANS_TABLES]
            name = block if ours == "Average" else f"{block} / {ours}"
            out.append(Metric(name, sources(*candidates), ("table1", block, None, ours), detail=ours != "Average"))
    out.append(
        Metric(
            "Forgetting",
            sources(Source("bwt_main", "", "Forgetting", None)),
            ("forgetting", "", None, "Forgetting"),
            False,
        )
    )
    steps = table("drift")["columns"]  # after tasks 1, 2, 4, ..., 10
    out.append(
        Metric(
            "Drift (last task)",
            sources(Source("drift", "", None, steps[-1])),
            ("drift", "", None, f"{len(tasks)}: {tasks[-1]}"),
            False,
        )
    )
    out += [
        Metric(
            f"Drift after task {t}",
            sources(Source("drift", "", None, t)),
            ("drift", "", None, f"{t}: {tasks[int(t) - 1]}"),
            False,
            True,
        )
        for t in steps[:-1]
        if int(t) <= len(tasks)
    ]
    for name, ours, norm_lowest, stability in (
        ("Effective rank per task", "eff. rank", "Effective Rank", "eff-rank"),
        ("Frobenius dW per task", "Frobenius dW (task)", "||DeltaW||_F", "||DeltaW||_F"),
        ("Spectral norm of A", "spectral A", None, "||A||_2"),
        ("Spectral norm of B", "spectral B", None, "||B||_2"),
    ):
        candidates = ([Source("norm_lowest", "", None, norm_lowest)] if norm_lowest else []) + [
            Source("supp_norm_stability", "", None, stability)
        ]
        out.append(Metric(name, sources(*candidates), ("magnitude", "", None, ours), False, decimals=3))
    out.append(
        Metric(
            "CKA (mean)", sources(Source("supp_cka", "", "Mean", None)), ("cka", "", None, "Mean"), False, decimals=4
        )
    )
    pairs = [r["row"] for r in table("supp_cka")["rows"] if r["row"] != "Mean"]  # "1--2", ...
    out += [
        Metric(
            f"CKA {p}",
            sources(Source("supp_cka", "", p, None)),
            ("cka", "", None, p.replace("--", "-")),
            False,
            True,
            4,
        )
        for p in pairs
        if int(p.split("--")[1]) <= len(tasks)
    ]
    out.append(
        Metric(
            "Held-out average",
            sources(Source("unseen_transfer", "", None, "Average")),
            ("general_capability", "", None, "Average"),
        )
    )
    for name in cfg["heldout_tasks"]:
        if PAPER_COLUMNS.get(name, name) in table("unseen_transfer")["columns"]:
            out.append(
                Metric(
                    f"Held-out / {name}",
                    sources(Source("unseen_transfer", "", None, PAPER_COLUMNS.get(name, name))),
                    ("general_capability", "", None, name),
                    detail=True,
                )
            )
    tracking = "Unseen zero-shot (avg.)"
    out.append(
        Metric(
            "Held-out average at theta_0",
            sources(Source("supp_zs_tracking", "", "Pretrained (theta_0)", tracking, only="CoDyRA")),
            ("heldout_tracking", "Average", None, "theta_0"),
            detail=True,
        )
    )
    for row in (r["row"] for r in table("supp_zs_tracking")["rows"] if r["row"].startswith("After task ")):
        t = int(row.removeprefix("After task "))
        if t <= len(tasks):
            out.append(
                Metric(
                    f"Held-out average {row.lower()}",
                    sources(Source("supp_zs_tracking", "", row, tracking, only="CoDyRA")),
                    ("heldout_tracking", "Average", None, f"after {t}"),
                    detail=True,
                )
            )
    return out


def metrics(cfg: dict, setting: Setting) -> list[Metric]:
    """Every metric the paper reports for the config's model family, with its sources among the
    tables of the config's benchmark (none where the paper's numbers do not apply)."""
    tables = tables_of(setting.benchmark) if setting.benchmark and setting.why_not is None else []
    if cfg["data"]["kind"] == "trace":
        return [
            Metric(
                m,
                (Source("llm_cl", setting.block, m, None),) if "llm_cl" in tables else (),
                ("table2", "", m, None),
                m == "OP",
            )
            for m in ("OP", "Forgetting")
        ]
    return _clip_metrics(cfg, tables)


def _ours(tables_dir: Path, metric: Metric, label: str, method: str, cache: dict):
    """Our (mean, std, n_seeds) of ``metric`` for ``method`` (row ``label`` in the dagger-labelled tables), or None."""
    name, block, row, column = metric.ours
    if name not in cache:
        path = tables_dir / f"{name}.csv"
        cache[name] = read_csv_table(path) if path.is_file() else {}
    own = label if name in LAYOUT_TABLES else method
    return cache[name].get((block, row or own, column or own))


def _status(metric: Metric, row: tuple[str | None, str], ours, setting: Setting) -> tuple[str, Published | None, str]:
    """(status, the published number or None, note)."""
    name, why = row
    if name is None:
        return NO_ROW, None, why
    paper = metric.published(name)
    if paper is None:
        where = ", ".join(dict.fromkeys(s.table for s in metric.sources)) or f"the tables of {setting.benchmark}"
        return NO_NUMBER, None, setting.why_not or f"no {name} number in {where}"
    if ours is None:
        return NOT_RUN, paper, f"no value in our {metric.ours[0]}.csv"
    return COMPARED, paper, ""


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
    labels = dict(method_layout(cfg, cfg["methods"])[0])
    rows = {m: paper_row(cfg, m) for m in cfg["methods"]}
    cache: dict = {}
    for metric in metrics(cfg, setting):
        for method in cfg["methods"]:
            ours = _ours(tables_dir, metric, labels[method], method, cache)
            status, paper, note = _status(metric, rows[method], ours, setting)
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


def kendall(paper: list[float], ours: list[float]) -> tuple[int, int, float | None]:
    """(concordant pairs, pairs, Kendall's tau-b or None when undefined) of two score lists (same direction)."""
    from scipy import stats

    pairs = list(itertools.combinations(range(len(paper)), 2))
    concordant = sum((paper[a] - paper[b]) * (ours[a] - ours[b]) > 0 for a, b in pairs)
    tau = stats.kendalltau(paper, ours).statistic if len(paper) > 1 else None
    return concordant, len(pairs), None if tau is None or math.isnan(tau) else float(tau)


def _order(common: list[tuple[str, float, float]], k: int, higher_is_better: bool) -> str:
    """Methods best first by entry ``k`` (1: published, 2: ours) of (method, published, ours)."""
    ranked = sorted(common, key=lambda c: -c[k] if higher_is_better else c[k])
    return " > ".join(c[0] for c in ranked)


def ordering_table(cfg: dict, tables_dir: Path) -> PlainTable:
    setting = paper_setting(cfg)
    out = PlainTable(
        "paper_vs_reproduced",
        f"{cfg['benchmark']} (mini: its own theta_0 and tasks): order of the methods per metric, "
        f"paper ({setting.benchmark}) vs ours (best first)",
        ["Metric", "Paper table", "Paper order", "Our order", "Concordant pairs", "Kendall tau"],
    )
    labels = dict(method_layout(cfg, cfg["methods"])[0])
    rows = {m: paper_row(cfg, m) for m in cfg["methods"]}
    cache: dict = {}
    for metric in (m for m in metrics(cfg, setting) if not m.detail):
        common, left_out = [], {}
        for method in cfg["methods"]:
            ours = _ours(tables_dir, metric, labels[method], method, cache)
            status, paper, _ = _status(metric, rows[method], ours, setting)
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
        orders = [_order([c[:3] for c in common], k, metric.higher_is_better) for k in (1, 2)]
        sources = ", ".join(table(t)["source"] for t in dict.fromkeys(c[3] for c in common))
        out.rows.append(
            [metric.name, sources, *orders, f"{concordant}/{pairs}", "n/a" if tau is None else f"{tau:.2f}"]
        )
    out.rows += named_table_orders(cfg, tables_dir)
    return out


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
            orders = [_order(common, k, higher) for k in (1, 2)]
            tau_text = "n/a" if tau is None else f"{tau:.2f}"
            out.append([f"{name} / {column}", table(name)["source"], *orders, f"{concordant}/{pairs}", tau_text])
    return out
