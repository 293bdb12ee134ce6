"""Model states of a run: theta_0 and theta_i = theta_0 + stored updates 1..i.

``rebuild`` is family-agnostic: it takes the function that builds theta_0 (a CLIP bundle
here, a causal LM in ``codyra.llm.model``). open_clip is imported only when a CLIP is
built, so causal-LM jobs do not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import torch

from codyra.benchmarks import pretrained_weights
from codyra.paths import UPDATE_FILE, task_dir
from codyra.updates import apply_update, load_update

if TYPE_CHECKING:
    from codyra.clip.model import ClipBundle

Bundle = TypeVar("Bundle")


def pretrained_clip(cfg: dict) -> ClipBundle:
    from codyra.clip.model import create_clip

    m = cfg["model"]
    return create_clip(m["name"], pretrained_weights(cfg), cache_dir=m["cache_dir"])


def rebuild(cfg: dict, method: str, seed: int, upto: int, pretrained: Callable[[dict], Bundle]) -> Bundle:
    """theta_upto on the CPU in fp32: ``pretrained(cfg)`` (a bundle with ``.model``) plus the
    stored updates 1..upto applied in task order, so the result is bit-identical to the model
    the training job of task ``upto`` ended with."""
    dirs = require_updates(cfg, method, seed, upto)  # fail before building anything
    bundle = pretrained(cfg)
    for d in dirs:  # one at a time: full fine-tuning deltas are model-sized
        apply_update(bundle.model, load_update(d))
    return bundle


def rebuild_clip(cfg: dict, method: str, seed: int, upto: int) -> ClipBundle:
    return rebuild(cfg, method, seed, upto, pretrained_clip)


def require_updates(cfg: dict, method: str, seed: int, upto: int) -> list:
    """The task folders of updates 1..upto; a clear error, before any work, if one is missing."""
    dirs = [task_dir(cfg, method, seed, k) for k in range(1, upto + 1)]
    missing = [str(d / UPDATE_FILE) for d in dirs if not (d / UPDATE_FILE).is_file()]
    if missing:
        raise FileNotFoundError(f"missing task update(s) {missing}: train those tasks first")
    return dirs


def pick_device(device: str | None = None) -> torch.device:
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def autocast(device: torch.device, precision: str):
    """bf16 autocast on a GPU when precision is auto/bf16; a no-op context otherwise."""
    use_bf16 = device.type == "cuda" and precision in ("auto", "bf16")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)
