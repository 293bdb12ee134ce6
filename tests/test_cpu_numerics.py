"""`import codyra` pins torch's CPU numerics (AVX2 kernels, MKL's compatible branch), so CPU numbers
are the same on every x86-64 machine; a process where torch ran before that import is told so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_PINS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in CPU_PINS}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env}, check=True
    )


def _cpu_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return f" {flag}" in f.read()
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _cpu_has("avx2"), reason="the pin names AVX2: this CPU has none")
needs_avx512 = pytest.mark.skipif(not _cpu_has("avx512f"), reason="without AVX-512, unpinned kernels are AVX2 too")

CAPABILITY = (
    "import codyra, torch; from codyra.device import pick_device; pick_device('cpu'); "
    "print(torch.backends.cpu.get_cpu_capability())"
)


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


# --- the same numbers on every machine: golden fingerprints ----------------------------------
# Recorded with the locked environment (constraints.txt) by
#   python scripts/cpu-numerics.py ops --out tests/golden/cpu-ops.json
#   python scripts/cpu-numerics.py pipeline --out tests/golden/cpu-pipeline.json
# and checked here on this machine and, where QEMU's user-mode emulator is installed (CI installs
# it), on an emulated Intel (Haswell) and AMD (EPYC-Rome) CPU: other vendors and instruction sets
# than most hosts'. Regenerate them only for a deliberate change of the numerics (a new torch, a
# new pin), and rerun the grids whose numbers the docs quote.

GOLDEN = ROOT / "tests" / "golden"
SCRIPT = ROOT / "scripts" / "cpu-numerics.py"
EMULATED_CPUS = ("Haswell", "EPYC-Rome")
QEMU = shutil.which("qemu-x86_64")
needs_qemu = pytest.mark.skipif(
    QEMU is None and os.environ.get("CODYRA_QEMU_TESTS") != "1",
    reason=(
        "QEMU's user-mode emulator is not installed (apt-get install qemu-user); CI runs these with CODYRA_QEMU_TESTS=1"
    ),
)


def _fingerprints(kind: str, *prefix: str, out: Path) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in CPU_PINS}
    cmd = [*prefix, sys.executable, str(SCRIPT), kind, "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=environ, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def _golden(kind: str) -> dict:
    return json.loads((GOLDEN / f"cpu-{kind}.json").read_text())


def _differences(golden: dict, measured: dict) -> list[str]:
    keys = [k for k in golden if k != "environment" and "(avoided)" not in k]
    return [f"{k}: golden {golden[k]}, here {measured.get(k)}" for k in keys if measured.get(k) != golden[k]]


def test_the_environment_is_the_one_the_golden_numbers_were_recorded_with():
    from importlib.metadata import version

    recorded = _golden("ops")["environment"]
    here = {pkg: version(pkg) for pkg in ("torch", "numpy", "open_clip_torch", "transformers", "tokenizers")}
    differing = {pkg: (recorded[pkg], v) for pkg, v in here.items() if recorded[pkg] != v}
    assert not differing, (
        f"golden CPU numbers were recorded with other versions (recorded, here): {differing}; "
        "install with `pip install -c constraints.txt ...`"
    )


@pytest.mark.slow
def test_the_kernels_compute_the_golden_numbers(tmp_path):
    assert not _differences(_golden("ops"), _fingerprints("ops", out=tmp_path / "ops.json"))


@pytest.mark.slow
def test_a_tiny_pretraining_and_training_compute_the_golden_numbers(tmp_path):
    """theta_0 of both minis, every task update of LoRA, CoDyRA and full fine-tuning, the cells."""
    assert not _differences(_golden("pipeline"), _fingerprints("pipeline", out=tmp_path / "pipeline.json"))


@pytest.mark.slow
@needs_qemu
@pytest.mark.parametrize("cpu", EMULATED_CPUS)
def test_another_vendors_cpu_computes_the_golden_kernel_numbers(cpu, tmp_path):
    assert QEMU, "CODYRA_QEMU_TESTS=1 but qemu-x86_64 is not installed (apt-get install qemu-user)"
    assert not _differences(_golden("ops"), _fingerprints("ops", QEMU, "-cpu", cpu, out=tmp_path / "ops.json"))
