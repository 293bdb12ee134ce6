"""The paper's analyses, each declared once as an :class:`Analysis`: what it writes, what it reads,
when it applies (and why not), how it runs and how it writes. The workflow's rules
(workflow/rules/analysis.smk), their jobs' code versions, ``codyra analysis NAME`` and its help
derive from ``ANALYSES``.

One job per analysis (``codyra analysis NAME``); ``rank`` runs per adapter method. The forward
probes (``codyra probe``, ``codyra grad-conflict``) write result files these jobs read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from codyra.analysis.common import adapter_methods, norm_methods, trained_methods, write_any_table
from codyra.experiment.single_task import studies
from codyra.family import family_of
from codyra.store.paths import figures_dir, tables_dir

log = logging.getLogger(__name__)

# What an analysis may read, by name: the workflow turns each into the files of a config
# (workflow/rules/analysis.smk, ANALYSIS_INPUTS); every analysis reads from these only.
INPUT_SETS = {
    "trained updates": "every update of the trained methods' runs",
    "adapter updates": "every update of the adapter methods' runs",
    "theta_0": "the mini's pretrained weights (a released model is read from the weights cache)",
    "held-out files": "every held-out file H_i of every run",
    "probe files": "the forward probes of the trained runs (codyra probe)",
    "final cells": "the cells A[N, j] of the trained runs",
    "gradient conflict": "the gradients' conflict file (codyra grad-conflict)",
    "matrices": "every run's matrix.json",
    "summaries": "every task summary of the trained runs",
    "single-task files": "the cells, held-out files and probes of the single-task studies' runs",
    "compared tables": "the CSVs of the tables the comparison reads",
}


@dataclass(frozen=True)
class Analysis:
    """One of the paper's analyses.

    ``module``: the module of ``codyra.analysis`` that computes it, whose code (with what it
    imports) versions its job; ``reads``: names of ``INPUT_SETS``; ``why_not(cfg)``: why it does
    not apply to a config, None where it does; ``outputs(cfg, method)``: its (table names, figure
    stems); ``write(cfg, method)`` computes and writes them. ``cpu_job``: a job of its own with
    ``eval.threads`` CPU threads (it reads the stored updates); else it reads small files and runs in
    the Snakemake process. ``per_method``: one job per adapter method (``--method``)."""

    name: str
    description: str
    module: str
    reads: tuple[str, ...]
    why_not: Callable[[dict], str | None]
    outputs: Callable[[dict, str | None], tuple[list[str], list[str]]]
    write: Callable[[dict, str | None], None]
    cpu_job: bool = False
    per_method: bool = False

    def __post_init__(self):
        unknown = [name for name in self.reads if name not in INPUT_SETS]
        if unknown:
            raise ValueError(f"analysis {self.name} reads {unknown}, which are not among {list(INPUT_SETS)}")

    def version(self, kinds: Iterable[str] = ()) -> str:
        """Its job's code version (a rule param: changed code reruns exactly its jobs): its module's
        code and that of the method ``kinds`` whose results it reads."""
        from codyra.experiment.codeversions import code_version

        return code_version(f"codyra.analysis.{self.module}", methods=tuple(sorted(set(kinds))))


# --- when an analysis applies ---------------------------------------------------------------


def _always(cfg: dict) -> None:
    return None


def _one_task(cfg: dict) -> str | None:
    return None if len(cfg["tasks"]) > 1 else "the stream has one task: there is no pair of tasks to compare"


def _needs_trained(cfg: dict) -> str | None:
    return None if trained_methods(cfg) else "no method of the config trains: there is no update to analyse"


def _needs_adapters(cfg: dict) -> str | None:
    if adapter_methods(cfg):
        return None
    return "no method of the config stores a low-rank update (LoRA and the methods over it store one)"


def _needs_heldout(cfg: dict) -> str | None:
    return None if cfg["heldout_tasks"] else "no held-out tasks (config key heldout_tasks)"


def _first(*checks: Callable[[dict], str | None]) -> Callable[[dict], str | None]:
    """The first reason of ``checks`` why an analysis does not apply."""
    return lambda cfg: next((why for check in checks if (why := check(cfg))), None)


def _family(name: str) -> Callable[[dict], str | None]:
    """Why the config's model family leaves analysis ``name`` out, if it does."""
    return lambda cfg: family_of(cfg).inapplicable_analyses.get(name)


# --- what an analysis writes and how ------------------------------------------------------------


def _fixed(tables: list[str], figures: list[str]) -> Callable[[dict, str | None], tuple[list[str], list[str]]]:
    return lambda cfg, method: (tables, figures)


def _tables_of(module: str, *functions: str) -> Callable[[dict, str | None], None]:
    """Write the tables the functions ``functions`` of ``codyra.analysis.<module>`` make of a config."""

    def write(cfg: dict, method: str | None) -> None:
        import importlib

        analysis = importlib.import_module(f"codyra.analysis.{module}")
        for function in functions:
            write_any_table(cfg, getattr(analysis, function)(cfg))

    return write


def _rank_outputs(cfg: dict, method: str | None):
    return [f"rank_{method}"], [
        f"rank_{kind}_{method}_seed{s}" for s in cfg["seeds"] for kind in ("heatmap", "distribution")
    ]


def _write_rank(cfg: dict, method: str | None) -> None:
    from codyra.analysis.rank import rank_stats_table, write_rank_figures

    if method not in adapter_methods(cfg):
        raise ValueError(
            f"rank activation applies to adapter methods: {', '.join(adapter_methods(cfg))}; got {method!r}"
        )
    write_any_table(cfg, rank_stats_table(cfg, method))
    for seed in cfg["seeds"]:
        write_rank_figures(cfg, method, seed)


def _write_drift(cfg: dict, method: str | None) -> None:
    from codyra.analysis.drift import write_drift

    write_drift(cfg)


def _amplification_outputs(cfg: dict, method: str | None):
    return ["amplification"], [f"amplification_{m}_seed{s}" for m in adapter_methods(cfg) for s in cfg["seeds"]]


def _write_amplification(cfg: dict, method: str | None) -> None:
    from codyra.analysis.amplification import write_amplification

    write_amplification(cfg)


def _write_probes(cfg: dict, method: str | None) -> None:
    from codyra.analysis.probe_tables import interpolation_table, removal_table, write_interpolation_figure

    table = interpolation_table(cfg)
    write_any_table(cfg, table)
    write_interpolation_figure(cfg, table)
    write_any_table(cfg, removal_table(cfg))


def _write_orth(cfg: dict, method: str | None) -> None:
    from codyra.analysis.orth import a_cosine_table, write_a_cosine_figure

    table = a_cosine_table(cfg)
    write_any_table(cfg, table)
    write_a_cosine_figure(cfg, table)


def _write_norm_matched(cfg: dict, method: str | None) -> None:
    from codyra.analysis.norm_matched import norm_matched_table, write_norm_matched_figure
    from codyra.evaluation.tables import load_runs
    from codyra.methods import method_classes

    classes = method_classes(cfg, cfg["methods"])
    table = norm_matched_table(cfg, load_runs(cfg, classes), classes)
    write_any_table(cfg, table)
    write_norm_matched_figure(cfg, table)


def _ablation_outputs(cfg: dict, method: str | None):
    from codyra.analysis.ablation import ablation_outputs

    return ablation_outputs(cfg)


def _write_ablations(cfg: dict, method: str | None) -> None:
    from codyra.analysis.ablation import write_ablations
    from codyra.evaluation.tables import load_runs
    from codyra.methods import method_classes

    write_ablations(cfg, load_runs(cfg, method_classes(cfg, cfg["methods"])))


def _single_task_outputs(cfg: dict, method: str | None):
    from codyra.analysis.single_task import single_task_outputs

    return single_task_outputs(cfg)


def _write_single_task(cfg: dict, method: str | None) -> None:
    from codyra.analysis.single_task import write_single_task

    write_single_task(cfg)


def _write_significance(cfg: dict, method: str | None) -> None:
    from codyra.analysis.significance import significance_table
    from codyra.evaluation.tables import load_runs
    from codyra.methods import method_classes

    write_any_table(cfg, significance_table(cfg, load_runs(cfg, method_classes(cfg, cfg["methods"]))))


def _write_compare(cfg: dict, method: str | None) -> None:
    from codyra.analysis.compare import comparison_table

    write_any_table(cfg, comparison_table(cfg, tables_dir(cfg)))


_DECLARED = (
    Analysis(
        "drift",
        "cumulative ||theta_t - theta_0||_F after each task (table and figure)",
        "drift",
        ("trained updates",),
        _needs_trained,
        _fixed(["drift"], ["drift"]),
        _write_drift,
        cpu_job=True,
    ),
    Analysis(
        "magnitude",
        "effective rank, ||dW||_F, ||A||_2 and ||B||_2 of each task's update",
        "magnitude",
        ("trained updates",),
        _needs_trained,
        _fixed(["magnitude"], []),
        _tables_of("magnitude", "magnitude_table"),
        cpu_job=True,
    ),
    Analysis(
        "rank",
        "active rank per layer and module kind of an adapter method (--method; tables and heatmaps)",
        "rank",
        ("adapter updates",),
        _needs_adapters,
        _rank_outputs,
        _write_rank,
        cpu_job=True,
        per_method=True,
    ),
    Analysis(
        "amplification",
        "per adapted matrix, ||dW||_F over that of the weight in the update's top singular directions",
        "amplification",
        ("adapter updates", "theta_0"),
        _needs_adapters,
        _amplification_outputs,
        _write_amplification,
        cpu_job=True,
    ),
    Analysis(
        "cka",
        "linear CKA between consecutive task updates",
        "cka",
        ("trained updates",),
        _first(_needs_trained, _one_task),
        _fixed(["cka"], []),
        _tables_of("cka", "cka_table"),
        cpu_job=True,
    ),
    Analysis(
        "cost",
        "trainable and stored parameters, inference overhead and step time per method",
        "cost",
        ("trained updates",),
        _needs_trained,
        _fixed(["cost"], []),
        _tables_of("cost", "cost_table"),
    ),
    Analysis(
        "orth",
        "mean |cos| between the LoRA A matrices of different tasks (table and figure)",
        "orth",
        ("adapter updates",),
        _first(_needs_adapters, _one_task),
        _fixed(["a_cosine"], ["a_cosine"]),
        _write_orth,
        cpu_job=True,
    ),
    Analysis(
        "retention",
        "held-out accuracy after each and after the last task",
        "retention",
        ("held-out files",),
        _needs_heldout,
        _fixed(["heldout_tracking", "general_capability"], []),
        _tables_of("retention", "tracking_table", "general_capability_table"),
    ),
    Analysis(
        "probes",
        "interpolation theta_0 -> theta_N and encoder-removal probes (after codyra probe)",
        "probe_tables",
        ("probe files", "held-out files", "final cells"),
        _first(_family("probes"), _needs_heldout, _needs_trained),
        _fixed(["interpolation", "remove_modules"], ["interpolation"]),
        _write_probes,
    ),
    Analysis(
        "conflict",
        "gradient conflict between tasks at theta_0 (after codyra grad-conflict)",
        "conflict",
        ("gradient conflict",),
        _first(_family("conflict"), _one_task),
        _fixed(["grad_conflict"], []),
        _tables_of("conflict", "conflict_table"),
    ),
    Analysis(
        "significance",
        "mean, std, 95% confidence interval over seeds and paired t-tests",
        "significance",
        ("matrices",),
        _always,
        _fixed(["significance"], []),
        _write_significance,
    ),
    Analysis(
        "compare",
        "the paper's published numbers beside the reproduced ones",
        "compare",
        ("compared tables",),
        _always,
        _fixed(["paper_vs_reproduced"], []),
        _write_compare,
    ),
    Analysis(
        "ablations",
        "the config's ablation sweeps (config key ablations)",
        "ablation",
        ("matrices", "summaries"),
        lambda cfg: (
            None if cfg["ablations"] else "no ablation sweeps (config key ablations; config/mini_ablations.yaml)"
        ),
        _ablation_outputs,
        _write_ablations,
    ),
    Analysis(
        "norm_matched",
        "LoRA trained to a matched ||dW||_F beside the natural runs",
        "norm_matched",
        ("matrices", "summaries"),
        lambda cfg: (
            None if norm_methods(cfg) else "no method with norm_target (config/mini_ablations.yaml has the probe)"
        ),
        _fixed(["norm_matched"], ["norm_matched"]),
        _write_norm_matched,
    ),
    Analysis(
        "single_task",
        "the single-task studies: Delta-plasticity and forgetting of runs that train one task from theta_0",
        "single_task",
        ("single-task files",),
        lambda cfg: (
            None if studies(cfg) else "no single-task studies (config key single_task; config/mini_ablations.yaml)"
        ),
        _single_task_outputs,
        _write_single_task,
    ),
)
ANALYSES: dict[str, Analysis] = {analysis.name: analysis for analysis in _DECLARED}


def available(cfg: dict) -> list[str]:
    """The analyses that apply to ``cfg`` (e.g. held-out ones need held-out tasks, probes a CLIP)."""
    return [name for name, analysis in ANALYSES.items() if analysis.why_not(cfg) is None]


def skipped(cfg: dict) -> dict[str, str]:
    """The analyses that do not apply to ``cfg``, each with the reason (``paper`` leaves them out)."""
    return {name: why for name, analysis in ANALYSES.items() if (why := analysis.why_not(cfg))}


def outputs(cfg: dict, name: str, method: str | None = None) -> tuple[list[str], list[str]]:
    """(table names, figure stems) of analysis ``name`` (``rank``: of ``method``)."""
    return ANALYSES[name].outputs(cfg, method)


def write(cfg: dict, name: str, method: str | None = None) -> None:
    """Compute analysis ``name`` from stored results and write its tables and figures."""
    why = ANALYSES[name].why_not(cfg)
    if why:
        log.warning("analysis %s skipped for %s: %s", name, cfg["benchmark"], why)
        return
    figures_dir(cfg).mkdir(parents=True, exist_ok=True)
    ANALYSES[name].write(cfg, method)
