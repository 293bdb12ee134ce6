"""Amplification factors of low-rank updates (paper figure "supp_amp").

As Hu et al. define it in the LoRA paper (Sec. 7.3), per adapted matrix:
Amp = ||dW||_F / ||U_r^T W V_r||_F, with U_r, V_r the top-r left and right singular vectors of
dW and W the weight the update was trained from: theta_0's for task 1 (the paper's figure: one
task, Aircraft, EuroSAT or Pets, trained from the pretrained model), theta_{i-1}'s for task i of
a stream. A large factor means the update amplifies directions that W barely uses.

r is the matrix's stored rank (LoRA's r; CoDyRA's surviving components), capped by the config
key ``analysis.amplification_rank`` when set (the paper's "number of interested ranks"). A matrix
whose update is zero (CoDyRA pruned every component) amplifies nothing: 0. The figures lay the
factors out like the rank heatmaps (module kind x layer, one panel per encoder and task); the
table averages them per encoder and module kind.
"""

from __future__ import annotations

import statistics

import torch

from codyra.analysis.common import adapter_methods, run_updates
from codyra.analysis.rank import matrices, write_heatmaps
from codyra.evaluation.table_formats import Table
from codyra.store.paths import figures_dir
from codyra.store.updates import TaskUpdate, apply_update, task_summary


def amplification(weight: torch.Tensor, delta: torch.Tensor, rank: int | None = None) -> float:
    """||delta||_F / ||U_r^T weight V_r||_F in float64; r = delta's numerical rank, capped by ``rank``."""
    if weight.shape != delta.shape or delta.ndim != 2:
        raise ValueError(
            f"amplification needs two matrices of one shape, got {tuple(weight.shape)} and {tuple(delta.shape)}"
        )
    delta = delta.double()
    u, s, vh = torch.linalg.svd(delta, full_matrices=False)
    r = int((s > s.max() * max(delta.shape) * torch.finfo(delta.dtype).eps).sum())  # numerical rank, as matrix_rank
    if rank is not None:
        r = min(r, rank)
    if r == 0:
        return 0.0
    projected = u[:, :r].T @ weight.double() @ vh[:r].T
    return float(torch.linalg.matrix_norm(delta) / torch.linalg.matrix_norm(projected))


def update_amplification(model: torch.nn.Module, update: TaskUpdate, rank: int | None = None) -> dict[str, float]:
    """Target name -> amplification factor of a ``lora`` update against ``model``'s current weights."""
    params = dict(model.named_parameters())
    factors = {}
    for name in update.entries:  # one delta at a time: a 7B model's are 26 GB at once
        param, rows, delta = update.dense_delta(name)
        weight = params[param].detach()
        if rows is not None:
            weight = weight[rows[0] : rows[1]]
        factors[name] = amplification(weight, delta, rank)
    return factors


def run_amplification(cfg: dict, method: str, seed: int, theta_0: torch.nn.Module) -> list[dict[str, float]]:
    """Per task of the run: target -> factor, each update against the weights it was trained from.
    ``theta_0`` is merged with the run's updates in task order (pass a fresh copy)."""
    rank = cfg["analysis"]["amplification_rank"]
    per_task = []
    for update in run_updates(cfg, method, seed):
        per_task.append(update_amplification(theta_0, update, rank))
        apply_update(theta_0, update)
    return per_task


def amplification_table(cfg: dict, factors: dict[str, list[list[dict[str, float]]]]) -> Table:
    """Rows (method, encoder / module kind), columns tasks: mean factor over the matrices of that
    kind, mean ± std over seeds. ``factors``: method -> per seed -> per task -> target -> factor."""
    tasks = list(cfg["tasks"])
    table = Table(
        "amplification",
        f"{cfg['benchmark']}: amplification factor ||dW||_F / ||U^T W V||_F of each task's update, mean over "
        f"the matrices of an encoder's module kind (paper: supp_amp), mean ± std over seeds {cfg['seeds']}",
        tasks,
        mark_best=False,
        decimals=2,
    )
    for method, runs in factors.items():
        kinds = matrices(task_summary(cfg, method, cfg["seeds"][0], 1))
        groups = list(dict.fromkeys((m["tower"], m["kind"]) for m in kinds.values()))
        for tower, kind in groups:
            names = [n for n, m in kinds.items() if (m["tower"], m["kind"]) == (tower, kind)]
            cells = [[statistics.fmean(run[t][n] for n in names) for run in runs] for t in range(len(tasks))]
            table.rows.append((method, f"{tower} {kind}", cells))
    return table


def write_amplification(cfg: dict) -> None:
    from codyra.analysis.common import write_any_table
    from codyra.family import family_of

    family = family_of(cfg)
    factors = {}
    for method in adapter_methods(cfg):
        factors[method] = []
        for seed in cfg["seeds"]:
            per_task = run_amplification(cfg, method, seed, family.pretrained(cfg).model)
            write_heatmaps(
                [task_summary(cfg, method, seed, t + 1) for t in range(len(per_task))],
                per_task,
                vmax=max((v for task in per_task for v in task.values()), default=0.0) or 1.0,
                label="amplification factor",
                stem=figures_dir(cfg) / f"amplification_{method}_seed{seed}",
            )
            factors[method].append(per_task)
    write_any_table(cfg, amplification_table(cfg, factors))
