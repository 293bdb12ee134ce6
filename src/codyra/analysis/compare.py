"""Paper vs reproduced (issue 18 item 9).

Paper benchmarks: per method and metric, the published number, ours (mean ± std over seeds),
the difference, and a flag where |difference| > 2 x spread, spread = sqrt(std_ours^2 +
std_paper^2) (the paper's std where it reports one, TRACE). The mini benchmarks
(own pretrained theta_0) cannot match the paper's numbers; there the comparison is
qualitative: per metric, the order of the methods both have, ours against the paper's,
with the fraction of concordant pairs and Kendall's tau.

Our numbers come from the CSV tables the DAG wrote (``table1``, ``forgetting``, ``table2``,
``drift``, ``magnitude``, ``cka``). Our methods map to the paper's rows by kind (``LoRA (r=16)``
for kind lora with rank 16), or explicitly by config key ``analysis.paper_names``.
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from codyra.analysis.common import PlainTable
from codyra.analysis.published import mean_std, table, value
from codyra.benchmarks import own_pretraining

KIND_NAMES = {
    "zeroshot": "Zero-shot", "codyra": "CoDyRA", "seqlora": "SeqLoRA", "lwf": "LwF", "zscl": "ZSCL", "wiseft": "WiSE-FT",
    "icarl": "iCaRL", "ewc": "EWC", "gem": "GEM", "ogd": "OGD", "olora": "O-LoRA", "treelora": "TreeLoRA",
    "inflora": "InfLoRA", "l2p": "L2P", "dualprompt": "DualPrompt", "hidelora": "HiDeLoRA",
}  # fmt: skip
TRACE_BLOCKS = {
    "llama-2-7b-chat": "meta-llama / LLaMA-2-7B-Chat",
    "gemma-2b-it": "google / Gemma-2B-it",
    "llama-3.2-1b-instruct": "meta-llama / LLaMA-3-1B-Instruct",
}


def paper_name(cfg: dict, method: str) -> str | None:
    """The paper's row of ``method``; None for an ablation variant (the paper's rows are the defaults)."""
    from codyra.sweeps import variant_names

    spec = cfg["method_configs"][method]
    explicit = cfg["analysis"].get("paper_names", {})
    if method in explicit:
        return explicit[method]
    if method in variant_names(cfg):
        return None
    if spec["kind"] == "lora":
        return f"LoRA (r={spec.get('rank', 16)})"
    return KIND_NAMES.get(spec["kind"])


@dataclass(frozen=True)
class Metric:
    name: str
    table: str  # the paper's table label
    block: str
    row: str | None  # None: the paper's row is the method (else the method is the column)
    column: str | None  # None: the paper's column is the method
    ours: tuple[str, str, str | None, str | None]  # (our CSV table, block, row, column); None = the method
    higher_is_better: bool = True

    def published(self, name: str):
        try:
            return mean_std(value(self.table, self.row or name, self.column or name, self.block))
        except KeyError:
            return None


def read_csv_table(path: Path) -> dict[tuple[str, str, str], tuple[float, float, int]]:
    """(block, row, column) -> (mean, std, n_seeds) of a table CSV written by codyra.tables."""
    if not path.is_file():
        raise FileNotFoundError(f"table {path} missing: build it first (snakemake {path})")
    with path.open() as f:
        return {(r["block"], r["row"], r["column"]): (float(r["mean"]), float(r["std"]), int(r["n_seeds"])) for r in csv.DictReader(f) if r["mean"] != ""}


PAPER_COLUMNS = {"StanfordCars": "Cars"}  # our task name -> the paper's column, where they differ


def headline_metrics(cfg: dict, per_task: bool = False) -> list[Metric]:
    """The paper's headline metrics (Table 1 blocks and Forgetting; TRACE's OP and Forgetting),
    with ``per_task`` also Table 1's per-dataset columns."""
    if cfg["data"]["kind"] == "trace":
        block = TRACE_BLOCKS.get(cfg["benchmark"].removeprefix("trace-"), TRACE_BLOCKS["llama-2-7b-chat"])
        return [Metric(m, "llm_cl", block, m, None, ("table2", "", m, None), m == "OP") for m in ("OP", "Forgetting")]
    reference = cfg["analysis"].get("paper_table") or {"xtail": "few_xtail", "mtil": "few_mtil" if cfg["data"].get("fewshot") else "full_mtil"}.get(cfg["data"]["kind"], "few_xtail")
    columns = [(t["name"], PAPER_COLUMNS.get(t["name"], t["name"])) for t in cfg["tasks"]] if per_task else []
    columns = [(ours, paper) for ours, paper in columns if paper in table(reference)["columns"]] + [("Average", "Average")]
    out = [Metric(b if ours == "Average" else f"{b} / {ours}", reference, b, None, paper, ("table1", b, None, ours)) for b in ("Transfer", "Average", "Last") for ours, paper in columns]
    out.append(Metric("Forgetting", "bwt_main", "", "Forgetting", None, ("forgetting", "", None, "Forgetting"), False))
    return out


def metrics(cfg: dict) -> list[Metric]:
    """The headline metrics and, for CLIP, the analyses the paper reports for CoDyRA vs LoRA."""
    out = headline_metrics(cfg)
    if cfg["data"]["kind"] == "trace":
        return out
    last = f"{len(cfg['tasks'])}: {cfg['tasks'][-1]['name']}"
    out.append(Metric("Drift (last task)", "drift", "", None, "10", ("drift", "", None, last), False))
    out.append(Metric("Frobenius dW per task", "norm_lowest", "", None, "||DeltaW||_F", ("magnitude", "", None, "Frobenius dW (task)"), False))
    out.append(Metric("CKA (mean)", "supp_cka", "", "Mean", None, ("cka", "", None, "Mean"), False))
    return out


def _ours(tables_dir: Path, metric: Metric, method: str, cache: dict):
    name, block, row, column = metric.ours
    if name not in cache:
        path = tables_dir / f"{name}.csv"
        cache[name] = read_csv_table(path) if path.is_file() else {}
    return cache[name].get((block, row or method, column or method))


def comparison_table(cfg: dict, tables_dir: Path) -> PlainTable:
    if own_pretraining(cfg):
        return ordering_table(cfg, tables_dir)
    out = PlainTable(
        "paper_vs_reproduced",
        f"{cfg['benchmark']}: published (paper) vs reproduced (mean ± std over seeds {cfg['seeds']}); flagged where |difference| > 2 x spread",
        ["Metric", "Method", "Paper row", "Paper table", "Published", "Ours", "Difference", "Flag"],
    )
    cache: dict = {}
    for metric in headline_metrics(cfg, per_task=True):  # the paper's analyses ran on other setups than ours
        for method in cfg["methods"]:
            name = paper_name(cfg, method)
            paper = metric.published(name) if name else None
            ours = _ours(tables_dir, metric, method, cache)
            if paper is None or ours is None:
                continue
            (p, p_std), (mean, std, _) = paper, ours
            diff = mean - p
            spread = math.hypot(std, p_std or 0.0)
            flag = "DIFFERS" if abs(diff) > 2 * spread else "ok"
            published = f"{p:.2f}" + (f" ± {p_std:.2f}" if p_std is not None else "")
            out.rows.append([metric.name, method, name, table(metric.table)["source"], published, f"{mean:.2f} ± {std:.2f}", f"{diff:+.2f}", flag])
    if not out.rows:
        out.notes.append("no method of this config has a published counterpart (set analysis.paper_names to map methods to the paper's rows)")
    out.notes.append("spread = sqrt(std_ours^2 + std_paper^2); with one seed and no published std any difference is flagged")
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
    out = PlainTable(
        "paper_vs_reproduced",
        f"{cfg['benchmark']} (mini: its own theta_0 and tasks): order of the methods per metric, paper vs ours (best first)",
        ["Metric", "Paper table", "Paper order", "Our order", "Concordant pairs", "Kendall tau"],
    )
    cache: dict = {}
    for metric in metrics(cfg):
        common = []
        for method in cfg["methods"]:
            name = paper_name(cfg, method)
            paper = metric.published(name) if name else None
            ours = _ours(tables_dir, metric, method, cache)
            if paper is not None and ours is not None:
                common.append((method, paper[0], ours[0]))
        if len(common) < 2:
            out.notes.append(f"{metric.name}: fewer than two of our methods have a published value in {metric.table}")
            continue
        concordant, pairs, tau = kendall([c[1] for c in common], [c[2] for c in common])
        orders = [_order(common, k, metric.higher_is_better) for k in (1, 2)]
        out.rows.append([metric.name, table(metric.table)["source"], *orders, f"{concordant}/{pairs}", "n/a" if tau is None else f"{tau:.2f}"])
    return out
