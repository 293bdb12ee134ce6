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
options). Every study of one task shares that task's runs: :func:`single_task_config` derives
a config of its own, benchmark ``<benchmark>-single-<task>``, whose one task is the target,
whose held-out tasks are the reference tasks and whose methods are the studies' runs, on the
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


def single_task_config(cfg: dict, task: str) -> dict:
    """The validated config of the single-task runs on ``task``: ``task`` its one task (with the
    stream's per-task settings when it is one of the stream), the reference tasks held out, the
    studies' runs its methods, theta_0 the benchmark's own."""
    from codyra.experiment.config import validate_config
    from codyra.experiment.pretraining import own_pretraining

    names = [n for n, s in studies(cfg).items() if s["task"] == task]
    if not names:
        raise ConfigError(f"no single-task study trains {task!r}; studies train: {', '.join(targets(cfg))}")
    derived = copy.deepcopy(cfg)
    methods = list(dict.fromkeys(m for n in names for m, _ in study_runs(derived, n)))
    stream = {t["name"]: t for t in cfg["tasks"]}
    weights = own_pretraining(cfg)
    derived.update(
        benchmark=single_task_benchmark(cfg, task),
        tasks=[copy.deepcopy(stream.get(task, {"name": task}))],
        heldout_tasks=list(cfg["single_task"]["reference_tasks"]),
        methods=methods,
        ablations={},
        single_task={},
    )
    if weights is not None:  # the mini's own theta_0: the benchmark's, not pretrained again
        derived["model"]["pretrained"] = weights
    removals = []  # every study's: one probe job per run computes them all (its files are the same for every task)
    for study in studies(cfg).values():
        removals += [copy.deepcopy(p) for p in study.get("remove_modules", []) if p not in removals]
    derived["analysis"] = {
        **derived["analysis"],
        "interpolation_alphas": [0.0, 1.0],  # no interpolation probe: theta_0 and theta_1 are the files
        "remove_towers": [],
        "remove_modules": removals,
    }
    try:
        return validate_config(derived)
    except ConfigError as err:
        raise ConfigError(f"config key single_task (the runs on {task}): {err}") from None


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


def check_single_task(cfg: dict) -> None:
    """Semantics of config key single_task (its structure is the schema's)."""
    from codyra.adapters.targets import parse_placement
    from codyra.experiment.config import known_heldout_names, known_task_names, placement_vocabulary

    block = cfg.get("single_task") or {}
    if not studies(cfg):
        if block.get("reference_tasks"):
            raise ConfigError("config key single_task.reference_tasks: set, but single_task.studies is empty")
        return
    kind = cfg["data"]["kind"]
    if cfg["model"]["family"] != "clip":
        raise ConfigError(
            "config key single_task: the single-task probes evaluate retention on held-out CLIP tasks; "
            f"model.family {cfg['model']['family']!r} has none: remove single_task"
        )
    references = block.get("reference_tasks") or []
    if not references:
        raise ConfigError(
            "config key single_task.reference_tasks: empty; Forgetting is measured on reference tasks "
            f"(held-out datasets of {kind}: {', '.join(known_heldout_names(kind))})"
        )
    for k, name in enumerate(references):
        if name not in known_heldout_names(kind):
            raise ConfigError(
                f"config key single_task.reference_tasks[{k}]: {name!r} is not a held-out dataset of {kind}; "
                f"choose from {', '.join(known_heldout_names(kind))}"
            )
    known = known_task_names(kind)
    vocabulary = placement_vocabulary(cfg["model"]["family"])
    for name, study in studies(cfg).items():
        where = f"config key single_task.studies.{name}"
        if known is not None and study["task"] not in known:
            raise ConfigError(
                f"{where}.task: {study['task']!r} is not a dataset of {kind}; choose from {', '.join(known)}"
            )
        if study["task"] in references:
            raise ConfigError(f"{where}.task: {study['task']!r} is a reference task; a reference is never trained on")
        for m in study.get("methods", []):
            if m not in cfg["method_configs"]:
                raise ConfigError(f"{where}.methods: {m!r} is not an entry of method_configs")
        runs = study_runs(copy.deepcopy(cfg), name)
        if not runs:
            raise ConfigError(f"{where}: no runs; list methods and/or sweeps")
        if pivot := study.get("pivot"):
            varied = {o for s in study.get("sweeps", []) for o in (*(s.get("vary") or {}), *(s.get("zip") or {}))}
            for axis in ("rows", "columns"):
                if pivot[axis] not in varied:
                    raise ConfigError(
                        f"{where}.pivot.{axis}: {pivot[axis]!r} is not an option its sweeps vary "
                        f"({', '.join(sorted(varied))})"
                    )
        for k, placement in enumerate(study.get("remove_modules", [])):
            try:
                parse_placement(placement, vocabulary)
            except ValueError as err:
                raise ConfigError(f"{where}.remove_modules[{k}]: {err}") from None
    for name, study in studies(cfg).items():
        if study.get("summary") in studies(cfg):
            raise ConfigError(
                f"config key single_task.studies.{name}.summary: {study['summary']!r} is a study's table; "
                "name the summary table otherwise"
            )
    for task in targets(cfg):
        single_task_config(cfg, task)
