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
    return load_config(cfg)


def cmd_pretrain_mini(args) -> None:
    from codyra.benchmarks import pretrained_weights
    from codyra.mini.pretrain import pretrain_mini

    cfg = _config(args)
    if cfg["data"]["kind"] != "mini":
        raise ValueError("pretrain-mini only applies to configs with data.kind: mini")
    pretrain_mini(cfg, args.out or pretrained_weights(cfg))


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


def cmd_summarize(args) -> None:
    from codyra.results import summarize_run

    summarize_run(_config(args), args.method, args.seed)


def cmd_run(args) -> None:
    from codyra.results import run_stream

    run_stream(_config(args), args.method, args.seed, device=args.device)


def cmd_fetch_weights(args) -> None:
    from codyra.clip.model import create_clip, default_cache_dir

    create_clip(args.model, args.pretrained, cache_dir=args.cache_dir)
    print(f"{args.model} / {args.pretrained} is in the cache {default_cache_dir(args.cache_dir)}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codyra", description=__doc__.splitlines()[0])
    parser.add_argument("--log", help="append this job's log, progress and any traceback to this file")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, handler, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"experiment config YAML (default {DEFAULT_CONFIG})")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key, e.g. train.lr=1e-4")
        p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
        p.set_defaults(handler=handler)
        return p

    p = command("pretrain-mini", cmd_pretrain_mini, "pretrain the mini benchmark's tiny CLIP (theta_0)")
    p.add_argument("--out", help="output .safetensors (default: the config's pretrained path)")
    p = command("train", cmd_train, "train task i from theta_{i-1} and store its merged update")
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--task", type=int, required=True, help="task index i, 1-based")
    p = command("cell", cmd_cell, "evaluate one cell A[i,j] (method 'pretrained' for the shared row 0)")
    p.add_argument("method")
    p.add_argument("seed", type=int)
    p.add_argument("i", type=int)
    p.add_argument("j", type=int)
    p = command("summarize", cmd_summarize, "assemble a run's A matrix from its cells and compute its metrics")
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p = command("run", cmd_run, "one method x one seed over the whole stream in this process (no Snakemake)")
    p.add_argument("--method", required=True)
    p.add_argument("--seed", type=int, required=True)
    p = sub.add_parser("fetch-weights", help="download open_clip weights into a cache (run once on a login node)")
    p.add_argument("--model", default="ViT-B-16")
    p.add_argument("--pretrained", default="openai")
    p.add_argument("--cache-dir", help="cache directory shared with compute nodes")
    p.set_defaults(handler=cmd_fetch_weights)
    _register_optional(sub)
    return parser


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
