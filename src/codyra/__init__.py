"""codyra: continual-learning experiments with rank-selective LoRA (CoDyRA).

Kept import-light on purpose: every Snakemake job process pays for what this imports.
"""

import os

__version__ = "0.1.0"

# CPU kernels pinned to AVX2 (ATen's vectorised kernels, MKL's BLAS, oneDNN), set before torch
# runs any: unpinned, torch takes AVX-512 paths where a machine has them, so theta_0 of the minis
# and every number trained on a CPU differ between machines (three machines gave three mini
# theta_0s; pinned, this one reproduced an AVX2 machine's bit for bit). Set a variable yourself to
# override it (native kernels: ATEN_CPU_CAPABILITY=avx512 MKL_CBWR=AUTO ONEDNN_MAX_CPU_ISA=ALL).
# GPU kernels are unaffected.
CPU_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
for _name, _value in CPU_NUMERICS.items():
    os.environ.setdefault(_name, _value)
