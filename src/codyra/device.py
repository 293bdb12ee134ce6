"""Where a job computes: the device and its mixed precision (a low module every layer imports)."""

from __future__ import annotations

import functools
import logging
import os

import torch

log = logging.getLogger(__name__)


def pick_device(device: str | None = None) -> torch.device:
    picked = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if picked.type == "cpu":
        warn_if_cpu_unpinned()
    return picked


@functools.cache
def warn_if_cpu_unpinned() -> None:
    """Say so when torch ran a CPU kernel before `import codyra` pinned them (codyra/__init__.py):
    its numbers then depend on the machine's instruction set."""
    from codyra import CPU_NUMERICS

    pinned = CPU_NUMERICS["ATEN_CPU_CAPABILITY"].upper()
    used = torch.backends.cpu.get_cpu_capability()
    # only where the pin is asked for and the kernels are wider (a CPU without AVX2 runs narrower ones either way)
    if os.environ.get("ATEN_CPU_CAPABILITY", "").upper() == pinned and used.startswith("AVX512"):
        log.warning(
            "torch's CPU kernels use %s, not the %s that codyra pins: torch ran before codyra was imported, "
            "so CPU results will differ between machines; import codyra before running torch",
            used,
            pinned,
        )


def use_threads(threads: int) -> None:
    """Run torch's CPU kernels on ``threads`` threads, the config's count (a training summary
    records it as ``torch_threads``): on a CPU the count splits reductions differently, so it
    changes the numbers."""
    torch.set_num_threads(threads)


def portable_sqrt(x: torch.Tensor) -> torch.Tensor:
    """Square root (x > 0) that every CPU rounds alike: ``torch.sqrt`` of a CPU tensor calls MKL's
    vector math, whose result depends on the processor (scripts/cpu-numerics.py: one value in six
    differed from the correctly rounded root, differently on an Intel, an AMD and an emulated CPU),
    while ``rsqrt`` is torch's own kernel."""
    return x * torch.rsqrt(x)


def autocast(device: torch.device, precision: str):
    """bf16 autocast on a GPU when precision is auto/bf16; a no-op context otherwise."""
    use_bf16 = device.type == "cuda" and precision in ("auto", "bf16")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)
