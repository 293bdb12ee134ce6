"""Optimizer parameter groups shared by methods and pretraining."""

from __future__ import annotations


def decay_groups(params, weight_decay: float) -> list[dict]:
    """AdamW groups: weight decay on matrices and embeddings (ndim >= 2), none on biases,
    norms and other vectors (the GPT-2 / nanoGPT convention)."""
    params = list(params)
    return [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay, "name": "matrices"},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0, "name": "vectors"},
    ]
