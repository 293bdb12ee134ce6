"""What every benchmark's JSON records beside its figures: the machine, its load, when, and the
libraries whose versions set the numbers; written atomically under ``results/benchmarks/``."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what ``platform`` knows of it."""
    try:
        with open("/proc/cpuinfo") as info:
            names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def slurm_client() -> dict:
    """Whether SLURM's client is installed and whether its controller answers (``scontrol ping``;
    None without a client). Every Snakemake start imports the installed executor plugins, and the
    SLURM plugin's import asks ``scontrol show config`` for a default, which waits for its timeout
    (about 9 s) where the client is installed but no controller answers: part of the seconds of
    any benchmark that starts Snakemake on such a machine."""
    installed = shutil.which("scontrol") is not None
    answers = None
    if installed:
        try:
            done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30, check=False)
            answers = done.returncode == 0 and " is UP" in done.stdout
        except subprocess.TimeoutExpired:
            answers = False
    return {"slurm_client_installed": installed, "slurm_controller_answers": answers}


def write_record(out: Path, figures: dict, load_before: float, libraries: dict[str, str]) -> dict:
    """``figures`` with the run's facts added, written as JSON to ``out``; returns the record."""
    from codyra.store.io import write_json

    record = {
        **figures,
        **libraries,
        "loadavg_1min": [load_before, os.getloadavg()[0]],
        "cpu_count": os.cpu_count(),
        "machine": cpu_model(),
        "host": platform.node(),
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, record)
    return record
