"""The workflow's jobs in one table, shared by the Snakemake rules and the ``--slurm`` launcher.

A rule name keys the job's resources in a Snakemake profile (``set-resources``), so the
launcher submits ``codyra train`` of a TRACE config with the ``train_lm_task`` resources the
workflow would use. ``entries`` are the modules whose code (and what it imports) determines the
job's output: its code version (:mod:`codyra.experiment.codeversions`) is part of the rule's params.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codyra.family import family_of
from codyra.store.paths import PRETRAINED


@dataclass(frozen=True)
class Job:
    command: str  # the codyra command the rule runs
    entries: tuple[str, ...]  # modules whose code (with what they import) determines the output
    threads: str | None  # config key of its CPU threads; None: a local rule, never submitted


# each mini's own pretraining by model family, not via codyra.experiment.pretraining: its family objects reach
# the engine and every method, and editing a method (or another mini's pretraining) must not rerun it
MINI_PRETRAINING = {
    "clip": "codyra.mini.clip.pretrain",
    "blip": "codyra.mini.blip.pretrain",
    "causal_lm": "codyra.mini.trace.pretrain",
}

JOBS: dict[str, Job] = {
    "pretrain_mini": Job("pretrain-mini", tuple(MINI_PRETRAINING.values()), "mini.pretrain_threads"),
    # a family's own rule names (Family.train_rule, Family.eval_rule): profiles size them apart
    "train_task": Job("train", ("codyra.experiment.train_job",), "train.threads"),
    "train_lm_task": Job("train", ("codyra.experiment.train_job",), "train.threads"),
    "eval_cache": Job("eval-cache", ("codyra.evaluation.caching",), "eval.threads"),
    "eval_row0": Job("cell", ("codyra.evaluation.evaluate",), "eval.threads"),
    "eval_row": Job("cell", ("codyra.evaluation.evaluate",), "eval.threads"),
    "eval_lm_row": Job("cell", ("codyra.evaluation.evaluate",), "eval.threads"),
    "heldout_row0": Job("heldout", ("codyra.evaluation.heldout",), "eval.threads"),
    "heldout": Job("heldout", ("codyra.evaluation.heldout",), "eval.threads"),
    "summarize_run": Job("summarize", ("codyra.evaluation.results",), None),
    "tables": Job("tables", ("codyra.evaluation.tables",), None),
    # the forward probes of the paper's analyses (workflow/rules/analysis.smk); each analysis's own job is
    # versioned by its module (codyra.analysis.registry.Analysis.version)
    "probe": Job("probe", ("codyra.analysis.probes",), "eval.threads"),
    "grad_conflict": Job("grad-conflict", ("codyra.analysis.conflict",), "eval.threads"),
    # the single-task studies (workflow/rules/single_task.smk): the ordinary training, cell, held-out
    # and probe jobs, run on the config of the study's task (codyra.experiment.single_task)
    "single_task_train": Job("train", ("codyra.experiment.train_job",), "train.threads"),
    "single_task_row0": Job("cell", ("codyra.evaluation.evaluate", "codyra.evaluation.heldout"), "eval.threads"),
    "single_task_eval": Job("cell", ("codyra.evaluation.evaluate", "codyra.evaluation.heldout"), "eval.threads"),
    "single_task_probe": Job("probe", ("codyra.analysis.probes",), "eval.threads"),
}


def train_rule(cfg: dict) -> str:
    return family_of(cfg).train_rule


def eval_rule(cfg: dict) -> str:
    """The rule of a trained run's row i >= 1 (row 0 is ``eval_row0``)."""
    return family_of(cfg).eval_rule


def job_group(cfg: dict) -> str:
    """The Snakemake group (one SLURM job; local runs ignore groups) of a run's training and row
    jobs, as config key ``cluster_job`` says; by default the family's unit (``Family.cluster_job``):
    the whole run (method, seed) for CLIP, one task (training i and row i) for causal LMs."""
    unit = cfg.get("cluster_job") or family_of(cfg).cluster_job
    return {"run": RUN_GROUP, "task": "task-{method}-seed{seed}-{i}"}[unit]


def row_group(cfg: dict) -> str:
    """The Snakemake group of a trained run's row i: its training's (:func:`job_group`), unless the family
    trains on more GPUs than a row uses (``Family.rows_apart``: a causal LM's row generates on one of the
    4 its DeepSpeed training holds), where each row is a job of its own that holds one GPU."""
    return "row-{method}-seed{seed}-{i}" if family_of(cfg).rows_apart else job_group(cfg)


# The group of a job that belongs to a whole run rather than to one of its tasks (the forward
# probes of theta_N): the run's job when runs are the unit, a job of its own per run otherwise.
RUN_GROUP = "run-{method}-seed{seed}"


def rule_for(command: str, method: str | None, cfg: dict) -> str:
    """The rule that runs ``codyra <command> --method <method>`` under ``cfg``; `run` and `sweep`
    (a whole stream in one job) are sized like their longest jobs, the training."""
    if command in ("train", "run", "sweep"):
        return train_rule(cfg)
    if command in ("cell", "heldout"):
        row0 = method == PRETRAINED
        return {"cell": (eval_rule(cfg), "eval_row0"), "heldout": ("heldout", "heldout_row0")}[command][row0]
    raise ValueError(
        f"codyra {command} is not a job the workflow submits; launchable: train, cell, heldout, run, sweep"
    )


def job_threads(cfg: dict, rule: str) -> int:
    block, key = JOBS[rule].threads.split(".")
    return cfg[block][key]


def job_version(rule: str, kinds: Iterable[str] = ()) -> str:
    """The code version of rule's job (a rule param: changed code reruns exactly its jobs): its
    entries' code and that of the method ``kinds`` it runs (``method_kinds``)."""
    from codyra.experiment.codeversions import code_version

    return code_version(*JOBS[rule].entries, methods=tuple(sorted(set(kinds))))


def pretrain_version(cfg: dict) -> str:
    """The code version of ``cfg``'s own pretraining: its mini's module only (``MINI_PRETRAINING``)."""
    from codyra.experiment.codeversions import code_version

    return code_version(MINI_PRETRAINING[cfg["model"]["family"]])


def method_kinds(cfg: dict, methods: Iterable[str]) -> list[str]:
    """The kinds of the configured ``methods``: the method code that a job running them executes."""
    return [cfg["method_configs"][m]["kind"] for m in methods]
