"""A benchmark's own theta_0: the mini benchmarks pretrain theirs (`codyra pretrain-mini`)."""

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
        raise ValueError("pretrain-mini applies to the mini benchmarks (data.kind: mini, or llm.mini) with model.pretrained null")
    require_writable(Path(weights).parent.parent)  # the pretraining replaces its folder (the mini TRACE's) whole
    family_of(cfg).pretrain_own(cfg)
