"""theta_i of an LM run: theta_0 with the stored updates of tasks 1..i merged.

Apart from :mod:`codyra.llm.model` because rebuilding reads the method registry: the mini
TRACE's pretraining loads models too, and editing a method must not change its code version."""

from __future__ import annotations

import torch

from codyra.llm.model import LMBundle, pretrained_lm
from codyra.store.model_states import rebuild, rebuild_as


def rebuild_lm(cfg: dict, method: str, seed: int, upto: int) -> LMBundle:
    """theta_upto (fp32, CPU): theta_0 plus the stored updates of tasks 1..upto."""
    return rebuild(cfg, method, seed, upto, pretrained_lm)


def rebuild_lm_as(cfg: dict, method: str, seed: int, upto: int, device, dtype: torch.dtype) -> LMBundle:
    """theta_upto on ``device`` in ``dtype`` (a row's model: bf16 on a GPU), equal to ``rebuild_lm`` cast to
    ``dtype``, loaded in the checkpoint's dtype rather than through an fp32 copy (``rebuild_as``)."""
    return rebuild_as(cfg, method, seed, upto, pretrained_lm, device, dtype)
