"""Ablation tables and figures of the sweeps in config key ``ablations`` (codyra.experiment.sweeps).

Per sweep: Transfer / Average / Last / Forgetting and the mean active rank of the base method
and every variant (paper figures "lora_loc_ablate", "sora_ablate", "lora_forgetting"), a
plasticity-vs-retention scatter (Last vs Transfer; 1-D numeric sweeps also as curves), and the
per-task table of the paper's placement ablation: Delta-plasticity A[j,j] - A[0,j] (what
learning task j gained over zero-shot) and Forgetting A[j,j] - A[N,j].
"""

from __future__ import annotations

import statistics

import numpy as np

from codyra.analysis.common import figures_dir, new_figure, run_summaries, save_figure, write_any_table
from codyra.evaluation.metrics import summarize
from codyra.evaluation.tables import Table
from codyra.experiment.sweeps import sweep_methods

COLUMNS = ["Transfer", "Average", "Last", "Forgetting", "active rank"]


def _active_rank(cfg: dict, method: str, seed: int) -> float | None:
    summaries = run_summaries(cfg, method, seed)
    ranks = [s.get("active_rank_mean") for s in summaries]
    return None if any(r is None for r in ranks) else statistics.fmean(ranks)


def numeric_1d(sweep: dict) -> bool:
    """A sweep of one option over numbers: also drawn as curves over that option."""
    (values, *more) = sweep["vary"].values()
    return not more and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def sweep_rows(cfg: dict, name: str, runs: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """[(method, its options)] of a sweep: the base method (when in the grid) and its variants."""
    base = cfg["ablations"][name]["method"]
    rows = [(base, {})] if base in runs else []
    return rows + sweep_methods(cfg, name)


def ablation_table(cfg: dict, name: str, runs: dict[str, list[dict]]) -> Table:
    table = Table(
        f"ablation_{name}",
        f"{cfg['benchmark']}: ablation {name} ({cfg['ablations'][name]['method']} varying "
        f"{', '.join(cfg['ablations'][name]['vary'])}), mean ± std over seeds",
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
            table.rows.append(
                (task["name"], method, [list(plasticity), None if None in forgetting else list(forgetting)])
            )
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
    vary = cfg["ablations"][name]["vary"]
    if numeric_1d(cfg["ablations"][name]):
        values = next(iter(vary.values()))
        variants = [m for m, _ in sweep_methods(cfg, name)]
        fig, ax = new_figure(figsize=(5, 3.5))
        for col, metric in enumerate(COLUMNS[:4]):
            points = [stats[v][col] for v in variants]
            if all(p is not None for p in points):
                ax.plot(values, [p[0] for p in points], marker="o", label=metric)
        ax.set_xlabel(next(iter(vary)))
        ax.set_ylabel("%")
        ax.set_title(f"{cfg['benchmark']}: ablation {name}")
        ax.legend()
        save_figure(fig, figures_dir(cfg) / f"ablation_{name}_curve")


def write_ablations(cfg: dict, runs: dict[str, list[dict]], out) -> None:
    for name in cfg["ablations"]:
        table = ablation_table(cfg, name, runs)
        write_any_table(out, table)
        write_any_table(out, per_task_table(cfg, name, runs))
        write_ablation_figure(cfg, name, table)


def ablation_outputs(cfg: dict) -> tuple[list[str], list[str]]:
    """(table names, figure stems) ``write_ablations`` produces (the workflow declares them)."""
    tables, figures = [], []
    for name, sweep in cfg["ablations"].items():
        tables += [f"ablation_{name}", f"ablation_{name}_per_task"]
        figures.append(f"ablation_{name}")
        if numeric_1d(sweep):
            figures.append(f"ablation_{name}_curve")
    return tables, figures
