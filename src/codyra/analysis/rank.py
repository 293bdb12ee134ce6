"""Rank activation (paper figures "aircraft_rank_stat", "pets_rank_stat", appendix heatmaps).

Per task, the active rank of every adapted matrix, read from the task summaries
(``matrices``: tower, kind, active rank), laid out as heatmaps module kind x layer, one per
encoder, and summarised per (encoder, module kind): mean active rank over the matrices of
that kind, per task.
"""

from __future__ import annotations

import re
import statistics

import numpy as np

from codyra.analysis.common import new_figure, run_summaries, save_figure
from codyra.evaluation.table_formats import Table
from codyra.store.io import ResultError
from codyra.store.paths import figures_dir

_LAYER = re.compile(r"\.(\d+)\.")


def layer_of(name: str) -> int:
    """The block index in a target name (``visual.transformer.resblocks.3.attn.q`` -> 3)."""
    match = _LAYER.search(name)
    if match is None:
        raise ResultError(f"target {name!r} has no layer index; rank heatmaps need targets inside numbered blocks")
    return int(match[1])


def matrices(summary: dict) -> dict[str, dict]:
    found = summary.get("matrices")
    if not isinstance(found, dict) or not found:
        raise ResultError(
            f"summary of task {summary.get('task_index')} of {summary.get('method')} seed {summary.get('seed')} "
            "has no per-matrix active ranks ('matrices'); rank activation applies to adapter methods: "
            "retrain that task with the current code"
        )
    return found


def kind_layer_grid(summary: dict, tower: str, values: dict[str, float]) -> tuple[list[str], list[int], np.ndarray]:
    """(module kinds, layers, ``values`` of the tower's matrices laid out [kind, layer]; NaN where a
    kind has no matrix in a layer)."""
    entries = {name: m for name, m in matrices(summary).items() if m["tower"] == tower}
    kinds = list(dict.fromkeys(m["kind"] for m in entries.values()))
    layers = sorted({layer_of(name) for name in entries})
    grid = np.full((len(kinds), len(layers)), np.nan)
    for name, m in entries.items():
        grid[kinds.index(m["kind"]), layers.index(layer_of(name))] = values[name]
    return kinds, layers, grid


def towers(summary: dict) -> list[str]:
    return list(dict.fromkeys(m["tower"] for m in matrices(summary).values()))


def rank_stats_table(cfg: dict, method: str) -> Table:
    """Rows (encoder, module kind), columns tasks + all tasks: mean active rank, mean ± std over seeds."""
    tasks = list(cfg["tasks"])
    runs = [run_summaries(cfg, method, s) for s in cfg["seeds"]]
    groups = list(dict.fromkeys((m["tower"], m["kind"]) for m in matrices(runs[0][0]).values()))
    table = Table(
        f"rank_{method}",
        f"{cfg['benchmark']} / {method}: mean active rank per encoder and module kind after each task "
        "(paper: rank activation statistics), mean ± std over seeds",
        tasks + ["all tasks"],
        mark_best=False,
        decimals=2,
    )
    for tower, kind in groups:

        def mean_rank(summaries, tower=tower, kind=kind):
            return statistics.fmean(
                m["active_rank"]
                for s in summaries
                for m in matrices(s).values()
                if (m["tower"], m["kind"]) == (tower, kind)
            )

        cells = [[mean_rank([run[t]]) for run in runs] for t in range(len(tasks))]
        table.rows.append((tower, kind, cells + [[mean_rank(run) for run in runs]]))
    return table


def write_heatmaps(summaries: list[dict], values: list[dict[str, float]], *, vmax: float, label: str, stem) -> None:
    """Heatmaps of per-matrix ``values`` (target -> value, one dict per task), module kind x layer;
    rows: tasks, columns: encoders; saved as ``stem``.png / .pdf."""
    names = towers(summaries[0])
    fig, axes = new_figure(
        len(summaries),
        len(names),
        figsize=(4.5 * len(names), 2.0 * len(summaries) + 0.6),
        squeeze=False,
        layout="constrained",
    )
    for t, (summary, task_values) in enumerate(zip(summaries, values, strict=True)):
        for c, tower in enumerate(names):
            kinds, layers, grid = kind_layer_grid(summary, tower, task_values)
            ax = axes[t][c]
            image = ax.imshow(grid, vmin=0, vmax=vmax, cmap="viridis", aspect="auto")
            ax.set_yticks(range(len(kinds)), kinds, fontsize=7)
            ax.set_xticks(range(len(layers)), layers, fontsize=7)
            ax.set_title(f"task {t + 1} ({summary['task']}), {tower}", fontsize=8)
            if t == len(summaries) - 1:
                ax.set_xlabel("layer", fontsize=8)
            if c == 0:
                ax.set_ylabel("module kind", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.6, label=label)
    save_figure(fig, stem)


def write_rank_figures(cfg: dict, method: str, seed: int) -> None:
    """Heatmaps (rows: tasks, columns: encoders) and the active-rank distribution per module kind."""
    summaries = run_summaries(cfg, method, seed)
    write_heatmaps(
        summaries,
        [{name: m["active_rank"] for name, m in matrices(s).items()} for s in summaries],
        vmax=max(m["rank_init"] for s in summaries for m in matrices(s).values()),
        label="active rank",
        stem=figures_dir(cfg) / f"rank_heatmap_{method}_seed{seed}",
    )
    fig, ax = new_figure(figsize=(6, 3.5))
    groups = list(dict.fromkeys((m["tower"], m["kind"]) for m in matrices(summaries[0]).values()))
    data = [
        [m["active_rank"] for s in summaries for m in matrices(s).values() if (m["tower"], m["kind"]) == g]
        for g in groups
    ]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(groups) + 1), [f"{t}\n{k}" for t, k in groups], fontsize=7)
    ax.set_ylabel("active rank (all tasks)")
    ax.set_title(f"{cfg['benchmark']} / {method} seed {seed}: active rank per module kind")
    save_figure(fig, figures_dir(cfg) / f"rank_distribution_{method}_seed{seed}")
