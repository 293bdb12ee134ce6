#!/usr/bin/env python
"""Compare two results folders cell by cell and update by update (e.g. before and after a refactor).

Cells (``cells/A_*.json``, ``heldout/H_*.json``): every field equal except the run-specific ones
(``seconds``, ``codyra_version``, ``settings``, ``copied_from``). Tensors (``update.safetensors``,
``method_state.safetensors``, a mini benchmark's ``pretrain/model.safetensors``): same names,
dtypes, shapes and bitwise-equal values. Predictions (``*.predictions.jsonl``): equal text.
Logs, MLflow stores, histories and checkpoints are not compared. Prints each difference and a
count per kind; exit status 1 when anything differs or a file exists on one side only.

Usage: python scripts/compare-results.py results_before/ results_after/
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

IGNORED_FIELDS = {"seconds", "codyra_version", "settings", "copied_from"}
SKIPPED_PARTS = {"logs", "mlartifacts", "mlruns"}


def kind_of(path: Path) -> str | None:
    if SKIPPED_PARTS & set(path.parts) or any(p.startswith((".", "checkpoint")) for p in path.parts):
        return None
    if path.suffix == ".json" and path.parent.name in ("cells", "heldout"):
        return "cell"
    if path.name in ("update.safetensors", "method_state.safetensors") or (
        path.parent.name == "pretrain" and path.suffix == ".safetensors"
    ):
        return "tensors"
    if path.name.endswith(".predictions.jsonl"):
        return "predictions"
    return None


def files(root: Path) -> dict[Path, str]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            rel = path.relative_to(root)
            kind = kind_of(rel)
            if kind:
                out[rel] = kind
    return out


def compare_cell(a: Path, b: Path) -> list[str]:
    x, y = json.loads(a.read_text()), json.loads(b.read_text())
    keys = (set(x) | set(y)) - IGNORED_FIELDS
    return [f"{k}: {x.get(k)!r} != {y.get(k)!r}" for k in sorted(keys) if x.get(k) != y.get(k)]


def compare_tensors(a: Path, b: Path) -> list[str]:
    import torch
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    problems = [f"tensor {k} only in {'first' if k in x else 'second'}" for k in sorted(set(x) ^ set(y))]
    for k in sorted(set(x) & set(y)):
        s, t = x[k], y[k]
        if s.dtype != t.dtype or s.shape != t.shape:
            problems.append(f"{k}: {s.dtype}{tuple(s.shape)} != {t.dtype}{tuple(t.shape)}")
        elif not torch.equal(s.view(-1).view(torch.uint8), t.view(-1).view(torch.uint8)):
            diff = (s.double() - t.double()).abs().max().item() if s.is_floating_point() else "n/a"
            problems.append(f"{k}: values differ (max abs difference {diff})")
    return problems


def compare_text(a: Path, b: Path) -> list[str]:
    x, y = a.read_text().splitlines(), b.read_text().splitlines()
    # strict=False: the common lines are compared here, a difference in length is reported below
    diffs = [n for n, (s, t) in enumerate(zip(x, y, strict=False), 1) if s != t]
    problems = [f"line {n} differs" for n in diffs[:3]] + (
        [f"... {len(diffs) - 3} more lines"] if len(diffs) > 3 else []
    )
    return problems + ([f"{len(x)} lines != {len(y)} lines"] if len(x) != len(y) else [])


COMPARE = {"cell": compare_cell, "tensors": compare_tensors, "predictions": compare_text}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    for root in (args.first, args.second):
        if not root.is_dir():
            parser.error(f"{root} is not a folder")
    first, second = files(args.first), files(args.second)
    counts: dict[str, list[int]] = {}
    failed = False
    for rel in sorted(set(first) | set(second)):
        kind = first.get(rel) or second.get(rel)
        tally = counts.setdefault(kind, [0, 0, 0])  # identical, different, one side only
        if rel not in first or rel not in second:
            print(f"only in {args.first if rel in first else args.second}: {rel}")
            tally[2] += 1
            failed = True
            continue
        problems = COMPARE[kind](args.first / rel, args.second / rel)
        tally[bool(problems)] += 1
        for p in problems:
            print(f"{rel}: {p}")
        failed |= bool(problems)
    for kind, (same, different, alone) in sorted(counts.items()):
        print(f"{kind}: {same} identical, {different} different, {alone} on one side only")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
