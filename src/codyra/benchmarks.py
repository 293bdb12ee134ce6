"""A benchmark's own theta_0: the mini benchmarks pretrain theirs (`codyra pretrain-mini`)."""

from __future__ import annotations

from codyra.family import family_of


def own_pretraining(cfg: dict) -> str | None:
    """The theta_0 file a mini benchmark pretrains itself, else None."""
    return family_of(cfg).own_pretraining(cfg)


def pretrain_own(cfg: dict) -> None:
    """Write the mini benchmark's theta_0 (and, for the mini TRACE, its data and tokenizer)."""
    if own_pretraining(cfg) is None:
        raise ValueError("pretrain-mini applies to the mini benchmarks (data.kind: mini, or llm.mini) with model.pretrained null")
    family_of(cfg).pretrain_own(cfg)
