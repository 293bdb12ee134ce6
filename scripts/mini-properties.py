#!/usr/bin/env python
"""Check a finished mini grid (CLIP or TRACE) against the properties it is designed for.

Reads ``<results>/<method>/seed<s>/matrix.json`` of every run and the pretrained row's cells (a
CLIP cell holds its task's number of classes, a TRACE cell its metric), prints each property
with its measured value, and exits 1 when one fails. For the CLIP mini the thresholds are those
docs/mini.md, "The CLIP mini", states:

- no task saturated before training: zero-shot A[0, j] <= 85 on every task, and >= 2x chance on
  at least 3 tasks;
- every task learnable: A[j, j] - A[0, j] >= 15 on at least 4 of 5 tasks (seed mean), for each
  of the learning methods checked (default full-ft and lora-r16);
- sequential fine-tuning forgets: full-ft Forgetting (paper) >= 5;
- learning pays: the seed-mean Last of each learning method >= zero-shot's Last + 10.

For the mini TRACE ("The mini TRACE"), with TRACE's LoRA (lora-r8-qv) first:

- every task new and learnable: A[j, j] - A[0, j] >= 20 on at least 6 of 8 tasks (3/4 of them;
  seed mean) for the first method;
- sequential fine-tuning forgets: its Forgetting (paper) >= 5;
- fine-tuning pays: the seed-mean OP of each method checked > zero-shot's OP + 10.

Usage: python scripts/mini-properties.py [results/mini | results/mini-trace] [--methods ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from codyra.evaluation.metrics import forgetting

RUN_THE_GRID = (
    "run the grid first: `snakemake --cores 2 all_tables` (mini TRACE: add `--configfile config/mini_trace.yaml`)"
)


def load_runs(root: Path, method: str) -> list[np.ndarray]:
    paths = sorted((root / method).glob("seed*/matrix.json"))
    if not paths:
        raise SystemExit(f"no {root / method}/seed*/matrix.json: {RUN_THE_GRID}")
    return [np.asarray(json.loads(p.read_text())["A"], dtype=float) for p in paths]


CLIP_METHODS = ["full-ft", "lora-r16"]
TRACE_METHODS = ["lora-r8-qv", "seqlora-r8-qv", "lora-r16-all"]  # TRACE's LoRA first


def pretrained_cell(root: Path, j: int) -> dict:
    cell = root / "pretrained" / "cells" / f"A_0_{j}.json"
    if not cell.is_file():
        raise SystemExit(f"missing pretrained cell {cell}: {RUN_THE_GRID}")
    return json.loads(cell.read_text())


def is_trace(root: Path) -> bool:
    """A TRACE cell names its metric; a CLIP cell its number of classes."""
    return "num_classes" not in pretrained_cell(root, 1)


def chance_levels(root: Path, n: int) -> np.ndarray:
    return np.array([100.0 / pretrained_cell(root, j)["num_classes"] for j in range(1, n + 1)])


def check(root: Path, methods: list[str]) -> list[tuple[str, str, bool]]:
    """(property, measured value, holds) for every property of the module docstring."""
    runs = {m: load_runs(root, m) for m in methods}
    zero_shot = runs[methods[0]][0][0]
    n = len(zero_shot)
    chance = chance_levels(root, n)
    above = zero_shot / chance
    rows = [
        (
            "zero-shot A[0,j] <= 85 on every task",
            " ".join(f"{a:.1f}" for a in zero_shot),
            bool((zero_shot <= 85).all()),
        ),
        (">= 2x chance on >= 3 tasks", " ".join(f"{r:.2f}x" for r in above), int((above >= 2).sum()) >= 3),
    ]
    for method, matrices in runs.items():
        A = np.mean(matrices, axis=0)
        gains = np.array([A[j + 1, j] - A[0, j] for j in range(n)])
        rows.append(
            (
                f"{method}: A[j,j] - A[0,j] >= 15 on >= 4 tasks",
                " ".join(f"{g:+.1f}" for g in gains),
                int((gains >= 15).sum()) >= 4,
            )
        )
        lift = float(np.mean([m[-1].mean() - m[0].mean() for m in matrices]))
        rows.append((f"{method}: Last - zero-shot Last >= 10", f"{lift:+.1f}", lift >= 10))
    if "full-ft" in runs:
        f = float(np.mean([forgetting(m) for m in runs["full-ft"]]))
        rows.append(("full-ft Forgetting (paper) >= 5", f"{f:.1f}", f >= 5))
    return rows


def check_trace(root: Path, methods: list[str]) -> list[tuple[str, str, bool]]:
    """(property, measured value, holds) for the mini TRACE's properties; methods[0] is TRACE's LoRA."""
    runs = {m: load_runs(root, m) for m in methods}
    first = runs[methods[0]]
    zero_shot = first[0][0]
    n = len(zero_shot)
    need = math.ceil(0.75 * n)
    A = np.mean(first, axis=0)
    gains = np.array([A[j + 1, j] - A[0, j] for j in range(n)])
    f = float(np.mean([forgetting(m) for m in first]))
    rows = [
        (
            f"{methods[0]}: A[j,j] - A[0,j] >= 20 on >= {need} of {n} tasks",
            " ".join(f"{g:+.1f}" for g in gains),
            int((gains >= 20).sum()) >= need,
        ),
        (f"{methods[0]}: Forgetting (paper) >= 5", f"{f:.1f}", f >= 5),
    ]
    bar = zero_shot.mean() + 10
    for method, matrices in runs.items():
        op = float(np.mean([m[-1].mean() for m in matrices]))
        rows.append((f"{method}: OP > zero-shot OP + 10", f"{op:.1f} vs {bar:.1f}", op > bar))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "results",
        nargs="?",
        default="results/mini",
        type=Path,
        help="a mini grid's results folder (default results/mini)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        help=f"learning methods to check (default {' '.join(CLIP_METHODS)}; mini TRACE {' '.join(TRACE_METHODS)})",
    )
    args = parser.parse_args()
    trace = is_trace(args.results)
    methods = args.methods or (TRACE_METHODS if trace else CLIP_METHODS)
    rows = check_trace(args.results, methods) if trace else check(args.results, methods)
    width = max(len(name) for name, _, _ in rows)
    for name, value, holds in rows:
        print(f"{'ok  ' if holds else 'FAIL'} {name:<{width}}  {value}")
    return 0 if all(holds for _, _, holds in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
