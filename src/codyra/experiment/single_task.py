"""The paper's single-task probes (config key ``single_task``): one task trained from theta_0.

    single_task:
      reference_tasks: [ImageNet]        # retention sets: held-out tasks of the data kind
      studies:
        supp_dtd:                        # the study's table (a paper table id: compared)
          task: DTD                      # the one task each variant trains, from theta_0
          sweeps:
            - method: lora-r16
              vary: {placement: [attn, mlp, vision, text, all]}
              zip: {rank: [4, 8, 16], alpha: [4, 8, 16]}
          pivot: {rows: placement, columns: rank}

Each study lists ``methods`` (run as they are) and ``sweeps`` (:mod:`codyra.experiment.sweeps`:
``vary`` crossed, ``zip`` varied together; ``label`` formats a row's name from the variant's
options). Every study of one task shares that task's runs:
:func:`codyra.experiment.validation.single_task_config` derives a config of its own, benchmark
``<benchmark>-single-<task>``, whose one task is the target, whose held-out tasks are the
reference tasks and whose methods are the studies' runs, on the
same theta_0. The workflow runs its jobs with the ordinary training, cell and held-out jobs
(workflow/rules/single_task.smk); a run's Delta-plasticity is A[1,1] - A[0,1] and its
Forgetting the mean over the reference tasks of H_0 - H_1 (:mod:`codyra.analysis.single_task`).
``remove_modules`` adds the module-removal probe of Fig. prune_motivation to a study's runs.
"""

from __future__ import annotations

import copy
import string

from codyra.errors import ConfigError
from codyra.experiment.sweeps import add_variants

INFIX = "-single-"


def studies(cfg: dict) -> dict:
    return cfg.get("single_task", {}).get("studies") or {}


def targets(cfg: dict) -> list[str]:
    """The tasks the studies train, in the order of the studies."""
    return list(dict.fromkeys(s["task"] for s in studies(cfg).values()))


def single_task_benchmark(cfg: dict, task: str) -> str:
    return f"{cfg['benchmark']}{INFIX}{task}"


def _label(template: str | None, method: str, options: dict, where: str) -> str:
    if template is None:
        return method
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    if missing := [f for f in fields if f not in options]:
        raise ConfigError(
            f"{where}.label: {template!r} names {', '.join(missing)}, not options of variant {method!r}; "
            f"its options: {', '.join(options)}"
        )
    return template.format(**options)


def study_runs(cfg: dict, name: str) -> list[tuple[str, str]]:
    """[(method, row label)] of study ``name``: its methods, then its sweeps' variants (added to
    ``cfg["method_configs"]`` when missing)."""
    study = studies(cfg)[name]
    where = f"config key single_task.studies.{name}"
    runs = [(m, m) for m in study.get("methods", [])]
    for k, sweep in enumerate(study.get("sweeps", [])):
        sweep_where = f"{where}.sweeps[{k}]"
        if "table" in sweep:
            raise ConfigError(f"{sweep_where}.table: a study's table is the study's name; remove table")
        variants = add_variants(cfg, sweep_where, {key: v for key, v in sweep.items() if key != "label"})
        runs += [(v, _label(sweep.get("label"), v, cfg["method_configs"][v], sweep_where)) for v in variants]
    labels = [label for _, label in runs]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"{where}: two runs have one row label ({labels}); give the sweeps labels that differ")
    return runs


def removal_methods(cfg: dict, task: str) -> list[str]:
    """The runs on ``task`` that the module-removal probe takes apart (their studies' remove_modules)."""
    return list(
        dict.fromkeys(
            m
            for n, s in studies(cfg).items()
            if s["task"] == task and s.get("remove_modules")
            for m, _ in study_runs(copy.deepcopy(cfg), n)
        )
    )
