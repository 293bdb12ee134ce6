"""Where a CLIP's theta_0 comes from, and the mini benchmark's own (a CLIP or a BLIP). Light: the
workflow reads it on every start."""

from __future__ import annotations

from codyra.store.paths import MINI_PRETRAINED


def own_weights(cfg: dict) -> str | None:
    """The theta_0 file the mini benchmark pretrains itself (`codyra pretrain-mini`), else None."""
    if cfg["data"]["kind"] == "mini" and cfg["model"]["pretrained"] is None:
        return MINI_PRETRAINED.format(results=cfg["results"], benchmark=cfg["benchmark"])
    return None


def pretrained_weights(cfg: dict) -> str | None:
    """``model.pretrained`` (an open_clip tag or a safetensors file), else the mini benchmark's own."""
    return cfg["model"]["pretrained"] or own_weights(cfg)
