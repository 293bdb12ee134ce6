"""The analysis jobs of the workflow: what each writes (``outputs``) and how (``write``).

One job per analysis (``codyra analysis NAME``); ``rank`` runs per adapter method. The forward
probes (``codyra probe``, ``codyra grad-conflict``) write result files these jobs read.
"""

from __future__ import annotations

import logging

from codyra.analysis.common import adapter_methods, norm_methods, trained_methods, write_any_table
from codyra.experiment.single_task import studies
from codyra.family import family_of
from codyra.store.paths import figures_dir, tables_dir

log = logging.getLogger(__name__)

# Every analysis, with what it writes (docs/analyses.md has the paper tables and figures of each).
ANALYSES = {
    "drift": "cumulative ||theta_t - theta_0||_F after each task (table and figure)",
    "magnitude": "effective rank, ||dW||_F, ||A||_2 and ||B||_2 of each task's update",
    "rank": "active rank per layer and module kind of an adapter method (--method; tables and heatmaps)",
    "amplification": "per adapted matrix, ||dW||_F over that of the weight in the update's top singular directions",
    "cka": "linear CKA between consecutive task updates",
    "cost": "trainable and stored parameters, inference overhead and step time per method",
    "orth": "mean |cos| between the LoRA A matrices of different tasks (table and figure)",
    "retention": "held-out accuracy after each and after the last task",
    "probes": "interpolation theta_0 -> theta_N and encoder-removal probes (after codyra probe)",
    "conflict": "gradient conflict between tasks at theta_0 (after codyra grad-conflict)",
    "significance": "mean, std, 95% confidence interval over seeds and paired t-tests",
    "compare": "the paper's published numbers beside the reproduced ones",
    "ablations": "the config's ablation sweeps (config key ablations)",
    "norm_matched": "LoRA trained to a matched ||dW||_F beside the natural runs",
    "single_task": "the single-task studies: Delta-plasticity and forgetting of runs that train one task from theta_0",
}


def available(cfg: dict) -> list[str]:
    """The analyses that apply to ``cfg`` (e.g. held-out ones need held-out tasks, probes a CLIP)."""
    inapplicable = family_of(cfg).inapplicable_analyses
    names = ["significance", "compare"]
    if trained_methods(cfg):
        names += ["drift", "magnitude", "cost"] + (["cka"] if len(cfg["tasks"]) > 1 else [])
    if adapter_methods(cfg):
        names += ["rank", "amplification"]
        if len(cfg["tasks"]) > 1:
            names.append("orth")
    if cfg["heldout_tasks"]:
        names.append("retention")
        if "probes" not in inapplicable and trained_methods(cfg):
            names.append("probes")
    if "conflict" not in inapplicable and len(cfg["tasks"]) > 1:
        names.append("conflict")
    if cfg["ablations"]:
        names.append("ablations")
    if norm_methods(cfg):
        names.append("norm_matched")
    if studies(cfg):
        names.append("single_task")
    return names


def skipped(cfg: dict) -> dict[str, str]:
    """The paper's analyses that do not apply to ``cfg``, each with the reason (``paper`` lists them)."""
    reasons = dict(family_of(cfg).inapplicable_analyses)
    if not cfg["heldout_tasks"]:
        for name in ("retention", "probes"):
            reasons.setdefault(name, "no held-out tasks (config key heldout_tasks)")
    if not norm_methods(cfg):
        reasons["norm_matched"] = "no method with norm_target (config/mini_ablations.yaml has the probe)"
    if not cfg["ablations"]:
        reasons["ablations"] = "no ablation sweeps (config key ablations; config/mini_ablations.yaml)"
    if not studies(cfg):
        reasons["single_task"] = "no single-task studies (config key single_task; config/mini_ablations.yaml)"
    return {name: why for name, why in reasons.items() if name not in available(cfg)}


def outputs(cfg: dict, name: str, method: str | None = None) -> tuple[list[str], list[str]]:
    """(table names, figure stems) of analysis ``name`` (``rank``: of ``method``)."""
    from codyra.analysis.ablation import ablation_outputs

    if name == "rank":
        return [f"rank_{method}"], [
            f"rank_{kind}_{method}_seed{s}" for s in cfg["seeds"] for kind in ("heatmap", "distribution")
        ]
    if name == "ablations":
        return ablation_outputs(cfg)
    if name == "amplification":
        return ["amplification"], [f"amplification_{m}_seed{s}" for m in adapter_methods(cfg) for s in cfg["seeds"]]
    if name == "single_task":
        from codyra.analysis.single_task import single_task_outputs

        return single_task_outputs(cfg)
    return {
        "drift": (["drift"], ["drift"]),
        "magnitude": (["magnitude"], []),
        "cka": (["cka"], []),
        "cost": (["cost"], []),
        "retention": (["heldout_tracking", "general_capability"], []),
        "probes": (["interpolation", "remove_modules"], ["interpolation"]),
        "conflict": (["grad_conflict"], []),
        "orth": (["a_cosine"], ["a_cosine"]),
        "norm_matched": (["norm_matched"], ["norm_matched"]),
        "significance": (["significance"], []),
        "compare": (["paper_vs_reproduced"], []),
    }[name]


def write(cfg: dict, name: str, method: str | None = None) -> None:
    """Compute analysis ``name`` from stored results and write its tables and figures."""
    if name in skipped(cfg):
        log.warning("analysis %s skipped for %s: %s", name, cfg["benchmark"], skipped(cfg)[name])
        return
    if name not in available(cfg):
        raise ValueError(f"analysis {name!r} does not apply to this config; available: {', '.join(available(cfg))}")
    figures_dir(cfg).mkdir(parents=True, exist_ok=True)
    if name == "rank":
        from codyra.analysis.rank import rank_stats_table, write_rank_figures

        if method not in adapter_methods(cfg):
            raise ValueError(
                f"rank activation applies to adapter methods: {', '.join(adapter_methods(cfg))}; got {method!r}"
            )
        write_any_table(cfg, rank_stats_table(cfg, method))
        for seed in cfg["seeds"]:
            write_rank_figures(cfg, method, seed)
    elif name == "drift":
        from codyra.analysis.drift import write_drift

        write_drift(cfg)
    elif name == "amplification":
        from codyra.analysis.amplification import write_amplification

        write_amplification(cfg)
    elif name == "probes":
        from codyra.analysis.probe_tables import interpolation_table, removal_table, write_interpolation_figure

        table = interpolation_table(cfg)
        write_any_table(cfg, table)
        write_interpolation_figure(cfg, table)
        write_any_table(cfg, removal_table(cfg))
    elif name == "orth":
        from codyra.analysis.orth import a_cosine_table, write_a_cosine_figure

        table = a_cosine_table(cfg)
        write_any_table(cfg, table)
        write_a_cosine_figure(cfg, table)
    elif name == "norm_matched":
        from codyra.analysis.norm_matched import norm_matched_table, write_norm_matched_figure
        from codyra.evaluation.tables import load_runs

        table = norm_matched_table(cfg, load_runs(cfg))
        write_any_table(cfg, table)
        write_norm_matched_figure(cfg, table)
    elif name == "ablations":
        from codyra.analysis.ablation import write_ablations
        from codyra.evaluation.tables import load_runs

        write_ablations(cfg, load_runs(cfg))
    elif name == "single_task":
        from codyra.analysis.single_task import write_single_task

        write_single_task(cfg)
    else:
        for table in _tables(cfg, name):
            write_any_table(cfg, table)


def _tables(cfg: dict, name: str) -> list:
    if name == "magnitude":
        from codyra.analysis.magnitude import magnitude_table

        return [magnitude_table(cfg)]
    if name == "cka":
        from codyra.analysis.cka import cka_table

        return [cka_table(cfg)]
    if name == "cost":
        from codyra.analysis.cost import cost_table

        return [cost_table(cfg)]
    if name == "retention":
        from codyra.analysis.retention import general_capability_table, tracking_table

        return [tracking_table(cfg), general_capability_table(cfg)]
    if name == "conflict":
        from codyra.analysis.conflict import conflict_table

        return [conflict_table(cfg)]
    if name == "significance":
        from codyra.analysis.significance import significance_table
        from codyra.evaluation.tables import load_runs

        return [significance_table(cfg, load_runs(cfg))]
    from codyra.analysis.compare import comparison_table

    return [comparison_table(cfg, tables_dir(cfg))]
