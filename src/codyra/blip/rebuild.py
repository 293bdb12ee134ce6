"""theta_i of a BLIP run: theta_0 with the stored updates of tasks 1..i merged.

Apart from :mod:`codyra.blip.model` because rebuilding reads the method registry."""

from __future__ import annotations

from codyra.blip.model import BlipBundle, pretrained_blip
from codyra.store.model_states import rebuild


def rebuild_blip(cfg: dict, method: str, seed: int, upto: int) -> BlipBundle:
    return rebuild(cfg, method, seed, upto, pretrained_blip)
