"""codyra: continual-learning experiments with rank-selective LoRA (CoDyRA).

Kept import-light on purpose: every Snakemake job process pays for what this imports.
"""

import os

__version__ = "0.1.0"

# CPU numerics pinned, set before torch runs any kernel, so that every x86-64 machine computes the
# same CPU numbers (the minis' theta_0 and everything trained on a CPU):
# - ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA: torch's own vectorised kernels and oneDNN's use AVX2
#   code (unpinned they take AVX-512 where a CPU has it, and round differently);
# - MKL_CBWR=COMPATIBLE: MKL's BLAS and vector math take the one code path that MKL runs alike on
#   Intel and AMD processors. Its AVX2 branch is not enough: MKL dispatches by vendor, and the same
#   matrix products differed between an Intel and an AMD CPU under MKL_CBWR=AVX2 (measured with
#   scripts/cpu-numerics.py under QEMU's Intel and AMD CPU models; benchmarks/cpu_pin_cost.py
#   measures what the pin costs).
# Set a variable yourself to override it (native kernels: ATEN_CPU_CAPABILITY=avx512 MKL_CBWR=AUTO
# ONEDNN_MAX_CPU_ISA=ALL). GPU kernels are unaffected.
CPU_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
for _name, _value in CPU_NUMERICS.items():
    os.environ.setdefault(_name, _value)
