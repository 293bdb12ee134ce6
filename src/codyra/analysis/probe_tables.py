"""Tables and figures of the forward probes (:mod:`codyra.analysis.probes`)."""

from __future__ import annotations

import statistics

from codyra.analysis.common import new_figure, save_figure, trained_methods
from codyra.analysis.probe_files import interp_name, module_label, remove_name, without_name
from codyra.analysis.probes import read_probe
from codyra.analysis.retention import read_heldout
from codyra.evaluation.table_formats import Table
from codyra.family import family_of
from codyra.store.cells import read_cell
from codyra.store.paths import cell_path, figures_dir


def _with_average(accuracies: dict[str, float]) -> dict[str, float]:
    return {**accuracies, "Average": statistics.fmean(accuracies.values())}


def _interpolated(cfg: dict, method: str, seed: int, alpha: float) -> dict[str, float]:
    """Held-out accuracies of theta_alpha: the probe's, or at the endpoints theta_0 / theta_N's held-out files."""
    if alpha in (0, 1):
        i = 0 if alpha == 0 else len(cfg["tasks"])
        return {h: read_heldout(cfg, method, seed, i, h) for h in cfg["heldout_tasks"]}
    return read_probe(cfg, method, seed, interp_name(alpha))["heldout"]


def interpolation_table(cfg: dict) -> Table:
    alphas = cfg["analysis"]["interpolation_alphas"]
    table = Table(
        "interpolation",
        f"{cfg['benchmark']}: held-out accuracy (%) of theta_alpha = (1 - alpha) theta_0 + alpha theta_N "
        "(paper: supp_interp), mean ± std over seeds",
        [f"alpha={a:g}" for a in alphas],
        mark_best=False,
    )
    runs = {
        m: [[_with_average(_interpolated(cfg, m, s, a)) for a in alphas] for s in cfg["seeds"]]
        for m in trained_methods(cfg)
    }
    for block in [*cfg["heldout_tasks"], "Average"]:
        for method, per_seed in runs.items():
            table.rows.append((block, method, [[run[k][block] for run in per_seed] for k in range(len(alphas))]))
    return table


def write_interpolation_figure(cfg: dict, table: Table) -> None:
    alphas = cfg["analysis"]["interpolation_alphas"]
    fig, ax = new_figure(figsize=(5, 3.5))
    for block, method, stats in table.stats():
        if block == "Average":
            ax.plot(alphas, [s[0] for s in stats], marker="o", label=method)
    ax.set_xlabel(r"$\alpha$ (fraction of the merged update)")
    ax.set_ylabel("held-out accuracy (%), average")
    ax.set_title(f"{cfg['benchmark']}: interpolation theta_0 -> theta_N")
    ax.legend()
    save_figure(fig, figures_dir(cfg) / "interpolation")


def removal_table(cfg: dict) -> Table:
    """Per method: theta_N and theta_N without each encoder's updates (and each removed module type),
    on the stream tasks and held-out tasks."""
    n = len(cfg["tasks"])
    stream = list(cfg["tasks"])
    columns = [*stream, "stream avg", "held-out avg"]
    table = Table(
        "remove_modules",
        f"{cfg['benchmark']}: accuracy (%) of theta_N and of theta_N without the trained modules of one encoder "
        "(paper: Fig. prune_motivation), mean ± std over seeds",
        columns,
        mark_best=False,
    )
    for method in trained_methods(cfg):
        variants: dict[str, list[dict]] = {"theta_N": []}
        for seed in cfg["seeds"]:
            tasks = {
                t: read_cell(
                    cfg, cell_path(cfg, method, seed, n, j), method, seed, n, j, classifies=family_of(cfg).classifies
                )["accuracy"]
                for j, t in enumerate(stream, 1)
            }
            heldout = {h: read_heldout(cfg, method, seed, n, h) for h in cfg["heldout_tasks"]}
            variants["theta_N"].append({"tasks": tasks, "heldout": heldout})
            for tower in cfg["analysis"]["remove_towers"]:
                variants.setdefault(f"without {tower}", []).append(read_probe(cfg, method, seed, remove_name(tower)))
            for modules in cfg["analysis"]["remove_modules"]:
                variants.setdefault(f"without {module_label(modules)}", []).append(
                    read_probe(cfg, method, seed, without_name(modules))
                )
        for label, records in variants.items():
            cells = [[r["tasks"][t] for r in records] for t in stream]
            cells.append([statistics.fmean(r["tasks"].values()) for r in records])
            cells.append([statistics.fmean(r["heldout"].values()) for r in records])
            table.rows.append((method, label, cells))
    return table
