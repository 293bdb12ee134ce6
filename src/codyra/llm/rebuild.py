"""theta_i of an LM run: theta_0 with the stored updates of tasks 1..i merged.

Apart from :mod:`codyra.llm.model` because rebuilding reads the method registry: the mini
TRACE's pretraining loads models too, and editing a method must not change its code version."""

from __future__ import annotations

from codyra.llm.model import LMBundle, pretrained_lm
from codyra.store.model_states import rebuild


def rebuild_lm(cfg: dict, method: str, seed: int, upto: int) -> LMBundle:
    """theta_upto (fp32, CPU): theta_0 plus the stored updates of tasks 1..upto."""
    return rebuild(cfg, method, seed, upto, pretrained_lm)
