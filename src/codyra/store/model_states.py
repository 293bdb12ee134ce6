"""Model states of a run: theta_i = theta_0 + stored updates 1..i.

``rebuild`` is family-agnostic: it takes the function that builds theta_0 (a CLIP bundle in
:mod:`codyra.clip.model`, a causal LM in :mod:`codyra.llm.model`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import torch

from codyra.store.paths import UPDATE_FILE, task_dir
from codyra.store.updates import (
    TaskUpdate,
    apply_update,
    check_entry,
    load_method_state,
    load_update,
    param_block,
    task_summary,
)

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


def rebuild_as(
    cfg: dict, method: str, seed: int, upto: int, pretrained: Callable[..., Bundle], device, dtype: torch.dtype
) -> Bundle:
    """theta_upto on ``device`` in ``dtype``, equal to ``rebuild(...)`` cast to ``dtype``, without an fp32
    copy of the model: ``pretrained(cfg, dtype=None)`` loads theta_0 in its checkpoint's own dtype (a 7B
    checkpoint in fp16: half of fp32), moved to ``device``, and :func:`merge_as` adds the updates."""
    dirs = require_updates(cfg, method, seed, upto)
    bundle = pretrained(cfg, dtype=None)
    merge_as(bundle.model.to(device), (load_update(d) for d in dirs), dtype)
    return bundle


@torch.no_grad()
def merge_as(model: torch.nn.Module, updates: Iterable[TaskUpdate], dtype: torch.dtype) -> None:
    """Add ``updates`` (in task order) to ``model`` and cast it to ``dtype``, each parameter an update changes
    summed in fp32 from its stored value (the additions :func:`apply_update` makes on an fp32 model) and
    rounded once, on the model's device; the deltas are computed on the CPU, as ``rebuild`` computes them."""
    params = dict(model.named_parameters())
    sums: dict[str, torch.Tensor] = {}
    for update in updates:  # one at a time: full fine-tuning deltas are model-sized
        for name, (param_name, rows, delta) in update.merge_order():
            check_entry(params, name, param_name, rows, delta)
            if param_name not in sums:
                sums[param_name] = params[param_name].data.float()
            block = param_block(sums[param_name], rows)
            block.copy_(block + delta.to(block.device))
    model.to(dtype=dtype)
    for param_name, total in sums.items():
        params[param_name].data = total.to(dtype)


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


def for_inference(cfg: dict, method: str, seed: int, upto: int, bundle: Bundle, cls, task: int | None = None) -> Bundle:
    """theta_upto as evaluated: the ``for_inference`` hook of ``cls`` (the method's class,
    :func:`codyra.methods.method_of`) gets the merged backbone and the stored states of tasks 1..upto
    (a method keeping modules beside the backbone attaches them); with ``task`` j, its ``for_task``
    hook (the model that answers task j's test set)."""
    states = [load_method_state(d) for d in require_updates(cfg, method, seed, upto)]
    bundle.model = cls.for_inference(bundle.model, states) if task is None else cls.for_task(bundle.model, states, task)
    return bundle
