"""Which published number each of our numbers is compared with: the config's paper benchmark and
setting, each method's paper row, the metrics of the benchmark's tables with their published
sources, our value of a metric read back from the CSV tables the DAG wrote, and the status of each
(method, metric) pair; with the two rankings a mini benchmark compares instead (Kendall's tau)."""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from codyra.analysis import retention
from codyra.analysis.published import benchmarks, inconsistency, mean_std, table, tables_of, value
from codyra.evaluation.tables import AVERAGE, FORGETTING, MEANS, OP
from codyra.experiment.pretraining import own_pretraining
from codyra.family import family_of
from codyra.methods import method_class
from codyra.methods.base import Method

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


def paper_row(cfg: dict, method: str, cls: type[Method] | None = None) -> tuple[str | None, str]:
    """(the paper's row of ``method``, or None and why it has none); ``cls``: the method's class
    where the caller has resolved it."""
    from codyra.experiment.sweeps import variant_names

    explicit = cfg["analysis"].get("paper_names", {})
    if method in explicit:
        return explicit[method], ""
    if method in variant_names(cfg):
        return None, "an ablation variant (the paper's rows are the defaults)"
    spec = cfg["method_configs"][method]
    if cls is None:
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
    tasks = [PAPER_COLUMNS.get(t, t) for t in cfg["tasks"]]
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
    from codyra.analysis import cka, drift, magnitude  # torch: not where the workflow builds its DAG

    def sources(*candidates: Source) -> tuple[Source, ...]:
        return tuple(s for s in candidates if s.table in tables)

    tasks = list(cfg["tasks"])
    accuracy = next((t for t in ACCURACY_TABLES if t in tables), None)
    columns = table(accuracy)["columns"] if accuracy else []
    out = []
    for block in MEANS:
        for ours in [*tasks, AVERAGE]:
            paper = PAPER_COLUMNS.get(ours, ours)
            if ours != AVERAGE and paper not in columns:
                continue
            candidates = [Source("supp_training_stability", "", f"CoDyRA {block}", paper, only="CoDyRA")]
            if accuracy:
                candidates.append(Source(accuracy, block, None, paper))
                if block != "Transfer":
                    candidates.append(Source(accuracy, ZERO_SHOT_BLOCK, None, paper))
            if ours == AVERAGE:
                candidates += [Source(t, "", None, block) for t in MEANS_TABLES]
            name = block if ours == AVERAGE else f"{block} / {ours}"
            out.append(Metric(name, sources(*candidates), ("table1", block, None, ours), detail=ours != AVERAGE))
    out.append(
        Metric(
            "Forgetting",
            sources(Source("bwt_main", "", "Forgetting", None)),
            ("forgetting", "", None, FORGETTING),
            False,
        )
    )
    steps = table("drift")["columns"]  # after tasks 1, 2, 4, ..., 10
    out.append(
        Metric(
            "Drift (last task)",
            sources(Source("drift", "", None, steps[-1])),
            (drift.TABLE, "", None, drift.step_column(len(tasks), tasks[-1])),
            False,
        )
    )
    out += [
        Metric(
            f"Drift after task {t}",
            sources(Source("drift", "", None, t)),
            (drift.TABLE, "", None, drift.step_column(int(t), tasks[int(t) - 1])),
            False,
            True,
        )
        for t in steps[:-1]
        if int(t) <= len(tasks)
    ]
    for name, ours, norm_lowest, stability in (
        ("Effective rank per task", magnitude.EFF_RANK, "Effective Rank", "eff-rank"),
        ("Frobenius dW per task", magnitude.FRO_TASK, "||DeltaW||_F", "||DeltaW||_F"),
        ("Spectral norm of A", magnitude.SPECTRAL_A, None, "||A||_2"),
        ("Spectral norm of B", magnitude.SPECTRAL_B, None, "||B||_2"),
    ):
        candidates = ([Source("norm_lowest", "", None, norm_lowest)] if norm_lowest else []) + [
            Source("supp_norm_stability", "", None, stability)
        ]
        out.append(Metric(name, sources(*candidates), (magnitude.TABLE, "", None, ours), False, decimals=3))
    out.append(
        Metric(
            "CKA (mean)",
            sources(Source("supp_cka", "", "Mean", None)),
            (cka.TABLE, "", None, cka.MEAN),
            False,
            decimals=4,
        )
    )
    pairs = [r["row"] for r in table("supp_cka")["rows"] if r["row"] != "Mean"]  # "1--2", ...
    out += [
        Metric(
            f"CKA {p}",
            sources(Source("supp_cka", "", p, None)),
            (cka.TABLE, "", None, cka.pair_column(int(p.split("--")[0]))),
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
            (retention.CAPABILITY_TABLE, "", None, retention.AVERAGE),
        )
    )
    for name in cfg["heldout_tasks"]:
        if PAPER_COLUMNS.get(name, name) in table("unseen_transfer")["columns"]:
            out.append(
                Metric(
                    f"Held-out / {name}",
                    sources(Source("unseen_transfer", "", None, PAPER_COLUMNS.get(name, name))),
                    (retention.CAPABILITY_TABLE, "", None, name),
                    detail=True,
                )
            )
    tracking = "Unseen zero-shot (avg.)"
    out.append(
        Metric(
            "Held-out average at theta_0",
            sources(Source("supp_zs_tracking", "", "Pretrained (theta_0)", tracking, only="CoDyRA")),
            (retention.TRACKING_TABLE, retention.AVERAGE, None, retention.step_column(0)),
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
                    (retention.TRACKING_TABLE, retention.AVERAGE, None, retention.step_column(t)),
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
            for m in (OP, FORGETTING)  # the paper names its rows as we do
        ]
    return _clip_metrics(cfg, tables)


def our_value(tables_dir: Path, metric: Metric, label: str, method: str, cache: dict):
    """Our (mean, std, n_seeds) of ``metric`` for ``method`` (row ``label`` in the dagger-labelled tables), or None."""
    name, block, row, column = metric.ours
    if name not in cache:
        path = tables_dir / f"{name}.csv"
        cache[name] = read_csv_table(path) if path.is_file() else {}
    own = label if name in LAYOUT_TABLES else method
    return cache[name].get((block, row or own, column or own))


def comparison_status(
    metric: Metric, row: tuple[str | None, str], ours, setting: Setting
) -> tuple[str, Published | None, str]:
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


def kendall(paper: list[float], ours: list[float]) -> tuple[int, int, float | None]:
    """(concordant pairs, pairs, Kendall's tau-b or None when undefined) of two score lists (same direction)."""
    from scipy import stats

    pairs = list(itertools.combinations(range(len(paper)), 2))
    concordant = sum((paper[a] - paper[b]) * (ours[a] - ours[b]) > 0 for a, b in pairs)
    tau = stats.kendalltau(paper, ours).statistic if len(paper) > 1 else None
    return concordant, len(pairs), None if tau is None or math.isnan(tau) else float(tau)


def ranking(common: list[tuple[str, float, float]], k: int, higher_is_better: bool) -> str:
    """Methods best first by entry ``k`` (1: published, 2: ours) of (method, published, ours)."""
    ranked = sorted(common, key=lambda c: -c[k] if higher_is_better else c[k])
    return " > ".join(c[0] for c in ranked)
