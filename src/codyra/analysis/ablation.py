"""Ablation tables and figures of the sweeps in config key ``ablations`` (codyra.experiment.sweeps).

Per sweep: Transfer / Average / Last / Forgetting and the mean active rank of the base method
and every variant (paper figures "lora_loc_ablate", "sora_ablate"), a plasticity-vs-retention
scatter (Last vs Transfer; sweeps of one numeric axis also as curves), and per task
Delta-plasticity A[j,j] - A[0,j] (what learning task j gained over zero-shot) and Forgetting
A[j,j] - A[N,j]. A sweep with ``table`` also writes that table (paper "supp_placement_matched"):
every run of the grid that differs from the sweep's base method only in the options the sweep
varies (so runs of other sweeps, e.g. the placements at the base rank, join it), labelled by
those options, with its trainable parameters. The paper's single-task probes (one task trained
from theta_0) are :mod:`codyra.analysis.single_task`.
"""

from __future__ import annotations

import statistics

import numpy as np

from codyra.analysis.common import new_figure, run_summaries, save_figure, write_any_table
from codyra.evaluation.metrics import summarize
from codyra.evaluation.table_formats import Table
from codyra.experiment.sweeps import sweep_methods, value_label
from codyra.store.paths import figures_dir

COLUMNS = ["Transfer", "Average", "Last", "Forgetting", "active rank"]


def _active_rank(cfg: dict, method: str, seed: int) -> float | None:
    summaries = run_summaries(cfg, method, seed)
    ranks = [s.get("active_rank_mean") for s in summaries]
    return None if any(r is None for r in ranks) else statistics.fmean(ranks)


def sweep_options(sweep: dict) -> list[str]:
    """The options a sweep varies (vary's, then zip's)."""
    return [*(sweep.get("vary") or {}), *(sweep.get("zip") or {})]


def sweep_axis(sweep: dict) -> tuple[str, list] | None:
    """(option, values) of a sweep along one numeric axis, also drawn as curves: the option of a
    one-option ``vary``, or the first option of a ``zip``-only sweep; else None."""
    vary, together = sweep.get("vary") or {}, sweep.get("zip") or {}
    if len(vary) == 1 and not together:
        option, values = next(iter(vary.items()))
    elif together and not vary:
        option, values = next(iter(together.items()))
    else:
        return None
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return (option, values) if numeric else None


def sweep_rows(cfg: dict, name: str, runs: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """[(method, its options)] of a sweep: the base method (when in the grid) and its variants."""
    base = cfg["ablations"][name]["method"]
    rows = [(base, {})] if base in runs else []
    return rows + sweep_methods(cfg, name)


def ablation_table(cfg: dict, name: str, runs: dict[str, list[dict]]) -> Table:
    table = Table(
        f"ablation_{name}",
        f"{cfg['benchmark']}: ablation {name} ({cfg['ablations'][name]['method']} varying "
        f"{', '.join(sweep_options(cfg['ablations'][name]))}), mean ± std over seeds",
        COLUMNS,
        higher_is_better={"Forgetting": False},
    )
    for method, _ in sweep_rows(cfg, name, runs):
        summaries = [summarize(m["A"]) for m in runs[method]]
        cells = [[s[c.lower()] for s in summaries] for c in COLUMNS[:4]]
        ranks = [_active_rank(cfg, method, s) for s in cfg["seeds"]]
        table.rows.append(("", method, cells + [None if None in ranks else ranks]))
    return table


def plasticity_forgetting(A, j: int) -> tuple[float, float | None]:
    """Of 0-based stream task j in accuracy matrix A ((N+1) x N): Delta-plasticity A[j+1, j] - A[0, j]
    and Forgetting A[j+1, j] - A[N, j] (None for the last task, never followed by another)."""
    A = np.asarray(A, dtype=float)
    n = A.shape[1]
    return float(A[j + 1, j] - A[0, j]), None if j == n - 1 else float(A[j + 1, j] - A[n, j])


def per_task_table(cfg: dict, name: str, runs: dict[str, list[dict]]) -> Table:
    table = Table(
        f"ablation_{name}_per_task",
        f"{cfg['benchmark']}: ablation {name}, per task: Delta-plasticity A[j,j] - A[0,j] (higher is better) "
        "and Forgetting A[j,j] - A[N,j] (lower is better), mean ± std over seeds",
        ["Delta-plasticity", "Forgetting"],
        higher_is_better={"Forgetting": False},
    )
    for j, task in enumerate(cfg["tasks"]):
        for method, _ in sweep_rows(cfg, name, runs):
            plasticity, forgetting = zip(*(plasticity_forgetting(m["A"], j) for m in runs[method]), strict=True)
            table.rows.append((task, method, [list(plasticity), None if None in forgetting else list(forgetting)]))
    return table


def write_ablation_figure(cfg: dict, name: str, table: Table) -> None:
    stats = {label: s for _, label, s in table.stats()}
    fig, ax = new_figure(figsize=(5.5, 4))
    for label, s in stats.items():
        ax.scatter(s[2][0], s[0][0])
        ax.annotate(label, (s[2][0], s[0][0]), fontsize=6)
    ax.set_xlabel("Last (%): adaptation")
    ax.set_ylabel("Transfer (%): retention of zero-shot ability")
    ax.set_title(f"{cfg['benchmark']}: ablation {name}")
    save_figure(fig, figures_dir(cfg) / f"ablation_{name}")
    axis = sweep_axis(cfg["ablations"][name])
    if axis is not None:
        option, values = axis
        variants = [m for m, _ in sweep_methods(cfg, name)]
        fig, ax = new_figure(figsize=(5, 3.5))
        for col, metric in enumerate(COLUMNS[:4]):
            points = [stats[v][col] for v in variants]
            if all(p is not None for p in points):
                ax.plot(values, [p[0] for p in points], marker="o", label=metric)
        ax.set_xlabel(option)
        ax.set_ylabel("%")
        ax.set_title(f"{cfg['benchmark']}: ablation {name}")
        ax.legend()
        save_figure(fig, figures_dir(cfg) / f"ablation_{name}_curve")


def option_label(options: dict, keys: list[str]) -> str:
    """``placement=attn, rank=36``: a run's row in a sweep's ``table``."""
    return ", ".join(f"{k}={value_label(options[k])}" for k in keys if k in options)


def matched_runs(cfg: dict, name: str) -> list[str]:
    """The grid's runs differing from sweep ``name``'s base method only in the options it varies."""
    sweep = cfg["ablations"][name]
    base, keys = cfg["method_configs"][sweep["method"]], set(sweep_options(sweep))
    return [
        m
        for m in cfg["methods"]
        if {k for k in base.keys() | cfg["method_configs"][m].keys() if base.get(k) != cfg["method_configs"][m].get(k)}
        <= keys
    ]


def matched_table(cfg: dict, name: str, runs: dict[str, list[dict]]) -> Table:
    sweep = cfg["ablations"][name]
    keys = sweep_options(sweep)
    columns = ["trainable params", *COLUMNS]
    table = Table(
        sweep["table"],
        f"{cfg['benchmark']}: {sweep['method']} and every run differing from it only in {', '.join(keys)} "
        "(paper: supp_placement_matched), mean ± std over seeds",
        columns,
        higher_is_better={"Forgetting": False},
    )
    for method in matched_runs(cfg, name):
        summaries = [summarize(m["A"]) for m in runs[method]]
        params = [[s.get("trainable_params") for s in run_summaries(cfg, method, seed)] for seed in cfg["seeds"]]
        cells = [None if any(None in p for p in params) else [statistics.fmean(p) for p in params]]
        cells += [[s[c.lower()] for s in summaries] for c in COLUMNS[:4]]
        ranks = [_active_rank(cfg, method, s) for s in cfg["seeds"]]
        label = option_label(cfg["method_configs"][method], keys)
        table.rows.append(("", label, cells + [None if None in ranks else ranks]))
    return table


def write_ablations(cfg: dict, runs: dict[str, list[dict]]) -> None:
    for name in cfg["ablations"]:
        table = ablation_table(cfg, name, runs)
        write_any_table(cfg, table)
        write_any_table(cfg, per_task_table(cfg, name, runs))
        write_ablation_figure(cfg, name, table)
        if "table" in cfg["ablations"][name]:
            write_any_table(cfg, matched_table(cfg, name, runs))


def ablation_outputs(cfg: dict) -> tuple[list[str], list[str]]:
    """(table names, figure stems) ``write_ablations`` produces (the workflow declares them)."""
    tables, figures = [], []
    for name, sweep in cfg["ablations"].items():
        tables += [f"ablation_{name}", f"ablation_{name}_per_task"]
        figures.append(f"ablation_{name}")
        if sweep_axis(sweep) is not None:
            figures.append(f"ablation_{name}_curve")
        if "table" in sweep:
            tables.append(sweep["table"])
    return tables, figures
