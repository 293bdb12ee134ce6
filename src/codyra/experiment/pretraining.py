"""A benchmark's own theta_0: the mini benchmarks pretrain theirs (`codyra pretrain-mini`).

The family says whether a config pretrains its own theta_0 and where it goes
(``Family.own_pretraining``); the pretraining itself is the mini benchmark's
(:mod:`codyra.mini`), which builds on the family's model and data.
"""

from __future__ import annotations

from pathlib import Path

from codyra.family import family_of
from codyra.store.io import require_writable


def own_pretraining(cfg: dict) -> str | None:
    """The theta_0 file a mini benchmark pretrains itself, else None."""
    return family_of(cfg).own_pretraining(cfg)


def pretrain_own(cfg: dict) -> None:
    """Write the mini benchmark's theta_0 (and, for the mini TRACE, its data and tokenizer)."""
    weights = own_pretraining(cfg)
    if weights is None:
        raise ValueError(
            "pretrain-mini applies to the mini benchmarks (data.kind: mini, or llm.mini) with model.pretrained null"
        )
    # the pretraining replaces its folder whole (the mini TRACE's, the mini BLIP's)
    require_writable(Path(weights).parent.parent)
    if cfg["data"]["kind"] == "mini" and cfg["model"]["family"] == "blip":  # the mini's scenes, a tiny BLIP
        from codyra.mini.blip.pretrain import pretrain_mini_blip

        pretrain_mini_blip(cfg, weights)
    elif cfg["data"]["kind"] == "mini":  # the mini CLIP's scenes (clip.weights.own_weights)
        from codyra.mini.clip.pretrain import pretrain_mini

        pretrain_mini(cfg, weights)
    else:  # the mini TRACE (llm.mini): its data, tokenizer and theta_0
        from codyra.mini.trace.pretrain import pretrain_mini_lm

        pretrain_mini_lm(cfg)
