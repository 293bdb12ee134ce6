"""Held-out tasks (config key ``heldout_tasks``): how theta_i does on data no task trains on.

After each task i of a (method, seed) run, theta_i is evaluated on every held-out task over
that task's own classes and written to
``results/{benchmark}/{method}/seed{seed}/heldout/H_{i}_{name}.json``. As for row 0 of the A
matrix, theta_0 is evaluated once per benchmark (``results/{benchmark}/pretrained/heldout/``)
and copied into each run, as is every i of a method that never trains.
"""

from __future__ import annotations

import logging
import time

from codyra import __version__
from codyra.clip.evaluate import class_hits
from codyra.clip.model import pretrained_clip
from codyra.clip.rebuild import rebuild_clip
from codyra.clip.streams import build_heldout_tasks
from codyra.device import pick_device, use_threads
from codyra.evaluation.evaluate import row_of
from codyra.family import family_of
from codyra.methods.base import Row
from codyra.store.io import read_json, require_writable, write_json
from codyra.store.model_states import for_inference, require_updates
from codyra.store.paths import PRETRAINED, heldout_path, row0_heldout_path

log = logging.getLogger(__name__)


def _heldout_row(cfg: dict, method: str, seed: int | None, i: int) -> Row:
    """The held-out row's method resolved (none for the pretrained model), once the request is sound."""
    if not cfg["heldout_tasks"]:
        raise ValueError(
            "config key heldout_tasks is empty: list the tasks to hold out, e.g. heldout_tasks: [shape, colour, count]"
        )
    if not family_of(cfg).has_heldout_tasks:
        raise ValueError("held-out evaluation applies to CLIP benchmarks (model.family: clip)")
    n = len(cfg["tasks"])
    if not 0 <= i <= n:
        raise ValueError(f"held-out row i = {i} is outside the run: i must be in 0..{n}")
    if method == PRETRAINED and i != 0:
        raise ValueError("the pretrained model only has row i = 0")
    return row_of(cfg, method, None if method == PRETRAINED else seed, i, ())  # theta_0 has no seed


def evaluate_heldout(cfg: dict, method: str, seed: int | None, i: int, *, device=None) -> list[dict]:
    """Held-out accuracies of theta_i of (method, seed), one file per held-out task (method
    ``pretrained``: theta_0's shared files). Returns the written records in config order."""
    row = _heldout_row(cfg, method, seed, i)
    if method == PRETRAINED:
        paths = [row0_heldout_path(cfg, name) for name in cfg["heldout_tasks"]]
    else:
        paths = [heldout_path(cfg, method, seed, i, name) for name in cfg["heldout_tasks"]]
    for folder in {p.parent for p in paths}:
        require_writable(folder)
    if method == PRETRAINED:
        records = _computed(cfg, row, device)
    elif i == 0 or not row.kind.trains:
        records = [
            {**r, "method": method, "seed": seed, "i": i, "copied_from": str(p)} for r, p in _shared_row0(cfg, device)
        ]
    else:
        require_updates(cfg, method, seed, i)
        records = _computed(cfg, row, device)
    for record, path in zip(records, paths, strict=True):
        write_json(path, record)
        log.info("held-out %s after task %d: %.2f (%s)", record["task"], i, record["accuracy"], path)
    return records


def _shared_row0(cfg: dict, device) -> list[tuple[dict, str]]:
    paths = [row0_heldout_path(cfg, name) for name in cfg["heldout_tasks"]]
    if not all(p.is_file() for p in paths):
        evaluate_heldout(cfg, PRETRAINED, None, 0, device=device)
    return [(read_json(p), p) for p in paths]


def _computed(cfg: dict, row: Row, device) -> list[dict]:
    use_threads(cfg["eval"]["threads"])
    method, seed, i = row.method, row.seed, row.i
    bundle = (
        pretrained_clip(cfg)
        if row.kind is None
        else for_inference(cfg, method, seed, i, rebuild_clip(cfg, method, seed, i), row.kind)
    )
    device = pick_device(device)
    records = []
    for task in build_heldout_tasks(cfg, bundle.image):
        started = time.time()
        hits = class_hits(bundle, task, [task], cfg, device)
        records.append(
            {
                "accuracy": hits.accuracy,
                "benchmark": cfg["benchmark"],
                "method": method,
                "seed": seed,
                "i": i,
                "task": task.name,
                **hits.fields(),
                "heldout": True,
                "seconds": round(time.time() - started, 3),
                "codyra_version": __version__,
            }
        )
    return records
