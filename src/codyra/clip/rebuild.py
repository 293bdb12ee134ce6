"""theta_i of a CLIP run: theta_0 with the stored updates of tasks 1..i merged.

Apart from :mod:`codyra.clip.model` because rebuilding reads the method registry: the mini's
pretraining builds models too, and editing a method must not change its code version."""

from __future__ import annotations

from codyra.clip.model import ClipBundle, pretrained_clip
from codyra.store.model_states import rebuild


def rebuild_clip(cfg: dict, method: str, seed: int, upto: int) -> ClipBundle:
    return rebuild(cfg, method, seed, upto, pretrained_clip)
