"""One command that shows, on one GPU in minutes, that the paper grids' GPU paths run: what a CPU
rehearsal cannot show (CUDA, bf16 kernels, NCCL's single-rank group, the GPU's memory).

Sections (``--sections``, default all, in this order; each writes its figures to ``--out`` as
soon as it ends, so a failure keeps what came before and records its error):

- ``trace``: the mini TRACE (config/mini_trace_baselines.yaml: every TRACE method) pretrained once,
  then tasks 1-2 of every method and its row 2, in bf16, twice: on the plain backend and under
  DeepSpeed ZeRO-2 with one rank (in this process: the rank's environment is set here, as torchrun
  sets it). Per method and backend: seconds, steps, final loss, the cells; per method: the largest
  difference between the two backends' step losses.
- ``clip_row``: row 0 of config/mtil_5shot.yaml's 11 tasks on the rehearsal's stand-in CLIP and
  fixture datasets (codyra.rehearsal), from the evaluation cache and from the JPEGs: both paths'
  seconds and whether every cell agrees.
- ``clip_graphs``: the mini CLIP's first task (config/config.yaml: LoRA r16 and CoDyRA) in bf16,
  three ways: eager, compiled (``train.compile``) and compiled with its graphs replayed as CUDA
  graphs (``train.compile_mode: reduce-overhead``). Per method and way: seconds, the median step
  after the first two (which compile), final loss; per method: the largest relative difference of
  the step losses between the graphed and the compiled run (the same kernels, replayed) and
  between the graphed and the eager run. The graphed way then trains task 2 in the same process, as
  a run's group job trains its tasks: its seconds and median step, and the GPU memory reserved
  before task 1 and after each task (free cached blocks returned first: what the CUDA graphs' pool
  keeps), which shows whether the pool grows with the tasks of a job.
- ``gpu_costs``: benchmarks/gpu_costs.py (its own record beside this one).

    python benchmarks/gpu_smoke.py                          # about 10 minutes on an H100, and clip_graphs' compilations
    python benchmarks/gpu_smoke.py --device cpu --smoke     # tiny sizes: checks the script only
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_record import write_record  # a sibling script

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("trace", "clip_row", "clip_graphs", "gpu_costs")
COMPILE_WAYS = {  # train keys of each way clip_graphs trains a task
    "eager": {"compile": False},
    "compiled": {"compile": True, "compile_mode": "default"},
    "graphed": {"compile": True, "compile_mode": "reduce-overhead"},
}
BACKENDS = ("plain", "deepspeed")
SMOKE_MINI = {"corpus_size": 100, "pretrain_steps": 2, "train_per_task": 10, "test_per_task": 10}


def rank_environment() -> None:
    """One DeepSpeed rank in this process, as torchrun would start it (codyra.llm.torchrun)."""
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")


def trace_configs(folder: Path, smoke: bool, methods: list[str] | None) -> dict[str, dict]:
    """The mini TRACE baselines' config, tasks 1-2 in bf16, once per backend; the DeepSpeed one
    reads the plain one's theta_0 and data (one pretraining)."""
    from codyra.experiment.config import load_config, read_config_file

    raw = read_config_file(REPO / "config" / "mini_trace_baselines.yaml")
    raw.update(seeds=[0], tasks=raw["tasks"][:2], tracking={"enabled": False})
    raw["task_settings"] = {t: s for t, s in raw.get("task_settings", {}).items() if t in raw["tasks"]}
    raw["train"]["precision"] = raw.setdefault("eval", {})["precision"] = "bf16"
    if methods:
        raw["methods"] = methods
    if smoke:
        raw["mini"].update(SMOKE_MINI)
    plain = copy.deepcopy(raw) | {"results": str(folder / "plain")}
    plain["llm"]["deepspeed"] = {"enabled": False}
    plain = load_config(plain)
    zero = copy.deepcopy(raw) | {"results": str(folder / "deepspeed")}
    zero["llm"]["deepspeed"] = {"enabled": True, "nproc": 1}
    pretrained = Path(plain["results"]) / plain["benchmark"]
    zero["model"]["pretrained"] = str(pretrained / "pretrain")
    zero["data"]["root"] = str(pretrained / "data")
    return {"plain": plain, "deepspeed": load_config(zero)}


def largest_relative_difference(pairs) -> float:
    """Over (reference, other) loss pairs."""
    return max(abs(a - b) / max(abs(a), 1e-12) for a, b in pairs)


def history(cfg: dict, method: str, task: int) -> list[dict]:
    from codyra.store.paths import HISTORY_FILE, task_dir

    return [json.loads(line) for line in (task_dir(cfg, method, 0, task) / HISTORY_FILE).read_text().splitlines()]


def losses(cfg: dict, method: str, task: int) -> list[float]:
    return [record["loss"] for record in history(cfg, method, task)]


def median_step_seconds(records: list[dict]) -> float | None:
    """The median time between the ends of a history's consecutive steps, after the first two (a
    compilation)."""
    from codyra.store.paths import TIME

    ends = [record[TIME] for record in records][2:]
    return statistics.median(b - a for a, b in itertools.pairwise(ends)) if len(ends) > 1 else None


def run_trace(args, folder: Path) -> dict:
    from codyra.evaluation.evaluate import evaluate_row
    from codyra.experiment.pretraining import pretrain_own
    from codyra.experiment.train_job import train_task
    from codyra.methods import method_of

    configs = trace_configs(folder, args.smoke, args.methods)
    began = time.perf_counter()
    pretrain_own(configs["plain"])
    out = {"pretrain_seconds": round(time.perf_counter() - began, 1), "methods": {}}
    rank_environment()
    for backend in BACKENDS:  # plain first: no process group exists while it trains
        cfg = configs[backend]
        for method in cfg["methods"]:
            record = out["methods"].setdefault(method, {})
            began = time.perf_counter()
            tasks = []
            if method_of(cfg, method).trains:
                for i in (1, 2):
                    summary = train_task(cfg, method, 0, i, device=args.device).summary
                    tasks.append({"steps": summary["steps"], "final_loss": summary["final_loss"]})
            cells = evaluate_row(cfg, method, 0, 2, device=args.device)
            record[backend] = {
                "seconds": round(time.perf_counter() - began, 2),
                "tasks": tasks,
                "cells": [c["accuracy"] for c in cells],
            }
    for method, record in out["methods"].items():
        if method_of(configs["plain"], method).trains:
            pairs = [
                pair for i in (1, 2) for pair in zip(*(losses(configs[k], method, i) for k in BACKENDS), strict=True)
            ]
            record["max_relative_loss_difference"] = largest_relative_difference(pairs)
    return out


def reserved_gib(device: str) -> float | None:
    """GiB the CUDA caching allocator keeps once its free cached blocks are returned (live tensors and
    the pools of live CUDA graphs); None off CUDA."""
    import torch

    if not device.startswith("cuda"):
        return None
    gc.collect()
    torch.cuda.empty_cache()
    return torch.cuda.memory_reserved(torch.device(device)) / 2**30


def run_clip_graphs(args, folder: Path) -> dict:
    """The mini CLIP's task 1 eager, compiled and replayed as CUDA graphs, then the graphed way's task 2
    in the same process (module docstring)."""
    from codyra.experiment.config import load_config, read_config_file
    from codyra.experiment.pretraining import pretrain_own
    from codyra.experiment.train_job import train_task
    from codyra.store.paths import MINI_PRETRAINED, results_path

    raw = read_config_file(REPO / "config" / "config.yaml")
    raw.update(seeds=[0], tasks=raw["tasks"][:2], methods=["lora-r16", "codyra"], tracking={"enabled": False})
    raw["train"]["precision"] = "bf16"
    raw["train"]["iterations"] = 5 if args.smoke else 50  # enough steps for a median; compiling dominates
    if args.smoke:
        raw["mini"].update(SMOKE_MINI)
    configs = {}
    for way, train in COMPILE_WAYS.items():
        cfg = copy.deepcopy(raw) | {"results": str(folder / way)}
        cfg["train"].update(train)
        if configs:  # one pretraining: the others read the eager run's theta_0
            cfg["model"]["pretrained"] = str(results_path(configs["eager"], MINI_PRETRAINED))
        configs[way] = load_config(cfg)
    pretrain_own(configs["eager"])
    out = {"methods": {}}
    for method in raw["methods"]:
        record = out["methods"].setdefault(method, {})
        steps = {}
        for way, cfg in configs.items():
            if way == "graphed":
                before = reserved_gib(args.device)
            began = time.perf_counter()
            summary = train_task(cfg, method, 0, 1, device=args.device).summary
            seconds, records = time.perf_counter() - began, history(cfg, method, 1)
            steps[way] = [r["loss"] for r in records]
            record[way] = {
                "seconds": round(seconds, 2),
                "median_step_seconds": median_step_seconds(records),
                "final_loss": summary["final_loss"],
            }
        graphed = configs["graphed"]  # its task 2, in this process as in a run's group job
        after_task1 = reserved_gib(args.device)
        began = time.perf_counter()
        train_task(graphed, method, 0, 2, device=args.device)
        record["graphed_task2"] = {
            "seconds": round(time.perf_counter() - began, 2),
            "median_step_seconds": median_step_seconds(history(graphed, method, 2)),
        }
        record["graphed_reserved_gib"] = {
            "before_task1": before,
            "after_task1": after_task1,
            "after_task2": reserved_gib(args.device),
        }
        for other in ("compiled", "eager"):
            pairs = zip(steps[other], steps["graphed"], strict=True)
            record[f"graphed_vs_{other}"] = largest_relative_difference(pairs)
    return out


def run_clip_row(args, folder: Path) -> dict:
    """Row 0 of MTIL's 11 tasks from the evaluation cache and from the JPEGs, on the rehearsal's world."""
    from codyra.evaluation.caching import cache_test_set
    from codyra.evaluation.evaluate import PRETRAINED, evaluate_row
    from codyra.experiment.config import load_config, overlay, read_config_file
    from codyra.rehearsal.run import write_world

    raw = read_config_file(REPO / "config" / "mtil_5shot.yaml")
    raw.update(tracking={"enabled": False}, methods=["zeroshot"])
    world = write_world(load_config(copy.deepcopy(raw)), folder / "world")
    out = {}
    for path, cache in (("cache", True), ("jpeg", False)):
        cfg = overlay(raw, {**world["overrides"], "results": str(folder / path), "eval": {"cache": cache}})
        cfg = load_config(cfg)
        began = time.perf_counter()
        if cache:
            for task in cfg["tasks"]:
                cache_test_set(cfg, task)
        cached = time.perf_counter()
        cells = evaluate_row(cfg, PRETRAINED, None, 0, device=args.device)
        out[path] = {
            "cache_seconds": round(cached - began, 2),
            "row_seconds": round(time.perf_counter() - cached, 2),
            "cells": {c["task"]: [c["accuracy"], c["num_samples"]] for c in cells},
        }
    out["cells_agree"] = out["cache"]["cells"] == out["jpeg"]["cells"]
    return out


def run_gpu_costs(args, folder: Path) -> dict:
    record = args.out.with_name(args.out.stem + "-gpu_costs.json")
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_costs.py"), "--device", args.device, "--out", str(record)]
    done = subprocess.run(command + (["--smoke"] if args.smoke else []), check=False, text=True, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"gpu_costs.py exited {done.returncode}:\n{done.stderr[-3000:]}")
    return {"record": str(record)}


RUNNERS = {"trace": run_trace, "clip_row": run_clip_row, "clip_graphs": run_clip_graphs, "gpu_costs": run_gpu_costs}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, from " + ", ".join(SECTIONS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    parser.add_argument("--methods", nargs="+", help="the mini TRACE methods to run (default: every one)")
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks/gpu_smoke.json"))
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    if unknown := sorted(set(sections) - set(SECTIONS)):
        parser.error(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    import torch

    from codyra import __version__

    load = os.getloadavg()[0]
    figures = {"device": args.device, "smoke": args.smoke, "sections": {}}
    if args.device.startswith("cuda"):
        figures["gpu"] = torch.cuda.get_device_name(torch.device(args.device))
    libraries = {"torch": torch.__version__, "codyra": __version__}
    record = {}
    with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as scratch:
        for name in sections:
            began = time.perf_counter()
            try:
                result = RUNNERS[name](args, Path(scratch) / name)
            except Exception as err:  # noqa: BLE001 - a failed section records its error, the next ones still run
                result = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-4000:]}
            figures["sections"][name] = {**result, "seconds": round(time.perf_counter() - began, 1)}
            record = write_record(args.out, figures, load, libraries)
    print(json.dumps({k: v.get("error", "ok") for k, v in figures["sections"].items()}))
    return record


if __name__ == "__main__":
    sections = main()["sections"]
    sys.exit(1 if any("error" in s for s in sections.values()) else 0)
