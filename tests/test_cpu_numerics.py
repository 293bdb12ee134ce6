"""`import codyra` pins torch's CPU kernels to AVX2, so CPU numbers are the same on every x86-64
machine; a process where torch ran before that import is told so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env}, check=True)


def _cpu_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return f" {flag}" in f.read()
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _cpu_has("avx2"), reason="the pin names AVX2: this CPU has none")
needs_avx512 = pytest.mark.skipif(not _cpu_has("avx512f"), reason="without AVX-512, unpinned kernels are AVX2 too")

CAPABILITY = "import codyra, torch; from codyra.device import pick_device; pick_device('cpu'); print(torch.backends.cpu.get_cpu_capability())"


def test_importing_codyra_pins_the_cpu_kernels_to_avx2_without_a_warning():
    done = _python(CAPABILITY)
    assert done.stdout.strip() == "AVX2"
    assert "not the AVX2" not in done.stderr


@needs_avx512
def test_a_variable_the_user_set_wins_over_the_pin():
    done = _python(CAPABILITY, ATEN_CPU_CAPABILITY="avx512")
    assert done.stdout.strip() == "AVX512" and "not the AVX2" not in done.stderr


@needs_avx512
def test_torch_running_before_codyra_is_named_as_unpinned():
    done = _python("import torch; torch.ones(3) + 1; from codyra.device import pick_device; pick_device('cpu')")
    assert "use AVX512, not the AVX2 that codyra pins" in done.stderr
    assert "import codyra before running torch" in done.stderr
