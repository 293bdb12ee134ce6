"""The norm-matched probe (paper appendix table "supp_norm_matched").

Methods of kind ``lora`` with ``norm_target`` (codyra.methods.lora) were trained with a penalty
pulling each task's ||dW||_F to a target (a number, or the median of their reference methods'
natural norms on the same task and seed). Per method, mean over the stream's tasks: effective
rank, achieved ||dW||_F, the target, Delta-plasticity A[j,j] - A[0,j] and Forgetting
A[j,j] - A[N,j] (as the placement ablation; the paper's probe trains a single task, the stream
averages them over its tasks); the reference methods as rows beside them, at their natural norm.
A target missed by more than ``MISS`` (relative) is named in the caption: the penalty is too weak.
A matched run that learnt next to nothing (``stalled``) is named too: the penalty is too strong.
"""

from __future__ import annotations

import statistics

from codyra.analysis.ablation import plasticity_forgetting
from codyra.analysis.common import new_figure, norm_methods, run_summaries, save_figure
from codyra.evaluation.table_formats import Table
from codyra.methods.lora import norm_references
from codyra.store.paths import figures_dir

COLUMNS = ["eff. rank", "Frobenius dW (task)", "target", "Delta-plasticity", "Forgetting"]
MISS = 0.1
# a matched run whose Delta-plasticity is below this fraction of the natural runs' mean learnt next
# to nothing: Adam's steps followed the penalty's gradient, not the task's
STALLED = 0.25


def run_row(summaries: list[dict], A) -> list[float | None]:
    """One run's cells: the COLUMNS, each a mean over tasks (target None for a natural run)."""
    n = len(summaries)
    pairs = [plasticity_forgetting(A, j) for j in range(n)]
    targets = [s.get("norm_target") for s in summaries]
    return [
        statistics.fmean(s["active_rank_mean"] for s in summaries),
        statistics.fmean(s["dW_fro_total"] for s in summaries),
        None if None in targets else statistics.fmean(targets),
        statistics.fmean(p for p, _ in pairs),
        statistics.fmean(f for _, f in pairs[:-1]) if n > 1 else None,
    ]


def missed(summaries: list[dict]) -> list[int]:
    """The tasks (1-based) whose achieved ||dW||_F is more than MISS away from their target."""
    return [s["task_index"] for s in summaries if abs(s["dW_fro_total"] - s["norm_target"]) > MISS * s["norm_target"]]


def stalled(plasticity: float, natural: list[float]) -> bool:
    """Whether a norm-matched run's Delta-plasticity is below STALLED of its natural runs' mean
    (none, or a mean that is not positive: nothing to compare with)."""
    baseline = statistics.fmean(natural) if natural else 0.0
    return baseline > 0 and plasticity < STALLED * baseline


def caption_notes(misses: list[str], stalls: list[str]) -> str:
    """The caption's sentences naming the runs that missed their target and those that stalled, or nothing."""
    notes = [
        (f"Target missed by more than {MISS:.0%} (raise norm_penalty)", misses),
        (f"Learnt less than {STALLED:.0%} of the natural runs' Delta-plasticity (lower norm_penalty)", stalls),
    ]
    return "".join(f". {what}: {'; '.join(runs)}" for what, runs in notes if runs)


def norm_matched_table(cfg: dict, runs: dict[str, list[dict]], classes: dict) -> Table:
    """The probe's table from the grid's ``runs`` (``classes``: method -> its class)."""
    matched = norm_methods(cfg)
    if not matched:
        raise ValueError(
            "the norm-matched probe needs a method of kind lora with norm_target and norm_penalty "
            "in config key methods (see config/mini_ablations.yaml)"
        )
    references = [m for m in cfg["methods"] if any(m in norm_references(cfg["method_configs"][x]) for x in matched)]
    misses, stalls = [], []
    table = Table("norm_matched", "", COLUMNS, mark_best=False, decimals=3)
    plasticity = COLUMNS.index("Delta-plasticity")
    natural = {seed: [] for seed in cfg["seeds"]}  # the references' Delta-plasticity per seed
    for method in dict.fromkeys(references + matched):
        if not classes[method].stores_low_rank_update:
            raise ValueError(
                f"norm-matched probe: {method} stores no low-rank adapter updates (no ||dW||_F per task); "
                "list only low-rank adapter methods in norm_target"
            )
        per_seed = []
        for seed, matrix in zip(cfg["seeds"], runs[method], strict=True):
            summaries = run_summaries(cfg, method, seed)
            row = run_row(summaries, matrix["A"])
            per_seed.append(row)
            if method not in matched:
                natural[seed].append(row[plasticity])
                continue
            if tasks := missed(summaries):
                misses.append(f"{method} seed {seed} tasks {tasks}")
            if stalled(row[plasticity], natural[seed]):
                stalls.append(f"{method} seed {seed}")
        cells = [None if None in col else list(col) for col in zip(*per_seed, strict=True)]
        table.rows.append(("", method, cells))
    table.caption = (
        f"{cfg['benchmark']}: norm-matched probe (paper: supp_norm_matched): "
        "LoRA trained with a penalty pulling the task's ||dW||_F to the target, "
        "beside the natural runs the target is the median of; means over tasks, mean ± std over seeds"
        + caption_notes(misses, stalls)
    )
    return table


def write_norm_matched_figure(cfg: dict, table: Table) -> None:
    """Forgetting against Delta-plasticity per method: filled for norm-matched runs, hollow for natural ones."""
    matched = set(norm_methods(cfg))
    fig, ax = new_figure(figsize=(5.5, 4))
    for _, label, stats in table.stats():
        if stats[3] is None or stats[4] is None:
            continue
        x, y = stats[3][0], stats[4][0]
        ax.scatter(x, y, facecolors="C0" if label in matched else "none", edgecolors="C0")
        ax.annotate(f"{label} (rank {stats[0][0]:.1f})", (x, y), fontsize=6)
    ax.set_xlabel("Delta-plasticity (%): A[j,j] - A[0,j], higher is better")
    ax.set_ylabel("Forgetting (%): A[j,j] - A[N,j], lower is better")
    ax.set_title(f"{cfg['benchmark']}: norm-matched probe (filled) vs natural norm (hollow)")
    save_figure(fig, figures_dir(cfg) / "norm_matched")
