"""Re-execute `codyra train` under torchrun when the config asks for DeepSpeed.

A Snakemake rule (or a user) runs one plain command, ``codyra train --config ... --method m
--seed s --task i``, in a job that holds N GPUs. When ``llm.deepspeed.enabled`` is set and
this process is not already a rank (torchrun and the deepspeed launcher set ``LOCAL_RANK``),
it starts ``torchrun --standalone --nproc-per-node=N -m codyra.cli train ...`` with the same
job, waits, and returns what rank 0 wrote. The ranks read the already validated config from
a file in the task folder (so ``--set`` overrides and the workflow's config reach them
unchanged) with live MLflow logging off: this process owns the task's MLflow run and
replays the ranks' ``history.jsonl`` into it afterwards. The ranks' output goes to this
job's log (``codyra --log``), also when the job runs as a thread of Snakemake.
"""

from __future__ import annotations

import atexit
import copy
import io
import json
import logging
import os
import subprocess
import sys
from typing import NoReturn

import torch
import yaml

from codyra.progress import job_stream
from codyra.store.io import read_json, write_text
from codyra.store.paths import HISTORY_FILE, SUMMARY_FILE, task_dir

log = logging.getLogger(__name__)
LAUNCH_CONFIG = "launch-config.yaml"


def in_distributed_rank() -> bool:
    return "LOCAL_RANK" in os.environ


def leave_rank(code: int) -> NoReturn:
    """End a rank's process once Python's exit work is done (the atexit handlers: leaving the
    process group together, flushing logs) but before the interpreter's C++ teardown: gloo's
    threads, destroyed there, can abort a rank that finished its work ("terminate called without
    an active exception"), and torchrun then fails a job whose outputs are complete."""
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def rank_count(cfg: dict) -> int:
    """``llm.deepspeed.nproc``, else the GPUs this job can see (SLURM sets CUDA_VISIBLE_DEVICES), else 1."""
    return cfg["llm"]["deepspeed"]["nproc"] or max(1, torch.cuda.device_count())


def _job_output():
    """This job's log stream if it is a real file, else None (inherit this process's output)."""
    stream = job_stream()
    try:
        stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
    stream.flush()
    return stream


def launch_ranks(cfg: dict, method: str, seed: int, task_index: int, run) -> dict:
    """Train task ``task_index`` on ``rank_count(cfg)`` ranks; returns the summary rank 0 wrote."""
    out = task_dir(cfg, method, seed, task_index)
    config_file = out / LAUNCH_CONFIG
    rank_cfg = copy.deepcopy(cfg)
    rank_cfg["tracking"]["enabled"] = False
    write_text(config_file, yaml.safe_dump(rank_cfg, sort_keys=False))
    nproc = rank_count(cfg)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "codyra.cli",
        "train",
        "--config",
        str(config_file),
        "--method",
        method,
        "--seed",
        str(seed),
        "--task",
        str(task_index),
    ]
    log.info("launching %d DeepSpeed rank(s): %s", nproc, " ".join(command))
    output = _job_output()
    finished = subprocess.run(command, check=False, stdout=output, stderr=subprocess.STDOUT if output else None)
    if finished.returncode != 0:
        raise RuntimeError(
            f"distributed training of {out} failed (torchrun exit code {finished.returncode}); "
            "the ranks' tracebacks are in this job's log"
        )
    config_file.unlink()
    for line in (out / HISTORY_FILE).read_text().splitlines():
        run.metrics(json.loads(line))
    return read_json(out / SUMMARY_FILE)
