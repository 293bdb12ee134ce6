"""The ``codyra`` command line: one command per Snakemake job, usable on its own.

Heavy modules (torch, open_clip) are imported inside the handlers, so ``codyra --help``
and argument errors answer instantly.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from codyra.cli_options import add_set_option

DEFAULT_CONFIG = "config/config.yaml"
SNAKEFILE = "workflow/Snakefile"
DESCRIPTION = "The codyra command line: one command per Snakemake job, usable on its own."
log = logging.getLogger(__name__)


def _config(args) -> dict:
    """The validated config: from the workflow (``run(config=...)``) or the --config file, plus --set."""
    import copy

    from codyra.experiment.config import apply_sets, load_config, read_config_file

    cfg = copy.deepcopy(args.config_dict) if args.config_dict is not None else read_config_file(args.config)
    cfg = load_config(apply_sets(cfg, args.set))
    if getattr(args, "single_task", None):  # a single-task study's runs on this task (config key single_task)
        from codyra.experiment.validation import single_task_config

        cfg = single_task_config(cfg, args.single_task)
    if getattr(args, "threads", None):  # the scheduler's allotment wins over the config's thread counts
        _set_threads(cfg, args.threads)
    _require_method(cfg, args)
    return cfg


def _require_method(cfg: dict, args) -> None:
    """Every command's --method: an unknown name is refused before any work, with the nearest known one."""
    import difflib

    from codyra.store.paths import PRETRAINED

    method = getattr(args, "method", None)
    known = [*cfg["method_configs"], *([PRETRAINED] if getattr(args, "pretrained_row", False) else [])]
    if method is None or method in known:
        return
    close = difflib.get_close_matches(method, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"unknown method {method!r}{hint}; configured: {', '.join(sorted(known))}")


def _set_threads(cfg: dict, threads: int) -> None:
    cfg["eval"]["threads"] = cfg["mini"]["pretrain_threads"] = threads
    per_task = [m for t in cfg["task_settings"].values() for m in (t, *t.get("methods", {}).values())]
    for layer in (cfg, *cfg["method_configs"].values(), *per_task):
        if "train" in layer:
            layer["train"]["threads"] = threads


def cmd_pretrain_mini(args) -> None:
    from codyra.experiment.pretraining import pretrain_own

    pretrain_own(_config(args))


def cmd_train(args) -> None:
    from codyra.experiment.train_job import train_task
    from codyra.store.paths import task_dir

    cfg = _config(args)
    if not args.force and train_up_to_date(cfg, args.method, args.seed, args.task):
        folder = task_dir(cfg, args.method, args.seed, args.task)
        message = (
            f"task {args.task} of {args.method} seed {args.seed} is up to date: {folder} was trained with these "
            "settings and code, from the same updates before it; nothing to do (--force retrains it)"
        )
        log.info(message)
        print(message)
        return
    train_task(cfg, args.method, args.seed, args.task, device=args.device)
    _say_outdated(args, cfg, task=args.task)


def train_up_to_date(cfg: dict, method: str, seed: int, i: int) -> bool:
    """Whether task i's stored update is what training it now would write: its files exist, its
    summary sits where it belongs (the updates 1..i-1 it started from included) and records the
    settings fingerprint (settings and code version) the config gives now."""
    from codyra.experiment.fingerprints import train_fingerprint
    from codyra.store.io import ResultError
    from codyra.store.paths import SUMMARY_FILE, UPDATE_FILE, task_dir
    from codyra.store.updates import task_summary

    folder = task_dir(cfg, method, seed, i)
    if not ((folder / SUMMARY_FILE).is_file() and (folder / UPDATE_FILE).is_file()):
        return False
    try:
        summary = task_summary(cfg, method, seed, i)
    except (ResultError, OSError):  # ResultError: a summary of another place, or not JSON
        return False
    return summary.get("settings") == train_fingerprint(cfg, method, i)


def cmd_cell(args) -> None:
    from codyra.evaluation.evaluate import PRETRAINED, evaluate_row

    if args.method == PRETRAINED:
        if args.i != 0:
            raise ValueError("the pretrained model only has row i = 0 (use --i 0)")
        if args.seed is not None:
            raise ValueError("--seed does not apply to the pretrained model: its row 0 is shared by every seed")
    elif args.seed is None:
        raise ValueError(f"--seed is required for method {args.method!r}")
    cfg = _config(args)
    evaluate_row(cfg, args.method, args.seed, args.i, None if args.j is None else [args.j], device=args.device)
    _say_outdated(args, cfg)


def _say_outdated(args, cfg: dict, task: int | None = None) -> None:
    """After a direct train or cell (not a workflow job): one line naming the results downstream that
    are now older than what it wrote, and the Snakemake command that updates them."""
    if args.config_dict is not None:  # a job of the workflow: Snakemake updates what follows
        return
    from codyra.grid.invalidate import outdated_by, remake_command

    parts = outdated_by(cfg, args.method, args.seed, task=task)
    if parts:
        message = (
            f"out of date now (older than what this command wrote): {'; '.join(parts)}; "
            f"update them: {remake_command(_configfile(args), ['all_tables'])}"
        )
        log.info(message)
        print(message)


def _configfile(args) -> str | None:
    """The --configfile that gives Snakemake this command's config (None: the workflow's default)."""
    return None if args.config == DEFAULT_CONFIG else args.config


def cmd_eval_cache(args) -> None:
    from codyra.evaluation.caching import cache_test_set

    cache_test_set(_config(args), args.dataset)


def cmd_heldout(args) -> None:
    from codyra.evaluation.heldout import evaluate_heldout

    evaluate_heldout(_config(args), args.method, args.seed, args.i, device=args.device)


def cmd_summarize(args) -> None:
    from codyra.evaluation.results import summarize_run

    summarize_run(_config(args), args.method, args.seed)


def cmd_run(args) -> None:
    run_stream(_config(args), args.method, args.seed, device=args.device)


def run_stream(cfg: dict, method: str, seed: int, *, device=None) -> dict:
    """The whole stream in one process (``codyra run``): pretrain (mini, if needed), train every
    task and evaluate every cell, skipping finished work."""
    from pathlib import Path

    from codyra.evaluation.evaluate import PRETRAINED, evaluate_row
    from codyra.evaluation.results import summarize_run
    from codyra.experiment.pretraining import own_pretraining, pretrain_own
    from codyra.experiment.train_job import train_task
    from codyra.store.paths import SUMMARY_FILE, cell_path, row0_cell_path, task_dir

    n = len(cfg["tasks"])
    weights = own_pretraining(cfg)
    if weights is not None and not Path(weights).is_file():
        pretrain_own(cfg)
    tasks = range(1, n + 1)
    if missing := [j for j in tasks if not row0_cell_path(cfg, j).is_file()]:
        evaluate_row(cfg, PRETRAINED, None, 0, missing, device=device)
    for i in tasks:
        if not (task_dir(cfg, method, seed, i) / SUMMARY_FILE).is_file():
            train_task(cfg, method, seed, i, device=device)
    for i in range(n + 1):
        if missing := [j for j in tasks if not cell_path(cfg, method, seed, i, j).is_file()]:
            evaluate_row(cfg, method, seed, i, missing, device=device)
    result = summarize_run(cfg, method, seed)
    m = result["metrics"]
    log.info(
        "%s seed %d: transfer %s average %.2f last %.2f forgetting %s",
        method,
        seed,
        m["transfer"],
        m["average"],
        m["last"],
        m["forgetting"],
    )
    return result


def cmd_status(args) -> None:
    from codyra.grid.status import as_json, grid_status, render

    state = grid_status(_config(args), args.config)
    print(as_json(state) if args.json else render(state))


def cmd_invalidate(args) -> None:
    from codyra.grid.invalidate import invalidate, report, selected_paths

    paths = selected_paths(_config(args), args.method, args.seed, args.task, args.cell)
    result = invalidate(paths, args.config, dry_run=args.dry_run, snakefile=args.snakefile)
    print(report(result, _configfile(args), dry_run=args.dry_run))


def cmd_tables(args) -> None:
    from codyra.evaluation.tables import write_tables
    from codyra.tracking.mirror import with_store
    from codyra.tracking.sync import sync_mlflow

    cfg = _config(args)
    folder = write_tables(cfg)
    print(f"tables written to {folder}")
    # Best-effort: fill MLflow with whatever live logging missed (codyra sync-mlflow does it later otherwise).
    with_store(cfg, lambda store: sync_mlflow(cfg, folder, store))


def cmd_sync_mlflow(args) -> None:
    from codyra.store.paths import tables_dir
    from codyra.tracking.mirror import store_answers, tracking_uri
    from codyra.tracking.sync import sync_mlflow

    cfg = _config(args)
    uri = tracking_uri(cfg)
    if not store_answers(uri):
        raise ConnectionError(
            f"MLflow store {uri} does not answer: start the tracking server (see docs/mlflow.md) or point "
            "tracking.uri / MLFLOW_TRACKING_URI at one that runs, then sync again; the result files are unaffected"
        )
    counts = sync_mlflow(cfg, tables_dir(cfg))
    print(
        f"MLflow sync of {cfg['benchmark']}: {counts['created']} run(s) created "
        f"({counts['replaced']} replacing incomplete ones), {counts['kept']} already complete"
    )


def cmd_mlflow_init(args) -> None:
    from codyra.tracking.sync import init_store

    init_store(_config(args), args.marker)


def cmd_analysis(args) -> None:
    from codyra.analysis.registry import write

    write(_config(args), args.name, args.method)


def cmd_probe(args) -> None:
    from codyra.analysis.probes import run_probes

    run_probes(_config(args), args.method, args.seed, device=args.device)


def cmd_grad_conflict(args) -> None:
    from codyra.analysis.conflict import run_conflict

    run_conflict(_config(args), device=args.device)


def cmd_fetch_weights(args) -> None:
    from codyra.hub import cache_path

    if args.config is None and (args.set or args.all_backbones):
        raise ValueError("--set and --all-backbones choose what a config reads: give the config with --config")
    if args.config is not None:
        from codyra.experiment.weights import fetch_config_weights

        if args.pretrained is not None or args.revision is not None:
            raise ValueError("--pretrained and --revision name a model; with --config the config's model block does")
        configs = _fetch_configs(args)
        for cfg in configs:
            print(fetch_config_weights(cfg, args.cache_dir))
        caches = {cache_path(args.cache_dir or cfg["model"]["cache_dir"]) for cfg in configs}
    elif "/" in args.model:  # a Hugging Face hub id (org/name); open_clip names have no slash
        from codyra.hub import hub_label
        from codyra.llm.model import fetch_hub_model

        if args.pretrained is not None:
            raise ValueError("--pretrained is an open_clip tag; a Hugging Face model takes --revision")
        folder = fetch_hub_model(args.model, args.revision, args.cache_dir)
        print(f"{hub_label(args.model, args.revision)}: {folder}")
        caches = {cache_path(args.cache_dir)}
    else:
        from codyra.clip.model import fetch_weights

        if args.revision is not None:
            raise ValueError("--revision is a Hugging Face model's; an open_clip model takes --pretrained TAG")
        tag = args.pretrained or "openai"
        print(f"{args.model} / {tag} weights: {fetch_weights(args.model, tag, args.cache_dir)}")
        caches = {cache_path(args.cache_dir)}
    for cache in sorted(caches):
        print(
            f"compute nodes without internet: set model.cache_dir: {cache} in the config (jobs Snakemake "
            "submits run with HF_HUB_OFFLINE=1; for others export it)"
        )


def _fetch_configs(args) -> list[dict]:
    """The configs fetch-weights --config reads: the file with --set, or one per backbone (--all-backbones)."""
    if not args.all_backbones:
        return [_config(args)]
    from codyra.experiment.config import ConfigError, read_config_file

    backbones = read_config_file(args.config).get("backbones")
    if not isinstance(backbones, dict):
        raise ConfigError(f"--all-backbones: {args.config} has no backbones mapping (config/trace.yaml has one)")
    return [
        _config(argparse.Namespace(**{**vars(args), "set": [*(args.set or []), f"backbone={name}"]}))
        for name in backbones
    ]


def version_text() -> str:
    from codyra import __version__
    from codyra.checkout import git_commit

    commit = git_commit()
    return f"codyra {__version__}" + (f" (git {commit})" if commit else "")


class _VersionAction(argparse.Action):
    """--version, computed when asked for (a git call is no cost of other commands)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())  # on stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    from codyra.analysis.registry import ANALYSES

    parser = argparse.ArgumentParser(
        prog="codyra",
        description=DESCRIPTION,
        epilog="example: codyra train --method codyra --seed 0 --task 1   (codyra COMMAND --help for each command)",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the version (and the git commit of a checkout) and exit"
    )
    _add_log_option(parser, argparse.SUPPRESS)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="codyra COMMAND --help for its options"
    )

    def command(
        name,
        handler,
        help_text,
        example,
        *,
        config=True,
        sets=True,
        threads=False,
        device=False,
        launchable=False,
        details="",
    ):
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text + details,
            epilog=f"example: {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter if details else argparse.HelpFormatter,
        )
        _add_log_option(p, argparse.SUPPRESS)  # accepted before or after the command name
        if config:
            p.add_argument(
                "--config",
                default=DEFAULT_CONFIG,
                metavar="FILE",
                help=f"experiment config YAML (default {DEFAULT_CONFIG})",
            )
            if sets:
                add_set_option(p)
            else:
                p.set_defaults(set=[])
        if threads:
            p.add_argument(
                "--threads",
                type=int,
                metavar="N",
                help="torch CPU threads (default: the config's train/eval/pretrain threads)",
            )
        if device:
            p.add_argument("--device", help="torch device, e.g. cuda:1 or cpu (default: cuda if available, else cpu)")
        p.set_defaults(handler=handler)
        if launchable:
            add_launch_options(p)
        return p

    def single_task_option(p):
        p.add_argument(
            "--single-task",
            metavar="TASK",
            help="a run of the single-task studies (config key single_task) that train TASK from theta_0: "
            "the command runs on their config, benchmark <benchmark>-single-TASK (its one task is task 1)",
        )

    def run_options(p, seed_help="training seed of the run"):
        p.add_argument("--method", required=True, help="a method of the config's methods list (e.g. codyra, lora-r16)")
        p.add_argument("--seed", type=int, required=True, help=seed_help)

    def row_options(p):
        p.add_argument(
            "--method",
            required=True,
            help="a method of the config's methods list, or 'pretrained' for the shared row 0",
        )
        p.add_argument("--seed", type=int, help="training seed of the run (not for 'pretrained')")
        p.set_defaults(pretrained_row=True)
        p.add_argument(
            "--i", type=int, required=True, metavar="ROW", help="row: the model after tasks 1..i (0 = pretrained)"
        )

    command(
        "pretrain-mini",
        cmd_pretrain_mini,
        "write theta_0 of a mini benchmark: the tiny CLIP, or the mini TRACE's data, tokenizer and tiny LLaMA",
        "codyra pretrain-mini --config config/config.yaml",
        threads=True,
    )
    p = command(
        "train",
        cmd_train,
        "train task i from theta_{i-1} and store its merged update",
        "codyra train --method codyra --seed 0 --task 2",
        threads=True,
        device=True,
        launchable=True,
    )
    run_options(p)
    single_task_option(p)
    p.add_argument("--task", type=int, required=True, help="task index i, 1-based")
    p.add_argument(
        "--force",
        action="store_true",
        help="train even if the task is up to date (its stored update was trained with these settings and code)",
    )
    p = command(
        "cell",
        cmd_cell,
        "evaluate cell A[i,j], or all of row i without --j (method 'pretrained': the shared row 0)",
        "codyra cell --method codyra --seed 0 --i 2 --j 1",
        threads=True,
        device=True,
        launchable=True,
    )
    row_options(p)
    single_task_option(p)
    p.add_argument(
        "--j",
        type=int,
        metavar="TASK",
        help="column: the evaluated task, 1-based (default: every task of row i, theta_i built once)",
    )
    p = command(
        "eval-cache",
        cmd_eval_cache,
        "decode a dataset's test images once into the evaluation cache every row reads (MTIL, X-TAIL)",
        "codyra eval-cache --config config/mtil_5shot.yaml --dataset Food",
        threads=True,
    )
    p.add_argument("--dataset", required=True, help="a task or held-out task of the config, e.g. Food")
    p = command(
        "heldout",
        cmd_heldout,
        "evaluate theta_i on every held-out task (config key heldout_tasks; method 'pretrained' for i = 0)",
        "codyra heldout --method codyra --seed 0 --i 2",
        threads=True,
        device=True,
        launchable=True,
    )
    row_options(p)
    single_task_option(p)
    p = command(
        "summarize",
        cmd_summarize,
        "assemble a run's A matrix from its cells and compute its metrics",
        "codyra summarize --method codyra --seed 0",
    )
    run_options(p)
    p = command(
        "run",
        cmd_run,
        "one method x one seed over the whole stream in this process (no Snakemake)",
        "codyra run --method codyra --seed 0",
        threads=True,
        device=True,
        launchable=True,
    )
    run_options(p)
    single_task_option(p)
    p = command(
        "sweep",
        cmd_sweep,
        "run a method over a grid of hyperparameters (one codyra run per point and seed)",
        "codyra sweep --method codyra --grid kappa_max=0.005,0.01 --seeds 0 1 --slurm",
        threads=True,
        launchable=True,
    )
    p.add_argument("--method", required=True, help="method whose config the grid points vary")
    p.add_argument(
        "--seeds", type=int, nargs="+", default=[0], metavar="SEED", help="seeds of every grid point (default 0)"
    )
    p.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2",
        help="method option, e.g. train.lr=1e-4,5e-4 or kappa_max=0.005,0.01",
    )
    command(
        "tables",
        cmd_tables,
        "write the paper's tables of the benchmark (Markdown, CSV, LaTeX, HTML) and sync MLflow",
        "codyra tables --config config/mtil_5shot.yaml",
    )
    p = command(
        "status",
        cmd_status,
        "the state of the grid at a glance: per method and seed, the tasks trained, the cells evaluated, "
        "the jobs that failed (with their logs) and the serial compute left",
        "codyra status --config config/mtil_5shot.yaml",
    )
    p.add_argument("--json", action="store_true", help="print the state as JSON, for scripts")
    p = command(
        "invalidate",
        cmd_invalidate,
        "remove a run, a task or a cell and everything the workflow computes from it, then name the "
        "snakemake command that remakes them (deleting a folder by hand does nothing once the tables are newer)",
        "codyra invalidate --method codyra --seed 0 --task 3 --dry-run",
        sets=False,  # the workflow reads the config file as it is: no --set reaches it
    )
    p.add_argument("--method", required=True, help="a method of the grid, or 'pretrained' for the shared row 0")
    p.add_argument("--seed", type=int, help="one run of the method (default: every seed)")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--task", type=int, metavar="I", help="task i of the run, its later tasks and every row from i on"
    )
    which.add_argument(
        "--cell", type=int, nargs=2, metavar=("I", "J"), help="cell A[i, j] of the run (its row is recomputed)"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be removed and remove nothing")
    p.add_argument(
        "--snakefile",
        default=SNAKEFILE,
        metavar="FILE",
        help=f"the workflow whose DAG says what depends on what (default {SNAKEFILE})",
    )
    p.set_defaults(pretrained_row=True)
    command(
        "sync-mlflow",
        cmd_sync_mlflow,
        "create the MLflow runs live logging missed, from the result files (idempotent)",
        "codyra sync-mlflow --config config/mtil_5shot.yaml",
    )
    p = command(
        "mlflow-init",
        cmd_mlflow_init,
        "create the MLflow store, experiment and parent runs (before parallel jobs)",
        "codyra mlflow-init --marker results/mini/mlflow.ready.json",
    )
    p.add_argument("--marker", required=True, metavar="FILE", help="JSON file written once the store is ready")
    p = command(
        "analysis",
        cmd_analysis,
        "write one of the paper's analyses (tables and figures) from stored results (docs/analyses.md)",
        "codyra analysis drift",
        details="\n\nanalyses:\n" + "\n".join(f"  {name:<14}{a.description}" for name, a in ANALYSES.items()),
    )
    p.add_argument("name", metavar="NAME", choices=list(ANALYSES), help="the analysis: one of those listed above")
    p.add_argument("--method", help="the adapter method (analysis rank only)")
    p = command(
        "probe",
        cmd_probe,
        "interpolation theta_0 -> theta_N and module-removal probes of a run (held-out and stream accuracy)",
        "codyra probe --method codyra --seed 0",
        threads=True,
        device=True,
    )
    run_options(p)
    single_task_option(p)
    command(
        "grad-conflict",
        cmd_grad_conflict,
        "inter-task gradient conflict at theta_0 after SVD truncation (analysis.conflict_ranks)",
        "codyra grad-conflict",
        threads=True,
        device=True,
    )
    p = command(
        "fetch-weights",
        cmd_fetch_weights,
        "download pretrained weights (open_clip tags, Hugging Face models) into a cache and check they load "
        "(run once on a login node)",
        "codyra fetch-weights --config config/trace.yaml --all-backbones --cache-dir /shared/cache/hf",
        config=False,
    )
    p.add_argument(
        "--model",
        default="ViT-B-16",
        help="open_clip model name, or a Hugging Face id such as google/gemma-2b-it (default ViT-B-16)",
    )
    p.add_argument("--pretrained", metavar="TAG", help="open_clip pretrained tag (default openai)")
    p.add_argument("--revision", metavar="REV", help="Hugging Face model revision (default: the main branch)")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="fetch the weights this experiment config reads (its model block; --set applies)",
    )
    add_set_option(p, "with --config: override a key (repeatable), e.g. --set backbone=gemma-2b-it")
    p.add_argument(
        "--all-backbones", action="store_true", help="with --config: every model of its backbones (config/trace.yaml)"
    )
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="cache directory shared with compute nodes (default: the config's model.cache_dir, else $HF_HUB_CACHE)",
    )
    _register_optional(sub)
    return parser


def _add_log_option(p, default) -> None:
    p.add_argument(
        "--log",
        default=default,
        metavar="FILE",
        help="append this command's log, progress and any traceback to this file",
    )


def add_launch_options(p) -> None:
    from codyra.experiment.slurm import DEFAULT_PROFILE

    g = p.add_argument_group("launching on SLURM (submitit)")
    g.add_argument(
        "--slurm", action="store_true", help="submit to SLURM instead of running here (example: --slurm --wait)"
    )
    g.add_argument(
        "--slurm-profile",
        default=DEFAULT_PROFILE,
        metavar="DIR",
        help=f"Snakemake profile whose resources to request (default {DEFAULT_PROFILE})",
    )
    g.add_argument(
        "--executor", choices=["slurm", "local", "debug"], help="submitit executor (default: slurm if available)"
    )
    g.add_argument("--wait", action="store_true", help="wait for the job(s) and fail if one fails")


def cmd_sweep(args) -> None:
    from codyra.experiment.slurm import sweep

    report_jobs(sweep(args, _config(args), run), args)


def report_jobs(jobs, args) -> None:
    if not args.slurm:
        return
    for job in jobs:
        print(f"submitted job {job.job_id}: log {job.paths.stdout}")
    if args.wait:
        for job in jobs:
            job.result()  # raises submitit's FailedJobError with the job's stderr tail
            print(f"job {job.job_id} finished")


def _register_optional(sub) -> None:
    """Subcommands that live with their feature (they register without heavy imports)."""
    from codyra.data.check import register_cli
    from codyra.experiment import resources
    from codyra.rehearsal import command as rehearse

    register_cli(sub, cmd_data_check)
    rehearse.register_cli(sub)
    resources.register_cli(sub)


def cmd_data_check(args) -> int:
    from codyra.data.check import run_check
    from codyra.experiment.config import load_config
    from codyra.methods import reference_readers

    cfg = load_config(args.config)
    return run_check(args, cfg, reference_readers(cfg))


def run(argv: list[str], config: dict | None = None) -> int:
    """Run a command; exceptions propagate (Snakemake jobs use this and fail on them).

    ``config`` replaces reading ``--config`` from disk (the workflow passes its validated config).
    """
    from codyra.progress import job_log

    args = build_parser().parse_args(argv)
    args.config_dict = config
    args.log = getattr(args, "log", None)
    if getattr(args, "slurm", False) and args.command != "sweep":
        from codyra.experiment.slurm import submit

        report_jobs(submit(args, _config(args), argv, run), args)
        return 0
    with job_log(args.log):
        return args.handler(args) or 0


def main(argv: list[str] | None = None) -> int:
    from codyra.errors import ConfigError, MissingExtraError

    try:
        return run(sys.argv[1:] if argv is None else argv)
    except (
        ConfigError,
        OSError,
        ValueError,
        KeyError,
        ConnectionError,
        MissingExtraError,
    ) as err:  # OSError: a full disk, a read-only folder
        print(f"codyra: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    code = main()
    if "LOCAL_RANK" in os.environ:  # a rank torchrun started
        from codyra.llm.torchrun import leave_rank

        leave_rank(code)
    sys.exit(code)
