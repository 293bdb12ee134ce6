"""Where a job computes: the device and its mixed precision (a low module every layer imports)."""

from __future__ import annotations

import torch


def pick_device(device: str | None = None) -> torch.device:
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def autocast(device: torch.device, precision: str):
    """bf16 autocast on a GPU when precision is auto/bf16; a no-op context otherwise."""
    use_bf16 = device.type == "cuda" and precision in ("auto", "bf16")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)
