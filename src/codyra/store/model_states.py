"""Model states of a run: theta_i = theta_0 + stored updates 1..i.

``rebuild`` is family-agnostic: it takes the function that builds theta_0 (a CLIP bundle in
:mod:`codyra.clip.model`, a causal LM in :mod:`codyra.llm.model`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from codyra.store.paths import UPDATE_FILE, task_dir
from codyra.store.updates import apply_update, load_update, task_summary

Bundle = TypeVar("Bundle")


def rebuild(cfg: dict, method: str, seed: int, upto: int, pretrained: Callable[[dict], Bundle]) -> Bundle:
    """theta_upto on the CPU in fp32: ``pretrained(cfg)`` (a bundle with ``.model``) plus the
    stored updates 1..upto applied in task order, so the result is bit-identical to the model
    the training job of task ``upto`` ended with."""
    dirs = require_updates(cfg, method, seed, upto)  # fail before building anything
    bundle = pretrained(cfg)
    for d in dirs:  # one at a time: full fine-tuning deltas are model-sized
        apply_update(bundle.model, load_update(d))
    return bundle


def require_updates(cfg: dict, method: str, seed: int, upto: int) -> list:
    """The task folders of updates 1..upto; a clear error, before any work, if one is missing or
    does not belong where it sits (:func:`codyra.store.updates.task_summary`)."""
    dirs = [task_dir(cfg, method, seed, k) for k in range(1, upto + 1)]
    missing = [str(d / UPDATE_FILE) for d in dirs if not (d / UPDATE_FILE).is_file()]
    if missing:
        raise FileNotFoundError(f"missing task update(s) {missing}: train those tasks first")
    for k in range(1, upto + 1):
        task_summary(cfg, method, seed, k)
    return dirs
