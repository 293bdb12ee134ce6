"""Computation cost per method (paper table "comp_cost"), measured from the runs.

From the task summaries: ``trainable_params`` and ``step_seconds`` (mean wall time per optimizer
step), each averaged over tasks and seeds; ``inference_extra_params`` (parameters kept beside the
merged backbone at inference) and ``inference_memory`` (stored sample values read at inference)
after the last task, averaged over seeds: the model the stream ends with, which the paper's
"Add. Inf. Params. / Mem." column describes (RAIL-Dual's memory of every class, O-LoRA's 44.32M
after 11 tasks). Training time per run, summed over its tasks and averaged over seeds: the
optimizer steps' (``steps`` x ``step_seconds``) and the training jobs' wall time (``seconds``:
building the models, the steps, storing the update; a task resumed after a kill counts from its
resume). Stored bytes per task are measured on disk: the task folder's safetensors
files (update and method state). The step-time ratio divides by
the mean step time of ``analysis.cost_reference`` (paper: LoRA r = 16). A key no summary of a
method reports is ``n/a`` with a note naming it: nothing is estimated.
"""

from __future__ import annotations

import statistics

from codyra.analysis.common import PlainTable, fmt, run_summaries, trained_methods
from codyra.store.paths import task_dir

KEYS = ("trainable_params", "step_seconds")  # mean over tasks and seeds
FINAL_KEYS = ("inference_extra_params", "inference_memory")  # after the last task, mean over seeds
TOTALS = {  # per run, summed over its tasks, mean over seeds: (what the summaries report, a task's seconds)
    "train_seconds": (
        "steps x step_seconds",
        lambda s: None if None in (s.get("steps"), s.get("step_seconds")) else s["steps"] * s["step_seconds"],
    ),
    "job_seconds": ("seconds", lambda s: s.get("seconds")),
}


def stored_bytes(cfg: dict, method: str, seed: int, i: int) -> int:
    return sum(p.stat().st_size for p in task_dir(cfg, method, seed, i).glob("*.safetensors"))


def method_cost(cfg: dict, method: str) -> tuple[dict, list[str]]:
    """(key -> mean over tasks and seeds (KEYS) or over seeds after the last task (FINAL_KEYS), or
    None), and the keys some summary lacks."""
    runs = [run_summaries(cfg, method, seed) for seed in cfg["seeds"]]
    over = {key: [s for run in runs for s in run] for key in KEYS} | {
        key: [run[-1] for run in runs] for key in FINAL_KEYS
    }
    cost, missing = {}, []
    for key, summaries in over.items():
        values = [s.get(key) for s in summaries]
        if any(v is None for v in values):
            missing.append(key)
            cost[key] = None
        else:
            cost[key] = statistics.fmean(values)
    for key, (reported, per_task) in TOTALS.items():
        times = [[per_task(s) for s in run] for run in runs]
        if any(t is None for run in times for t in run):
            missing.append(reported)
            cost[key] = None
        else:
            cost[key] = statistics.fmean(sum(run) for run in times)
    n = len(cfg["tasks"])
    cost["stored_bytes"] = statistics.fmean(
        stored_bytes(cfg, method, s, i) for s in cfg["seeds"] for i in range(1, n + 1)
    )
    return cost, missing


def cost_table(cfg: dict) -> PlainTable:
    reference = cfg["analysis"]["cost_reference"]
    methods = trained_methods(cfg)
    costs = {m: method_cost(cfg, m) for m in methods}
    table = PlainTable(
        "cost",
        f"{cfg['benchmark']}: computation cost per task, mean over tasks and seeds (paper: comp_cost), measured",
        [
            "Method",
            "Train. params",
            "Stored bytes / task",
            "Add. inf. params (after task N)",
            "Add. inf. memory (after task N)",
            "Step time (s)",
            f"Step time / {reference}",
            "Train time / run (s)",
            "Job time / run (s)",
        ],
    )
    ref_time = costs[reference][0]["step_seconds"] if reference in costs else None
    for method, (cost, missing) in costs.items():
        ratio = cost["step_seconds"] / ref_time if cost["step_seconds"] is not None and ref_time else None
        table.rows.append(
            [
                method,
                fmt(cost["trainable_params"], 0),
                fmt(cost["stored_bytes"], 0),
                fmt(cost["inference_extra_params"], 0),
                fmt(cost["inference_memory"], 0),
                fmt(cost["step_seconds"], 4),
                fmt(ratio, 2),
                fmt(cost["train_seconds"], 1),
                fmt(cost["job_seconds"], 1),
            ]
        )
        if missing:
            table.notes.append(
                f"{method}: the task summaries do not report {', '.join(missing)} (n/a); "
                "retrain with a codyra version whose method reports them"
            )
    if reference not in costs:
        table.notes.append(
            f"analysis.cost_reference {reference!r} is not a trained method of this config: no step-time ratio"
        )
    elif ref_time is None:
        table.notes.append(f"{reference} reports no step_seconds: no step-time ratio")
    return table
