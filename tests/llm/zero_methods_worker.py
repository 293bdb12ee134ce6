"""One rank of the TRACE methods' ZeRO-2 bf16 run (started once by test_trace_methods_zero.py under
torchrun): ``zero_methods_worker.py OUT CONFIG METHOD [METHOD ...] [-- CONFIG METHOD ...]`` trains
tasks 1 and 2 of every METHOD of each CONFIG in turn (a ZeroBackend per task, one process group for
all), and writes what the methods computed from their stored state to ``OUT/observations-rank{r}.json``:
per "benchmark:method:task", the values of the terms that read task 1's state (O-LoRA's orthogonality
term, EWC's penalty, TreeLoRA's regulariser) and GEM's and OGD's projections against it."""

import json
import os
import sys
from pathlib import Path

import torch

from codyra.experiment.config import load_config
from codyra.experiment.train_job import train_task
from codyra.llm.deepspeed_backend import ZeroBackend
from codyra.methods import ewc, gem, ogd, olora, treelora

GATHER_CHUNK = 1000  # fewer elements than the embedding holds: checkpoints and finalize gather in pieces
observations: dict[str, dict[str, list]] = {}
current = [""]


def record(module, name: str, describe) -> None:
    """Wrap ``module.name`` so that each call appends ``describe(args, result)`` to the current job's list."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        observations.setdefault(current[0], {}).setdefault(name, []).append(describe(args, result))
        return result

    setattr(module, name, wrapper)


def value(args, result):
    return None if result is None else float(result.detach().float())


def projection(args, result):
    """(memory rows, whether the projection changed the gradient)."""
    gradient, memories = args[0], args[1]
    return [len(memories), not torch.equal(result, gradient)]


def basis_projection(args, result):
    grads, basis = args[0], args[1]
    return [basis.shape[1], any(not torch.equal(a, b) for a, b in zip(result, grads, strict=True))]


record(olora, "orthogonality_loss", value)
record(ewc, "ewc_penalty", value)
record(treelora, "tree_regularizer", value)
record(gem, "project_gradient", projection)
record(ogd, "project_parameters", basis_projection)


def runs(argv: list[str]):
    """(config path, method) pairs of the command line's ``CONFIG METHOD ...`` groups, split at ``--``."""
    group: list[str] = []
    for arg in [*argv, "--"]:
        if arg != "--":
            group.append(arg)
            continue
        config, *methods = group
        yield from ((config, m) for m in methods)
        group = []


if __name__ == "__main__":
    out = Path(sys.argv[1])
    ZeroBackend.gather_chunk = GATHER_CHUNK
    for config, method in runs(sys.argv[2:]):
        cfg = load_config(config)
        for task in (1, 2):
            current[0] = f"{cfg['benchmark']}:{method}:{task}"
            train_task(cfg, method, 0, task)
    rank = os.environ["RANK"]
    (out / f"observations-rank{rank}.json").write_text(json.dumps(observations))
