"""Where a job computes: the device and its mixed precision (a low module every layer imports)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading

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


@contextlib.contextmanager
def autocast(device: torch.device, precision: str):
    """The job's precision (``train.precision`` / ``eval.precision``) for the code inside: bf16
    autocast on a GPU for auto/bf16; TF32 matmuls and convolutions on a GPU for tf32
    (:func:`precision_scope`); plain fp32 otherwise. The CPU always computes fp32."""
    use_bf16 = device.type == "cuda" and precision in ("auto", "bf16")
    with precision_scope(device, precision), torch.autocast(device.type, torch.bfloat16, enabled=use_bf16):
        yield


def fuses_adapters(device: torch.device, precision: str) -> bool:
    """Whether training runs the fused adapter forward (codyra.adapters.attach.fuse_adapters): only
    where the precision already departs from fp32, so an fp32 run keeps the released code's numbers."""
    return device.type == "cuda" and precision != "fp32"


# torch's TF32 switches are process-wide, and jobs run as threads of one process (Snakemake's local
# mode): a thread's switch would reach every other thread's matmuls. The scopes of all threads are
# tracked here, and threads wanting different settings never hold scopes at the same time.
_tf32_lock = threading.Condition()
_tf32_stacks: dict[int, list[bool]] = {}  # thread id -> its open scopes' settings, innermost last
_tf32_saved: list[tuple[bool, bool]] = []  # torch's settings before the first open scope


def _apply_tf32(wanted: bool) -> None:
    """TF32 on for matmuls and convolutions, or torch's settings as they were before any scope."""
    matmul, conv = (True, True) if wanted else _tf32_saved[-1]
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, conv


def _tf32_conflict(me: int, wanted: bool) -> bool:
    """Whether another thread holds a scope while some open scope (its or ours) wants otherwise."""
    others = [s for tid, stack in _tf32_stacks.items() if tid != me for s in stack]
    return bool(others) and set(others + _tf32_stacks.get(me, []) + [wanted]) != {wanted}


@contextlib.contextmanager
def precision_scope(device: torch.device, precision: str):
    """TF32 matmuls and convolutions (``torch.backends.cuda.matmul.allow_tf32``,
    ``torch.backends.cudnn.allow_tf32``) on a GPU for precision tf32, torch's own settings for any
    other (fp32: TF32 off for matmuls, cuDNN's default for convolutions, as the released code ran);
    restored when the last scope closes. Open it around everything that should compute so: the
    backward pass too (the training loop opens one around all its steps). A thread whose first
    scope wants other settings than another thread's open scopes waits for them to close; a nested
    scope that would have to change the settings under another thread raises. On the CPU: nothing
    (TF32 is a GPU format; fp32 there)."""
    if device.type != "cuda":
        yield
        return
    wanted, me = precision == "tf32", threading.get_ident()
    with _tf32_lock:
        if me in _tf32_stacks and _tf32_conflict(me, wanted):
            raise RuntimeError(
                f"precision {precision!r} inside another precision's scope while another thread computes: "
                "jobs that run as threads of one process share torch's TF32 switch; give train.precision and "
                "eval.precision the same tf32-or-not choice, or run the jobs as separate processes"
            )
        _tf32_lock.wait_for(lambda: not _tf32_conflict(me, wanted))
        if not _tf32_stacks:
            _tf32_saved.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
        _tf32_stacks.setdefault(me, []).append(wanted)
        _apply_tf32(wanted)
    try:
        yield
    finally:
        with _tf32_lock:
            stack = _tf32_stacks[me]
            stack.pop()
            if not stack:
                del _tf32_stacks[me]
            if _tf32_stacks:  # the innermost scope left open decides (other threads' scopes all agree)
                _apply_tf32(stack[-1] if stack else next(iter(_tf32_stacks.values()))[-1])
            else:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = _tf32_saved.pop()
            _tf32_lock.notify_all()
