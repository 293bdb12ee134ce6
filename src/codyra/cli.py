"""The ``codyra`` command line: one command per Snakemake job, usable on its own.

Heavy modules (torch, open_clip) are imported inside the handlers, so ``codyra --help``
and argument errors answer instantly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

DEFAULT_CONFIG = "config/config.yaml"


def _config(args) -> dict:
    """The validated config: from the workflow (``run(config=...)``) or the --config file, plus --set."""
    import copy

    from codyra.config import ConfigError, load_config

    if args.config_dict is not None:
        cfg = copy.deepcopy(args.config_dict)
    else:
        path = Path(args.config)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (pass --config <file>)")
        cfg = yaml.safe_load(path.read_text())
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        node = cfg
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
    cfg = load_config(cfg)
    if args.threads:  # the scheduler's allotment wins over the config's thread counts
        _set_threads(cfg, args.threads)
    return cfg


def _set_threads(cfg: dict, threads: int) -> None:
    cfg["eval"]["threads"] = cfg["mini"]["pretrain_threads"] = threads
    per_task = [m for t in cfg["tasks"] for m in (t, *t.get("methods", {}).values())]
    for layer in (cfg, *cfg["method_configs"].values(), *per_task):
        if "train" in layer:
            layer["train"]["threads"] = threads


def cmd_pretrain_mini(args) -> None:
    from codyra.benchmarks import pretrain_own

    pretrain_own(_config(args))


def cmd_train(args) -> None:
    from codyra.train import train_task

    train_task(_config(args), args.method, args.seed, args.task, device=args.device)


def cmd_cell(args) -> None:
    from codyra.evaluate import PRETRAINED, evaluate_cell, evaluate_row0

    cfg = _config(args)
    if args.method == PRETRAINED:
        if args.i != 0:
            raise ValueError("the pretrained model only has row i = 0")
        evaluate_row0(cfg, args.j, device=args.device)
    else:
        evaluate_cell(cfg, args.method, args.seed, args.i, args.j, device=args.device)


def cmd_heldout(args) -> None:
    from codyra.heldout import evaluate_heldout

    evaluate_heldout(_config(args), args.method, args.seed, args.i, device=args.device)


def cmd_summarize(args) -> None:
    from codyra.results import summarize_run

    summarize_run(_config(args), args.method, args.seed)


def cmd_run(args) -> None:
    from codyra.results import run_stream

    run_stream(_config(args), args.method, args.seed, device=args.device)


def cmd_tables(args) -> None:
    from codyra.mlflow_sync import sync_mlflow
    from codyra.tables import write_tables
    from codyra.tracking import with_store

    cfg = _config(args)
    folder = write_tables(cfg)
    print(f"tables written to {folder}")
    # Best-effort: fill MLflow with whatever live logging missed (codyra sync-mlflow does it later otherwise).
    with_store(cfg, lambda store: sync_mlflow(cfg, folder, store))


def cmd_sync_mlflow(args) -> None:
    from codyra.mlflow_sync import sync_mlflow
    from codyra.paths import tables_dir

    cfg = _config(args)
    counts = sync_mlflow(cfg, tables_dir(cfg))
    print(f"MLflow sync of {cfg['benchmark']}: {counts['created']} run(s) created ({counts['replaced']} replacing incomplete ones), {counts['kept']} already complete")


def cmd_mlflow_init(args) -> None:
    from codyra.mlflow_sync import init_store

    init_store(_config(args), args.marker)


def cmd_fetch_weights(args) -> None:
    from codyra.clip.model import fetch_weights, weights_cache_dir

    path = fetch_weights(args.model, args.pretrained, args.cache_dir)
    print(f"{args.model} / {args.pretrained} weights: {path}")
    print(
        f"compute nodes without internet: set model.cache_dir: {weights_cache_dir(args.cache_dir)} "
        "in the config and export HF_HUB_OFFLINE=1"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codyra", description=__doc__.splitlines()[0])
    parser.add_argument("--log", help="append this job's log, progress and any traceback to this file")
    parser.add_argument("--threads", type=int, help="torch threads for this command (default: the config's)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, handler, help_text, launchable=False):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"experiment config YAML (default {DEFAULT_CONFIG})")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key, e.g. train.lr=1e-4")
        p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
        p.set_defaults(handler=handler)
        if launchable:
            add_launch_options(p)
        return p

    p = command("pretrain-mini", cmd_pretrain_mini, "write theta_0 of a mini benchmark: the tiny CLIP, or the mini TRACE's data, tokenizer and tiny LLaMA")
    p.add_argument("--out", help="output .safetensors, or folder for a causal LM (default: the config's pretrained path)")
    p = command("train", cmd_train, "train task i from theta_{i-1} and store its merged update", launchable=True)
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--task", type=int, required=True, help="task index i, 1-based")
    p = command("cell", cmd_cell, "evaluate one cell A[i,j] (method 'pretrained' for the shared row 0)", launchable=True)
    p.add_argument("method")
    p.add_argument("seed", type=int)
    p.add_argument("i", type=int)
    p.add_argument("j", type=int)
    p = command("heldout", cmd_heldout, "evaluate theta_i on every held-out task (config key heldout_tasks; method 'pretrained' for i = 0)", launchable=True)
    p.add_argument("method")
    p.add_argument("seed", type=int)
    p.add_argument("i", type=int)
    p = command("summarize", cmd_summarize, "assemble a run's A matrix from its cells and compute its metrics")
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p = command("run", cmd_run, "one method x one seed over the whole stream in this process (no Snakemake)", launchable=True)
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p = command("sweep", cmd_sweep, "run a method over a grid of hyperparameters (one `run` per point and seed)")
    add_launch_options(p)
    p.add_argument("--method", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2", help="method option, e.g. train.lr=1e-4,5e-4 or kappa_max=0.005,0.01")
    command("tables", cmd_tables, "write the paper's tables of the benchmark (Markdown, CSV, LaTeX) and sync MLflow")
    command("sync-mlflow", cmd_sync_mlflow, "create the MLflow runs live logging missed, from the result files (idempotent)")
    p = command("mlflow-init", cmd_mlflow_init, "create the MLflow store, experiment and parent runs (before parallel jobs)")
    p.add_argument("--marker", required=True, help="JSON file written once the store is ready")
    p = sub.add_parser("fetch-weights", help="download open_clip weights into a cache (run once on a login node)")
    p.add_argument("--model", default="ViT-B-16")
    p.add_argument("--pretrained", default="openai")
    p.add_argument("--cache-dir", help="cache directory shared with compute nodes (default: $HF_HUB_CACHE)")
    p.set_defaults(handler=cmd_fetch_weights)
    _register_optional(sub)
    return parser


def add_launch_options(p) -> None:
    from codyra.launch import DEFAULT_PROFILE

    g = p.add_argument_group("launching on SLURM (submitit)")
    g.add_argument("--slurm", action="store_true", help="submit to SLURM instead of running here")
    g.add_argument("--slurm-profile", default=DEFAULT_PROFILE, help=f"Snakemake profile whose resources to request (default {DEFAULT_PROFILE})")
    g.add_argument("--executor", choices=["slurm", "local", "debug"], help="submitit executor (default: slurm if available)")
    g.add_argument("--wait", action="store_true", help="wait for the job(s) and fail if one fails")


def cmd_sweep(args) -> None:
    from codyra.launch import sweep

    report_jobs(sweep(args, _config(args)), args)


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
    from codyra.data.cli import register_cli

    register_cli(sub)


def run(argv: list[str], config: dict | None = None) -> int:
    """Run a command; exceptions propagate (Snakemake jobs use this and fail on them).

    ``config`` replaces reading ``--config`` from disk (the workflow passes its validated config).
    """
    from codyra.progress import job_log

    args = build_parser().parse_args(argv)
    args.config_dict = config
    if getattr(args, "slurm", False) and args.command != "sweep":
        from codyra.launch import submit

        report_jobs(submit(args, _config(args), argv), args)
        return 0
    with job_log(args.log):
        return args.handler(args) or 0


def main(argv: list[str] | None = None) -> int:
    from codyra.config import ConfigError

    try:
        return run(sys.argv[1:] if argv is None else argv)
    except (ConfigError, FileNotFoundError, ValueError, KeyError) as err:
        print(f"codyra: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
