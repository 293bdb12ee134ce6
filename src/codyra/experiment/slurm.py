"""Launch codyra commands on SLURM with submitit, without a Snakemake run.

Resources come from the same Snakemake profile the workflow uses (one source of truth):
``default-resources`` overlaid with the ``set-resources`` entry of the rule that would
run the command (the table ``codyra.experiment.jobs.JOBS``, shared with the rules), CPUs as the rules
count them (:func:`codyra.experiment.resources.job_threads`), the job on one node. On the compute node
the job reads the weights cache only (``HF_HUB_OFFLINE=1`` unless set). Jobs are ``Checkpointable``: on
a timeout submitit requeues them, and training resumes from its last periodic checkpoint. The command runner is injected
(``entry``, the CLI's ``run``), so this module never imports the CLI.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from codyra.experiment.jobs import eval_rule, rule_for

DEFAULT_PROFILE = "profiles/slurm"
LAUNCH_FLAGS = {"--slurm": 0, "--wait": 0, "--slurm-profile": 1, "--executor": 1}


def profile_resources(profile: str | Path, rule: str) -> dict:
    """``default-resources`` overlaid with ``rule``'s ``set-resources``, as Snakemake reads and evaluates
    them (an expression of the attempt: its first; codyra.experiment.resources.ProfileResources)."""
    from codyra.experiment.resources import ProfileResources

    path = Path(profile)
    path = path / "config.yaml" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"SLURM profile not found: {path} (pass --slurm-profile <dir>)")
    resources = ProfileResources.read(path)
    values = {name: resources.value(rule, name) for name in {**resources.defaults, **resources.rules.get(rule, {})}}
    return {name: value for name, value in values.items() if value is not None}


def submitit_parameters(resources: dict, cpus: int, name: str) -> dict:
    """Snakemake SLURM resources -> submitit AutoExecutor parameters."""
    params = {"name": name, "cpus_per_task": resources.get("cpus_per_task") or cpus}
    if resources.get("nodes"):
        params["nodes"] = int(resources["nodes"])
    if "runtime" in resources:
        params["timeout_min"] = int(resources["runtime"])
    if "mem_mb" in resources:
        params["mem_gb"] = math.ceil(int(resources["mem_mb"]) / 1024)
    for key, target in (
        ("slurm_partition", "slurm_partition"),
        ("slurm_account", "slurm_account"),
        ("constraint", "slurm_constraint"),
    ):
        if resources.get(key):
            params[target] = str(resources[key])
    gpus = int(resources.get("gpu") or 0)
    if gpus and resources.get("gpu_model"):
        params["slurm_gres"] = f"gpu:{resources['gpu_model']}:{gpus}"
    elif gpus:
        params["gpus_per_node"] = gpus
    return params


@dataclass
class CodyraJob:
    """A codyra command as a picklable, checkpointable submitit job; ``entry(argv, config=...)``
    runs it (a module-level function: pickled by reference)."""

    argv: list[str]
    config: dict
    entry: Callable[..., int]

    def __call__(self) -> int:
        from codyra.hub import offline_by_default

        offline_by_default()  # a compute node reads the weights cache, never waits on the network
        return self.entry(self.argv, config=self.config)

    def checkpoint(self, *args, **kwargs):
        # Called by submitit on a timeout: resubmit the same command; training picks up its own checkpoint.
        import submitit

        return submitit.helpers.DelayedSubmission(CodyraJob(self.argv, self.config, self.entry))


def strip_launch_flags(argv: list[str]) -> list[str]:
    out, skip = [], 0
    for arg in argv:
        if skip:
            skip -= 1
        elif arg in LAUNCH_FLAGS:
            skip = LAUNCH_FLAGS[arg]
        elif arg.split("=", 1)[0] in LAUNCH_FLAGS:
            continue
        else:
            out.append(arg)
    return out


def executor_for(cfg: dict, kind: str | None):
    from codyra.extras import require_extra

    submitit = require_extra("submitit", "workflow", "launching with --slurm (submitit)")

    folder = Path(cfg["results"]) / "logs" / "submitit" / "%j"
    return submitit.AutoExecutor(folder=folder, cluster=kind, slurm_max_num_timeout=3)


def job_parameters(args, cfg: dict) -> dict:
    """The submitit parameters of ``codyra <args.command>``: its rule's profile resources, its threads.
    A whole stream (`run`, each run of a `sweep`) is timed as the workflow's group job of a run:
    the sum of its N trainings' and N rows' runtimes."""
    from codyra.experiment.resources import job_threads

    method = getattr(args, "method", None)
    rule = rule_for(args.command, method, cfg)
    resources = profile_resources(args.slurm_profile, rule)
    if args.command in ("run", "sweep") and "runtime" in resources:
        row = profile_resources(args.slurm_profile, eval_rule(cfg))
        resources["runtime"] = len(cfg["tasks"]) * (
            int(resources["runtime"]) + int(row.get("runtime", resources["runtime"]))
        )
    if args.command in ("train", "run", "sweep"):  # a training's CPUs: every task it may train
        from codyra.methods import method_of

        tasks = [args.task] if args.command == "train" else range(1, len(cfg["tasks"]) + 1)
        gpus, cls = int(resources.get("gpu") or 0), method_of(cfg, method)
        cpus = max(job_threads(cfg, rule, method, i, gpus, cls) for i in tasks)
    else:
        cpus = job_threads(cfg, rule)
    return submitit_parameters(resources, cpus, f"codyra-{args.command}")


def submit(args, cfg: dict, argv: list[str], entry: Callable[..., int]):
    """Submit one command (``argv`` as typed, launch flags removed here)."""
    executor = executor_for(cfg, args.executor)
    executor.update_parameters(**job_parameters(args, cfg))
    job = executor.submit(CodyraJob(strip_launch_flags(argv), cfg, entry))
    return [job]


def sweep(args, cfg: dict, entry: Callable[..., int]) -> list:
    """One `run` per (grid point, seed): each grid point becomes its own method variant."""
    from codyra.experiment.config import ConfigError, load_config, parse_value, set_key

    axes = []
    for item in args.grid:
        key, _, values = item.partition("=")
        if not key or not values:
            raise ConfigError(f"--grid expects KEY=V1,V2,..., got {item!r} (e.g. --grid train.lr=1e-4,5e-4)")
        axes.append([(key, parse_value(v)) for v in values.split(",")])
    if args.method not in cfg["method_configs"]:
        raise ConfigError(
            f"--method {args.method!r} is not in method_configs ({', '.join(sorted(cfg['method_configs']))})"
        )
    base = cfg["method_configs"][args.method]
    jobs_cfg, argvs = copy.deepcopy(cfg), []
    for point in itertools.product(*axes):
        name = "-".join([args.method, *(f"{k.rsplit('.', 1)[-1]}{v}" for k, v in point)])
        spec = copy.deepcopy(base)
        for key, value in point:
            set_key(spec, key, value)
        jobs_cfg["method_configs"][name] = spec
        jobs_cfg["methods"] = [*jobs_cfg["methods"], name]
        argvs += [["run", "--method", name, "--seed", str(seed)] for seed in args.seeds]
    jobs_cfg = load_config(jobs_cfg)  # every variant is validated before anything is submitted
    if not args.slurm:
        return [CodyraJob(argv, jobs_cfg, entry)() for argv in argvs]
    executor = executor_for(jobs_cfg, args.executor)
    executor.update_parameters(**job_parameters(args, jobs_cfg))
    with executor.batch():
        jobs = [executor.submit(CodyraJob(argv, jobs_cfg, entry)) for argv in argvs]
    return jobs
